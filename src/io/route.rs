//! Which netdev the kernel routes an address through: one `RTM_GETROUTE` over
//! `NETLINK_ROUTE`, as `ip route get <addr>` does.
//!
//! ib_iser connects by the target address alone, so `rdma_resolve_addr` picks the RDMA
//! device by this route; session placement uses it when no CM id names the device
//! (`crate::core::session_map`). The request carries only `RTA_DST`: the kernel does an
//! output lookup as for a locally generated packet (`iif lo` policy rules apply, as in the
//! lab's table 200). The answer is an `RTM_NEWROUTE` whose `RTA_OIF` is the netdev's index
//! and `RTA_PREFSRC` the source address it would use.
//!
//! The codec (`encode_request`, `decode_reply`) is pure and tested on synthetic bytes laid
//! out as `<linux/rtnetlink.h>` says; the socket part is tested on loopback.

use std::net::IpAddr;
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// `RTM_NEWROUTE`.
const RTM_NEWROUTE: u16 = 24;
/// `RTM_GETROUTE`.
const RTM_GETROUTE: u16 = 26;
/// `NLMSG_ERROR`.
const NLMSG_ERROR: u16 = 2;
/// `NLM_F_REQUEST`.
const NLM_F_REQUEST: u16 = 1;
/// `RTA_DST`.
const RTA_DST: u16 = 1;
/// `RTA_OIF`.
const RTA_OIF: u16 = 4;
/// `RTA_PREFSRC`.
const RTA_PREFSRC: u16 = 7;
/// `struct nlmsghdr`.
const NLMSG_HDRLEN: usize = 16;
/// `struct rtmsg`.
const RTMSG_LEN: usize = 12;
/// `RTN_LOCAL`: the address is one of this host's.
pub const RTN_LOCAL: u8 = 2;
/// `AF_INET` as `rtm_family` carries it.
const FAMILY_INET: u8 = 2;
/// `AF_INET6` (Linux).
const FAMILY_INET6: u8 = 10;

/// What can go wrong looking a route up.
#[derive(Debug, thiserror::Error)]
pub enum RouteError {
    /// A socket call failed.
    #[error("route netlink {op} failed: {source}")]
    Os {
        /// `socket`, `bind`, `send`, `recv`, `poll`.
        op: &'static str,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The kernel has no route (`ENETUNREACH`, …).
    #[error("no route to {addr}: {}", std::io::Error::from_raw_os_error(*.errno))]
    NoRoute {
        /// The address looked up.
        addr: IpAddr,
        /// The (positive) errno.
        errno: i32,
    },
    /// No answer in time.
    #[error("no answer from route netlink for {addr} within {timeout:?}")]
    Timeout {
        /// The address looked up.
        addr: IpAddr,
        /// The deadline.
        timeout: Duration,
    },
    /// An answer that cannot be decoded.
    #[error("malformed route netlink reply: {0}")]
    Malformed(String),
    /// The route's interface index has no name (the netdev just vanished).
    #[error("interface index {0} has no name")]
    NoSuchInterface(u32),
    /// The address is one of this host's (`local … dev lo`): the route says nothing about
    /// which netdev a connection to it uses.
    #[error("{0} is an address of this host (local route)")]
    Local(IpAddr),
}

/// The kernel's answer to a route lookup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteAnswer {
    /// `RTA_OIF`: the output interface index.
    pub oif: Option<u32>,
    /// `RTA_PREFSRC`: the source address the kernel would pick.
    pub prefsrc: Option<IpAddr>,
    /// `rtm_type` (`RTN_UNICAST` 1, [`RTN_LOCAL`] 2, …).
    pub kind: u8,
}

/// An `RTM_GETROUTE` request for `addr` (the sequence number `seq`).
pub fn encode_request(addr: IpAddr, seq: u32) -> Vec<u8> {
    let (family, bits, octets): (u8, u8, Vec<u8>) = match addr {
        IpAddr::V4(a) => (FAMILY_INET, 32, a.octets().to_vec()),
        IpAddr::V6(a) => (FAMILY_INET6, 128, a.octets().to_vec()),
    };
    let rta_len = 4 + octets.len();
    let len = NLMSG_HDRLEN + RTMSG_LEN + rta_len;
    let mut b = Vec::with_capacity(len);
    b.extend_from_slice(&u32::try_from(len).unwrap_or(0).to_ne_bytes());
    b.extend_from_slice(&RTM_GETROUTE.to_ne_bytes());
    b.extend_from_slice(&NLM_F_REQUEST.to_ne_bytes());
    b.extend_from_slice(&seq.to_ne_bytes());
    b.extend_from_slice(&0u32.to_ne_bytes());
    // rtmsg: family, dst_len, src_len, tos, table, protocol, scope, type, flags.
    b.extend_from_slice(&[family, bits, 0, 0, 0, 0, 0, 0]);
    b.extend_from_slice(&0u32.to_ne_bytes());
    b.extend_from_slice(&u16::try_from(rta_len).unwrap_or(0).to_ne_bytes());
    b.extend_from_slice(&RTA_DST.to_ne_bytes());
    b.extend_from_slice(&octets);
    b
}

pub(crate) fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

pub(crate) fn ip_of(family: u8, b: &[u8]) -> Option<IpAddr> {
    match (family, b.len()) {
        (FAMILY_INET, 4) => Some(IpAddr::from(<[u8; 4]>::try_from(b).ok()?)),
        (FAMILY_INET6, 16) => Some(IpAddr::from(<[u8; 16]>::try_from(b).ok()?)),
        _ => None,
    }
}

/// Decodes one datagram answering request `seq`: `Ok(Some(answer))` for an RTM_NEWROUTE,
/// `Err(errno)` (positive) for an NLMSG_ERROR, `Ok(None)` when nothing in it answers `seq`.
pub fn decode_reply(datagram: &[u8], seq: u32) -> Result<Option<RouteAnswer>, ReplyDecodeError> {
    let mut at = 0;
    while at + NLMSG_HDRLEN <= datagram.len() {
        let len = u32_at(datagram, at).map_or(0, |l| usize::try_from(l).unwrap_or(0));
        if len < NLMSG_HDRLEN || at + len > datagram.len() {
            return Err(ReplyDecodeError::Malformed(format!(
                "message length {len} at offset {at} of a {}-byte datagram",
                datagram.len()
            )));
        }
        let msg = &datagram[at..at + len];
        let kind = u16_at(msg, 4).unwrap_or(0);
        let this_seq = u32_at(msg, 8).unwrap_or(0);
        at += (len + 3) & !3;
        if this_seq != seq {
            continue;
        }
        let body = &msg[NLMSG_HDRLEN..];
        match kind {
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
            RTM_NEWROUTE => {
                if body.len() < RTMSG_LEN {
                    return Err(ReplyDecodeError::Malformed(
                        "RTM_NEWROUTE shorter than rtmsg".into(),
                    ));
                }
                let family = body[0];
                let mut answer = RouteAnswer {
                    oif: None,
                    prefsrc: None,
                    kind: body[7],
                };
                let mut a = RTMSG_LEN;
                while a + 4 <= body.len() {
                    let rta_len = usize::from(u16_at(body, a).unwrap_or(0));
                    let rta_type = u16_at(body, a + 2).unwrap_or(0);
                    if rta_len < 4 || a + rta_len > body.len() {
                        return Err(ReplyDecodeError::Malformed(format!(
                            "route attribute length {rta_len} at offset {a}"
                        )));
                    }
                    let payload = &body[a + 4..a + rta_len];
                    match rta_type {
                        RTA_OIF => answer.oif = u32_at(payload, 0),
                        RTA_PREFSRC => answer.prefsrc = ip_of(family, payload),
                        _ => {}
                    }
                    a += (rta_len + 3) & !3;
                }
                return Ok(Some(answer));
            }
            _ => {}
        }
    }
    Ok(None)
}

/// Names the netdev the kernel routes an address through (`ip route get`, [`route_netdev`]
/// or a double); `Err` says why there is no answer. The daemon shares one
/// (`Arc<RouteLookup>`), doctor borrows one.
pub type RouteLookup = dyn Fn(IpAddr) -> Result<String, String> + Send + Sync;

/// What [`decode_reply`] could not turn into an answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ReplyDecodeError {
    /// The kernel answered NLMSG_ERROR with this (positive) errno.
    Errno(i32),
    /// Bytes that are not a netlink reply.
    Malformed(String),
}

/// Asks the kernel which interface index it routes `addr` through.
pub fn route_get(addr: IpAddr, timeout: Duration) -> Result<RouteAnswer, RouteError> {
    let seq = 1;
    let sock = send_request(&encode_request(addr, seq))?;
    let deadline = Instant::now() + timeout;
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let Some(n) = recv_until(&sock, &mut buf, deadline)? else {
            return Err(RouteError::Timeout { addr, timeout });
        };
        match decode_reply(&buf[..n.min(buf.len())], seq) {
            Ok(Some(answer)) => return Ok(answer),
            Ok(None) => continue,
            Err(ReplyDecodeError::Errno(errno)) => return Err(RouteError::NoRoute { addr, errno }),
            Err(ReplyDecodeError::Malformed(m)) => return Err(RouteError::Malformed(m)),
        }
    }
}

/// A fresh non-blocking NETLINK_ROUTE socket that has sent `msg` to the kernel: the caller
/// reads the answer with [`recv_until`].
pub(crate) fn send_request(msg: &[u8]) -> Result<netlink_sys::Socket, RouteError> {
    use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};
    let os = |op| move |source| RouteError::Os { op, source };
    let mut sock = Socket::new(NETLINK_ROUTE).map_err(os("socket"))?;
    sock.bind_auto().map_err(os("bind"))?;
    sock.set_non_blocking(true).map_err(os("fcntl"))?;
    sock.send_to(msg, &SocketAddr::new(0, 0), 0)
        .map_err(os("send"))?;
    Ok(sock)
}

/// One datagram from a non-blocking netlink socket, waiting until `deadline`: its length, or
/// `None` when the deadline passed first.
pub(crate) fn recv_until(
    sock: &netlink_sys::Socket,
    buf: &mut [u8],
    deadline: Instant,
) -> Result<Option<usize>, RouteError> {
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let ms = i32::try_from(left.as_millis().max(1)).unwrap_or(i32::MAX);
        let mut fds = [nix::poll::PollFd::new(
            sock.as_fd(),
            nix::poll::PollFlags::POLLIN,
        )];
        let wait = nix::poll::PollTimeout::try_from(ms).unwrap_or(nix::poll::PollTimeout::MAX);
        match nix::poll::poll(&mut fds, wait) {
            Ok(0) => return Ok(None),
            Ok(_) => {}
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => {
                return Err(RouteError::Os {
                    op: "poll",
                    source: e.into(),
                })
            }
        }
        match sock.recv(&mut &mut buf[..], 0) {
            Ok(n) => return Ok(Some(n)),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(source) => return Err(RouteError::Os { op: "recv", source }),
        }
    }
}

/// The name of an interface index (`if_indextoname`).
pub fn interface_name(index: u32) -> Result<String, RouteError> {
    let mut buf = [0 as libc::c_char; libc::IF_NAMESIZE];
    // SAFETY: `buf` has IF_NAMESIZE bytes, as if_indextoname requires; it NUL-terminates.
    let p = unsafe { libc::if_indextoname(index, buf.as_mut_ptr()) };
    if p.is_null() {
        return Err(RouteError::NoSuchInterface(index));
    }
    // SAFETY: on success the buffer holds a NUL-terminated name.
    let name = unsafe { std::ffi::CStr::from_ptr(buf.as_ptr()) };
    Ok(name.to_string_lossy().into_owned())
}

/// The netdev the kernel routes `addr` through (`ip route get <addr>` → `dev …`). An address
/// of this host is [`RouteError::Local`]: its route (`dev lo`) names no netdev a connection
/// would leave by.
pub fn route_netdev(addr: IpAddr) -> Result<String, RouteError> {
    let answer = route_get(addr, Duration::from_secs(1))?;
    if answer.kind == RTN_LOCAL {
        return Err(RouteError::Local(addr));
    }
    let oif = answer
        .oif
        .ok_or_else(|| RouteError::Malformed("the route names no output interface".into()))?;
    interface_name(oif)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An RTM_NEWROUTE as the kernel answers `ip route get 192.0.2.2` in the lab: table 200,
    /// dst 192.0.2.2/32, oif 3 (ini0), prefsrc 192.0.2.1, uid 0, cache info.
    fn lab_reply(seq: u32) -> Vec<u8> {
        let mut attrs = Vec::new();
        let mut rta = |t: u16, p: &[u8]| {
            let len = 4 + p.len();
            attrs.extend_from_slice(&u16::try_from(len).unwrap().to_ne_bytes());
            attrs.extend_from_slice(&t.to_ne_bytes());
            attrs.extend_from_slice(p);
            while attrs.len() % 4 != 0 {
                attrs.push(0);
            }
        };
        rta(15, &200u32.to_ne_bytes()); // RTA_TABLE
        rta(RTA_DST, &[192, 0, 2, 2]);
        rta(RTA_OIF, &3u32.to_ne_bytes());
        rta(RTA_PREFSRC, &[192, 0, 2, 1]);
        rta(25, &0u32.to_ne_bytes()); // RTA_UID
        rta(12, &[0u8; 16]); // RTA_CACHEINFO (truncated form; ignored)
        let len = NLMSG_HDRLEN + RTMSG_LEN + attrs.len();
        let mut b = Vec::new();
        b.extend_from_slice(&u32::try_from(len).unwrap().to_ne_bytes());
        b.extend_from_slice(&RTM_NEWROUTE.to_ne_bytes());
        b.extend_from_slice(&0u16.to_ne_bytes());
        b.extend_from_slice(&seq.to_ne_bytes());
        b.extend_from_slice(&4242u32.to_ne_bytes());
        // rtmsg: AF_INET, /32, table 200 (also in RTA_TABLE), RTPROT_UNSPEC... RTN_UNICAST,
        // flags RTM_F_CLONED (0x200).
        b.extend_from_slice(&[2, 32, 0, 0, 200, 0, 253, 1]);
        b.extend_from_slice(&0x200u32.to_ne_bytes());
        b.extend_from_slice(&attrs);
        b
    }

    #[test]
    fn the_family_numbers_are_the_kernels() {
        assert_eq!(i32::from(FAMILY_INET), libc::AF_INET);
        assert_eq!(i32::from(FAMILY_INET6), libc::AF_INET6);
    }

    #[test]
    fn the_request_is_a_getroute_with_only_the_destination() {
        let b = encode_request("192.0.2.2".parse().unwrap(), 7);
        assert_eq!(b.len(), 16 + 12 + 8);
        assert_eq!(u32_at(&b, 0), Some(36));
        assert_eq!(u16_at(&b, 4), Some(RTM_GETROUTE));
        assert_eq!(u16_at(&b, 6), Some(NLM_F_REQUEST));
        assert_eq!(u32_at(&b, 8), Some(7));
        assert_eq!(&b[16..20], &[2, 32, 0, 0]);
        assert_eq!(&b[28..36], &[8, 0, 1, 0, 192, 0, 2, 2]);
        let b6 = encode_request("2001:db8::2".parse().unwrap(), 1);
        assert_eq!(b6.len(), 16 + 12 + 20);
        assert_eq!(b6[16], FAMILY_INET6);
        assert_eq!(b6[17], 128);
    }

    #[test]
    fn a_lab_shaped_reply_gives_the_interface_and_source() {
        assert_eq!(
            decode_reply(&lab_reply(9), 9),
            Ok(Some(RouteAnswer {
                oif: Some(3),
                prefsrc: Some("192.0.2.1".parse().unwrap()),
                kind: 1,
            }))
        );
        // A reply to another request is not ours.
        assert_eq!(decode_reply(&lab_reply(8), 9), Ok(None));
    }

    #[test]
    fn errors_and_garbage_are_typed_never_panics() {
        // NLMSG_ERROR -101 (ENETUNREACH) echoing the request header.
        let mut e = Vec::new();
        e.extend_from_slice(&36u32.to_ne_bytes());
        e.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        e.extend_from_slice(&0u16.to_ne_bytes());
        e.extend_from_slice(&5u32.to_ne_bytes());
        e.extend_from_slice(&0u32.to_ne_bytes());
        e.extend_from_slice(&(-101i32).to_ne_bytes());
        e.extend_from_slice(&encode_request("203.0.113.9".parse().unwrap(), 5)[..16]);
        assert_eq!(decode_reply(&e, 5), Err(ReplyDecodeError::Errno(101)));
        let good = lab_reply(1);
        for cut in 0..good.len() {
            let _ = decode_reply(&good[..cut], 1);
        }
        let mut bad = good.clone();
        bad[28] = 0xff; // first attribute's length
        assert!(matches!(
            decode_reply(&bad, 1),
            Err(ReplyDecodeError::Malformed(_))
        ));
    }

    #[test]
    fn loopback_routes_through_lo() {
        // `ip route get 127.0.0.1`: local 127.0.0.1 dev lo src 127.0.0.1.
        let a = route_get("127.0.0.1".parse().unwrap(), Duration::from_secs(1)).unwrap();
        assert_eq!(interface_name(a.oif.unwrap()).unwrap(), "lo");
        assert_eq!(a.prefsrc, Some("127.0.0.1".parse().unwrap()));
        assert_eq!(a.kind, RTN_LOCAL);
        // A local address tells nothing about the netdev a connection would leave by.
        assert!(matches!(
            route_netdev("127.0.0.1".parse().unwrap()),
            Err(RouteError::Local(_))
        ));
    }

    #[test]
    fn an_unknown_index_is_a_typed_error() {
        assert!(matches!(
            interface_name(u32::MAX),
            Err(RouteError::NoSuchInterface(_))
        ));
    }
}
