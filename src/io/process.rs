//! Runs one external program (iscsiadm, devlink, rdma, modprobe) with a hard deadline.
//!
//! Owns: spawning, bounded capture of stdout/stderr, and killing a hung child *and everything it
//! started*. The child is put in its own process group, so on timeout one `killpg(SIGKILL)` also
//! takes down helpers it forked (iscsiadm can block for minutes on a dead iscsid socket; a
//! wrapper script would otherwise leave its `sleep` behind holding our pipes). The child is
//! always reaped (`wait`), so no zombie is left, whatever happens.
//!
//! Never waited for past its deadline: a child that does not die within
//! [`Invocation::kill_grace`] of the SIGKILL is in the kernel, in uninterruptible sleep (a
//! `devlink` or `rdma link delete` blocked in `ib_unregister_device`, which waits for every
//! user of the RDMA device to let go), where no signal reaches it. Waiting for it would block
//! the caller for as long as the kernel does, possibly forever. It is handed to a reaper
//! thread instead ([`StuckChild`]: the caller can ask whether and how it ended) and the call
//! returns [`RunError::Stuck`].
//!
//! The calling thread does all the waiting in one `poll(2)` on the two output pipes and a
//! pidfd of the child: it wakes when the child writes, closes its output or exits, or when
//! the deadline passes, and for nothing else. No reader threads are started and nothing is
//! polled on a timer (the idle daemon runs iscsiadm every `poll.iscsi`: each run used to
//! start two reader threads and check `waitid` at up to 10 ms intervals).
//!
//! Does not own: what the exit code means (each caller maps it to its own typed outcome).
//!
//! This is blocking code: the daemon calls it from `tokio::task::spawn_blocking`, the standalone
//! commands call it directly.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::wait::{waitid, Id, WaitPidFlag, WaitStatus};

/// At most this many bytes of each of stdout and stderr are kept; the rest is read and dropped
/// (reading on keeps the child from blocking on a full pipe).
pub const DEFAULT_CAPTURE_LIMIT: usize = 256 * 1024;

/// Only where the kernel gives no pidfd: a running child is checked for exit after 250 µs,
/// then at doubling intervals up to 10 ms (a quick command costs well under a millisecond of
/// waiting, a long one at most 10 ms). With a pidfd the thread sleeps until the child exits
/// or writes, and wakes for nothing else.
const FIRST_POLL: Duration = Duration::from_micros(250);
const MAX_POLL: Duration = Duration::from_millis(10);

/// After the deadline's SIGKILL, how long the child may take to die before it is taken for
/// stuck in the kernel ([`RunError::Stuck`]). A killed process normally exits within
/// milliseconds; one in uninterruptible sleep does not exit at all.
pub const KILL_GRACE: Duration = Duration::from_secs(2);

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
    /// After the deadline's SIGKILL, how long to wait for the child to die before it is left
    /// to a reaper ([`RunError::Stuck`]).
    pub kill_grace: Duration,
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
            kill_grace: KILL_GRACE,
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
    /// The program did not finish in time and did not die when killed: it is blocked in the
    /// kernel (uninterruptible sleep). It was left to a reaper thread, never waited for.
    #[error(
        "{command} did not finish within {:.1} s and did not die when killed ({}): it is \
         blocked in the kernel; it was left running and is reaped when the kernel lets it go",
        timeout.as_secs_f64(),
        child.describe()
    )]
    Stuck {
        /// The command line.
        command: String,
        /// The deadline that passed.
        timeout: Duration,
        /// What it printed to stdout before the deadline.
        stdout: String,
        /// What it printed to stderr before the deadline.
        stderr: String,
        /// The child, as the reaper holds it.
        child: StuckChild,
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
    run_with(inv, true, kill_group)
}

/// [`run`]; `use_pidfd = false` forces the waitid fallback, `kill` replaces the group kill
/// (tests: a kill that does nothing plays a child the kernel does not let die).
fn run_with(
    inv: &Invocation,
    use_pidfd: bool,
    kill: fn(nix::unistd::Pid),
) -> Result<Output, RunError> {
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
    let mut streams = [
        PipeCapture::new(child.stdout.take().map(OwnedFd::from)),
        PipeCapture::new(child.stderr.take().map(OwnedFd::from)),
    ];
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    // Readable once the child has exited, while it is still an unreaped zombie: while the
    // leader is unreaped its pid (= our process-group id) cannot be reused, so the killpg
    // below can only ever hit what it started. Without it (a kernel before 5.3, a seccomp
    // filter) the exit is checked with waitid(WNOWAIT) between bounded waits.
    let pidfd = if use_pidfd { pidfd_open(pid) } else { None };
    let deadline = start + inv.timeout;
    let mut backoff = FIRST_POLL;
    let wait_error = |e: std::io::Error, child: std::process::Child| {
        // Killed and given its grace; a child that does not die is left to the reaper.
        let _ = kill_and_reap(child, pid, pidfd.as_ref(), inv.kill_grace, kill);
        RunError::Wait {
            program: inv.program.clone(),
            source: e,
        }
    };
    loop {
        if pidfd.is_none() {
            match exited_nowait(pid) {
                Ok(true) => break,
                Ok(false) => {}
                Err(e) => return Err(wait_error(e, child)),
            }
        }
        let now = Instant::now();
        if now >= deadline {
            let reaped = kill_and_reap(child, pid, pidfd.as_ref(), inv.kill_grace, kill);
            drain(
                &mut streams,
                inv.capture_limit,
                Instant::now() + DRAIN_GRACE,
            );
            let [stdout, stderr] = streams.map(PipeCapture::text);
            return Err(match reaped {
                Ok(()) => RunError::Timeout {
                    command: inv.display(),
                    timeout: inv.timeout,
                    stdout: stdout.0,
                    stderr: stderr.0,
                },
                Err(stuck) => RunError::Stuck {
                    command: inv.display(),
                    timeout: inv.timeout,
                    stdout: stdout.0,
                    stderr: stderr.0,
                    child: stuck,
                },
            });
        }
        let limit = match pidfd {
            Some(_) => deadline - now,
            None => {
                let b = backoff;
                backoff = (backoff * 2).min(MAX_POLL);
                b.min(deadline - now)
            }
        };
        match wait_any(&mut streams, pidfd.as_ref(), inv.capture_limit, limit) {
            Ok(true) => break,
            Ok(false) => {}
            Err(e) => return Err(wait_error(e, child)),
        }
    }
    let took = start.elapsed();
    // The leader has exited; anything it left running in its group (a helper holding our
    // pipes) must not outlive the command.
    kill_group(pid);
    let status = child.wait().map_err(|source| RunError::Wait {
        program: inv.program.clone(),
        source,
    })?;
    drain(
        &mut streams,
        inv.capture_limit,
        Instant::now() + DRAIN_GRACE,
    );
    let [(stdout, t1), (stderr, t2)] = streams.map(PipeCapture::text);
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

/// Kills the child's group and reaps the child if it dies within `grace`. One that does not
/// (uninterruptible sleep in the kernel: SIGKILL stays pending until the kernel lets go) is
/// handed to a reaper thread, never waited for here.
fn kill_and_reap(
    mut child: std::process::Child,
    pid: nix::unistd::Pid,
    pidfd: Option<&OwnedFd>,
    grace: Duration,
    kill: fn(nix::unistd::Pid),
) -> Result<(), StuckChild> {
    kill(pid);
    if exits_within(pid, pidfd, grace) {
        // Exited: this wait returns at once. No zombie, whatever the pipes do.
        let _ = child.wait();
        return Ok(());
    }
    Err(StuckChild::reap_in_background(child, pid.as_raw()))
}

/// Whether `pid` exits (without being reaped) within `grace`.
fn exits_within(pid: nix::unistd::Pid, pidfd: Option<&OwnedFd>, grace: Duration) -> bool {
    let until = Instant::now() + grace;
    loop {
        if exited_nowait(pid).unwrap_or(false) {
            return true;
        }
        let now = Instant::now();
        if now >= until {
            return false;
        }
        match pidfd {
            Some(fd) => {
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                let ms = (until - now).as_micros().div_ceil(1000);
                let timeout = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
                // SAFETY: one valid pollfd for the duration of the call.
                let _ = unsafe { libc::poll(&mut p, 1, timeout) };
            }
            None => thread::sleep(MAX_POLL.min(until - now)),
        }
    }
}

/// A child that did not die when killed (uninterruptible sleep in the kernel), left to a
/// reaper thread that waits for it as long as the kernel keeps it. Clones share the one
/// reaper: any of them can ask whether it has ended.
#[derive(Debug, Clone)]
pub struct StuckChild {
    /// Its process id (its kernel stack is `/proc/PID/stack`).
    pub pid: i32,
    reaped: Arc<(Mutex<Option<Exit>>, Condvar)>,
}

impl StuckChild {
    fn reap_in_background(mut child: std::process::Child, pid: i32) -> StuckChild {
        let reaped: Arc<(Mutex<Option<Exit>>, Condvar)> = Arc::default();
        let slot = reaped.clone();
        let reaper = move || {
            let exit = match child.wait() {
                Ok(status) => match (status.code(), status.signal()) {
                    (Some(c), _) => Exit::Code(c),
                    (None, Some(s)) => Exit::Signal(s),
                    (None, None) => Exit::Code(-1),
                },
                Err(_) => Exit::Code(-1),
            };
            let (lock, cv) = &*slot;
            *lock.lock().unwrap_or_else(|p| p.into_inner()) = Some(exit);
            cv.notify_all();
        };
        if let Err(e) = thread::Builder::new()
            .name(format!("reap-{pid}"))
            .spawn(reaper)
        {
            // No thread: the child stays a zombie once it ends, until this process exits;
            // nobody waits for it either way.
            tracing::warn!(pid, "no reaper thread for a stuck child: {e}");
        }
        StuckChild { pid, reaped }
    }

    /// Hands a child that did not die when killed to a reaper thread: what a [`Runner`]
    /// other than [`SystemRunner`] does with one of its own (a double in tests).
    pub fn adopt(child: std::process::Child) -> StuckChild {
        let pid = i32::try_from(child.id()).unwrap_or(i32::MAX);
        StuckChild::reap_in_background(child, pid)
    }

    /// How it ended, once the kernel let it go and it was reaped; `None` while it is stuck.
    pub fn ended(&self) -> Option<Exit> {
        *self.reaped.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Waits for its end at most `timeout` (`None`: as long as it takes; only ever on a
    /// thread that may block for as long as the kernel does).
    pub fn wait_ended(&self, timeout: Option<Duration>) -> Option<Exit> {
        let (lock, cv) = &*self.reaped;
        let mut g = lock.lock().unwrap_or_else(|p| p.into_inner());
        let until = timeout.map(|t| Instant::now() + t);
        loop {
            if let Some(exit) = *g {
                return Some(exit);
            }
            match until {
                None => g = cv.wait(g).unwrap_or_else(|p| p.into_inner()),
                Some(until) => {
                    let now = Instant::now();
                    if now >= until {
                        return None;
                    }
                    g = cv
                        .wait_timeout(g, until - now)
                        .map(|(g, _)| g)
                        .unwrap_or_else(|p| p.into_inner().0);
                }
            }
        }
    }

    /// `pid N`.
    pub fn describe(&self) -> String {
        format!("pid {}", self.pid)
    }
}

/// A pidfd for `pid` (Linux ≥ 5.3), `None` when the kernel refuses one.
fn pidfd_open(pid: nix::unistd::Pid) -> Option<OwnedFd> {
    // SAFETY: pidfd_open takes a pid and flags, no pointers; the result is checked.
    let raw = unsafe { libc::syscall(libc::SYS_pidfd_open, pid.as_raw(), 0) };
    let raw = i32::try_from(raw).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: `raw` is a descriptor the kernel just returned to us and nobody else owns
    // (pidfds are always close-on-exec).
    Some(unsafe { OwnedFd::from_raw_fd(raw) })
}

/// Whether `pid` has exited, without reaping it (WNOWAIT keeps the zombie, see `run`).
fn exited_nowait(pid: nix::unistd::Pid) -> std::io::Result<bool> {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(pid), flags) {
            Ok(WaitStatus::StillAlive) => return Ok(false),
            Ok(_) => return Ok(true),
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// One output pipe of the child and what was kept of it.
struct PipeCapture {
    fd: Option<OwnedFd>,
    kept: Vec<u8>,
    truncated: bool,
}

impl PipeCapture {
    fn new(fd: Option<OwnedFd>) -> PipeCapture {
        PipeCapture {
            fd,
            kept: Vec::new(),
            truncated: false,
        }
    }

    /// Reads what the pipe holds (it was reported readable, so this does not wait); end of
    /// file or an error closes it. Beyond `limit` bytes the data is read and dropped, so the
    /// child never blocks on a full pipe.
    fn read_some(&mut self, limit: usize) {
        let Some(fd) = &self.fd else {
            return;
        };
        let mut buf = [0u8; 8192];
        let n = loop {
            match nix::unistd::read(fd, &mut buf) {
                Err(nix::errno::Errno::EINTR) => continue,
                other => break other,
            }
        };
        match n {
            Ok(n) if n > 0 => {
                let chunk = buf.get(..n).unwrap_or_default();
                let room = limit.saturating_sub(self.kept.len());
                if chunk.len() > room {
                    self.truncated = true;
                }
                self.kept
                    .extend_from_slice(chunk.get(..room.min(chunk.len())).unwrap_or_default());
            }
            // EAGAIN cannot come from a readable blocking pipe; anything else ends it.
            _ => self.fd = None,
        }
    }

    fn text(self) -> (String, bool) {
        (
            String::from_utf8_lossy(&self.kept).into_owned(),
            self.truncated,
        )
    }
}

/// Waits at most `limit` for output on the open pipes or the child's exit (`pidfd`), reads
/// what came; whether the child exited. One thread, no timer: it sleeps in `poll` until
/// something happens.
fn wait_any(
    streams: &mut [PipeCapture; 2],
    pidfd: Option<&OwnedFd>,
    capture_limit: usize,
    limit: Duration,
) -> std::io::Result<bool> {
    let mut fds: Vec<libc::pollfd> = streams
        .iter()
        .filter_map(|c| c.fd.as_ref())
        .chain(pidfd)
        .map(|fd| libc::pollfd {
            fd: fd.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    if fds.is_empty() {
        // Both pipes closed and no pidfd: the caller's waitid decides, after this pause.
        thread::sleep(limit);
        return Ok(false);
    }
    // Round up: a deadline 0.3 ms away must not become a busy poll(0) loop.
    let ms = limit.as_micros().div_ceil(1000);
    let timeout = libc::c_int::try_from(ms).unwrap_or(libc::c_int::MAX);
    let nfds = libc::nfds_t::try_from(fds.len()).unwrap_or(0);
    // SAFETY: `fds` is a valid array of `nfds` pollfd structs for the duration of the call.
    let rc = unsafe { libc::poll(fds.as_mut_ptr(), nfds, timeout) };
    if rc < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    let mut exited = false;
    for p in fds.iter().filter(|p| p.revents != 0) {
        if pidfd.is_some_and(|fd| fd.as_raw_fd() == p.fd) {
            // POLLIN: the child has exited. POLLERR/POLLNVAL are not expected from a pidfd;
            // never taken for an exit (the reap would then wait without a deadline).
            if p.revents & libc::POLLIN == 0 {
                return Err(std::io::Error::other(format!(
                    "poll on the child's pidfd returned {:#x}",
                    p.revents
                )));
            }
            exited = true;
        } else if let Some(c) = streams
            .iter_mut()
            .find(|c| c.fd.as_ref().is_some_and(|fd| fd.as_raw_fd() == p.fd))
        {
            c.read_some(capture_limit);
        }
    }
    Ok(exited)
}

/// Reads both pipes to end of file, until `until` at most. A grandchild that escaped our
/// process group (setsid) could hold the pipes forever; we do not wait for it.
fn drain(streams: &mut [PipeCapture; 2], capture_limit: usize, until: Instant) {
    while streams.iter().any(|c| c.fd.is_some()) {
        let now = Instant::now();
        if now >= until {
            break;
        }
        if wait_any(streams, None, capture_limit, until - now).is_err() {
            break;
        }
    }
    // Whatever is still open is dropped (closed) here with the captures' owner.
    for c in streams.iter_mut() {
        c.fd = None;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str, timeout: Duration) -> Invocation {
        Invocation::new("/bin/sh", ["-c", script], timeout)
    }

    /// This thread's context switches so far (each one a wakeup after a wait).
    fn my_switches() -> u64 {
        let status = std::fs::read_to_string("/proc/thread-self/status").unwrap_or_default();
        status
            .lines()
            .filter(|l| l.contains("ctxt_switches:"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum()
    }

    #[test]
    fn waiting_for_a_slow_child_sleeps_until_it_writes_or_exits() {
        // 600 ms of waiting: sleep-polling at 10 ms would wake the thread ~60 times.
        let before = my_switches();
        let out = run(&sh(
            "echo a; sleep 0.3; echo b >&2; sleep 0.3",
            Duration::from_secs(10),
        ))
        .unwrap();
        let woke = my_switches() - before;
        assert_eq!((out.stdout.as_str(), out.stderr.as_str()), ("a\n", "b\n"));
        assert!(woke < 20, "{woke} wakeups for one run");
    }

    #[test]
    fn both_pipes_are_drained_past_the_limit_by_the_calling_thread() {
        // More than a pipe holds on both streams: the one thread must keep reading both or
        // the child blocks on a full pipe and the run times out.
        let out = run(&sh(
            "head -c 300000 /dev/zero; head -c 300000 /dev/zero >&2",
            Duration::from_secs(10),
        ))
        .unwrap();
        assert_eq!(out.stdout.len(), DEFAULT_CAPTURE_LIMIT);
        assert_eq!(out.stderr.len(), DEFAULT_CAPTURE_LIMIT);
        assert!(out.truncated);
    }

    #[test]
    fn the_waitid_fallback_behaves_like_the_pidfd_path() {
        for pidfd in [true, false] {
            let out = run_with(
                &sh("echo out; echo err >&2; exit 3", Duration::from_secs(10)),
                pidfd,
                kill_group,
            )
            .unwrap();
            assert_eq!(out.exit, Exit::Code(3));
            assert_eq!(
                (out.stdout.as_str(), out.stderr.as_str()),
                ("out\n", "err\n")
            );
            // The output written before the deadline is kept: the deadline must come after
            // the shell has written, also on a loaded machine (200 ms failed a clean-clone
            // CI run at load 7: nothing was written yet).
            let err = run_with(
                &sh("echo started; sleep 600", Duration::from_secs(3)),
                pidfd,
                kill_group,
            )
            .unwrap_err();
            assert!(
                matches!(&err, RunError::Timeout { stdout, .. } if stdout == "started\n"),
                "{err:?}"
            );
            // A helper holding the pipes is killed with the group, not waited for.
            let started = Instant::now();
            let out = run_with(
                &sh("sleep 600 & echo bye", Duration::from_secs(20)),
                pidfd,
                kill_group,
            )
            .unwrap();
            assert_eq!(out.stdout, "bye\n");
            assert!(started.elapsed() < Duration::from_secs(5));
        }
    }
    /// A kill that does nothing: the child plays one the kernel does not let die.
    fn kill_ignored(_: nix::unistd::Pid) {}

    #[test]
    fn a_child_that_does_not_die_when_killed_is_left_to_a_reaper_not_waited_for() {
        for pidfd in [true, false] {
            let mut inv = sh("echo started; exec sleep 600", Duration::from_secs(2));
            inv.kill_grace = Duration::from_millis(300);
            let started = Instant::now();
            let err = run_with(&inv, pidfd, kill_ignored).unwrap_err();
            // Returned after the deadline and the grace, not after the 600 s.
            assert!(started.elapsed() < Duration::from_secs(60));
            let RunError::Stuck { child, stdout, .. } = err else {
                panic!("{err:?}");
            };
            assert_eq!(stdout, "started\n");
            assert_eq!(child.ended(), None, "still running: nobody killed it");
            assert!(err_text_names_the_kernel(&child));
            // The kernel lets it go (here: the test kills it): the reaper reports the end.
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(child.pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            assert_eq!(
                child.wait_ended(Some(Duration::from_secs(60))),
                Some(Exit::Signal(9))
            );
            assert_eq!(child.ended(), Some(Exit::Signal(9)));
        }
    }

    fn err_text_names_the_kernel(child: &StuckChild) -> bool {
        let e = RunError::Stuck {
            command: "devlink dev param set".into(),
            timeout: Duration::from_secs(2),
            stdout: String::new(),
            stderr: String::new(),
            child: child.clone(),
        };
        e.to_string().contains("blocked in the kernel") && e.to_string().contains("pid ")
    }
}
