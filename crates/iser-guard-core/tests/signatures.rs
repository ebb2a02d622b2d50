//! The classifier against exact kernel lines: the field incident, real lines from the lab
//! captures (shared lab/captures, named per test), and the format strings of kernel-facts
//! §1, §1.6 and §4.4 filled in as the kernel prints them.

use iser_guard_core::kmsg::Record;
use iser_guard_core::qp::QpState;
use iser_guard_core::signatures::{
    classify, classify_bytes, classify_record, prefilter, IscsiErr, NamedDevices, RdmaDriver,
    Signature, SignatureKind,
};

fn kind(text: &str) -> SignatureKind {
    classify(text, None)
        .unwrap_or_else(|| panic!("not classified: {text:?}"))
        .kind
}

fn sig(text: &str, dict: Option<&str>) -> Signature {
    classify(text, dict).unwrap_or_else(|| panic!("not classified: {text:?}"))
}

#[test]
fn field_incident_irdma_line() {
    let s = sig(
        "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3",
        None,
    );
    assert_eq!(
        s.kind,
        SignatureKind::StuckQpTransition {
            qp: 1,
            from: QpState::Err,
            to: QpState::Rts
        }
    );
    assert!(s.kind.is_stuck_gsi());
    assert_eq!(s.kind.rdma_driver(), Some(RdmaDriver::Irdma));
    assert_eq!(s.device.driver.as_deref(), Some("ice"));
    assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
    assert_eq!(s.device.netdev, None);
}

#[test]
fn field_incident_mad_line() {
    let s = sig(
        "infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22",
        Some("+infiniband:rocep2s0f0"),
    );
    assert_eq!(
        s.kind,
        SignatureKind::MadRtsFailed {
            errno: -22,
            legacy: false
        }
    );
    assert!(s.kind.is_stuck_gsi());
    assert_eq!(
        s.kind.transition(),
        Some((Some(1), QpState::Sqe, QpState::Rts))
    );
    assert_eq!(s.device.driver.as_deref(), Some("infiniband"));
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
}

#[test]
fn legacy_mad_line_gets_device_from_dictionary() {
    let s = sig(
        "ib_mad: mad_error_handler - ib_modify_qp to RTS : -22",
        Some("+infiniband:mlx4_0"),
    );
    assert_eq!(
        s.kind,
        SignatureKind::MadRtsFailed {
            errno: -22,
            legacy: true
        }
    );
    assert_eq!(s.device.driver.as_deref(), Some("ib_mad"));
    assert_eq!(s.device.rdma_dev.as_deref(), Some("mlx4_0"));
}

#[test]
fn irdma_line_completed_by_pci_dictionary() {
    // kernel-facts §5: ibdev_* lines of irdma carry DEVICE=+pci:<parent>.
    let s = sig(
        "rocep2s0f0: modify_qp invalid for qp_id=7, old_state=0x1, new_state=0x3",
        Some("+pci:0000:02:00.0"),
    );
    assert_eq!(
        s.kind,
        SignatureKind::StuckQpTransition {
            qp: 7,
            from: QpState::Init,
            to: QpState::Rts
        }
    );
    assert!(!s.kind.is_stuck_gsi());
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
    assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
}

#[test]
fn escaped_and_unescaped_text_classify_alike() {
    let plain = sig(
        "infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22",
        None,
    );
    // A backslash in the device name arrives as "\x5c" (contrived, but legal escaping).
    let escaped = sig(
        "infiniband roce\\x5cp2: ib_mad_send_error - ib_modify_qp to RTS: -22",
        None,
    );
    assert_eq!(escaped.kind, plain.kind);
    assert_eq!(escaped.device.rdma_dev.as_deref(), Some("roce\\p2"));
    let tabbed = sig(
        "sd 0:0:0:0: [sda] tag#1 FAILED Result: hostbyte=DID_ABORT\\x09driverbyte=DRIVER_OK",
        None,
    );
    assert!(matches!(
        tabbed.kind,
        SignatureKind::ScsiCommandFailed { .. }
    ));
}

#[test]
fn mad_fatal_and_start_errors() {
    let s = sig("infiniband rocep2s0f0: Fatal error (1) on MAD QP (1)", None);
    assert_eq!(s.kind, SignatureKind::MadQpFatal { event: 1, qp: 1 });
    assert!(s.kind.is_stuck_gsi());
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
    assert_eq!(
        kind("infiniband rocep2s0f0: Couldn't change QP1 state to RTS: -22"),
        SignatureKind::MadQpStartFailed {
            qp: 1,
            to: QpState::Rts,
            errno: -22
        }
    );
    assert_eq!(
        kind("infiniband mlx5_0: Couldn't change QP0 state to INIT: -12"),
        SignatureKind::MadQpStartFailed {
            qp: 0,
            to: QpState::Init,
            errno: -12
        }
    );
}

#[test]
fn irdma_async_event_with_and_without_source() {
    let s = sig(
        "ice 0000:02:00.0 rocep2s0f0: abnormal ae_id = 0x401 bool qp=1 qp_id = 1, ae_src=5",
        None,
    );
    assert_eq!(
        s.kind,
        SignatureKind::IrdmaAsyncError {
            ae_id: 0x401,
            is_qp: true,
            qp: 1,
            ae_src: Some(5)
        }
    );
    assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
    assert_eq!(
        kind("irdma0: abnormal ae_id = 0x503 bool qp=0 qp_id = 12"),
        SignatureKind::IrdmaAsyncError {
            ae_id: 0x503,
            is_qp: false,
            qp: 12,
            ae_src: None
        }
    );
}

#[test]
fn bnxt_re_three_lines() {
    let p = "bnxt_re bnxt_en.rdma.0 bnxt_re0: ";
    let l1 = sig(&format!("{p}Invalid attribute mask: 0x1 specified "), None);
    assert_eq!(
        l1.kind,
        SignatureKind::InvalidAttrMask {
            driver: RdmaDriver::BnxtRe,
            mask: 1
        }
    );
    assert_eq!(l1.device.rdma_dev.as_deref(), Some("bnxt_re0"));
    assert_eq!(l1.device.parent.as_deref(), Some("bnxt_en.rdma.0"));
    assert_eq!(
        kind(&format!("{p}for qpn: 0x1 type: 0x1")),
        SignatureKind::RejectedQpInfo {
            driver: RdmaDriver::BnxtRe,
            qp: 1,
            qp_type: 1
        }
    );
    // %#x prints zero as "0".
    assert_eq!(
        kind(&format!("{p}for qpn: 0 type: 0")),
        SignatureKind::RejectedQpInfo {
            driver: RdmaDriver::BnxtRe,
            qp: 0,
            qp_type: 0
        }
    );
    let l3 = kind(&format!("{p}curr_qp_state=0x6, new_qp_state=0x3"));
    assert_eq!(
        l3,
        SignatureKind::InvalidTransition {
            driver: RdmaDriver::BnxtRe,
            qp: None,
            qp_type: None,
            from: QpState::Err,
            to: QpState::Rts,
            mask: None
        }
    );
    assert_eq!(l3.transition(), Some((None, QpState::Err, QpState::Rts)));
}

#[test]
fn qedr_one_record_and_split_lines() {
    let t = SignatureKind::InvalidTransition {
        driver: RdmaDriver::Qedr,
        qp: Some(1),
        qp_type: Some(1),
        from: QpState::Err,
        to: QpState::Rts,
        mask: Some(0x2001),
    };
    // One record, newline escaped as in /dev/kmsg.
    let s = sig(
        "[qedr_modify_qp:2398(qedr0)]modify qp: invalid attribute mask=0x2001 specified for\\x0aqpn=0x1 of type=0x1 old_qp_state=0x6, new_qp_state=0x3",
        None,
    );
    assert_eq!(s.kind, t);
    assert_eq!(s.device.rdma_dev.as_deref(), Some("qedr0"));
    // dmesg prints the two halves as two lines.
    let l1 = sig(
        "[qedr_modify_qp:2398(qedr0)]modify qp: invalid attribute mask=0x2001 specified for",
        None,
    );
    assert_eq!(
        l1.kind,
        SignatureKind::InvalidAttrMask {
            driver: RdmaDriver::Qedr,
            mask: 0x2001
        }
    );
    assert_eq!(l1.device.rdma_dev.as_deref(), Some("qedr0"));
    let l2 = kind("qpn=0x1 of type=0x1 old_qp_state=0x6, new_qp_state=0x3");
    assert_eq!(
        l2,
        SignatureKind::InvalidTransition {
            driver: RdmaDriver::Qedr,
            qp: Some(1),
            qp_type: Some(1),
            from: QpState::Err,
            to: QpState::Rts,
            mask: None,
        }
    );
}

#[test]
fn hns_and_rxe_rejections() {
    for line in [
        "hns_roce_hw_v2 0000:7d:00.0 hns_0: ib_modify_qp_is_ok failed",
        "hns_roce_hw_v2 0000:7d:00.0 hns_0: failed to check modify qp state",
    ] {
        let s = sig(line, None);
        assert_eq!(
            s.kind,
            SignatureKind::ModifyQpRejected {
                driver: RdmaDriver::Hns
            }
        );
        assert_eq!(s.device.rdma_dev.as_deref(), Some("hns_0"));
        assert_eq!(s.device.pci.as_deref(), Some("0000:7d:00.0"));
    }
    let s = sig(
        "rdma_rxe: invalid mask or state for qp",
        Some("+infiniband:rxe_ini"),
    );
    assert_eq!(
        s.kind,
        SignatureKind::ModifyQpRejected {
            driver: RdmaDriver::Rxe
        }
    );
    assert_eq!(s.device.driver.as_deref(), Some("rdma_rxe"));
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rxe_ini"));
}

#[test]
fn rxe_dyndbg_state_lines_from_capture() {
    // captures/rxeflap-dyndbg/console.log
    assert_eq!(
        kind("rdma_rxe: qp#21 state -> ERR"),
        SignatureKind::RxeQpState {
            qp: 21,
            state: QpState::Err
        }
    );
    assert_eq!(
        kind("rdma_rxe: qp#1 state -> RTS"),
        SignatureKind::RxeQpState {
            qp: 1,
            state: QpState::Rts
        }
    );
    assert_eq!(classify("the state -> machine moved on", None), None);
}

#[test]
fn iscsi_lines_from_captures() {
    // captures/linkdown1, blackhole1, rxeflap-dyndbg console.log / KEY-LINES.txt
    let s = sig(" connection3:0: detected conn error (1011)", None);
    assert_eq!(
        s.kind,
        SignatureKind::IscsiConnError {
            code: IscsiErr::CONN_FAILED
        }
    );
    assert_eq!(s.device.iscsi_session, Some(3));
    assert_eq!(s.device.iscsi_conn, Some(0));
    for (code, name) in [
        (1011, "CONN_FAILED"),
        (1013, "SESSION_FAILED"),
        (1018, "INVALID_HOST"),
        (1019, "XMIT_FAILED"),
        (1020, "TCP_CONN_CLOSE"),
        (1021, "SCSI_EH_SESSION_RST"),
        (1022, "NOP_TIMEDOUT"),
    ] {
        let k = kind(&format!(" connection2:0: detected conn error ({code})"));
        let SignatureKind::IscsiConnError { code: c } = k else {
            panic!("{k:?}")
        };
        assert_eq!(c.0, code);
        assert_eq!(c.name(), Some(name));
        assert!(!c.meaning().is_empty());
    }
    let s = sig(" session2: session recovery timed out after 120 secs", None);
    assert_eq!(
        s.kind,
        SignatureKind::IscsiSessionRecoveryTimedOut { secs: 120 }
    );
    assert_eq!(s.device.iscsi_session, Some(2));
    assert_eq!(s.device.iscsi_conn, None);
    assert_eq!(
        kind(" connection3:0: Could not send nopout"),
        SignatureKind::IscsiNopoutFailed
    );
    assert_eq!(
        kind(" connection3:0: Could not send TMF."),
        SignatureKind::IscsiTmfFailed
    );
    let s = sig(
        " connection2:0: ping timeout of 5 secs expired, recv timeout 5, last rx 4294898978, last ping 4294900232, now 4294901504",
        None,
    );
    assert_eq!(
        s.kind,
        SignatureKind::IscsiPingTimeout {
            timeout_secs: 5,
            recv_timeout_secs: 5
        }
    );
    assert_eq!(s.device.iscsi_session, Some(2));
}

#[test]
fn iser_lines_from_captures() {
    let s = sig(
        "iser: iser_event_handler: async event port error (10) on device rxe_ini port 1",
        None,
    );
    assert_eq!(s.kind, SignatureKind::IserPortError);
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rxe_ini"));
    assert_eq!(s.device.port, Some(1));
    assert_eq!(s.device.driver.as_deref(), Some("iser"));
    assert_eq!(
        kind("iser: iser_event_handler: async event port active (9) on device rxe_ini port 1"),
        SignatureKind::IserPortActive
    );
    assert_eq!(
        kind("iser: iser_event_handler: async event GID table change (18) on device mlx5_0 port 1"),
        SignatureKind::IserAsyncEvent {
            event: 18,
            name: "GID table change".into()
        }
    );
    assert_eq!(
        kind("iser: iscsi_iser_task_init: Failed to init task 00000000dee43e0b, err = -19"),
        SignatureKind::IserTaskInitFailed { errno: -19 }
    );
    assert_eq!(
        kind("iser: iser_err_comp: task_rsp failure: transport retry counter exceeded (12) vend_err 0x81"),
        SignatureKind::IserCompletionError {
            wr: "task_rsp".into(),
            status: "transport retry counter exceeded".into(),
            status_code: 12,
            vendor_err: 0x81
        }
    );
    assert_eq!(
        kind("iser: iser_err_comp: command failure: local protection error (4) vend_err 0"),
        SignatureKind::IserCompletionError {
            wr: "command".into(),
            status: "local protection error".into(),
            status_code: 4,
            vendor_err: 0
        }
    );
}

#[test]
fn scsi_and_block_lines_from_captures() {
    // captures/linkdown40
    let s = sig(
        "sd 0:0:0:0: [sda] tag#57 FAILED Result: hostbyte=DID_ABORT driverbyte=DRIVER_OK cmd_age=0s",
        Some("+scsi:0:0:0:0"),
    );
    assert_eq!(
        s.kind,
        SignatureKind::ScsiCommandFailed {
            tag: Some(57),
            hostbyte: "DID_ABORT".into(),
            driverbyte: Some("DRIVER_OK".into())
        }
    );
    assert_eq!(s.device.disk.as_deref(), Some("sda"));
    assert_eq!(s.device.scsi_hctl.as_deref(), Some("0:0:0:0"));
    let s = sig(
        "I/O error, dev sda, sector 128 op 0x1:(WRITE) flags 0x8800 phys_seg 16 prio class 2",
        None,
    );
    assert_eq!(
        s.kind,
        SignatureKind::BlockIoError {
            sector: Some(128),
            op: Some("WRITE".into())
        }
    );
    assert_eq!(
        s.device,
        NamedDevices {
            disk: Some("sda".into()),
            ..NamedDevices::default()
        }
    );
    // Older kernels put the function name first.
    let s = sig(
        "blk_update_request: I/O error, dev sdb, sector 0 op 0x0:(READ) flags 0x800 phys_seg 1 prio class 0",
        None,
    );
    assert_eq!(s.device.disk.as_deref(), Some("sdb"));
    let s = sig("sd 0:0:0:0: rejecting I/O to offline device", None);
    assert_eq!(s.kind, SignatureKind::ScsiRejectingOffline);
    assert_eq!(s.device.scsi_hctl.as_deref(), Some("0:0:0:0"));
}

#[test]
fn rdma_cm_lines_from_captures() {
    // captures/rxeflap-dyndbg
    assert_eq!(
        kind("RDMA CM: REJECTED: invalid service ID"),
        SignatureKind::RdmaCmRejected {
            reason: "invalid service ID".into()
        }
    );
    let s = sig(
        "RDMA CM: ADDR_ERROR: failed to acquire device. status -19",
        None,
    );
    assert_eq!(
        s.kind,
        SignatureKind::RdmaCmAddrError {
            reason: "failed to acquire device".into(),
            status: Some(-19)
        }
    );
    assert!(s.device.is_empty());
    assert_eq!(
        kind("RDMA CM: ROUTE_ERROR: failed to resolve route. status -110"),
        SignatureKind::RdmaCmError {
            event: "ROUTE_ERROR".into(),
            detail: "failed to resolve route".into(),
            status: Some(-110)
        }
    );
}

#[test]
fn port_and_link_lines() {
    let s = sig("infiniband rxe_ini: set down", Some("+infiniband:rxe_ini"));
    assert_eq!(s.kind, SignatureKind::IbPortDown);
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rxe_ini"));
    assert_eq!(
        kind("infiniband rxe_tgt: set active"),
        SignatureKind::IbPortActive
    );
    let s = sig("ice 0000:02:00.0 enp2s0f0: NIC Link is Down", Some("n3"));
    assert_eq!(s.kind, SignatureKind::NetdevLinkDown);
    assert_eq!(s.device.netdev.as_deref(), Some("enp2s0f0"));
    assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
    assert_eq!(s.device.ifindex, Some(3));
    assert_eq!(
        kind("ice 0000:02:00.0 enp2s0f0: NIC Link is up 100 Gbps Full Duplex, Requested FEC: RS-FEC, Negotiated FEC: RS-FEC, Autoneg Advertised: On, Autoneg Negotiated: False, Flow Control: None"),
        SignatureKind::NetdevLinkUp {
            speed: Some("100 G".into())
        }
    );
    assert_eq!(
        kind("bnxt_en 0000:3b:00.0 eno1np0: NIC Link is Up, 25000 Mbps full duplex, Flow control: none"),
        SignatureKind::NetdevLinkUp {
            speed: Some("25000 M".into())
        }
    );
    // The same words from a NIC that carries no RDMA device concern no RDMA port.
    assert_eq!(
        classify("e1000e 0000:00:1f.6 eno1: NIC Link is Down", None),
        None
    );
    let s = sig("mlx5_core 0000:81:00.0 enp129s0f0np0: Link down", None);
    assert_eq!(s.kind, SignatureKind::NetdevLinkDown);
    assert_eq!(s.device.netdev.as_deref(), Some("enp129s0f0np0"));
    assert_eq!(
        kind("mlx5_core 0000:81:00.0 enp129s0f0np0: Link up"),
        SignatureKind::NetdevLinkUp { speed: None }
    );
    // Not the whole message: not a link line.
    assert_eq!(classify("foo bar: Link up and running", None), None);
    assert_eq!(
        classify("infiniband rxe_ini: set down the rest", None),
        None
    );
}

#[test]
fn unrelated_lines_are_not_classified() {
    for line in [
        "ACPI: Using ACPI (MADT) for SMP configuration information",
        "infiniband rxe_ini: added ini0",
        "iser: iser_connect: connecting to: 192.0.2.2:3260",
        "sd 0:0:0:0: [sda] Attached SCSI disk",
        "scsi host0: iSCSI Initiator over iSER",
        "IPv6: ADDRCONF(NETDEV_CHANGE): tgt0: link becomes ready",
        "Kernel reported iSCSI connection 2:0 error",
        "",
        " ",
    ] {
        assert!(
            !prefilter(line.as_bytes()) || classify(line, None).is_none(),
            "{line}"
        );
        assert_eq!(classify(line, None), None, "{line}");
    }
}

#[test]
fn drifted_formats_are_reported_not_dropped() {
    let s = sig(
        "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1 (ERR to RTS)",
        None,
    );
    assert_eq!(
        s.kind,
        SignatureKind::UnknownVariant {
            anchor: "modify_qp invalid for qp_id=".into()
        }
    );
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
    // A state number the kernel does not have.
    assert!(matches!(
        kind("x: modify_qp invalid for qp_id=1, old_state=0x9, new_state=0x3"),
        SignatureKind::UnknownVariant { .. }
    ));
}

#[test]
fn invalid_utf8_does_not_matter_outside_a_match() {
    let mut line = b"\xff\xfe garbage ".to_vec();
    assert_eq!(classify_bytes(&line, None), None);
    line.extend_from_slice(b"infiniband rocep2s0f0: set down");
    // The prefix is garbage, but the message still classifies.
    let s = classify_bytes(&line, None).expect("classified");
    assert_eq!(s.kind, SignatureKind::IbPortDown);
}

#[test]
fn record_wrapper_marks_trust_by_facility() {
    let mut rec = Record {
        facility: 0,
        level: 4,
        seq: 77,
        usec: 123_456,
        continuation: false,
        text: "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3".into(),
        dict: vec![
            ("SUBSYSTEM".into(), "pci".into()),
            ("DEVICE".into(), "+pci:0000:02:00.0".into()),
        ],
    };
    let ev = classify_record(&rec).expect("classified");
    assert!(ev.trusted);
    assert_eq!((ev.seq, ev.usec, ev.level), (77, 123_456, 4));
    assert!(ev.signature.kind.is_stuck_gsi());
    rec.facility = 1;
    let ev = classify_record(&rec).expect("classified");
    assert!(!ev.trusted, "userspace-written records are untrusted");
    rec.text = "nothing to see".into();
    assert_eq!(classify_record(&rec), None);
}

#[test]
fn json_shape_is_tagged() {
    let s = sig(
        "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3",
        None,
    );
    let v = serde_json::to_value(&s).expect("json");
    assert_eq!(v["kind"]["kind"], "stuck_qp_transition");
    assert_eq!(v["kind"]["from"], "ERR");
    assert_eq!(v["kind"]["to"], "RTS");
    assert_eq!(v["device"]["rdma_dev"], "rocep2s0f0");
    assert!(v["device"].get("netdev").is_none());
    let back: Signature = serde_json::from_value(v).expect("round trip");
    assert_eq!(back, s);
}

// ---- fixtures ----------------------------------------------------------------------------

use std::collections::BTreeMap;

use iser_guard_core::kmsg::SavedLog;

/// Classifies every record of a fixture (through the kmsg saved-log parser, dictionary
/// attached) and counts `kind@device-label`.
fn census(name: &str) -> BTreeMap<String, usize> {
    let path = format!("{}/tests/fixtures/kmsg/{name}", env!("CARGO_MANIFEST_DIR"));
    let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut out = BTreeMap::new();
    for entry in SavedLog::from_bytes(&bytes) {
        let entry = entry.unwrap_or_else(|e| panic!("{name}: {e}"));
        let rec = entry.record;
        if let Some(s) = classify(rec.text, rec.dict_value("DEVICE")) {
            *out.entry(format!("{}@{}", s.kind.name(), s.device.label()))
                .or_default() += 1;
        }
    }
    out
}

fn expect(name: &str, want: &[(&str, usize)]) {
    let got = census(name);
    let want: BTreeMap<String, usize> = want.iter().map(|(k, n)| (k.to_string(), *n)).collect();
    assert_eq!(got, want, "{name}");
}

#[test]
fn fixture_field_incident_all_formats() {
    let want = [
        ("stuck_qp_transition@rocep2s0f0", 12),
        ("mad_rts_failed@rocep2s0f0", 12),
    ];
    expect("field-incident.dmesg", &want);
    expect("field-incident-raw.dmesg", &want);
    expect("field-incident.kmsg", &want);
}

#[test]
fn fixture_field_incident_kmsg_dictionary_attribution() {
    let path = format!(
        "{}/tests/fixtures/kmsg/field-incident.kmsg",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(path).expect("fixture");
    let mut n = 0;
    for entry in SavedLog::from_bytes(&bytes) {
        let rec = entry
            .expect("parses")
            .record
            .to_record()
            .expect("kmsg record");
        let ev = classify_record(&rec).expect("every record classifies");
        assert!(ev.trusted);
        assert!(ev.signature.kind.is_stuck_gsi());
        assert_eq!(ev.signature.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
        if matches!(ev.signature.kind, SignatureKind::StuckQpTransition { .. }) {
            assert_eq!(ev.signature.device.pci.as_deref(), Some("0000:02:00.0"));
            assert_eq!(ev.level, 4);
        } else {
            assert_eq!(ev.level, 3);
        }
        n += 1;
    }
    assert_eq!(n, 24);
}

// Expected counts cross-checked with `grep -c` of each message on the fixture.

#[test]
fn fixture_linkdown40() {
    // captures/linkdown40: target link down 40 s, then up; every later I/O fails.
    expect(
        "linkdown40.dmesg",
        &[
            ("block_io_error@sda", 11),
            ("ib_port_active@rxe_ini", 2),
            ("ib_port_active@rxe_tgt", 3),
            ("ib_port_down@rxe_ini", 1),
            ("ib_port_down@rxe_tgt", 1),
            ("iscsi_nopout_failed@connection2:0", 39),
            ("iser_port_active@rxe_ini/1", 1),
            ("iser_port_error@rxe_ini/1", 1),
            ("iser_task_init_failed@-", 55),
            ("scsi_command_failed@sda (0:0:0:0)", 11),
        ],
    );
}

#[test]
fn fixture_linkdown1() {
    // captures/linkdown1: target link down 150 s (dmesg at 150 s, before the crash).
    expect(
        "linkdown1.dmesg",
        &[
            ("ib_port_active@rxe_ini", 1),
            ("ib_port_active@rxe_tgt", 1),
            ("ib_port_down@rxe_ini", 1),
            ("ib_port_down@rxe_tgt", 1),
            ("iscsi_conn_error@connection3:0", 2),
            ("iscsi_nopout_failed@connection3:0", 58),
            ("iscsi_tmf_failed@connection3:0", 1),
            ("iser_port_error@rxe_ini/1", 1),
            ("iser_task_init_failed@-", 59),
        ],
    );
}

#[test]
fn fixture_blackhole1() {
    // captures/blackhole1: 100 % packet loss 40 s and 150 s.
    expect(
        "blackhole1.dmesg",
        &[
            ("block_io_error@sda", 1),
            ("ib_port_active@rxe_ini", 1),
            ("ib_port_active@rxe_tgt", 1),
            ("iscsi_conn_error@connection2:0", 2),
            ("iscsi_ping_timeout@connection2:0", 2),
            ("iscsi_session_recovery_timed_out@session2", 1),
            ("scsi_rejecting_offline@0:0:0:0", 1),
        ],
    );
}

#[test]
fn fixture_rxeflap_dyndbg() {
    // captures/rxeflap-dyndbg: rxe devices deleted and re-added, dynamic debug on.
    expect(
        "rxeflap-dyndbg.dmesg",
        &[
            ("block_io_error@sda", 1),
            ("ib_port_active@rxe_ini", 3),
            ("ib_port_active@rxe_tgt", 3),
            ("iscsi_conn_error@connection5:0", 1),
            ("iscsi_session_recovery_timed_out@session5", 1),
            ("rdma_cm_addr_error@-", 7),
            ("rdma_cm_rejected@-", 78),
            ("rxe_qp_state@-", 249),
            ("scsi_rejecting_offline@0:0:0:0", 1),
        ],
    );
}

#[test]
fn fixture_rxeflap2_nptoggle() {
    expect(
        "rxeflap2-nptoggle.dmesg",
        &[
            ("ib_port_active@rxe_ini", 2),
            ("ib_port_active@rxe_tgt", 2),
            ("iscsi_conn_error@connection2:0", 2),
        ],
    );
}

#[test]
fn fixture_nldevcap_kmsg_dumps() {
    // captures/nldevcap-k61 and -k612: raw `cat /dev/kmsg`, dictionaries attached.
    let want = [
        ("ib_port_active@rxe_ini", 2),
        ("ib_port_active@rxe_tgt", 1),
        ("iscsi_conn_error@connection2:0", 1),
    ];
    expect("raw/nldevcap-k61.kmsg", &want);
    expect("raw/nldevcap-k612.kmsg", &want);
}

#[test]
fn fixture_kmsg_dictionary_names_the_device() {
    let path = format!(
        "{}/tests/fixtures/kmsg/raw/nldevcap-k612.kmsg",
        env!("CARGO_MANIFEST_DIR")
    );
    let bytes = std::fs::read(path).expect("fixture");
    let mut seen = 0;
    for entry in SavedLog::from_bytes(&bytes) {
        let rec = entry.expect("parses").record;
        if let Some(s) = classify(rec.text, rec.dict_value("DEVICE")) {
            if s.kind == SignatureKind::IbPortActive {
                // Both the prefix and DEVICE=+infiniband:… name it.
                assert_eq!(
                    rec.dict_value("DEVICE"),
                    Some(format!("+infiniband:{}", s.device.label()).as_str())
                );
                seen += 1;
            }
        }
    }
    assert_eq!(seen, 3);
}

// ---- properties ---------------------------------------------------------------------------

mod props {
    use super::*;
    use proptest::prelude::*;

    fn state() -> impl Strategy<Value = QpState> {
        prop::sample::select(vec![
            QpState::Reset,
            QpState::Init,
            QpState::Rtr,
            QpState::Rts,
            QpState::Sqd,
            QpState::Sqe,
            QpState::Err,
        ])
    }

    fn devname() -> impl Strategy<Value = String> {
        "[a-z][a-z0-9_]{0,14}"
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Any text: no panic, and nothing classifies that the prefilter rejected.
        #[test]
        fn arbitrary_text_never_panics(text in any::<String>(), dict in proptest::option::of(any::<String>())) {
            let sig = classify(&text, dict.as_deref());
            if !prefilter(text.as_bytes()) {
                prop_assert!(sig.is_none());
            }
        }

        /// Kernel-shaped noise around the anchors: no panic.
        #[test]
        fn anchor_soup_never_panics(parts in proptest::collection::vec(
            prop_oneof![
                Just("modify_qp invalid for qp_id=".to_string()),
                Just(" - ib_modify_qp to RTS".to_string()),
                Just("curr_qp_state=".to_string()),
                Just("old_qp_state=".to_string()),
                Just("qpn=".to_string()),
                Just("RDMA CM: ".to_string()),
                Just("iser_event_handler: async event ".to_string()),
                Just(": set down".to_string()),
                Just("\\x".to_string()),
                "[ -~]{0,12}",
            ], 0..8)) {
            let text: String = parts.concat();
            let _ = classify(&text, None);
            let _ = classify(&text, Some(&text));
        }

        /// The irdma line round-trips: printing (qp, from, to) the way the kernel does and
        /// classifying it gives them back, with the device from the prefix.
        #[test]
        fn irdma_line_round_trips(qp in any::<u32>().prop_map(|q| q % 0x7fff_ffff), from in state(), to in state(), dev in devname()) {
            let line = format!(
                "ice 0000:02:00.0 {dev}: modify_qp invalid for qp_id={qp}, old_state={:#x}, new_state={:#x}",
                from as u32, to as u32
            );
            let s = classify(&line, None).expect("classified");
            prop_assert_eq!(s.kind, SignatureKind::StuckQpTransition { qp, from, to });
            prop_assert_eq!(s.device.rdma_dev.as_deref(), Some(dev.as_str()));
            prop_assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
        }

        /// The same through /dev/kmsg escaping of the whole text (every byte as \xNN).
        #[test]
        fn fully_escaped_text_classifies_alike(errno in 1i32..200, dev in devname()) {
            let line = format!("infiniband {dev}: ib_mad_send_error - ib_modify_qp to RTS: -{errno}");
            let escaped: String = line.bytes().map(|b| format!("\\x{b:02x}")).collect();
            let a = classify(&line, None).expect("plain");
            // Fully escaped text has no anchor bytes left: the prefilter must not see one.
            prop_assert!(classify(&escaped, None).is_none());
            // Escaping only the device name keeps the anchors intact.
            let edev: String = dev.bytes().map(|b| format!("\\x{b:02x}")).collect();
            let partly = format!("infiniband {edev}: ib_mad_send_error - ib_modify_qp to RTS: -{errno}");
            let b = classify(&partly, None).expect("partly escaped");
            prop_assert_eq!(a, b);
        }

        /// iSCSI conn error codes and ids round-trip.
        #[test]
        fn conn_error_round_trips(sid in any::<u32>(), cid in any::<u32>(), code in 1000u32..1100) {
            let s = classify(&format!(" connection{sid}:{cid}: detected conn error ({code})"), None)
                .expect("classified");
            prop_assert_eq!(s.kind, SignatureKind::IscsiConnError { code: IscsiErr(code) });
            prop_assert_eq!((s.device.iscsi_session, s.device.iscsi_conn), (Some(sid), Some(cid)));
        }
    }
}

#[test]
fn decoded_record_text_is_not_decoded_twice() {
    // The kernel wrote "\x5cx41" for a literal backslash followed by "x41"; the reader
    // decoded it to "\x41", which must stay as it is.
    let rec = Record {
        facility: 0,
        level: 6,
        seq: 1,
        usec: 1,
        continuation: false,
        text: "infiniband rxe\\x41: set down".into(),
        dict: vec![],
    };
    let ev = classify_record(&rec).expect("classified");
    assert_eq!(ev.signature.device.rdma_dev.as_deref(), Some("rxe\\x41"));
    // The escaped form, through `classify`, decodes once to the same.
    let s = classify("infiniband rxe\\x5cx41: set down", None).expect("classified");
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rxe\\x41"));
}
