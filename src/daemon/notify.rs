//! The systemd notification protocol (`sd_notify(3)`): READY, WATCHDOG, STATUS, RELOADING,
//! STOPPING datagrams to `$NOTIFY_SOCKET`.
//!
//! Written by hand rather than with a crate because it is one datagram per call and the
//! tests need to point it at a temporary socket. Without `$NOTIFY_SOCKET` (not started by
//! systemd) every call is a no-op.

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Sends state notifications to the service manager.
#[derive(Debug)]
pub struct Notifier {
    target: Option<(UnixDatagram, SocketAddr)>,
    /// Notifications dropped because the manager's queue was full.
    dropped: std::sync::atomic::AtomicU64,
}

impl Notifier {
    /// A notifier for `$NOTIFY_SOCKET`, or a silent one when it is unset or unusable.
    pub fn from_env() -> Notifier {
        match std::env::var_os("NOTIFY_SOCKET") {
            Some(path) => match Notifier::to_socket(&path.to_string_lossy()) {
                Ok(n) => n,
                Err(e) => {
                    tracing::warn!(
                        "NOTIFY_SOCKET is set but unusable ({e}); systemd will not see readiness"
                    );
                    Notifier::silent()
                }
            },
            None => Notifier::silent(),
        }
    }

    /// A notifier that sends nothing.
    pub fn silent() -> Notifier {
        Notifier {
            target: None,
            dropped: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// A notifier for an explicit socket path; a leading `@` names an abstract socket.
    pub fn to_socket(path: &str) -> io::Result<Notifier> {
        let addr = if let Some(name) = path.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        } else {
            SocketAddr::from_pathname(path)?
        };
        let sock = UnixDatagram::unbound()?;
        // Never block the loop on the service manager: a Unix datagram queue holds only
        // net.unix.max_dgram_qlen (10) unread messages, and a sender to a full queue
        // waits. A daemon stuck in sendto() stops reading the kernel log (seen: SIGTERM
        // handled, then the STOPPING=1 send hung until the test's 20 s stop bound).
        sock.set_nonblocking(true)?;
        Ok(Notifier {
            target: Some((sock, addr)),
            dropped: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// Whether notifications go anywhere.
    pub fn is_active(&self) -> bool {
        self.target.is_some()
    }

    /// A status line or a watchdog ping: dropped when the manager's queue is full (the
    /// next one replaces it).
    fn send(&self, msg: &str) {
        self.send_within(msg, Duration::ZERO);
    }

    /// A state change (READY, RELOADING, STOPPING), which systemd must see: tried again for
    /// up to `patience` while the queue is full, then dropped with a warning.
    fn send_within(&self, msg: &str, patience: Duration) {
        use std::sync::atomic::Ordering;
        let Some((sock, addr)) = &self.target else {
            return;
        };
        let give_up = std::time::Instant::now() + patience;
        loop {
            match sock.send_to_addr(msg.as_bytes(), addr) {
                Ok(_) => return,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    if std::time::Instant::now() >= give_up {
                        let n = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                        if patience.is_zero() {
                            tracing::debug!(
                                dropped = n,
                                "systemd's notify queue is full; dropped {}",
                                one_line(msg)
                            );
                        } else {
                            tracing::warn!(
                                dropped = n,
                                "systemd's notify queue stayed full for {} ms; dropped {}",
                                patience.as_millis(),
                                one_line(msg)
                            );
                        }
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(e) => {
                    tracing::warn!("cannot notify systemd ({}): {e}", one_line(msg));
                    return;
                }
            }
        }
    }

    /// Notifications dropped so far because the manager's queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// `READY=1` with a status line.
    pub fn ready(&self, status: &str) {
        self.send_within(
            &format!("READY=1\nSTATUS={}", one_line(status)),
            STATE_PATIENCE,
        );
    }

    /// `WATCHDOG=1`: the main loop is alive.
    pub fn watchdog(&self) {
        self.send("WATCHDOG=1");
    }

    /// `STATUS=…`, shown by `systemctl status`.
    pub fn status(&self, status: &str) {
        self.send(&format!("STATUS={}", one_line(status)));
    }

    /// `RELOADING=1` before a configuration reload; follow with [`Notifier::ready`].
    pub fn reloading(&self) {
        self.send_within("RELOADING=1", STATE_PATIENCE);
    }

    /// `STOPPING=1` when shutdown begins.
    pub fn stopping(&self) {
        self.send_within("STOPPING=1", STATE_PATIENCE);
    }
}

/// How long a state change waits for room in a full notify queue.
const STATE_PATIENCE: Duration = Duration::from_millis(500);

/// Newlines would start a new variable assignment in the protocol.
fn one_line(s: &str) -> String {
    s.replace('\n', " ")
}

/// The watchdog interval systemd expects (`$WATCHDOG_USEC`), when it is meant for this
/// process (`$WATCHDOG_PID` unset or equal to our pid).
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID") {
        if pid.parse::<u32>().ok()? != std::process::id() {
            return None;
        }
    }
    (usec > 0).then(|| Duration::from_micros(usec))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_protocol_datagrams_to_a_path_socket() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::to_socket(path.to_str().unwrap()).unwrap();
        assert!(n.is_active());
        n.ready("watching 2 devices\nno faults");
        n.watchdog();
        n.stopping();
        let mut buf = [0u8; 256];
        let got: Vec<String> = (0..3)
            .map(|_| {
                let len = server.recv(&mut buf).unwrap();
                String::from_utf8_lossy(&buf[..len]).into_owned()
            })
            .collect();
        assert_eq!(got[0], "READY=1\nSTATUS=watching 2 devices no faults");
        assert_eq!(got[1], "WATCHDOG=1");
        assert_eq!(got[2], "STOPPING=1");
    }

    #[test]
    fn abstract_socket_names_are_supported() {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("iser-guard-test-{}", std::process::id());
        let addr = SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let server = UnixDatagram::bind_addr(&addr).unwrap();
        Notifier::to_socket(&format!("@{name}"))
            .unwrap()
            .status("ok");
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STATUS=ok");
    }

    #[test]
    fn a_full_queue_never_blocks_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notify.sock");
        // Bound and never read: the queue fills after max_dgram_qlen datagrams.
        let server = UnixDatagram::bind(&path).unwrap();
        let n = Notifier::to_socket(path.to_str().unwrap()).unwrap();
        for i in 0..200 {
            n.status(&format!("status {i}"));
        }
        assert!(n.dropped() > 0, "a queue of 200 unread datagrams is full");
        let before = n.dropped();
        // A state change waits a little for room, then gives up: it returns.
        n.stopping();
        assert_eq!(n.dropped(), before + 1);
        let mut buf = [0u8; 64];
        let len = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..len], b"STATUS=status 0");
    }

    #[test]
    fn silent_notifier_does_nothing() {
        let n = Notifier::silent();
        assert!(!n.is_active());
        n.ready("x");
    }
}
