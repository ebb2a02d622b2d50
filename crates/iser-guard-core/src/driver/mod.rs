//! The sans-IO driver: the one path from the engine's decisions to the host, shared by the
//! daemon, the standalone manual commands and the simulator.
//!
//! [`Driver`] owns the [`Engine`]. It takes the engine's actions in order and, for each one,
//! decides **once** whether it may run and what allowed it ([`Authority`]): dry-run, pause,
//! `devices.allow` and the operator's command are decided here and nowhere else. It puts a
//! journal write ([`EffectKind::WriteJournal`]) before every destructive action and holds
//! the destructive effect back until that write is reported done; it turns dry-run and
//! refusals into [`EffectKind::Plan`] and tells the engine [`Outcome::Planned`] (neither
//! success nor failure); everything else becomes [`EffectKind::Run`] for executors that
//! only execute. No I/O, no clock: time comes in as `now`.
//!
//! # Call order
//!
//! The caller (daemon loop, simulator harness) loops:
//!
//! 1. feed every input that arrived, each with the current time: [`Driver::handle_observation`],
//!    [`Driver::handle_sessions`], [`Driver::handle_command`], [`Driver::set_policy`], and
//!    [`Driver::handle_effect_outcome`] for an effect that finished; report the topology and
//!    each session listing to the first-scan rule ([`Driver::topology_reported`],
//!    [`Driver::sessions_listed`]), then call [`Driver::end_hold_if_scanned`] and
//!    [`Driver::complete_first_scan`];
//! 2. when [`Driver::next_timeout`] is due, call [`Driver::handle_timeout`];
//! 3. drain [`Driver::poll_effect`] and start each effect **in the order given** (a
//!    `WriteJournal` must be completed and reported before the driver gives out what follows
//!    it; `poll_effect` returns `None` meanwhile);
//! 4. drain [`Driver::poll_transition`] into the log (this also ends operator grants);
//! 5. sleep until `next_timeout()`, the next input or the next effect outcome.

mod command;
mod effect;
mod scan;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, VecDeque};

use crate::recovery::PortId;

pub use command::{
    settled, words, CommandPlan, MethodSteps, PlanStep, RecreateMethods, Verdict,
    OPERATOR_DEADLINE, REPLY_TIMEOUT,
};
pub use effect::{Authority, CommandId, Effect, EffectId, EffectKind, EffectOutcome, Refusal};

use crate::recovery::{
    Action, ActionId, CommandError, Engine, Input, Observation, OperatorCommand, Origin, Outcome,
    Policy, SessionInfo, Transition, Trust,
};
use crate::time::Instant;

/// An operator command's permission to touch one device, while its episode lasts.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Grant {
    command: CommandId,
    device: String,
}

/// A journal write handed out and not yet reported.
#[derive(Debug, Clone, PartialEq, Eq)]
struct PendingJournal {
    effect: EffectId,
    /// The engine's `PersistState` action it answers, if it came from one.
    action: Option<ActionId>,
    /// The input epoch of the snapshot.
    epoch: u64,
}

/// Counters for the operator and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DriverStats {
    /// Journal writes handed out.
    pub journal_writes: u64,
    /// Destructive effects handed out.
    pub destructive_run: u64,
    /// Destructive actions planned or refused instead of run.
    pub planned: u64,
    /// Outcomes for unknown effects (ignored).
    pub stale_outcomes: u64,
}

/// The engine plus the one authorisation and write-ahead path. See the module doc for the
/// call order.
#[derive(Debug, Clone)]
pub struct Driver {
    engine: Engine,
    /// Run automatic destructive actions (the daemon); `false` for the standalone manual
    /// commands, which leave them to the daemon.
    automatic_actions: bool,
    next_effect: u64,
    next_command: u64,
    ready: VecDeque<Effect>,
    /// Actions taken from the engine while a journal write is pending, with their epoch.
    blocked: VecDeque<(Action, u64)>,
    journal_pending: Option<PendingJournal>,
    /// Epoch of the last journal write reported done.
    journaled_epoch: Option<u64>,
    /// Counts engine inputs: a snapshot covers the actions queued at or before its epoch.
    epoch: u64,
    /// Set by a failed journal write: the destructive actions still queued are not run.
    journal_failed: Option<String>,
    /// Effects that expect an action outcome.
    outstanding: BTreeMap<EffectId, ActionId>,
    /// The port of each of those effects (an operator command is not finished while one of
    /// its ports has one in flight).
    in_flight_ports: BTreeMap<EffectId, Option<PortId>>,
    /// Operator commands awaiting their verdict.
    running: Vec<command::Running>,
    /// How many ports each device has, as the topology last reported it.
    device_ports: BTreeMap<String, u32>,
    grants: Vec<Grant>,
    /// Safe mode: automatic destructive actions are refused until
    /// [`Driver::first_scan_complete`]; the reason, in words.
    held_until_scan: Option<String>,
    /// What the first scan after start has seen (see scan.rs).
    scan: scan::FirstScan,
    stats: DriverStats,
}

impl Driver {
    /// A driver around `engine`. `automatic_actions`: see [`Driver::automatic_actions`].
    pub fn new(engine: Engine, automatic_actions: bool) -> Self {
        Driver {
            engine,
            automatic_actions,
            next_effect: 0,
            next_command: 0,
            ready: VecDeque::new(),
            blocked: VecDeque::new(),
            journal_pending: None,
            journaled_epoch: None,
            epoch: 0,
            journal_failed: None,
            outstanding: BTreeMap::new(),
            in_flight_ports: BTreeMap::new(),
            running: Vec::new(),
            device_ports: BTreeMap::new(),
            grants: Vec::new(),
            held_until_scan: None,
            scan: scan::FirstScan::default(),
            stats: DriverStats::default(),
        }
    }

    /// The engine (read-only: every input goes through the driver).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// Gives the engine back (e.g. to restart it from its journal in the simulator).
    pub fn into_engine(self) -> Engine {
        self.engine
    }

    /// Whether automatic destructive actions run (the daemon) or are left to the daemon (a
    /// standalone manual command).
    pub fn automatic_actions(&self) -> bool {
        self.automatic_actions
    }

    /// Safe mode: refuse every automatic destructive action ([`Refusal::SafeMode`]) until
    /// [`Driver::first_scan_complete`]. The daemon calls this when it started without a
    /// usable journal: until devices and sessions have been seen once, what the engine
    /// believes is not known to be true. Operator commands still run.
    pub fn hold_until_first_scan(&mut self, reason: impl Into<String>) {
        self.held_until_scan = Some(reason.into());
    }

    /// The first complete scan is done: ends [`Driver::hold_until_first_scan`].
    pub(crate) fn first_scan_complete(&mut self) {
        self.held_until_scan = None;
    }

    /// Why automatic destructive actions are held until the first scan, if they are.
    pub fn held_until_scan(&self) -> Option<&str> {
        self.held_until_scan.as_deref()
    }

    /// Counters.
    pub fn stats(&self) -> &DriverStats {
        &self.stats
    }

    /// The devices live operator commands name, with their command.
    pub fn grants(&self) -> impl Iterator<Item = (CommandId, &str)> {
        self.grants.iter().map(|g| (g.command, g.device.as_str()))
    }

    /// When [`Driver::handle_timeout`] is next due.
    pub fn next_timeout(&self) -> Option<Instant> {
        let deadline = self.running.iter().map(|r| r.deadline).min();
        match (self.engine.next_timeout(), deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn input(&mut self) {
        self.epoch += 1;
        self.journal_failed = None;
    }

    /// A kernel-log or RDMA-netlink observation.
    pub fn handle_observation(&mut self, obs: Observation, trust: Trust, now: Instant) {
        self.input();
        if let (Observation::DeviceAppeared { device, ports, .. }, Trust::Trusted) = (&obs, trust) {
            self.device_ports.insert(device.clone(), *ports);
        }
        self.engine.handle_observation(obs, trust, now);
    }

    /// A full iscsiadm session snapshot.
    pub fn handle_sessions(&mut self, list: Vec<SessionInfo>, now: Instant) {
        self.input();
        self.engine.handle_sessions(list, now);
    }

    /// Time passed.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.input();
        self.engine.handle_timeout(now);
    }

    /// A configuration reload.
    pub fn set_policy(&mut self, policy: Policy, now: Instant) {
        self.input();
        self.engine.set_policy(policy, now);
    }

    /// Any input (the simulator queues them): commands go through
    /// [`Driver::handle_command`] (their result is dropped), outcomes straight to the engine.
    pub fn handle(&mut self, input: Input, now: Instant) {
        match input {
            Input::Command(cmd) => {
                let _ = self.handle_command(cmd, now);
            }
            other => {
                self.input();
                self.engine.handle(other, now);
            }
        }
    }

    /// An operator command. On success the command's id (which authorises the destructive
    /// actions of its episode on the devices it names) and what will happen, in words.
    pub fn handle_command(
        &mut self,
        cmd: OperatorCommand,
        now: Instant,
    ) -> Result<(CommandId, String), CommandError> {
        self.input();
        let devices: Vec<String> = match &cmd {
            OperatorCommand::Recover { device, .. } | OperatorCommand::ResetDevice { device } => {
                vec![device.clone()]
            }
            OperatorCommand::Reconnect { target, portal } => {
                let mut d: Vec<String> = self
                    .engine
                    .sessions()
                    .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
                    .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
                    .map(|s| s.port.device.clone())
                    .collect();
                // Live sessions iscsiadm lists on no RDMA port are reconnected too (the
                // engine's actions for them name no device): the grant for "" covers them.
                d.push(String::new());
                d.sort();
                d.dedup();
                d
            }
            OperatorCommand::Pause | OperatorCommand::Resume => Vec::new(),
        };
        let msg = self.engine.handle_command(cmd, now)?;
        self.next_command += 1;
        let command = CommandId(self.next_command);
        for device in devices {
            self.grants.retain(|g| g.device != device);
            self.grants.push(Grant { command, device });
        }
        Ok((command, msg))
    }

    /// The blocked step of `device`'s re-creation returned (an executor reported
    /// [`crate::recovery::RecreateResult::Blocked`] earlier): `result` is the re-creation's
    /// final result, `None` when it ended unseen (a restarted daemon found its task gone).
    /// See [`Engine::handle_recreation_returned`].
    pub fn handle_recreation_returned(
        &mut self,
        device: &str,
        result: Option<crate::recovery::RecreateResult>,
        now: Instant,
    ) {
        self.input();
        self.engine.handle_recreation_returned(device, result, now);
    }

    /// The outcome of an effect handed out by [`Driver::poll_effect`].
    pub fn handle_effect_outcome(&mut self, id: EffectId, outcome: EffectOutcome, now: Instant) {
        if let Some(p) = self.journal_pending.clone().filter(|p| p.effect == id) {
            self.journal_pending = None;
            match outcome {
                EffectOutcome::Journal(Ok(())) => self.journaled_epoch = Some(p.epoch),
                EffectOutcome::Journal(Err(reason))
                | EffectOutcome::Action(Outcome::PersistFailed { reason }) => {
                    self.fail_journal(p.action, reason, now)
                }
                EffectOutcome::Action(other) => self.fail_journal(
                    p.action,
                    format!("unexpected outcome for a journal write ({other})"),
                    now,
                ),
            }
            return;
        }
        self.in_flight_ports.remove(&id);
        let Some(action) = self.outstanding.remove(&id) else {
            self.stats.stale_outcomes += 1;
            return;
        };
        let outcome = match outcome {
            EffectOutcome::Action(o) => o,
            EffectOutcome::Journal(r) => Outcome::NotRun {
                reason: format!(
                    "the executor answered a journal result ({}) for an action",
                    match r {
                        Ok(()) => "written".to_string(),
                        Err(e) => e,
                    }
                ),
            },
        };
        self.epoch += 1;
        self.engine.handle_outcome(action, outcome, now);
    }

    fn fail_journal(&mut self, action: Option<ActionId>, reason: String, now: Instant) {
        self.epoch += 1;
        self.engine.handle_outcome(
            action.unwrap_or_default(),
            Outcome::PersistFailed {
                reason: reason.clone(),
            },
            now,
        );
        self.journal_failed = Some(reason);
        // The destructive actions of this batch are not run; the rest goes on in order.
        while self.journal_pending.is_none() {
            let Some((a, epoch)) = self.blocked.pop_front() else {
                break;
            };
            self.route(a, epoch, now);
        }
    }

    /// The next effect to start, in order; `None` when there is none or a journal write is
    /// still pending.
    pub fn poll_effect(&mut self, now: Instant) -> Option<Effect> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            if self.journal_pending.is_some() {
                return None;
            }
            let (action, epoch) = match self.blocked.pop_front() {
                Some(b) => b,
                None => {
                    let a = self.engine.poll_action()?;
                    (a, self.epoch)
                }
            };
            self.route(action, epoch, now);
        }
    }

    /// The engine's next transition (for the log). Ends the grant of an operator command
    /// once every port of its device has settled (healthy or quarantined).
    pub fn poll_transition(&mut self) -> Option<Transition> {
        let t = self.engine.poll_transition()?;
        if settled(Some(t.to)) {
            let engine = &self.engine;
            // A grant for sessions on no RDMA port ("") has no port to settle: it lasts
            // until the next reconnect replaces it, and only ever covers operator-origin
            // iSCSI actions, which the engine emits for operator commands alone.
            self.grants.retain(|g| {
                g.device.is_empty()
                    || !engine
                        .ports()
                        .filter(|p| p.id.device == g.device)
                        .all(|p| settled(Some(p.phase())))
            });
        }
        Some(t)
    }

    fn effect(&mut self, kind: EffectKind) -> Effect {
        self.next_effect += 1;
        Effect {
            id: EffectId(self.next_effect),
            kind,
        }
    }

    /// Decides what allows a destructive action, or why it may not run. The only place
    /// dry-run, pause, the allow-list and the operator's command are decided.
    pub fn authorise(&self, action: &Action) -> Result<Authority, Refusal> {
        if !action.kind.is_destructive() {
            return Ok(Authority::Harmless);
        }
        let policy = self.engine.policy();
        let device = action
            .device
            .clone()
            .or_else(|| action.port.as_ref().map(|p| p.device.clone()))
            .unwrap_or_default();
        if policy.dry_run {
            return Err(Refusal::DryRun);
        }
        if action.origin == Origin::Operator {
            if let Some(g) = self.grants.iter().find(|g| g.device == device) {
                return Ok(Authority::Operator {
                    command: g.command,
                    device,
                });
            }
        }
        if !self.automatic_actions {
            return Err(Refusal::LeftToDaemon);
        }
        if let Some(reason) = &self.held_until_scan {
            return Err(Refusal::SafeMode {
                reason: reason.clone(),
            });
        }
        if self.engine.is_paused() {
            return Err(Refusal::Paused);
        }
        match policy.allow.get(&device) {
            Some(entry) => Ok(Authority::AllowList {
                entry: entry.clone(),
            }),
            None if action.origin == Origin::Operator => {
                Err(Refusal::NotNamedByOperator { device })
            }
            None => Err(Refusal::NotAllowed { device }),
        }
    }

    fn route(&mut self, action: Action, epoch: u64, now: Instant) {
        if let crate::recovery::ActionKind::PersistState { reason } = &action.kind {
            let reason = reason.clone();
            self.start_journal(Some(action.id), reason);
            return;
        }
        if !action.kind.is_destructive() {
            if action.kind.expects_outcome() {
                let e = self.effect(EffectKind::Run {
                    action,
                    authority: Authority::Harmless,
                });
                self.track(&e);
                self.ready.push_back(e);
            } else {
                let e = self.effect(EffectKind::Run {
                    action,
                    authority: Authority::Harmless,
                });
                self.ready.push_back(e);
            }
            return;
        }
        let decided = match &self.journal_failed {
            Some(reason) => Err(Refusal::JournalFailed {
                reason: reason.clone(),
            }),
            None => self.authorise(&action),
        };
        match decided {
            Err(refusal) => self.refuse(action, refusal, now),
            Ok(authority) => {
                if self.journaled_epoch.is_none_or(|j| j < epoch) {
                    // Write-ahead: journal the state that holds this action in flight first.
                    self.blocked.push_front((action.clone(), epoch));
                    self.start_journal(None, format!("before: {action}"));
                    return;
                }
                self.stats.destructive_run += 1;
                let e = self.effect(EffectKind::Run { action, authority });
                self.track(&e);
                self.ready.push_back(e);
            }
        }
    }

    /// Remembers an effect that expects an outcome, with its port.
    fn track(&mut self, e: &Effect) {
        self.outstanding.insert(e.id, self.action_id_of(e));
        if let EffectKind::Run { action, .. } = &e.kind {
            self.in_flight_ports.insert(e.id, action.port.clone());
        }
    }

    fn action_id_of(&self, e: &Effect) -> ActionId {
        match &e.kind {
            EffectKind::Run { action, .. } | EffectKind::Plan { action, .. } => action.id,
            EffectKind::WriteJournal { .. } => ActionId::default(),
        }
    }

    fn start_journal(&mut self, action: Option<ActionId>, reason: String) {
        self.stats.journal_writes += 1;
        let snapshot = Box::new(self.engine.snapshot());
        let e = self.effect(EffectKind::WriteJournal { snapshot, reason });
        self.journal_pending = Some(PendingJournal {
            effect: e.id,
            action,
            epoch: self.epoch,
        });
        self.ready.push_back(e);
    }

    fn refuse(&mut self, action: Action, refusal: Refusal, now: Instant) {
        self.stats.planned += 1;
        let outcome = refusal.outcome(action.to_string());
        let id = action.id;
        let e = self.effect(EffectKind::Plan { action, refusal });
        self.ready.push_back(e);
        self.epoch += 1;
        self.engine.handle_outcome(id, outcome, now);
    }
}
