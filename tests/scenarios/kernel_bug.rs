//! Kernel bug reports and ib_iser QP events, fed as the daemon feeds them: a kernel-format
//! line through the kernel-log door (`read_record`), then the driver.
//! The lines follow the kernel's own format strings (arch/x86 `show_ip`, kernel/panic.c
//! `__warn`, drivers/infiniband/ulp/iser/iser_verbs.c `iser_qp_event_callback`).

use iser_guard::core::journal;
use iser_guard::core::recovery::{
    read_record, ActionKind, AlertClass, Hold, Observation, OperatorCommand, Phase, ProbeResult,
    SessionState, Trust,
};

use super::kernel_run::*;

/// An oops in rdma_rxe's QP cleanup (`RIP: %04x:%pS`).
const RXE_OOPS: &str = "RIP: 0010:rxe_qp_do_cleanup+0x2c/0x1a0 [rdma_rxe]";
/// An oops in ib_iser's connection teardown.
const ISER_OOPS: &str = "RIP: 0010:iser_conn_terminate+0x1c/0x90 [ib_iser]";
/// ib_iser's QP event callback (`qp event %s (%d)`), with `ib_event_msg(IB_EVENT_QP_REQ_ERR)`.
const QP_EVENT: &str = "iser: iser_qp_event_callback: qp event QP request error (2)";

/// What the daemon's kmsg handler feeds the engine for `line`.
fn kernel(line: &str, trusted: bool) -> (Observation, Trust) {
    let record = iser_guard::core::kmsg::Record {
        facility: if trusted { 0 } else { 1 },
        level: 4,
        seq: 1,
        usec: 1,
        continuation: false,
        text: line.to_string(),
        dict: Vec::new(),
    };
    read_record(&record)
        .expect("a known signature")
        .observation
        .expect("an observation")
}

fn failed(sid: u32) -> Vec<iser_guard::core::recovery::SessionInfo> {
    vec![session(sid, SessionState::Failed, Some(ini_port()))]
}

/// QP 1 sticks after the bug and the target answers: everything a re-creation waits for.
fn fault_with_target_back(r: &mut Rig, until: f64) {
    r.sessions(failed(1));
    r.obs(stuck());
    r.probing_until(until, ProbeResult::Reachable);
}

fn kernel_bug_alerts(r: &Rig) -> usize {
    r.alerts()
        .iter()
        .filter(|a| a.severity == AlertClass::Critical && a.summary.starts_with("kernel bug:"))
        .count()
}

#[test]
fn an_rxe_oops_alerts_once_per_window_and_holds_recreation() {
    let mut r = Rig::new(lab_policy());
    r.until(5.0);
    let (o, t) = kernel(RXE_OOPS, true);
    assert_eq!(t, Trust::Trusted);
    r.obs(o.clone());
    // The oops repeats (one report per CPU, a storm): one alert in the repeat window.
    for _ in 0..20 {
        r.obs(o.clone());
    }
    assert_eq!(kernel_bug_alerts(&r), 1, "{:#?}", r.alerts());
    let a = r.alerts_with("rxe_qp_do_cleanup")[0].clone();
    assert!(a.summary.contains("rdma_rxe"), "{}", a.summary);
    fault_with_target_back(&mut r, 60.0);
    assert_eq!(r.recreations(), 0, "re-created a device under a kernel bug");
    let held = r.e().port(&ini_port()).and_then(|p| p.hold.clone());
    assert!(
        matches!(held, Some(Hold::KernelBug { ref module, .. }) if module.as_deref() == Some("rdma_rxe")),
        "{held:?}"
    );
    assert_ne!(r.phase(), Phase::Healthy);
    // The operator's word lifts it: the next round re-creates.
    r.command(OperatorCommand::Resume).expect("resume");
    r.probing_until(90.0, ProbeResult::Reachable);
    assert_eq!(r.recreations(), 1);
}

#[test]
fn an_ib_iser_oops_holds_every_device_and_the_hold_survives_a_restart() {
    let mut r = Rig::new(lab_policy());
    r.until(5.0);
    r.obs(kernel(ISER_OOPS, true).0);
    assert_eq!(kernel_bug_alerts(&r), 1);
    let bug = &r.e().kernel_bugs()[0];
    assert!(bug.all_devices, "ib_iser is shared by every device");
    // Restart: through the on-disk format, as the daemon reads its journal.
    let bytes = journal::encode(&r.d.engine().snapshot());
    let snap = journal::decode(&bytes).expect("decodes");
    let mut r = Rig::resumed(snap, lab_policy(), r.now);
    r.sessions(failed(1));
    r.obs(rts());
    r.scan_done(true);
    r.obs(stuck());
    r.probing_until(60.0, ProbeResult::Reachable);
    assert_eq!(r.recreations(), 0, "the restart forgot the kernel bug");
    assert_eq!(r.e().kernel_bugs().len(), 1);
}

#[test]
fn recover_lifts_the_hold_for_its_device_only_on_the_operators_word() {
    let mut r = Rig::new(lab_policy());
    r.until(5.0);
    r.obs(kernel(ISER_OOPS, true).0);
    fault_with_target_back(&mut r, 40.0);
    assert_eq!(r.recreations(), 0);
    r.command(OperatorCommand::Recover {
        device: INI.to_string(),
        port: None,
    })
    .expect("recover");
    r.probing_until(80.0, ProbeResult::Reachable);
    assert_eq!(r.recreations(), 1);
}

#[test]
fn a_forged_oops_is_counted_and_ignored() {
    let mut r = Rig::new(lab_policy());
    r.until(5.0);
    let (o, t) = kernel(RXE_OOPS, false);
    assert_eq!(t, Trust::Untrusted);
    let before = r.e().stats().ignored_untrusted;
    r.forged(o);
    assert_eq!(r.e().stats().ignored_untrusted, before + 1);
    assert_eq!(kernel_bug_alerts(&r), 0);
    assert!(r.e().kernel_bugs().is_empty());
    fault_with_target_back(&mut r, 40.0);
    assert_eq!(r.recreations(), 1, "a forged oops held recovery");
}

#[test]
fn an_iser_qp_event_asks_for_the_sessions_and_nothing_destructive() {
    let mut r = Rig::new(lab_policy());
    r.until(5.0);
    let refreshes = r.count(|k| matches!(k, ActionKind::RefreshSessions));
    let (o, t) = kernel(QP_EVENT, true);
    assert_eq!(t, Trust::Trusted);
    assert!(
        matches!(o, Observation::IserQpEvent { event: 2, .. }),
        "{o:?}"
    );
    let destructive = r.destructive();
    r.obs(o);
    assert_eq!(
        r.count(|k| matches!(k, ActionKind::RefreshSessions)),
        refreshes + 1
    );
    r.until(30.0);
    assert_eq!(r.destructive(), destructive);
    assert_eq!(r.phase(), Phase::Healthy);
}
