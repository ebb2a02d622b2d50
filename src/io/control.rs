//! The daemon's control socket: a Unix stream socket (mode 0600) speaking JSON lines.
//!
//! The operator's commands (`recover`, `reset-device`, `reconnect`, `pause`, `resume`,
//! `reload`, `status`) reach a running daemon through it, so that manual and automatic recovery share
//! one code path and never race. One request per connection: the client writes one JSON
//! line, the daemon answers with any number of `progress` lines and one final `done` line.
//!
//! Only root (or the daemon's own user, for tests run unprivileged) may talk to it: the peer's
//! credentials are checked with SO_PEERCRED on every connection, on top of the file mode.
//!
//! No client can hold up another: each connection is served by a task of its own with a
//! deadline for its request line ([`REQUEST_DEADLINE`], 5 s) and a line cap
//! ([`MAX_REQUEST_BYTES`], 64 KiB). At most [`MAX_CONNECTIONS`] (64) are served at once; when
//! all are taken, the connection that has waited longest without sending its request is
//! closed with a "busy" reply to make room, and when every slot runs a command the newcomer
//! gets "busy". A command whose client closed its end before the command was taken is not
//! run ([`ControlConnection::client_gone`]). Binding never deletes or replaces anything at
//! the socket's path but a stale socket ([`check_socket_path`]), and the socket's directory
//! must be trusted like every path the daemon uses ([`crate::path_trust`]).

use crate::exit::ExitStatus;
use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::core::recovery::OperatorCommand;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// Longest request line accepted; anything longer is refused, not buffered.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// What a client asks the daemon to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// Report the daemon's view: the typed [`crate::core::observe::DaemonSnapshot`] in the
    /// `done` line's `detail`.
    Status,
    /// The recent decisions and transitions from the daemon's ring, one `event` line each,
    /// then `done` (whose `detail` says how many the ring holds and dropped); with `follow`,
    /// new ones are streamed as they happen until the client goes away.
    Events {
        /// Only events at or after this wall-clock time (ms since the Unix epoch).
        #[serde(default)]
        since_unix_ms: Option<u64>,
        /// Only events numbered after this one (a follower resuming where its first
        /// answer ended, so nothing is missed or shown twice).
        #[serde(default)]
        after_seq: Option<u64>,
        /// Keep the connection and stream new events.
        #[serde(default)]
        follow: bool,
    },
    /// Stop automatic actions.
    Pause,
    /// Resume automatic actions.
    Resume,
    /// Read the configuration file again (what `systemctl reload` runs); the answer says
    /// whether the new file was taken or refused, and why.
    Reload,
    /// What an operator command would do: the driver's typed plan
    /// ([`crate::core::driver::CommandPlan`]) in the `done` line's `detail`. Changes nothing.
    Plan {
        /// The command.
        command: OperatorCommand,
    },
    /// Run an operator command: progress lines, then its verdict. (`pause` and `resume` are
    /// also accepted on their own, as `{"cmd":"pause"}`.)
    Run {
        /// The command.
        command: OperatorCommand,
    },
}

impl fmt::Display for Request {
    /// The command line that asks for it, in short (`recover rocep2s0f0/1 --dry-run`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Status => f.write_str("status"),
            Request::Events { follow, .. } => {
                f.write_str(if *follow { "events --follow" } else { "events" })
            }
            Request::Pause => f.write_str("pause"),
            Request::Resume => f.write_str("resume"),
            Request::Reload => f.write_str("reload"),
            Request::Plan { command } => write!(f, "{command} (its plan)"),
            Request::Run { command } => write!(f, "{command}"),
        }
    }
}

/// One line of the daemon's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "kebab-case")]
pub enum Reply {
    /// A step is under way or finished.
    Progress {
        /// What happened, in operator words.
        message: String,
    },
    /// One event of the daemon's ring (`events`).
    Event {
        /// The event.
        event: Box<crate::core::observe::Event>,
    },
    /// The request is finished.
    Done {
        /// Whether it succeeded.
        ok: bool,
        /// The outcome, in operator words.
        message: String,
        /// The exit code the CLI should end with.
        exit_code: u8,
        /// Structured detail (e.g. the status document).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        detail: Option<serde_json::Value>,
    },
}

/// Control-socket failures.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// No daemon listens on the socket.
    #[error("no iser-guard daemon is listening on {path}")]
    NotRunning {
        /// The socket path.
        path: PathBuf,
    },
    /// The socket exists but we may not use it.
    #[error("permission denied on {path}: the control socket is for root only")]
    PermissionDenied {
        /// The socket path.
        path: PathBuf,
    },
    /// Another daemon already listens there.
    #[error("another iser-guard daemon is already listening on {path}")]
    InUse {
        /// The socket path.
        path: PathBuf,
    },
    /// The peer is not allowed.
    #[error("refused a control connection from uid {uid}: only root may control iser-guard")]
    PeerRefused {
        /// The peer's uid.
        uid: u32,
    },
    /// Every connection slot runs a command; this one was answered "busy" and closed.
    #[error(
        "busy: {max} control connections are being served; try again (idle connections are \
         closed to make room, running commands are not)"
    )]
    Busy {
        /// The cap.
        max: usize,
    },
    /// The client closed its connection before its command was taken: not run.
    #[error("the control client went away before its command was taken; not run")]
    ClientGone,
    /// The socket's directory cannot be trusted.
    #[error("refusing the control socket's directory: {0}")]
    Untrusted(String),
    /// Something that is not a socket sits at the socket's path.
    #[error("{0}")]
    NotASocket(String),
    /// The other side sent something that is not the protocol.
    #[error("control protocol error: {0}")]
    Protocol(String),
    /// An I/O error.
    #[error("control socket {context}: {source}")]
    Io {
        /// What was being done.
        context: &'static str,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

fn io_err(context: &'static str) -> impl FnOnce(io::Error) -> ControlError {
    move |source| ControlError::Io { context, source }
}

/// How long a client has, from its connection, to send its request line.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);

/// Connections served at once (waiting for their request or with a command in flight).
pub const MAX_CONNECTIONS: usize = 64;

/// Longest reply line the client accepts (a status document of many ports fits easily).
pub const MAX_REPLY_BYTES: usize = 4 * 1024 * 1024;

/// How long an error or "busy" reply may take to write before the connection is dropped.
const REPLY_WRITE_DEADLINE: Duration = Duration::from_secs(1);

/// The server's bounds; [`Limits::default`] is what the daemon uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Per connection: time to send the request line ([`REQUEST_DEADLINE`]).
    pub request_deadline: Duration,
    /// Connections at once ([`MAX_CONNECTIONS`]).
    pub max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            request_deadline: REQUEST_DEADLINE,
            max_connections: MAX_CONNECTIONS,
        }
    }
}

/// Is `path` something the daemon may bind its socket at? Nothing there, or a socket (a
/// stale one is replaced, a live one refused at bind time). Anything else (a regular file,
/// a directory, a symlink) is never deleted or replaced: the operator must move it.
pub fn check_socket_path(path: &Path) -> Result<(), String> {
    use std::os::unix::fs::FileTypeExt;
    let meta = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        // A parent that is missing or not a directory is reported by the directory check.
        Err(_) => return Ok(()),
    };
    let ft = meta.file_type();
    if ft.is_socket() {
        return Ok(());
    }
    let kind = if ft.is_symlink() {
        "symbolic link"
    } else if ft.is_dir() {
        "directory"
    } else if ft.is_file() {
        "regular file"
    } else {
        "special file"
    };
    Err(format!(
        "{} exists and is a {kind}, not a socket: iser-guard replaces only a stale socket \
         there and never deletes anything else; move it away or choose another path",
        path.display()
    ))
}

/// Connection slots: those still waiting for their request line (oldest first, each with a
/// way to close it) and those whose command is in flight.
#[derive(Debug)]
struct Slots {
    max: usize,
    state: std::sync::Mutex<SlotState>,
}

#[derive(Debug, Default)]
struct SlotState {
    next_id: u64,
    waiting: std::collections::BTreeMap<u64, tokio::sync::oneshot::Sender<()>>,
    active: usize,
}

/// A connection's hold on a slot; released when dropped.
struct Ticket {
    id: u64,
    slots: Arc<Slots>,
    evicted: tokio::sync::oneshot::Receiver<()>,
    active: bool,
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ticket")
            .field("id", &self.id)
            .field("active", &self.active)
            .finish()
    }
}

impl Slots {
    fn lock(&self) -> std::sync::MutexGuard<'_, SlotState> {
        // A panic while holding this lock cannot leave the counts half-updated.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A slot for a new connection. When all are taken, the connection that has waited
    /// longest without sending its request is closed to make room: an idle client can
    /// hold a slot only until someone needs it. With every slot running a command, `None`
    /// (the caller answers "busy").
    fn admit(self: &Arc<Self>) -> Option<Ticket> {
        let mut st = self.lock();
        if st.waiting.len() + st.active >= self.max {
            let (_, close) = st.waiting.pop_first()?;
            let _ = close.send(());
        }
        let id = st.next_id;
        st.next_id += 1;
        let (tx, rx) = tokio::sync::oneshot::channel();
        st.waiting.insert(id, tx);
        Some(Ticket {
            id,
            slots: self.clone(),
            evicted: rx,
            active: false,
        })
    }
}

impl Ticket {
    /// The request arrived: from waiting to in flight. False if it was closed meanwhile.
    fn activate(&mut self) -> bool {
        let mut st = self.slots.lock();
        if st.waiting.remove(&self.id).is_some() {
            st.active += 1;
            self.active = true;
        }
        self.active
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        let mut st = self.slots.lock();
        if self.active {
            st.active = st.active.saturating_sub(1);
        } else {
            st.waiting.remove(&self.id);
        }
    }
}

type Accepted = Result<(ControlConnection, Request), ControlError>;

/// The daemon's side. Connections are served concurrently by a task of their own (see
/// [`ControlServer::accept`]).
#[derive(Debug)]
pub struct ControlServer {
    path: PathBuf,
    /// Device and inode of the socket we bound: only that file is removed on drop.
    identity: Option<(u64, u64)>,
    ready: tokio::sync::Mutex<tokio::sync::mpsc::Receiver<Accepted>>,
    acceptor: tokio::task::JoinHandle<()>,
}

impl ControlServer {
    /// Binds the socket (mode 0600) with the default [`Limits`].
    pub fn bind(path: &Path) -> Result<ControlServer, ControlError> {
        Self::bind_with(path, Limits::default())
    }

    /// Binds the socket (mode 0600), replacing a stale socket file left by a dead daemon but
    /// never one a live daemon still listens on, and never anything that is not a socket.
    /// The socket's directory is created if missing and must be trusted
    /// ([`crate::path_trust`]). Starts serving at once. Must be called inside a tokio runtime.
    pub fn bind_with(path: &Path, limits: Limits) -> Result<ControlServer, ControlError> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o755)
                .create(dir)
                .map_err(io_err("create directory"))?;
            use crate::core::path_trust::PathVerdict;
            use crate::io::path_trust::check;
            match check(dir, crate::core::path_trust::Target::DedicatedDir) {
                PathVerdict::Trusted { .. } => {}
                PathVerdict::Refused(r) => {
                    return Err(ControlError::Untrusted(
                        r.iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join("; "),
                    ))
                }
                PathVerdict::Unwalkable(e) => return Err(ControlError::Untrusted(e.to_string())),
            }
        }
        check_socket_path(path).map_err(ControlError::NotASocket)?;
        if std::fs::symlink_metadata(path).is_ok() {
            if StdUnixStream::connect(path).is_ok() {
                return Err(ControlError::InUse {
                    path: path.to_path_buf(),
                });
            }
            std::fs::remove_file(path).map_err(io_err("remove stale socket"))?;
        }
        // Create it unreachable, then open it to the owner only: no window where others can
        // connect.
        let old = nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o177));
        let bound = tokio::net::UnixListener::bind(path);
        nix::sys::stat::umask(old);
        let listener = bound.map_err(io_err("bind"))?;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))
            .map_err(io_err("chmod"))?;
        let identity = std::fs::symlink_metadata(path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        let slots = Arc::new(Slots {
            max: limits.max_connections.max(1),
            state: Default::default(),
        });
        // Bounded: every connection in it holds a slot; errors beyond it are dropped (they
        // are only logged).
        let (tx, rx) = tokio::sync::mpsc::channel(limits.max_connections.max(1) + 64);
        let acceptor = tokio::spawn(serve(listener, limits, slots, tx));
        Ok(ControlServer {
            path: path.to_path_buf(),
            identity,
            ready: tokio::sync::Mutex::new(rx),
            acceptor,
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The next connection whose request has arrived, from an allowed peer still connected.
    /// Connections are served concurrently in the background, each with its own deadline
    /// for its request line, so an idle or slow client never delays another. Peers that are
    /// refused, busy, too slow or speak nonsense got an error reply and were dropped; the
    /// error comes out here so the daemon can log it.
    pub async fn accept(&self) -> Result<(ControlConnection, Request), ControlError> {
        match self.ready.lock().await.recv().await {
            Some(a) => a,
            // The acceptor never ends on its own; if it did, there is nothing more to accept.
            None => std::future::pending().await,
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        use std::os::unix::fs::{FileTypeExt, MetadataExt};
        self.acceptor.abort();
        // Only the socket we bound: never a file someone put there since.
        if let Ok(m) = std::fs::symlink_metadata(&self.path) {
            if m.file_type().is_socket() && Some((m.dev(), m.ino())) == self.identity {
                let _ = std::fs::remove_file(&self.path);
            }
        }
    }
}

/// Writes one final reply without waiting on a client that does not read.
async fn reply_and_drop(mut conn: ControlConnection, message: String, code: u8) {
    let _ =
        tokio::time::timeout(REPLY_WRITE_DEADLINE, conn.done(false, &message, code, None)).await;
}

async fn serve(
    listener: tokio::net::UnixListener,
    limits: Limits,
    slots: Arc<Slots>,
    tx: tokio::sync::mpsc::Sender<Accepted>,
) {
    let report = |e: ControlError| {
        let _ = tx.try_send(Err(e));
    };
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                report(ControlError::Io {
                    context: "accept",
                    source: e,
                });
                // Out of descriptors (EMFILE) would otherwise spin.
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let conn = ControlConnection {
            stream: tokio::io::BufReader::new(stream),
            _slot: None,
        };
        let uid = match conn.stream.get_ref().peer_cred() {
            Ok(c) => c.uid(),
            Err(e) => {
                report(ControlError::Io {
                    context: "read peer credentials",
                    source: e,
                });
                continue;
            }
        };
        if !peer_allowed(uid) {
            let err = ControlError::PeerRefused { uid };
            tokio::spawn(reply_and_drop(
                conn,
                err.to_string(),
                ExitStatus::NoPerm.code(),
            ));
            report(err);
            continue;
        }
        match slots.admit() {
            Some(ticket) => {
                tokio::spawn(serve_one(conn, ticket, limits, tx.clone()));
            }
            None => {
                let err = ControlError::Busy {
                    max: limits.max_connections,
                };
                tokio::spawn(reply_and_drop(
                    conn,
                    err.to_string(),
                    ExitStatus::TempFail.code(),
                ));
                report(err);
            }
        }
    }
}

/// One connection: its request line within the deadline, then hand it to the daemon, unless
/// it was closed to make room or its client is already gone.
async fn serve_one(
    mut conn: ControlConnection,
    mut ticket: Ticket,
    limits: Limits,
    tx: tokio::sync::mpsc::Sender<Accepted>,
) {
    let read = tokio::select! {
        r = conn.read_request(limits.request_deadline) => Some(r),
        _ = &mut ticket.evicted => None,
    };
    let err = match read {
        Some(Ok(req)) if ticket.activate() => {
            if conn.client_gone() {
                ControlError::ClientGone
            } else {
                conn._slot = Some(ticket);
                let _ = tx.send(Ok((conn, req))).await;
                return;
            }
        }
        Some(Err(e)) => {
            reply_and_drop(conn, e.to_string(), ExitStatus::Usage.code()).await;
            let _ = tx.try_send(Err(e));
            return;
        }
        // Closed to make room for a newer connection.
        Some(Ok(_)) | None => ControlError::Busy {
            max: limits.max_connections,
        },
    };
    if !matches!(err, ControlError::ClientGone) {
        reply_and_drop(conn, err.to_string(), ExitStatus::TempFail.code()).await;
    }
    let _ = tx.try_send(Err(err));
}

/// Parses one request line as read from a client (at most [`MAX_REQUEST_BYTES`] plus one,
/// with or without its newline): what the server does with every line it reads.
pub fn parse_request(line: &[u8]) -> Result<Request, ControlError> {
    if line.len() > MAX_REQUEST_BYTES {
        return Err(ControlError::Protocol(format!(
            "request longer than {MAX_REQUEST_BYTES} bytes"
        )));
    }
    serde_json::from_slice(line).map_err(|e| ControlError::Protocol(format!("bad request: {e}")))
}

/// Root, or the user the daemon runs as (so tests can run unprivileged).
fn peer_allowed(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// One accepted client. Holds its connection slot until dropped.
#[derive(Debug)]
pub struct ControlConnection {
    stream: tokio::io::BufReader<tokio::net::UnixStream>,
    _slot: Option<Ticket>,
}

impl ControlConnection {
    /// True when the client has closed its end (it gave up or was killed): its command must
    /// not run. A client that only shut down its writing half is still there to read the
    /// answer.
    pub fn client_gone(&self) -> bool {
        use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
        use std::os::fd::AsFd;
        let fd = self.stream.get_ref().as_fd();
        let mut fds = [PollFd::new(fd, PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::ZERO) {
            Ok(_) => fds[0]
                .revents()
                .is_some_and(|r| r.intersects(PollFlags::POLLHUP | PollFlags::POLLERR)),
            Err(_) => false,
        }
    }

    async fn read_request(&mut self, deadline: Duration) -> Result<Request, ControlError> {
        let mut line = Vec::new();
        // At most MAX_REQUEST_BYTES + 1 bytes are read: `parse_request` refuses the excess.
        tokio::time::timeout(deadline, async {
            let mut limited = (&mut self.stream).take(MAX_REQUEST_BYTES as u64 + 1);
            limited.read_until(b'\n', &mut line).await
        })
        .await
        .map_err(|_| {
            ControlError::Protocol(format!("no request within {} s", deadline.as_secs_f64()))
        })?
        .map_err(io_err("read request"))?;
        parse_request(&line)
    }

    async fn send(&mut self, reply: &Reply) -> Result<(), ControlError> {
        let mut line = serde_json::to_vec(reply)
            .map_err(|e| ControlError::Protocol(format!("cannot encode reply: {e}")))?;
        line.push(b'\n');
        let stream = self.stream.get_mut();
        stream
            .write_all(&line)
            .await
            .map_err(io_err("write reply"))?;
        stream.flush().await.map_err(io_err("flush reply"))
    }

    /// Sends an event line.
    pub async fn event(&mut self, event: &crate::core::observe::Event) -> Result<(), ControlError> {
        self.send(&Reply::Event {
            event: Box::new(event.clone()),
        })
        .await
    }

    /// Sends a progress line.
    pub async fn progress(&mut self, message: &str) -> Result<(), ControlError> {
        self.send(&Reply::Progress {
            message: message.to_string(),
        })
        .await
    }

    /// Sends the final line.
    pub async fn done(
        &mut self,
        ok: bool,
        message: &str,
        exit_code: u8,
        detail: Option<serde_json::Value>,
    ) -> Result<(), ControlError> {
        self.send(&Reply::Done {
            ok,
            message: message.to_string(),
            exit_code,
            detail,
        })
        .await
    }
}

/// The CLI's side: sends one request and streams the replies to `on_progress`, returning
/// the final `done` reply.
pub fn request(
    path: &Path,
    req: &Request,
    timeout: Duration,
    mut on_progress: impl FnMut(&str),
) -> Result<Reply, ControlError> {
    request_lines(path, req, Some(timeout), |r| {
        if let Reply::Progress { message } = r {
            on_progress(&message);
        }
    })
}

/// The CLI's side for any request: every line before the final `done` goes to `on_line`
/// (progress and event lines), and the `done` line is returned. `timeout` bounds the wait
/// for each line (`None`: wait as long as the daemon keeps the connection, for
/// `events --follow`). A line longer than [`MAX_REPLY_BYTES`] or one that is not the
/// protocol is a [`ControlError::Protocol`], never a panic or an unbounded buffer.
pub fn request_lines(
    path: &Path,
    req: &Request,
    timeout: Option<Duration>,
    mut on_line: impl FnMut(Reply),
) -> Result<Reply, ControlError> {
    let stream = StdUnixStream::connect(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused => ControlError::NotRunning {
            path: path.to_path_buf(),
        },
        io::ErrorKind::PermissionDenied => ControlError::PermissionDenied {
            path: path.to_path_buf(),
        },
        _ => ControlError::Io {
            context: "connect",
            source: e,
        },
    })?;
    stream
        .set_read_timeout(timeout)
        .map_err(io_err("set timeout"))?;
    let mut line = serde_json::to_vec(req)
        .map_err(|e| ControlError::Protocol(format!("cannot encode request: {e}")))?;
    line.push(b'\n');
    // A daemon too busy to serve us answers before reading and closes: the request cannot
    // be written then (EPIPE), but its answer is there to read.
    let sent = (&stream).write_all(&line).map_err(io_err("send request"));
    let mut reader = BufReader::new(&stream);
    loop {
        let mut buf = Vec::new();
        let n = (&mut reader)
            .take(MAX_REPLY_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .map_err(|e| match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                    ControlError::Protocol(format!("no answer from the daemon within {timeout:?}"))
                }
                _ => ControlError::Io {
                    context: "read reply",
                    source: e,
                },
            })?;
        if n == 0 {
            sent?;
            return Err(ControlError::Protocol(
                "the daemon closed the connection early".into(),
            ));
        }
        if n > MAX_REPLY_BYTES {
            return Err(ControlError::Protocol(format!(
                "reply line longer than {MAX_REPLY_BYTES} bytes"
            )));
        }
        match serde_json::from_slice::<Reply>(&buf) {
            Ok(done @ Reply::Done { .. }) => return Ok(done),
            Ok(line) => on_line(line),
            Err(e) => return Err(ControlError::Protocol(format!("bad reply: {e}"))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(flavor = "current_thread")]
    async fn request_and_streamed_replies_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/control.sock");
        let server = ControlServer::bind(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);

        let client_path = path.clone();
        let client = tokio::task::spawn_blocking(move || {
            let mut seen = Vec::new();
            let req = Request::Plan {
                command: OperatorCommand::Recover {
                    device: "rocep2s0f0".into(),
                    port: Some(1),
                },
            };
            let done = request(&client_path, &req, Duration::from_secs(5), |m| {
                seen.push(m.to_string())
            })
            .unwrap();
            (seen, done)
        });
        let (mut conn, req) = server.accept().await.unwrap();
        assert_eq!(
            req,
            Request::Plan {
                command: OperatorCommand::Recover {
                    device: "rocep2s0f0".into(),
                    port: Some(1),
                }
            }
        );
        conn.progress("probing 192.0.2.2:3260").await.unwrap();
        conn.done(true, "dry run: nothing changed", 0, None)
            .await
            .unwrap();
        let (seen, done) = client.await.unwrap();
        assert_eq!(seen, vec!["probing 192.0.2.2:3260".to_string()]);
        assert_eq!(
            done,
            Reply::Done {
                ok: true,
                message: "dry run: nothing changed".into(),
                exit_code: 0,
                detail: None
            }
        );
    }

    #[tokio::test(flavor = "current_thread")]
    async fn garbage_requests_get_an_error_reply() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let server = ControlServer::bind(&path).unwrap();
        let p = path.clone();
        let client = tokio::task::spawn_blocking(move || {
            let mut s = StdUnixStream::connect(&p).unwrap();
            s.write_all(b"{\"cmd\":\"format-disks\"}\n").unwrap();
            let mut out = String::new();
            BufReader::new(&s).read_line(&mut out).unwrap();
            out
        });
        let err = server.accept().await.unwrap_err();
        assert!(matches!(err, ControlError::Protocol(_)), "{err}");
        let reply: Reply = serde_json::from_str(&client.await.unwrap()).unwrap();
        assert!(matches!(
            reply,
            Reply::Done {
                ok: false,
                exit_code: 64,
                ..
            }
        ));
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_live_socket_is_never_replaced_but_a_stale_one_is() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("control.sock");
        let first = ControlServer::bind(&path).unwrap();
        assert!(matches!(
            ControlServer::bind(&path),
            Err(ControlError::InUse { .. })
        ));
        // A socket file nobody listens on (daemon killed with SIGKILL) is replaced.
        std::mem::forget(first);
        let stale = std::os::unix::net::UnixListener::bind(dir.path().join("other.sock"));
        drop(stale);
        assert!(ControlServer::bind(&dir.path().join("other.sock")).is_ok());
    }

    #[test]
    fn no_daemon_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let err = request(
            &dir.path().join("none.sock"),
            &Request::Status,
            Duration::from_secs(1),
            |_| {},
        )
        .unwrap_err();
        assert!(matches!(err, ControlError::NotRunning { .. }));
        assert!(err.to_string().contains("no iser-guard daemon"));
    }
}
