//! The port self-test after a re-creation and the devices' async events, on the simulated
//! host through the production driver. The simulated self-test follows the host's state
//! (src/sim/selftest.rs): it passes on a fresh device with QP 1 in RTS, fails at
//! `cm-connect` where a connect cannot be made, and is unavailable without verbs.

use iser_guard::core::recovery::{
    ActionKind, AlertClass, Engine, Phase, SelfTestPolicy, SelfTestVerdict, Transition,
};
use iser_guard::core::time::Instant;
use iser_guard::sim::scenarios::{self, FIELD_DEVICE};

use super::util::*;

fn selftests(h: &iser_guard::sim::Harness) -> usize {
    h.count_actions(|k| matches!(k, ActionKind::SelfTestPort { .. }))
}

/// The phase path of the field port, as (from, to) names.
fn path(ts: &[Transition]) -> Vec<(Phase, Phase)> {
    ts.iter().map(|t| (t.from, t.to)).collect()
}

fn last_selftest(e: &Engine) -> Option<SelfTestVerdict> {
    e.port(&scenarios::field_port())
        .and_then(|p| p.last_selftest.as_ref())
        .map(|r| r.verdict)
}

#[test]
fn a_passing_self_test_is_a_witness_and_verifying_ends_healthy() {
    let h = run("selftest-passes");
    assert_safety(&h);
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
    assert_eq!(selftests(&h), 1, "one self-test for one re-creation");
    assert!(
        h.transitions
            .iter()
            .any(|t| t.from == Phase::Verifying && t.to == Phase::Healthy),
        "{:?}",
        path(&h.transitions)
    );
    let back = alerts_with(&h, "storage is back");
    assert_eq!(back.len(), 1);
    assert!(
        back[0]
            .detail
            .contains("The port self-test made a new RDMA connection on it"),
        "{}",
        back[0].detail
    );
    assert_eq!(last_selftest(h.engine()), Some(SelfTestVerdict::Passed));
}

#[test]
fn a_failing_self_test_fails_the_attempt_until_quarantine_with_its_summary() {
    let h = run("selftest-fails");
    assert_safety(&h);
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Quarantined);
    let max = h.engine().policy().max_attempts as usize;
    // Each attempt re-created the device again (the self-test said the port is still
    // broken), never more than max-attempts.
    assert_eq!(h.recreations().len(), max);
    assert_eq!(selftests(&h), max);
    let failed = alerts_with(&h, "the port self-test failed");
    assert_eq!(failed.len(), max - 1, "attempts 1..max-1 back off");
    let q = alerts_with(&h, "automatic recovery stopped");
    assert_eq!(q.len(), 1);
    assert_eq!(q[0].severity, AlertClass::Critical);
    assert!(
        q[0].detail
            .contains("self-test of rocep2s0f0/1 failed at cm-connect: rdma_connect: no answer"),
        "{}",
        q[0].detail
    );
    assert!(
        q[0].detail.contains(&format!("{max} attempt(s) exhausted")),
        "{}",
        q[0].detail
    );
    assert_eq!(last_selftest(h.engine()), Some(SelfTestVerdict::Failed));
    // The port was never declared healthy, nor was the target blamed (no listener alert).
    assert!(alerts_with(&h, "storage is back").is_empty());
    assert!(alerts_with(&h, "does not accept iSER logins").is_empty());
}

#[test]
fn a_failing_self_test_survives_restarts_at_every_step() {
    let h = run_restarting("selftest-fails");
    assert_safety(&h);
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Quarantined);
    assert_eq!(
        h.recreations().len(),
        h.engine().policy().max_attempts as usize
    );
}

#[test]
fn an_unavailable_self_test_leaves_recovery_as_it_was() {
    let with = run("selftest-unavailable");
    let field = scenarios::find("field-incident").unwrap();
    let (host, mut policy) = (field.build)();
    policy.selftest = SelfTestPolicy::Off;
    let mut off = iser_guard::sim::Harness::new(host, policy, 7);
    off.run_until(Instant(600_000), MAX_STEPS).unwrap();
    assert_safety(&with);
    assert_eq!(phase(&with, FIELD_DEVICE, 1), Phase::Healthy);
    assert_eq!(path(&with.transitions), path(&off.transitions));
    assert_eq!(with.storage_back_at(), off.storage_back_at());
    assert_eq!(with.recreations(), off.recreations());
    assert_eq!(selftests(&off), 0, "off asks for none");
    assert_eq!(selftests(&with), 1);
    // Said once, as information; the verdict says no self-test ran.
    let said = alerts_with(&with, "self-test is not available");
    assert_eq!(said.len(), 1);
    assert_eq!(said[0].severity, AlertClass::Info);
    assert_eq!(
        last_selftest(with.engine()),
        Some(SelfTestVerdict::Unavailable)
    );
}

#[test]
fn the_self_test_runs_after_every_recreation_of_the_existing_scenarios_and_passes() {
    // quarantine-then-operator: the operator's `recover` re-creates; its port is self-tested
    // too.
    for name in [
        "field-incident",
        "reset-immediately",
        "two-ports-one-device",
        "quarantine-then-operator",
    ] {
        let h = run(name);
        assert_safety(&h);
        assert!(selftests(&h) >= 1, "{name}: no self-test");
        assert!(
            alerts_with(&h, "self-test is not available").is_empty(),
            "{name}"
        );
        assert!(
            h.engine()
                .ports()
                .filter_map(|p| p.last_selftest.as_ref())
                .all(|r| r.verdict == SelfTestVerdict::Passed),
            "{name}"
        );
    }
}

#[test]
fn device_fatal_starts_a_recovery_on_an_allowed_device() {
    let h = run("device-fatal");
    assert_safety(&h);
    let first = h
        .transitions
        .iter()
        .find(|t| t.from == Phase::Healthy)
        .expect("a fault");
    assert!(first.reason.contains("DEVICE_FATAL"), "{}", first.reason);
    assert_eq!(first.at, Instant(60_000), "at the event, not the next poll");
    assert_eq!(h.recreations(), vec![FIELD_DEVICE.to_string()]);
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
    // The DEVICE_FATAL uverbs sends when the old device unregisters during our own
    // re-creation opened nothing new.
    assert_eq!(
        h.transitions
            .iter()
            .filter(|t| t.from == Phase::Healthy)
            .count(),
        1
    );
}

#[test]
fn device_fatal_on_a_device_outside_the_allow_list_is_refused() {
    let h = run("device-fatal-not-allowed");
    assert_safety(&h);
    assert!(h.recreations().is_empty());
    assert!(h.plans.iter().any(|(_, a, _)| matches!(
        &a.kind,
        ActionKind::RecreateDevice { device, .. } if device == FIELD_DEVICE
    )));
    assert!(!alerts_with(&h, "is not in devices.allow").is_empty());
}

#[test]
fn a_device_deleted_while_watched_waits_for_it_as_before() {
    // uverbs tells DEVICE_FATAL to a device's open contexts when it is unregistered: with
    // the listener on, a deleted device is still awaited (device_wait), not re-created at
    // once, and coming back by itself needs no re-creation.
    let mut with = scenarios::find("device-vanishes").unwrap().harness(7);
    with.host.async_events = true;
    with.run_until(Instant(300_000), MAX_STEPS).unwrap();
    let without = run("device-vanishes");
    assert_safety(&with);
    let first = with
        .transitions
        .iter()
        .find(|t| t.from == Phase::Healthy)
        .expect("a fault");
    assert!(first.reason.contains("DEVICE_FATAL"), "{}", first.reason);
    assert!(
        with.transitions
            .iter()
            .any(|t| t.to == Phase::AwaitingDevice),
        "{:?}",
        path(&with.transitions)
    );
    assert_eq!(with.recreations(), without.recreations());
    assert_eq!(phase(&with, "rxe_ini", 1), Phase::Healthy);
}

// ---------------------------------------------------------------------------------------------
// The engine alone (the issue-9 rig): the link witnesses and the events that change nothing.
// ---------------------------------------------------------------------------------------------

mod engine_alone {
    use std::time::Duration;

    use iser_guard::core::qp::QpState;
    use iser_guard::core::recovery::{
        ActionKind, Observation, Outcome, Phase, ProbeResult, SessionState,
    };
    use iser_guard::core::selftest::{
        AsyncEvent, AsyncEventKind, SelfTestReport, SelfTestResult, SelfTestStep,
    };

    use super::super::kernel_run::*;

    fn event(kind: AsyncEventKind, port: Option<u32>) -> Observation {
        Observation::AsyncEvent(AsyncEvent {
            device: INI.to_string(),
            port,
            kind,
        })
    }

    fn passed() -> SelfTestResult {
        SelfTestResult::Ran(SelfTestReport {
            device: INI.to_string(),
            port: 1,
            steps: vec![SelfTestStep {
                name: "cm-connect".into(),
                took: Duration::from_millis(7),
                ok: true,
                detail: "ESTABLISHED".into(),
            }],
        })
    }

    fn selftests(r: &Rig) -> usize {
        r.count(|k| matches!(k, ActionKind::SelfTestPort { .. }))
    }

    /// Stuck, target back, re-created: the port reconnects with its fresh QP 1 awaited.
    fn recreated(r: &mut Rig) {
        r.until(10.0);
        r.sessions(vec![session(1, SessionState::Failed, Some(ini_port()))]);
        r.obs(stuck());
        r.probing_until(21.0, ProbeResult::Reachable);
        assert_eq!(r.recreations(), 1);
        r.recreated();
    }

    #[test]
    fn port_err_holds_the_self_test_and_port_active_wakes_it() {
        let mut r = Rig::new(lab_policy());
        r.selftests.push_back(passed());
        recreated(&mut r);
        r.obs(event(AsyncEventKind::PortErr, Some(1)));
        r.obs(rts());
        assert_eq!(
            selftests(&r),
            0,
            "no self-test on a port whose link is down"
        );
        r.obs(event(AsyncEventKind::PortActive, Some(1)));
        assert_eq!(selftests(&r), 1, "PORT_ACTIVE woke the waiting port");
        r.until(24.0);
        r.sessions(vec![session(2, SessionState::LoggedIn, Some(ini_port()))]);
        assert_eq!(r.phase(), Phase::Healthy);
        let back = r.alerts_with("storage is back");
        assert!(
            back[0]
                .detail
                .contains("self-test made a new RDMA connection"),
            "{}",
            back[0].detail
        );
    }

    #[test]
    fn a_healthy_session_waits_for_the_self_test_until_it_answers() {
        let mut r = Rig::new(lab_policy());
        r.hold_selftests = true;
        recreated(&mut r);
        r.obs(rts());
        let id = r
            .open
            .iter()
            .find(|(_, a)| matches!(a.kind, ActionKind::SelfTestPort { .. }))
            .map(|(id, _)| *id)
            .expect("a self-test asked for once the fresh QP 1 was seen");
        r.until(24.0);
        r.sessions(vec![session(2, SessionState::LoggedIn, Some(ini_port()))]);
        assert_ne!(
            r.phase(),
            Phase::Healthy,
            "healthy before the self-test answered"
        );
        r.answer(id, Outcome::SelfTest(passed()));
        r.sessions(vec![session(2, SessionState::LoggedIn, Some(ini_port()))]);
        assert_eq!(r.phase(), Phase::Healthy);
        assert_eq!(selftests(&r), 1);
    }

    #[test]
    fn gid_change_asks_for_the_topology_and_qp_events_change_nothing() {
        let mut r = Rig::new(lab_policy());
        r.until(30.0);
        let refreshes = |r: &Rig| r.count(|k| matches!(k, ActionKind::RefreshTopology));
        let before = refreshes(&r);
        let transitions = r.transitions.len();
        r.obs(event(AsyncEventKind::GidChange, Some(1)));
        assert_eq!(refreshes(&r), before + 1);
        for kind in [
            AsyncEventKind::QpFatal,
            AsyncEventKind::CqErr,
            AsyncEventKind::CommEstablished,
            AsyncEventKind::LidChange,
            AsyncEventKind::Other(77),
        ] {
            r.obs(event(kind, None));
        }
        assert_eq!(r.transitions.len(), transitions);
        assert_eq!(r.phase(), Phase::Healthy);
        assert_eq!(r.destructive(), 0);
    }

    #[test]
    fn events_of_a_device_the_engine_does_not_watch_are_ignored() {
        let mut r = Rig::new(lab_policy());
        r.until(5.0);
        r.obs(Observation::AsyncEvent(AsyncEvent {
            device: "mlx5_9".into(),
            port: None,
            kind: AsyncEventKind::DeviceFatal,
        }));
        assert!(r.e().ports().all(|p| p.phase() == Phase::Healthy));
        assert!(r
            .e()
            .port(&iser_guard::core::recovery::PortId::new("mlx5_9", 1))
            .is_none());
        // The QP table shows the watched device fine: DEVICE_FATAL on it is a fault.
        r.obs(Observation::GsiQpState {
            device: INI.into(),
            port: 1,
            state: QpState::Rts,
        });
        r.obs(event(AsyncEventKind::DeviceFatal, None));
        assert_ne!(r.phase(), Phase::Healthy);
    }
}

#[test]
fn the_self_test_is_harmless_so_dry_run_pause_and_the_allow_list_never_stop_it() {
    use iser_guard::core::driver::{Authority, Driver};
    use iser_guard::core::recovery::{Action, ActionId, OperatorCommand, Origin, PortId};
    let policy = iser_guard::core::recovery::Policy {
        dry_run: true,
        ..Default::default()
    };
    let mut d = Driver::new(Engine::new(policy, 1), true);
    let _ = d.handle_command(OperatorCommand::Pause, Instant(0));
    let action = Action {
        id: ActionId(1),
        port: Some(PortId::new("mlx5_0", 1)),
        device: Some("mlx5_0".into()),
        origin: Origin::Automatic,
        reason: "verifying".into(),
        kind: ActionKind::SelfTestPort {
            device: "mlx5_0".into(),
            port: 1,
            timeout: std::time::Duration::from_secs(10),
        },
    };
    assert!(!action.kind.is_destructive());
    assert!(action.kind.expects_outcome());
    assert_eq!(d.authorise(&action), Ok(Authority::Harmless));
}

#[test]
fn each_failed_self_test_costs_one_attempt_and_a_later_pass_ends_healthy() {
    let max = iser_guard::core::recovery::Policy::default().max_attempts;
    for broken in 0..=max + 1 {
        let s = scenarios::find("selftest-fails").unwrap();
        let mut h = s.harness(7);
        if let Some(d) = h.host.devices.get_mut(FIELD_DEVICE) {
            d.cm_silent_registrations = broken;
        }
        h.run_until(Instant::ZERO.plus(s.duration), MAX_STEPS)
            .unwrap();
        assert_safety(&h);
        let n = u32::try_from(h.recreations().len()).unwrap();
        if broken < max {
            assert_eq!(
                phase(&h, FIELD_DEVICE, 1),
                Phase::Healthy,
                "broken {broken}"
            );
            assert_eq!(n, broken + 1, "broken {broken}");
            assert_eq!(last_selftest(h.engine()), Some(SelfTestVerdict::Passed));
        } else {
            assert_eq!(
                phase(&h, FIELD_DEVICE, 1),
                Phase::Quarantined,
                "broken {broken}"
            );
            assert_eq!(n, max, "broken {broken}");
        }
    }
}

#[test]
fn status_shows_the_last_self_test_and_history_names_device_fatal() {
    use iser_guard::core::observe::{snapshot::DaemonContext, Clocks, DaemonSnapshot, IncidentLog};
    let h = run("selftest-passes");
    let clocks = Clocks {
        mono: h.now,
        unix_ms: 1_796_158_800_000 + h.now.as_millis(),
    };
    let doc = DaemonSnapshot::build(
        &h.driver,
        DaemonContext {
            version: "test".into(),
            pid: 1,
            started: Instant::ZERO,
            clocks,
            status: String::new(),
            safe_mode: None,
            sources: Vec::new(),
            events_kept: 0,
            events_dropped: 0,
            portal_probes: h.host.portal_probes(),
        },
    );
    let port = doc
        .ports
        .iter()
        .find(|p| p.port == "rocep2s0f0/1")
        .expect("the field port");
    let t = port.last_selftest.as_ref().expect("a self-test in status");
    assert_eq!((t.result.as_str(), t.passed, t.steps), ("passed", true, 6));
    assert!(t.summary.contains("passed: 6 steps"), "{}", t.summary);
    // The incident of a DEVICE_FATAL names it as its cause (what `history` shows).
    let h = run("device-fatal");
    let mut log = IncidentLog::new(8);
    for tr in &h.transitions {
        let c = Clocks {
            mono: tr.at,
            unix_ms: 1_796_158_800_000 + tr.at.as_millis(),
        };
        log.on_transition(tr, h.engine().port(&tr.port), c);
    }
    let i = log.incidents().first().expect("an incident");
    assert!(i.cause.contains("DEVICE_FATAL"), "{i:?}");
    assert!(i.local, "a device fault is a local cause");
}
