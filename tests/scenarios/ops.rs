//! Random operation sequences against the pure engine, for the invariant proptest (quinn's
//! `streams` fuzz target style: an `Operation` enum applied in order).

use std::collections::BTreeMap;
use std::time::Duration;

use iser_guard::config::OtherSessions;
use iser_guard::core::driver::{Authority, Driver, EffectId, EffectKind, EffectOutcome};
use iser_guard::core::qp::QpState;
use iser_guard::core::recovery::{
    Action, ActionKind, DiskInfo, Engine, IoErrorKind, IscsiadmOutcome, Observation,
    OperatorCommand, Origin, Outcome, Phase, Policy, PortId, Portal, ProbeResult, RecreateResult,
    SessionInfo, SessionKey, SessionState, StuckEvidence, Trust,
};
use iser_guard::core::time::Instant;
use proptest::prelude::*;

/// Devices of the random host; the last one is not in the allow-list.
pub const DEVICES: [&str; 3] = ["dev0", "dev1", "dev2"];

/// One operation.
#[derive(Debug, Clone)]
pub enum Op {
    Stuck {
        dev: usize,
        port: Option<u32>,
        trusted: bool,
    },
    QpState {
        dev: usize,
        port: u32,
        err: bool,
    },
    Gone(usize),
    Appeared(usize),
    ConnError(u32),
    RecoveryTimeout(u32),
    Io {
        disk: usize,
        kind: u8,
    },
    CmRejected,
    CmAddrError,
    /// A device's async event (the verbs listener): DEVICE_FATAL, PORT_ERR, PORT_ACTIVE,
    /// GID_CHANGE or a QP event.
    Async {
        dev: usize,
        port: u32,
        kind: u8,
    },
    Sessions(Vec<(u8, bool)>),
    Outcome {
        pick: usize,
        variant: u8,
    },
    Command(u8, usize),
    Advance(u64),
}

pub fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0..3usize, prop::option::of(1..3u32), any::<bool>())
            .prop_map(|(dev, port, trusted)| Op::Stuck { dev, port, trusted }),
        (0..3usize, 1..3u32, any::<bool>()).prop_map(|(dev, port, err)| Op::QpState {
            dev,
            port,
            err
        }),
        (0..3usize).prop_map(Op::Gone),
        (0..3usize).prop_map(Op::Appeared),
        (1..8u32).prop_map(Op::ConnError),
        (1..8u32).prop_map(Op::RecoveryTimeout),
        (0..6usize, 0..3u8).prop_map(|(disk, kind)| Op::Io { disk, kind }),
        Just(Op::CmRejected),
        Just(Op::CmAddrError),
        (0..3usize, 1..3u32, 0..5u8).prop_map(|(dev, port, kind)| Op::Async { dev, port, kind }),
        prop::collection::vec((0..4u8, any::<bool>()), 6).prop_map(Op::Sessions),
        (0..16usize, 0..6u8).prop_map(|(pick, variant)| Op::Outcome { pick, variant }),
        (0..5u8, 0..3usize).prop_map(|(c, d)| Op::Command(c, d)),
        prop_oneof![1..2_000u64, 2_000..60_000u64, 60_000..400_000u64].prop_map(Op::Advance),
    ]
}

fn session(i: usize) -> (SessionKey, PortId, String) {
    let portal = Portal::new(
        if i % 2 == 0 {
            [10, 0, 0, 5]
        } else {
            [10, 0, 0, 6]
        },
        3260,
    );
    let key = SessionKey {
        target: format!("iqn.2003-01.org.example:t{}", i % 3),
        portal,
        iface: "iser".into(),
    };
    let port = PortId::new(DEVICES[i % 3], 1 + u32::try_from(i / 3).unwrap_or(0));
    (
        key,
        port,
        format!("sd{}", (b'a' + u8::try_from(i).unwrap_or(0)) as char),
    )
}

/// The world the driver (and its engine) lives in, and the invariants checked after every
/// operation.
pub struct World {
    pub driver: Driver,
    pub now: Instant,
    pending: BTreeMap<EffectId, Action>,
    pub actions: usize,
}

impl World {
    pub fn new(seed: u64, proceed: bool, dry_run: bool) -> Self {
        let mut p = Policy::default();
        p.allow.insert("dev0".into());
        p.allow.insert("dev1".into());
        p.dry_run = dry_run;
        if proceed {
            p.other_sessions = OtherSessions::Proceed;
        }
        p.iscsid_grace = Duration::from_secs(5);
        let mut engine = Engine::new(p, seed);
        engine.handle_scan_complete(
            iser_guard::core::recovery::ScanComplete {
                qp_table_available: true,
            },
            Instant(1),
        );
        World {
            driver: Driver::new(engine, true),
            now: Instant(1),
            pending: BTreeMap::new(),
            actions: 0,
        }
    }

    pub fn apply(&mut self, op: Op) {
        let now = self.now;
        let e = &mut self.driver;
        match op {
            Op::Stuck { dev, port, trusted } => e.handle_observation(
                Observation::GsiQpStuck {
                    device: DEVICES[dev].into(),
                    port,
                    evidence: StuckEvidence::ModifyQpInvalid,
                },
                if trusted {
                    Trust::Trusted
                } else {
                    Trust::Untrusted
                },
                now,
            ),
            Op::QpState { dev, port, err } => e.handle_observation(
                Observation::GsiQpState {
                    device: DEVICES[dev].into(),
                    port,
                    state: if err { QpState::Err } else { QpState::Rts },
                },
                Trust::Trusted,
                now,
            ),
            Op::Gone(d) => e.handle_observation(
                Observation::DeviceGone {
                    device: DEVICES[d].into(),
                },
                Trust::Trusted,
                now,
            ),
            Op::Appeared(d) => e.handle_observation(
                Observation::DeviceAppeared {
                    device: DEVICES[d].into(),
                    parent: None,
                    driver: None,
                    ports: 2,
                },
                Trust::Trusted,
                now,
            ),
            Op::ConnError(sid) => e.handle_observation(
                Observation::ConnError { sid, code: 1011 },
                Trust::Trusted,
                now,
            ),
            Op::RecoveryTimeout(sid) => e.handle_observation(
                Observation::SessionRecoveryTimedOut { sid },
                Trust::Trusted,
                now,
            ),
            Op::Io { disk, kind } => {
                let (_, _, name) = session(disk);
                let kind = match kind {
                    0 => IoErrorKind::DidAbort,
                    1 => IoErrorKind::IoError,
                    _ => IoErrorKind::Offline,
                };
                e.handle_observation(
                    Observation::IoError { disk: name, kind },
                    Trust::Trusted,
                    now,
                )
            }
            Op::CmRejected => {
                e.handle_observation(Observation::CmRejectedInvalidServiceId, Trust::Trusted, now)
            }
            Op::CmAddrError => e.handle_observation(
                Observation::CmAddrError { status: -19 },
                Trust::Trusted,
                now,
            ),
            Op::Async { dev, port, kind } => {
                use iser_guard::core::selftest::{AsyncEvent, AsyncEventKind};
                let (kind, port) = match kind {
                    0 => (AsyncEventKind::DeviceFatal, None),
                    1 => (AsyncEventKind::PortErr, Some(port)),
                    2 => (AsyncEventKind::PortActive, Some(port)),
                    3 => (AsyncEventKind::GidChange, Some(port)),
                    _ => (AsyncEventKind::QpFatal, None),
                };
                e.handle_observation(
                    Observation::AsyncEvent(AsyncEvent {
                        device: DEVICES[dev].to_string(),
                        port,
                        kind,
                    }),
                    Trust::Trusted,
                    now,
                )
            }
            Op::Sessions(states) => {
                let list = states
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, present))| *present)
                    .map(|(i, (st, _))| {
                        let (key, port, disk) = session(i);
                        let state = match st {
                            0 | 1 => SessionState::LoggedIn,
                            2 => SessionState::Failed,
                            _ => SessionState::Free,
                        };
                        let dstate = if state == SessionState::LoggedIn {
                            "running"
                        } else {
                            "blocked"
                        };
                        SessionInfo {
                            sid: u32::try_from(i).unwrap_or(0) + 1,
                            key,
                            transport: "iser".into(),
                            netdev: None,
                            local_ip: None,
                            rdma: Some(port),
                            placed_by: None,
                            state,
                            disks: vec![DiskInfo::new(disk, dstate)],
                        }
                    })
                    .collect();
                e.handle_sessions(list, now)
            }
            Op::Outcome { pick, variant } => {
                if self.pending.is_empty() {
                    return self.drain();
                }
                let idx = pick % self.pending.len();
                let Some(id) = self.pending.keys().nth(idx).copied() else {
                    return self.drain();
                };
                let Some(a) = self.pending.remove(&id) else {
                    return self.drain();
                };
                let outcome = match &a.kind {
                    ActionKind::ProbePortal { .. } => Outcome::Probe(match variant % 3 {
                        0 | 1 => ProbeResult::Reachable,
                        _ => ProbeResult::Unreachable,
                    }),
                    ActionKind::RecreateDevice { device, .. } => match variant % 4 {
                        0 | 1 => Outcome::Recreate(RecreateResult::Recreated {
                            name: device.clone(),
                            mode_restored: None,
                            method: None,
                            failed_before: Vec::new(),
                        }),
                        2 => Outcome::Recreate(RecreateResult::Failed {
                            reason: "busy".into(),
                        }),
                        _ => Outcome::NotRun {
                            reason: "journal".into(),
                        },
                    },
                    ActionKind::SelfTestPort { device, port, .. } => {
                        use iser_guard::core::selftest::{
                            SelfTestReport, SelfTestResult, SelfTestStep,
                        };
                        Outcome::SelfTest(match variant % 3 {
                            2 => SelfTestResult::Unavailable {
                                reason: "no verbs".into(),
                            },
                            v => SelfTestResult::Ran(SelfTestReport {
                                device: device.clone(),
                                port: *port,
                                steps: vec![SelfTestStep {
                                    name: "cm-connect".into(),
                                    took: std::time::Duration::from_millis(5),
                                    ok: v == 0,
                                    detail: "ETIMEDOUT".into(),
                                }],
                            }),
                        })
                    }
                    _ => Outcome::Iscsiadm(match variant {
                        0 | 1 => IscsiadmOutcome::Success,
                        2 => IscsiadmOutcome::AlreadyLoggedIn,
                        3 => IscsiadmOutcome::Timeout,
                        4 => IscsiadmOutcome::NotFound,
                        _ => IscsiadmOutcome::from_exit_code(24, "auth"),
                    }),
                };
                e.handle_effect_outcome(id, EffectOutcome::Action(outcome), now)
            }
            Op::Command(c, d) => {
                let device = DEVICES[d].to_string();
                let cmd = match c {
                    0 => OperatorCommand::Pause,
                    1 => OperatorCommand::Resume,
                    2 => OperatorCommand::Recover {
                        device,
                        port: Some(1),
                    },
                    3 => OperatorCommand::ResetDevice { device },
                    _ => OperatorCommand::Reconnect {
                        target: None,
                        portal: None,
                    },
                };
                let _ = e.handle_command(cmd, now);
            }
            Op::Advance(ms) => {
                self.now = Instant(now.0 + ms);
                // Fire every timer due on the way, as the daemon would.
                for _ in 0..10_000 {
                    match self.driver.next_timeout() {
                        Some(t) if t <= self.now => {
                            self.driver.handle_timeout(t.max(now));
                            self.drain();
                            let after = self.driver.next_timeout();
                            assert!(
                                after.is_none_or(|a| a > t.max(now)),
                                "timer at {t} still due after handle_timeout: livelock"
                            );
                        }
                        _ => break,
                    }
                }
                self.driver.handle_timeout(self.now);
            }
        }
        self.drain();
    }

    /// Drains the driver's effects and checks the per-batch invariants.
    fn drain(&mut self) {
        let mut journaled = false;
        let now = self.now;
        while let Some(effect) = self.driver.poll_effect(now) {
            let (a, authority) = match effect.kind {
                EffectKind::WriteJournal { .. } => {
                    journaled = true;
                    self.driver.handle_effect_outcome(
                        effect.id,
                        EffectOutcome::Journal(Ok(())),
                        now,
                    );
                    continue;
                }
                EffectKind::Plan { .. } => continue,
                EffectKind::Run { action, authority } => (action, authority),
            };
            self.actions += 1;
            if a.kind.is_destructive() {
                assert!(
                    journaled,
                    "destructive action without a journal write before it: {a}"
                );
                let policy = self.driver.engine().policy();
                assert!(!policy.dry_run, "dry-run acted: {a}");
                let dev = a.device.as_deref().unwrap_or("");
                match &authority {
                    Authority::AllowList { entry } => {
                        assert_eq!(entry, dev);
                        assert!(policy.allows(dev), "{a} outside the allow-list");
                        assert!(!self.driver.engine().is_paused(), "acted while paused: {a}");
                    }
                    Authority::Operator { device, .. } => {
                        assert_eq!(a.origin, Origin::Operator);
                        assert_eq!(device, dev, "operator grant used on another device");
                    }
                    Authority::Harmless => panic!("destructive {a} authorised as harmless"),
                }
            }
            if let ActionKind::RecreateDevice { device, .. } = &a.kind {
                let open = self
                    .pending
                    .values()
                    .filter(|p| matches!(&p.kind, ActionKind::RecreateDevice { device: d, .. } if d == device))
                    .count();
                let snap = self.driver.engine().snapshot();
                let inflight = snap
                    .inflight
                    .iter()
                    .filter(|i| {
                        matches!(
                            i.kind,
                            iser_guard::core::recovery::InFlightKind::Recreate(_)
                        )
                    })
                    .count();
                assert!(
                    inflight <= 1,
                    "{inflight} re-creations in flight on the host"
                );
                // An earlier re-creation of this device that the engine still counts as in
                // flight must not coexist with a new one.
                let _ = open;
            }
            if a.kind.expects_outcome() {
                self.pending.insert(effect.id, a.clone());
            }
        }
        while self.driver.poll_transition().is_some() {}
        self.check_state();
    }

    fn check_state(&self) {
        let engine = self.driver.engine();
        let snap = engine.snapshot();
        let recreating: Vec<_> = snap
            .inflight
            .iter()
            .filter(|i| {
                matches!(
                    i.kind,
                    iser_guard::core::recovery::InFlightKind::Recreate(_)
                )
            })
            .collect();
        assert!(
            recreating.len() <= 1,
            "two re-creations in flight: {recreating:?}"
        );
        for p in engine.ports() {
            for k in &p.sessions {
                let Some(s) = engine.sessions().find(|s| &s.key == k) else {
                    panic!("port {} lists unknown session {k}", p.id);
                };
                assert_eq!(s.port, p.id, "session {k} listed on the wrong port");
                if p.phase() == Phase::Healthy {
                    assert!(s.is_up(), "{k} down on healthy port {}", p.id);
                }
                if p.phase() == Phase::Quarantined {
                    assert!(
                        s.is_healthy() || s.reported,
                        "{k} lost silently on {}",
                        p.id
                    );
                }
            }
        }
    }
}
