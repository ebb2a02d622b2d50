//! The daemon's control socket: a Unix stream socket (mode 0600) speaking JSON lines.
//!
//! The operator's commands (`recover`, `reset-device`, `reconnect`, `pause`, `resume`,
//! `status`) reach a running daemon through it, so that manual and automatic recovery share
//! one code path and never race. One request per connection: the client writes one JSON
//! line, the daemon answers with any number of `progress` lines and one final `done` line.
//!
//! Only root (or the daemon's own user, for tests run unprivileged) may talk to it: the peer's
//! credentials are checked with SO_PEERCRED on every connection, on top of the file mode.

use std::io::{self, BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream as StdUnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// Longest request line accepted; anything longer is refused, not buffered.
pub const MAX_REQUEST_BYTES: usize = 64 * 1024;

/// What a client asks the daemon to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "kebab-case")]
pub enum Request {
    /// Report the daemon's view (ports, states, paused or not).
    Status,
    /// Stop automatic actions.
    Pause,
    /// Resume automatic actions.
    Resume,
    /// The whole recovery of one device (optionally one port).
    Recover {
        /// RDMA device name.
        device: String,
        /// Port number, when only one port is meant.
        port: Option<u32>,
        /// Decide and report, change nothing.
        dry_run: bool,
    },
    /// Re-create one device.
    ResetDevice {
        /// RDMA device name.
        device: String,
        /// Decide and report, change nothing.
        dry_run: bool,
    },
    /// Log sessions out and in.
    Reconnect {
        /// Only sessions of this target IQN.
        target: Option<String>,
        /// Only sessions of this portal (`ip[:port]`).
        portal: Option<String>,
        /// Decide and report, change nothing.
        dry_run: bool,
    },
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

/// The daemon's side.
#[derive(Debug)]
pub struct ControlServer {
    listener: tokio::net::UnixListener,
    path: PathBuf,
}

impl ControlServer {
    /// Binds the socket (mode 0600), replacing a stale socket file left by a dead daemon but
    /// never one a live daemon still listens on. Must be called inside a tokio runtime.
    pub fn bind(path: &Path) -> Result<ControlServer, ControlError> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(io_err("create directory"))?;
        }
        if path.exists() {
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
        Ok(ControlServer {
            listener,
            path: path.to_path_buf(),
        })
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Accepts the next connection from an allowed peer and reads its request. Peers that
    /// are refused or speak nonsense get an error reply and are dropped; the error is
    /// returned so the daemon can log it.
    pub async fn accept(&self) -> Result<(ControlConnection, Request), ControlError> {
        let (stream, _) = self.listener.accept().await.map_err(io_err("accept"))?;
        let cred = stream
            .peer_cred()
            .map_err(io_err("read peer credentials"))?;
        let mut conn = ControlConnection {
            stream: tokio::io::BufReader::new(stream),
        };
        if !peer_allowed(cred.uid()) {
            let err = ControlError::PeerRefused { uid: cred.uid() };
            let _ = conn
                .done(false, &err.to_string(), crate::error::EXIT_NOPERM, None)
                .await;
            return Err(err);
        }
        match conn.read_request().await {
            Ok(req) => Ok((conn, req)),
            Err(e) => {
                let _ = conn
                    .done(false, &e.to_string(), crate::error::EXIT_USAGE, None)
                    .await;
                Err(e)
            }
        }
    }
}

impl Drop for ControlServer {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Root, or the user the daemon runs as (so tests can run unprivileged).
fn peer_allowed(uid: u32) -> bool {
    uid == 0 || uid == nix::unistd::geteuid().as_raw()
}

/// One accepted client.
#[derive(Debug)]
pub struct ControlConnection {
    stream: tokio::io::BufReader<tokio::net::UnixStream>,
}

impl ControlConnection {
    async fn read_request(&mut self) -> Result<Request, ControlError> {
        let mut line = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), async {
            let mut limited = (&mut self.stream).take(MAX_REQUEST_BYTES as u64 + 1);
            limited.read_until(b'\n', &mut line).await
        })
        .await
        .map_err(|_| ControlError::Protocol("no request within 5 s".into()))?
        .map_err(io_err("read request"))?;
        if read > MAX_REQUEST_BYTES {
            return Err(ControlError::Protocol(format!(
                "request longer than {MAX_REQUEST_BYTES} bytes"
            )));
        }
        serde_json::from_slice(&line)
            .map_err(|e| ControlError::Protocol(format!("bad request: {e}")))
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
        .set_read_timeout(Some(timeout))
        .map_err(io_err("set timeout"))?;
    let mut line = serde_json::to_vec(req)
        .map_err(|e| ControlError::Protocol(format!("cannot encode request: {e}")))?;
    line.push(b'\n');
    (&stream).write_all(&line).map_err(io_err("send request"))?;
    let mut reader = BufReader::new(&stream);
    loop {
        let mut buf = String::new();
        let n = reader.read_line(&mut buf).map_err(io_err("read reply"))?;
        if n == 0 {
            return Err(ControlError::Protocol(
                "the daemon closed the connection early".into(),
            ));
        }
        match serde_json::from_str::<Reply>(&buf) {
            Ok(Reply::Progress { message }) => on_progress(&message),
            Ok(done @ Reply::Done { .. }) => return Ok(done),
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
            let req = Request::Recover {
                device: "rocep2s0f0".into(),
                port: Some(1),
                dry_run: true,
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
            Request::Recover {
                device: "rocep2s0f0".into(),
                port: Some(1),
                dry_run: true
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
