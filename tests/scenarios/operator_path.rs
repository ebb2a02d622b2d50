//! Operator commands through the path the daemon runs them on: the driver's plan (what
//! `--dry-run` prints), its acceptance, and its verdict, on the simulated host after the
//! field incident.

use std::time::Duration;

use iser_guard::core::driver::{PlanStep, Verdict};
use iser_guard::core::recovery::{OperatorCommand, Phase};
use iser_guard::sim::{Harness, HostEvent};

use crate::util::{phase, run, MAX_STEPS};

const DEV: &str = "rocep2s0f0";

fn recover(port: Option<u32>) -> OperatorCommand {
    OperatorCommand::Recover {
        device: DEV.into(),
        port,
    }
}

/// Runs `cmd` one second from now and for `secs` after; returns its verdict.
fn run_command(h: &mut Harness, cmd: OperatorCommand, secs: u64) -> Verdict {
    let before = h.verdicts.len();
    let at = h.now.plus(Duration::from_secs(1));
    h.host.schedule(at, HostEvent::Command(cmd));
    h.run_for(Duration::from_secs(secs), MAX_STEPS).unwrap();
    assert_eq!(h.verdicts.len(), before + 1, "{:#?}", h.verdicts);
    h.verdicts.last().unwrap().1.clone()
}

#[test]
fn recover_dry_run_plans_the_whole_sequence_with_the_hosts_methods_and_the_retries() {
    let h = run("field-incident");
    let plan = h.plan(&recover(Some(1))).expect("a plan");
    assert_eq!(plan.what, "recover rocep2s0f0/1");
    assert!(
        matches!(&plan.steps[0], PlanStep::Probe { portals, .. } if portals.len() == 1),
        "{plan:#?}"
    );
    let lines = plan.lines().join("\n");
    assert!(
        lines.contains("re-create RDMA device rocep2s0f0"),
        "{lines}"
    );
    assert!(lines.contains("devlink"), "the host's methods: {lines}");
    let attempts = h.policy.max_attempts;
    assert!(
        lines.contains(&format!(
            "after {attempts} failed attempts the port is quarantined"
        )),
        "{lines}"
    );
    assert!(lines.contains("more attempt"), "{lines}");
    assert!(lines.contains("verify the session"), "{lines}");
}

#[test]
fn a_port_or_device_that_does_not_exist_is_refused_with_those_that_do() {
    let h = run("field-incident");
    let e = h.plan(&recover(Some(9))).unwrap_err();
    assert!(e.contains("has no port 9"), "{e}");
    assert!(e.contains("rocep2s0f0/1"), "{e}");
    let e = h
        .plan(&OperatorCommand::ResetDevice {
            device: "nosuch0".into(),
        })
        .unwrap_err();
    assert!(e.contains("no RDMA device named nosuch0"), "{e}");
    assert!(e.contains(DEV), "{e}");
    // Accepting it would create the port in the engine: it is refused there too.
    let mut h = h;
    let recreations = h.recreations().len();
    let at = h.now.plus(Duration::from_secs(1));
    h.host.schedule(at, HostEvent::Command(recover(Some(9))));
    h.run_for(Duration::from_secs(60), MAX_STEPS).unwrap();
    assert!(h
        .engine()
        .port(&iser_guard::core::recovery::PortId::new(DEV, 9))
        .is_none());
    assert_eq!(h.recreations().len(), recreations);
}

#[test]
fn recover_runs_to_its_verdict_on_the_drivers_settled_rule() {
    let mut h = run("field-incident");
    let recreations = h.recreations().len();
    let v = run_command(&mut h, recover(Some(1)), 300);
    assert_eq!(
        v,
        Verdict::Done {
            message: "recover rocep2s0f0/1: done, every port is healthy".into()
        }
    );
    assert_eq!(h.recreations().len(), recreations + 1);
    assert_eq!(phase(&h, DEV, 1), Phase::Healthy);
}

#[test]
fn reconnect_by_portal_logs_the_matching_session_out_and_in_to_its_verdict() {
    let mut h = run("field-incident");
    let portal = h
        .engine()
        .sessions()
        .next()
        .expect("a session")
        .key
        .portal
        .clone();
    let cmd = OperatorCommand::Reconnect {
        target: None,
        portal: Some(portal.clone()),
    };
    let plan = h.plan(&cmd).expect("a plan");
    assert!(
        plan.lines().join("\n").contains(&portal.to_string()),
        "{plan:#?}"
    );
    let recreations = h.recreations().len();
    let v = run_command(&mut h, cmd, 120);
    assert!(matches!(v, Verdict::Done { .. }), "{v:?}");
    assert_eq!(
        h.recreations().len(),
        recreations,
        "a reconnect re-creates nothing"
    );
}
