//! The engine defects the real kernel run of issue 9 exposed, each replayed input by input
//! (see `kernel_run.rs`). Each test is named after what the lab saw go wrong.

use iser_guard::core::qp::QpState;
use iser_guard::core::recovery::{
    ActionKind, AlertClass, EngineSnapshot, Hold, IscsiadmOutcome, Observation, OperatorCommand,
    OtherSessions, Outcome, Phase, PortId, Portal, ProbeResult, RecreateMethod, ResetWhen,
    SessionInfo, SessionKey, SessionState, StuckEvidence,
};
use iser_guard::core::reset_plan::{RecreateFrom, SoftType};
use iser_guard::core::time::Instant;

use super::kernel_run::*;

fn failed(sid: u32) -> Vec<SessionInfo> {
    vec![session(sid, SessionState::Failed, Some(ini_port()))]
}

fn logged_in(sid: u32) -> Vec<SessionInfo> {
    vec![session(sid, SessionState::LoggedIn, Some(ini_port()))]
}

/// A rig whose first scan showed no session placed on any RDMA port.
/// The lab policy with probe rounds 5 s apart (timeout 2 s): the timelines of the
/// hysteresis tests below are written in those rounds; the hysteresis itself does not depend
/// on the cadence.
fn five_second_rounds() -> iser_guard::core::recovery::Policy {
    let mut p = lab_policy();
    p.probe_interval = std::time::Duration::from_secs(5);
    p.probe_timeout = std::time::Duration::from_secs(2);
    p
}

fn bare(policy: iser_guard::core::recovery::Policy) -> Rig {
    Rig::with_first_scan(policy, None)
}

/// Answers every open action the way a host would: probes with `probe`, re-creations
/// completed, iscsiadm with `iscsi`; session lists every 10 s from `list`; the QP table every
/// 2 s from `qp` (None: not shown).
fn host_until(
    r: &mut Rig,
    end: f64,
    probe: ProbeResult,
    iscsi: &IscsiadmOutcome,
    list: &dyn Fn(f64) -> Vec<SessionInfo>,
    qp: &dyn Fn(f64) -> Option<QpState>,
) {
    let mut next_scan = r.secs();
    let mut next_qp = r.secs();
    while r.secs() < end {
        let ids: Vec<_> = r.open.keys().copied().collect();
        for id in ids {
            let Some(a) = r.open.get(&id).cloned() else {
                continue;
            };
            let o = match &a.kind {
                ActionKind::ProbePortal { .. } => Outcome::Probe(probe),
                ActionKind::RecreateDevice { device, .. } => {
                    Outcome::Recreate(iser_guard::core::recovery::RecreateResult::Recreated {
                        name: device.clone(),
                        mode_restored: None,
                        method: None,
                        failed_before: Vec::new(),
                    })
                }
                _ => Outcome::Iscsiadm(iscsi.clone()),
            };
            r.answer(id, o);
        }
        let t = r.secs();
        if t >= next_scan {
            r.sessions(list(t));
            next_scan = t + 10.0;
        }
        if t >= next_qp {
            if let Some(s) = qp(t) {
                r.obs(Observation::GsiQpState {
                    device: INI.to_string(),
                    port: 1,
                    state: s,
                });
            }
            next_qp = t + 2.0;
        }
        let step = (r.secs() + 1.0).min(end);
        r.until(step);
    }
}

// ---------------------------------------------------------------------------------------------
// a. Target-back gating (issue 9, "Why" 2)
// ---------------------------------------------------------------------------------------------

#[test]
fn target_back_without_a_known_portal_alerts_instead_of_recreating() {
    // The lab: sessions not placed, QP 1 stuck; `AwaitingTarget -> ResettingDevice` within
    // 1 ms, no probe at all.
    let mut r = bare(lab_policy());
    r.until(5.0);
    r.obs(stuck());
    r.until(60.0);
    assert_eq!(r.recreations(), 0, "re-created with no portal to probe");
    assert!(
        !r.alerts_with("no target portal").is_empty(),
        "{:?}",
        r.alerts()
    );
}

#[test]
fn probe_successes_from_before_the_fault_never_count() {
    // Episode 1: the target blinked, iscsid reconnected by itself after three good probes.
    let mut r = Rig::new(five_second_rounds());
    r.until(10.0);
    r.sessions(failed(1));
    r.probing_until(22.0, ProbeResult::Reachable);
    r.sessions(logged_in(1));
    assert_eq!(r.phase(), Phase::Healthy);
    // 150 s later the target is lost for good and QP 1 sticks.
    r.until(170.0);
    r.sessions(failed(1));
    r.obs(stuck());
    r.probing_until(200.0, ProbeResult::Unreachable);
    assert_eq!(r.recreations(), 0, "counted probe successes 150 s old");
    // The target comes back: two fresh successes are not enough, the third is.
    r.probing_until(210.5, ProbeResult::Reachable); // 205 s, 210 s
    assert_eq!(r.recreations(), 0, "re-created before {} probes", 3);
    r.probing_until(216.0, ProbeResult::Reachable); // 215 s
    assert_eq!(r.recreations(), 1);
}

#[test]
fn a_probe_timeout_after_successes_resets_the_count() {
    let mut r = Rig::new(five_second_rounds());
    r.until(10.0);
    r.sessions(failed(1));
    r.obs(stuck());
    r.answer_probes(ProbeResult::Reachable); // started at 10 s
    r.probing_until(15.5, ProbeResult::Reachable); // 15 s
    r.until(20.5); // the 20 s probe is in flight ...
    r.answer_probes(ProbeResult::Unreachable); // ... and times out: newest result wins
    r.probing_until(31.0, ProbeResult::Reachable); // 25 s, 30 s
    assert_eq!(r.recreations(), 0);
    r.probing_until(36.0, ProbeResult::Reachable); // 35 s
    assert_eq!(r.recreations(), 1);
}

#[test]
fn attempts_never_exceed_max_attempts() {
    // The lab ended `Quarantined … 4 attempt(s) exhausted` with max-attempts 3: a reconnect
    // that failed after a re-creation counted as an attempt of its own.
    let mut r = Rig::new(lab_policy());
    recreate_after_target_back(&mut r);
    r.obs(rts());
    let rts_then = |_: f64| Some(QpState::Rts);
    host_until(
        &mut r,
        100.0,
        ProbeResult::Reachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &rts_then,
    );
    r.obs(stuck()); // QP 1 stuck again
    host_until(
        &mut r,
        4000.0,
        ProbeResult::Reachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &rts_then,
    );
    assert!(r.recreations() <= 3, "{} re-creations", r.recreations());
    let max = r.e().policy().max_attempts;
    for t in &r.transitions {
        for n in (max + 1)..(max + 4) {
            assert!(
                !t.reason.contains(&format!("{n} attempt(s)"))
                    && !t.reason.contains(&format!("attempt {n}")),
                "more attempts than max-attempts: {t}"
            );
        }
    }
}

// ---------------------------------------------------------------------------------------------
// b. Verification (issue 9, "Why" 3)
// ---------------------------------------------------------------------------------------------

fn recreate_after_target_back(r: &mut Rig) {
    r.until(10.0);
    r.sessions(failed(1));
    r.obs(stuck());
    r.probing_until(21.0, ProbeResult::Reachable);
    assert_eq!(r.recreations(), 1);
    r.recreated();
}

#[test]
fn healthy_after_a_recreation_needs_the_new_gsi_qp_in_rts() {
    let mut r = Rig::new(lab_policy());
    recreate_after_target_back(&mut r);
    // iscsid re-logs in: a new SID, same target + portal + iface.
    r.until(24.0);
    r.sessions(logged_in(2));
    r.until(30.0);
    assert_ne!(
        r.phase(),
        Phase::Healthy,
        "healthy without seeing the new QP 1"
    );
    r.obs(rts());
    r.until(31.0);
    r.sessions(logged_in(2));
    assert_eq!(r.phase(), Phase::Healthy);
    let back = r.alerts_with("storage is back");
    assert_eq!(back.len(), 1);
    assert!(
        back[0].summary.contains("1 session(s)"),
        "{}",
        back[0].summary
    );
    assert!(back[0].detail.contains("RTS"), "{}", back[0].detail);
}

#[test]
fn storage_is_never_back_with_zero_sessions() {
    let mut p = lab_policy();
    p.reset_when = ResetWhen::Immediately;
    let mut r = bare(p);
    r.until(5.0);
    r.obs(stuck());
    if r.open_recreate().is_some() {
        r.recreated();
    }
    r.until(10.0);
    r.obs(rts());
    r.sessions(vec![session(1, SessionState::LoggedIn, None)]);
    r.until(200.0);
    assert!(
        r.alerts_with("0 session(s)").is_empty(),
        "{:?}",
        r.alerts_with("0 session(s)")
    );
}

#[test]
fn without_the_qp_table_the_verdict_says_the_qp_was_not_verified() {
    let mut r = Rig::new(lab_policy());
    r.scan_done(false);
    recreate_after_target_back(&mut r);
    r.until(24.0);
    r.sessions(logged_in(2));
    r.until(30.0);
    r.sessions(logged_in(2));
    assert_eq!(r.phase(), Phase::Healthy);
    let back = r.alerts_with("storage is back");
    assert_eq!(back.len(), 1);
    assert!(
        back[0].detail.contains("not verified"),
        "{}",
        back[0].detail
    );
}

// ---------------------------------------------------------------------------------------------
// c. Reconnect (issue 9, "Why" 4)
// ---------------------------------------------------------------------------------------------

#[test]
fn operator_reconnect_works_on_a_live_session_that_is_not_remembered() {
    let mut r = bare(lab_policy());
    let reply = r.command(OperatorCommand::Reconnect {
        target: None,
        portal: None,
    });
    assert!(reply.is_ok(), "{reply:?}");
    let logout = r
        .open
        .values()
        .find(|a| matches!(a.kind, ActionKind::IscsiLogout { sid: 1, .. }))
        .map(|a| a.id)
        .expect("logs the live session out");
    r.answer(logout, Outcome::Iscsiadm(IscsiadmOutcome::Success));
    let login = r
        .open
        .values()
        .find(|a| matches!(a.kind, ActionKind::IscsiLogin { .. }))
        .map(|a| a.id)
        .expect("and in again");
    r.answer(login, Outcome::Iscsiadm(IscsiadmOutcome::Success));
    assert_eq!(r.logouts(), 1);
}

#[test]
fn operator_reconnect_with_no_live_session_is_refused() {
    let mut r = Rig::new(lab_policy());
    r.sessions(Vec::new());
    let reply = r.command(OperatorCommand::Reconnect {
        target: Some("iqn.nope".into()),
        portal: None,
    });
    assert!(reply.is_err());
}

// ---------------------------------------------------------------------------------------------
// d. No logout while the target does not accept logins (issue 9, "Why" 6)
// ---------------------------------------------------------------------------------------------

#[test]
fn dead_listener_without_the_rejected_line_gets_the_target_alert_and_no_logout() {
    // The target's rxe device was deleted and re-added: its portal answers TCP, iSER logins
    // fail, iscsid keeps retrying; on 6.1 the REJECTED line is pr_debug, so it never comes.
    let mut r = Rig::new(lab_policy());
    r.until(10.0);
    r.sessions(failed(1));
    host_until(
        &mut r,
        130.0,
        ProbeResult::Reachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &|_| Some(QpState::Rts),
    );
    assert_eq!(r.logouts(), 0, "logged out a session iscsid was retrying");
    assert_eq!(r.destructive(), 0);
    assert!(
        !r.alerts_with("does not accept").is_empty(),
        "{:#?}",
        r.alerts()
    );
    let changes = r.transitions.len();
    assert!(changes <= 4, "transition churn: {:#?}", r.transitions);
    // The listener is fixed: iscsid re-logs in as sid 3.
    let before = r.alerts().len();
    r.sessions(logged_in(3));
    r.until(140.0);
    r.sessions(logged_in(3));
    r.until(300.0);
    assert_eq!(r.phase(), Phase::Healthy);
    for a in &r.alerts()[before..] {
        assert!(
            !a.detail.contains("gone from iscsid") && !a.summary.contains("failed"),
            "stale failure alert after the session came back: {a:?}"
        );
    }
}

#[test]
fn sessions_failed_after_a_recreation_are_left_to_iscsid() {
    let mut r = Rig::new(lab_policy());
    recreate_after_target_back(&mut r);
    r.obs(rts());
    host_until(
        &mut r,
        60.0,
        ProbeResult::Reachable,
        &IscsiadmOutcome::Success,
        &|_| failed(1),
        &|_| Some(QpState::Rts),
    );
    assert_eq!(r.logouts(), 0);
}

#[test]
fn verify_deadline_judges_on_a_fresh_session_list() {
    // "sessions not back within 60s … sid 2 (gone from iscsid)" came after the session was
    // back as sid 3: the verdict must not use a list older than the deadline.
    let mut r = Rig::new(lab_policy());
    recreate_after_target_back(&mut r);
    r.obs(rts());
    r.sessions(Vec::new()); // iscsid dropped it for a moment
    r.until(200.0);
    let failures_before = r.alerts_with("gone from iscsid").len();
    let _ = failures_before;
    // Whatever happened, no alert names a SID that is not the live one once it is back.
    r.sessions(logged_in(3));
    r.until(210.0);
    r.sessions(logged_in(3));
    assert_eq!(r.phase(), Phase::Healthy);
}

// ---------------------------------------------------------------------------------------------
// e. Churn (issue 9, "Why" 8)
// ---------------------------------------------------------------------------------------------

fn not_allowed_run(end: f64) -> Rig {
    let mut r = Rig::new(iser_guard::core::recovery::Policy::default());
    r.until(10.0);
    r.sessions(failed(1));
    r.obs(stuck());
    host_until(
        &mut r,
        end,
        ProbeResult::Reachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &|_| Some(QpState::Err),
    );
    r
}

#[test]
fn a_not_allowed_alert_is_decided_at_most_once_per_repeat_interval() {
    let r = not_allowed_run(330.0);
    let keyed: Vec<_> = r
        .alerts()
        .into_iter()
        .filter(|a| a.key.contains("not-allowed"))
        .collect();
    assert!(keyed.len() <= 2, "{keyed:#?}");
    assert!(
        keyed.iter().all(|a| a.count <= 2),
        "re-decided many times: {keyed:#?}"
    );
}

#[test]
fn a_not_allowed_device_is_an_operator_action_alert() {
    let r = not_allowed_run(30.0);
    let a = r
        .alerts()
        .into_iter()
        .find(|a| a.summary.contains("devices.allow"))
        .cloned()
        .expect("alerted");
    // AlertClass::Critical is the class the daemon sends at alerts.severity-operator.
    assert_eq!(a.severity, AlertClass::Critical, "{a:?}");
}

#[test]
fn no_journal_write_while_nothing_changes() {
    // The lab: a device outside devices.allow, the QP table showing ERR every 2 s, the
    // session list FAILED every 10 s: the journal was rewritten every 2 s.
    let p = iser_guard::core::recovery::Policy {
        probe_method: iser_guard::core::recovery::ProbeMethod::None,
        ..Default::default()
    };
    let mut r = Rig::new(p);
    r.until(10.0);
    r.sessions(failed(1));
    r.obs(stuck());
    let err = |_: f64| Some(QpState::Err);
    host_until(
        &mut r,
        60.0,
        ProbeResult::Unreachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &err,
    );
    let before = r.persists();
    host_until(
        &mut r,
        290.0,
        ProbeResult::Unreachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &err,
    );
    let writes = r.persists() - before;
    assert_eq!(writes, 0, "{writes} journal writes while nothing changed");
}

#[test]
fn waiting_for_a_dead_target_journals_its_probe_rounds_at_most_every_5_seconds() {
    // The probe rounds in flight are journaled (a restart must not replay them), at most
    // every 5 s; the answers that change nothing, the QP table polls and the session lists
    // are not.
    let mut r = Rig::new(lab_policy());
    r.until(10.0);
    r.sessions(failed(1));
    r.obs(stuck());
    let err = |_: f64| Some(QpState::Err);
    host_until(
        &mut r,
        60.0,
        ProbeResult::Unreachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &err,
    );
    let before = r.persists();
    host_until(
        &mut r,
        300.0,
        ProbeResult::Unreachable,
        &IscsiadmOutcome::Timeout,
        &|_| failed(1),
        &err,
    );
    let writes = r.persists() - before;
    // Rounds every 0.5 s (480 in 240 s) are journaled at most every 5 s.
    let rounds = 240_000 / r.e().policy().probe_interval.as_millis();
    assert!(rounds >= 480, "{rounds} probe rounds");
    assert!(
        writes <= 240 / 5,
        "{writes} journal writes in {rounds} probe rounds over 240 s"
    );
}

#[test]
fn a_session_is_not_forgotten_when_a_scan_cannot_place_it() {
    let mut r = Rig::new(lab_policy());
    for i in 0..6 {
        r.until(10.0 * f64::from(i + 1));
        let rdma = if i % 2 == 0 { None } else { Some(ini_port()) };
        r.sessions(vec![session(1, SessionState::LoggedIn, rdma)]);
        assert_eq!(
            r.e().sessions().count(),
            1,
            "forgot the session at scan {i}"
        );
    }
    let flaps = r
        .log
        .iter()
        .filter(|(_, a)| matches!(&a.kind, ActionKind::PersistState { reason } if reason.contains("forgot")))
        .count();
    assert_eq!(flaps, 0);
}

#[test]
fn a_healthy_session_that_vanishes_is_forgotten_only_after_a_clean_logout() {
    let mut r = Rig::new(lab_policy());
    r.until(5.0);
    // A connection error first: this is not a clean logout.
    r.obs(Observation::ConnError { sid: 1, code: 1011 });
    r.sessions(Vec::new());
    assert_eq!(r.e().sessions().count(), 1);
}

// ---------------------------------------------------------------------------------------------
// f. Alerts (issue 9, "Why" 9)
// ---------------------------------------------------------------------------------------------

#[test]
fn untrusted_records_give_one_coalesced_alert_per_repeat_interval() {
    let mut r = Rig::new(lab_policy());
    r.until(5.0);
    for _ in 0..100 {
        r.forged(Observation::GsiQpStuck {
            device: INI.into(),
            port: None,
            evidence: StuckEvidence::ModifyQpInvalid,
        });
        r.forged(Observation::GsiQpStuck {
            device: INI.into(),
            port: None,
            evidence: StuckEvidence::MadRtsFailed,
        });
        r.forged(Observation::CmRejectedInvalidServiceId);
    }
    r.until(60.0);
    r.forged(Observation::IoError {
        disk: "sda".into(),
        kind: iser_guard::core::recovery::IoErrorKind::IoError,
    });
    r.until(120.0);
    let forged: Vec<_> = r
        .alerts()
        .into_iter()
        .filter(|a| a.summary.contains("userspace"))
        .collect();
    assert_eq!(forged.len(), 1, "{forged:#?}");
    assert!(forged[0].count >= 300, "{:?}", forged[0]);
    assert_eq!(r.destructive(), 0);
}

// ---------------------------------------------------------------------------------------------
// g. Restart safety (issue 9, "Why" 7 and 10)
// ---------------------------------------------------------------------------------------------

fn other_target() -> SessionKey {
    SessionKey {
        target: "iqn.2003-01.org.linux-iscsi.tgt:other".into(),
        portal: Portal::new(std::net::Ipv4Addr::new(192, 0, 2, 3), 3260),
        iface: "iser".into(),
    }
}

fn other_session(rdma: Option<PortId>) -> SessionInfo {
    let mut s = session(5, SessionState::LoggedIn, rdma);
    s.key = other_target();
    s.disks = vec![iser_guard::core::recovery::DiskInfo::new("sdb", "running")];
    s
}

fn held_for_the_operator() -> Rig {
    let mut p = lab_policy();
    p.other_sessions = OtherSessions::Wait;
    let mut r = Rig::new(p);
    r.sessions(vec![
        session(1, SessionState::LoggedIn, Some(ini_port())),
        other_session(Some(ini_port())),
    ]);
    r.until(10.0);
    r.sessions(vec![
        session(1, SessionState::Failed, Some(ini_port())),
        other_session(Some(ini_port())),
    ]);
    r.obs(stuck());
    r.probing_until(30.0, ProbeResult::Reachable);
    assert_eq!(r.recreations(), 0);
    assert!(matches!(
        r.e().port(&ini_port()).and_then(|p| p.hold.clone()),
        Some(Hold::OtherSessionsHealthy { .. })
    ));
    r
}

#[test]
fn a_restart_while_holding_for_the_operator_recreates_nothing_before_the_first_scan() {
    let r = held_for_the_operator();
    let snap: EngineSnapshot = r.e().snapshot();
    let policy = r.e().policy().clone();
    let mut r = Rig::resumed(snap, policy, Instant(100_000));
    // The daemon's first inputs after `systemctl restart`: the QP table, a session list whose
    // sessions are not placed yet, probe results.
    r.obs(stuck());
    r.sessions(vec![
        session(1, SessionState::Failed, None),
        other_session(None),
    ]);
    r.probing_until(120.0, ProbeResult::Reachable);
    assert_eq!(r.recreations(), 0, "re-created before the first scan");
    // The first complete scan: the other session is still healthy, so the hold stands.
    r.sessions(vec![
        session(1, SessionState::Failed, Some(ini_port())),
        other_session(Some(ini_port())),
    ]);
    r.scan_done(true);
    r.probing_until(140.0, ProbeResult::Reachable);
    assert_eq!(
        r.recreations(),
        0,
        "the hold for the operator did not survive"
    );
    assert!(matches!(
        r.e().port(&ini_port()).and_then(|p| p.hold.clone()),
        Some(Hold::OtherSessionsHealthy { .. })
    ));
}

#[test]
fn pause_and_quarantine_survive_a_restart() {
    let mut r = Rig::new(lab_policy());
    r.command(OperatorCommand::Pause).unwrap();
    r.until(10.0);
    r.sessions(failed(1));
    r.obs(stuck());
    r.probing_until(30.0, ProbeResult::Reachable);
    let snap = r.e().snapshot();
    let policy = r.e().policy().clone();
    let mut r = Rig::resumed(snap, policy, Instant(40_000));
    r.sessions(failed(1));
    r.scan_done(true);
    r.probing_until(60.0, ProbeResult::Reachable);
    assert!(r.e().is_paused());
    assert_eq!(r.destructive(), 0);
    assert_eq!(
        r.e().port(&ini_port()).and_then(|p| p.hold.clone()),
        Some(Hold::Paused)
    );
}

// ---------------------------------------------------------------------------------------------
// h. Vanished initiator device (issue 9, "Why" 5)
// ---------------------------------------------------------------------------------------------

#[test]
fn a_vanished_initiator_device_is_awaited_then_recreated_from_its_parent() {
    let mut r = Rig::new(lab_policy());
    // What the daemon reports for the lab's rxe devices: no parent (virtual), and the
    // recipe read from sysfs while they exist.
    for (dev, netdev) in [(INI, "ini0"), (TGT, "tgt0")] {
        r.obs(Observation::DeviceAppeared {
            device: dev.into(),
            parent: None,
            driver: Some("rxe".into()),
            ports: 1,
        });
        r.obs(Observation::DeviceRecipe {
            device: dev.into(),
            recipe: RecreateFrom::SoftLink {
                kind: SoftType::Rxe,
                netdev: netdev.into(),
            },
        });
    }
    r.until(10.0);
    r.obs(Observation::DeviceGone { device: INI.into() });
    // The lab: with rxe_ini gone, the next scans placed the session on the remaining device.
    host_until(
        &mut r,
        200.0,
        ProbeResult::Reachable,
        &IscsiadmOutcome::Timeout,
        &|_| vec![session(1, SessionState::Failed, Some(PortId::new(TGT, 1)))],
        &|_| None,
    );
    let (at, a) = r
        .log
        .iter()
        .find(|(_, a)| matches!(a.kind, ActionKind::RecreateDevice { .. }))
        .expect("re-created the vanished device");
    assert!(
        matches!(&a.kind, ActionKind::RecreateDevice { device, method: RecreateMethod::FromParent, remembered: Some(RecreateFrom::SoftLink { kind: SoftType::Rxe, netdev }), .. } if device == INI && netdev == "ini0"),
        "{a}"
    );
    assert!(
        at.as_millis() >= 70_000,
        "did not wait for the device: {at}"
    );
    for (_, a) in &r.log {
        assert_ne!(a.device.as_deref(), Some(TGT), "blamed {TGT}: {a}");
        if let ActionKind::Alert(al) = &a.kind {
            assert!(
                !al.summary.contains(TGT) && !al.remedy.clone().unwrap_or_default().contains(TGT),
                "blamed {TGT}: {al:?}"
            );
        }
    }
}
