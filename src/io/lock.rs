//! The recovery lock: at most one recovery (daemon action or standalone manual command) acts on
//! the host at a time.
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
            LockError::Held { .. } => ExitStatus::TempFail,
            LockError::Io { source, .. } => crate::exit::io_status(source),
        }
    }
}

impl RecoveryLock {
    /// Tries to take the lock in `dir` without waiting. `purpose` (e.g. `"iser-guard recover
    /// rocep2s0f0"`) is recorded for whoever is refused next.
    pub fn try_acquire(dir: &Path, purpose: &str) -> Result<RecoveryLock, LockError> {
        let path = dir.join(LOCK_FILE_NAME);
        let io_err = |source: std::io::Error| LockError::Io {
            path: path.clone(),
            source,
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(0o600)
            .open(&path)
            .map_err(io_err)?;
        let mut flock = match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
            Ok(l) => l,
            Err((mut file, Errno::EWOULDBLOCK)) => {
                let (pid, purpose) = read_holder(&mut file);
                return Err(LockError::Held { path, pid, purpose });
            }
            Err((_, errno)) => return Err(io_err(errno.into())),
        };
        let record = format!("{} {}\n", std::process::id(), one_line(purpose));
        flock.set_len(0).map_err(io_err)?;
        flock.seek(SeekFrom::Start(0)).map_err(io_err)?;
        flock.write_all(record.as_bytes()).map_err(io_err)?;
        flock.flush().map_err(io_err)?;
        Ok(RecoveryLock {
            _flock: flock,
            path,
        })
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
