//! Runs one external program (iscsiadm, devlink, rdma, modprobe) with a hard deadline.
//!
//! Owns: spawning, bounded capture of stdout/stderr, and killing a hung child *and everything it
//! started*. The child is put in its own process group, so on timeout one `killpg(SIGKILL)` also
//! takes down helpers it forked (iscsiadm can block for minutes on a dead iscsid socket; a
//! wrapper script would otherwise leave its `sleep` behind holding our pipes). The child is
//! always reaped (`wait`), so no zombie is left, whatever happens.
//!
//! Does not own: what the exit code means (each caller maps it to its own typed outcome).
//!
//! This is blocking code: the daemon calls it from `tokio::task::spawn_blocking`, the standalone
//! commands call it directly.

use std::ffi::OsString;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};

/// At most this many bytes of each of stdout and stderr are kept; the rest is read and dropped
/// (reading on keeps the child from blocking on a full pipe).
pub const DEFAULT_CAPTURE_LIMIT: usize = 256 * 1024;

/// A running child is checked for exit after 250 µs, then at doubling intervals up to 10 ms:
/// a quick command (devlink, modprobe) costs well under a millisecond of waiting, a long one
/// (a 1 s iscsiadm login) at most 10 ms, and neither costs measurable CPU.
const FIRST_POLL: Duration = Duration::from_micros(250);
const MAX_POLL: Duration = Duration::from_millis(10);

/// After a kill, how long the output readers may take to see end-of-file. A grandchild that
/// escaped our process group (setsid) could hold the pipes forever; we do not wait for it.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// One program invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program (an absolute path from the configuration).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Hard deadline; the whole process group is killed with SIGKILL when it passes.
    pub timeout: Duration,
    /// Bytes kept per output stream.
    pub capture_limit: usize,
}

impl Invocation {
    /// `program args…` with `timeout` and the default capture limit.
    pub fn new<I, S>(program: impl Into<PathBuf>, args: I, timeout: Duration) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Invocation {
            program: program.into(),
            args: args.into_iter().map(Into::into).collect(),
            timeout,
            capture_limit: DEFAULT_CAPTURE_LIMIT,
        }
    }

    /// The command line as a shell-like string, for logs and dry-run plans.
    pub fn display(&self) -> String {
        let mut s = self.program.display().to_string();
        for a in &self.args {
            s.push(' ');
            s.push_str(&a.to_string_lossy());
        }
        s
    }
}

/// How a finished child ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// It exited with this code.
    Code(i32),
    /// It was killed by this signal (not by us).
    Signal(i32),
}

/// What a child that ran to completion produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    /// How it ended.
    pub exit: Exit,
    /// Captured stdout (lossy UTF-8, at most the capture limit).
    pub stdout: String,
    /// Captured stderr (lossy UTF-8, at most the capture limit).
    pub stderr: String,
    /// True when either stream was longer than the capture limit.
    pub truncated: bool,
    /// Wall time from spawn to exit.
    pub took: Duration,
}

impl Output {
    /// True for exit code 0.
    pub fn success(&self) -> bool {
        self.exit == Exit::Code(0)
    }

    /// The last non-empty line of stderr (or stdout if stderr is empty), trimmed: the part of
    /// the output worth putting in an error message.
    pub fn last_words(&self) -> String {
        let pick = |s: &str| {
            s.lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .map(str::to_owned)
        };
        pick(&self.stderr)
            .or_else(|| pick(&self.stdout))
            .unwrap_or_default()
    }
}

/// Why a program could not be run to completion.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The program could not be started (missing, not executable, …).
    #[error("cannot run {program}: {source}; check the path in the configuration")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The program did not finish in time; it and its process group were killed and reaped.
    #[error(
        "{command} did not finish within {:.1} s and was killed{}",
        timeout.as_secs_f64(),
        if stderr.trim().is_empty() { String::new() } else { format!(" (stderr: {})", stderr.trim()) }
    )]
    Timeout {
        /// The command line.
        command: String,
        /// The deadline that passed.
        timeout: Duration,
        /// What it printed to stdout before being killed.
        stdout: String,
        /// What it printed to stderr before being killed.
        stderr: String,
    },
    /// Waiting for the child failed (should not happen; reported rather than ignored).
    #[error("waiting for {program} failed: {source}")]
    Wait {
        /// The program.
        program: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Runs programs. A trait so executors can be tested with a recording double; the real one is
/// [`SystemRunner`].
pub trait Runner: Send + Sync {
    /// Runs `inv` to completion or kills it at its deadline.
    fn run(&self, inv: &Invocation) -> Result<Output, RunError>;
}

/// The real [`Runner`]: spawns the program with an empty stdin, in its own process group.
#[derive(Debug, Clone, Default)]
pub struct SystemRunner;

impl Runner for SystemRunner {
    fn run(&self, inv: &Invocation) -> Result<Output, RunError> {
        run(inv)
    }
}

/// Spawns `cmd`, retrying briefly on ETXTBSY. exec() fails with "text file busy" while any
/// process still holds the program open for writing: a package upgrade replacing the tool,
/// or, in a multi-threaded process, another thread's fork() that inherited the descriptor
/// of a just-written script for the instant before its exec() closes it. Both pass within
/// milliseconds, and failing a recovery step on them would be wrong.
fn spawn_retrying_busy(cmd: &mut Command) -> std::io::Result<std::process::Child> {
    let mut delay = Duration::from_millis(5);
    for _ in 0..6 {
        match cmd.spawn() {
            Err(e) if e.kind() == std::io::ErrorKind::ExecutableFileBusy => {
                std::thread::sleep(delay);
                delay *= 2;
            }
            other => return other,
        }
    }
    cmd.spawn()
}

/// Spawns `inv`, captures its output, and enforces its deadline. See the module doc.
pub fn run(inv: &Invocation) -> Result<Output, RunError> {
    let start = Instant::now();
    let mut cmd = Command::new(&inv.program);
    cmd.args(&inv.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        // Own process group (pgid = child pid), so a timeout kills the whole tree.
        .process_group(0)
        // Predictable, untranslated messages: we match on some of them.
        .env("LC_ALL", "C");
    let mut child = spawn_retrying_busy(&mut cmd).map_err(|source| RunError::Spawn {
        program: inv.program.clone(),
        source,
    })?;
    let out_rx = child
        .stdout
        .take()
        .map(|s| spawn_reader(s, inv.capture_limit));
    let err_rx = child
        .stderr
        .take()
        .map(|s| spawn_reader(s, inv.capture_limit));

    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    let deadline = start + inv.timeout;
    let mut interval = FIRST_POLL;
    loop {
        // WNOWAIT: learn that it exited without reaping it. While the leader is an unreaped
        // zombie its pid (= our process-group id) cannot be reused, so the killpg below can
        // only ever hit what it started.
        let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) => {}
            Ok(_) => break,
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                kill_group(pid);
                let _ = child.wait();
                return Err(RunError::Wait {
                    program: inv.program.clone(),
                    source: e.into(),
                });
            }
        }
        let now = Instant::now();
        if now >= deadline {
            kill_group(pid);
            // Reap it: no zombie, whatever the readers do.
            let _ = child.wait();
            let (stdout, _) = collect(out_rx, DRAIN_GRACE);
            let (stderr, _) = collect(err_rx, DRAIN_GRACE);
            return Err(RunError::Timeout {
                command: inv.display(),
                timeout: inv.timeout,
                stdout,
                stderr,
            });
        }
        thread::sleep(interval.min(deadline - now));
        interval = (interval * 2).min(MAX_POLL);
    }
    let took = start.elapsed();
    // The leader has exited; anything it left running in its group (a helper holding our
    // pipes) must not outlive the command.
    kill_group(pid);
    let status = child.wait().map_err(|source| RunError::Wait {
        program: inv.program.clone(),
        source,
    })?;
    let (stdout, t1) = collect(out_rx, DRAIN_GRACE);
    let (stderr, t2) = collect(err_rx, DRAIN_GRACE);
    let exit = match (status.code(), status.signal()) {
        (Some(c), _) => Exit::Code(c),
        (None, Some(s)) => Exit::Signal(s),
        (None, None) => Exit::Code(-1),
    };
    Ok(Output {
        exit,
        stdout,
        stderr,
        truncated: t1 || t2,
        took,
    })
}

/// SIGKILL to the child's process group. ESRCH (already gone) is the normal case after exit.
fn kill_group(pid: nix::unistd::Pid) {
    let _ = nix::sys::signal::killpg(pid, nix::sys::signal::Signal::SIGKILL);
}

type Captured = (Vec<u8>, bool);

fn spawn_reader<R: Read + Send + 'static>(mut r: R, limit: usize) -> mpsc::Receiver<Captured> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let mut kept = Vec::new();
        let mut truncated = false;
        let mut buf = [0u8; 8192];
        loop {
            match r.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    let chunk = buf.get(..n).unwrap_or_default();
                    let room = limit.saturating_sub(kept.len());
                    if chunk.len() > room {
                        truncated = true;
                    }
                    kept.extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => break,
            }
        }
        let _ = tx.send((kept, truncated));
    });
    rx
}

fn collect(rx: Option<mpsc::Receiver<Captured>>, grace: Duration) -> (String, bool) {
    match rx.map(|rx| rx.recv_timeout(grace)) {
        Some(Ok((bytes, truncated))) => (String::from_utf8_lossy(&bytes).into_owned(), truncated),
        // No pipe, or a reader still blocked after the grace period: report what we know.
        _ => (String::new(), false),
    }
}

/// True when `path` names an existing regular file with an execute bit, i.e. something
/// [`run`] can plausibly start. Used to skip a method whose tool is not installed.
pub fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}
