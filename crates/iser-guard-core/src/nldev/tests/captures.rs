//! Real kernel bytes: nldevcap captures of a 6.1 and a 6.12 kernel (requests as sent by
//! nldev_dump.py, replies as received) and the 6.12 monitor events, cross-checked against the
//! iproute2 views (`rdma dev`, `rdma link`, `rdma resource show qp -j`) of the same moments.

use std::collections::BTreeSet;

use netlink_packet_core::{DefaultNla, NetlinkPayload, NLM_F_MULTIPART, NLM_F_REQUEST};

use super::fixture::{self, Capture};
use crate::nldev::request::{self, DOIT_FLAGS, DUMP_FLAGS};
use crate::nldev::*;
use crate::qp::{QpState, QpType};

const KERNELS: [&str; 2] = ["k61", "k612"];

fn file_name(c: &Capture) -> String {
    c.path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default()
        .to_string()
}

fn seq_of(bytes: &[u8]) -> u32 {
    u32::from_ne_bytes([bytes[8], bytes[9], bytes[10], bytes[11]])
}

/// The builder call that sends what `file` sent.
fn built_request(file: &str, seq: u32) -> NldevNetlinkMessage {
    let dev = |tag: &str| -> u32 {
        let i = file.find(tag).expect("device in file name") + tag.len();
        file[i..]
            .trim_end_matches(".hex")
            .parse()
            .expect("device index")
    };
    let body = &file[3..]; // strip "NN-"
    match body {
        "get-dump.hex" => request::get_dump(seq),
        b if b.starts_with("get-doit-dev") => request::get_device(seq, dev("-dev")),
        b if b.starts_with("port-get-dump-dev") => request::port_get_dump(seq, dev("-dev")),
        "sys-get.hex" => request::sys_get(seq),
        "res-get-dump.hex" => request::res_get_dump(seq),
        b if b.starts_with("res-qp-get-dump-dev") => {
            request::res_qp_get_dump(seq, dev("-dev"), None)
        }
        b if b.starts_with("res-cm-id-get-dump-dev") => {
            request::res_cm_id_get_dump(seq, dev("-dev"))
        }
        // Malformed requests of the capture, built from the same message types.
        "err-res-qp-get-dump-no-devindex.hex" | "err-res-qp-get-dump-no-devindex-extack.hex" => {
            request::request(NldevCommand::ResQpGet, vec![], DUMP_FLAGS, seq)
        }
        "err-res-qp-get-doit-no-attrs.hex" => {
            request::request(NldevCommand::ResQpGet, vec![], DOIT_FLAGS, seq)
        }
        "err-unknown-op-99.hex" | "err-unknown-op-99-extack.hex" => {
            request::request(NldevCommand::Other(99), vec![], DOIT_FLAGS, seq)
        }
        "err-unknown-op-99-dump.hex" => {
            request::request(NldevCommand::Other(99), vec![], DUMP_FLAGS, seq)
        }
        "err-port-get-dump-no-devindex.hex" => {
            request::request(NldevCommand::PortGet, vec![], DUMP_FLAGS, seq)
        }
        "err-get-doit-devindex-4242.hex" => request::get_device(seq, 4242),
        "err-get-doit-devindex-2byte-extack.hex" => {
            // A DEV_INDEX with a 2-byte payload: not a valid u32, so only as a raw attribute.
            let bad = NldevAttribute::Other(DefaultNla::new(1, vec![1, 0]));
            request::request(NldevCommand::Get, vec![bad], DOIT_FLAGS, seq)
        }
        "err-get-doit-no-ack-flag-devindex-4242.hex" => request::request(
            NldevCommand::Get,
            vec![NldevAttribute::DevIndex(4242)],
            NLM_F_REQUEST,
            seq,
        ),
        other => panic!("no builder mapped for capture {other}"),
    }
}

#[test]
fn every_captured_request_encodes_byte_exactly_from_the_builder() {
    let mut n = 0;
    for kernel in KERNELS {
        for c in fixture::all_captures(kernel) {
            let name = file_name(&c);
            let built = built_request(&name, seq_of(&c.request));
            assert_eq!(encode(&built).unwrap(), c.request, "{}", c.path.display());
            n += 1;
        }
    }
    assert_eq!(n, 2 * (21 + 7 + 11 + 11));
}

#[test]
fn every_captured_well_formed_request_decodes_and_re_encodes() {
    for kernel in KERNELS {
        for c in fixture::all_captures(kernel) {
            let decoded = decode(&c.request);
            if file_name(&c).contains("2byte") {
                let err = decoded.unwrap_err();
                assert!(
                    matches!(&err, NldevError::Malformed { command: NldevCommand::Get, reason }
                        if reason.contains("invalid RDMA_NLDEV_ATTR_DEV_INDEX value")),
                    "{err}"
                );
                continue;
            }
            let decoded = decoded.unwrap_or_else(|e| panic!("{}: {e}", c.path.display()));
            assert_eq!(encode(&decoded).unwrap(), c.request, "{}", c.path.display());
        }
    }
}

#[test]
fn every_captured_reply_decodes_and_re_encodes_to_the_same_bytes() {
    let mut n = 0;
    for kernel in KERNELS {
        for c in fixture::all_captures(kernel) {
            for reply in &c.replies {
                let m = decode(reply).unwrap_or_else(|e| panic!("{}: {e}", c.path.display()));
                assert_eq!(&encode(&m).unwrap(), reply, "{}", c.path.display());
                // The same bytes as a datagram give the same single message.
                let all: Vec<_> = DatagramMessages::new(reply).collect();
                assert_eq!(all, vec![Ok(m)]);
                n += 1;
            }
        }
    }
    // 145 messages per kernel folder, 50 of them requests (NLDEVCAP-NOTES: 290 in all).
    assert_eq!(n, 2 * 95);
}

#[test]
fn monitor_events_decode_re_encode_and_follow_the_scenario() {
    let raw = fixture::monitor_events();
    let events: Vec<MonitorEvent> = raw
        .iter()
        .map(|bytes| {
            let m = decode(bytes).unwrap();
            assert_eq!(&encode(&m).unwrap(), bytes);
            assert_eq!((m.header.flags, m.header.sequence_number), (0, 0));
            MonitorEvent::try_from(inner(&m).unwrap()).unwrap()
        })
        .collect();
    type Summary<'a> = (
        MonitorEventType,
        Option<u32>,
        Option<&'a str>,
        Option<u32>,
        Option<&'a str>,
    );
    let summary: Vec<Summary> = events
        .iter()
        .map(|e| {
            (
                e.event,
                e.dev_index,
                e.dev_name.as_deref(),
                e.netdev_index,
                e.netdev_name.as_deref(),
            )
        })
        .collect();
    use MonitorEventType::*;
    assert_eq!(
        summary,
        vec![
            (Register, Some(0), Some("rxe_ini"), None, None),
            (
                NetdevAttach,
                Some(0),
                Some("rxe_ini"),
                Some(3),
                Some("ini0")
            ),
            (Register, Some(1), Some("rxe_tgt"), None, None),
            (
                NetdevAttach,
                Some(1),
                Some("rxe_tgt"),
                Some(2),
                Some("tgt0")
            ),
            (Unregister, Some(0), Some("rxe_ini"), None, None),
            // Re-added: a new index, same netdev.
            (Register, Some(2), Some("rxe_ini"), None, None),
            (
                NetdevAttach,
                Some(2),
                Some("rxe_ini"),
                Some(3),
                Some("ini0")
            ),
            (Unregister, Some(2), Some("rxe_ini"), None, None),
            (Unregister, Some(1), Some("rxe_tgt"), None, None),
        ]
    );
    assert!(events
        .iter()
        .filter(|e| e.event == NetdevAttach)
        .all(|e| e.port == Some(1)));
}

/// Inner messages of a capture's replies.
fn replies(c: &Capture) -> Vec<NldevMessage> {
    c.replies
        .iter()
        .filter_map(|r| match decode(r).unwrap().payload {
            NetlinkPayload::InnerMessage(m) => Some(m),
            _ => None,
        })
        .collect()
}

/// The capture of `moment` whose name is `NN-<body>.hex`.
fn capture_named(kernel: &str, moment: &str, body: &str) -> Capture {
    let dir = fixture::root().join(kernel).join(moment);
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .find(|n| n.get(3..) == Some(&format!("{body}.hex")))
        .unwrap_or_else(|| panic!("no capture {body} in {}", dir.display()));
    fixture::load(&dir.join(file))
}

fn devices(kernel: &str, moment: &str) -> Vec<DeviceInfo> {
    let c = fixture::capture(kernel, moment, "01-get-dump");
    replies(&c)
        .iter()
        .map(|m| DeviceInfo::try_from(m).unwrap())
        .collect()
}

/// The view folder's moment name for a nldev capture moment.
fn view_moment(moment: &str) -> &str {
    moment.trim_start_matches("nldev-")
}

fn guid_text(g: u64) -> String {
    let h = format!("{g:016x}");
    format!("{}:{}:{}:{}", &h[0..4], &h[4..8], &h[8..12], &h[12..16])
}

#[test]
fn devices_match_rdma_dev_and_the_re_added_device_gets_index_2() {
    for kernel in KERNELS {
        for moment in [
            "nldev-1-loggedin",
            "nldev-3-inireadded",
            "nldev-4-loggedout",
        ] {
            let devs = devices(kernel, moment);
            // `rdma dev`: "0: rxe_ini: node_type ca node_guid 9838:0bff:… sys_image_guid …"
            let view =
                fixture::view_lines(kernel, &format!("rdma-dev-{}.txt", view_moment(moment)));
            let from_view: BTreeSet<String> =
                view.iter().map(|l| l.trim_end().to_string()).collect();
            let from_nl: BTreeSet<String> = devs
                .iter()
                .map(|d| {
                    assert_eq!(d.node_type, Some(1)); // CA
                    format!(
                        "{}: {}: node_type ca node_guid {} sys_image_guid {}",
                        d.index,
                        d.name,
                        guid_text(d.node_guid.unwrap()),
                        guid_text(d.sys_image_guid.unwrap())
                    )
                })
                .collect();
            assert_eq!(from_nl, from_view, "{kernel} {moment}");
            for d in &devs {
                assert_eq!(d.port_count, 1);
                assert_eq!(d.protocol.as_deref(), Some("roce"));
                assert_eq!(d.fw_version, None); // rxe reports no firmware
                let expect_nat = if kernel == "k612" { Some(1) } else { None };
                assert_eq!(
                    d.name_assign_type, expect_nat,
                    "NAME_ASSIGN_TYPE is new in 6.12"
                );
            }
            let ini = devs.iter().find(|d| d.name == "rxe_ini").unwrap();
            let expected_index = if moment == "nldev-1-loggedin" { 0 } else { 2 };
            assert_eq!(ini.index, expected_index, "{kernel} {moment}");
        }
        // While deleted, only rxe_tgt is left.
        let names: Vec<String> = devices(kernel, "nldev-2-inideleted")
            .into_iter()
            .map(|d| d.name)
            .collect();
        assert_eq!(names, vec!["rxe_tgt".to_string()]);
    }
}

#[test]
fn ports_match_rdma_link() {
    for kernel in KERNELS {
        for moment in [
            "nldev-1-loggedin",
            "nldev-3-inireadded",
            "nldev-4-loggedout",
        ] {
            let mut lines = BTreeSet::new();
            for dev in devices(kernel, moment) {
                let c = capture_named(kernel, moment, &format!("port-get-dump-dev{}", dev.index));
                for m in replies(&c) {
                    let p = PortInfo::try_from(&m).unwrap();
                    assert_eq!(
                        (p.dev_index, p.dev_name.as_str()),
                        (dev.index, dev.name.as_str())
                    );
                    assert_eq!(
                        (p.state, p.phys_state),
                        (IbPortState::Active, PhysState::LinkUp)
                    );
                    let netdev = if p.dev_name == "rxe_ini" {
                        (3, "ini0")
                    } else {
                        (2, "tgt0")
                    };
                    assert_eq!(
                        (p.netdev_index, p.netdev_name.as_deref()),
                        (Some(netdev.0), Some(netdev.1))
                    );
                    lines.insert(format!(
                        "link {}/{} state {} physical_state {} netdev {}",
                        p.dev_name,
                        p.port,
                        p.state,
                        p.phys_state,
                        p.netdev_name.unwrap()
                    ));
                }
            }
            let view =
                fixture::view_lines(kernel, &format!("rdma-link-{}.txt", view_moment(moment)));
            let view: BTreeSet<String> = view.iter().map(|l| l.trim_end().to_string()).collect();
            assert_eq!(lines, view, "{kernel} {moment}");
        }
    }
}

/// A QP entry in the keys and spelling of `rdma resource show qp -j`.
fn qp_json(q: &QpEntry) -> serde_json::Value {
    let mut o = serde_json::Map::new();
    o.insert("ifindex".into(), q.dev_index.into());
    o.insert("ifname".into(), q.dev_name.clone().into());
    if let Some(p) = q.port {
        o.insert("port".into(), p.into());
    }
    o.insert("lqpn".into(), q.lqpn.into());
    if let Some(r) = q.rqpn {
        o.insert("rqpn".into(), r.into());
    }
    o.insert("type".into(), q.qp_type.name().into());
    o.insert("state".into(), q.state.name().into());
    if let Some(v) = q.rq_psn {
        o.insert("rq-psn".into(), v.into());
    }
    if let Some(v) = q.sq_psn {
        o.insert("sq-psn".into(), v.into());
    }
    if let Some(v) = q.path_mig_state {
        o.insert("path-mig-state".into(), path_mig_state_name(v).into());
    }
    if let Some(c) = &q.kern_name {
        o.insert("comm".into(), c.clone().into());
    }
    serde_json::Value::Object(o)
}

fn qps(kernel: &str, moment: &str) -> Vec<QpEntry> {
    let mut all = Vec::new();
    for dev in devices(kernel, moment) {
        let c = capture_named(kernel, moment, &format!("res-qp-get-dump-dev{}", dev.index));
        for m in replies(&c) {
            let entries = QpEntries::new(&m).unwrap();
            all.extend(entries.map(Result::unwrap));
        }
    }
    all
}

#[test]
fn qps_match_rdma_resource_show_qp_json() {
    for kernel in KERNELS {
        for moment in [
            "nldev-1-loggedin",
            "nldev-3-inireadded",
            "nldev-4-loggedout",
        ] {
            let entries = qps(kernel, moment);
            let ours: Vec<serde_json::Value> = entries.iter().map(qp_json).collect();
            let view =
                fixture::view_lines(kernel, &format!("rdma-qp-json-{}.txt", view_moment(moment)));
            let theirs: Vec<serde_json::Value> = serde_json::from_str(&view[0]).unwrap();
            // PSNs move between the dump and iproute2's view taken moments later (iSCSI
            // NOP-Outs): compare them apart, allowing a few packets of drift.
            let psns = |v: &serde_json::Value| -> Vec<i64> {
                ["rq-psn", "sq-psn"]
                    .iter()
                    .map(|k| v[*k].as_i64().unwrap_or(-1))
                    .collect()
            };
            let key = |v: &serde_json::Value| {
                let mut v = v.clone();
                let o = v.as_object_mut().unwrap();
                o.remove("rq-psn");
                o.remove("sq-psn");
                let lq = o["lqpn"].to_string();
                format!("{} {lq}", serde_json::Value::Object(o.clone()))
            };
            for o in &ours {
                let t = theirs.iter().find(|t| key(t) == key(o)).unwrap();
                for (a, b) in psns(o).into_iter().zip(psns(t)) {
                    assert!(
                        (b - a).abs() <= 16,
                        "{kernel} {moment}: PSN {a} vs view {b}"
                    );
                }
            }
            let mut ours_sorted: Vec<String> = ours.iter().map(key).collect();
            let mut theirs_sorted: Vec<String> = theirs.iter().map(key).collect();
            ours_sorted.sort();
            theirs_sorted.sort();
            assert_eq!(ours_sorted, theirs_sorted, "{kernel} {moment}");

            // The GSI QP of every device: QP 1, RTS, owned by ib_core.
            let gsi: Vec<&QpEntry> = entries.iter().filter(|q| q.is_gsi()).collect();
            assert_eq!(gsi.len(), 2);
            for q in gsi {
                assert_eq!(q.state, QpState::Rts);
                assert_eq!(q.kern_name.as_deref(), Some("ib_core"));
                assert_eq!((q.rqpn, q.rq_psn, q.path_mig_state), (None, None, None));
            }
            // iSER connections are RC QPs owned by rdma_cm, one per side while logged in.
            let rc = entries
                .iter()
                .filter(|q| q.qp_type == QpTypeOrRaw::Known(QpType::Rc));
            let rc: Vec<&QpEntry> = rc.collect();
            assert!(rc.iter().all(|q| q.kern_name.as_deref() == Some("rdma_cm")));
            let expected_rc = if moment == "nldev-4-loggedout" { 0 } else { 2 };
            assert_eq!(rc.len(), expected_rc, "{kernel} {moment}");
        }
    }
}

#[test]
fn cm_ids_decode_with_addresses() {
    for kernel in KERNELS {
        let c = fixture::capture(kernel, "nldev-1-loggedin", "10-res-cm-id-get-dump-dev0");
        let msgs = replies(&c);
        assert_eq!(msgs.len(), 1);
        let ids: Vec<CmIdEntry> = CmIdEntry::all(&msgs[0])
            .unwrap()
            .into_iter()
            .map(Result::unwrap)
            .collect();
        assert_eq!(ids.len(), 1);
        let id = &ids[0];
        assert_eq!(
            (id.dev_index, id.dev_name.as_str(), id.port),
            (0, "rxe_ini", Some(1))
        );
        assert_eq!(
            (id.lqpn, id.qp_type),
            (Some(18), Some(QpTypeOrRaw::Known(QpType::Rc)))
        );
        assert_eq!(cm_state_name(id.state), "CONNECT");
        assert_eq!(id.ps.map(port_space_name), Some("TCP"));
        assert_eq!(id.kern_name.as_deref(), Some("ib_iser"));
        // The initiator's source port differs per run: take it from `rdma resource show cm_id -j`.
        let view = fixture::view_lines(kernel, "rdma-cm_id-json-1-loggedin.txt");
        let json: Vec<serde_json::Value> = serde_json::from_str(&view[0]).unwrap();
        let ini = json.iter().find(|v| v["ifname"] == "rxe_ini").unwrap();
        assert_eq!(
            id.src().unwrap().to_string(),
            ini["src-addr"].as_str().unwrap()
        );
        assert_eq!(id.dst().unwrap().to_string(), "192.0.2.2:3260");
        assert_eq!(ini["dst-addr"], "192.0.2.2:3260");
        assert_eq!(id.cm_idn, Some(1));
    }
}

#[test]
fn sys_get_reports_monitor_support_only_on_6_12() {
    for (kernel, monitor) in [("k61", false), ("k612", true)] {
        let c = fixture::capture(kernel, "nldev-1-loggedin", "06-sys-get");
        let msgs = replies(&c);
        let sys = SysInfo::try_from(&msgs[0]).unwrap();
        assert_eq!(sys.supports_monitor(), monitor, "{kernel}");
        assert_eq!(sys.netns_shared(), Some(true));
        assert_eq!(sys.copy_on_fork, Some(1));
        // Then the ACK: NLMSG_ERROR 0 with only the request header echoed (CAPPED).
        let ack = decode(c.replies.last().unwrap()).unwrap();
        match ack.payload {
            NetlinkPayload::Error(e) => {
                assert_eq!(e.code, None);
                assert_eq!(e.header, c.request);
            }
            other => panic!("expected an ACK, got {other:?}"),
        }
    }
}

#[test]
fn errors_and_done_codes_are_kept() {
    for kernel in KERNELS {
        // A dump without DEV_INDEX: NLMSG_DONE carrying -EINVAL, flags MULTI.
        let c = fixture::capture(kernel, "nldev-1-loggedin", "12-err");
        let m = decode(&c.replies[0]).unwrap();
        assert_eq!(m.header.flags, NLM_F_MULTIPART);
        match m.payload {
            NetlinkPayload::Done(d) => assert_eq!(d.code, -22),
            other => panic!("expected DONE, got {other:?}"),
        }
        // Unknown op 99: NLMSG_ERROR -EINVAL echoing the request.
        let c = fixture::capture(kernel, "nldev-1-loggedin", "14-err");
        match decode(&c.replies[0]).unwrap().payload {
            NetlinkPayload::Error(e) => {
                assert_eq!(e.raw_code(), -22);
                assert_eq!(e.header, c.request);
            }
            other => panic!("expected ERROR, got {other:?}"),
        }
        // The unknown op itself decodes as Other(99) and round-trips.
        let req = decode(&c.request).unwrap();
        assert_eq!(inner(&req).unwrap().command, NldevCommand::Other(99));
    }
}
