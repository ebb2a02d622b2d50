//! iscsiadm output parsing against real lab captures and outputs constructed from open-iscsi's
//! format strings (tests/fixtures/iscsi/README.md says which is which).

use std::net::IpAddr;

use iser_guard_core::iscsi::{
    parse_discovery, parse_login_output, parse_records, parse_session_line, parse_session_list,
    parse_session_tree, ConnectionState, DeviceState, IscsiadmStatus, IscsidState, ListedPortal,
    ListedSessionState, LoginLine, NodeType, SkipReason, StatusClass, Transport,
};
use proptest::prelude::*;

/// A fixture with the lab harness's `# uptime=… cmd:` and `# rc=N` lines removed, and that rc.
fn fixture(name: &str) -> (String, Option<i32>) {
    let path = format!("{}/tests/fixtures/iscsi/{name}", env!("CARGO_MANIFEST_DIR"));
    let raw = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut rc = None;
    let mut body = String::new();
    for line in raw.lines() {
        if let Some(code) = line.strip_prefix("# rc=") {
            rc = code.trim().parse().ok();
        } else if !line.starts_with("# uptime=") {
            body.push_str(line);
            body.push('\n');
        }
    }
    (body, rc)
}

// ----- -P 3, real captures -----

#[test]
fn real_loggedin_session() {
    let (text, rc) = fixture("real-p3-loggedin.txt");
    assert_eq!(rc, Some(0));
    let p = parse_session_tree(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    assert_eq!(p.items.len(), 1);
    let s = &p.items[0];
    assert_eq!(s.target, "iqn.2003-01.org.example.lab:tgt0");
    assert_eq!(s.node_type, Some(NodeType::NonFlash));
    assert_eq!(
        s.current_portal,
        Some(ListedPortal::parse("192.0.2.2:3260,1").unwrap())
    );
    assert_eq!(s.persistent_portal, s.current_portal);
    assert_eq!(s.iface.name.as_deref(), Some("iser"));
    assert_eq!(s.transport(), Transport::Iser);
    assert_eq!(
        s.iface.initiator_name.as_deref(),
        Some("iqn.2004-10.com.example:lab-initiator")
    );
    // "[default]" / "default" mean "not bound"
    assert_eq!(s.iface.ip_address, None);
    assert_eq!(s.iface.hw_address, None);
    assert_eq!(s.iface.netdev, None);
    assert_eq!(s.sid, 2);
    assert_eq!(s.connection_state, Some(ConnectionState::LoggedIn));
    assert_eq!(s.session_state, Some(ListedSessionState::LoggedIn));
    assert_eq!(s.iscsid_state, Some(IscsidState::NoChange));
    assert_eq!(s.recovery_timeout, Some(120));
    assert_eq!(s.host_number, Some(0));
    assert_eq!(s.host_state.as_deref(), Some("running"));
    assert_eq!(s.devices.len(), 1);
    let d = &s.devices[0];
    assert_eq!(d.hctl(), "0:0:0:0");
    assert_eq!(d.disk.as_deref(), Some("sda"));
    assert_eq!(d.state, Some(DeviceState::Running));
    assert!(s.is_logged_in());
    assert_eq!(s.failing_devices().count(), 0);
}

#[test]
fn real_target_gone_150s_free_and_transport_offline() {
    let (text, _) = fixture("real-p3-free-transport-offline.txt");
    let p = parse_session_tree(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    let s = &p.items[0];
    assert_eq!(s.connection_state, Some(ConnectionState::TransportWait));
    assert_eq!(s.session_state, Some(ListedSessionState::Free));
    assert_eq!(s.iscsid_state, Some(IscsidState::Reopen));
    assert_eq!(s.devices[0].state, Some(DeviceState::TransportOffline));
    assert!(!s.is_logged_in());
    assert_eq!(s.failing_devices().count(), 1);
}

#[test]
fn real_initiator_device_deleted_failed_and_blocked() {
    let (text, _) = fixture("real-p3-failed-blocked.txt");
    let p = parse_session_tree(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    let s = &p.items[0];
    assert_eq!(s.session_state, Some(ListedSessionState::Failed));
    assert_eq!(s.devices[0].state, Some(DeviceState::Blocked));
    // blocked queues I/O, it does not fail it
    assert_eq!(s.failing_devices().count(), 0);
}

#[test]
fn real_in_login_and_host_recovery() {
    let (text, _) = fixture("real-p3-in-login.txt");
    let p = parse_session_tree(&text);
    assert!(p.is_clean());
    assert_eq!(p.items[0].connection_state, Some(ConnectionState::InLogin));

    let (text, _) = fixture("real-p3-host-recovery.txt");
    let p = parse_session_tree(&text);
    assert!(p.is_clean());
    assert_eq!(p.items[0].sid, 3);
    assert_eq!(p.items[0].host_state.as_deref(), Some("recovery"));
}

#[test]
fn real_no_active_sessions() {
    let (text, rc) = fixture("real-p3-no-sessions.txt");
    let status = IscsiadmStatus::from_code(rc.unwrap());
    assert!(status.no_objects());
    let p = parse_session_tree(&text);
    assert!(p.items.is_empty());
    assert_eq!(p.skipped.len(), 1);
    assert_eq!(p.skipped[0].reason, SkipReason::IscsiadmMessage);
    assert_eq!(p.skipped[0].line_no, 1);
}

// ----- -P 3, constructed -----

#[test]
fn constructed_multi_target_tree() {
    let (text, _) = fixture("constructed-p3-multi.txt");
    let p = parse_session_tree(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    let sids: Vec<u32> = p.items.iter().map(|s| s.sid).collect();
    assert_eq!(sids, vec![1, 2, 5, 3, 4, 6]);

    // session 1: bound iface, two LUNs
    let s1 = &p.items[0];
    assert_eq!(
        s1.iface.ip_address,
        Some("192.0.2.1".parse::<IpAddr>().unwrap())
    );
    assert_eq!(s1.iface.hw_address.as_deref(), Some("3c:fd:fe:aa:bb:cc"));
    assert_eq!(s1.iface.netdev.as_deref(), Some("ens1f0"));
    let disks: Vec<_> = s1.devices.iter().map(|d| d.disk.clone().unwrap()).collect();
    assert_eq!(disks, ["sda", "sdb"]);
    assert_eq!(s1.devices[1].hctl(), "7:0:0:1");

    // session 2: same target and portal, printed after an empty line: inherits both
    let s2 = &p.items[1];
    assert_eq!(s2.target, s1.target);
    assert_eq!(s2.current_portal, s1.current_portal);
    assert_eq!(s2.persistent_portal, s1.persistent_portal);
    assert_eq!(s2.session_state, Some(ListedSessionState::Failed));
    assert_eq!(s2.host_state.as_deref(), Some("recovery"));
    assert_eq!(s2.devices[0].disk.as_deref(), Some("sdc"));
    assert_eq!(s2.devices[0].state, Some(DeviceState::Blocked));

    // session 5: same target, second portal
    let s5 = &p.items[2];
    assert_eq!(s5.target, s1.target);
    assert_eq!(s5.current_portal.as_ref().unwrap().address, "192.0.2.3");
    assert_eq!(s5.current_portal.as_ref().unwrap().tpgt, 2);
    assert_eq!(s5.failing_devices().count(), 1);

    // session 3: IPv6 portal and iface, one LUN without a block device
    let s3 = &p.items[3];
    assert_eq!(s3.target, "iqn.2003-01.org.example.lab:tgt1");
    let portal = s3.current_portal.as_ref().unwrap();
    assert_eq!(portal.address, "fd00:1::2");
    assert_eq!(portal.port, 3260);
    assert_eq!(portal.to_string(), "[fd00:1::2]:3260,1");
    assert_eq!(
        portal.socket_addr(),
        Some("[fd00:1::2]:3260".parse().unwrap())
    );
    assert_eq!(
        s3.iface.ip_address,
        Some("fd00:1::1".parse::<IpAddr>().unwrap())
    );
    assert_eq!(s3.recovery_timeout, Some(30));
    assert_eq!(s3.devices.len(), 2);
    assert_eq!(s3.devices[0].disk, None);
    assert_eq!(s3.devices[1].lun, 3);
    assert_eq!(s3.devices[1].disk.as_deref(), Some("sdd"));

    let id = s3.node_id().expect("node id");
    assert_eq!(id.portal_arg(), "[fd00:1::2]:3260");
    assert_eq!(id.iface.as_deref(), Some("iser6"));
    assert_eq!(s1.node_id().unwrap().portal_arg(), "192.0.2.2:3260");

    // session 4: tcp on the default iface
    let s4 = &p.items[4];
    assert_eq!(s4.transport(), Transport::Tcp);
    assert_eq!(s4.iface.name.as_deref(), Some("default"));
    assert_eq!(s4.iface.ip_address, None);

    // session 6: everything unknown, SCSI host unavailable
    let s6 = &p.items[5];
    assert_eq!(s6.iface.name, None);
    assert_eq!(s6.transport(), Transport::Unknown);
    assert_eq!(s6.connection_state, Some(ConnectionState::Unknown));
    assert_eq!(s6.session_state, Some(ListedSessionState::Unknown));
    assert_eq!(s6.iscsid_state, Some(IscsidState::Unknown));
    assert_eq!(s6.recovery_timeout, Some(-1));
    assert_eq!(s6.host_number, None);
    assert!(s6.devices.is_empty());
}

#[test]
fn tree_agrees_with_flat_list() {
    let (tree, _) = fixture("constructed-p3-multi.txt");
    let (flat, _) = fixture("constructed-session-flat.txt");
    let tree = parse_session_tree(&tree).items;
    let flat = parse_session_list(&flat).items;
    for s in &tree {
        let f = flat
            .iter()
            .find(|f| f.sid == s.sid)
            .expect("session in both");
        assert_eq!(f.target, s.target, "sid {}", s.sid);
        assert_eq!(
            Some(&f.portal),
            s.persistent_portal.as_ref(),
            "sid {}",
            s.sid
        );
        assert_eq!(f.transport, s.transport(), "sid {}", s.sid);
    }
}

#[test]
fn malformed_tree_lines_are_skipped_and_counted() {
    let text = "\
iSCSI Transport Class version 2.0-870
version 2.1.8
\t\tSID: 9
Target: iqn.2003-01.org.example.lab:tgt0 (non-flash)
\tCurrent Portal: 192.0.2.2:99999,1
\tPersistent Portal: 192.0.2.2:3260,1
\t\tIface Name: iser
\t\tIface Transport: iser
\t\tIface IPaddress: not-an-ip
\t\tSID: two
\t\tiSCSI Session State: LOGGED_IN
\t\tthis line means nothing
\t\t\tAttached scsi disk sdz\t\tState: running
\t\tscsi0 Channel 00 Id zero Lun: 0
\t\tInterface:
\t\tSID: 3
\t\tHost Number: 0\tState: running
\t\tscsi0 Channel 00 Id 0 Lun: 5
\t\t\tAttached scsi disk sdq\t\tState: weird-new-state
";
    let p = parse_session_tree(text);
    // the SID-less block is dropped, session 3 survives
    assert_eq!(p.items.len(), 1, "{p:#?}");
    let s = &p.items[0];
    assert_eq!(s.sid, 3);
    assert_eq!(s.current_portal, None, "the bad Current Portal is not used");
    assert_eq!(s.persistent_portal.as_ref().unwrap().port, 3260);
    assert_eq!(s.devices[0].lun, 5);
    assert_eq!(
        s.devices[0].state,
        Some(DeviceState::Other("weird-new-state".into()))
    );
    let reasons: Vec<(usize, String)> = p
        .skipped
        .iter()
        .map(|s| (s.line_no, s.reason.to_string()))
        .collect();
    let lines: Vec<usize> = reasons.iter().map(|r| r.0).collect();
    // SID before any Target (orphan, reported when the Target line ends it), bad portal,
    // bad IP, bad SID, unknown line, disk without LUN, bad Id, SID-less session block
    assert_eq!(lines, vec![3, 5, 9, 10, 12, 13, 14, 7], "{reasons:#?}");
    assert!(reasons[0].1.contains("Target"));
    assert!(reasons[1].1.contains("Current Portal"));
    assert!(reasons[7].1.contains("SID"));
}

// ----- flat list -----

#[test]
fn constructed_flat_list() {
    let (text, _) = fixture("constructed-session-flat.txt");
    let p = parse_session_list(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    assert_eq!(p.items.len(), 7);
    let s = &p.items[0];
    assert_eq!(s.transport, Transport::Iser);
    assert_eq!(s.sid, 1);
    assert_eq!(s.portal.address, "192.0.2.2");
    assert_eq!(s.portal.port, 3260);
    assert_eq!(s.portal.tpgt, 1);
    assert_eq!(s.target, "iqn.2003-01.org.example.lab:tgt0");
    assert_eq!(s.node_type, Some(NodeType::NonFlash));
    let v6 = &p.items[3];
    assert_eq!(v6.portal.address, "fd00:1::2");
    assert_eq!(v6.portal.ip(), Some("fd00:1::2".parse().unwrap()));
    assert_eq!(p.items[4].transport, Transport::Tcp);
    assert_eq!(p.items[5].transport, Transport::Unknown);
    assert_eq!(p.items[5].portal.port, 3261);
    assert_eq!(p.items[6].transport, Transport::Other("qla4xxx".into()));
    assert_eq!(p.items[6].node_type, Some(NodeType::Flash));
    let iser: Vec<u32> = p
        .items
        .iter()
        .filter(|s| s.transport.is_iser())
        .map(|s| s.sid)
        .collect();
    assert_eq!(iser, vec![1, 2, 5, 3]);
}

#[test]
fn old_flat_format_and_mapped_ipv6() {
    let (text, _) = fixture("constructed-session-flat-old.txt");
    let p = parse_session_list(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    assert_eq!(p.items[0].node_type, None);
    assert_eq!(p.items[1].portal.address, "::ffff:198.51.100.7");
    assert_eq!(p.items[1].portal.port, 3260);
    // printed back as iscsiadm would (no brackets: the address has a dot)
    assert_eq!(p.items[1].portal.to_string(), "::ffff:198.51.100.7:3260,1");
    assert_eq!(
        p.items[1].node_id().portal_arg(),
        "[::ffff:198.51.100.7]:3260"
    );
}

#[test]
fn flat_malformed_lines() {
    let text = "\
iser: [1] 192.0.2.2:3260,1 iqn.2003-01.org.example.lab:tgt0 (non-flash)
iser: [x] 192.0.2.2:3260,1 iqn.a (non-flash)
iser: [2] 192.0.2.2:3260 iqn.a (non-flash)
iser: [3] [fd00::1:3260,1 iqn.a
iser: [4] 192.0.2.2:3260,1
iser: [5] 192.0.2.2:3260,1 iqn.a (weird)
iser: [6] 192.0.2.2:3260,1 iqn.a (non-flash) extra
garbage
iscsiadm: No active sessions.

tcp: [7] 192.0.2.3:3260,1 iqn.b (non-flash)
";
    let p = parse_session_list(text);
    let sids: Vec<u32> = p.items.iter().map(|s| s.sid).collect();
    assert_eq!(sids, vec![1, 7]);
    let lines: Vec<usize> = p.skipped.iter().map(|s| s.line_no).collect();
    assert_eq!(lines, vec![2, 3, 4, 5, 6, 7, 8, 9]);
    assert_eq!(p.skipped[6].reason, SkipReason::Unrecognised);
    assert_eq!(p.skipped[7].reason, SkipReason::IscsiadmMessage);
    assert!(matches!(p.skipped[0].reason, SkipReason::BadValue { .. }));
    assert!(parse_session_line("iser: [1] 192.0.2.2:3260,1 iqn.x").is_ok());
}

#[test]
fn skipped_lines_are_cut_to_a_bounded_length() {
    let long = "x".repeat(10_000) + "é";
    let p = parse_session_list(&long);
    assert_eq!(p.skipped.len(), 1);
    assert!(p.skipped[0].line.len() <= 200);
}

// ----- discovery, login, logout, records -----

#[test]
fn real_discovery() {
    let (text, rc) = fixture("real-discovery.txt");
    assert_eq!(rc, None);
    let p = parse_discovery(&text);
    assert!(p.is_clean());
    assert_eq!(p.items.len(), 1);
    assert_eq!(p.items[0].target, "iqn.2003-01.org.example.lab:tgt0");
    assert_eq!(p.items[0].portal.to_string(), "192.0.2.2:3260,1");
}

#[test]
fn real_discovery_timeout() {
    let (text, _) = fixture("real-discovery-timeout.txt");
    let p = parse_discovery(&text);
    assert!(p.items.is_empty());
    assert_eq!(p.skipped.len(), 8);
    assert!(p
        .skipped
        .iter()
        .all(|s| s.reason == SkipReason::IscsiadmMessage));
    // as login output, the same lines are diagnostics kept verbatim
    let l = parse_login_output(&text);
    assert!(l.is_clean());
    assert!(matches!(&l.items[7], LoginLine::Message(m) if m.ends_with("iSCSI PDU timed out")));
    let (text, _) = fixture("real-login-no-records.txt");
    let l = parse_login_output(&text);
    assert_eq!(l.items, vec![LoginLine::Message("No records found".into())]);
}

#[test]
fn real_login_and_logout() {
    let (text, _) = fixture("real-login.txt");
    let p = parse_login_output(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    match (&p.items[0], &p.items[1]) {
        (LoginLine::LoggingIn(a), LoginLine::LoginOk(b)) => {
            assert_eq!(a, b);
            assert_eq!(a.iface.as_deref(), Some("iser"));
            assert_eq!(a.target, "iqn.2003-01.org.example.lab:tgt0");
            assert_eq!(a.address, "192.0.2.2");
            assert_eq!(a.port, 3260);
            assert_eq!(a.sid, None);
        }
        other => panic!("{other:?}"),
    }
    let (text, _) = fixture("real-logout.txt");
    let p = parse_login_output(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    match (&p.items[0], &p.items[1]) {
        (LoginLine::LoggingOut(a), LoginLine::LogoutOk(b)) => {
            assert_eq!(a, b);
            assert_eq!(a.sid, Some(2));
            assert_eq!(a.iface, None);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn login_failure_with_reported_error() {
    let (text, _) = fixture("constructed-login-auth-failed.txt");
    let p = parse_login_output(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    assert_eq!(p.items.len(), 6);
    assert!(matches!(&p.items[1], LoginLine::LoggingIn(n) if n.address == "fd00:1::2"));
    assert!(matches!(&p.items[3], LoginLine::LoginFailed(n) if n.iface.as_deref() == Some("iser")));
    assert_eq!(
        p.items[4],
        LoginLine::ReportedError(IscsiadmStatus::LoginAuthFailed)
    );
    assert!(matches!(&p.items[5], LoginLine::Message(m) if m.contains("all portals")));
}

#[test]
fn real_records() {
    let (text, _) = fixture("real-iface-iser.txt");
    let p = parse_records(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    assert_eq!(p.items.len(), 1);
    let r = &p.items[0];
    assert_eq!(r.version.as_deref(), Some("2.1.8"));
    assert_eq!(r.get("iface.transport_name"), Some("iser"));
    assert_eq!(r.get("iface.iscsi_ifacename"), Some("iser"));
    assert_eq!(r.get("iface.net_ifacename"), None);
    assert_eq!(r.entries.len(), 55);

    let (text, _) = fixture("real-node-record.txt");
    let p = parse_records(&text);
    assert!(p.is_clean(), "{:?}", p.skipped);
    let r = &p.items[0];
    assert_eq!(r.get("node.name"), Some("iqn.2003-01.org.example.lab:tgt0"));
    assert_eq!(r.get("node.tpgt"), Some("1"));
    assert_eq!(r.get("node.conn[0].address"), Some("192.0.2.2"));
    assert_eq!(r.get("node.session.timeo.replacement_timeout"), Some("120"));
}

// ----- exit codes -----

#[test]
fn exit_codes() {
    for code in 0..=33 {
        let s = IscsiadmStatus::from_code(code);
        assert_eq!(s.code(), code);
        assert!(!matches!(s, IscsiadmStatus::Unknown(_)));
        assert!(!s.message().is_empty());
        assert!(s.to_string().starts_with(&format!("{code} (ISCSI_")));
    }
    assert_eq!(IscsiadmStatus::from_code(34), IscsiadmStatus::Unknown(34));
    assert_eq!(IscsiadmStatus::from_code(-1), IscsiadmStatus::Unknown(-1));
    assert_eq!(IscsiadmStatus::from_code(-1).code(), -1);

    let s = IscsiadmStatus::from_code;
    assert!(s(0).is_success());
    assert!(s(15).is_already_logged_in());
    assert_eq!(s(15).classify(), StatusClass::AlreadyDone);
    assert!(s(21).no_objects());
    assert_eq!(s(2).classify(), StatusClass::NotFound);
    for t in [8, 11, 33] {
        assert!(s(t).is_timeout(), "{t}");
        assert!(s(t).is_retryable(), "{t}");
    }
    for r in [4, 5, 18, 20, 28, 29] {
        assert!(s(r).is_retryable(), "{r}");
    }
    for p in [24, 19, 7, 12, 13] {
        assert!(s(p).is_permanent(), "{p}");
        assert!(!s(p).is_retryable(), "{p}");
    }
    assert_eq!(
        s(24).message(),
        "iSCSI login failed due to authorization failure"
    );
    assert_eq!(s(15).constant(), "ISCSI_ERR_SESS_EXISTS");
    assert_eq!(s(32).message(), "target likely not connected");
    assert_eq!(s(33).message(), "iscsid request timed out");
    // no code is both
    for code in -2..40 {
        assert!(!(s(code).is_permanent() && s(code).is_retryable()));
    }
}

// ----- properties -----

fn portal_strategy() -> impl Strategy<Value = ListedPortal> {
    (
        prop_oneof![
            any::<[u8; 4]>().prop_map(|a| std::net::Ipv4Addr::from(a).to_string()),
            any::<[u16; 8]>().prop_map(|a| std::net::Ipv6Addr::from(a).to_string()),
        ],
        any::<u16>(),
        0i32..65536,
    )
        .prop_map(|(address, port, tpgt)| ListedPortal {
            address,
            port,
            tpgt,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2048))]

    #[test]
    fn portal_round_trips(p in portal_strategy()) {
        prop_assert_eq!(ListedPortal::parse(&p.to_string()), Ok(p));
    }

    #[test]
    fn flat_line_round_trips(p in portal_strategy(), sid in any::<u32>(),
                             t in prop::sample::select(vec!["iser", "tcp", "<empty>", "bnx2i"]),
                             flash in any::<bool>()) {
        let nt = if flash { "flash" } else { "non-flash" };
        let line = format!("{t}: [{sid}] {p} iqn.2003-01.org.example:t{sid} ({nt})");
        let s = parse_session_line(&line).expect("round trip");
        prop_assert_eq!(s.sid, sid);
        prop_assert_eq!(s.portal, p);
        prop_assert_eq!(s.transport.name(), t);
    }

    #[test]
    fn parsers_never_panic(s in "(?s).{0,400}") {
        let _ = parse_session_list(&s);
        let _ = parse_session_tree(&s);
        let _ = parse_discovery(&s);
        let _ = parse_login_output(&s);
        let _ = parse_records(&s);
    }

    #[test]
    fn tree_parser_survives_line_shuffles(j in 0usize..300, k in 0usize..300, drop in 0usize..300) {
        // Real output with lines removed and moved: never panics, every session has a SID,
        // every skipped line number is within the input.
        let (text, _) = fixture("constructed-p3-multi.txt");
        let mut lines: Vec<&str> = text.lines().collect();
        let n = lines.len();
        if n > 0 {
            let i = drop % n;
            lines.remove(i);
            let j = j % lines.len().max(1);
            let k = k % lines.len().max(1);
            lines.swap(j, k);
        }
        let mutated = lines.join("\n");
        let p = parse_session_tree(&mutated);
        for sk in &p.skipped {
            prop_assert!(sk.line_no >= 1 && sk.line_no <= lines.len().max(1));
        }
        prop_assert!(p.items.len() <= 6);
    }

    #[test]
    fn exit_code_round_trips(code in any::<i32>()) {
        prop_assert_eq!(IscsiadmStatus::from_code(code).code(), code);
    }
}
