//! The session-listing door of the core (`session_map::place_listing`) on real `-P 3`
//! listings: the only port, the route, and one warning for a session nothing places.

use iser_guard::core::iscsi;
use iser_guard::core::recovery::{DiskInfo, PortId, Portal, SessionState};
use iser_guard::core::session_map::{place_listing, portal_addresses, HostFacts, Placer};
use iser_guard::core::session_map::{Evidence, RdmaPortNetdev};
use std::collections::BTreeMap;
use std::net::IpAddr;

const LAB_P3: &str =
    include_str!("../crates/iser-guard-core/tests/fixtures/iscsi/real-p3-nldevcap-loggedin.txt");

fn lab_ports() -> Vec<RdmaPortNetdev> {
    ["rxe_ini:ini0", "rxe_tgt:tgt0"]
        .iter()
        .map(|s| {
            let (d, n) = s.split_once(':').unwrap();
            RdmaPortNetdev {
                device: d.into(),
                port: 1,
                netdev: n.into(),
            }
        })
        .collect()
}

#[test]
fn the_lab_session_lands_on_the_only_rdma_port() {
    let text = include_str!("fixtures/stubs/iscsiadm.d/session-P3-loggedin.txt");
    let parsed = iscsi::parse_session_tree(text);
    let ports = [RdmaPortNetdev {
        device: "rocep2s0f0".into(),
        port: 1,
        netdev: "ens1f0".into(),
    }];
    let routes = BTreeMap::new();
    let host = HostFacts {
        ports: &ports,
        routes: &routes,
        ..HostFacts::default()
    };
    let m = place_listing(&parsed.items, &host, &mut Placer::new());
    assert_eq!(m.skipped, 0);
    assert_eq!(m.sessions.len(), 1);
    let s = &m.sessions[0];
    assert_eq!(s.sid, 2);
    assert_eq!(s.key.iface, "iser");
    assert_eq!(s.key.portal, Portal::new([192, 0, 2, 2], 3260));
    assert_eq!(s.rdma, Some(PortId::new("rocep2s0f0", 1)));
    assert_eq!(s.placed_by, Some(Evidence::OnlyPort));
    assert_eq!(s.state, SessionState::LoggedIn);
    assert_eq!(s.disks, vec![DiskInfo::new("sda", "running")]);
}

#[test]
fn with_two_ports_the_route_places_the_lab_session_and_silence_warns_once() {
    let parsed = iscsi::parse_session_tree(LAB_P3);
    assert_eq!(
        portal_addresses(&parsed.items)
            .into_iter()
            .collect::<Vec<_>>(),
        vec!["192.0.2.2".parse::<IpAddr>().unwrap()]
    );
    let ports = lab_ports();
    let routes: BTreeMap<IpAddr, String> =
        [("192.0.2.2".parse().unwrap(), "ini0".to_string())].into();
    let host = HostFacts {
        ports: &ports,
        routes: &routes,
        ..HostFacts::default()
    };
    let m = place_listing(&parsed.items, &host, &mut Placer::new());
    assert_eq!(m.sessions[0].rdma, Some(PortId::new("rxe_ini", 1)));
    assert_eq!(
        m.sessions[0].placed_by,
        Some(Evidence::Route {
            netdev: "ini0".into()
        })
    );
    assert!(m.warnings.is_empty());

    let none = BTreeMap::new();
    let host = HostFacts {
        ports: &ports,
        routes: &none,
        ..HostFacts::default()
    };
    let mut placer = Placer::new();
    let m = place_listing(&parsed.items, &host, &mut placer);
    assert_eq!(m.sessions[0].rdma, None);
    assert_eq!(m.warnings.len(), 1);
    assert!(place_listing(&parsed.items, &host, &mut placer)
        .warnings
        .is_empty());
}
