//! The QP transition model checked against the IB spec (vol. 1, ch. 10.3 and 11.2.5's
//! modify-QP attribute tables) and the kernel's MAD layer, written independently of
//! `crates/iser-guard-core/src/qp.rs`: expectations here are spelled out per case, not read from the table.

use iser_guard_core::qp::{
    check_transition, explain_qp_transition, explain_transition, rule, valid_targets, AttrMask,
    QpParseError, QpState, QpType, TransitionError,
};
use proptest::prelude::*;
use QpState::*;

/// Parses a mask written the way an operator would.
fn m(s: &str) -> AttrMask {
    s.parse().expect("test mask")
}

fn ok(from: QpState, to: QpState, t: QpType, mask: &str) {
    let r = check_transition(from, to, t, m(mask));
    assert!(r.is_ok(), "{from}->{to} {t} [{mask}] should pass: {r:?}");
}

fn rejected(from: QpState, to: QpState, t: QpType, mask: &str) -> TransitionError {
    match check_transition(from, to, t, m(mask)) {
        Ok(()) => panic!("{from}->{to} {t} [{mask}] should be rejected"),
        Result::Err(e) => e,
    }
}

/// Asserts rejection because of attributes, returning (missing, not_allowed).
fn attr_rejected(from: QpState, to: QpState, t: QpType, mask: &str) -> (AttrMask, AttrMask) {
    match rejected(from, to, t, mask) {
        TransitionError::Attributes {
            missing,
            not_allowed,
            ..
        } => (missing, not_allowed),
        e => panic!("{from}->{to} {t} [{mask}]: expected an attribute error, got {e:?}"),
    }
}

const REAL: [QpState; 7] = [Reset, Init, Rtr, Rts, Sqd, Sqe, Err];
const TYPES: [QpType; 10] = [
    QpType::Smi,
    QpType::Gsi,
    QpType::Rc,
    QpType::Uc,
    QpType::Ud,
    QpType::RawIpv6,
    QpType::RawEthertype,
    QpType::RawPacket,
    QpType::XrcIni,
    QpType::XrcTgt,
];

// ----- the shape of the state diagram -----

/// The spec's diagram as a grid: rows = from, columns = to (RESET INIT RTR RTS SQD SQE ERR).
const DIAGRAM: [(QpState, &str); 7] = [
    (Reset, "X X . . . . ."),
    (Init, "X X X . . . X"),
    (Rtr, "X . . X . . X"),
    (Rts, "X . . X X . X"),
    (Sqd, "X . . X X . X"),
    (Sqe, "X . . X . . X"),
    (Err, "X . . . . . X"),
];

#[test]
fn diagram_matches_for_every_type() {
    for (from, row) in DIAGRAM {
        let cells: Vec<&str> = row.split(' ').collect();
        for (i, to) in REAL.iter().copied().enumerate() {
            let expect = cells[i] == "X";
            for t in TYPES {
                assert_eq!(
                    rule(from, to, t).is_some(),
                    expect,
                    "{from}->{to} for {t}: expected valid={expect}"
                );
                if !expect {
                    // Whatever the mask, a transition missing from the diagram is forbidden.
                    for mask in ["STATE", "STATE,CUR_STATE", "0x3ffffff"] {
                        assert_eq!(
                            rejected(from, to, t, mask),
                            TransitionError::Forbidden {
                                from,
                                to,
                                qp_type: t
                            },
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn reset_reachable_from_every_state_with_state_only() {
    for from in REAL {
        for t in TYPES {
            ok(from, Reset, t, "STATE");
            // and nothing else is taken
            let (missing, na) = attr_rejected(from, Reset, t, "STATE,PKEY_INDEX");
            assert!(missing.is_empty());
            assert_eq!(na, AttrMask::PKEY_INDEX);
        }
    }
}

#[test]
fn err_reachable_from_every_state_but_reset() {
    for from in [Init, Rtr, Rts, Sqd, Sqe, Err] {
        for t in TYPES {
            ok(from, Err, t, "STATE");
        }
    }
    for t in TYPES {
        assert!(matches!(
            rejected(Reset, Err, t, "STATE"),
            TransitionError::Forbidden { .. }
        ));
    }
}

#[test]
fn err_leads_only_to_reset_or_err() {
    assert_eq!(valid_targets(Err), vec![Reset, Err]);
    for to in [Init, Rtr, Rts, Sqd, Sqe] {
        for t in TYPES {
            assert!(rule(Err, to, t).is_none());
        }
    }
}

#[test]
fn err_to_rts_never_for_any_type_or_mask() {
    for t in QpType::ALL {
        for mask in [
            "STATE",
            "STATE,CUR_STATE",
            "STATE,SQ_PSN",
            "STATE,CUR_STATE,QKEY",
        ] {
            let e = rejected(Err, Rts, t, mask);
            assert!(matches!(e, TransitionError::Forbidden { .. }), "{t}: {e:?}");
        }
    }
}

#[test]
fn field_case_err_to_rts_gsi_with_state_cur_state() {
    let e = rejected(Err, Rts, QpType::Gsi, "STATE,CUR_STATE");
    assert_eq!(
        e,
        TransitionError::Forbidden {
            from: Err,
            to: Rts,
            qp_type: QpType::Gsi
        }
    );
    let text = e.to_string();
    assert!(
        text.contains("ERR -> RTS is forbidden by the IB spec"),
        "{text}"
    );
    assert!(text.contains("RESET, ERR"), "{text}");
}

#[test]
fn unknown_state_is_its_own_error() {
    for s in REAL {
        for (from, to) in [(Unknown, s), (s, Unknown)] {
            assert_eq!(
                rejected(from, to, QpType::Rc, "STATE"),
                TransitionError::UnknownState { from, to }
            );
        }
    }
    assert!(rule(Unknown, Reset, QpType::Ud).is_none());
}

#[test]
fn state_missing_is_its_own_error() {
    let e = rejected(Init, Rtr, QpType::Rc, "AV,PATH_MTU");
    assert!(matches!(e, TransitionError::StateMissing { .. }), "{e:?}");
    assert!(e.to_string().contains("lacks STATE"));
    assert!(matches!(
        rejected(Rts, Rts, QpType::Ud, ""),
        TransitionError::StateMissing { .. }
    ));
}

#[test]
fn driver_qps_are_not_described_by_the_core_table() {
    assert!(matches!(
        rejected(Init, Rtr, QpType::Driver, "STATE"),
        TransitionError::DriverDefined { .. }
    ));
    // but the diagram still applies
    assert!(matches!(
        rejected(Err, Rts, QpType::Driver, "STATE"),
        TransitionError::Forbidden { .. }
    ));
}

// ----- CUR_STATE -----

#[test]
fn sqe_to_rts_allowed_for_datagram_types_with_cur_state() {
    for t in [QpType::Ud, QpType::Gsi, QpType::Smi] {
        ok(Sqe, Rts, t, "STATE,CUR_STATE");
        ok(Sqe, Rts, t, "STATE");
        ok(Sqe, Rts, t, "STATE,CUR_STATE,QKEY");
    }
    ok(Sqe, Rts, QpType::Uc, "STATE,CUR_STATE,ACCESS_FLAGS");
}

#[test]
fn sqe_to_rts_with_cur_state_not_for_rc_or_xrc() {
    for t in [QpType::Rc, QpType::XrcIni, QpType::XrcTgt] {
        let (missing, na) = attr_rejected(Sqe, Rts, t, "STATE,CUR_STATE");
        assert!(missing.is_empty());
        assert_eq!(na, AttrMask::CUR_STATE);
    }
    let x = explain_transition(Sqe, Rts, QpType::Rc, m("STATE,CUR_STATE"));
    assert!(x.notes.iter().any(|n| n.contains("never enter SQE")), "{x}");
}

#[test]
fn cur_state_only_from_rtr_rts_sqd_sqe() {
    // From RESET, INIT and ERR, CUR_STATE is refused even on an otherwise fine transition.
    for (from, to, t, base) in [
        (Reset, Init, QpType::Ud, "STATE,PKEY_INDEX,PORT,QKEY"),
        (Init, Init, QpType::Rc, "STATE"),
        (Init, Err, QpType::Rc, "STATE"),
        (Err, Reset, QpType::Gsi, "STATE"),
        (Err, Err, QpType::Gsi, "STATE"),
    ] {
        ok(from, to, t, base);
        let (_, na) = attr_rejected(from, to, t, &format!("{base},CUR_STATE"));
        assert!(na.contains(AttrMask::CUR_STATE));
        let e = rejected(from, to, t, &format!("{base},CUR_STATE"));
        assert!(
            e.to_string()
                .contains("only be given from RTR, RTS, SQD or SQE"),
            "{e}"
        );
    }
    // From RTR/RTS/SQD/SQE into RTS, datagram and connected types take it.
    ok(
        Rtr,
        Rts,
        QpType::Rc,
        "STATE,CUR_STATE,TIMEOUT,RETRY_CNT,RNR_RETRY,SQ_PSN,MAX_QP_RD_ATOMIC",
    );
    ok(Rts, Rts, QpType::Rc, "STATE,CUR_STATE");
    ok(Sqd, Rts, QpType::Uc, "STATE,CUR_STATE");
    // but CUR_STATE is only optional where the table says so: not to RESET, ERR or SQD.
    for (from, to) in [(Rts, Reset), (Rts, Err), (Rts, Sqd), (Sqd, Sqd), (Rtr, Err)] {
        let (_, na) = attr_rejected(from, to, QpType::Ud, "STATE,CUR_STATE");
        assert_eq!(na, AttrMask::CUR_STATE);
    }
}

// ----- required attributes, type by type -----

#[test]
fn rc_walk() {
    let t = QpType::Rc;
    let init = "STATE,PKEY_INDEX,PORT,ACCESS_FLAGS";
    let rtr = "STATE,AV,PATH_MTU,DEST_QPN,RQ_PSN,MAX_DEST_RD_ATOMIC,MIN_RNR_TIMER";
    let rts = "STATE,TIMEOUT,RETRY_CNT,RNR_RETRY,SQ_PSN,MAX_QP_RD_ATOMIC";
    ok(Reset, Init, t, init);
    ok(Init, Rtr, t, rtr);
    ok(Rtr, Rts, t, rts);
    // the same with every optional attribute the spec lists
    ok(
        Init,
        Rtr,
        t,
        &format!("{rtr},ALT_PATH,ACCESS_FLAGS,PKEY_INDEX"),
    );
    ok(
        Rtr,
        Rts,
        t,
        &format!("{rts},CUR_STATE,ALT_PATH,ACCESS_FLAGS,MIN_RNR_TIMER,PATH_MIG_STATE"),
    );
    // each required attribute of INIT->RTR, dropped in turn, is reported missing
    for a in [
        "AV",
        "PATH_MTU",
        "DEST_QPN",
        "RQ_PSN",
        "MAX_DEST_RD_ATOMIC",
        "MIN_RNR_TIMER",
    ] {
        let mask = rtr.replace(&format!(",{a}"), "");
        let (missing, na) = attr_rejected(Init, Rtr, t, &mask);
        assert_eq!(missing, m(a), "dropping {a}");
        assert!(na.is_empty());
    }
    for a in [
        "TIMEOUT",
        "RETRY_CNT",
        "RNR_RETRY",
        "SQ_PSN",
        "MAX_QP_RD_ATOMIC",
    ] {
        let mask = rts.replace(&format!(",{a}"), "");
        let (missing, _) = attr_rejected(Rtr, Rts, t, &mask);
        assert_eq!(missing, m(a), "dropping {a}");
    }
    for a in ["PKEY_INDEX", "PORT", "ACCESS_FLAGS"] {
        let mask = init.replace(&format!(",{a}"), "");
        let (missing, _) = attr_rejected(Reset, Init, t, &mask);
        assert_eq!(missing, m(a));
    }
    // QKEY is a datagram attribute
    let (_, na) = attr_rejected(Reset, Init, t, &format!("{init},QKEY"));
    assert_eq!(na, AttrMask::QKEY);
}

#[test]
fn missing_and_not_allowed_reported_together() {
    let (missing, na) = attr_rejected(Init, Rtr, QpType::Rc, "STATE,AV,QKEY,CAP");
    assert_eq!(
        missing,
        m("PATH_MTU,DEST_QPN,RQ_PSN,MAX_DEST_RD_ATOMIC,MIN_RNR_TIMER")
    );
    assert_eq!(na, m("QKEY,CAP"));
    let text = rejected(Init, Rtr, QpType::Rc, "STATE,AV,QKEY,CAP").to_string();
    assert!(
        text.contains("missing required attributes PATH_MTU"),
        "{text}"
    );
    assert!(text.contains("attributes not allowed QKEY|CAP"), "{text}");
}

#[test]
fn uc_walk() {
    let t = QpType::Uc;
    ok(Reset, Init, t, "STATE,PKEY_INDEX,PORT,ACCESS_FLAGS");
    ok(Init, Rtr, t, "STATE,AV,PATH_MTU,DEST_QPN,RQ_PSN");
    // UC has no RDMA read/atomic responder and no RNR
    let (_, na) = attr_rejected(
        Init,
        Rtr,
        t,
        "STATE,AV,PATH_MTU,DEST_QPN,RQ_PSN,MAX_DEST_RD_ATOMIC,MIN_RNR_TIMER",
    );
    assert_eq!(na, m("MAX_DEST_RD_ATOMIC,MIN_RNR_TIMER"));
    ok(Rtr, Rts, t, "STATE,SQ_PSN");
    let (_, na) = attr_rejected(Rtr, Rts, t, "STATE,SQ_PSN,TIMEOUT,RETRY_CNT");
    assert_eq!(na, m("TIMEOUT,RETRY_CNT"));
}

#[test]
fn ud_walk() {
    let t = QpType::Ud;
    ok(Reset, Init, t, "STATE,PKEY_INDEX,PORT,QKEY");
    for a in ["PKEY_INDEX", "PORT", "QKEY"] {
        let mask = "STATE,PKEY_INDEX,PORT,QKEY".replace(&format!(",{a}"), "");
        let (missing, _) = attr_rejected(Reset, Init, t, &mask);
        assert_eq!(missing, m(a));
    }
    // UD has no access flags
    let (_, na) = attr_rejected(Reset, Init, t, "STATE,PKEY_INDEX,PORT,QKEY,ACCESS_FLAGS");
    assert_eq!(na, AttrMask::ACCESS_FLAGS);
    ok(Init, Rtr, t, "STATE");
    ok(Init, Rtr, t, "STATE,QKEY,PKEY_INDEX");
    // UD has no remote QP or path
    let (_, na) = attr_rejected(Init, Rtr, t, "STATE,AV,DEST_QPN");
    assert_eq!(na, m("AV,DEST_QPN"));
    ok(Rtr, Rts, t, "STATE,SQ_PSN");
    ok(Rtr, Rts, t, "STATE,SQ_PSN,CUR_STATE,QKEY");
    let (missing, _) = attr_rejected(Rtr, Rts, t, "STATE");
    assert_eq!(missing, AttrMask::SQ_PSN);
}

#[test]
fn gsi_mad_layer_walk_passes() {
    // ib_mad_port_start(): RESET->INIT with PKEY_INDEX|QKEY, INIT->RTR with STATE only,
    // RTR->RTS with SQ_PSN.
    let t = QpType::Gsi;
    ok(Reset, Init, t, "STATE,PKEY_INDEX,QKEY");
    ok(Init, Rtr, t, "STATE");
    ok(Rtr, Rts, t, "STATE,SQ_PSN");
    // and the same for QP 0
    ok(Reset, Init, QpType::Smi, "STATE,PKEY_INDEX,QKEY");
    ok(Init, Rtr, QpType::Smi, "STATE");
    ok(Rtr, Rts, QpType::Smi, "STATE,SQ_PSN");
    // the special QPs have no port attribute: the port is fixed at creation
    let (missing, na) = attr_rejected(Reset, Init, t, "STATE,PKEY_INDEX,PORT,QKEY");
    assert!(missing.is_empty());
    assert_eq!(na, AttrMask::PORT);
    let (missing, _) = attr_rejected(Reset, Init, t, "STATE,PKEY_INDEX");
    assert_eq!(missing, AttrMask::QKEY);
}

#[test]
fn xrc_specifics() {
    // the initiator is a send-only RC: requester attributes at RTS, none of the responder's
    ok(
        Reset,
        Init,
        QpType::XrcIni,
        "STATE,PKEY_INDEX,PORT,ACCESS_FLAGS",
    );
    ok(
        Init,
        Rtr,
        QpType::XrcIni,
        "STATE,AV,PATH_MTU,DEST_QPN,RQ_PSN",
    );
    let (missing, _) = attr_rejected(Init, Rtr, QpType::XrcIni, "STATE,AV,PATH_MTU,DEST_QPN");
    assert_eq!(missing, AttrMask::RQ_PSN);
    ok(
        Rtr,
        Rts,
        QpType::XrcIni,
        "STATE,TIMEOUT,RETRY_CNT,RNR_RETRY,SQ_PSN,MAX_QP_RD_ATOMIC",
    );
    let (_, na) = attr_rejected(
        Rtr,
        Rts,
        QpType::XrcIni,
        "STATE,TIMEOUT,RETRY_CNT,RNR_RETRY,SQ_PSN,MAX_QP_RD_ATOMIC,MIN_RNR_TIMER",
    );
    assert_eq!(na, AttrMask::MIN_RNR_TIMER);
    // the target is a receive-only RC: responder attributes at RTR, only TIMEOUT|SQ_PSN at RTS
    ok(
        Reset,
        Init,
        QpType::XrcTgt,
        "STATE,PKEY_INDEX,PORT,ACCESS_FLAGS",
    );
    ok(
        Init,
        Rtr,
        QpType::XrcTgt,
        "STATE,AV,PATH_MTU,DEST_QPN,RQ_PSN,MAX_DEST_RD_ATOMIC,MIN_RNR_TIMER",
    );
    ok(Rtr, Rts, QpType::XrcTgt, "STATE,TIMEOUT,SQ_PSN");
    let (missing, _) = attr_rejected(Rtr, Rts, QpType::XrcTgt, "STATE,SQ_PSN");
    assert_eq!(missing, AttrMask::TIMEOUT);
    let (_, na) = attr_rejected(
        Rtr,
        Rts,
        QpType::XrcTgt,
        "STATE,TIMEOUT,SQ_PSN,RETRY_CNT,RNR_RETRY,MAX_QP_RD_ATOMIC",
    );
    assert_eq!(na, m("RETRY_CNT,RNR_RETRY,MAX_QP_RD_ATOMIC"));
    // SQD->SQD: the target may change responder knobs, the initiator requester knobs
    ok(
        Sqd,
        Sqd,
        QpType::XrcTgt,
        "STATE,MAX_DEST_RD_ATOMIC,MIN_RNR_TIMER",
    );
    let (_, na) = attr_rejected(Sqd, Sqd, QpType::XrcTgt, "STATE,RETRY_CNT");
    assert_eq!(na, AttrMask::RETRY_CNT);
    ok(
        Sqd,
        Sqd,
        QpType::XrcIni,
        "STATE,RETRY_CNT,RNR_RETRY,MAX_QP_RD_ATOMIC",
    );
    let (_, na) = attr_rejected(Sqd, Sqd, QpType::XrcIni, "STATE,MAX_DEST_RD_ATOMIC");
    assert_eq!(na, AttrMask::MAX_DEST_RD_ATOMIC);
}

#[test]
fn raw_packet() {
    ok(Reset, Init, QpType::RawPacket, "STATE,PORT");
    let (missing, _) = attr_rejected(Reset, Init, QpType::RawPacket, "STATE");
    assert_eq!(missing, AttrMask::PORT);
    ok(Init, Rtr, QpType::RawPacket, "STATE");
    ok(Rtr, Rts, QpType::RawPacket, "STATE");
    ok(Rtr, Rts, QpType::RawPacket, "STATE,RATE_LIMIT");
    ok(Rts, Rts, QpType::RawPacket, "STATE,RATE_LIMIT");
    // packet pacing is a raw-packet-only knob
    let (_, na) = attr_rejected(Rts, Rts, QpType::Rc, "STATE,RATE_LIMIT");
    assert_eq!(na, AttrMask::RATE_LIMIT);
    // a raw packet QP has no SQD behaviour to tune
    let (_, na) = attr_rejected(Rts, Sqd, QpType::RawPacket, "STATE,EN_SQD_ASYNC_NOTIFY");
    assert_eq!(na, AttrMask::EN_SQD_ASYNC_NOTIFY);
}

#[test]
fn sqd_transitions() {
    for t in [QpType::Rc, QpType::Uc, QpType::Ud, QpType::Gsi] {
        ok(Rts, Sqd, t, "STATE");
        ok(Rts, Sqd, t, "STATE,EN_SQD_ASYNC_NOTIFY");
        ok(Sqd, Rts, t, "STATE");
        ok(Sqd, Rts, t, "STATE,CUR_STATE");
        ok(Sqd, Sqd, t, "STATE,PKEY_INDEX");
    }
    // while drained, RC may change its path and its retry settings
    ok(
        Sqd,
        Sqd,
        QpType::Rc,
        "STATE,PORT,AV,TIMEOUT,RETRY_CNT,RNR_RETRY,MIN_RNR_TIMER",
    );
    ok(Sqd, Sqd, QpType::Uc, "STATE,AV,ALT_PATH,PATH_MIG_STATE");
    let (_, na) = attr_rejected(Sqd, Sqd, QpType::Uc, "STATE,TIMEOUT");
    assert_eq!(na, AttrMask::TIMEOUT);
    ok(Sqd, Sqd, QpType::Ud, "STATE,QKEY");
    let (_, na) = attr_rejected(Sqd, Sqd, QpType::Ud, "STATE,PORT");
    assert_eq!(na, AttrMask::PORT);
}

#[test]
fn init_to_init_only_optional() {
    ok(Init, Init, QpType::Rc, "STATE");
    ok(Init, Init, QpType::Rc, "STATE,PKEY_INDEX,PORT,ACCESS_FLAGS");
    ok(Init, Init, QpType::Ud, "STATE,QKEY,PORT");
    ok(Init, Init, QpType::Gsi, "STATE,QKEY");
    let (_, na) = attr_rejected(Init, Init, QpType::Gsi, "STATE,PORT");
    assert_eq!(na, AttrMask::PORT);
}

#[test]
fn reserved_and_cap_bits_never_accepted() {
    for t in TYPES {
        for from in REAL {
            for to in REAL {
                for bits in [AttrMask::CAP.bits(), 1 << 21, 1 << 24, 1 << 31] {
                    let mask = AttrMask::STATE | AttrMask(bits);
                    assert!(check_transition(from, to, t, mask).is_err());
                }
            }
        }
    }
}

// ----- parsing -----

#[test]
fn parse_states() {
    for (s, want) in [
        ("ERR", Err),
        ("err", Err),
        ("6", Err),
        ("0x6", Err),
        ("IB_QPS_ERR", Err),
        ("ibv_qps_rts", Rts),
        ("0x3", Rts),
        (" reset ", Reset),
        ("SQE", Sqe),
        ("4", Sqd),
        ("7", Unknown),
        ("unknown", Unknown),
    ] {
        assert_eq!(s.parse::<QpState>(), Ok(want), "{s}");
    }
    for bad in ["8", "", "ERRR", "0x", "-1"] {
        assert!(matches!(
            bad.parse::<QpState>(),
            Result::Err(QpParseError::UnknownState(_))
        ));
    }
    for s in QpState::ALL {
        assert_eq!(s.name().parse::<QpState>(), Ok(s));
    }
}

#[test]
fn parse_types() {
    for (s, want) in [
        ("GSI", QpType::Gsi),
        ("gsi", QpType::Gsi),
        ("1", QpType::Gsi),
        ("IB_QPT_RC", QpType::Rc),
        ("IBV_QPT_UD", QpType::Ud),
        ("raw-packet", QpType::RawPacket),
        ("XRC_RECV", QpType::XrcTgt),
        ("xrc_send", QpType::XrcIni),
        ("0xff", QpType::Driver),
        ("10", QpType::XrcTgt),
    ] {
        assert_eq!(s.parse::<QpType>(), Ok(want), "{s}");
    }
    for bad in ["7", "11", "RD", ""] {
        assert!(matches!(
            bad.parse::<QpType>(),
            Result::Err(QpParseError::UnknownType(_))
        ));
    }
    for t in QpType::ALL {
        assert_eq!(t.name().parse::<QpType>(), Ok(t));
    }
}

#[test]
fn parse_masks() {
    assert_eq!(m("STATE,CUR_STATE,PKEY_INDEX").bits(), 0b10011);
    assert_eq!(m("state, cur_state"), AttrMask::MAD_SQE_TO_RTS);
    assert_eq!(m("IBV_QP_STATE|IB_QP_CUR_STATE"), AttrMask::MAD_SQE_TO_RTS);
    assert_eq!(m("0x3"), AttrMask::MAD_SQE_TO_RTS);
    assert_eq!(m("3"), AttrMask::MAD_SQE_TO_RTS);
    assert_eq!(m("STATE,0x2"), AttrMask::MAD_SQE_TO_RTS);
    assert_eq!(m("dest-qpn").bits(), 1 << 20);
    assert_eq!(m("RATE_LIMIT").bits(), 1 << 25);
    assert_eq!(m(""), AttrMask::EMPTY);
    assert_eq!(m("none"), AttrMask::EMPTY);
    match "STATE,FOO".parse::<AttrMask>() {
        Result::Err(QpParseError::UnknownAttribute { token, .. }) => assert_eq!(token, "FOO"),
        r => panic!("{r:?}"),
    }
    let e = "STATE,BOGUS_ATTR".parse::<AttrMask>().unwrap_err();
    assert!(e.to_string().contains("'BOGUS_ATTR'"), "{e}");
    assert!(matches!(
        "0x1ffffffff".parse::<AttrMask>(),
        Result::Err(QpParseError::InvalidNumber { .. })
    ));
    assert!(matches!(
        "1z".parse::<AttrMask>(),
        Result::Err(QpParseError::InvalidNumber { .. })
    ));
    // the libibverbs values
    for (name, bit) in [
        ("STATE", 0),
        ("CUR_STATE", 1),
        ("EN_SQD_ASYNC_NOTIFY", 2),
        ("ACCESS_FLAGS", 3),
        ("PKEY_INDEX", 4),
        ("PORT", 5),
        ("QKEY", 6),
        ("AV", 7),
        ("PATH_MTU", 8),
        ("TIMEOUT", 9),
        ("RETRY_CNT", 10),
        ("RNR_RETRY", 11),
        ("RQ_PSN", 12),
        ("MAX_QP_RD_ATOMIC", 13),
        ("ALT_PATH", 14),
        ("MIN_RNR_TIMER", 15),
        ("SQ_PSN", 16),
        ("MAX_DEST_RD_ATOMIC", 17),
        ("PATH_MIG_STATE", 18),
        ("CAP", 19),
        ("DEST_QPN", 20),
        ("RATE_LIMIT", 25),
    ] {
        assert_eq!(m(&format!("IBV_QP_{name}")).bits(), 1u32 << bit, "{name}");
    }
}

#[test]
fn mask_display_round_trips() {
    assert_eq!(AttrMask::MAD_SQE_TO_RTS.to_string(), "STATE|CUR_STATE");
    assert_eq!(AttrMask::EMPTY.to_string(), "none");
    let odd = AttrMask::STATE | AttrMask(1 << 22);
    assert_eq!(odd.to_string(), "STATE|0x400000");
    assert_eq!(odd.to_string().parse::<AttrMask>(), Ok(odd));
}

#[test]
fn mask_serde() {
    let j = serde_json::to_string(&AttrMask::MAD_SQE_TO_RTS).expect("ser");
    assert_eq!(j, "\"STATE|CUR_STATE\"");
    let back: AttrMask = serde_json::from_str(&j).expect("de");
    assert_eq!(back, AttrMask::MAD_SQE_TO_RTS);
    let n: AttrMask = serde_json::from_str("17").expect("de num");
    assert_eq!(n, AttrMask::STATE | AttrMask::PKEY_INDEX);
}

// ----- explanations -----

#[test]
fn explain_field_incident() {
    let x = explain_qp_transition(1, Err, Rts, QpType::Gsi, AttrMask::MAD_SQE_TO_RTS);
    assert!(!x.allowed);
    assert_eq!(x.valid_targets, vec![Reset, Err]);
    let text = x.to_string();
    for needle in [
        "ERR -> RTS on QP 1 (GSI) with mask STATE|CUR_STATE: REJECTED",
        "from ERR the only way out is RESET",
        "userspace cannot modify it",
        "only re-creating the RDMA device re-creates the QP",
        "SQE -> RTS",
        "UD behaviour",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in:\n{text}");
    }
    // JSON for machines
    let j = serde_json::to_value(&x).expect("json");
    assert_eq!(j["allowed"], false);
    assert_eq!(j["error"]["kind"], "forbidden");
    assert_eq!(j["mask"], "STATE|CUR_STATE");
}

#[test]
fn explain_without_qpn_still_names_kernel_owned_qp() {
    let x = explain_transition(Err, Rts, QpType::Gsi, m("STATE,CUR_STATE"));
    let text = x.to_string();
    assert!(
        text.contains("for a kernel-owned QP such as QP 1 (GSI)"),
        "{text}"
    );
}

#[test]
fn explain_rc_err_to_rts_suggests_reset_walk_and_recreate() {
    let x = explain_transition(Err, Rts, QpType::Rc, m("STATE"));
    let text = x.to_string();
    assert!(
        text.contains("from ERR the only way out is RESET"),
        "{text}"
    );
    assert!(text.contains("re-create the QP"), "{text}");
    assert!(!text.contains("kernel-owned"), "{text}");
}

#[test]
fn explain_allowed_and_attribute_cases() {
    let x = explain_transition(Rtr, Rts, QpType::Gsi, m("STATE,SQ_PSN"));
    assert!(x.allowed);
    assert!(x.error.is_none());
    assert!(x.recovery.is_empty());
    assert!(x.to_string().contains("allowed by the IB spec"));

    let x = explain_transition(Init, Rtr, QpType::Rc, m("STATE,AV,QKEY"));
    assert!(!x.allowed);
    assert_eq!(
        x.missing,
        m("PATH_MTU,DEST_QPN,RQ_PSN,MAX_DEST_RD_ATOMIC,MIN_RNR_TIMER")
    );
    assert_eq!(x.not_allowed, AttrMask::QKEY);
    let text = x.to_string();
    assert!(
        text.contains("missing: PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"),
        "{text}"
    );
    assert!(text.contains("not allowed: QKEY"), "{text}");
    assert!(text.contains("add PATH_MTU"), "{text}");
    assert!(text.contains("remove QKEY"), "{text}");

    let x = explain_transition(Reset, Err, QpType::Rc, m("STATE"));
    assert!(x.notes.iter().any(|n| n.contains("older kernels")));
}

// ----- properties -----

fn any_state() -> impl Strategy<Value = QpState> {
    prop::sample::select(QpState::ALL.to_vec())
}
fn any_type() -> impl Strategy<Value = QpType> {
    prop::sample::select(QpType::ALL.to_vec())
}
/// Masks biased toward the named bits so that accepted cases are common.
fn any_mask() -> impl Strategy<Value = AttrMask> {
    prop_oneof![
        any::<u32>().prop_map(AttrMask),
        (any::<u32>(), any::<bool>()).prop_map(|(b, st)| {
            let named = AttrMask::all_named().bits() & b & b.rotate_left(7);
            AttrMask(if st { named | 1 } else { named })
        }),
        Just(AttrMask::STATE),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4096))]

    #[test]
    fn ok_implies_mask_within_rule(from in any_state(), to in any_state(),
                                   t in any_type(), mask in any_mask()) {
        let r = check_transition(from, to, t, mask);
        if r.is_ok() {
            let rl = rule(from, to, t).expect("an accepted transition has a rule");
            prop_assert!(mask.contains(AttrMask::STATE));
            prop_assert!(mask.contains(rl.required));
            prop_assert!(rl.permitted().contains(mask));
            if mask.contains(AttrMask::CUR_STATE) {
                prop_assert!(matches!(from, Rtr | Rts | Sqd | Sqe));
            }
            prop_assert!(from != Err || matches!(to, Reset | Err));
        }
        // the explanation agrees with the check and its Display never fails
        let x = explain_transition(from, to, t, mask);
        prop_assert_eq!(x.allowed, r.is_ok());
        prop_assert_eq!(x.error.clone(), r.err());
        prop_assert!(!x.to_string().is_empty());
    }

    #[test]
    fn attribute_errors_are_exact(from in any_state(), to in any_state(),
                                  t in any_type(), mask in any_mask()) {
        if let Result::Err(TransitionError::Attributes { missing, not_allowed, .. }) =
            check_transition(from, to, t, mask)
        {
            let rl = rule(from, to, t).expect("rule");
            prop_assert_eq!(missing, rl.required.difference(mask));
            prop_assert!(!(missing.is_empty() && not_allowed.is_empty()));
            prop_assert!(mask.contains(not_allowed));
            // adding the missing and dropping the refused attributes always fixes it
            let fixed = mask.union(missing).difference(not_allowed);
            prop_assert_eq!(check_transition(from, to, t, fixed), Ok(()));
        }
    }

    #[test]
    fn mask_text_round_trips(mask in any::<u32>()) {
        let mask = AttrMask(mask);
        prop_assert_eq!(mask.to_string().parse::<AttrMask>(), Ok(mask));
    }

    #[test]
    fn parsers_never_panic(s in ".{0,40}") {
        let _ = s.parse::<AttrMask>();
        let _ = s.parse::<QpState>();
        let _ = s.parse::<QpType>();
    }
}

#[test]
fn explain_kernel_owned_err_to_reset_is_legal_but_not_for_userspace() {
    let x = explain_qp_transition(1, Err, Reset, QpType::Gsi, m("STATE"));
    assert!(x.allowed);
    let text = x.to_string();
    assert!(
        text.contains("only the kernel may modify QP 1 (GSI)"),
        "{text}"
    );
    assert!(text.contains("re-creating the RDMA device"), "{text}");
    // an ordinary RTS->RTS on the GSI QP gets no MAD-layer note
    let x = explain_transition(Rts, Rts, QpType::Gsi, m("STATE,QKEY"));
    assert!(x.allowed);
    assert!(x.notes.is_empty(), "{x}");
    assert!(x.recovery.is_empty(), "{x}");
}
