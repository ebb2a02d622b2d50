//! The validating modify_qp's decision, for every transition and mask, without hardware:
//! it is the pure `attrs::validate`, which the wrapper calls before `ibv_modify_qp`.

use iser_guard_core::qp::{rule, AttrMask, QpState, QpType, TransitionError};
use iser_guard_verbs::attrs::{explain_kernel_refusal, rule_text, validate, ModifyAttrs};

/// A ModifyAttrs with exactly `mask` (the setters are how callers build masks; here we go
/// bit by bit through the named attributes).
fn attrs_with(to: QpState, mask: AttrMask) -> ModifyAttrs {
    let mut a = ModifyAttrs::to(to);
    for info in mask.named() {
        a = match info.name {
            "STATE" => a,
            "PKEY_INDEX" => a.pkey_index(0),
            "PORT" => a.port(1),
            "ACCESS_FLAGS" => a.access_flags(1),
            "PATH_MTU" => a.path_mtu(3),
            "DEST_QPN" => a.dest_qpn(17),
            "RQ_PSN" => a.rq_psn(1),
            "SQ_PSN" => a.sq_psn(1),
            "MAX_DEST_RD_ATOMIC" => a.max_dest_rd_atomic(1),
            "MAX_QP_RD_ATOMIC" => a.max_rd_atomic(1),
            "MIN_RNR_TIMER" => a.min_rnr_timer(12),
            "TIMEOUT" => a.timeout(14),
            "RETRY_CNT" => a.retry_cnt(7),
            "RNR_RETRY" => a.rnr_retry(7),
            "CUR_STATE" => a.cur_state(QpState::Rts),
            "AV" => a.av(iser_guard_verbs::attrs::AddressVector {
                dlid: 0,
                sl: 0,
                port: 1,
                global: None,
            }),
            _ => return a, // attributes the self-test never sets are covered below by mask
        };
    }
    a
}

const SETTABLE: &[&str] = &[
    "PKEY_INDEX",
    "PORT",
    "ACCESS_FLAGS",
    "PATH_MTU",
    "DEST_QPN",
    "RQ_PSN",
    "SQ_PSN",
    "MAX_DEST_RD_ATOMIC",
    "MAX_QP_RD_ATOMIC",
    "MIN_RNR_TIMER",
    "TIMEOUT",
    "RETRY_CNT",
    "RNR_RETRY",
    "CUR_STATE",
    "AV",
];

fn settable(m: AttrMask) -> bool {
    m.named()
        .all(|i| i.name == "STATE" || SETTABLE.contains(&i.name))
}

#[test]
fn every_transition_with_its_required_mask_follows_the_table() {
    let mut checked = 0;
    for from in QpState::ALL {
        for to in QpState::ALL {
            for t in [QpType::Rc, QpType::Uc, QpType::Ud] {
                let verdict = validate(from, t, &attrs_with(to, AttrMask::STATE));
                match rule(from, to, t) {
                    None => assert!(verdict.is_err(), "{from}->{to} {t} has no rule but passed"),
                    Some(r) if settable(r.required) => {
                        let full = attrs_with(to, r.required | AttrMask::STATE);
                        assert_eq!(full.mask(), r.required | AttrMask::STATE);
                        assert_eq!(validate(from, t, &full), Ok(()), "{from}->{to} {t}");
                        // Each required attribute, left out, is named as missing.
                        for info in r.required.named() {
                            let less = attrs_with(
                                to,
                                (r.required | AttrMask::STATE).difference(info.mask),
                            );
                            match validate(from, t, &less) {
                                Err(TransitionError::Attributes { missing, .. }) => {
                                    assert!(
                                        missing.contains(info.mask),
                                        "{from}->{to} {t} {}",
                                        info.name
                                    )
                                }
                                other => {
                                    panic!("{from}->{to} {t} without {}: {other:?}", info.name)
                                }
                            }
                        }
                        // Each settable attribute the rule does not take is named as not allowed.
                        for name in SETTABLE {
                            let bit = AttrMask::from_name(name).unwrap();
                            if r.permitted().contains(bit) {
                                continue;
                            }
                            let more = attrs_with(to, r.required | AttrMask::STATE | bit);
                            match validate(from, t, &more) {
                                Err(TransitionError::Attributes { not_allowed, .. }) => {
                                    assert!(not_allowed.contains(bit), "{from}->{to} {t} +{name}")
                                }
                                other => panic!("{from}->{to} {t} with {name}: {other:?}"),
                            }
                        }
                        checked += 1;
                    }
                    Some(_) => {}
                }
            }
        }
    }
    assert!(checked >= 30, "only {checked} transitions checked");
}

#[test]
fn the_field_case_err_to_rts_is_refused_before_any_call() {
    // The MAD layer's SQE->RTS request (STATE|CUR_STATE) on a QP that is really in ERR.
    let a = ModifyAttrs::to(QpState::Rts).cur_state(QpState::Sqe);
    for t in [QpType::Rc, QpType::Ud, QpType::Gsi] {
        let e = validate(QpState::Err, t, &a).unwrap_err();
        assert!(matches!(e, TransitionError::Forbidden { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(msg.contains("ERR -> RTS is forbidden"), "{msg}");
        assert!(msg.contains("RESET, ERR"), "names the only ways out: {msg}");
    }
    // And the walk out of ERR the self-test does is allowed.
    assert_eq!(
        validate(QpState::Err, QpType::Rc, &ModifyAttrs::to(QpState::Reset)),
        Ok(())
    );
}

#[test]
fn a_missing_state_bit_and_unknown_states_are_refused() {
    let mut a = ModifyAttrs::rc_init(1);
    assert_eq!(
        validate(QpState::Unknown, QpType::Rc, &a).unwrap_err(),
        TransitionError::UnknownState {
            from: QpState::Unknown,
            to: QpState::Init
        }
    );
    a = ModifyAttrs::default().port(1);
    assert!(matches!(
        validate(QpState::Reset, QpType::Rc, &a),
        Err(TransitionError::UnknownState { .. })
    ));
}

#[test]
fn a_kernel_refusal_names_the_rule_and_the_roce_needs() {
    let av = iser_guard_verbs::attrs::AddressVector {
        dlid: 0,
        sl: 0,
        port: 1,
        global: None,
    };
    let rtr = ModifyAttrs::rc_rtr(18, 1, 3, av);
    let s = explain_kernel_refusal(QpState::Init, QpType::Rc, &rtr, libc_einval(), true);
    assert!(s.contains("INIT -> RTR (RC) requires STATE|AV|PATH_MTU|RQ_PSN|MIN_RNR_TIMER|MAX_DEST_RD_ATOMIC|DEST_QPN"), "{s}");
    assert!(s.contains("global route"), "{s}");
    assert_eq!(
        rule_text(QpState::Err, QpState::Rts, QpType::Gsi),
        "the IB spec table has no ERR -> RTS for GSI"
    );
}

fn libc_einval() -> i32 {
    22
}
