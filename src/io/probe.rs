//! Portal probes: is the target's iSCSI portal answering again?
//!
//! Owns one TCP connect per probe, with a deadline, optionally from the interface that carries
//! the iSER traffic: bound to its local IP (works unprivileged) and/or to the device name with
//! `SO_BINDTODEVICE` (needs CAP_NET_RAW, root in practice). Binding matters on multi-homed
//! initiators: the target must be reachable over the RDMA netdev, not just over some management
//! link. The connection is closed as soon as it is established; nothing is sent (the iSCSI
//! target sees a connect and a close, as from a port scanner).
//!
//! A TCP answer proves the target host and its portal are up; whether iSER will log in is the
//! login's job. The engine decides how many consecutive successes count as "back".

use crate::exit::ExitStatus;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;

pub use crate::core::recovery::ProbeResult;
use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
use nix::sys::socket::{
    bind, connect, getsockopt, setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType,
    SockaddrStorage,
};

/// The iSCSI port, used when a portal names none and the configuration does not say otherwise.
pub const ISCSI_PORT: u16 = 3260;

/// Where to probe from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProbeSource {
    /// Bind to this local address first (the iSER interface's IP, e.g. from `Iface IPaddress`).
    pub local_ip: Option<IpAddr>,
    /// Bind to this network device (`SO_BINDTODEVICE`, needs root), e.g. `ens1f0`.
    pub device: Option<String>,
}

/// What the network answered to one probe, in full (round-trip time, errno). The engine
/// needs less: [`TcpAnswer::verdict`] is its [`ProbeResult`], the one probe vocabulary of the
/// core, and [`verdict_of`] the only place a probe (or a probe that could not be made) becomes
/// one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TcpAnswer {
    /// The portal accepted a TCP connection after this round-trip time.
    Reachable {
        /// Time from connect() to established.
        rtt: Duration,
    },
    /// The host answered with a reset: it is up, but nothing listens on the port (the target
    /// service is not running yet).
    Refused,
    /// No answer within the deadline (host down, packets dropped, or a full listen queue).
    Timeout,
    /// The network said no: host or network unreachable, no route, … (the errno).
    Unreachable(Errno),
}

impl TcpAnswer {
    /// True for [`TcpAnswer::Reachable`].
    pub fn is_reachable(&self) -> bool {
        matches!(self, TcpAnswer::Reachable { .. })
    }

    /// The engine's verdict: a time-out and a network error are both "unreachable" (no
    /// answer from the target either way); a reset is "refused" (host up, nothing listening).
    pub fn verdict(&self) -> ProbeResult {
        match self {
            TcpAnswer::Reachable { .. } => ProbeResult::Reachable,
            TcpAnswer::Refused => ProbeResult::Refused,
            TcpAnswer::Timeout | TcpAnswer::Unreachable(_) => ProbeResult::Unreachable,
        }
    }
}

impl std::fmt::Display for TcpAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TcpAnswer::Reachable { rtt } => {
                write!(f, "reachable (rtt {:.1} ms)", rtt.as_secs_f64() * 1e3)
            }
            TcpAnswer::Refused => write!(f, "refused (host up, portal not listening)"),
            TcpAnswer::Timeout => write!(f, "no answer (timeout)"),
            TcpAnswer::Unreachable(e) => write!(f, "unreachable ({})", e.desc()),
        }
    }
}

/// The engine's verdict on a probe and the words for the log: a probe that could not be made
/// (a local problem) tells nothing about the target, so it counts as unreachable.
pub fn verdict_of(probe: &Result<TcpAnswer, ProbeError>) -> (ProbeResult, String) {
    match probe {
        Ok(a) => (a.verdict(), a.to_string()),
        Err(e) => (ProbeResult::Unreachable, e.to_string()),
    }
}

/// Why a probe could not even be attempted (a local problem, not an answer from the network).
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The portal text is not an address.
    #[error("portal {portal:?} is not an IP address with an optional port (e.g. 192.0.2.2:3260 or [fe80::1]:3260)")]
    BadPortal {
        /// The text given.
        portal: String,
    },
    /// The local address and the portal are of different families.
    #[error("cannot probe {portal} from {local}: address families differ")]
    FamilyMismatch {
        /// The portal.
        portal: SocketAddr,
        /// The local address.
        local: IpAddr,
    },
    /// A socket call failed before any packet was sent.
    #[error("probe of {portal}: {op} failed: {errno}{}", hint(*errno, op))]
    Socket {
        /// The portal.
        portal: SocketAddr,
        /// Which call: "socket", "bind to device ens1f0", "bind to 192.0.2.1", "poll", …
        op: String,
        /// The error.
        errno: Errno,
    },
}

fn hint(errno: Errno, op: &str) -> &'static str {
    match errno {
        Errno::EPERM if op.starts_with("bind to device") => {
            "; binding to a device needs root (CAP_NET_RAW): run as root or probe by local address only"
        }
        Errno::EADDRNOTAVAIL => "; the interface no longer has that address: check `ip addr`",
        Errno::ENODEV => "; no such network device: check `ip link`",
        _ => "",
    }
}

impl ProbeError {
    /// The documented exit code ([`crate::exit`]) for a command that failed with this.
    pub fn status(&self) -> ExitStatus {
        match self {
            ProbeError::BadPortal { .. } => ExitStatus::Usage,
            ProbeError::FamilyMismatch { .. } => ExitStatus::Config,
            ProbeError::Socket { errno, .. } if *errno == Errno::EPERM => ExitStatus::NoPerm,
            ProbeError::Socket { .. } => ExitStatus::OsErr,
        }
    }
}

/// Probes portals. The real one is [`TcpProber`].
pub trait PortalProber: Send + Sync {
    /// One probe of `portal` from `source`, giving up after `timeout`.
    fn probe(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        timeout: Duration,
    ) -> Result<TcpAnswer, ProbeError>;
}

/// The real prober: a non-blocking TCP connect and `poll`.
#[derive(Debug, Clone, Default)]
pub struct TcpProber;

impl PortalProber for TcpProber {
    fn probe(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        timeout: Duration,
    ) -> Result<TcpAnswer, ProbeError> {
        probe_tcp(portal, source, timeout)
    }
}

/// Parses a portal as iscsiadm prints or accepts it: `ip`, `ip:port`, `ip:port,tpgt`,
/// `ip,port` (iscsiadm's login message form), `[v6]`, `[v6]:port`, `[v6]:port,tpgt`.
/// `default_port` (config `recovery.probe-port`) is used when none is given.
pub fn parse_portal(text: &str, default_port: u16) -> Result<SocketAddr, ProbeError> {
    let bad = || ProbeError::BadPortal {
        portal: text.to_string(),
    };
    let t = text.trim();
    if let Some(rest) = t.strip_prefix('[') {
        let (ip, after) = rest.split_once(']').ok_or_else(bad)?;
        let ip: IpAddr = ip.parse().map_err(|_| bad())?;
        let port = match after {
            "" => default_port,
            a => {
                let a = a
                    .strip_prefix(':')
                    .or_else(|| a.strip_prefix(','))
                    .ok_or_else(bad)?;
                let p = a.split(',').next().unwrap_or(a);
                p.parse().map_err(|_| bad())?
            }
        };
        return Ok(SocketAddr::new(ip, port));
    }
    if let Ok(ip) = t.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, default_port));
    }
    // IPv4 forms: "a.b.c.d:port[,tpgt]" or "a.b.c.d,port".
    let (ip, port) = match t.split_once(':') {
        Some((ip, rest)) => (ip, rest.split(',').next().unwrap_or(rest)),
        None => t.split_once(',').ok_or_else(bad)?,
    };
    let ip: std::net::Ipv4Addr = ip.parse().map_err(|_| bad())?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    Ok(SocketAddr::new(IpAddr::V4(ip), port))
}

/// One TCP connect to `portal`; see the module doc.
pub fn probe_tcp(
    portal: SocketAddr,
    source: &ProbeSource,
    timeout: Duration,
) -> Result<TcpAnswer, ProbeError> {
    let sock_err = |op: String, errno: Errno| ProbeError::Socket { portal, op, errno };
    let family = match portal {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd: OwnedFd = socket(
        family,
        SockType::Stream,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| sock_err("socket".into(), e))?;
    if let Some(dev) = &source.device {
        setsockopt(&fd, sockopt::BindToDevice, &std::ffi::OsString::from(dev))
            .map_err(|e| sock_err(format!("bind to device {dev}"), e))?;
    }
    if let Some(ip) = source.local_ip {
        if ip.is_ipv4() != portal.is_ipv4() {
            return Err(ProbeError::FamilyMismatch { portal, local: ip });
        }
        let local = SockaddrStorage::from(SocketAddr::new(ip, 0));
        bind(fd.as_raw_fd(), &local).map_err(|e| sock_err(format!("bind to {ip}"), e))?;
    }
    let start = Instant::now();
    let remote = SockaddrStorage::from(portal);
    match connect(fd.as_raw_fd(), &remote) {
        Ok(()) => {
            return Ok(TcpAnswer::Reachable {
                rtt: start.elapsed(),
            })
        }
        Err(Errno::EINPROGRESS) | Err(Errno::EINTR) => {}
        Err(e) => return classify(e, portal),
    }
    let deadline = start + timeout;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(TcpAnswer::Timeout);
        }
        // Round up so a sub-millisecond remainder does not become a busy 0 ms poll.
        let ms = u32::try_from(left.as_millis().saturating_add(1)).unwrap_or(u32::MAX);
        let pt = PollTimeout::try_from(ms).unwrap_or(PollTimeout::MAX);
        let mut fds = [PollFd::new(fd.as_fd(), PollFlags::POLLOUT)];
        match poll(&mut fds, pt) {
            Ok(0) => continue,
            Ok(_) => break,
            Err(Errno::EINTR) => continue,
            Err(e) => return Err(sock_err("poll".into(), e)),
        }
    }
    let rtt = start.elapsed();
    match getsockopt(&fd, sockopt::SocketError) {
        Ok(0) => Ok(TcpAnswer::Reachable { rtt }),
        Ok(code) => classify(Errno::from_raw(code), portal),
        Err(e) => Err(sock_err("getsockopt(SO_ERROR)".into(), e)),
    }
}

fn classify(e: Errno, portal: SocketAddr) -> Result<TcpAnswer, ProbeError> {
    Ok(match e {
        Errno::ECONNREFUSED => TcpAnswer::Refused,
        Errno::ETIMEDOUT => TcpAnswer::Timeout,
        Errno::EHOSTUNREACH
        | Errno::ENETUNREACH
        | Errno::ENETDOWN
        | Errno::EHOSTDOWN
        | Errno::ECONNRESET
        | Errno::ECONNABORTED
        | Errno::EACCES
        | Errno::EPERM => TcpAnswer::Unreachable(e),
        other => {
            return Err(ProbeError::Socket {
                portal,
                op: "connect".into(),
                errno: other,
            })
        }
    })
}

/// A scripted [`PortalProber`] for the daemon's tests and the simulator: answers per portal
/// from a queue ([`TcpAnswer::Timeout`] when empty: a target that is away) and records
/// every probe.
#[derive(Debug, Default)]
pub struct ScriptedProber {
    answers: std::sync::Mutex<
        std::collections::HashMap<SocketAddr, std::collections::VecDeque<TcpAnswer>>,
    >,
    calls: std::sync::Mutex<Vec<(SocketAddr, ProbeSource)>>,
}

impl ScriptedProber {
    /// Queues `results` for `portal`, answered in order.
    pub fn push(&self, portal: SocketAddr, results: impl IntoIterator<Item = TcpAnswer>) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(portal)
            .or_default()
            .extend(results);
    }

    /// Every probe so far, in order.
    pub fn calls(&self) -> Vec<(SocketAddr, ProbeSource)> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl PortalProber for ScriptedProber {
    fn probe(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        _timeout: Duration,
    ) -> Result<TcpAnswer, ProbeError> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((portal, source.clone()));
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&portal)
            .and_then(|q| q.pop_front());
        Ok(next.unwrap_or(TcpAnswer::Timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_answer_has_one_engine_verdict() {
        let rtt = Duration::from_millis(3);
        assert_eq!(
            TcpAnswer::Reachable { rtt }.verdict(),
            ProbeResult::Reachable
        );
        assert_eq!(TcpAnswer::Refused.verdict(), ProbeResult::Refused);
        assert_eq!(TcpAnswer::Timeout.verdict(), ProbeResult::Unreachable);
        assert_eq!(
            TcpAnswer::Unreachable(Errno::EHOSTUNREACH).verdict(),
            ProbeResult::Unreachable
        );
    }

    #[test]
    fn a_probe_that_could_not_be_made_is_unreachable_with_its_reason() {
        let (v, why) = verdict_of(&Err(ProbeError::BadPortal {
            portal: "nowhere".into(),
        }));
        assert_eq!(v, ProbeResult::Unreachable);
        assert!(why.contains("nowhere"), "{why}");
        let (v, why) = verdict_of(&Ok(TcpAnswer::Refused));
        assert_eq!(v, ProbeResult::Refused);
        assert!(why.starts_with("refused"), "{why}");
    }
}
