//! A thin rig around the production driver (and the engine it owns), to replay what the real kernel run (issue 9: Debian
//! 6.1, rdma_rxe on both ends of a veth pair, LIO iSER target) showed, input by input, in
//! virtual time. The inputs follow what the lab saw: the initiator `rxe_ini` (netdev ini0,
//! 192.0.2.1) and the target's `rxe_tgt` on the same host, target portal 192.0.2.2:3260,
//! iscsiadm iface `iser`, and a new SID on every re-login.

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use iser_guard::core::driver::{Driver, EffectId, EffectKind, EffectOutcome, Refusal};
use iser_guard::core::recovery::{
    Action, ActionId, ActionKind, Alert, DiskInfo, Engine, EngineSnapshot, Input, Observation,
    OperatorCommand, Origin, Outcome, Phase, Policy, PortId, Portal, ProbeResult, RecreateResult,
    ScanComplete, SessionInfo, SessionKey, SessionState, Transition, Trust,
};
use iser_guard::core::selftest::SelfTestResult;
use iser_guard::core::time::Instant;

/// The initiator device of the lab.
pub const INI: &str = "rxe_ini";
/// The target's device, on the same host in the lab.
pub const TGT: &str = "rxe_tgt";
/// The lab's target IQN.
pub const IQN: &str = "iqn.2003-01.org.linux-iscsi.tgt:lab";

/// The lab's portal.
pub fn portal() -> Portal {
    Portal::new(std::net::Ipv4Addr::new(192, 0, 2, 2), 3260)
}

/// The initiator port.
pub fn ini_port() -> PortId {
    PortId::new(INI, 1)
}

/// The session's identity (target + portal + iface).
pub fn key() -> SessionKey {
    SessionKey {
        target: IQN.to_string(),
        portal: portal(),
        iface: "iser".to_string(),
    }
}

/// One session line of `iscsiadm -m session -P 3`, placed on `rdma`.
pub fn session(sid: u32, state: SessionState, rdma: Option<PortId>) -> SessionInfo {
    let disk = if state == SessionState::LoggedIn {
        "running"
    } else {
        "transport-offline"
    };
    SessionInfo {
        sid,
        key: key(),
        transport: "iser".to_string(),
        netdev: Some("ini0".to_string()),
        local_ip: Some("192.0.2.1".to_string()),
        rdma,
        state,
        disks: vec![DiskInfo::new("sda", disk)],
        placed_by: None,
    }
}

/// The lab's policy: shipped defaults, `rxe_ini` allowed.
pub fn lab_policy() -> Policy {
    let mut p = Policy::default();
    p.allow.insert(INI.to_string());
    p
}

/// QP 1 of the initiator is stuck (the irdma line on E810; the QP table on rxe).
pub fn stuck() -> Observation {
    Observation::GsiQpState {
        device: INI.to_string(),
        port: 1,
        state: iser_guard::core::qp::QpState::Err,
    }
}

/// The initiator device as RDMA netlink first lists it.
pub fn appeared() -> Observation {
    Observation::DeviceAppeared {
        device: INI.to_string(),
        parent: None,
        driver: None,
        ports: 1,
    }
}

/// QP 1 of the initiator in RTS, as the QP table shows it.
pub fn rts() -> Observation {
    Observation::GsiQpState {
        device: INI.to_string(),
        port: 1,
        state: iser_guard::core::qp::QpState::Rts,
    }
}

/// The production driver (owning the engine), its clock, and everything it ran.
pub struct Rig {
    /// The driver, as the daemon and the simulator run it.
    pub d: Driver,
    /// Virtual now.
    pub now: Instant,
    /// Every action the driver ran, with when; each journal write appears as the engine's
    /// `PersistState` action (the effect it became).
    pub log: Vec<(Instant, Action)>,
    /// Every action the driver planned or refused instead of running, with why.
    pub plans: Vec<(Instant, Action, Refusal)>,
    /// The driver's effect id of each open action.
    pub effect_of: BTreeMap<ActionId, EffectId>,
    /// Every transition.
    pub transitions: Vec<Transition>,
    /// Actions whose outcome the test has not given yet, by id.
    pub open: BTreeMap<ActionId, Action>,
    /// Answers for the next port self-tests (answered at once; unavailable when empty).
    pub selftests: VecDeque<SelfTestResult>,
    /// Leave self-tests open like the other actions (the test answers them).
    pub hold_selftests: bool,
}

impl Rig {
    /// A fresh engine whose first scan is done (`session` placed on the initiator port).
    pub fn new(policy: Policy) -> Rig {
        Rig::with_first_scan(policy, Some(ini_port()))
    }

    /// A fresh engine whose first scan showed the session placed on `rdma` (or not placed).
    pub fn with_first_scan(policy: Policy, rdma: Option<PortId>) -> Rig {
        let mut r = Rig {
            d: Driver::new(Engine::new(policy, 7), true),
            now: Instant::ZERO,
            log: Vec::new(),
            plans: Vec::new(),
            effect_of: BTreeMap::new(),
            transitions: Vec::new(),
            open: BTreeMap::new(),
            selftests: VecDeque::new(),
            hold_selftests: false,
        };
        // RDMA netlink lists the device before its QP table (the engine makes no port for
        // a device topology never showed), then the session list comes.
        r.obs(appeared());
        r.sessions(vec![session(1, SessionState::LoggedIn, rdma)]);
        r.obs(rts());
        r.scan_done(true);
        r
    }

    /// A rig resumed from a journal snapshot at `now`; no scan yet.
    pub fn resumed(snap: EngineSnapshot, policy: Policy, now: Instant) -> Rig {
        let mut r = Rig {
            d: Driver::new(Engine::resume(snap, policy, now).expect("resumes"), true),
            now,
            log: Vec::new(),
            plans: Vec::new(),
            effect_of: BTreeMap::new(),
            transitions: Vec::new(),
            open: BTreeMap::new(),
            selftests: VecDeque::new(),
            hold_selftests: false,
        };
        r.drain();
        r
    }

    /// The engine inside the driver.
    pub fn e(&self) -> &Engine {
        self.d.engine()
    }

    /// Seconds since the start.
    pub fn secs(&self) -> f64 {
        self.now.as_millis() as f64 / 1000.0
    }

    /// Moves the clock to `t` seconds, firing every engine timer on the way.
    pub fn until(&mut self, t: f64) {
        let end = at_secs(t);
        while let Some(at) = self.d.next_timeout() {
            if at > end {
                break;
            }
            self.now = at.max(self.now);
            self.d.handle_timeout(self.now);
            self.drain();
        }
        self.now = end.max(self.now);
        self.d.handle_timeout(self.now);
        self.drain();
    }

    /// Feeds a session list.
    pub fn sessions(&mut self, list: Vec<SessionInfo>) {
        self.d.handle_sessions(list, self.now);
        self.drain();
    }

    /// Feeds a trusted observation.
    pub fn obs(&mut self, o: Observation) {
        self.d.handle_observation(o, Trust::Trusted, self.now);
        self.drain();
    }

    /// Feeds an untrusted (userspace) observation.
    pub fn forged(&mut self, o: Observation) {
        self.d.handle_observation(o, Trust::Untrusted, self.now);
        self.drain();
    }

    /// Reports a complete scan.
    pub fn scan_done(&mut self, qp_table: bool) {
        self.d.handle(
            Input::ScanComplete(ScanComplete {
                qp_table_available: qp_table,
            }),
            self.now,
        );
        self.drain();
    }

    /// An operator command.
    pub fn command(&mut self, c: OperatorCommand) -> Result<String, String> {
        let r = self
            .d
            .handle_command(c, self.now)
            .map(|(_, msg)| msg)
            .map_err(|e| e.to_string());
        self.drain();
        r
    }

    /// Drains the driver's effects and transitions into the logs; every journal write
    /// succeeds at once.
    pub fn drain(&mut self) {
        while let Some(effect) = self.d.poll_effect(self.now) {
            match effect.kind {
                EffectKind::WriteJournal { reason, .. } => {
                    self.log.push((
                        self.now,
                        Action {
                            id: ActionId::default(),
                            port: None,
                            device: None,
                            origin: Origin::Automatic,
                            reason: reason.clone(),
                            kind: ActionKind::PersistState { reason },
                        },
                    ));
                    self.d.handle_effect_outcome(
                        effect.id,
                        EffectOutcome::Journal(Ok(())),
                        self.now,
                    );
                }
                EffectKind::Run { action, .. }
                    if matches!(action.kind, ActionKind::SelfTestPort { .. })
                        && !self.hold_selftests =>
                {
                    // The lab's daemon had no verbs self-test: it answers at once, as the
                    // daemon's NoSelfTest does, unless the test scripted an answer.
                    let answer =
                        self.selftests
                            .pop_front()
                            .unwrap_or_else(|| SelfTestResult::Unavailable {
                                reason: "the lab run had no verbs self-test".into(),
                            });
                    self.log.push((self.now, action));
                    self.d.handle_effect_outcome(
                        effect.id,
                        EffectOutcome::Action(Outcome::SelfTest(answer)),
                        self.now,
                    );
                }
                EffectKind::Run { action, .. } => {
                    if action.kind.expects_outcome() {
                        self.open.insert(action.id, action.clone());
                        self.effect_of.insert(action.id, effect.id);
                    }
                    self.log.push((self.now, action));
                }
                EffectKind::Plan { action, refusal } => {
                    self.plans.push((self.now, action, refusal));
                }
            }
        }
        while let Some(t) = self.d.poll_transition() {
            self.transitions.push(t);
        }
    }

    fn outcome(&mut self, id: ActionId, o: Outcome) {
        match self.effect_of.remove(&id) {
            Some(effect) => {
                self.d
                    .handle_effect_outcome(effect, EffectOutcome::Action(o), self.now)
            }
            // Asked for before a restart: the resumed engine still knows the action.
            None => self.d.handle(Input::Outcome { id, outcome: o }, self.now),
        }
    }

    /// Answers every open probe with `result`.
    pub fn answer_probes(&mut self, result: ProbeResult) -> usize {
        let ids: Vec<ActionId> = self
            .open
            .values()
            .filter(|a| matches!(a.kind, ActionKind::ProbePortal { .. }))
            .map(|a| a.id)
            .collect();
        for id in &ids {
            self.open.remove(id);
            self.outcome(*id, Outcome::Probe(result));
            self.drain();
        }
        ids.len()
    }

    /// Answers the open action `id`.
    pub fn answer(&mut self, id: ActionId, o: Outcome) {
        self.open.remove(&id);
        self.outcome(id, o);
        self.drain();
    }

    /// Runs until `t`, answering every probe at once with `result` (one probe interval at a
    /// time, like the daemon's probe executor).
    pub fn probing_until(&mut self, t: f64, result: ProbeResult) {
        let end = at_secs(t);
        loop {
            self.answer_probes(result);
            match self.d.next_timeout() {
                Some(at) if at <= end => {
                    self.now = at.max(self.now);
                    self.d.handle_timeout(self.now);
                    self.drain();
                }
                _ => break,
            }
        }
        self.now = end.max(self.now);
        self.d.handle_timeout(self.now);
        self.drain();
        self.answer_probes(result);
    }

    /// The open re-creation, if any.
    pub fn open_recreate(&self) -> Option<ActionId> {
        self.open
            .values()
            .find(|a| matches!(a.kind, ActionKind::RecreateDevice { .. }))
            .map(|a| a.id)
    }

    /// Completes the open re-creation.
    pub fn recreated(&mut self) {
        let id = self.open_recreate().expect("a re-creation is open");
        self.answer(
            id,
            Outcome::Recreate(RecreateResult::Recreated {
                name: INI.to_string(),
                mode_restored: None,
                method: None,
                failed_before: Vec::new(),
            }),
        );
    }

    /// Actions of a kind.
    pub fn count(&self, f: impl Fn(&ActionKind) -> bool) -> usize {
        self.log.iter().filter(|(_, a)| f(&a.kind)).count()
    }

    /// Re-creations asked for.
    pub fn recreations(&self) -> usize {
        self.count(|k| matches!(k, ActionKind::RecreateDevice { .. }))
    }

    /// Logouts asked for.
    pub fn logouts(&self) -> usize {
        self.count(|k| matches!(k, ActionKind::IscsiLogout { .. }))
    }

    /// Journal writes asked for.
    pub fn persists(&self) -> usize {
        self.count(|k| matches!(k, ActionKind::PersistState { .. }))
    }

    /// Every alert.
    pub fn alerts(&self) -> Vec<&Alert> {
        self.log
            .iter()
            .filter_map(|(_, a)| match &a.kind {
                ActionKind::Alert(al) => Some(al),
                _ => None,
            })
            .collect()
    }

    /// Alerts whose summary or detail contains `needle`.
    pub fn alerts_with(&self, needle: &str) -> Vec<&Alert> {
        self.alerts()
            .into_iter()
            .filter(|a| a.summary.contains(needle) || a.detail.contains(needle))
            .collect()
    }

    /// The initiator port's phase.
    pub fn phase(&self) -> Phase {
        self.e().port(&ini_port()).map(|p| p.phase()).expect("port")
    }

    /// Destructive actions asked for (re-create, login, logout, rescan).
    pub fn destructive(&self) -> usize {
        self.count(ActionKind::is_destructive)
    }
}

/// `t` seconds after the start (tests use small, positive times).
#[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
pub fn at_secs(t: f64) -> Instant {
    Instant((t * 1000.0) as u64)
}

/// One second.
pub const SEC: Duration = Duration::from_secs(1);
