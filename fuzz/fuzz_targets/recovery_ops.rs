//! Applies a byte-decoded sequence of operations (observations trusted or forged, iscsiadm
//! snapshots, outcomes of pending actions, operator commands, time jumps) to the driver the
//! daemon runs (engine inside) and checks its invariants after each: no panic; never two
//! device re-creations in flight; never a destructive effect in dry-run, nor an automatic
//! one outside the allow-list or while paused, nor an operator one on a device its command
//! does not name; every destructive effect preceded by a journal write; a healthy port has every
//! remembered session logged in; a quarantined port never loses a session silently; no
//! timer stays due after `handle_timeout`.
#![no_main]

use std::collections::BTreeMap;

use iser_guard::core::driver::{Authority, Driver, EffectId, EffectKind, EffectOutcome};
use iser_guard::core::qp::QpState;
use iser_guard::core::recovery::{
    Action, ActionKind, DiskInfo, Engine, InFlightKind, IoErrorKind, IscsiadmOutcome,
    Observation, OperatorCommand, Origin, Outcome, Phase, Policy, PortId, Portal, ProbeResult,
    RecreateResult, SessionInfo, SessionKey, SessionState, StuckEvidence, Trust,
};
use iser_guard::core::time::Instant;
use libfuzzer_sys::fuzz_target;

const DEVICES: [&str; 3] = ["dev0", "dev1", "dev2"];

struct Bytes<'a>(&'a [u8]);

impl Bytes<'_> {
    fn next(&mut self) -> Option<u8> {
        let (b, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*b)
    }
}

fn session(i: usize, st: u8) -> SessionInfo {
    let state = match st % 4 {
        0 | 1 => SessionState::LoggedIn,
        2 => SessionState::Failed,
        _ => SessionState::Free,
    };
    SessionInfo {
        sid: u32::try_from(i).unwrap_or(0) + 1,
        key: SessionKey {
            target: format!("iqn.2003-01.org.example:t{}", i % 3),
            portal: Portal::new(if i % 2 == 0 { [10, 0, 0, 5] } else { [10, 0, 0, 6] }, 3260),
            iface: "iser".into(),
        },
        transport: "iser".into(),
        netdev: None,
        local_ip: None,
        rdma: Some(PortId::new(DEVICES[i % 3], 1 + u32::try_from(i / 3).unwrap_or(0))),
        placed_by: None,
        state,
        disks: vec![DiskInfo::new(
            format!("sd{i}"),
            if state == SessionState::LoggedIn { "running" } else { "blocked" },
        )],
    }
}

fn drain(d: &mut Driver, pending: &mut BTreeMap<EffectId, Action>, now: Instant) {
    let mut journaled = false;
    while let Some(effect) = d.poll_effect(now) {
        let (a, authority) = match effect.kind {
            EffectKind::WriteJournal { .. } => {
                journaled = true;
                d.handle_effect_outcome(effect.id, EffectOutcome::Journal(Ok(())), now);
                continue;
            }
            EffectKind::Plan { .. } => continue,
            EffectKind::Run { action, authority } => (action, authority),
        };
        if a.kind.is_destructive() {
            let e = d.engine();
            let dev = a.device.as_deref().unwrap_or("");
            assert!(journaled, "destructive action before its journal write: {a}");
            assert!(!e.policy().dry_run, "dry-run acted: {a}");
            match &authority {
                Authority::AllowList { .. } => {
                    assert!(e.policy().allows(dev), "{a}");
                    assert!(!e.is_paused(), "acted while paused: {a}");
                }
                Authority::Operator { device, .. } => {
                    assert_eq!(a.origin, Origin::Operator, "{a}");
                    assert_eq!(device, dev, "{a}");
                }
                Authority::Harmless => panic!("destructive {a} authorised as harmless"),
            }
        }
        if a.kind.expects_outcome() {
            pending.insert(effect.id, a);
        }
    }
    while d.poll_transition().is_some() {}
    let e = d.engine();
    let snap = e.snapshot();
    let recreating = snap
        .inflight
        .iter()
        .filter(|i| matches!(i.kind, InFlightKind::Recreate(_)))
        .count();
    assert!(recreating <= 1, "{recreating} re-creations in flight");
    for p in e.ports() {
        for k in &p.sessions {
            let s = e.sessions().find(|s| &s.key == k).expect("listed session is known");
            if p.phase() == Phase::Healthy {
                assert!(s.is_up(), "{k} down on healthy {}", p.id);
            }
            if p.phase() == Phase::Quarantined {
                assert!(s.is_healthy() || s.reported, "{k} lost silently");
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut b = Bytes(data);
    let flags = b.next().unwrap_or(0);
    let mut policy = Policy::default();
    policy.allow.insert("dev0".into());
    policy.allow.insert("dev1".into());
    policy.dry_run = flags & 1 != 0;
    policy.trust_userspace = flags & 2 != 0;
    let mut e = Driver::new(Engine::new(policy, u64::from(flags)), true);
    let mut pending: BTreeMap<EffectId, Action> = BTreeMap::new();
    let mut now = Instant(1);
    while let Some(tag) = b.next() {
        let x = b.next().unwrap_or(0);
        let dev = DEVICES[usize::from(x) % 3].to_string();
        let trust = if x & 0x80 != 0 { Trust::Untrusted } else { Trust::Trusted };
        match tag % 13 {
            0 => e.handle_observation(
                Observation::GsiQpStuck {
                    device: dev,
                    port: if x & 4 != 0 { Some(1 + u32::from(x & 1)) } else { None },
                    evidence: StuckEvidence::ModifyQpInvalid,
                },
                trust,
                now,
            ),
            1 => e.handle_observation(
                Observation::GsiQpState {
                    device: dev,
                    port: 1 + u32::from(x & 1),
                    state: if x & 8 != 0 { QpState::Err } else { QpState::Rts },
                },
                Trust::Trusted,
                now,
            ),
            2 => e.handle_observation(Observation::DeviceGone { device: dev }, Trust::Trusted, now),
            3 => e.handle_observation(
                Observation::DeviceAppeared { device: dev, parent: None, driver: None, ports: 2 },
                Trust::Trusted,
                now,
            ),
            4 => e.handle_observation(
                Observation::ConnError { sid: u32::from(x % 8), code: 1011 },
                trust,
                now,
            ),
            5 => e.handle_observation(
                Observation::SessionRecoveryTimedOut { sid: u32::from(x % 8) },
                trust,
                now,
            ),
            6 => e.handle_observation(
                Observation::IoError {
                    disk: format!("sd{}", x % 6),
                    kind: match x % 3 {
                        0 => IoErrorKind::DidAbort,
                        1 => IoErrorKind::IoError,
                        _ => IoErrorKind::Offline,
                    },
                },
                trust,
                now,
            ),
            7 => e.handle_observation(Observation::CmRejectedInvalidServiceId, trust, now),
            8 => {
                let list = (0..6)
                    .filter(|i| (x >> i) & 1 == 1)
                    .map(|i| session(i, b.next().unwrap_or(0)))
                    .collect();
                e.handle_sessions(list, now)
            }
            9 => {
                if !pending.is_empty() {
                    let idx = usize::from(x) % pending.len();
                    if let Some(id) = pending.keys().nth(idx).copied() {
                        if let Some(a) = pending.remove(&id) {
                            let v = b.next().unwrap_or(0);
                            let outcome = match &a.kind {
                                ActionKind::ProbePortal { .. } => Outcome::Probe(if v % 3 == 2 {
                                    ProbeResult::Unreachable
                                } else {
                                    ProbeResult::Reachable
                                }),
                                ActionKind::RecreateDevice { device, .. } => match v % 4 {
                                    0 | 1 => Outcome::Recreate(RecreateResult::Recreated {
                                        name: device.clone(),
                                        mode_restored: None,
                                        method: None,
                                        failed_before: Vec::new(),
                                    }),
                                    2 => Outcome::Recreate(RecreateResult::Failed { reason: "x".into() }),
                                    _ => Outcome::NotRun { reason: "journal".into() },
                                },
                                _ => Outcome::Iscsiadm(IscsiadmOutcome::from_exit_code(
                                    [0, 15, 21, 8, 24, 5][usize::from(v) % 6],
                                    "",
                                )),
                            };
                            e.handle_effect_outcome(id, EffectOutcome::Action(outcome), now);
                        }
                    }
                }
            }
            10 => {
                let cmd = match x % 5 {
                    0 => OperatorCommand::Pause,
                    1 => OperatorCommand::Resume,
                    2 => OperatorCommand::Recover { device: dev, port: Some(1) },
                    3 => OperatorCommand::ResetDevice { device: dev },
                    _ => OperatorCommand::Reconnect { target: None, portal: None },
                };
                let _ = e.handle_command(cmd, now);
            }
            11 => e.handle_observation(Observation::CmAddrError { status: -19 }, trust, now),
            _ => {
                let step = u64::from(x) * u64::from(x) * 40 + 1;
                let end = Instant(now.0 + step);
                for _ in 0..1000 {
                    match e.next_timeout() {
                        Some(t) if t <= end => {
                            let t = t.max(now);
                            e.handle_timeout(t);
                            drain(&mut e, &mut pending, t);
                            assert!(e.next_timeout().is_none_or(|n| n > t), "timer livelock at {t}");
                        }
                        _ => break,
                    }
                }
                now = end;
                e.handle_timeout(now);
            }
        }
        drain(&mut e, &mut pending, now);
    }
});
