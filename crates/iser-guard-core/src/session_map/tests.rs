//! Placement on real lab facts: `iscsiadm -m session -P 3` and `RES_CM_ID_GET` bytes from
//! the Debian 6.1 / 6.12 guests (rxe_ini on ini0 192.0.2.1, rxe_tgt on tgt0 192.0.2.2, LIO
//! iSER target on the same machine), plus constructed dual-port cases.

use super::*;
use crate::iscsi::parse_session_tree;
use crate::nldev::{decode, inner};

/// The data lines of an nldevcap `.hex` capture: request first, then every reply message.
fn hex_messages(text: &str) -> Vec<Vec<u8>> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let l = l.trim();
            (0..l.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&l[i..i + 2], 16).expect("fixture hex"))
                .collect()
        })
        .collect()
}

/// Every cm_id in the reply messages of a capture.
fn cm_ids(text: &str) -> Vec<CmIdEntry> {
    let mut out = Vec::new();
    for bytes in hex_messages(text).into_iter().skip(1) {
        let msg = decode(&bytes).expect("decodes");
        if let Some(m) = inner(&msg) {
            for e in CmIdEntry::all(m).expect("a cm_id reply") {
                out.push(e.expect("a complete entry"));
            }
        }
    }
    out
}

const K61_LOGGEDIN_INI: &str =
    include_str!("../../tests/fixtures/nldev/k61/nldev-1-loggedin/10-res-cm-id-get-dump-dev0.hex");
const K61_LOGGEDIN_TGT: &str =
    include_str!("../../tests/fixtures/nldev/k61/nldev-1-loggedin/11-res-cm-id-get-dump-dev1.hex");
const K61_INIDELETED_TGT: &str = include_str!(
    "../../tests/fixtures/nldev/k61/nldev-2-inideleted/07-res-cm-id-get-dump-dev1.hex"
);
const K61_READDED_TGT: &str = include_str!(
    "../../tests/fixtures/nldev/k61/nldev-3-inireadded/10-res-cm-id-get-dump-dev1.hex"
);
const K61_READDED_INI: &str = include_str!(
    "../../tests/fixtures/nldev/k61/nldev-3-inireadded/11-res-cm-id-get-dump-dev2.hex"
);
const K612_LOGGEDIN_INI: &str =
    include_str!("../../tests/fixtures/nldev/k612/nldev-1-loggedin/10-res-cm-id-get-dump-dev0.hex");
const K612_LOGGEDIN_TGT: &str =
    include_str!("../../tests/fixtures/nldev/k612/nldev-1-loggedin/11-res-cm-id-get-dump-dev1.hex");
const P3_LOGGEDIN: &str = include_str!("../../tests/fixtures/iscsi/real-p3-nldevcap-loggedin.txt");
const P3_FAILED: &str = include_str!("../../tests/fixtures/iscsi/real-p3-failed-blocked.txt");

/// The lab's two RDMA ports (sysfs gid_attrs/ndevs).
fn lab_ports() -> Vec<RdmaPortNetdev> {
    vec![
        RdmaPortNetdev {
            device: "rxe_ini".into(),
            port: 1,
            netdev: "ini0".into(),
        },
        RdmaPortNetdev {
            device: "rxe_tgt".into(),
            port: 1,
            netdev: "tgt0".into(),
        },
    ]
}

fn lab_addrs() -> Vec<NetdevAddr> {
    vec![
        NetdevAddr {
            netdev: "ini0".into(),
            ip: "192.0.2.1".parse().unwrap(),
        },
        NetdevAddr {
            netdev: "tgt0".into(),
            ip: "192.0.2.2".parse().unwrap(),
        },
    ]
}

/// `ip route get 192.0.2.2` in the lab (policy table 200): dev ini0.
fn lab_routes() -> BTreeMap<IpAddr, String> {
    [("192.0.2.2".parse().unwrap(), "ini0".to_string())].into()
}

struct Lab {
    key: SessionKey,
    transport: String,
    current: Option<SocketAddr>,
    persistent: Option<SocketAddr>,
    ip: Option<IpAddr>,
    netdev: Option<String>,
}

impl Lab {
    fn from_p3(text: &str) -> Lab {
        let parsed = parse_session_tree(text);
        let d = parsed.items.first().expect("one session");
        let sock = |p: &Option<crate::iscsi::ListedPortal>| {
            p.as_ref().and_then(|p| {
                p.address
                    .parse::<IpAddr>()
                    .ok()
                    .map(|ip| SocketAddr::new(ip, p.port))
            })
        };
        let node = d.node_id().expect("a node");
        Lab {
            key: SessionKey {
                target: node.target,
                portal: crate::recovery::Portal::parse(&node.address, node.port)
                    .expect("an IP portal"),
                iface: node.iface.unwrap_or_else(|| "default".into()),
            },
            transport: d.transport().name().to_string(),
            current: sock(&d.current_portal),
            persistent: sock(&d.persistent_portal),
            ip: d.iface.ip_address,
            netdev: d.iface.netdev.clone(),
        }
    }

    fn end(&self) -> SessionEnd<'_> {
        SessionEnd {
            transport: &self.transport,
            current_portal: self.current,
            persistent_portal: self.persistent,
            ip: self.ip,
            netdev: self.netdev.as_deref(),
        }
    }
}

fn facts<'a>(
    cm: &'a [CmIdEntry],
    routes: &'a BTreeMap<IpAddr, String>,
    addrs: &'a [NetdevAddr],
    ports: &'a [RdmaPortNetdev],
) -> HostFacts<'a> {
    HostFacts {
        cm_ids: cm,
        routes,
        addrs,
        ports,
    }
}

#[test]
fn the_real_p3_output_names_neither_netdev_nor_address() {
    let s = Lab::from_p3(P3_LOGGEDIN);
    assert_eq!(s.transport, "iser");
    assert_eq!((s.ip, s.netdev.as_deref()), (None, None));
    assert_eq!(s.current, Some("192.0.2.2:3260".parse().unwrap()));
}

#[test]
fn the_lab_session_is_placed_on_rxe_ini_by_its_cm_id_on_both_kernels() {
    for (ini, tgt) in [
        (K61_LOGGEDIN_INI, K61_LOGGEDIN_TGT),
        (K612_LOGGEDIN_INI, K612_LOGGEDIN_TGT),
    ] {
        let mut cm = cm_ids(ini);
        cm.extend(cm_ids(tgt));
        // rxe_tgt holds ib_isert's listener and its side of the connection (dst 192.0.2.1):
        // never the initiator's.
        assert!(cm.iter().any(|c| c.dev_name == "rxe_tgt"));
        let s = Lab::from_p3(P3_LOGGEDIN);
        let (routes, addrs, ports) = (BTreeMap::new(), lab_addrs(), lab_ports());
        let p = place(&s.end(), &facts(&cm, &routes, &addrs, &ports));
        let Placement::Port { port, evidence } = p else {
            panic!("not placed: {p:?}");
        };
        assert_eq!(port, PortId::new("rxe_ini", 1));
        let Evidence::CmId { src, dst, cm_idn } = &evidence else {
            panic!("{evidence:?}");
        };
        assert_eq!(dst.to_string(), "192.0.2.2:3260");
        assert_eq!(
            src.map(|s| s.ip().to_string()).as_deref(),
            Some("192.0.2.1")
        );
        assert!(cm_idn.is_some());
        assert!(evidence.describe().contains("ib_iser CM id 192.0.2.1:"));
    }
}

#[test]
fn after_the_device_was_re_added_with_a_new_index_the_new_cm_id_places_it() {
    let mut cm = cm_ids(K61_READDED_TGT);
    cm.extend(cm_ids(K61_READDED_INI));
    let ini: Vec<&CmIdEntry> = cm.iter().filter(|c| c.dev_name == "rxe_ini").collect();
    assert_eq!(ini.len(), 1);
    assert_eq!(ini[0].dev_index, 2, "rxe_ini comes back as index 2");
    let s = Lab::from_p3(P3_LOGGEDIN);
    let (routes, addrs, ports) = (BTreeMap::new(), lab_addrs(), lab_ports());
    assert!(matches!(
        place(&s.end(), &facts(&cm, &routes, &addrs, &ports)),
        Placement::Port { port, evidence: Evidence::CmId { .. } } if port == PortId::new("rxe_ini", 1)
    ));
}

#[test]
fn without_a_cm_id_the_route_to_the_portal_places_it() {
    // Session FAILED after `rdma link delete rxe_ini`... but here rxe_ini is still listed:
    // the route (ini0) and its gid_attrs ndevs say rxe_ini.
    let cm = cm_ids(K61_INIDELETED_TGT);
    let s = Lab::from_p3(P3_FAILED);
    let (routes, addrs, ports) = (lab_routes(), lab_addrs(), lab_ports());
    assert_eq!(
        place(&s.end(), &facts(&cm, &routes, &addrs, &ports)),
        Placement::Port {
            port: PortId::new("rxe_ini", 1),
            evidence: Evidence::Route {
                netdev: "ini0".into()
            }
        }
    );
}

#[test]
fn no_evidence_with_two_ports_is_never_a_guess() {
    let s = Lab::from_p3(P3_FAILED);
    let (routes, addrs, ports) = (BTreeMap::new(), lab_addrs(), lab_ports());
    let p = place(&s.end(), &facts(&[], &routes, &addrs, &ports));
    let Placement::Unknown(Unplaced::NoEvidence { ports, tried }) = p else {
        panic!("{p:?}");
    };
    assert_eq!(ports.len(), 2);
    assert_eq!(tried.len(), 3, "{tried:?}");
}

#[test]
fn a_vanished_device_keeps_its_sessions_and_is_never_replaced_by_the_other_one() {
    let s = Lab::from_p3(P3_LOGGEDIN);
    let mut placer = Placer::new();
    let mut cm = cm_ids(K61_LOGGEDIN_INI);
    cm.extend(cm_ids(K61_LOGGEDIN_TGT));
    let (routes, addrs, ports) = (lab_routes(), lab_addrs(), lab_ports());
    let d = placer.place(&s.key, &s.end(), &facts(&cm, &routes, &addrs, &ports));
    assert!(matches!(&d.placement, Placement::Port { port, .. } if port.device == "rxe_ini"));
    assert_eq!(d.warning, None);
    assert!(d.moved, "first placement");
    assert!(
        !placer
            .place(&s.key, &s.end(), &facts(&cm, &routes, &addrs, &ports))
            .moved
    );

    // rxe_ini deleted: its cm_id and its port are gone; rxe_tgt is the only port left, the
    // route still says ini0 (no RDMA port on it now).
    let cm = cm_ids(K61_INIDELETED_TGT);
    let only_tgt: Vec<RdmaPortNetdev> = lab_ports().into_iter().skip(1).collect();
    let s2 = Lab::from_p3(P3_FAILED);
    assert_eq!(
        place(&s2.end(), &facts(&cm, &routes, &addrs, &only_tgt)),
        Placement::Unknown(Unplaced::DeviceGone {
            netdev: "ini0".into()
        })
    );
    // Without a route answer, "the only port" would be rxe_tgt: memory must win.
    let no_routes = BTreeMap::new();
    assert!(matches!(
        place(&s2.end(), &facts(&cm, &no_routes, &addrs, &only_tgt)),
        Placement::Port {
            evidence: Evidence::OnlyPort,
            ..
        }
    ));
    let d = placer.place(&s2.key, &s2.end(), &facts(&cm, &routes, &addrs, &only_tgt));
    let Placement::Port { port, evidence } = &d.placement else {
        panic!("{d:?}");
    };
    assert_eq!(port, &PortId::new("rxe_ini", 1));
    assert!(
        matches!(evidence, Evidence::Remembered(was) if matches!(**was, Evidence::CmId { .. }))
    );
    assert!(evidence
        .describe()
        .starts_with("last placed by ib_iser CM id"));
    assert_eq!(d.warning, None);
    let d = placer.place(
        &s2.key,
        &s2.end(),
        &facts(&cm, &no_routes, &addrs, &only_tgt),
    );
    assert!(matches!(&d.placement, Placement::Port { port, .. } if port.device == "rxe_ini"));

    // No RDMA port at all: still remembered.
    let d = placer.place(&s2.key, &s2.end(), &facts(&[], &routes, &addrs, &[]));
    assert!(matches!(&d.placement, Placement::Port { port, .. } if port.device == "rxe_ini"));

    // Back (index 2) with a new connection: placed by the new cm_id.
    let mut cm = cm_ids(K61_READDED_TGT);
    cm.extend(cm_ids(K61_READDED_INI));
    let d = placer.place(&s.key, &s.end(), &facts(&cm, &routes, &addrs, &ports));
    assert!(matches!(
        &d.placement,
        Placement::Port { port, evidence: Evidence::CmId { .. } } if port.device == "rxe_ini"
    ));
}

#[test]
fn a_restarted_agent_never_takes_the_only_port_left_for_a_session_routed_elsewhere() {
    // No memory (a fresh start) while rxe_ini is deleted: the route names ini0, whose device
    // is gone; rxe_tgt is the only port, and it must not be blamed.
    let s = Lab::from_p3(P3_FAILED);
    let cm = cm_ids(K61_INIDELETED_TGT);
    let only_tgt: Vec<RdmaPortNetdev> = lab_ports().into_iter().skip(1).collect();
    let (routes, addrs) = (lab_routes(), lab_addrs());
    let mut placer = Placer::new();
    let f = facts(&cm, &routes, &addrs, &only_tgt);
    let d = placer.place(&s.key, &s.end(), &f);
    assert!(matches!(
        d.placement,
        Placement::Unknown(Unplaced::DeviceGone { .. })
    ));
    let w = d.warning.expect("said once");
    assert!(w.contains("ini0") && !w.contains("rxe_tgt"), "{w}");
    assert_eq!(placer.place(&s.key, &s.end(), &f).warning, None);
}

#[test]
fn the_only_port_present_is_not_the_only_port_when_another_was_seen() {
    // Never placed (no CM id, no route), two ports; then one device is being re-created and
    // the other is the only one present: still no guess.
    let s = Lab::from_p3(P3_FAILED);
    let (routes, addrs, ports) = (BTreeMap::new(), lab_addrs(), lab_ports());
    let only_tgt: Vec<RdmaPortNetdev> = lab_ports().into_iter().skip(1).collect();
    let mut placer = Placer::new();
    let d = placer.place(&s.key, &s.end(), &facts(&[], &routes, &addrs, &ports));
    assert!(matches!(d.placement, Placement::Unknown(_)));
    assert!(d.warning.is_some());
    let d = placer.place(&s.key, &s.end(), &facts(&[], &routes, &addrs, &only_tgt));
    assert!(
        matches!(&d.placement, Placement::Unknown(u) if u.describe().contains("only one of the 2")),
        "{d:?}"
    );
    assert_eq!(d.warning, None, "already said");
    // A host that only ever had one port still uses it.
    let mut fresh = Placer::new();
    assert!(matches!(
        fresh
            .place(&s.key, &s.end(), &facts(&[], &routes, &addrs, &only_tgt))
            .placement,
        Placement::Port {
            evidence: Evidence::OnlyPort,
            ..
        }
    ));
}

#[test]
fn an_unplaced_session_is_warned_about_once_with_what_to_configure() {
    let s = Lab::from_p3(P3_FAILED);
    let mut placer = Placer::new();
    let (routes, addrs, ports) = (BTreeMap::new(), lab_addrs(), lab_ports());
    let f = facts(&[], &routes, &addrs, &ports);
    let first = placer.place(&s.key, &s.end(), &f);
    assert!(matches!(first.placement, Placement::Unknown(_)));
    let w = first.warning.expect("a warning the first time");
    assert!(w.contains("iqn.2003-01.org.example.lab:tgt0"), "{w}");
    assert!(w.contains("ip route get 192.0.2.2"), "{w}");
    assert!(w.contains("rxe_ini/1, rxe_tgt/1"), "{w}");
    for _ in 0..5 {
        assert_eq!(placer.place(&s.key, &s.end(), &f).warning, None);
    }
}

/// A dual-port E810: two irdma devices, one per PCI function, each on its own netdev and
/// subnet, one session per port.
fn dual_port() -> (
    Vec<RdmaPortNetdev>,
    Vec<NetdevAddr>,
    BTreeMap<IpAddr, String>,
) {
    let ports = vec![
        RdmaPortNetdev {
            device: "rocep2s0f0".into(),
            port: 1,
            netdev: "ens2f0np0".into(),
        },
        RdmaPortNetdev {
            device: "rocep2s0f1".into(),
            port: 1,
            netdev: "ens2f1np1".into(),
        },
    ];
    let addrs = vec![
        NetdevAddr {
            netdev: "ens2f0np0".into(),
            ip: "198.51.100.1".parse().unwrap(),
        },
        NetdevAddr {
            netdev: "ens2f1np1".into(),
            ip: "203.0.113.1".parse().unwrap(),
        },
        NetdevAddr {
            netdev: "ens2f1np1".into(),
            ip: "2001:db8::1".parse().unwrap(),
        },
    ];
    let routes = [
        ("198.51.100.2".parse().unwrap(), "ens2f0np0".to_string()),
        ("203.0.113.2".parse().unwrap(), "ens2f1np1".to_string()),
    ]
    .into();
    (ports, addrs, routes)
}

fn cm(dev: &str, src: &str, dst: &str, kern: &str) -> CmIdEntry {
    use crate::nldev::SockAddr;
    let sa = |s: &str| -> Option<SockAddr> {
        let a: SocketAddr = s.parse().ok()?;
        Some(SockAddr::from_socket_addr(a))
    };
    CmIdEntry {
        dev_index: 3,
        dev_name: dev.into(),
        port: Some(1),
        lqpn: Some(18),
        qp_type: None,
        ps: Some(0x106),
        state: 5,
        src_addr: sa(src),
        dst_addr: sa(dst),
        cm_idn: Some(1),
        pid: None,
        kern_name: Some(kern.into()),
    }
}

fn default_iface(portal: &str) -> SessionEnd<'static> {
    SessionEnd {
        transport: "iser",
        current_portal: portal.parse().ok(),
        persistent_portal: portal.parse().ok(),
        ip: None,
        netdev: None,
    }
}

#[test]
fn dual_port_sessions_land_on_their_own_function() {
    let (ports, addrs, routes) = dual_port();
    let cms = vec![
        cm(
            "rocep2s0f0",
            "198.51.100.1:40000",
            "198.51.100.2:3260",
            "ib_iser",
        ),
        cm(
            "rocep2s0f1",
            "203.0.113.1:40001",
            "203.0.113.2:3260",
            "ib_iser",
        ),
    ];
    let a = default_iface("198.51.100.2:3260");
    let b = default_iface("203.0.113.2:3260");
    let f = facts(&cms, &routes, &addrs, &ports);
    assert!(
        matches!(place(&a, &f), Placement::Port { port, evidence: Evidence::CmId { .. } } if port.device == "rocep2s0f0")
    );
    assert!(
        matches!(place(&b, &f), Placement::Port { port, evidence: Evidence::CmId { .. } } if port.device == "rocep2s0f1")
    );
    // Both down (no cm_id): the routes place them.
    let f = facts(&[], &routes, &addrs, &ports);
    assert!(
        matches!(place(&b, &f), Placement::Port { port, evidence: Evidence::Route { .. } } if port.device == "rocep2s0f1")
    );
    // ib_isert's cm_ids (a target on this host) never place an initiator session.
    let isert = vec![cm(
        "rocep2s0f0",
        "203.0.113.2:3260",
        "203.0.113.1:40001",
        "ib_isert",
    )];
    let no_routes = BTreeMap::new();
    let f = facts(&isert, &no_routes, &addrs, &ports);
    assert!(matches!(place(&b, &f), Placement::Unknown(_)));
}

#[test]
fn cm_ids_on_two_ports_to_one_portal_fall_back_to_the_route() {
    let (ports, addrs, mut routes) = dual_port();
    routes.insert("192.0.2.2".parse().unwrap(), "ens2f1np1".into());
    let cms = vec![
        cm(
            "rocep2s0f0",
            "198.51.100.1:40000",
            "192.0.2.2:3260",
            "ib_iser",
        ),
        cm(
            "rocep2s0f1",
            "203.0.113.1:40001",
            "192.0.2.2:3260",
            "ib_iser",
        ),
    ];
    let s = default_iface("192.0.2.2:3260");
    assert!(matches!(
        place(&s, &facts(&cms, &routes, &addrs, &ports)),
        Placement::Port { port, evidence: Evidence::Route { .. } } if port.device == "rocep2s0f1"
    ));
    // An iface bound to an address picks the cm_id with that source.
    let bound = SessionEnd {
        ip: "198.51.100.1".parse().ok(),
        ..s
    };
    assert!(matches!(
        place(&bound, &facts(&cms, &routes, &addrs, &ports)),
        Placement::Port { port, evidence: Evidence::CmId { .. } } if port.device == "rocep2s0f0"
    ));
}

#[test]
fn iface_fields_place_when_the_kernel_says_nothing() {
    let (ports, addrs, _) = dual_port();
    let none = BTreeMap::new();
    let by_ip = SessionEnd {
        ip: "2001:db8::1".parse().ok(),
        ..default_iface("[2001:db8::2]:3260")
    };
    assert_eq!(
        place(&by_ip, &facts(&[], &none, &addrs, &ports)),
        Placement::Port {
            port: PortId::new("rocep2s0f1", 1),
            evidence: Evidence::IfaceAddress {
                ip: "2001:db8::1".parse().unwrap(),
                netdev: "ens2f1np1".into()
            }
        }
    );
    let by_netdev = SessionEnd {
        netdev: Some("ens2f0np0"),
        ..default_iface("198.51.100.2:3260")
    };
    assert!(matches!(
        place(&by_netdev, &facts(&[], &none, &addrs, &ports)),
        Placement::Port { port, evidence: Evidence::IfaceNetdev { .. } } if port.device == "rocep2s0f0"
    ));
    // Names that lead nowhere are reported, not guessed around.
    let nowhere = SessionEnd {
        netdev: Some("eth9"),
        ..default_iface("198.51.100.2:3260")
    };
    let p = place(&nowhere, &facts(&[], &none, &addrs, &ports));
    assert!(
        matches!(&p, Placement::Unknown(u) if u.describe().contains("eth9")),
        "{p:?}"
    );
}

#[test]
fn the_only_port_places_and_tcp_is_not_guarded() {
    let (ports, addrs, _) = dual_port();
    let one = &ports[..1];
    let none = BTreeMap::new();
    let s = default_iface("192.0.2.2:3260");
    assert!(matches!(
        place(&s, &facts(&[], &none, &addrs, one)),
        Placement::Port {
            evidence: Evidence::OnlyPort,
            ..
        }
    ));
    assert_eq!(
        place(&s, &facts(&[], &none, &addrs, &[])),
        Placement::Unknown(Unplaced::NoRdmaPort)
    );
    let tcp = SessionEnd {
        transport: "tcp",
        ..s
    };
    assert_eq!(
        place(&tcp, &facts(&[], &none, &addrs, &ports)),
        Placement::NotIser
    );
}

#[test]
fn evidence_survives_serde() {
    let e = Evidence::Remembered(Box::new(Evidence::CmId {
        src: "192.0.2.1:57998".parse().ok(),
        dst: "192.0.2.2:3260".parse().unwrap(),
        cm_idn: Some(1),
    }));
    let j = serde_json::to_string(&e).unwrap();
    assert_eq!(serde_json::from_str::<Evidence>(&j).unwrap(), e);
}
