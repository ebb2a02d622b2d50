//! The neighbour probe: does the target host answer ARP (IPv4) or neighbour discovery (IPv6)
//! on the netdev the kernel routes its portal through? A probe that needs no TCP listener,
//! for iSER portals that have none (arrays with iSER-only ports).
//!
//! Why the neighbour table and not ICMP echo: the packaged unit has no CAP_NET_RAW (no raw
//! ICMP socket), and an unprivileged ping socket works only when `net.ipv4.ping_group_range`
//! includes the daemon's group, which is a host setting iser-guard does not own (and many
//! arrays drop echo requests anyway). Every IP host must answer ARP/ND to be reached at all,
//! and reading the table over `NETLINK_ROUTE` needs no privilege (the same socket family as
//! [`crate::io::route`]); `/proc/net/arp` would give IPv4 only and no confirmation age.
//!
//! One probe: look the route up (`RTM_GETROUTE`: the output netdev), send one empty UDP
//! datagram to the portal (any outgoing packet makes the kernel resolve or re-verify the
//! entry; the target answers at most with an ICMP port-unreachable), then dump the table
//! (`RTM_GETNEIGH`) until the entry for the address on that netdev is `REACHABLE` with a
//! recent confirmation, or the deadline passes. "Recent" is [`FRESH`] plus the time since the
//! datagram: a STALE entry the kernel re-verifies by unicast only after its
//! `delay_first_probe_time` (5 s by default), so the confirmation that answers one round of
//! probes may be read by a later round. An entry confirmed longer ago says nothing about now.
//!
//! The codec ([`encode_dump`], [`decode_dump`]) and the verdict ([`judge`]) are pure and
//! tested on bytes laid out as `<linux/neighbour.h>` says; the socket part on loopback.

use std::net::{IpAddr, SocketAddr};
use std::os::fd::{AsFd, AsRawFd};
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::sys::socket::SockaddrStorage;
use nix::sys::socket::{bind, sendto, socket, AddressFamily, MsgFlags, SockFlag, SockType};

use super::probe::{ProbeError, ProbeSource};
use super::route::{self, RouteError};

/// `RTM_NEWNEIGH`.
const RTM_NEWNEIGH: u16 = 28;
/// `RTM_GETNEIGH`.
const RTM_GETNEIGH: u16 = 30;
/// `NLMSG_ERROR`.
const NLMSG_ERROR: u16 = 2;
/// `NLMSG_DONE`.
const NLMSG_DONE: u16 = 3;
/// `NLM_F_REQUEST | NLM_F_DUMP` (`NLM_F_ROOT | NLM_F_MATCH`).
const DUMP_FLAGS: u16 = 0x1 | 0x300;
/// `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;
/// `struct ndmsg`: family, pad, pad, ifindex, state, flags, type.
const NDMSG_LEN: usize = 12;
/// `NDA_DST`.
const NDA_DST: u16 = 1;
/// `NDA_CACHEINFO`.
const NDA_CACHEINFO: u16 = 3;
/// `AF_INET`.
const FAMILY_INET: u8 = 2;
/// `AF_INET6`.
const FAMILY_INET6: u8 = 10;
/// `USER_HZ`: `nda_cacheinfo` ages are in clock ticks (`jiffies_to_clock_t`), 100 a second on
/// every Linux architecture iser-guard runs on.
const USER_HZ: u64 = 100;

/// `NUD_REACHABLE`.
pub const NUD_REACHABLE: u16 = 0x02;
/// `NUD_NOARP`.
pub const NUD_NOARP: u16 = 0x40;
/// `NUD_PERMANENT`.
pub const NUD_PERMANENT: u16 = 0x80;

/// How long ago a confirmation may be (beyond the probe's own wait) and still answer it: the
/// kernel's default `delay_first_probe_time`, after which a used STALE entry is re-verified.
pub const FRESH: Duration = Duration::from_secs(5);

/// How often the table is read while waiting.
const POLL_EVERY: Duration = Duration::from_millis(20);

/// One neighbour table entry, as much as the probe needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NeighEntry {
    /// `ndm_ifindex`.
    pub ifindex: u32,
    /// `ndm_state` (`NUD_*` bits).
    pub state: u16,
    /// `NDA_DST`.
    pub dst: Option<IpAddr>,
    /// `nda_cacheinfo.ndm_confirmed`: time since the neighbour last confirmed its address.
    pub confirmed_ago: Option<Duration>,
}

/// The name of a `NUD_*` state, as `ip neigh` prints it.
pub fn state_name(state: u16) -> &'static str {
    match state {
        0x00 => "NONE",
        0x01 => "INCOMPLETE",
        0x02 => "REACHABLE",
        0x04 => "STALE",
        0x08 => "DELAY",
        0x10 => "PROBE",
        0x20 => "FAILED",
        0x40 => "NOARP",
        0x80 => "PERMANENT",
        _ => "mixed",
    }
}

/// What one neighbour probe found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NeighAnswer {
    /// The host confirmed its address on `netdev` `confirmed_ago` before the probe read it.
    Answered {
        /// The netdev the portal is routed through.
        netdev: String,
        /// The confirmation's age.
        confirmed_ago: Duration,
    },
    /// No recent confirmation within the deadline; the entry's last state, if any.
    NoAnswer {
        /// The netdev.
        netdev: String,
        /// `ip neigh`'s name for the entry's state, `None` when there is no entry.
        state: Option<&'static str>,
    },
    /// A static entry (`PERMANENT`, `NOARP`): the kernel never asks, so it cannot tell.
    Static {
        /// The netdev.
        netdev: String,
    },
}

impl std::fmt::Display for NeighAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NeighAnswer::Answered {
                netdev,
                confirmed_ago,
            } => write!(
                f,
                "the host answers ARP/ND on {netdev} (confirmed {} ms ago)",
                confirmed_ago.as_millis()
            ),
            NeighAnswer::NoAnswer {
                netdev,
                state: Some(s),
            } => write!(f, "no ARP/ND answer on {netdev} (entry {s})"),
            NeighAnswer::NoAnswer {
                netdev,
                state: None,
            } => write!(f, "no ARP/ND answer on {netdev} (no entry)"),
            NeighAnswer::Static { netdev } => write!(
                f,
                "the neighbour entry on {netdev} is static: ARP/ND cannot tell whether the host \
                 is up (remove the static entry or probe by tcp)"
            ),
        }
    }
}

impl NeighAnswer {
    /// The host answered.
    pub fn answered(&self) -> bool {
        matches!(self, NeighAnswer::Answered { .. })
    }
}

/// Probes the neighbour entry of a portal's address. The real one is [`NetlinkNeighbour`].
pub trait NeighbourProber: Send + Sync {
    /// One probe of `portal`'s address from `source`, giving up after `timeout`.
    fn probe(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        timeout: Duration,
    ) -> Result<NeighAnswer, ProbeError>;
}

/// The real neighbour probe (see the module doc).
#[derive(Debug, Clone, Default)]
pub struct NetlinkNeighbour;

impl NeighbourProber for NetlinkNeighbour {
    fn probe(
        &self,
        portal: SocketAddr,
        source: &ProbeSource,
        timeout: Duration,
    ) -> Result<NeighAnswer, ProbeError> {
        probe_neighbour(portal, source, timeout)
    }
}

/// The verdict on the entry for the address (`None`: no entry), `waited` after the datagram.
/// `None` while there is no answer yet (keep reading until the deadline).
pub fn judge(entry: Option<&NeighEntry>, waited: Duration, netdev: &str) -> Option<NeighAnswer> {
    let e = entry?;
    if e.state & (NUD_PERMANENT | NUD_NOARP) != 0 {
        return Some(NeighAnswer::Static {
            netdev: netdev.to_string(),
        });
    }
    let ago = e.confirmed_ago?;
    (e.state & NUD_REACHABLE != 0 && ago <= waited + FRESH).then(|| NeighAnswer::Answered {
        netdev: netdev.to_string(),
        confirmed_ago: ago,
    })
}

fn route_err(portal: SocketAddr, e: RouteError) -> ProbeError {
    ProbeError::Socket {
        portal,
        op: format!("route lookup ({e})"),
        errno: match e {
            RouteError::NoRoute { errno, .. } => Errno::from_raw(errno),
            RouteError::Timeout { .. } => Errno::ETIMEDOUT,
            RouteError::Local(_) => Errno::EADDRNOTAVAIL,
            RouteError::NoSuchInterface(_) => Errno::ENODEV,
            _ => Errno::EIO,
        },
    }
}

/// One neighbour probe of `portal`'s address; see the module doc.
pub fn probe_neighbour(
    portal: SocketAddr,
    source: &ProbeSource,
    timeout: Duration,
) -> Result<NeighAnswer, ProbeError> {
    let start = Instant::now();
    let addr = portal.ip();
    let r = route::route_get(addr, timeout).map_err(|e| route_err(portal, e))?;
    if r.kind == route::RTN_LOCAL {
        return Err(route_err(portal, RouteError::Local(addr)));
    }
    let oif = r.oif.ok_or_else(|| {
        route_err(
            portal,
            RouteError::Malformed("the route names no output interface".into()),
        )
    })?;
    let netdev = route::interface_name(oif).map_err(|e| route_err(portal, e))?;
    send_trigger(portal, source)?;
    let sent = Instant::now();
    let deadline = start + timeout;
    let mut last: Option<NeighEntry> = None;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let entries = dump(addr, left.max(POLL_EVERY)).map_err(|e| route_err(portal, e))?;
        last = entries
            .into_iter()
            .find(|e| e.ifindex == oif && e.dst == Some(addr))
            .or(last);
        if let Some(answer) = judge(last.as_ref(), sent.elapsed(), &netdev) {
            return Ok(answer);
        }
        if Instant::now() + POLL_EVERY >= deadline {
            return Ok(NeighAnswer::NoAnswer {
                netdev,
                state: last.map(|e| state_name(e.state)),
            });
        }
        std::thread::sleep(POLL_EVERY);
    }
}

/// One empty UDP datagram to the portal, from the iSER interface's address when known: the
/// packet that makes the kernel resolve (or re-verify) the neighbour.
fn send_trigger(portal: SocketAddr, source: &ProbeSource) -> Result<(), ProbeError> {
    let sock_err = |op: String, errno: Errno| ProbeError::Socket { portal, op, errno };
    let family = match portal {
        SocketAddr::V4(_) => AddressFamily::Inet,
        SocketAddr::V6(_) => AddressFamily::Inet6,
    };
    let fd = socket(
        family,
        SockType::Datagram,
        SockFlag::SOCK_NONBLOCK | SockFlag::SOCK_CLOEXEC,
        None,
    )
    .map_err(|e| sock_err("socket (udp)".into(), e))?;
    if let Some(ip) = source.local_ip {
        if ip.is_ipv4() != portal.is_ipv4() {
            return Err(ProbeError::FamilyMismatch { portal, local: ip });
        }
        bind(
            fd.as_raw_fd(),
            &SockaddrStorage::from(SocketAddr::new(ip, 0)),
        )
        .map_err(|e| sock_err(format!("bind to {ip}"), e))?;
    }
    match sendto(
        fd.as_fd().as_raw_fd(),
        &[],
        &SockaddrStorage::from(portal),
        MsgFlags::MSG_DONTWAIT,
    ) {
        // EAGAIN: the packet waits in the neighbour's queue, which is the point.
        Ok(_) | Err(Errno::EAGAIN) => Ok(()),
        // The kernel already knows the neighbour is unreachable: the table says so too.
        Err(Errno::EHOSTUNREACH) | Err(Errno::ENETUNREACH) => Ok(()),
        Err(e) => Err(sock_err("send (udp)".into(), e)),
    }
}

/// An `RTM_GETNEIGH` dump request for `family`'s table.
pub fn encode_dump(addr: IpAddr, seq: u32) -> Vec<u8> {
    let family = if addr.is_ipv4() {
        FAMILY_INET
    } else {
        FAMILY_INET6
    };
    let len = NLMSG_HDRLEN + NDMSG_LEN;
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&u32::try_from(len).unwrap_or(0).to_ne_bytes());
    b.extend_from_slice(&RTM_GETNEIGH.to_ne_bytes());
    b.extend_from_slice(&DUMP_FLAGS.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&[family, 0, 0, 0]);
    b.extend_from_slice(&[0u8; 8]);
    b
}

/// What one datagram of a dump held.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct DumpPart {
    /// Its entries.
    pub entries: Vec<NeighEntry>,
    /// It ended the dump (`NLMSG_DONE`).
    pub done: bool,
}

/// Decodes one datagram of the dump answering `seq`.
pub fn decode_dump(datagram: &[u8], seq: u32) -> Result<DumpPart, route::ReplyDecodeError> {
    use route::ReplyDecodeError;
    let mut part = DumpPart::default();
    let mut at = 0;
    while at + NLMSG_HDRLEN <= datagram.len() {
        let len = route::u32_at(datagram, at).map_or(0, |l| usize::try_from(l).unwrap_or(0));
        if len < NLMSG_HDRLEN || at + len > datagram.len() {
            return Err(ReplyDecodeError::Malformed(format!(
                "message length {len} at offset {at} of a {}-byte datagram",
                datagram.len()
            )));
        }
        let msg = &datagram[at..at + len];
        let kind = route::u16_at(msg, 4).unwrap_or(0);
        let this_seq = route::u32_at(msg, 8).unwrap_or(0);
        at += (len + 3) & !3;
        if this_seq != seq {
            continue;
        }
        let body = &msg[NLMSG_HDRLEN..];
        match kind {
            NLMSG_DONE => part.done = true,
            NLMSG_ERROR => {
                let code = body
                    .get(0..4)
                    .and_then(|b| b.try_into().ok())
                    .map(i32::from_ne_bytes)
                    .ok_or_else(|| {
                        ReplyDecodeError::Malformed("NLMSG_ERROR without its code".into())
                    })?;
                return Err(ReplyDecodeError::Errno(code.saturating_neg()));
            }
            RTM_NEWNEIGH => part.entries.push(decode_entry(body)?),
            _ => {}
        }
    }
    Ok(part)
}

fn decode_entry(body: &[u8]) -> Result<NeighEntry, route::ReplyDecodeError> {
    use route::ReplyDecodeError;
    if body.len() < NDMSG_LEN {
        return Err(ReplyDecodeError::Malformed(
            "RTM_NEWNEIGH shorter than ndmsg".into(),
        ));
    }
    let family = body[0];
    let mut e = NeighEntry {
        ifindex: route::u32_at(body, 4).unwrap_or(0),
        state: route::u16_at(body, 8).unwrap_or(0),
        dst: None,
        confirmed_ago: None,
    };
    let mut a = NDMSG_LEN;
    while a + 4 <= body.len() {
        let rta_len = usize::from(route::u16_at(body, a).unwrap_or(0));
        let rta_type = route::u16_at(body, a + 2).unwrap_or(0);
        if rta_len < 4 || a + rta_len > body.len() {
            return Err(ReplyDecodeError::Malformed(format!(
                "neighbour attribute length {rta_len} at offset {a}"
            )));
        }
        let payload = &body[a + 4..a + rta_len];
        match rta_type {
            NDA_DST => e.dst = route::ip_of(family, payload),
            NDA_CACHEINFO => {
                e.confirmed_ago = route::u32_at(payload, 0)
                    .map(|t| Duration::from_millis(u64::from(t) * 1000 / USER_HZ));
            }
            _ => {}
        }
        a += (rta_len + 3) & !3;
    }
    Ok(e)
}

/// The whole neighbour table of `addr`'s family.
pub fn dump(addr: IpAddr, timeout: Duration) -> Result<Vec<NeighEntry>, RouteError> {
    let seq = 1;
    let sock = route::send_request(&encode_dump(addr, seq))?;
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 32 * 1024];
    let mut entries = Vec::new();
    loop {
        let n = match route::recv_until(&sock, &mut buf, deadline) {
            Ok(Some(n)) => n,
            Ok(None) => return Err(RouteError::Timeout { addr, timeout }),
            Err(e) => return Err(e),
        };
        match decode_dump(&buf[..n.min(buf.len())], seq) {
            Ok(part) => {
                entries.extend(part.entries);
                if part.done {
                    return Ok(entries);
                }
            }
            Err(route::ReplyDecodeError::Errno(errno)) => {
                return Err(RouteError::NoRoute { addr, errno })
            }
            Err(route::ReplyDecodeError::Malformed(m)) => return Err(RouteError::Malformed(m)),
        }
    }
}

/// A scripted [`NeighbourProber`] for tests and the simulator: answers per portal from a
/// queue (no answer, with no entry, when empty) and records every probe.
#[derive(Debug, Default)]
pub struct ScriptedNeighbour {
    answers: std::sync::Mutex<
        std::collections::HashMap<SocketAddr, std::collections::VecDeque<NeighAnswer>>,
    >,
    calls: std::sync::Mutex<Vec<SocketAddr>>,
}

impl ScriptedNeighbour {
    /// Queues `answers` for `portal`, given in order.
    pub fn push(&self, portal: SocketAddr, answers: impl IntoIterator<Item = NeighAnswer>) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(portal)
            .or_default()
            .extend(answers);
    }

    /// Every probe so far, in order.
    pub fn calls(&self) -> Vec<SocketAddr> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl NeighbourProber for ScriptedNeighbour {
    fn probe(
        &self,
        portal: SocketAddr,
        _source: &ProbeSource,
        _timeout: Duration,
    ) -> Result<NeighAnswer, ProbeError> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(portal);
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&portal)
            .and_then(|q| q.pop_front());
        Ok(next.unwrap_or(NeighAnswer::NoAnswer {
            netdev: "scripted".into(),
            state: None,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTM_NEWNEIGH as the kernel sends it for `ip neigh` on ini0 (ifindex 3): 192.0.2.2
    /// REACHABLE, lladdr, cache info confirmed 120 ticks (1.2 s) ago, probes 1.
    fn entry_msg(seq: u32, state: u16, confirmed_ticks: u32) -> Vec<u8> {
        let mut body = vec![FAMILY_INET, 0, 0, 0];
        body.extend_from_slice(&3u32.to_ne_bytes());
        body.extend_from_slice(&state.to_ne_bytes());
        body.extend_from_slice(&[0, 1]); // flags, type RTN_UNICAST
        let mut rta = |t: u16, p: &[u8]| {
            let len = 4 + p.len();
            body.extend_from_slice(&u16::try_from(len).unwrap().to_ne_bytes());
            body.extend_from_slice(&t.to_ne_bytes());
            body.extend_from_slice(p);
            while body.len() % 4 != 0 {
                body.push(0);
            }
        };
        rta(NDA_DST, &[192, 0, 2, 2]);
        rta(2, &[0x52, 0x54, 0, 0x12, 0x34, 0x56]); // NDA_LLADDR
        let mut ci = Vec::new();
        for v in [confirmed_ticks, 50, 120, 1] {
            ci.extend_from_slice(&v.to_ne_bytes());
        }
        rta(NDA_CACHEINFO, &ci);
        rta(4, &1u32.to_ne_bytes()); // NDA_PROBES
        let mut m = Vec::new();
        let len = NLMSG_HDRLEN + body.len();
        m.extend_from_slice(&u32::try_from(len).unwrap().to_ne_bytes());
        m.extend_from_slice(&RTM_NEWNEIGH.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes()); // NLM_F_MULTI
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&body);
        m
    }

    fn done_msg(seq: u32) -> Vec<u8> {
        let mut m = Vec::new();
        m.extend_from_slice(&20u32.to_ne_bytes());
        m.extend_from_slice(&NLMSG_DONE.to_ne_bytes());
        m.extend_from_slice(&2u16.to_ne_bytes());
        m.extend_from_slice(&seq.to_ne_bytes());
        m.extend_from_slice(&0u32.to_ne_bytes());
        m.extend_from_slice(&0i32.to_ne_bytes());
        m
    }

    #[test]
    fn the_request_is_a_getneigh_dump_of_the_family() {
        let r = encode_dump("192.0.2.2".parse().unwrap(), 7);
        assert_eq!(r.len(), 28);
        assert_eq!(route::u16_at(&r, 4), Some(RTM_GETNEIGH));
        assert_eq!(route::u16_at(&r, 6), Some(0x301));
        assert_eq!(r[16], FAMILY_INET);
        let r6 = encode_dump("fe80::1".parse().unwrap(), 7);
        assert_eq!(r6[16], FAMILY_INET6);
    }

    #[test]
    fn a_dump_gives_the_entries_their_state_and_confirmation_age() {
        let mut d = entry_msg(1, NUD_REACHABLE, 120);
        d.extend(entry_msg(2, NUD_REACHABLE, 1)); // another request's: skipped
        d.extend(done_msg(1));
        let part = decode_dump(&d, 1).unwrap();
        assert!(part.done);
        assert_eq!(
            part.entries,
            vec![NeighEntry {
                ifindex: 3,
                state: NUD_REACHABLE,
                dst: Some("192.0.2.2".parse().unwrap()),
                confirmed_ago: Some(Duration::from_millis(1200)),
            }]
        );
    }

    #[test]
    fn errors_and_garbage_are_typed_never_panics() {
        let mut d = entry_msg(1, NUD_REACHABLE, 1);
        d.truncate(d.len() - 3);
        assert!(matches!(
            decode_dump(&d, 1),
            Err(route::ReplyDecodeError::Malformed(_))
        ));
        for n in 0..64 {
            let _ = decode_dump(&entry_msg(1, 4, 9)[..n.min(60)], 1);
        }
        let mut err = Vec::new();
        err.extend_from_slice(&36u32.to_ne_bytes());
        err.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        err.extend_from_slice(&0u16.to_ne_bytes());
        err.extend_from_slice(&1u32.to_ne_bytes());
        err.extend_from_slice(&0u32.to_ne_bytes());
        err.extend_from_slice(&(-1i32).to_ne_bytes());
        err.extend_from_slice(&[0u8; 16]);
        assert_eq!(decode_dump(&err, 1), Err(route::ReplyDecodeError::Errno(1)));
    }

    #[test]
    fn only_a_recent_reachable_confirmation_is_an_answer() {
        let e = |state, ms| NeighEntry {
            ifindex: 3,
            state,
            dst: None,
            confirmed_ago: Some(Duration::from_millis(ms)),
        };
        let w = Duration::from_millis(100);
        assert!(judge(Some(&e(NUD_REACHABLE, 30)), w, "ini0")
            .unwrap()
            .answered());
        // Confirmed before the window: the kernel has not asked again yet.
        assert_eq!(judge(Some(&e(NUD_REACHABLE, 5200)), w, "ini0"), None);
        // STALE, DELAY, PROBE, INCOMPLETE, FAILED: not (yet) an answer.
        for s in [0x04, 0x08, 0x10, 0x01, 0x20] {
            assert_eq!(judge(Some(&e(s, 10)), w, "ini0"), None, "{s:#x}");
        }
        assert_eq!(judge(None, w, "ini0"), None);
        assert!(matches!(
            judge(Some(&e(NUD_PERMANENT, 10)), w, "ini0"),
            Some(NeighAnswer::Static { .. })
        ));
    }

    #[test]
    fn the_real_table_is_readable_unprivileged() {
        // Loopback has no neighbour entries of its own, but the dump itself must work
        // (build machines have an IPv4 table).
        let entries = dump("127.0.0.1".parse().unwrap(), Duration::from_secs(2)).unwrap();
        for e in entries {
            assert!(e.ifindex > 0, "{e:?}");
        }
    }

    #[test]
    fn a_local_address_is_a_typed_error_not_an_answer() {
        let err = probe_neighbour(
            "127.0.0.1:3260".parse().unwrap(),
            &ProbeSource::default(),
            Duration::from_millis(300),
        )
        .unwrap_err();
        assert!(err.to_string().contains("address of this host"), "{err}");
    }
}
