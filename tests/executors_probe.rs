//! Portal probes against loopback listeners only: accepting, closed port, and a listener whose
//! accept queue is full (SYNs dropped → timeout). Never any non-loopback address.

use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd;
use std::time::Duration;

use iser_guard::io::probe::{
    parse_portal, PortalProber, ProbeError, ProbeSource, TcpAnswer, TcpProber,
};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[test]
fn accepting_listener_is_reachable() {
    let l = TcpListener::bind((LOOPBACK, 0)).unwrap();
    let r = TcpProber
        .probe(
            l.local_addr().unwrap(),
            &ProbeSource::default(),
            Duration::from_secs(5),
        )
        .unwrap();
    assert!(matches!(r, TcpAnswer::Reachable { .. }), "{r:?}");
}

#[test]
fn bound_to_the_local_address_is_reachable() {
    let l = TcpListener::bind((LOOPBACK, 0)).unwrap();
    let src = ProbeSource {
        local_ip: Some(LOOPBACK),
        device: None,
    };
    let r = TcpProber
        .probe(l.local_addr().unwrap(), &src, Duration::from_secs(5))
        .unwrap();
    assert!(r.is_reachable(), "{r:?}");
}

#[test]
fn bound_to_device_lo_is_reachable_as_root_or_a_typed_eperm() {
    let l = TcpListener::bind((LOOPBACK, 0)).unwrap();
    let src = ProbeSource {
        local_ip: None,
        device: Some("lo".into()),
    };
    match TcpProber.probe(l.local_addr().unwrap(), &src, Duration::from_secs(5)) {
        Ok(r) => assert!(r.is_reachable(), "{r:?}"),
        Err(e @ ProbeError::Socket { .. }) => {
            assert!(e.to_string().contains("needs root"), "{e}");
        }
        Err(e) => panic!("{e:?}"),
    }
}

#[test]
fn unknown_device_is_a_typed_error() {
    let src = ProbeSource {
        local_ip: None,
        device: Some("nosuchdev0".into()),
    };
    let err = TcpProber
        .probe(SocketAddr::new(LOOPBACK, 9), &src, Duration::from_secs(1))
        .unwrap_err();
    assert!(matches!(err, ProbeError::Socket { .. }), "{err:?}");
}

#[test]
fn closed_port_is_refused() {
    // Bind then drop: the port is (almost certainly) free and nothing listens on it.
    let addr = TcpListener::bind((LOOPBACK, 0))
        .unwrap()
        .local_addr()
        .unwrap();
    let r = TcpProber
        .probe(addr, &ProbeSource::default(), Duration::from_secs(5))
        .unwrap();
    assert_eq!(r, TcpAnswer::Refused);
}

#[test]
fn full_accept_queue_times_out() {
    use nix::sys::socket::{
        bind, listen, socket, AddressFamily, Backlog, SockFlag, SockType, SockaddrIn,
    };
    // A listener with backlog 0 that never accepts: once one connection sits in its accept
    // queue, the kernel drops further SYNs (tcp_conn_request: accept queue full), so the probe
    // hears nothing at all, as from a powered-off target.
    let fd = socket(
        AddressFamily::Inet,
        SockType::Stream,
        SockFlag::empty(),
        None,
    )
    .unwrap();
    bind(fd.as_raw_fd(), &SockaddrIn::new(127, 0, 0, 1, 0)).unwrap();
    listen(&fd, Backlog::new(0).unwrap()).unwrap();
    let addr: SocketAddr = {
        let a: SockaddrIn = nix::sys::socket::getsockname(fd.as_raw_fd()).unwrap();
        SocketAddr::new(LOOPBACK, a.port())
    };
    // Fill the queue (a couple of fillers, in case the first lands before the limit applies).
    let mut fillers = Vec::new();
    for _ in 0..2 {
        let r = TcpProber.probe(addr, &ProbeSource::default(), Duration::from_millis(300));
        if let Ok(TcpAnswer::Reachable { .. }) = r {
            // Keep a real connection open: probe_tcp closes its own, so open one more that stays.
            fillers.push(std::net::TcpStream::connect_timeout(
                &addr,
                Duration::from_millis(300),
            ));
        }
    }
    let r = TcpProber
        .probe(addr, &ProbeSource::default(), Duration::from_millis(300))
        .unwrap();
    assert_eq!(r, TcpAnswer::Timeout);
}

#[test]
fn family_mismatch_is_refused_before_any_packet() {
    let src = ProbeSource {
        local_ip: Some("::1".parse().unwrap()),
        device: None,
    };
    let err = TcpProber
        .probe(
            SocketAddr::new(LOOPBACK, 3260),
            &src,
            Duration::from_secs(1),
        )
        .unwrap_err();
    assert!(matches!(err, ProbeError::FamilyMismatch { .. }), "{err:?}");
}

#[test]
fn portal_forms_from_iscsiadm_parse() {
    let p = |s| parse_portal(s, 3260).unwrap();
    assert_eq!(p("192.0.2.2"), "192.0.2.2:3260".parse().unwrap());
    assert_eq!(p("192.0.2.2:3261"), "192.0.2.2:3261".parse().unwrap());
    // -P 3 "Current Portal: 192.0.2.2:3260,1" (tpgt after the comma)
    assert_eq!(p("192.0.2.2:3260,1"), "192.0.2.2:3260".parse().unwrap());
    // login message "portal: 192.0.2.2,3260"
    assert_eq!(p("192.0.2.2,3260"), "192.0.2.2:3260".parse().unwrap());
    assert_eq!(p("[fe80::1]:3260,1"), "[fe80::1]:3260".parse().unwrap());
    assert_eq!(p("[fe80::1]"), "[fe80::1]:3260".parse().unwrap());
    assert_eq!(p("fe80::1"), "[fe80::1]:3260".parse().unwrap());
    for bad in [
        "",
        "host.example:3260",
        "192.0.2.2:x",
        "[fe80::1",
        "1.2.3.4:99999",
    ] {
        assert!(parse_portal(bad, 3260).is_err(), "{bad}");
    }
}
