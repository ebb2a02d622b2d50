//! The driver against the real engine: authorisation, write-ahead, plans.

use std::time::Duration;

use super::*;
use crate::recovery::{
    ActionKind, DiskInfo, Hold, Phase, PortId, Portal, ProbeMethod, ResetWhen, SessionKey,
    SessionState, StuckEvidence,
};

fn policy(allow: &[&str]) -> Policy {
    let mut p = Policy {
        reset_when: ResetWhen::Immediately,
        probe_method: ProbeMethod::None,
        ..Policy::default()
    };
    for d in allow {
        p.allow.insert((*d).to_string());
    }
    p
}

fn session(sid: u32, device: &str, state: SessionState) -> SessionInfo {
    SessionInfo {
        sid,
        key: SessionKey {
            target: format!("iqn.2003-01.org.example:t{sid}"),
            portal: Portal::parse(&format!("192.0.2.{sid}"), 3260).unwrap(),
            iface: "default".into(),
        },
        transport: "iser".into(),
        netdev: None,
        local_ip: None,
        rdma: Some(PortId::new(device, 1)),
        placed_by: None,
        state,
        disks: vec![DiskInfo::new(format!("sd{sid}"), "running")],
    }
}

fn stuck(device: &str) -> Observation {
    Observation::GsiQpStuck {
        device: device.into(),
        port: Some(1),
        evidence: StuckEvidence::ModifyQpInvalid,
    }
}

/// A driver with one session per device, each down (iscsid lost it when QP 1 stuck).
fn driver(p: Policy, devices: &[&str]) -> Driver {
    let mut d = Driver::new(Engine::new(p, 7), true);
    let list = devices
        .iter()
        .zip(1u32..)
        .map(|(dev, sid)| session(sid, dev, SessionState::Failed))
        .collect();
    d.handle_sessions(list, Instant(0));
    // What the daemon says once its first scan (sessions and topology) is complete: the
    // engine acts on nothing destructive before it.
    d.handle(
        crate::recovery::Input::ScanComplete(crate::recovery::ScanComplete {
            qp_table_available: true,
        }),
        Instant(0),
    );
    d
}

/// Drains the effects, answering each journal write with `journal` and recording every
/// effect in order.
fn drain(d: &mut Driver, now: Instant, journal: Result<(), String>) -> Vec<Effect> {
    let mut out = Vec::new();
    while let Some(e) = d.poll_effect(now) {
        if let EffectKind::WriteJournal { .. } = e.kind {
            // Nothing is handed out while the write is pending.
            assert_eq!(d.poll_effect(now), None);
            d.handle_effect_outcome(e.id, EffectOutcome::Journal(journal.clone()), now);
        }
        out.push(e);
    }
    while d.poll_transition().is_some() {}
    out
}

fn destructive_runs(effects: &[Effect]) -> Vec<(&Action, &Authority)> {
    effects
        .iter()
        .filter_map(|e| match &e.kind {
            EffectKind::Run { action, authority } if action.kind.is_destructive() => {
                Some((action, authority))
            }
            _ => None,
        })
        .collect()
}

fn plans(effects: &[Effect]) -> Vec<(&Action, &Refusal)> {
    effects
        .iter()
        .filter_map(|e| match &e.kind {
            EffectKind::Plan { action, refusal } => Some((action, refusal)),
            _ => None,
        })
        .collect()
}

#[test]
fn authorisation_is_decided_once_and_carried_on_the_effect() {
    let mut d = driver(policy(&["dev0"]), &["dev0"]);
    drain(&mut d, Instant(0), Ok(()));
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    let effects = drain(&mut d, Instant(10), Ok(()));
    let runs = destructive_runs(&effects);
    assert_eq!(runs.len(), 1, "{effects:#?}");
    assert!(matches!(runs[0].0.kind, ActionKind::RecreateDevice { .. }));
    assert_eq!(
        runs[0].1,
        &Authority::AllowList {
            entry: "dev0".into()
        }
    );
    // Harmless actions say so.
    assert!(effects.iter().all(|e| match &e.kind {
        EffectKind::Run { action, authority } =>
            action.kind.is_destructive() || *authority == Authority::Harmless,
        _ => true,
    }));
}

#[test]
fn a_journal_write_completes_before_every_destructive_effect() {
    let mut d = driver(policy(&["dev0", "dev1"]), &["dev0", "dev1"]);
    drain(&mut d, Instant(0), Ok(()));
    // One batch per drain; every drain follows new inputs, so an earlier write is stale.
    let mut batches: Vec<Vec<Effect>> = Vec::new();
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    d.handle_observation(stuck("dev1"), Trust::Trusted, Instant(10));
    batches.push(drain(&mut d, Instant(10), Ok(())));
    // Re-creation outcomes, then the session logouts/logins that follow.
    for t in [20u64, 40, 80, 200, 400] {
        let now = Instant(t * 1000);
        let pending: Vec<(EffectId, ActionKind)> = d
            .outstanding
            .keys()
            .filter_map(|eid| {
                batches
                    .iter()
                    .flatten()
                    .find(|e| e.id == *eid)
                    .and_then(|e| match &e.kind {
                        EffectKind::Run { action, .. } => Some((*eid, action.kind.clone())),
                        _ => None,
                    })
            })
            .collect();
        for (eid, kind) in pending {
            let o = match kind {
                ActionKind::RecreateDevice { device, .. } => {
                    Outcome::Recreate(crate::recovery::RecreateResult::Recreated {
                        name: device,
                        mode_restored: None,
                        method: None,
                        failed_before: Vec::new(),
                    })
                }
                _ => Outcome::Iscsiadm(crate::recovery::IscsiadmOutcome::Success),
            };
            d.handle_effect_outcome(eid, EffectOutcome::Action(o), now);
        }
        d.handle_sessions(
            vec![
                session(1, "dev0", SessionState::Failed),
                session(2, "dev1", SessionState::Failed),
            ],
            now,
        );
        d.handle_timeout(now);
        batches.push(drain(&mut d, now, Ok(())));
    }
    let mut destructive = 0;
    for batch in &batches {
        let mut journaled = false;
        for e in batch {
            match &e.kind {
                EffectKind::WriteJournal { .. } => journaled = true,
                EffectKind::Run { action, .. } if action.kind.is_destructive() => {
                    assert!(
                        journaled,
                        "{e} without a journal write before it in its batch"
                    );
                    destructive += 1;
                }
                _ => {}
            }
        }
    }
    assert!(destructive >= 2, "{batches:#?}");
}

#[test]
fn a_failed_journal_write_stops_the_destructive_effect() {
    let mut d = driver(policy(&["dev0"]), &["dev0"]);
    drain(&mut d, Instant(0), Ok(()));
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    let effects = drain(&mut d, Instant(10), Err("No space left on device".into()));
    assert!(destructive_runs(&effects).is_empty(), "{effects:#?}");
    let p = plans(&effects);
    assert!(
        p.iter()
            .any(|(a, r)| matches!(a.kind, ActionKind::RecreateDevice { .. })
                && matches!(r, Refusal::JournalFailed { .. })),
        "{effects:#?}"
    );
    // The engine was told: a critical alert, and the device is not being re-created.
    assert!(effects.iter().any(|e| matches!(&e.kind,
        EffectKind::Run { action, .. } if matches!(&action.kind, ActionKind::Alert(a) if a.summary.contains("journal")))));
    assert_eq!(d.engine().recreating(), None);
}

#[test]
fn dry_run_yields_a_plan_and_the_engine_holds_the_port_without_a_failure() {
    let mut p = policy(&["dev0"]);
    p.dry_run = true;
    let mut d = driver(p, &["dev0"]);
    drain(&mut d, Instant(0), Ok(()));
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    let effects = drain(&mut d, Instant(10), Ok(()));
    assert!(destructive_runs(&effects).is_empty());
    let p = plans(&effects);
    assert_eq!(p.len(), 1, "{effects:#?}");
    assert!(matches!(p[0].0.kind, ActionKind::RecreateDevice { .. }));
    assert_eq!(p[0].1, &Refusal::DryRun);
    let port = d.engine().port(&PortId::new("dev0", 1)).unwrap();
    assert_eq!(port.hold, Some(Hold::DryRun));
    assert_eq!(port.attempts(), 0, "a plan is not a failed attempt");
    assert_ne!(port.phase(), Phase::Quarantined);
    assert_eq!(d.engine().recreating(), None);
    // Time passing does not turn the plan into retries.
    for t in 1..20u64 {
        let now = Instant(t * 60_000);
        d.handle_timeout(now);
        let more = drain(&mut d, now, Ok(()));
        assert!(destructive_runs(&more).is_empty());
    }
    let port = d.engine().port(&PortId::new("dev0", 1)).unwrap();
    assert_eq!(port.attempts(), 0);
    assert_ne!(port.phase(), Phase::Quarantined);
}

#[test]
fn the_operator_command_overrides_the_allow_list_only_for_the_device_it_names() {
    let mut d = driver(policy(&[]), &["dev0", "dev1"]);
    drain(&mut d, Instant(0), Ok(()));
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    d.handle_observation(stuck("dev1"), Trust::Trusted, Instant(10));
    let effects = drain(&mut d, Instant(10), Ok(()));
    assert!(destructive_runs(&effects).is_empty());
    assert_eq!(plans(&effects).len(), 2, "{effects:#?}");
    let (cmd, _) = d
        .handle_command(
            OperatorCommand::ResetDevice {
                device: "dev0".into(),
            },
            Instant(20),
        )
        .unwrap();
    let effects = drain(&mut d, Instant(20), Ok(()));
    let runs = destructive_runs(&effects);
    assert_eq!(runs.len(), 1, "{effects:#?}");
    assert_eq!(runs[0].0.device.as_deref(), Some("dev0"));
    assert_eq!(
        runs[0].1,
        &Authority::Operator {
            command: cmd,
            device: "dev0".into()
        }
    );
    // An operator-origin action on a device the command does not name is refused.
    let mut other = runs[0].0.clone();
    other.device = Some("dev1".into());
    other.port = Some(PortId::new("dev1", 1));
    assert_eq!(
        d.authorise(&other),
        Err(Refusal::NotNamedByOperator {
            device: "dev1".into()
        })
    );
    assert!(d.engine().port(&PortId::new("dev1", 1)).unwrap().hold == Some(Hold::NotAllowed));
}

#[test]
fn paused_gives_no_automatic_destructive_effect() {
    let mut d = driver(policy(&["dev0"]), &["dev0"]);
    drain(&mut d, Instant(0), Ok(()));
    d.handle_command(OperatorCommand::Pause, Instant(1))
        .unwrap();
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    let mut effects = drain(&mut d, Instant(10), Ok(()));
    for t in 1..10u64 {
        let now = Instant(t * 60_000);
        d.handle_timeout(now);
        effects.extend(drain(&mut d, now, Ok(())));
    }
    assert!(destructive_runs(&effects).is_empty(), "{effects:#?}");
    assert!(plans(&effects).iter().all(|(_, r)| **r == Refusal::Paused));
    assert_eq!(
        d.engine().port(&PortId::new("dev0", 1)).unwrap().hold,
        Some(Hold::Paused)
    );
    // Resume: the same action now runs, allowed by the allow-list.
    d.handle_command(OperatorCommand::Resume, Instant(600_000))
        .unwrap();
    let effects = drain(&mut d, Instant(600_000), Ok(()));
    assert_eq!(destructive_runs(&effects).len(), 1, "{effects:#?}");
    let _ = Duration::ZERO;
}

#[test]
fn a_standalone_driver_leaves_automatic_actions_to_the_daemon() {
    let mut d = Driver::new(Engine::new(policy(&["dev0"]), 7), false);
    d.handle_sessions(vec![session(1, "dev0", SessionState::Failed)], Instant(0));
    drain(&mut d, Instant(0), Ok(()));
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    let effects = drain(&mut d, Instant(10), Ok(()));
    assert!(destructive_runs(&effects).is_empty());
    assert!(plans(&effects)
        .iter()
        .all(|(_, r)| **r == Refusal::LeftToDaemon));
}

#[test]
fn safe_mode_refuses_automatic_destructive_actions_until_the_first_complete_scan() {
    // The engine has heard its scan (its own rule is satisfied): what refuses is the
    // driver's safe-mode hold, the daemon's second line of defence.
    let mut d = driver(policy(&["dev0"]), &["dev0"]);
    d.hold_until_first_scan("the journal was corrupt");
    drain(&mut d, Instant(0), Ok(()));
    d.handle_observation(stuck("dev0"), Trust::Trusted, Instant(10));
    let mut effects = drain(&mut d, Instant(10), Ok(()));
    for t in 1..5u64 {
        let now = Instant(t * 60_000);
        d.handle_timeout(now);
        effects.extend(drain(&mut d, now, Ok(())));
    }
    assert!(destructive_runs(&effects).is_empty(), "{effects:#?}");
    let refused = plans(&effects);
    assert!(!refused.is_empty(), "{effects:#?}");
    assert!(refused
        .iter()
        .all(|(_, r)| matches!(r, Refusal::SafeMode { reason } if reason.contains("corrupt"))));
    assert_eq!(d.held_until_scan(), Some("the journal was corrupt"));
    // The scan is complete: the next stuck QP on an allowed device is recovered.
    d.first_scan_complete();
    assert_eq!(d.held_until_scan(), None);
    let mut effects = Vec::new();
    for t in 5..40u64 {
        let now = Instant(t * 60_000);
        d.handle_observation(stuck("dev0"), Trust::Trusted, now);
        d.handle_timeout(now);
        effects.extend(drain(&mut d, now, Ok(())));
        if !destructive_runs(&effects).is_empty() {
            break;
        }
    }
    assert!(!destructive_runs(&effects).is_empty(), "{effects:#?}");
}

// ---------------------------------------------------------------------------------------
// The lab's standalone `reset-device rxe_ini --yes` (6.12, rxe on both ends): through the
// real topology model and adapter, as the daemon's netlink source feeds the engine.
// ---------------------------------------------------------------------------------------

mod lab_reset_device {
    use super::*;
    use crate::nldev::{DeviceInfo, IbPortState, PhysState, PortInfo, QpEntry, QpTypeOrRaw};
    use crate::qp::{QpState, QpType};
    use crate::recovery::from_topology_event;
    use crate::topology::{DeviceObservation, Snapshot, Topology};

    /// One rxe device as `rdma` lists it: port 1 ACTIVE on `netdev`, QP 1 (GSI) in RTS.
    fn rxe(index: u32, name: &str, netdev: (u32, &str)) -> DeviceObservation {
        DeviceObservation {
            info: DeviceInfo {
                index,
                name: name.into(),
                port_count: 1,
                cap_flags: None,
                fw_version: None,
                node_guid: None,
                sys_image_guid: None,
                node_type: Some(1),
                protocol: Some("roce".into()),
                dim: None,
                name_assign_type: None,
                dev_type: None,
                parent_name: None,
            },
            parent: None,
            ports: vec![PortInfo {
                dev_index: index,
                dev_name: name.into(),
                port: 1,
                state: IbPortState::Active,
                phys_state: PhysState::LinkUp,
                netdev_index: Some(netdev.0),
                netdev_name: Some(netdev.1.into()),
                cap_flags: None,
                subnet_prefix: None,
                lid: None,
                sm_lid: None,
                lmc: None,
            }],
            qps: Ok(vec![QpEntry {
                dev_index: index,
                dev_name: name.into(),
                port: Some(1),
                lqpn: 1,
                rqpn: None,
                qp_type: QpTypeOrRaw::Known(QpType::Gsi),
                state: QpState::Rts,
                pid: None,
                kern_name: Some("ib_core".into()),
                sq_psn: Some(2),
                rq_psn: None,
                path_mig_state: None,
                pdn: None,
            }]),
        }
    }

    fn dump(d: &mut Driver, t: &mut Topology, devices: Vec<DeviceObservation>, now: Instant) {
        for ev in t.apply_snapshot(Snapshot { devices }, now) {
            for obs in from_topology_event(&ev, t) {
                d.handle_observation(obs, Trust::Trusted, now);
            }
        }
    }

    fn lab_session(state: SessionState) -> SessionInfo {
        SessionInfo {
            key: SessionKey {
                target: "iqn.2003-01.org.example.lab:tgt0".into(),
                portal: Portal::parse("192.0.2.2", 3260).unwrap(),
                iface: "iser".into(),
            },
            ..session(2, "rxe_ini", state)
        }
    }

    /// Runs the standalone command's driver until `until`, answering session refreshes
    /// with `sessions(now)`; returns every destructive action that ran.
    fn run(
        d: &mut Driver,
        from: u64,
        until: u64,
        sessions: impl Fn(u64) -> SessionState,
    ) -> Vec<Action> {
        let mut ran = Vec::new();
        for ms in (from..=until).step_by(500) {
            let now = Instant(ms);
            if d.next_timeout().is_some_and(|t| t <= now) {
                d.handle_timeout(now);
            }
            for e in drain(d, now, Ok(())) {
                if let EffectKind::Run { action, .. } = e.kind {
                    match action.kind {
                        ActionKind::RefreshSessions => {
                            d.handle_sessions(vec![lab_session(sessions(ms))], now)
                        }
                        _ if action.kind.is_destructive() => ran.push(action),
                        _ => {}
                    }
                }
            }
        }
        ran
    }

    fn reset_device(outcome_before_dump: bool) {
        let ini = PortId::new("rxe_ini", 1);
        let mut t = Topology::new();
        let mut d = Driver::new(Engine::new(policy(&[]), 7), false);
        let tgt = || rxe(1, "rxe_tgt", (2, "tgt0"));
        dump(
            &mut d,
            &mut t,
            vec![rxe(0, "rxe_ini", (3, "ini0")), tgt()],
            Instant(0),
        );
        d.handle_sessions(vec![lab_session(SessionState::LoggedIn)], Instant(0));
        d.handle(
            crate::recovery::Input::ScanComplete(crate::recovery::ScanComplete {
                qp_table_available: true,
            }),
            Instant(0),
        );
        drain(&mut d, Instant(0), Ok(()));
        d.handle_command(
            OperatorCommand::ResetDevice {
                device: "rxe_ini".into(),
            },
            Instant(1_000),
        )
        .unwrap();
        let effects = drain(&mut d, Instant(1_000), Ok(()));
        let recreate = effects
            .iter()
            .find_map(|e| match &e.kind {
                EffectKind::Run { action, .. }
                    if matches!(action.kind, ActionKind::RecreateDevice { .. }) =>
                {
                    Some(e.id)
                }
                _ => None,
            })
            .expect("the operator's re-creation runs");
        // rdma link delete: the session fails with the device (DEVICE_REMOVAL).
        dump(&mut d, &mut t, vec![tgt()], Instant(1_100));
        d.handle_sessions(vec![lab_session(SessionState::Failed)], Instant(1_150));
        let readd = vec![tgt(), rxe(2, "rxe_ini", (3, "ini0"))];
        let outcome = EffectOutcome::Action(Outcome::Recreate(
            crate::recovery::RecreateResult::Recreated {
                name: "rxe_ini".into(),
                mode_restored: None,
                method: None,
                failed_before: Vec::new(),
            },
        ));
        if outcome_before_dump {
            d.handle_effect_outcome(recreate, outcome, Instant(1_200));
            dump(&mut d, &mut t, readd, Instant(1_300));
        } else {
            dump(&mut d, &mut t, readd, Instant(1_200));
            d.handle_effect_outcome(recreate, outcome, Instant(1_300));
        }
        // iscsid logs the FAILED session in again by itself 2.4-3.2 s after the port works.
        let ran = run(&mut d, 1_500, 120_000, |ms| {
            if ms < 4_500 {
                SessionState::Failed
            } else {
                SessionState::LoggedIn
            }
        });
        let port = d.engine().port(&ini).unwrap();
        assert_eq!(port.phase(), Phase::Healthy, "{}", port.reason);
        assert!(
            ran.iter().all(|a| !matches!(
                a.kind,
                ActionKind::IscsiLogout { .. } | ActionKind::IscsiLogin { .. }
            )),
            "iscsid re-logged the session itself; nothing to log out: {ran:#?}"
        );
    }

    #[test]
    fn healthy_once_iscsid_relogged_the_session_outcome_first() {
        reset_device(true);
    }

    #[test]
    fn healthy_once_iscsid_relogged_the_session_dump_first() {
        reset_device(false);
    }
}

#[test]
fn an_operator_logout_interrupted_by_a_stop_is_said_once_after_resume_not_timed_out() {
    // The lab: the standalone reconnect stopped with its logout running (its child was
    // killed); the next command resumed the journal and reported "the logout failed:
    // Timeout" 40 s later, in the middle of an unrelated reset-device.
    let mut d = Driver::new(Engine::new(policy(&[]), 7), false);
    let unplaced = SessionInfo {
        rdma: None,
        ..session(2, "rxe_ini", SessionState::LoggedIn)
    };
    d.handle_sessions(vec![unplaced], Instant(0));
    d.handle(
        crate::recovery::Input::ScanComplete(crate::recovery::ScanComplete {
            qp_table_available: true,
        }),
        Instant(0),
    );
    d.handle_command(
        OperatorCommand::Reconnect {
            target: None,
            portal: None,
        },
        Instant(1_000),
    )
    .unwrap();
    let effects = drain(&mut d, Instant(1_000), Ok(()));
    assert!(effects.iter().any(|e| matches!(&e.kind,
        EffectKind::Run { action, .. } if matches!(action.kind, ActionKind::IscsiLogout { .. }))));
    assert_eq!(d.engine().operator_session_ops(), 1);
    let snap = d.engine().snapshot();
    let engine = Engine::resume(snap, policy(&[]), Instant(3_000)).unwrap();
    let mut d = Driver::new(engine, false);
    assert_eq!(d.engine().operator_session_ops(), 0);
    let mut alerts = Vec::new();
    for ms in [3_000u64, 60_000, 120_000] {
        d.handle_timeout(Instant(ms));
        for e in drain(&mut d, Instant(ms), Ok(())) {
            if let EffectKind::Run { action, .. } = e.kind {
                if let ActionKind::Alert(a) = action.kind {
                    alerts.push(a.summary);
                }
            }
        }
    }
    assert_eq!(alerts.len(), 1, "{alerts:?}");
    assert!(alerts[0].contains("was interrupted"), "{alerts:?}");
}

#[test]
fn the_first_scan_is_the_topology_then_a_listing_asked_for_after_it() {
    let mut d = Driver::new(Engine::new(policy(&[]), 7), true);
    d.hold_until_first_scan("no journal");
    // A listing asked for before the ports were known completes nothing.
    d.sessions_listed(d.topology_known(), true);
    assert!(!d.end_hold_if_scanned());
    assert!(!d.complete_first_scan(true, Instant(0)));
    assert!(d.topology_reported(), "the first report");
    assert!(!d.topology_reported(), "only the first");
    // A failed listing answers the scan (the engine is not left waiting on iscsiadm) but
    // shows no sessions: the hold stays.
    d.sessions_listed(d.topology_known(), false);
    assert!(!d.end_hold_if_scanned());
    assert!(d.complete_first_scan(true, Instant(1)));
    assert!(d.engine().scan_complete() && d.first_scan_done());
    assert!(!d.complete_first_scan(true, Instant(2)), "told once");
    d.sessions_listed(true, true);
    assert!(d.end_hold_if_scanned());
    assert_eq!(d.held_until_scan(), None);
}
