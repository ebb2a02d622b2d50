//! The recovery lock: at most one recovery (daemon action or standalone manual command) acts on
//! the host at a time. And the daemon lock: held by the daemon for its whole life, so that a
//! daemon never starts while a standalone manual command holds the recovery lock, and a
//! manual command never runs standalone beside a daemon that is running but not answering.
//!
//! Owns one file, `<dir>/recovery.lock`, locked with `flock(LOCK_EX | LOCK_NB)`. The kernel
//! drops an flock when its holder exits, however it exits, so a crashed recovery never leaves a
//! stale lock behind. The holder writes `"<pid> <purpose>\n"` into the file, only so that a
//! refused second caller can say who holds it; the content is never trusted for the locking
//! itself.
//!
//! The file is never removed: unlinking a lock file races with a process that has just opened
//! it and would then lock an orphaned inode.

use crate::exit::ExitStatus;
use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

/// The lock file's name inside the lock directory.
pub const LOCK_FILE_NAME: &str = "recovery.lock";

/// The daemon lock's file name inside the state directory.
pub const DAEMON_LOCK_FILE_NAME: &str = "daemon.lock";

/// A held recovery lock; released when dropped (or when the process exits).
#[derive(Debug)]
pub struct RecoveryLock {
    // Held for its Drop (which unlocks); the file stays open as long as the lock is held.
    _flock: Flock<File>,
    path: PathBuf,
}

/// Why the lock could not be taken.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process holds it right now.
    #[error(
        "another recovery is running ({}); lock {path} is held. Wait for it to finish, or check \
         `iser-guard status`",
        match (pid, purpose.as_deref()) {
            (Some(p), Some(w)) if !w.is_empty() => format!("pid {p}: {w}"),
            (Some(p), _) => format!("pid {p}"),
            _ => "holder unknown".to_string(),
        }
    )]
    Held {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid as it wrote it, if readable.
        pid: Option<u32>,
        /// What the holder said it is doing.
        purpose: Option<String>,
    },
    /// A standalone manual recovery holds the recovery lock: the daemon does not start.
    #[error(
        "a manual recovery is running ({}; lock {path}); the daemon does not start beside it, \
         on the same device and journal. It starts once that command has finished: systemd \
         starts it again by itself 5 s after this exit, or run `systemctl start iser-guard` \
         then",
        holder(*pid, purpose.as_deref())
    )]
    ManualRecovery {
        /// The lock file.
        path: PathBuf,
        /// The holder's pid, if readable.
        pid: Option<u32>,
        /// What the holder said it is doing.
        purpose: Option<String>,
    },
    /// A daemon holds the daemon lock.
    #[error(
        "the iser-guard daemon is running ({}; lock {path}){}",
        holder(*pid, purpose.as_deref()),
        if *starting_daemon {
            "; a second daemon does not start"
        } else {
            " but does not answer on its control socket; a manual command does not run \
             beside it. Wait for it to answer (`iser-guard status`), or stop it (`systemctl \
             stop iser-guard`) and run the command again"
        }
    )]
    DaemonRunning {
        /// The lock file.
        path: PathBuf,
        /// The daemon's pid, if readable.
        pid: Option<u32>,
        /// What it wrote.
        purpose: Option<String>,
        /// The one refused is a daemon starting (else a manual command).
        starting_daemon: bool,
    },
    /// The lock file could not be opened or locked.
    #[error("cannot use lock file {path}: {source}; check that the directory exists and is writable by root")]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl LockError {
    /// The documented exit code ([`crate::exit`]): 75 (EX_TEMPFAIL) while another recovery
    /// holds the lock.
    pub fn status(&self) -> ExitStatus {
        match self {
            LockError::Held { .. }
            | LockError::ManualRecovery { .. }
            | LockError::DaemonRunning { .. } => ExitStatus::TempFail,
            LockError::Io { source, .. } => crate::exit::io_status(source),
        }
    }
}

fn holder(pid: Option<u32>, purpose: Option<&str>) -> String {
    match (pid, purpose) {
        (Some(p), Some(w)) if !w.is_empty() => format!("pid {p}: {w}"),
        (Some(p), _) => format!("pid {p}"),
        _ => "holder unknown".to_string(),
    }
}

/// Takes `file` in `dir` exclusively without waiting, recording `purpose`; `Err(Ok((pid,
/// purpose)))` when another process holds it.
#[allow(clippy::type_complexity)]
fn lock_file(
    dir: &Path,
    file: &str,
    purpose: &str,
) -> Result<Result<(Flock<File>, PathBuf), (PathBuf, Option<u32>, Option<String>)>, LockError> {
    let path = dir.join(file);
    let io_err = |source: std::io::Error| LockError::Io {
        path: path.clone(),
        source,
    };
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io_err)?;
    let mut flock = match Flock::lock(f, FlockArg::LockExclusiveNonblock) {
        Ok(l) => l,
        Err((mut f, Errno::EWOULDBLOCK)) => {
            let (pid, purpose) = read_holder(&mut f);
            return Ok(Err((path, pid, purpose)));
        }
        Err((_, errno)) => return Err(io_err(errno.into())),
    };
    let record = format!("{} {}\n", std::process::id(), one_line(purpose));
    flock.set_len(0).map_err(io_err)?;
    flock.seek(SeekFrom::Start(0)).map_err(io_err)?;
    flock.write_all(record.as_bytes()).map_err(io_err)?;
    flock.flush().map_err(io_err)?;
    Ok(Ok((flock, path)))
}

/// The daemon's lock, held for its whole life; released when dropped (or at exit).
#[derive(Debug)]
pub struct DaemonLock {
    _flock: Flock<File>,
}

impl DaemonLock {
    /// Takes the daemon lock in the state directory `dir`, then checks that no manual
    /// recovery holds the recovery lock: the daemon never starts beside one.
    pub fn acquire(dir: &Path) -> Result<DaemonLock, LockError> {
        let flock = match lock_file(dir, DAEMON_LOCK_FILE_NAME, "iser-guard daemon")? {
            Ok((flock, _)) => flock,
            Err((path, pid, purpose)) => {
                return Err(LockError::DaemonRunning {
                    path,
                    pid,
                    purpose,
                    starting_daemon: true,
                })
            }
        };
        match lock_file(dir, LOCK_FILE_NAME, "")? {
            Ok(_) => {}
            Err((path, pid, purpose)) => {
                return Err(LockError::ManualRecovery { path, pid, purpose })
            }
        }
        Ok(DaemonLock { _flock: flock })
    }

    /// For a manual command about to run standalone (it holds the recovery lock already):
    /// refuses when a daemon holds the daemon lock, i.e. runs without answering.
    pub fn refuse_if_running(dir: &Path) -> Result<(), LockError> {
        match lock_file(dir, DAEMON_LOCK_FILE_NAME, "")? {
            Ok(_) => Ok(()),
            Err((path, pid, purpose)) => Err(LockError::DaemonRunning {
                path,
                pid,
                purpose,
                starting_daemon: false,
            }),
        }
    }
}

impl RecoveryLock {
    /// Tries to take the lock in `dir` without waiting. `purpose` (e.g. `"iser-guard recover
    /// rocep2s0f0"`) is recorded for whoever is refused next.
    pub fn try_acquire(dir: &Path, purpose: &str) -> Result<RecoveryLock, LockError> {
        match lock_file(dir, LOCK_FILE_NAME, purpose)? {
            Ok((flock, path)) => Ok(RecoveryLock {
                _flock: flock,
                path,
            }),
            Err((path, pid, purpose)) => Err(LockError::Held { path, pid, purpose }),
        }
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// Reads `"<pid> <purpose>"`; anything unreadable or malformed is simply unknown.
fn read_holder(file: &mut File) -> (Option<u32>, Option<String>) {
    let mut s = String::new();
    // The holder may be between lock and write: an empty file is normal, not an error.
    if file.read_to_string(&mut s).is_err() {
        return (None, None);
    }
    let line = s.lines().next().unwrap_or("").trim();
    let (pid, rest) = line.split_once(' ').unwrap_or((line, ""));
    let pid = pid.parse().ok();
    let purpose = pid.and(Some(rest.trim().to_string()));
    (pid, purpose)
}

fn one_line(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .take(200)
        .collect()
}
