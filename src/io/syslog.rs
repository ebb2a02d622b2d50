//! Alerts to syslog: one RFC 3164 datagram per alert, facility `daemon`, to the configured
//! socket (`alerts.syslog-socket`, default `/dev/log`).
//!
//! Owns the wire format and the socket. It does not decide when to alert or de-duplicate
//! repeats (the engine and the daemon do).
//!
//! Why hand-written rather than the `syslog` crate: what we need is ~60 lines (a priority, a
//! tag, a pid, a datagram), we need exact control over the bytes for tests, a send timeout so a
//! stalled journald can never block the daemon, reconnect after journald restarts, and a typed
//! "no syslog here" error (CI has no /dev/log) rather than the crate's string errors; and the
//! crate speaks `log`, not `tracing`.
//!
//! Format, as glibc's `syslog(3)` writes to `/dev/log` minus the timestamp:
//! `<PRI>IDENT[PID]: MESSAGE`, PRI = facility × 8 + severity (daemon = 3). The timestamp is left
//! out on purpose: for local datagrams both journald and rsyslog (imuxsock, `UseSysTimeStamp`
//! on by default) stamp the message with their own receive time, and glibc's local-time stamp
//! would need timezone code we do not otherwise carry. Both receivers accept the short form.

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Syslog facility `daemon` (3), as in `<syslog.h>`.
pub const FACILITY_DAEMON: u8 = 3;

/// Longest message body sent; longer ones are cut at a character boundary and marked with
/// `…`. Local syslog sockets accept more, but rsyslog's default message limit is 8 KiB
/// including the header, and an alert is a few sentences.
pub const MAX_MESSAGE_BYTES: usize = 4096;

/// A send never blocks the daemon longer than this (a stalled or overloaded receiver).
const SEND_TIMEOUT: Duration = Duration::from_secs(1);

use crate::core::severity::Severity;

/// One alert: what happened, why, and what the operator can do about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlertMessage {
    /// How urgent it is.
    pub severity: Severity,
    /// What happened, e.g. "RDMA device rocep2s0f0 port 1: GSI QP 1 stuck in ERR".
    pub what: String,
    /// Why it matters or why it happened.
    pub why: String,
    /// What the operator can do; empty when nothing is needed.
    pub todo: String,
}

impl AlertMessage {
    /// The message body: `what: why; todo`, on one line.
    pub fn message(&self) -> String {
        let mut m = self.what.trim().to_string();
        if !self.why.trim().is_empty() {
            m.push_str(": ");
            m.push_str(self.why.trim());
        }
        if !self.todo.trim().is_empty() {
            m.push_str("; ");
            m.push_str(self.todo.trim());
        }
        m
    }
}

/// Why an alert could not be delivered.
#[derive(Debug, thiserror::Error)]
pub enum SyslogError {
    /// There is no syslog receiver at the path (no journald/rsyslog, as on CI, or it is down).
    /// The daemon logs this once and keeps running.
    #[error("no syslog receiver at {path} ({source}); alerts go to the daemon log only. Start journald or rsyslog, or set alerts.syslog = false")]
    Unavailable {
        /// The socket path.
        path: PathBuf,
        /// The OS error (ENOENT, ECONNREFUSED, EPROTOTYPE for a stream socket, …).
        #[source]
        source: std::io::Error,
    },
    /// The receiver exists but the datagram could not be sent (queue full past the timeout, …).
    #[error("sending an alert to syslog at {path} failed: {source}")]
    Send {
        /// The socket path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl SyslogError {
    /// True when syslog is simply absent (as opposed to a failed send).
    pub fn is_unavailable(&self) -> bool {
        matches!(self, SyslogError::Unavailable { .. })
    }
}

/// Where alerts go. The real one is [`SyslogSink`]; [`RecordingSink`] keeps them in memory
/// for the simulator and tests.
pub trait AlertSink: Send + Sync {
    /// Delivers one alert.
    fn send(&self, alert: &AlertMessage) -> Result<(), SyslogError>;
}

/// Builds the exact datagram for `alert` (see the module doc for the format).
pub fn format_datagram(facility: u8, ident: &str, pid: u32, alert: &AlertMessage) -> Vec<u8> {
    let pri = u16::from(facility) * 8 + u16::from(alert.severity.code());
    let ident = sanitize(ident, 48);
    let ident = if ident.is_empty() {
        "iser-guard".to_string()
    } else {
        ident
    };
    let body = sanitize(&alert.message(), MAX_MESSAGE_BYTES);
    format!("<{pri}>{ident}[{pid}]: {body}").into_bytes()
}

/// One line, no control characters (a newline would split the record in some receivers), at
/// most `max` bytes, cut at a character boundary with a trailing `…`.
fn sanitize(s: &str, max: usize) -> String {
    let clean: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if clean.len() <= max {
        return clean;
    }
    let mut cut = max.saturating_sub('…'.len_utf8());
    while cut > 0 && !clean.is_char_boundary(cut) {
        cut -= 1;
    }
    let mut out = clean.get(..cut).unwrap_or_default().to_string();
    out.push('…');
    out
}

/// The real sink: a datagram socket connected to the syslog socket, reconnected after a
/// receiver restart.
#[derive(Debug)]
pub struct SyslogSink {
    path: PathBuf,
    ident: String,
    pid: u32,
    socket: Mutex<Option<UnixDatagram>>,
}

impl SyslogSink {
    /// A sink for `path` (e.g. `/dev/log`) tagging messages with `ident` and this process's pid.
    /// Connects lazily: creating it never fails.
    pub fn new(path: impl Into<PathBuf>, ident: impl Into<String>) -> Self {
        SyslogSink {
            path: path.into(),
            ident: ident.into(),
            pid: std::process::id(),
            socket: Mutex::new(None),
        }
    }

    /// The socket path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn connect(&self) -> Result<UnixDatagram, SyslogError> {
        let unavailable = |source| SyslogError::Unavailable {
            path: self.path.clone(),
            source,
        };
        let sock = UnixDatagram::unbound().map_err(unavailable)?;
        sock.connect(&self.path).map_err(unavailable)?;
        sock.set_write_timeout(Some(SEND_TIMEOUT))
            .map_err(|source| SyslogError::Send {
                path: self.path.clone(),
                source,
            })?;
        Ok(sock)
    }
}

impl AlertSink for SyslogSink {
    fn send(&self, alert: &AlertMessage) -> Result<(), SyslogError> {
        let bytes = format_datagram(FACILITY_DAEMON, &self.ident, self.pid, alert);
        let mut guard = self.socket.lock().unwrap_or_else(|p| p.into_inner());
        // Two tries: the cached connection may point at a receiver that restarted since
        // (ECONNREFUSED/ENOTCONN), in which case one fresh connect fixes it.
        for attempt in 0..2 {
            let sock = match guard.take() {
                Some(s) => s,
                None => self.connect()?,
            };
            match sock.send(&bytes) {
                Ok(_) => {
                    *guard = Some(sock);
                    return Ok(());
                }
                Err(e) if attempt == 0 && is_stale(&e) => continue,
                Err(source) if is_stale(&source) => {
                    return Err(SyslogError::Unavailable {
                        path: self.path.clone(),
                        source,
                    })
                }
                Err(source) => {
                    *guard = Some(sock);
                    return Err(SyslogError::Send {
                        path: self.path.clone(),
                        source,
                    });
                }
            }
        }
        Ok(())
    }
}

fn is_stale(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ECONNREFUSED) | Some(libc::ENOTCONN) | Some(libc::ENOENT)
    )
}

/// An in-memory sink: keeps every alert, for the simulator and tests.
#[derive(Debug, Default)]
pub struct RecordingSink {
    alerts: Mutex<Vec<AlertMessage>>,
}

impl RecordingSink {
    /// Every alert sent so far, oldest first.
    pub fn alerts(&self) -> Vec<AlertMessage> {
        self.alerts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

impl AlertSink for RecordingSink {
    fn send(&self, alert: &AlertMessage) -> Result<(), SyslogError> {
        self.alerts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(alert.clone());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: [Severity; 8] = [
        Severity::Emerg,
        Severity::Alert,
        Severity::Crit,
        Severity::Err,
        Severity::Warning,
        Severity::Notice,
        Severity::Info,
        Severity::Debug,
    ];

    #[test]
    fn one_severity_for_the_file_and_the_wire() {
        for (i, s) in ALL.iter().enumerate() {
            assert_eq!(usize::from(s.code()), i, "{s:?}");
            // The configuration file's word is the name, both ways.
            let json = serde_json::to_string(s).unwrap();
            assert_eq!(json, format!("\"{}\"", s.name()));
            assert_eq!(serde_json::from_str::<Severity>(&json).unwrap(), *s);
        }
    }

    #[test]
    fn the_configured_severity_is_the_one_sent() {
        for s in ALL {
            let a = AlertMessage {
                severity: s,
                what: "w".into(),
                why: String::new(),
                todo: String::new(),
            };
            let d = format_datagram(FACILITY_DAEMON, "iser-guard", 1, &a);
            let pri = u16::from(FACILITY_DAEMON) * 8 + u16::from(s.code());
            assert!(d.starts_with(format!("<{pri}>").as_bytes()), "{s:?}");
        }
    }
}
