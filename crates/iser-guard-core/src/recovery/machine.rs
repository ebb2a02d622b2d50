//! The engine: inputs and `now` in, actions out.

use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::time::Duration;

use super::action::{
    Action, ActionId, ActionKind, Alert, IscsiNode, Origin, RecreateMethod, Severity,
};
use super::alerts::AlertGate;
use super::input::{
    Input, IoErrorKind, IscsiadmStatus, Observation, OperatorCommand, Outcome, PortId, Portal,
    ProbeResult, RecreateResult, ScanComplete, SessionInfo, SessionKey, SessionState,
    StuckEvidence, Trust,
};
use super::policy::Policy;
use super::policy::{OtherSessions, ProbeMethod, ResetWhen};
use super::state::{
    AwaitTimer, DeviceRecord, EngineSnapshot, Episode, Fault, FreshQp, Hold, InFlight,
    InFlightKind, Phase, PortRecord, PortState, PortalRecord, ReconnectTimer, Recreation,
    RecreationState, SessionOp, SessionRecord, Stage, TimerKind, Transition,
};
use crate::qp::QpState;
use crate::time::Instant;

/// How long to wait for the QP table after a re-creation whose outcome was lost.
const VERIFY_RECREATE_WINDOW: Duration = Duration::from_secs(30);
/// Session-list refreshes the engine asks for are at least this far apart.
const REFRESH_MIN_GAP: Duration = Duration::from_secs(1);
/// Ids skipped on resume (see [`Engine::resume`]).
const RESUME_ID_GAP: u64 = 1 << 20;
/// Bound on re-evaluating one port within one input (each step changes the phase).
const MAX_STEPS_PER_EVALUATION: usize = 16;

/// Why a journal snapshot cannot be resumed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResumeError {
    /// The snapshot was written by an incompatible version.
    #[error(
        "the journal has format version {found}, this iser-guard reads version {expected}; \
         move the journal aside to start afresh (remembered sessions are then re-learned)"
    )]
    Version {
        /// Found.
        found: u32,
        /// Expected.
        expected: u32,
    },
}

/// Why an operator command was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CommandError {
    /// No such device is known.
    #[error("no RDMA device named {0} is known; `iser-guard status` lists the devices")]
    UnknownDevice(String),
    /// No remembered session matches.
    #[error("no remembered iSCSI session matches; `iscsiadm -m session` lists the sessions")]
    NoMatchingSessions,
    /// The device is gone and was never seen while it existed: nothing to re-create it from.
    #[error(
        "RDMA device {0} is gone and iser-guard never saw it while it existed, so it cannot \
         re-create it; {hint}",
        hint = crate::reset_plan::manual_recreate_hint(.0)
    )]
    NothingToRecreateFrom(String),
}

/// Counters for `status` and metrics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Observations handled.
    pub observations: u64,
    /// Userspace-written records ignored.
    pub ignored_untrusted: u64,
    /// Outcomes for unknown or finished actions.
    pub stale_outcomes: u64,
    /// Sessions the daemon could not map to an RDMA port in the last snapshot.
    pub unmapped_sessions: u64,
}

/// The recovery engine for every RDMA port of the host.
///
/// # Call order
///
/// The engine is a pure state machine (quinn style). The caller owns the clock and the
/// executors, and loops:
///
/// 1. feed every input that arrived, each with the current time:
///    [`handle_observation`](Engine::handle_observation) (kernel log, RDMA netlink),
///    [`handle_sessions`](Engine::handle_sessions) (a full iscsiadm snapshot),
///    [`handle_outcome`](Engine::handle_outcome) (an action finished),
///    [`handle_command`](Engine::handle_command) (operator);
/// 2. when [`next_timeout`](Engine::next_timeout) is due, call
///    [`handle_timeout`](Engine::handle_timeout);
/// 3. drain [`poll_action`](Engine::poll_action) **in order**. The daemon and the simulator
///    do this through [`crate::driver::Driver`], which owns the engine: it journals
///    [`snapshot`](Engine::snapshot) before each destructive action (write-ahead; a failed
///    write is [`Outcome::PersistFailed`] and [`Outcome::NotRun`] for the destructive actions
///    of that batch), decides dry-run, pause and the allow-list, and reports an action it
///    did not run as [`Outcome::Planned`] (the port is held, no attempt is counted);
/// 4. drain [`poll_transition`](Engine::poll_transition) into the log;
/// 5. sleep until `next_timeout()` or the next input.
///
/// After a restart, build the engine with [`Engine::resume`] from the journal: a device
/// re-creation that completed is never repeated, and one that was in flight is verified
/// (QP table), not repeated.
#[derive(Debug, Clone)]
pub struct Engine {
    policy: Policy,
    ports: BTreeMap<PortId, PortRecord>,
    sessions: BTreeMap<SessionKey, SessionRecord>,
    devices: BTreeMap<String, DeviceRecord>,
    portals: BTreeMap<Portal, PortalRecord>,
    inflight: BTreeMap<ActionId, InFlight>,
    by_sid: HashMap<u32, SessionKey>,
    by_disk: HashMap<String, SessionKey>,
    recreating: Option<String>,
    paused: bool,
    next_id: u64,
    rng: u64,
    now: Instant,
    last_sessions_at: Option<Instant>,
    last_sessions_request: Option<Instant>,
    last_topology_request: Option<Instant>,
    actions: VecDeque<Action>,
    transitions: VecDeque<Transition>,
    gate: AlertGate,
    dirty: Option<String>,
    stats: EngineStats,
    /// A complete scan was reported since this engine started (new or resumed): until then
    /// nothing destructive runs. Not journaled on purpose: every start must look first.
    scanned: bool,
    /// Whether the RDMA netlink QP table can be read (`None` until a scan said).
    qp_table: Option<bool>,
    /// What the last journal write held ([`Engine::journal_view`]), to skip unchanged writes.
    journaled: Option<EngineSnapshot>,
    /// Live sessions of the last session list that no port holds (not placed, never
    /// remembered): not journaled, re-learned from every list.
    unplaced: BTreeMap<SessionKey, SessionInfo>,
    /// Why operator logouts/logins of sessions on no RDMA port failed, in order (not
    /// journaled): a command's caller reports the ones after its start.
    operator_failures: Vec<String>,
    /// When each port's GSI QP was last reported in RTS (RDMA netlink), for the current
    /// registration of its device (cleared when the device or the QP goes): the sighting
    /// of a re-created device's fresh QP 1 can arrive before the re-creation's outcome.
    /// Not journaled: a restarted daemon's first dump reports what it sees.
    gsi_rts_at: BTreeMap<PortId, Instant>,
}

impl Engine {
    /// A fresh engine (no journal). `seed` drives back-off jitter only.
    pub fn new(policy: Policy, seed: u64) -> Self {
        Engine {
            policy,
            ports: BTreeMap::new(),
            sessions: BTreeMap::new(),
            devices: BTreeMap::new(),
            portals: BTreeMap::new(),
            inflight: BTreeMap::new(),
            by_sid: HashMap::new(),
            by_disk: HashMap::new(),
            recreating: None,
            paused: false,
            next_id: 1,
            rng: seed,
            now: Instant::ZERO,
            last_sessions_at: None,
            last_sessions_request: None,
            last_topology_request: None,
            actions: VecDeque::new(),
            transitions: VecDeque::new(),
            gate: AlertGate::default(),
            dirty: None,
            stats: EngineStats::default(),
            scanned: false,
            qp_table: None,
            journaled: None,
            unplaced: BTreeMap::new(),
            operator_failures: Vec::new(),
            gsi_rts_at: BTreeMap::new(),
        }
    }

    /// Resumes from a journal snapshot. A re-creation that was in flight is verified through
    /// the QP table (a [`ActionKind::RefreshTopology`] is queued), never blindly repeated.
    pub fn resume(
        snapshot: EngineSnapshot,
        policy: Policy,
        now: Instant,
    ) -> Result<Self, ResumeError> {
        if snapshot.version != EngineSnapshot::VERSION {
            return Err(ResumeError::Version {
                found: snapshot.version,
                expected: EngineSnapshot::VERSION,
            });
        }
        let mut e = Engine::new(policy, snapshot.rng);
        e.now = now;
        // Ids handed out after the last write (alerts, probes whose journal write was skipped)
        // are skipped so an id is never reused for a different action.
        e.next_id = snapshot.next_id.max(1).saturating_add(RESUME_ID_GAP);
        e.paused = snapshot.paused;
        e.recreating = snapshot.recreating;
        e.ports = snapshot
            .ports
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
        e.sessions = snapshot
            .sessions
            .into_iter()
            .map(|s| (s.key.clone(), s))
            .collect();
        e.devices = snapshot
            .devices
            .into_iter()
            .map(|d| (d.name.clone(), d))
            .collect();
        e.portals = snapshot
            .portals
            .into_iter()
            .map(|p| (p.portal.clone(), p))
            .collect();
        e.inflight = snapshot.inflight.into_iter().map(|i| (i.id, i)).collect();
        e.rebuild_indexes();
        // A probe whose deadline passed died with the old process: it gives no result (and
        // an unchanged journal need not have recorded that it timed out).
        e.inflight
            .retain(|_, i| !(matches!(i.kind, InFlightKind::Probe(_)) && i.deadline <= now));
        // An operator logout/login of a session on no RDMA port died with the process that
        // ran it (its child was killed at shutdown): no outcome will come, and timing it out
        // later would report a failure of a command that is over (the lab: "the logout
        // failed: Timeout" 40 s into the next command). Said once, and dropped.
        let interrupted: Vec<InFlight> = e
            .inflight
            .values()
            .filter(|i| {
                matches!(
                    i.kind,
                    InFlightKind::OperatorLogout(_) | InFlightKind::OperatorLogin(_)
                )
            })
            .cloned()
            .collect();
        for i in interrupted {
            e.inflight.remove(&i.id);
            let (what, node) = match &i.kind {
                InFlightKind::OperatorLogout(n) => ("logout", n),
                InFlightKind::OperatorLogin(n) => ("login", n),
                _ => continue,
            };
            e.alert(
                now,
                Severity::Warning,
                format!("reconnect:{}", node.key),
                format!("an operator reconnect of {} was interrupted", node.key),
                format!(
                    "its iscsiadm --{what} was still running when the last iser-guard process                      stopped; the session may be logged out"
                ),
                Some(format!(
                    "iscsiadm -m session; if it is missing: iscsiadm -m node -T {} -p {} -I {} \
                     --login",
                    node.key.target, node.key.portal, node.key.iface
                )),
            );
        }
        let live: BTreeSet<ActionId> = e.inflight.keys().copied().collect();
        for r in e.portals.values_mut() {
            if r.inflight.is_some_and(|id| !live.contains(&id)) {
                r.inflight = None;
                r.inflight_started = None;
            }
        }
        e.journaled = Some(e.journal_view());
        let mut verify = false;
        let in_flight_devices: Vec<String> = e
            .devices
            .values()
            .filter(|d| {
                d.recreation
                    .as_ref()
                    .is_some_and(|r| r.state == RecreationState::InFlight)
            })
            .map(|d| d.name.clone())
            .collect();
        for dev in in_flight_devices {
            for pid in e.ports_of_device(&dev) {
                if let Some(Stage::ResettingDevice { verify_until }) =
                    e.ports.get_mut(&pid).and_then(PortRecord::stage_mut)
                {
                    *verify_until = Some(now.plus(VERIFY_RECREATE_WINDOW));
                    verify = true;
                }
            }
        }
        if verify {
            e.push(None, None, Origin::Automatic, "resumed from the journal with a device re-creation in flight: checking the QP table instead of repeating it".into(), ActionKind::RefreshTopology);
        }
        Ok(e)
    }

    /// The journal snapshot of the current state.
    ///
    pub fn snapshot(&self) -> EngineSnapshot {
        EngineSnapshot {
            version: EngineSnapshot::VERSION,
            taken_at: self.now,
            next_id: self.next_id,
            rng: self.rng,
            paused: self.paused,
            recreating: self.recreating.clone(),
            ports: self.ports.values().cloned().collect(),
            sessions: self.sessions.values().cloned().collect(),
            devices: self.devices.values().cloned().collect(),
            portals: self.portals.values().cloned().collect(),
            inflight: self.inflight.values().cloned().collect(),
        }
    }

    /// The snapshot without the clock and the storm counters: two equal ones need no journal
    /// write in between (a kernel line repeated on a faulted port, or a QP table poll showing
    /// the same ERR, changes nothing worth a write).
    fn journal_view(&self) -> EngineSnapshot {
        let mut s = self.snapshot();
        s.taken_at = Instant::ZERO;
        for e in s.ports.iter_mut().filter_map(PortRecord::episode_mut) {
            e.evidence = 0;
        }
        s
    }

    /// The policy in force.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Replaces the policy (configuration reload); every port is re-evaluated.
    pub fn set_policy(&mut self, policy: Policy, now: Instant) {
        self.now = now;
        self.policy = policy;
        // The driver decides authorisation again under the new policy.
        for p in self.ports.values_mut() {
            if matches!(p.hold, Some(Hold::DryRun | Hold::NotAllowed)) {
                p.hold = None;
            }
        }
        self.evaluate_all(now);
        self.finish();
    }

    /// Every port.
    pub fn ports(&self) -> impl Iterator<Item = &PortRecord> {
        self.ports.values()
    }

    /// One port.
    pub fn port(&self, id: &PortId) -> Option<&PortRecord> {
        self.ports.get(id)
    }

    /// Every remembered session.
    pub fn sessions(&self) -> impl Iterator<Item = &SessionRecord> {
        self.sessions.values()
    }

    /// Every known device.
    pub fn devices(&self) -> impl Iterator<Item = &DeviceRecord> {
        self.devices.values()
    }

    /// Automatic actions are paused.
    pub fn is_paused(&self) -> bool {
        self.paused
    }

    /// Counters.
    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    /// The device being re-created, if any.
    pub fn recreating(&self) -> Option<&str> {
        self.recreating.as_deref()
    }

    /// The next action to execute.
    #[must_use]
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next phase change to log.
    #[must_use]
    pub fn poll_transition(&mut self) -> Option<Transition> {
        self.transitions.pop_front()
    }

    /// When [`handle_timeout`](Engine::handle_timeout) must be called next.
    #[must_use]
    pub fn next_timeout(&self) -> Option<Instant> {
        let ports = self
            .ports
            .values()
            .flat_map(|p| [p.wake().map(|(_, at)| at), p.deadline()])
            .flatten();
        let inflight = self.inflight.values().map(|i| i.deadline);
        ports.chain(inflight).chain(self.gate.next_timeout()).min()
    }

    /// Dispatches any input.
    pub fn handle(&mut self, input: Input, now: Instant) {
        match input {
            Input::Observation { observation, trust } => {
                self.handle_observation(observation, trust, now)
            }
            Input::Sessions(list) => self.handle_sessions(list, now),
            Input::Outcome { id, outcome } => self.handle_outcome(id, outcome, now),
            Input::Command(cmd) => {
                // The reply matters to the CLI only; the state change is what counts here.
                let _ = self.handle_command(cmd, now);
            }
            Input::Timeout => self.handle_timeout(now),
            Input::ScanComplete(scan) => self.handle_scan_complete(scan, now),
        }
    }

    // ---------------------------------------------------------------------------------------
    // Inputs
    // ---------------------------------------------------------------------------------------

    /// A kernel-log record or RDMA netlink fact.
    pub fn handle_observation(&mut self, obs: Observation, trust: Trust, now: Instant) {
        self.now = now;
        self.stats.observations += 1;
        if trust == Trust::Untrusted && !self.policy.trust_userspace {
            self.stats.ignored_untrusted += 1;
            // One coalesced alert for every forged record, whatever its signature: the point
            // is that someone writes into /dev/kmsg, not each line they wrote.
            self.alert_coalesced(
                now,
                Severity::Warning,
                "untrusted".to_string(),
                format!(
                    "ignored kernel-log record(s) written by userspace, the first: {}",
                    obs.describe()
                ),
                "it looks like a fault, but it was written into /dev/kmsg by a process, not by \
                 the kernel, so it cannot trigger recovery (kmsg.trust-userspace-records = false). \
                 Find out who writes such records."
                    .to_string(),
                None,
            );
            self.finish();
            return;
        }
        match obs {
            Observation::GsiQpStuck {
                device,
                port,
                evidence,
            } => self.on_gsi_stuck(&device, port, evidence, now),
            Observation::GsiQpState {
                device,
                port,
                state,
            } => {
                let pid = PortId::new(device.clone(), port);
                if state == QpState::Err {
                    self.gsi_rts_at.remove(&pid);
                    self.on_gsi_stuck(&device, Some(port), StuckEvidence::QpTable, now);
                } else if state == QpState::Rts {
                    self.gsi_rts_at.insert(pid.clone(), now);
                    self.on_gsi_rts(&pid, now);
                }
            }
            Observation::PortDown { device, port } => {
                if let Some(p) = self.ports.get_mut(&PortId::new(device, port)) {
                    p.link_up = false;
                }
            }
            Observation::PortUp { device, port } => {
                if let Some(p) = self.ports.get_mut(&PortId::new(device, port)) {
                    p.link_up = true;
                }
            }
            Observation::DeviceGone { device } => self.on_device_gone(&device, now),
            Observation::DeviceAppeared {
                device,
                parent,
                driver,
                ports: _,
            } => self.on_device_appeared(&device, parent, driver, now),
            Observation::DeviceRecipe { device, recipe } => self.remember_recipe(&device, recipe),
            Observation::DeviceRenamed { from, to } => self.rename_device(&from, &to, now),
            Observation::ConnError { sid, .. } => {
                self.mark_troubled(sid);
                self.request_sessions(now, false)
            }
            Observation::SessionRecoveryTimedOut { sid } => {
                self.mark_troubled(sid);
                if let Some(key) = self.by_sid.get(&sid).cloned() {
                    let mut pid = None;
                    if let Some(rec) = self.sessions.get_mut(&key) {
                        rec.state = SessionState::Free;
                        pid = Some(rec.port.clone());
                    }
                    if let Some(pid) = pid {
                        self.report_quarantined_losses(&pid, now);
                        if self.phase(&pid) == Some(Phase::Healthy) {
                            self.enter_fault(
                                &pid,
                                Fault::SessionsDown,
                                format!(
                                    "session {sid} ({key}) gave up recovering (iscsid's \
                                     replacement_timeout expired): its disks now fail I/O"
                                ),
                                now,
                            );
                        }
                    }
                }
                self.request_sessions(now, true);
            }
            Observation::IoError { disk, kind } => self.on_io_error(&disk, kind, now),
            Observation::CmRejectedInvalidServiceId => self.on_cm_rejected(now),
            Observation::CmAddrError { status } => {
                let explained = self.recreating.is_some()
                    || self
                        .ports
                        .values()
                        .any(|p| p.phase() == Phase::AwaitingDevice);
                if explained {
                    // Expected while a device is being re-created or known to be gone.
                    self.finish();
                    return;
                }
                self.alert_coalesced(
                    now,
                    Severity::Error,
                    format!("cm-addr-error:{status}"),
                    format!(
                        "RDMA CM cannot acquire a local RDMA device (status {status}): an \
                         initiator RDMA device is missing"
                    ),
                    "iSCSI reconnects fail before leaving this host: the RDMA device that owns \
                     the source address is gone. iser-guard waits for it to come back and \
                     re-creates it if it does not."
                        .to_string(),
                    Some("rdma link show".to_string()),
                );
                self.request_topology(now);
            }
        }
        self.finish();
    }

    /// A full `iscsiadm -m session -P 3` snapshot, sessions mapped to their RDMA ports.
    pub fn handle_sessions(&mut self, list: Vec<SessionInfo>, now: Instant) {
        self.now = now;
        self.last_sessions_at = Some(now);
        self.by_sid.clear();
        self.by_disk.clear();
        let mut unmapped = 0u64;
        let mut seen: BTreeSet<SessionKey> = BTreeSet::new();
        let mut touched: BTreeSet<PortId> = BTreeSet::new();
        let mut unplaced = BTreeMap::new();
        for info in list {
            // A session this scan could not place keeps the placement it had: a scan that
            // cannot place it is no evidence that it moved or went away.
            let known = self.sessions.get(&info.key).map(|r| r.port.clone());
            let port = match (info.rdma.clone(), known) {
                (Some(port), Some(old)) if port != old && !self.may_move(&old) => old,
                (Some(port), _) => port,
                (None, Some(old)) => {
                    unmapped += 1;
                    old
                }
                (None, None) => {
                    unmapped += 1;
                    unplaced.insert(info.key.clone(), info);
                    continue;
                }
            };
            seen.insert(info.key.clone());
            self.by_sid.insert(info.sid, info.key.clone());
            for d in &info.disks {
                self.by_disk.insert(d.name.clone(), info.key.clone());
            }
            match self.sessions.get_mut(&info.key) {
                Some(rec) => {
                    let moved = rec.port != port;
                    let changed = moved
                        || !rec.present
                        || rec.state != info.state
                        || rec.disks != info.disks
                        || rec.sid != Some(info.sid);
                    let old_port = rec.port.clone();
                    rec.present = true;
                    rec.state = info.state;
                    rec.disks = info.disks;
                    rec.sid = Some(info.sid);
                    rec.transport = info.transport;
                    // A scan that placed it by the kernel's word updates the evidence; one
                    // that kept the remembered port keeps the evidence it had.
                    if info.rdma.is_some() {
                        if let Some(e) = &info.placed_by {
                            rec.placed_by = Some(e.describe());
                        }
                    }
                    if rec.is_healthy() {
                        rec.troubled = false;
                    }
                    if moved {
                        rec.port = port.clone();
                        if let Some(p) = self.ports.get_mut(&old_port) {
                            p.sessions.retain(|k| k != &info.key);
                        }
                        self.port_or_create(&port, now)
                            .sessions
                            .push(info.key.clone());
                        touched.insert(old_port);
                    }
                    if changed {
                        touched.insert(port);
                    }
                }
                None => {
                    self.sessions.insert(
                        info.key.clone(),
                        SessionRecord {
                            key: info.key.clone(),
                            transport: info.transport,
                            port: port.clone(),
                            sid: Some(info.sid),
                            present: true,
                            state: info.state,
                            disks: info.disks,
                            io_errors: Vec::new(),
                            op: None,
                            reported: false,
                            troubled: false,
                            placed_by: info.placed_by.as_ref().map(|e| e.describe()),
                        },
                    );
                    self.port_or_create(&port, now)
                        .sessions
                        .push(info.key.clone());
                    self.mark_dirty(format!("remembered session {}", info.key));
                    touched.insert(port);
                }
            }
        }
        self.stats.unmapped_sessions = unmapped;
        self.unplaced = unplaced;
        // Sessions that vanished: a clean logout of a healthy session is forgotten; anything
        // else (iscsid dropped a failing session) is kept so it can be restored.
        let mut forget = Vec::new();
        for rec in self.sessions.values_mut() {
            if rec.present && !seen.contains(&rec.key) {
                rec.present = false;
                touched.insert(rec.port.clone());
                let port_healthy = self
                    .ports
                    .get(&rec.port)
                    .is_some_and(|p| p.phase() == Phase::Healthy);
                // Evidence of a clean logout: it vanished while LOGGED_IN with running disks,
                // on a healthy port, with no error seen since, and not by our own hand.
                if rec.is_healthy_when_last_seen()
                    && !rec.troubled
                    && port_healthy
                    && rec.op.is_none()
                {
                    forget.push(rec.key.clone());
                }
            }
        }
        for key in forget {
            if let Some(rec) = self.sessions.remove(&key) {
                if let Some(p) = self.ports.get_mut(&rec.port) {
                    p.sessions.retain(|k| k != &key);
                }
                self.mark_dirty(format!("forgot session {key}: logged out cleanly"));
            }
        }
        // Ports waiting for a fresh list before logging sessions out and in.
        for p in self.ports.values() {
            if matches!(
                p.stage(),
                Some(
                    Stage::Reconnecting {
                        ops_not_before: Some(_),
                        ..
                    } | Stage::Verifying { .. }
                )
            ) {
                touched.insert(p.id.clone());
            }
        }
        for pid in touched {
            let Some(p) = self.ports.get(&pid) else {
                continue;
            };
            if p.phase() == Phase::Quarantined {
                self.report_quarantined_losses(&pid, now);
                continue;
            }
            if p.phase() == Phase::Healthy {
                let down: Vec<String> = p
                    .sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .filter(|s| !s.is_up())
                    .map(describe_session)
                    .collect();
                if !down.is_empty() {
                    self.enter_fault(
                        &pid,
                        Fault::SessionsDown,
                        format!("session(s) down: {}", down.join("; ")),
                        now,
                    );
                }
            } else {
                self.evaluate(&pid, now);
            }
        }
        self.finish();
    }

    /// A complete scan (sessions and topology) was fed: see [`ScanComplete`]. The first one
    /// after a start lifts the start-up gate on destructive actions; every port is then
    /// re-evaluated on what the scan showed.
    pub fn handle_scan_complete(&mut self, scan: ScanComplete, now: Instant) {
        self.now = now;
        self.qp_table = Some(scan.qp_table_available);
        let first = !self.scanned;
        self.scanned = true;
        if first {
            self.evaluate_all(now);
        }
        self.finish();
    }

    /// Operator logouts/logins of sessions on no RDMA port still in flight (`reconnect` of
    /// a session no port holds): its command is not finished before they are.
    pub fn operator_session_ops(&self) -> usize {
        self.inflight
            .values()
            .filter(|i| {
                matches!(
                    i.kind,
                    InFlightKind::OperatorLogout(_) | InFlightKind::OperatorLogin(_)
                )
            })
            .count()
    }

    /// Why operator logouts/logins of sessions on no RDMA port failed, oldest first.
    pub fn operator_failures(&self) -> &[String] {
        &self.operator_failures
    }

    /// A complete scan was reported since the start (destructive actions may run).
    pub fn scan_complete(&self) -> bool {
        self.scanned
    }

    /// The outcome of an action the engine asked for.
    pub fn handle_outcome(&mut self, id: ActionId, outcome: Outcome, now: Instant) {
        self.now = now;
        if let Outcome::PersistFailed { reason } = &outcome {
            self.alert(
                now,
                Severity::Critical,
                "journal-failed".to_string(),
                format!("cannot write the state journal: {reason}"),
                "iser-guard journals its state before every destructive action; until the \
                 journal can be written, those actions are skipped."
                    .to_string(),
                Some("check the state directory (paths.state-dir): space, permissions".into()),
            );
            self.finish();
            return;
        }
        let Some(inf) = self.inflight.remove(&id) else {
            self.stats.stale_outcomes += 1;
            self.finish();
            return;
        };
        match (inf.kind, outcome) {
            (InFlightKind::Probe(portal), Outcome::Probe(result)) => {
                self.on_probe(&portal, id, result, now)
            }
            (InFlightKind::Probe(portal), _) => {
                self.on_probe(&portal, id, ProbeResult::Unreachable, now)
            }
            (InFlightKind::Recreate(device), Outcome::Recreate(result)) => {
                self.on_recreate_done(&device, result, now)
            }
            (InFlightKind::Recreate(device), Outcome::NotRun { reason }) => {
                self.on_recreate_not_run(&device, &reason, now)
            }
            (InFlightKind::Recreate(device), Outcome::Planned { hold, plan }) => {
                self.on_recreate_planned(&device, hold, &plan, now)
            }
            (
                InFlightKind::Logout(key) | InFlightKind::Login(key),
                Outcome::Planned { hold, plan },
            ) => self.on_session_op_planned(&key, hold, &plan, now),
            (InFlightKind::Recreate(device), other) => self.on_recreate_done(
                &device,
                RecreateResult::Failed {
                    reason: format!("unexpected outcome {other:?}"),
                },
                now,
            ),
            (InFlightKind::Logout(key), outcome) => {
                self.on_iscsiadm(&key, true, iscsiadm_status(outcome), now)
            }
            (InFlightKind::Login(key), outcome) => {
                self.on_iscsiadm(&key, false, iscsiadm_status(outcome), now)
            }
            (InFlightKind::OperatorLogout(node), outcome) => {
                self.on_operator_logout(node, iscsiadm_status(outcome), now)
            }
            (InFlightKind::OperatorLogin(node), outcome) => {
                self.on_operator_login(&node, iscsiadm_status(outcome), now)
            }
            (InFlightKind::Rescan(key), _) => {
                if let Some(pid) = self.sessions.get(&key).map(|s| s.port.clone()) {
                    self.request_sessions(now, true);
                    self.evaluate(&pid, now);
                }
            }
        }
        self.finish();
    }

    /// An operator command. Returns what will happen, in words.
    pub fn handle_command(
        &mut self,
        cmd: OperatorCommand,
        now: Instant,
    ) -> Result<String, CommandError> {
        self.now = now;
        let r = self.command(cmd, now);
        self.finish();
        r
    }

    /// Time passed: fires due timers (probe rounds, back-off, grace, deadlines, alert flush).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        let due: Vec<ActionId> = self
            .inflight
            .values()
            .filter(|i| i.deadline <= now)
            .map(|i| i.id)
            .collect();
        for id in due {
            let Some(inf) = self.inflight.remove(&id) else {
                continue;
            };
            match inf.kind {
                InFlightKind::Probe(portal) => {
                    self.on_probe(&portal, id, ProbeResult::Unreachable, now)
                }
                InFlightKind::Recreate(device) => self.on_recreate_silent(&device, now),
                InFlightKind::Logout(key) => {
                    self.on_iscsiadm(&key, true, IscsiadmStatus::Timeout, now)
                }
                InFlightKind::Login(key) => {
                    self.on_iscsiadm(&key, false, IscsiadmStatus::Timeout, now)
                }
                InFlightKind::Rescan(_) => {}
                InFlightKind::OperatorLogout(node) => {
                    self.on_operator_logout(node, IscsiadmStatus::Timeout, now)
                }
                InFlightKind::OperatorLogin(node) => {
                    self.on_operator_login(&node, IscsiadmStatus::Timeout, now)
                }
            }
        }
        let pids: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| {
                p.wake().is_some_and(|(_, at)| at <= now) || p.deadline().is_some_and(|d| d <= now)
            })
            .map(|p| p.id.clone())
            .collect();
        if !pids.is_empty() {
            self.mark_dirty("timers fired".into());
        }
        for pid in pids {
            let wake = self
                .ports
                .get_mut(&pid)
                .and_then(PortRecord::stage_mut)
                .and_then(|s| s.take_due_wake(now));
            let awaiting_target = self.phase(&pid) == Some(Phase::AwaitingTarget);
            match wake {
                Some(TimerKind::ProbeRound) if awaiting_target => self.start_probes(&pid, now),
                Some(TimerKind::ProbeRound) => {}
                Some(TimerKind::Backoff) => {
                    if self.phase(&pid) == Some(Phase::AwaitingTarget) {
                        self.start_probes(&pid, now);
                    } else {
                        self.set_ops_not_before(&pid, now);
                    }
                }
                Some(TimerKind::Grace) => self.set_ops_not_before(&pid, now),
                Some(TimerKind::SessionRefresh) => self.request_sessions(now, true),
                None => {}
            }
            self.evaluate(&pid, now);
            // A deadline the stage did not consume must not fire again and again.
            let refresh = self.policy.session_refresh;
            if let Some(stage) = self.ports.get_mut(&pid).and_then(PortRecord::stage_mut) {
                if stage.deadline().is_some_and(|d| d <= now) {
                    stage.set_deadline(None);
                }
                if let Stage::Reconnecting {
                    timer: timer @ None,
                    ops_not_before: Some(_),
                } = stage
                {
                    // Still waiting for a fresh session list: ask again later.
                    *timer = Some((ReconnectTimer::SessionRefresh, now.plus(refresh)));
                }
            }
        }
        for alert in self.gate.due(now, self.policy.alert_repeat_interval) {
            self.push_alert(alert);
        }
        self.finish();
    }

    // ---------------------------------------------------------------------------------------
    // Observation handlers
    // ---------------------------------------------------------------------------------------

    fn on_gsi_stuck(
        &mut self,
        device: &str,
        port: Option<u32>,
        evidence: StuckEvidence,
        now: Instant,
    ) {
        let pids = match port {
            Some(p) => vec![PortId::new(device, p)],
            None => {
                let known: Vec<PortId> = self
                    .ports_of_device(device)
                    .into_iter()
                    .filter(|pid| self.ports.get(pid).is_some_and(|p| !p.sessions.is_empty()))
                    .collect();
                if known.is_empty() {
                    let all = self.ports_of_device(device);
                    if all.is_empty() {
                        vec![PortId::new(device, 1)]
                    } else {
                        all
                    }
                } else {
                    known
                }
            }
        };
        for pid in pids {
            let reason = format!(
                "{}: QP 1 (GSI) carries the RDMA CM handshakes every iSER login needs, so no \
                 session can reconnect on {pid} until the device is re-created",
                evidence.describe()
            );
            self.enter_fault(&pid, Fault::GsiStuck { evidence }, reason, now);
        }
    }

    fn on_gsi_rts(&mut self, pid: &PortId, now: Instant) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        if matches!(
            p.stage(),
            Some(Stage::ResettingDevice {
                verify_until: Some(_)
            })
        ) {
            let device = pid.device.clone();
            self.on_recreate_done(
                &device,
                RecreateResult::Recreated {
                    name: device.clone(),
                },
                now,
            );
            // That sighting was the fresh QP 1 itself.
            if let Some(e) = self.episode_mut(pid) {
                if e.recreated.is_some() {
                    e.recreated = Some(FreshQp::Seen);
                }
            }
            return;
        }
        let phase = p.phase();
        let Some(e) = p.episode_mut() else {
            return;
        };
        if e.awaiting_fresh_qp() {
            e.recreated = Some(FreshQp::Seen);
            self.mark_dirty(format!("{pid}: the new QP 1 is in RTS"));
            self.evaluate(pid, now);
            return;
        }
        if e.needs_recreate
            && matches!(e.fault, Fault::GsiStuck { .. })
            && matches!(phase, Phase::Faulted | Phase::AwaitingTarget)
        {
            e.needs_recreate = false;
            e.fault = Fault::SessionsDown;
            p.reason = format!(
                "QP 1 of {pid} is back in RTS without a re-creation (someone re-created the \
                 device, or the driver recovered): no re-creation needed"
            );
            self.mark_dirty(format!("{pid}: QP 1 back in RTS"));
            self.evaluate(pid, now);
        }
    }

    fn on_device_gone(&mut self, device: &str, now: Instant) {
        self.device_or_create(device).present = false;
        self.gsi_rts_at.retain(|pid, _| pid.device != device);
        if self.recreating.as_deref() == Some(device) {
            return; // Expected: it is being re-created.
        }
        for pid in self.ports_of_device(device) {
            let has_sessions = self.ports.get(&pid).is_some_and(|p| !p.sessions.is_empty());
            if has_sessions {
                self.enter_fault(
                    &pid,
                    Fault::DeviceGone,
                    format!(
                        "RDMA device {device} disappeared: its sessions cannot reconnect until \
                         it is back"
                    ),
                    now,
                );
            }
        }
    }

    /// An operator's re-creation of `device` has something to go by: it is present, or what
    /// re-creates it was remembered (or its parent function is known).
    fn recreatable(&self, device: &str) -> Result<(), CommandError> {
        match self.devices.get(device) {
            Some(d) if !d.present && d.remembered.is_none() && d.parent.is_none() => {
                Err(CommandError::NothingToRecreateFrom(device.to_string()))
            }
            _ => Ok(()),
        }
    }

    /// Keeps what re-creating `device` needs, learned while it exists (the only time it can
    /// be learned: a deleted device leaves nothing in sysfs or netlink). Journaled, so a
    /// restart while the device is gone still knows how to bring it back.
    fn remember_recipe(&mut self, device: &str, recipe: crate::reset_plan::RecreateFrom) {
        let d = self.device_or_create(device);
        if d.remembered.as_ref() == Some(&recipe) {
            return;
        }
        d.remembered = Some(recipe);
        self.mark_dirty(format!("learned how to re-create {device}"));
    }

    fn on_device_appeared(
        &mut self,
        device: &str,
        parent: Option<String>,
        driver: Option<String>,
        now: Instant,
    ) {
        let d = self.device_or_create(device);
        let was_present = d.present;
        d.present = true;
        if parent.is_some() {
            d.parent = parent;
        }
        if driver.is_some() {
            d.driver = driver;
        }
        if was_present {
            return;
        }
        for pid in self.ports_of_device(device) {
            if self.phase(&pid) == Some(Phase::AwaitingDevice) {
                self.start_reconnect(
                    &pid,
                    true,
                    format!(
                        "RDMA device {device} is back; giving iscsid its grace period to reconnect"
                    ),
                    now,
                );
                self.evaluate(&pid, now);
            }
        }
    }

    fn on_io_error(&mut self, disk: &str, kind: IoErrorKind, now: Instant) {
        let Some(key) = self.by_disk.get(disk).cloned() else {
            return;
        };
        if let Some(rec) = self.sessions.get_mut(&key) {
            rec.troubled = true;
        }
        if kind == IoErrorKind::Offline {
            self.request_sessions(now, false);
            return;
        }
        let window = self.policy.zombie_window;
        let threshold = usize::try_from(self.policy.zombie_io_errors.max(1)).unwrap_or(usize::MAX);
        let Some(rec) = self.sessions.get_mut(&key) else {
            return;
        };
        let pid = rec.port.clone();
        let port_healthy = self
            .ports
            .get(&pid)
            .is_some_and(|p| p.phase() == Phase::Healthy);
        if !rec.is_up() || !port_healthy {
            return; // Expected while the session is down; iscsid or the engine handles it.
        }
        rec.io_errors.retain(|t| now.since(*t) <= window);
        rec.io_errors.push(now);
        let n_errors = rec.io_errors.len();
        self.mark_dirty(format!(
            "{disk}: I/O error {n_errors} on a LOGGED_IN session"
        ));
        let Some(rec) = self.sessions.get_mut(&key) else {
            return;
        };
        if rec.io_errors.len() >= threshold {
            let n = rec.io_errors.len();
            let sid = rec.sid.map(|s| s.to_string()).unwrap_or_else(|| "?".into());
            let reason = format!(
                "session {sid} {key} reports LOGGED_IN but {n} I/O errors on {disk} within {}s: \
                 a zombie session iscsid will not repair; logging that one session out and in \
                 (no device re-creation)",
                window.as_secs()
            );
            self.enter_fault(&pid, Fault::Zombie { session: key }, reason, now);
        }
    }

    fn on_cm_rejected(&mut self, now: Instant) {
        let candidates: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| {
                !p.needs_recreate()
                    && matches!(
                        p.phase(),
                        Phase::AwaitingTarget | Phase::Reconnecting | Phase::Verifying
                    )
            })
            .map(|p| p.id.clone())
            .collect();
        let mut marked = false;
        for pid in candidates {
            let reachable: Vec<Portal> = self
                .portals_of(&pid)
                .into_iter()
                .filter(|pt| self.portals.get(pt).is_some_and(|r| r.consecutive_ok > 0))
                .collect();
            if reachable.is_empty() {
                continue;
            }
            marked = true;
            let newly = self.ports.get_mut(&pid).is_some_and(|p| {
                p.listener_rejected_at = Some(now);
                p.episode_mut()
                    .is_some_and(|e| !std::mem::replace(&mut e.listener_gone, true))
            });
            if newly && self.phase(&pid) != Some(Phase::AwaitingTarget) {
                self.transition(
                    &pid,
                    Stage::awaiting_target(),
                    "the target rejects iSER connections (invalid service ID): waiting for the \
                     target side to be fixed, probing meanwhile"
                        .into(),
                    now,
                );
                self.enter_awaiting_target(&pid, now);
            }
            if newly {
                self.mark_dirty(format!("{pid}: target listener gone"));
                let targets = self.targets_of(&pid);
                let portals = reachable.iter().map(|p| p.to_string()).collect::<Vec<_>>();
                let remedy = format!(
                    "on the target, re-enable iSER on the portal, e.g. with LIO: \
                     echo 0 > /sys/kernel/config/target/iscsi/{t}/tpgt_1/np/{p}/iser; \
                     echo 1 > /sys/kernel/config/target/iscsi/{t}/tpgt_1/np/{p}/iser",
                    t = targets
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "TARGET_IQN".into()),
                    p = portals.first().cloned().unwrap_or_else(|| "PORTAL".into()),
                );
                self.mark_reported(&pid);
                self.alert(
                    now,
                    Severity::Error,
                    format!("listener:{pid}"),
                    format!(
                        "target portal {} answers but its iSER listener is gone",
                        portals.join(", ")
                    ),
                    format!(
                        "the portal accepts TCP connections but rejects RDMA CM connections \
                         with 'invalid service ID': the target's iSER listener died (for \
                         example its RDMA device was re-created). Nothing on this host can fix \
                         it, so iser-guard will not re-create {}; it keeps probing and iscsid \
                         keeps retrying. Sessions waiting: {}",
                        pid.device,
                        self.down_sessions_text(&pid)
                    ),
                    Some(remedy),
                );
            }
        }
        if !marked {
            self.alert_coalesced(
                now,
                Severity::Warning,
                "cm-rejected".to_string(),
                "a target rejected an RDMA CM connection: invalid service ID".to_string(),
                "nothing listens on the iSER service at the target; if its portal answers TCP, \
                 its iSER listener is gone"
                    .to_string(),
                None,
            );
        }
    }

    fn on_probe(&mut self, portal: &Portal, id: ActionId, result: ProbeResult, now: Instant) {
        let Some(r) = self.portals.get_mut(portal) else {
            return;
        };
        if r.inflight != Some(id) {
            // Not the probe this record waits for (superseded): its result is not the newest.
            self.stats.stale_outcomes += 1;
            return;
        }
        let started = r.inflight_started.unwrap_or(now);
        r.inflight = None;
        r.inflight_started = None;
        if r.newest_started.is_some_and(|t| t > started) {
            self.stats.stale_outcomes += 1;
            return; // A newer probe already answered: the newest result wins.
        }
        r.newest_started = Some(started);
        let before = (r.consecutive_ok, r.ok_started.len());
        if result == ProbeResult::Reachable {
            r.consecutive_ok = r.consecutive_ok.saturating_add(1);
            r.ok_started.push(started);
            if r.ok_started.len() > PortalRecord::MAX_OK_KEPT {
                r.ok_started.remove(0);
            }
        } else {
            r.consecutive_ok = 0;
            r.ok_started.clear();
        }
        if before != (r.consecutive_ok, r.ok_started.len()) {
            self.mark_dirty(format!("probe of {portal}: {result:?}"));
        }
        let users: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| !matches!(p.phase(), Phase::Healthy | Phase::Quarantined))
            .filter(|p| {
                p.sessions.iter().any(|k| {
                    self.sessions
                        .get(k)
                        .is_some_and(|s| &s.key.portal == portal)
                })
            })
            .map(|p| p.id.clone())
            .collect();
        for pid in users {
            self.evaluate(&pid, now);
        }
    }

    fn on_recreate_done(&mut self, device: &str, result: RecreateResult, now: Instant) {
        if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
        }
        self.inflight
            .retain(|_, i| i.kind != InFlightKind::Recreate(device.to_string()));
        let attempt = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref().map(|r| r.attempt))
            .unwrap_or(0);
        let started = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref().map(|r| r.started));
        match result {
            RecreateResult::Recreated { name } => {
                if let Some(d) = self.devices.get_mut(device) {
                    d.present = true;
                    d.completed_recreations += 1;
                    if let Some(r) = d.recreation.as_mut() {
                        r.state = RecreationState::Completed;
                    }
                }
                let device = if name != device && !name.is_empty() {
                    self.rename_device(device, &name, now);
                    name
                } else {
                    device.to_string()
                };
                for pid in self.ports_of_device(&device) {
                    if self.phase(&pid) != Some(Phase::ResettingDevice) {
                        continue;
                    }
                    // The fresh QP 1 may have been reported already (the dump after
                    // the device came back can beat the executor's outcome).
                    let seen = started
                        .is_some_and(|t| self.gsi_rts_at.get(&pid).is_some_and(|at| *at >= t));
                    if let Some(e) = self.episode_mut(&pid) {
                        e.recreated = Some(if seen {
                            FreshQp::Seen
                        } else {
                            FreshQp::Awaited
                        });
                        e.needs_recreate = false;
                    }
                    let grace = self.policy.iscsid_grace.as_secs();
                    self.start_reconnect(
                        &pid,
                        true,
                        format!(
                            "{device} re-created (attempt {attempt}): QP 1 is fresh; giving \
                             iscsid {grace}s to reconnect before logging sessions in"
                        ),
                        now,
                    );
                }
                self.persist(format!(
                    "re-created {device} (attempt {attempt}): completed"
                ));
                // Verification looks at the QP table itself: the new QP 1 must be in RTS.
                self.push(
                    None,
                    Some(device.clone()),
                    Origin::Automatic,
                    format!("{device} re-created: is its new QP 1 in RTS?"),
                    ActionKind::RefreshTopology,
                );
                self.last_topology_request = Some(now);
            }
            RecreateResult::Failed { reason } => {
                self.mark_recreation_failed(device);
                for pid in self.ports_resetting(device) {
                    self.after_failed_attempt(
                        &pid,
                        format!("re-creating {device} failed (attempt {attempt}): {reason}"),
                        now,
                    );
                }
            }
            RecreateResult::Unsupported { reason } => {
                self.mark_recreation_failed(device);
                for pid in self.ports_resetting(device) {
                    self.quarantine(
                        &pid,
                        format!("{device} cannot be re-created here: {reason}"),
                        now,
                    );
                }
            }
        }
        self.slot_freed(now);
    }

    fn on_recreate_not_run(&mut self, device: &str, reason: &str, now: Instant) {
        if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
        }
        if let Some(d) = self.devices.get_mut(device) {
            d.recreation = None;
        }
        for pid in self.ports_of_device(device) {
            if self.phase(&pid) != Some(Phase::ResettingDevice) {
                continue;
            }
            if let Some(e) = self.episode_mut(&pid) {
                e.attempts = e.attempts.saturating_sub(1);
            }
            self.after_failed_attempt(&pid, format!("{device} was not re-created: {reason}"), now);
        }
        self.slot_freed(now);
    }

    /// The driver planned the re-creation instead of running it (dry-run, paused, not
    /// allowed): nothing happened to the device, no attempt is counted, and the port waits
    /// with the hold (and the plan) visible until something changes (policy reload, resume,
    /// an operator command, a new transition).
    fn on_recreate_planned(&mut self, device: &str, hold: Hold, plan: &str, now: Instant) {
        if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
        }
        let attempt = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref())
            .map(|r| r.attempt);
        if let Some(d) = self.devices.get_mut(device) {
            d.recreation = None;
        }
        // Nothing is being re-created: take back the "re-creating" alert queued behind the
        // action, so the operator reads the plan, not an announcement.
        if let Some(n) = attempt {
            let key = format!("recreate:{device}:{n}");
            self.actions
                .retain(|a| !matches!(&a.kind, ActionKind::Alert(al) if al.key == key));
            self.gate.reset(&key);
        }
        for pid in self.ports_of_device(device) {
            if self.phase(&pid) != Some(Phase::ResettingDevice) {
                continue;
            }
            let why = match self.ports.get_mut(&pid) {
                Some(p) => {
                    if let Some(e) = p.episode_mut() {
                        e.attempts = e.attempts.saturating_sub(1);
                    }
                    p.reason.clone()
                }
                None => continue,
            };
            self.transition(
                &pid,
                Stage::awaiting_target(),
                format!("planned, not run: {plan}"),
                now,
            );
            self.set_hold(&pid, hold.clone(), plan, &why, now);
        }
        self.slot_freed(now);
    }

    /// The driver planned a logout/login instead of running it: the session is as it was.
    fn on_session_op_planned(&mut self, key: &SessionKey, hold: Hold, plan: &str, now: Instant) {
        let Some(rec) = self.sessions.get_mut(key) else {
            return;
        };
        rec.op = None;
        let pid = rec.port.clone();
        let why = self
            .ports
            .get(&pid)
            .map(|p| p.reason.clone())
            .unwrap_or_default();
        self.set_hold(&pid, hold, plan, &why, now);
    }

    /// The re-creation's outcome never came (timeout, or lost in a restart): verify through
    /// the QP table instead of repeating it.
    fn on_recreate_silent(&mut self, device: &str, now: Instant) {
        let mut any = false;
        for pid in self.ports_of_device(device) {
            if let Some(Stage::ResettingDevice { verify_until }) =
                self.ports.get_mut(&pid).and_then(PortRecord::stage_mut)
            {
                *verify_until = Some(now.plus(VERIFY_RECREATE_WINDOW));
                any = true;
            }
        }
        // The fresh QP 1 may have been reported already, before the outcome was missed.
        let started = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref().map(|r| r.started));
        let seen: Vec<PortId> = self
            .ports_of_device(device)
            .into_iter()
            .filter(|pid| self.phase(pid) == Some(Phase::ResettingDevice))
            .filter(|pid| {
                started.is_some_and(|t| self.gsi_rts_at.get(pid).is_some_and(|at| *at >= t))
            })
            .collect();
        if let Some(pid) = seen.first() {
            self.on_gsi_rts(pid, now);
            return;
        }
        if any {
            self.push(
                None,
                Some(device.to_string()),
                Origin::Automatic,
                format!("no outcome for the re-creation of {device}: checking the QP table"),
                ActionKind::RefreshTopology,
            );
            self.last_topology_request = Some(now);
        } else if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
            self.slot_freed(now);
        }
    }

    fn on_iscsiadm(
        &mut self,
        key: &SessionKey,
        logout: bool,
        status: IscsiadmStatus,
        now: Instant,
    ) {
        let Some(rec) = self.sessions.get_mut(key) else {
            return;
        };
        let pid = rec.port.clone();
        let what = if logout { "logout" } else { "login" };
        match (&status, logout) {
            (IscsiadmStatus::Success | IscsiadmStatus::NotFound, true) => {
                rec.op = Some(SessionOp::LoggedOut);
            }
            (IscsiadmStatus::Success | IscsiadmStatus::AlreadyLoggedIn, false) => {
                rec.op = Some(SessionOp::Done);
                rec.io_errors.clear();
                // `reported` stays: a successful login is not yet a healthy session (the next
                // list says so), and on a quarantined port clearing it here left a session
                // that stays down unreported (found by the invariant proptest). It is cleared
                // when the port is healthy again.
            }
            (IscsiadmStatus::AuthFailed, _) => {
                rec.op = Some(SessionOp::Failed("authentication failed".into()));
                let k = key.clone();
                self.quarantine(
                    &pid,
                    format!(
                        "the target refused the {what} of {k}: authentication failed; retrying \
                         cannot help. Fix the CHAP settings of the node record \
                         (iscsiadm -m node -T {} -p {} -o update -n node.session.auth.…)",
                        k.target, k.portal
                    ),
                    now,
                );
                return;
            }
            _ => {
                rec.op = Some(SessionOp::Failed(format!("{what}: {status:?}")));
                let portal = rec.key.portal.clone();
                let needs_recreate = self.ports.get(&pid).is_some_and(PortRecord::needs_recreate);
                if !logout && !needs_recreate && self.answering_portals(&pid).contains(&portal) {
                    if let Some(rec) = self.sessions.get_mut(key) {
                        rec.op = None;
                    }
                    self.mark_dirty(format!("{key}: {what} {status:?}"));
                    self.target_refuses_logins(
                        &pid,
                        format!("the login to {portal} failed ({status:?}) while the portal answers TCP"),
                        now,
                    );
                    self.request_sessions(now, true);
                    return;
                }
            }
        }
        self.mark_dirty(format!("{key}: {what} {status:?}"));
        if !logout {
            self.request_sessions(now, true);
        }
        self.evaluate(&pid, now);
    }

    // ---------------------------------------------------------------------------------------
    // Operator commands
    // ---------------------------------------------------------------------------------------

    fn command(&mut self, cmd: OperatorCommand, now: Instant) -> Result<String, CommandError> {
        match cmd {
            OperatorCommand::Pause => {
                self.paused = true;
                self.mark_dirty("paused by the operator".into());
                self.alert(
                    now,
                    Severity::Info,
                    "paused".into(),
                    "automatic recovery paused by the operator".into(),
                    "detection and alerts continue; no device is re-created and no session is \
                     logged out or in until `iser-guard resume`"
                        .into(),
                    Some("iser-guard resume".into()),
                );
                Ok("automatic actions paused; detection and alerts continue".into())
            }
            OperatorCommand::Resume => {
                self.paused = false;
                self.gate.reset("paused");
                for p in self.ports.values_mut() {
                    if p.hold == Some(Hold::Paused) {
                        p.hold = None;
                    }
                }
                self.mark_dirty("resumed by the operator".into());
                self.evaluate_all(now);
                Ok("automatic actions resumed".into())
            }
            OperatorCommand::Recover { device, port } => {
                let pids = self.command_ports(&device, port)?;
                self.recreatable(&device)?;
                for pid in &pids {
                    self.operator_episode(pid, true, false, now);
                }
                Ok(format!(
                    "recovering {}: check the target, re-create {device}, reconnect, verify",
                    join_ports(&pids)
                ))
            }
            OperatorCommand::ResetDevice { device } => {
                let pids = self.command_ports(&device, None)?;
                self.recreatable(&device)?;
                for pid in &pids {
                    self.operator_episode(pid, true, true, now);
                }
                Ok(format!(
                    "re-creating {device} now, then reconnecting its sessions"
                ))
            }
            OperatorCommand::Reconnect { target, portal } => {
                let keys: Vec<SessionKey> = self
                    .sessions
                    .values()
                    .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
                    .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
                    .map(|s| s.key.clone())
                    .collect();
                // Live sessions iscsiadm reports that no port holds (not placed on an RDMA
                // port): the operator's word still applies to them.
                let unplaced: Vec<SessionInfo> = self
                    .unplaced
                    .values()
                    .filter(|s| target.as_ref().is_none_or(|t| &s.key.target == t))
                    .filter(|s| portal.as_ref().is_none_or(|p| &s.key.portal == p))
                    .cloned()
                    .collect();
                if keys.is_empty() && unplaced.is_empty() {
                    return Err(CommandError::NoMatchingSessions);
                }
                let n_unplaced = unplaced.len();
                if !unplaced.is_empty() {
                    self.reconnect_unplaced(unplaced, now);
                }
                if keys.is_empty() {
                    return Ok(format!("logging {n_unplaced} session(s) out and in"));
                }
                let mut pids = BTreeSet::new();
                // The operator's picks on a healthy port open its episode below.
                let mut picks: BTreeMap<PortId, Vec<SessionKey>> = BTreeMap::new();
                for k in &keys {
                    if let Some(s) = self.sessions.get_mut(k) {
                        s.op = None;
                        pids.insert(s.port.clone());
                        if let Some(p) = self.ports.get_mut(&s.port) {
                            let targeted = match p.episode_mut() {
                                Some(e) => &mut e.targeted,
                                None => picks.entry(s.port.clone()).or_default(),
                            };
                            if !targeted.contains(k) {
                                targeted.push(k.clone());
                            }
                        }
                    }
                }
                for pid in &pids {
                    let picked = picks.remove(pid).unwrap_or_default();
                    let mut opened = None;
                    if let Some(p) = self.ports.get_mut(pid) {
                        p.hold = None;
                        let quarantined = p.phase() == Phase::Quarantined;
                        match p.episode_mut() {
                            Some(e) => {
                                for k in picked {
                                    if !e.targeted.contains(&k) {
                                        e.targeted.push(k);
                                    }
                                }
                                e.origin = Origin::Operator;
                                e.attempts = 0;
                                if quarantined {
                                    e.fault = Fault::Operator;
                                    e.since = now;
                                }
                            }
                            None => {
                                let mut e = Episode::new(Fault::Operator, now, Origin::Operator);
                                e.targeted = picked;
                                opened = Some(e);
                            }
                        }
                    }
                    self.reconnect_from(
                        pid,
                        opened,
                        false,
                        "operator asked: iser-guard reconnect".into(),
                        now,
                    );
                    self.evaluate(pid, now);
                }
                Ok(format!(
                    "logging {} session(s) out and in",
                    keys.len() + n_unplaced
                ))
            }
        }
    }

    /// `reconnect` of live sessions no port holds: log each out, then in (operator origin).
    fn reconnect_unplaced(&mut self, list: Vec<SessionInfo>, now: Instant) {
        let timeout = self.policy.iscsiadm_timeout;
        let mut batch = Vec::new();
        for s in list {
            let node = IscsiNode {
                key: s.key.clone(),
                transport: s.transport.clone(),
            };
            let id = self.alloc_id();
            let kind = InFlightKind::OperatorLogout(node.clone());
            self.inflight.insert(
                id,
                InFlight {
                    id,
                    kind,
                    deadline: now.plus(timeout + Duration::from_secs(10)),
                },
            );
            batch.push((
                id,
                format!(
                    "operator asked: iser-guard reconnect; session {} {} is not placed on an \
                     RDMA port, logging it out and in as asked",
                    s.sid, s.key
                ),
                ActionKind::IscsiLogout {
                    sid: s.sid,
                    node,
                    timeout,
                },
            ));
        }
        self.persist(format!(
            "about to log {} session(s) out/in (operator)",
            batch.len()
        ));
        for (id, reason, kind) in batch {
            self.push_with_id(id, None, None, Origin::Operator, reason, kind);
        }
    }

    fn on_operator_logout(&mut self, node: IscsiNode, status: IscsiadmStatus, now: Instant) {
        if !matches!(status, IscsiadmStatus::Success | IscsiadmStatus::NotFound) {
            self.operator_failures.push(format!(
                "{}: iscsiadm --logout: {status:?}; the session was left as it was",
                node.key
            ));
            self.alert(
                now,
                Severity::Error,
                format!("reconnect:{}", node.key),
                format!("reconnect of {}: the logout failed", node.key),
                format!("iscsiadm --logout: {status:?}; the session was left as it was"),
                None,
            );
            self.request_sessions(now, true);
            return;
        }
        let timeout = self.policy.iscsiadm_timeout;
        let id = self.alloc_id();
        self.inflight.insert(
            id,
            InFlight {
                id,
                kind: InFlightKind::OperatorLogin(node.clone()),
                deadline: now.plus(timeout + Duration::from_secs(10)),
            },
        );
        self.persist(format!("about to log {} in (operator)", node.key));
        let reason = format!(
            "operator asked: iser-guard reconnect; logging {} in",
            node.key
        );
        self.push_with_id(
            id,
            None,
            None,
            Origin::Operator,
            reason,
            ActionKind::IscsiLogin { node, timeout },
        );
    }

    fn on_operator_login(&mut self, node: &IscsiNode, status: IscsiadmStatus, now: Instant) {
        self.request_sessions(now, true);
        if matches!(
            status,
            IscsiadmStatus::Success | IscsiadmStatus::AlreadyLoggedIn
        ) {
            self.mark_dirty(format!("{}: reconnected (operator)", node.key));
            return;
        }
        self.operator_failures.push(format!(
            "{}: iscsiadm --login: {status:?}; the session is logged out now",
            node.key
        ));
        self.alert(
            now,
            Severity::Critical,
            format!("reconnect:{}", node.key),
            format!("reconnect of {}: the login failed", node.key),
            format!("iscsiadm --login: {status:?}; the session is logged out now"),
            Some(format!(
                "iscsiadm -m node -T {} -p {} -I {} --login",
                node.key.target, node.key.portal, node.key.iface
            )),
        );
    }

    fn command_ports(
        &mut self,
        device: &str,
        port: Option<u32>,
    ) -> Result<Vec<PortId>, CommandError> {
        let known = self.ports_of_device(device);
        let pids: Vec<PortId> = match port {
            Some(n) => vec![PortId::new(device, n)],
            None => known.clone(),
        };
        if known.is_empty() && !self.devices.contains_key(device) && port.is_none() {
            return Err(CommandError::UnknownDevice(device.to_string()));
        }
        if pids.is_empty() {
            return Ok(vec![PortId::new(device, 1)]);
        }
        Ok(pids)
    }

    fn operator_episode(&mut self, pid: &PortId, recreate: bool, skip_wait: bool, now: Instant) {
        self.port_or_create(pid, now);
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        p.hold = None;
        let phase = p.phase();
        let opened = match p.episode_mut() {
            Some(e) => {
                e.origin = Origin::Operator;
                e.attempts = 0;
                e.listener_gone = false;
                e.needs_recreate = recreate;
                e.skip_target_wait = skip_wait;
                e.fault = Fault::Operator;
                e.since = now;
                None
            }
            None => {
                let mut e = Episode::new(Fault::Operator, now, Origin::Operator);
                e.needs_recreate = recreate;
                e.skip_target_wait = skip_wait;
                Some(e)
            }
        };
        if phase == Phase::ResettingDevice {
            return; // Already being re-created.
        }
        let what = if skip_wait {
            format!("operator asked: iser-guard reset-device {}", pid.device)
        } else {
            format!("operator asked: iser-guard recover {pid}")
        };
        self.transition_in(pid, opened, Stage::Faulted, what, now);
        self.evaluate(pid, now);
    }

    // ---------------------------------------------------------------------------------------
    // The state machine proper
    // ---------------------------------------------------------------------------------------

    fn enter_fault(&mut self, pid: &PortId, fault: Fault, reason: String, now: Instant) {
        self.port_or_create(pid, now);
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let phase = p.phase();
        let Some(e) = p.episode_mut() else {
            // A healthy port: a new episode.
            let mut e = Episode::new(fault.clone(), now, Origin::Automatic);
            e.needs_recreate = matches!(fault, Fault::GsiStuck { .. } | Fault::Operator);
            e.evidence = 1;
            if let Fault::Zombie { session } = &fault {
                e.targeted.push(session.clone());
            }
            self.open_episode(pid, e, Stage::Faulted, reason.clone(), now);
            let severity = match fault {
                Fault::Zombie { .. } | Fault::SessionsDown => Severity::Warning,
                _ => Severity::Error,
            };
            self.alert(
                now,
                severity,
                format!("fault:{pid}"),
                format!("{pid}: {}", fault.describe()),
                reason,
                None,
            );
            self.evaluate(pid, now);
            return;
        };
        e.evidence = e.evidence.saturating_add(1);
        match phase {
            Phase::Healthy | Phase::Quarantined | Phase::ResettingDevice => {}
            _ => match fault {
                Fault::GsiStuck { evidence } if !e.needs_recreate => {
                    e.fault = Fault::GsiStuck { evidence };
                    e.needs_recreate = true;
                    e.listener_gone = false;
                    let stuck_again = e.was_recreated();
                    let attempts = e.attempts;
                    self.alert(
                        now,
                        Severity::Error,
                        format!("fault:{pid}:gsi"),
                        format!("{pid}: {}", Fault::GsiStuck { evidence }.describe()),
                        reason.clone(),
                        None,
                    );
                    self.transition(pid, Stage::awaiting_target(), reason, now);
                    if stuck_again {
                        // QP 1 got stuck again after a re-creation: the target is not really
                        // back. Probe it afresh (hysteresis) and back off before re-creating.
                        for portal in self.down_portals_of(pid) {
                            if let Some(r) = self.portals.get_mut(&portal) {
                                r.consecutive_ok = 0;
                            }
                        }
                    }
                    self.enter_awaiting_target(pid, now);
                    if stuck_again && attempts > 0 {
                        let j = self.jitter();
                        let backoff = self.policy.backoff(attempts, j);
                        if let Some(p) = self.ports.get_mut(pid) {
                            if let Some(Stage::AwaitingTarget { timer, .. }) = p.stage_mut() {
                                *timer = Some((AwaitTimer::Backoff, now.plus(backoff)));
                            }
                            if let Some(e) = p.episode_mut() {
                                e.probes_count_from = Some(now.plus(backoff));
                            }
                        }
                    }
                    self.evaluate(pid, now);
                }
                Fault::DeviceGone if phase != Phase::AwaitingDevice => {
                    e.fault = Fault::DeviceGone;
                    self.transition(pid, Stage::awaiting_device(), reason, now);
                    self.enter_awaiting_device(pid, now);
                }
                _ => {}
            },
        }
    }

    fn evaluate_all(&mut self, now: Instant) {
        let pids: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| p.phase() != Phase::Healthy)
            .map(|p| p.id.clone())
            .collect();
        for pid in pids {
            self.evaluate(&pid, now);
        }
    }

    fn evaluate(&mut self, pid: &PortId, now: Instant) {
        for _ in 0..MAX_STEPS_PER_EVALUATION {
            if !self.step(pid, now) {
                return;
            }
        }
    }

    /// One decision for one port; true if its state changed (evaluate again).
    fn step(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        match p.phase() {
            Phase::Healthy | Phase::Quarantined => false,
            Phase::ResettingDevice => self.step_resetting(pid, now),
            Phase::Faulted => {
                self.decide(pid, now);
                true
            }
            Phase::AwaitingTarget => self.step_awaiting_target(pid, now),
            Phase::AwaitingDevice => self.step_awaiting_device(pid, now),
            Phase::Reconnecting => self.step_reconnect(pid, now),
            Phase::Verifying => self.step_verifying(pid, now),
        }
    }

    /// ResettingDevice: a re-creation whose outcome was lost and that the QP table did not
    /// confirm in time failed.
    fn step_resetting(&mut self, pid: &PortId, now: Instant) -> bool {
        let expired = matches!(
            self.ports.get(pid).and_then(PortRecord::stage),
            Some(Stage::ResettingDevice { verify_until: Some(d) }) if *d <= now
        );
        if !expired {
            return false;
        }
        let device = pid.device.clone();
        self.on_recreate_done(
            &device,
            RecreateResult::Failed {
                reason: "could not verify that it completed (no outcome, QP table did not show \
                         QP 1 in RTS)"
                    .into(),
            },
            now,
        );
        true
    }

    /// AwaitingTarget: healthy again by itself, a dead listener, no portal to probe, the
    /// target back (re-create or reconnect), or the wait given up.
    fn step_awaiting_target(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let (needs_recreate, listener_gone) = p
            .episode()
            .map_or((false, false), |e| (e.needs_recreate, e.listener_gone));
        if !needs_recreate && self.all_healthy(pid) {
            self.become_healthy(
                pid,
                "every session is logged in again: iscsid reconnected by itself, no action was \
                 needed"
                    .into(),
                now,
            );
            return true;
        }
        if listener_gone && !needs_recreate {
            // Only the target side can fix a dead listener; iscsid keeps retrying.
            // Once no rejection came for a while, the listener is probably back.
            // While iscsid still holds a failed session it keeps retrying it; the port
            // stays here (no churn) until the sessions come back.
            let quiet = self.policy.probe_interval.saturating_mul(3);
            let rejected = p.listener_rejected_at.is_some_and(|t| now.since(t) < quiet);
            let retrying = p
                .sessions
                .iter()
                .filter_map(|k| self.sessions.get(k))
                .any(|s| s.present && !s.is_up());
            if rejected || retrying {
                if let Some(stage) = self.stage_mut(pid) {
                    stage.set_deadline(None);
                }
                return false;
            }
            if let Some(e) = self.episode_mut(pid) {
                e.listener_gone = false;
            }
            self.mark_dirty(format!("{pid}: no more rejections from the target"));
        }
        let automatic = self
            .ports
            .get(pid)
            .is_some_and(|p| p.origin() == Origin::Automatic);
        if !self.no_wait(pid) && automatic && self.down_portals_of(pid).is_empty() {
            let Some(p) = self.ports.get(pid) else {
                return false;
            };
            if p.needs_recreate() && p.hold != Some(Hold::NoPortalKnown) {
                let why = p.reason.clone();
                let what = format!("re-create RDMA device {}", pid.device);
                self.set_hold(pid, Hold::NoPortalKnown, &what, &why, now);
            }
            return false;
        }
        if self.target_back(pid) {
            if let Some(p) = self.ports.get_mut(pid) {
                if let Some(stage) = p.stage_mut() {
                    stage.set_deadline(None);
                }
                if let Some(e) = p.episode_mut() {
                    if e.target_back_at.is_none() {
                        e.target_back_at = Some(now);
                    }
                }
            }
            if self.ports.get(pid).is_some_and(PortRecord::needs_recreate) {
                return self.try_recreate(pid, now);
            }
            let grace = self.policy.iscsid_grace.as_secs();
            self.start_reconnect(
                pid,
                true,
                format!(
                    "target answers again ({} consecutive probes); giving iscsid {grace}s to \
                     reconnect by itself",
                    self.policy.probe_successes
                ),
                now,
            );
            return true;
        }
        if self
            .ports
            .get(pid)
            .is_some_and(|p| p.deadline().is_some_and(|d| d <= now))
        {
            let waited = self.policy.target_wait_max.as_secs();
            self.quarantine(
                pid,
                format!(
                    "the target did not answer for {waited}s; automatic recovery gives up waiting"
                ),
                now,
            );
            return true;
        }
        false
    }

    /// AwaitingDevice: the device is back (reconnect), or the wait is over (re-create it).
    fn step_awaiting_device(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let present = self.devices.get(&pid.device).is_none_or(|d| d.present);
        if present {
            self.start_reconnect(
                pid,
                true,
                format!("RDMA device {} is present again", pid.device),
                now,
            );
            return true;
        }
        if p.deadline().is_some_and(|d| d <= now) || p.needs_recreate() {
            if let Some(p) = self.ports.get_mut(pid) {
                if let Some(stage) = p.stage_mut() {
                    stage.set_deadline(None);
                }
                if let Some(e) = p.episode_mut() {
                    e.needs_recreate = true;
                }
            }
            return self.try_recreate(pid, now);
        }
        false
    }

    /// Verifying: every session back (healthy), or the deadline judged on a fresh list.
    fn step_verifying(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let fresh = self.last_sessions_at.is_some_and(|t| t >= p.since);
        if fresh && self.verified(pid) {
            self.become_healthy(
                pid,
                "every session is logged in with its disks running".into(),
                now,
            );
            return true;
        }
        let Some(Stage::Verifying {
            deadline,
            list_asked_at,
        }) = p.stage()
        else {
            return false;
        };
        if deadline.is_some_and(|d| d <= now) {
            // Judge on a session list taken at the deadline, never on an older one
            // (the session may be back under a new SID already).
            let asked = list_asked_at.unwrap_or(now);
            if self.last_sessions_at.is_none_or(|t| t < asked) {
                let wait = self.policy.session_refresh;
                if let Some(Stage::Verifying {
                    deadline,
                    list_asked_at,
                }) = self.stage_mut(pid)
                {
                    *list_asked_at = Some(asked);
                    *deadline = Some(now.plus(wait));
                }
                self.request_sessions(now, true);
                return false;
            }
            let secs = self.policy.verify_timeout.as_secs();
            // Name what is missing: the sessions still down, or (all of them up)
            // the re-created device's fresh QP 1 never seen in RTS.
            let why = if !self.all_healthy(pid) {
                format!(
                    "sessions not back within {secs}s after the reconnect: {}",
                    self.down_sessions_text(pid)
                )
            } else if !self.fresh_qp_ok(pid) {
                format!(
                    "every session is logged in, but the QP table did not show {pid}'s new GSI \
                     QP 1 in RTS within {secs}s after the re-creation"
                )
            } else {
                format!("{pid} has no session, and its device was not re-created")
            };
            self.after_failed_attempt(pid, why, now);
            return true;
        }
        false
    }

    /// Phase Faulted: choose the repair.
    fn decide(&mut self, pid: &PortId, now: Instant) {
        let Some(p) = self.ports.get(pid) else {
            return;
        };
        let fault = p.fault().cloned().unwrap_or(Fault::SessionsDown);
        let needs_recreate = p.needs_recreate();
        match fault {
            Fault::DeviceGone => {
                let r = format!(
                    "waiting up to {}s for {} to come back before re-creating it",
                    self.policy.device_wait.as_secs(),
                    pid.device
                );
                self.transition(pid, Stage::awaiting_device(), r, now);
                self.enter_awaiting_device(pid, now);
            }
            Fault::Zombie { .. } => {
                self.start_reconnect(
                    pid,
                    false,
                    "logging the zombie session out and in".into(),
                    now,
                );
            }
            Fault::Operator if !needs_recreate => {
                self.start_reconnect(pid, false, "operator asked for a reconnect".into(), now);
            }
            Fault::GsiStuck { .. } | Fault::Operator | Fault::SessionsDown => {
                let reason = if needs_recreate {
                    if self.no_wait(pid) {
                        "re-creating the device without waiting for the target".to_string()
                    } else {
                        format!(
                            "waiting for the target to answer ({} consecutive probes) before \
                             re-creating {} (recovery.reset-when = target-back)",
                            self.policy.probe_successes, pid.device
                        )
                    }
                } else {
                    "probing the target; iscsid keeps retrying meanwhile".to_string()
                };
                self.transition(pid, Stage::awaiting_target(), reason, now);
                self.enter_awaiting_target(pid, now);
            }
        }
    }

    fn enter_awaiting_target(&mut self, pid: &PortId, now: Instant) {
        let max = self.policy.target_wait_max;
        if let Some(p) = self.ports.get_mut(pid) {
            if let Some(stage) = p.stage_mut() {
                stage.set_deadline(Some(now.plus(max)));
            }
            if let Some(e) = p.episode_mut() {
                e.target_back_at = None;
                e.probes_count_from = Some(now);
            }
        }
        if !self.no_wait(pid) {
            self.start_probes(pid, now);
        }
    }

    fn enter_awaiting_device(&mut self, pid: &PortId, now: Instant) {
        let wait = self.policy.device_wait;
        if let Some(stage) = self.stage_mut(pid) {
            stage.set_deadline(Some(now.plus(wait)));
        }
        self.request_topology(now);
    }

    fn no_wait(&self, pid: &PortId) -> bool {
        self.policy.reset_when == ResetWhen::Immediately
            || self.policy.probe_method == ProbeMethod::None
            || self
                .ports
                .get(pid)
                .and_then(PortRecord::episode)
                .is_some_and(|e| e.skip_target_wait)
    }

    fn target_back(&self, pid: &PortId) -> bool {
        if self.no_wait(pid) {
            return true;
        }
        // Every portal with a session to restore must answer: re-creating the device while
        // one of them is still dead would only get QP 1 stuck again on the next CM retry.
        // Only probes started since the wait began count (a success from an earlier episode
        // says nothing about the target now), N in a row, the newest result winning.
        let portals = self.down_portals_of(pid);
        if portals.is_empty() {
            // Nothing to probe: an operator's word goes; automatic recovery holds
            // (`Hold::NoPortalKnown`).
            return self
                .ports
                .get(pid)
                .is_some_and(|p| p.origin() == Origin::Operator);
        }
        let from = self
            .ports
            .get(pid)
            .and_then(PortRecord::episode)
            .map_or(Instant::ZERO, |e| e.probes_count_from.unwrap_or(e.since));
        let n = self.policy.probe_successes.max(1);
        portals.iter().all(|pt| {
            self.portals
                .get(pt)
                .is_some_and(|r| r.successes_since(from) >= n)
        })
    }

    /// Portals of the sessions of this port that are not up (all portals if none is down).
    fn down_portals_of(&self, pid: &PortId) -> Vec<Portal> {
        let Some(p) = self.ports.get(pid) else {
            return Vec::new();
        };
        let mut v: Vec<Portal> = p
            .sessions
            .iter()
            .filter_map(|k| self.sessions.get(k))
            .filter(|s| !s.is_up())
            .map(|s| s.key.portal.clone())
            .collect();
        if v.is_empty() {
            return self.portals_of(pid);
        }
        v.sort();
        v.dedup();
        v
    }

    fn start_probes(&mut self, pid: &PortId, now: Instant) {
        let timeout = self.policy.probe_timeout;
        for portal in self.down_portals_of(pid) {
            let rec = self
                .portals
                .entry(portal.clone())
                .or_insert_with(|| PortalRecord::new(portal.clone()));
            if rec.inflight.is_some() {
                continue;
            }
            let id = self.alloc_id();
            if let Some(rec) = self.portals.get_mut(&portal) {
                rec.inflight = Some(id);
                rec.inflight_started = Some(now);
            }
            self.inflight.insert(
                id,
                InFlight {
                    id,
                    kind: InFlightKind::Probe(portal.clone()),
                    deadline: now.plus(timeout + Duration::from_secs(1)),
                },
            );
            self.push_with_id(
                id,
                Some(pid.clone()),
                None,
                Origin::Automatic,
                format!("is the target at {portal} back?"),
                ActionKind::ProbePortal {
                    portal: portal.clone(),
                    timeout,
                },
            );
        }
        let interval = self.policy.probe_interval;
        if let Some(Stage::AwaitingTarget { timer, .. }) = self.stage_mut(pid) {
            *timer = Some((AwaitTimer::ProbeRound, now.plus(interval)));
        }
        // Timers and probes in flight are journaled too: a restart must not replay them.
        self.mark_dirty(format!("{pid}: probing"));
    }

    /// The authorisation hold the driver put on this port, if it still stands. The engine
    /// does not decide authorisation (dry-run, pause, allow-list): the driver does, once per
    /// action, and reports a refusal as [`Outcome::Planned`]; the hold it leaves stays until a
    /// transition, a policy reload, `resume` or an operator command clears it.
    fn destructive_hold(&self, pid: &PortId) -> Option<Hold> {
        self.ports
            .get(pid)
            .and_then(|p| p.hold.clone())
            .filter(|h| matches!(h, Hold::DryRun | Hold::Paused | Hold::NotAllowed))
    }

    fn set_hold(&mut self, pid: &PortId, hold: Hold, what: &str, why: &str, now: Instant) {
        let changed = self
            .ports
            .get(pid)
            .is_some_and(|p| p.hold.as_ref() != Some(&hold));
        let repeat = self.policy.alert_repeat_interval;
        let recent = self
            .ports
            .get(pid)
            .is_some_and(|p| p.hold_alerted_at.is_some_and(|t| now.since(t) < repeat));
        if !changed && recent {
            return; // Already decided and alerted within the repeat interval.
        }
        if let Some(p) = self.ports.get_mut(pid) {
            p.hold = Some(hold.clone());
            p.hold_alerted_at = Some(now);
        }
        let down = self.down_sessions_text(pid);
        let device = &pid.device;
        let (severity, kind, summary, remedy) = match &hold {
            Hold::DryRun => (
                Severity::Warning,
                "dry-run",
                format!("dry-run: would {what}"),
                Some(format!(
                    "set recovery.dry-run = false, or do it by hand: iser-guard recover {pid}"
                )),
            ),
            Hold::Paused => (
                Severity::Info,
                "paused",
                format!("paused: would {what}"),
                Some("iser-guard resume".to_string()),
            ),
            Hold::NotAllowed => (
                // An operator-action alert (alerts.severity-operator), not a fault.
                Severity::Critical,
                "not-allowed",
                format!("{device} is not in devices.allow: will not {what}"),
                Some(format!(
                    "add \"{device}\" to devices.allow in the configuration, or run: \
                     iser-guard recover {pid}"
                )),
            ),
            Hold::OtherSessionsHealthy { sessions } => (
                Severity::Critical,
                "other-sessions",
                format!(
                    "{pid}: re-creating {device} would drop {} healthy session(s); waiting for \
                     the operator",
                    sessions.len()
                ),
                Some(format!(
                    "iser-guard recover {pid}   (or set recovery.other-sessions = \"proceed\")"
                )),
            ),
            Hold::WaitingForSlot { busy } => (
                Severity::Info,
                "slot",
                format!("{pid}: waiting for the re-creation of {busy} to finish (one at a time)"),
                None,
            ),
            Hold::NoPortalKnown => (
                Severity::Critical,
                "no-portal",
                format!(
                    "{pid}: no target portal is known for this port, so iser-guard cannot tell \
                     when the target is back: will not {what} on its own"
                ),
                Some(format!(
                    "check that the iSCSI sessions of {device} are placed on {pid} \
                     (`iser-guard status`), or re-create it by hand once the target answers: \
                     iser-guard recover {pid}"
                )),
            ),
        };
        if changed {
            self.mark_dirty(format!("{pid}: hold {kind}"));
        }
        let mut detail = format!("{why}. Sessions waiting: {down}");
        if let Hold::OtherSessionsHealthy { sessions } = &hold {
            let list: Vec<String> = sessions.iter().map(|k| k.to_string()).collect();
            detail.push_str(&format!(
                ". Healthy sessions that would drop: {}",
                list.join("; ")
            ));
        }
        self.mark_reported(pid);
        self.alert(
            now,
            severity,
            format!("hold:{pid}:{kind}"),
            summary,
            detail,
            remedy,
        );
    }

    /// Target back (or no wait): re-create the device if everything allows it.
    fn try_recreate(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        if p.wake()
            .is_some_and(|(k, at)| k == TimerKind::Backoff && at > now)
        {
            return false;
        }
        if !self.scanned {
            // Started (or restarted) and not looked at the host yet: a journal's view may be
            // stale, so nothing destructive until the first complete scan.
            return false;
        }
        let device = pid.device.clone();
        let origin = p.origin();
        let attempt = p.attempts() + 1;
        if p.attempts() >= self.policy.max_attempts && origin == Origin::Automatic {
            let n = p.attempts();
            self.quarantine(
                pid,
                format!("{n} re-creation attempt(s) of {device} did not bring the port back"),
                now,
            );
            return true;
        }
        let why = p.reason.clone();
        let what = format!("re-create RDMA device {device} (attempt {attempt})");
        if let Some(hold) = self.destructive_hold(pid) {
            self.set_hold(pid, hold, &what, &why, now);
            return false;
        }
        if origin == Origin::Automatic && self.policy.other_sessions == OtherSessions::Wait {
            let others = self.healthy_sessions_of_device(&device);
            if !others.is_empty() {
                self.set_hold(
                    pid,
                    Hold::OtherSessionsHealthy { sessions: others },
                    &what,
                    &why,
                    now,
                );
                return false;
            }
        }
        if let Some(busy) = self.recreating.clone() {
            if busy == device {
                if let Some(p) = self.ports.get_mut(pid) {
                    p.hold = None;
                }
                self.transition(
                    pid,
                    Stage::resetting_device(),
                    format!("joining the re-creation of {device} already in progress"),
                    now,
                );
                return true;
            }
            if self.ports.get(pid).is_some_and(|p| p.hold.is_none()) {
                self.set_hold(pid, Hold::WaitingForSlot { busy }, &what, &why, now);
            }
            return false;
        }
        let present = self.devices.get(&device).is_none_or(|d| d.present);
        let (parent, driver, remembered) = self
            .devices
            .get(&device)
            .map(|d| (d.parent.clone(), d.driver.clone(), d.remembered.clone()))
            .unwrap_or((None, None, None));
        if !present && remembered.is_none() && parent.is_none() {
            // Gone, and never seen while it existed (deleted before this daemon started,
            // with a journal that did not remember it): nothing to re-create it from. An
            // attempt would only fail; the operator gets the commands instead.
            self.refuse_unknown_device(pid, &device, now);
            return true;
        }
        // Go.
        let id = self.alloc_id();
        self.device_or_create(&device).recreation = Some(Recreation {
            id,
            attempt,
            started: now,
            state: RecreationState::InFlight,
            origin,
        });
        self.recreating = Some(device.clone());
        self.inflight.insert(
            id,
            InFlight {
                id,
                kind: InFlightKind::Recreate(device.clone()),
                deadline: now.plus(self.policy.recreate_timeout),
            },
        );
        let reason = if origin == Origin::Operator {
            format!("operator asked: re-creating {device} (attempt {attempt})")
        } else if !present {
            let from = remembered
                .as_ref()
                .map(|r| format!("its remembered {}", r.describe()))
                .unwrap_or_else(|| "its parent PCI function".into());
            format!(
                "{device} is gone and did not come back within {}s: re-creating it from {from} \
                 (attempt {attempt})",
                self.policy.device_wait.as_secs()
            )
        } else if self.no_wait(pid) {
            format!(
                "re-creating {device} at once (attempt {attempt}, recovery.reset-when = \
                 immediately) to give the port a fresh QP 1"
            )
        } else if self.down_portals_of(pid).is_empty() || self.portals_of(pid).is_empty() {
            format!("re-creating {device} (attempt {attempt}) to give the port a fresh QP 1")
        } else {
            format!(
                "the target answers again ({} consecutive probes): re-creating {device} \
                 (attempt {attempt}) to give the port a fresh QP 1",
                self.policy.probe_successes
            )
        };
        for q in self.ports_of_device(&device) {
            let join = q == *pid
                || self.ports.get(&q).is_some_and(|r| {
                    !r.sessions.is_empty()
                        && !matches!(r.phase(), Phase::ResettingDevice | Phase::Quarantined)
                });
            if !join {
                continue;
            }
            let mut opened = None;
            if let Some(r) = self.ports.get_mut(&q) {
                r.hold = None;
                match r.episode_mut() {
                    Some(e) if q == *pid => {
                        e.attempts = attempt;
                        e.attempt_recreated = true;
                    }
                    Some(_) => {}
                    // A healthy port of the device: its sessions drop with the device.
                    None => opened = Some(Episode::new(Fault::SessionsDown, now, origin)),
                }
            }
            let r = if q == *pid {
                reason.clone()
            } else {
                format!("{device} is being re-created for {pid}: its sessions will reconnect")
            };
            self.transition_in(&q, opened, Stage::resetting_device(), r, now);
        }
        self.persist(format!("about to re-create {device}, attempt {attempt}"));
        let method = if present {
            RecreateMethod::Auto
        } else {
            RecreateMethod::FromParent
        };
        self.push_with_id(
            id,
            Some(pid.clone()),
            Some(device.clone()),
            origin,
            reason.clone(),
            ActionKind::RecreateDevice {
                device: device.clone(),
                parent,
                driver,
                method,
                attempt,
                remembered,
            },
        );
        let max = self.policy.max_attempts;
        self.alert(
            now,
            Severity::Warning,
            format!("recreate:{device}:{attempt}"),
            format!("re-creating RDMA device {device} (attempt {attempt} of {max})"),
            reason,
            None,
        );
        true
    }

    fn start_reconnect(&mut self, pid: &PortId, grace: bool, reason: String, now: Instant) {
        self.reconnect_from(pid, None, grace, reason, now);
    }

    /// Enters Reconnecting (opening `episode` if the port was healthy): iscsid gets its grace
    /// period first when `grace`, else sessions are logged in on the next fresh list.
    fn reconnect_from(
        &mut self,
        pid: &PortId,
        episode: Option<Episode>,
        grace: bool,
        reason: String,
        now: Instant,
    ) {
        let g = self.policy.iscsid_grace;
        let stage = if grace && !g.is_zero() {
            Stage::Reconnecting {
                timer: Some((ReconnectTimer::Grace, now.plus(g))),
                ops_not_before: None,
            }
        } else {
            Stage::Reconnecting {
                timer: None,
                ops_not_before: Some(now),
            }
        };
        self.transition_in(pid, episode, stage, reason, now);
        let keys = self
            .ports
            .get(pid)
            .map(|p| p.sessions.clone())
            .unwrap_or_default();
        for k in keys {
            if let Some(s) = self.sessions.get_mut(&k) {
                if !matches!(
                    s.op,
                    Some(SessionOp::LoggingIn(_) | SessionOp::LoggingOut(_))
                ) {
                    s.op = None;
                }
            }
        }
        self.request_sessions(now, true);
    }

    fn step_reconnect(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let targeted_keys: &[SessionKey] = p.episode().map_or(&[], |e| &e.targeted);
        let ops_not_before = match p.stage() {
            Some(Stage::Reconnecting { ops_not_before, .. }) => *ops_not_before,
            _ => None,
        };
        let mut inflight = 0usize;
        let mut failed = 0usize;
        let mut done = 0usize;
        let mut need: Vec<SessionKey> = Vec::new();
        let mut waiting = 0usize;
        // The operator's `recover`/`reset-device` reconnects what is still down after the
        // grace, as its plan says; automatic recovery leaves held sessions to iscsid.
        let operator = p.origin() == Origin::Operator;
        for k in &p.sessions {
            let Some(s) = self.sessions.get(k) else {
                continue;
            };
            let targeted = targeted_keys.contains(k);
            match &s.op {
                Some(SessionOp::LoggingIn(_) | SessionOp::LoggingOut(_)) => inflight += 1,
                Some(SessionOp::Failed(_)) => failed += 1,
                Some(SessionOp::Done) => done += 1,
                Some(SessionOp::LoggedOut) => need.push(k.clone()),
                None => {
                    if targeted || !s.present || (operator && !s.is_healthy()) {
                        // A zombie or an operator's pick is logged out and in; a session
                        // iscsid dropped is logged in.
                        need.push(k.clone());
                    } else if !s.is_healthy() {
                        // iscsid still holds it and keeps retrying: never log it out (that
                        // removes the session and its disks while the target may come back).
                        waiting += 1;
                    }
                }
            }
        }
        if inflight == 0
            && failed == 0
            && done == 0
            && targeted_keys.is_empty()
            && self.verified(pid)
        {
            self.become_healthy(
                pid,
                "every session is logged in again: iscsid reconnected them, no login was needed"
                    .into(),
                now,
            );
            return true;
        }
        if p.wake()
            .is_some_and(|(k, at)| matches!(k, TimerKind::Grace | TimerKind::Backoff) && at > now)
        {
            return false;
        }
        if need.is_empty() {
            if inflight > 0 {
                return false;
            }
            let grace_over =
                ops_not_before.is_some_and(|t| self.last_sessions_at.is_some_and(|s| s >= t));
            if failed == 0 && waiting > 0 && !grace_over {
                // Judge the sessions iscsid is retrying on a list taken after the grace.
                if ops_not_before.is_none() {
                    self.set_ops_not_before(pid, now);
                }
                self.request_sessions(now, false);
                return false;
            }
            if failed == 0 && waiting > 0 && !p.needs_recreate() {
                let answering = self.answering_portals(pid);
                if !answering.is_empty() {
                    let list = answering
                        .iter()
                        .map(|p| p.to_string())
                        .collect::<Vec<_>>()
                        .join(", ");
                    return self.target_refuses_logins(
                        pid,
                        format!(
                            "the portal {list} answers TCP, yet iscsid could not log the \
                             session(s) in again within its grace period"
                        ),
                        now,
                    );
                }
            }
            if failed > 0 {
                let why = self
                    .ports
                    .get(pid)
                    .map(|p| {
                        p.sessions
                            .iter()
                            .filter_map(|k| self.sessions.get(k))
                            .filter_map(|s| match &s.op {
                                Some(SessionOp::Failed(e)) => Some(format!("{}: {e}", s.key)),
                                _ => None,
                            })
                            .collect::<Vec<_>>()
                            .join("; ")
                    })
                    .unwrap_or_default();
                self.after_failed_attempt(pid, format!("reconnect failed: {why}"), now);
                return true;
            }
            let verify = self.policy.verify_timeout;
            self.transition(
                pid,
                Stage::Verifying {
                    deadline: Some(now.plus(verify)),
                    list_asked_at: None,
                },
                "logins done; waiting for the sessions to show LOGGED_IN with running disks".into(),
                now,
            );
            self.request_sessions(now, true);
            return true;
        }
        // Only act on a session list taken after the grace period or back-off ended, so a
        // session iscsid has just restored is never logged out.
        let fresh = match ops_not_before {
            Some(t) => self.last_sessions_at.is_some_and(|s| s >= t),
            None => false,
        };
        if !fresh {
            if ops_not_before.is_none() {
                self.set_ops_not_before(pid, now);
            }
            self.request_sessions(now, false);
            return false;
        }
        if !self.scanned {
            return false; // No login/logout before the first complete scan.
        }
        let origin = p.origin();
        let listener_gone = p.episode().is_some_and(|e| e.listener_gone);
        let targeted = targeted_keys.to_vec();
        let what = format!("log {} session(s) on {pid} out and in", need.len());
        if let Some(hold) = self.destructive_hold(pid) {
            let why = p.reason.clone();
            self.set_hold(pid, hold, &what, &why, now);
            return false;
        }
        if let Some(p) = self.ports.get_mut(pid) {
            p.hold = None;
        }
        let timeout = self.policy.iscsiadm_timeout;
        let mut batch = Vec::new();
        for k in need {
            let Some(s) = self.sessions.get(&k) else {
                continue;
            };
            let is_targeted = targeted.contains(&k);
            if listener_gone && s.present && !is_targeted && s.op.is_none() {
                continue; // iscsid retries it; only the target side can fix the listener.
            }
            let node = IscsiNode {
                key: k.clone(),
                transport: s.transport.clone(),
            };
            let logout_first =
                s.op.is_none() && s.present && (s.state != SessionState::LoggedIn || is_targeted);
            let (sid, state_name) = (s.sid, s.state.name());
            let id = self.alloc_id();
            let (kind, op, inf, reason) = match (logout_first, sid) {
                (true, Some(sid)) => (
                    ActionKind::IscsiLogout { sid, node, timeout },
                    SessionOp::LoggingOut(id),
                    InFlightKind::Logout(k.clone()),
                    format!(
                        "session {sid} {k} is {} after the grace period: logging it out first",
                        if is_targeted { "broken" } else { state_name }
                    ),
                ),
                _ => (
                    ActionKind::IscsiLogin { node, timeout },
                    SessionOp::LoggingIn(id),
                    InFlightKind::Login(k.clone()),
                    format!("restoring session {k}"),
                ),
            };
            if let Some(s) = self.sessions.get_mut(&k) {
                s.op = Some(op);
            }
            self.inflight.insert(
                id,
                InFlight {
                    id,
                    kind: inf,
                    deadline: now.plus(timeout + Duration::from_secs(10)),
                },
            );
            batch.push((id, reason, kind));
        }
        if batch.is_empty() {
            return false;
        }
        self.persist(format!(
            "about to log {} session(s) on {pid} out/in",
            batch.len()
        ));
        for (id, reason, kind) in batch {
            self.push_with_id(
                id,
                Some(pid.clone()),
                Some(pid.device.clone()),
                origin,
                reason,
                kind,
            );
        }
        false
    }

    /// Portals of this port's down sessions whose latest probe (in this episode) answered.
    fn answering_portals(&self, pid: &PortId) -> Vec<Portal> {
        let Some(p) = self.ports.get(pid) else {
            return Vec::new();
        };
        let from = p.episode().map_or(Instant::ZERO, |e| e.since);
        self.down_portals_of(pid)
            .into_iter()
            .filter(|pt| {
                self.portals
                    .get(pt)
                    .is_some_and(|r| r.consecutive_ok > 0 && r.successes_since(from) > 0)
            })
            .collect()
    }

    /// The target answers TCP but does not accept iSER logins (its listener died, e.g. its
    /// RDMA device was re-created). Recognised from login outcomes and session states, so it
    /// works without the `RDMA CM: REJECTED` line (pr_debug on 6.1). Nothing local can fix
    /// it: no re-creation, no logout; one target-side alert; the port waits in
    /// AwaitingTarget (probing) until iscsid brings the sessions back.
    fn target_refuses_logins(&mut self, pid: &PortId, evidence: String, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        if p.episode().is_some_and(|e| e.listener_gone) {
            return false;
        }
        let targets = self.targets_of(pid);
        let portals = self.answering_portals(pid);
        self.transition(
            pid,
            Stage::awaiting_target(),
            format!(
                "{evidence}: the target does not accept iSER logins; only the target side can \
                 fix that, so nothing is re-created or logged out (iscsid keeps retrying)"
            ),
            now,
        );
        if let Some(e) = self.episode_mut(pid) {
            e.listener_gone = true;
        }
        self.enter_awaiting_target(pid, now);
        let portal_list = portals
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let remedy = format!(
            "on the target, re-enable iSER on the portal, e.g. with LIO: \
             echo 0 > /sys/kernel/config/target/iscsi/{t}/tpgt_1/np/{p}/iser; \
             echo 1 > /sys/kernel/config/target/iscsi/{t}/tpgt_1/np/{p}/iser",
            t = targets
                .first()
                .cloned()
                .unwrap_or_else(|| "TARGET_IQN".into()),
            p = portals
                .first()
                .map(|p| p.to_string())
                .unwrap_or_else(|| "PORTAL".into()),
        );
        self.mark_reported(pid);
        let down = self.down_sessions_text(pid);
        self.alert(
            now,
            Severity::Error,
            format!("listener:{pid}"),
            format!("target portal {portal_list} answers TCP but does not accept iSER logins"),
            format!(
                "{evidence}. The target's iSER listener is probably gone (for example its RDMA \
                 device was re-created). iser-guard will not re-create {} or log sessions out; \
                 it keeps probing and iscsid keeps retrying. Sessions waiting: {down}",
                pid.device
            ),
            Some(remedy),
        );
        true
    }

    /// An attempt failed: back off, or quarantine when attempts are exhausted.
    fn after_failed_attempt(&mut self, pid: &PortId, reason: String, now: Instant) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let was_reconnect = matches!(p.phase(), Phase::Reconnecting | Phase::Verifying);
        let most = self.policy.max_attempts.max(1);
        let attempts = match p.episode_mut() {
            Some(e) => {
                if was_reconnect {
                    if e.attempt_recreated {
                        // The reconnect after a re-creation is part of that attempt.
                        e.attempt_recreated = false;
                    } else {
                        e.attempts = e.attempts.saturating_add(1);
                    }
                }
                e.attempts = e.attempts.min(most);
                e.attempts
            }
            None => 0,
        };
        let keys = p.sessions.clone();
        for k in keys {
            if let Some(s) = self.sessions.get_mut(&k) {
                if matches!(s.op, Some(SessionOp::Failed(_) | SessionOp::Done)) {
                    s.op = None;
                }
            }
        }
        if attempts >= self.policy.max_attempts {
            self.quarantine(
                pid,
                format!("{reason}; {attempts} attempt(s) exhausted"),
                now,
            );
            return;
        }
        let j = self.jitter();
        let backoff = self.policy.backoff(attempts.max(1), j);
        let msg = format!("{reason}; next attempt in {}s", backoff.as_secs());
        let stage = if was_reconnect {
            Stage::Reconnecting {
                timer: Some((ReconnectTimer::Backoff, now.plus(backoff))),
                ops_not_before: None,
            }
        } else {
            Stage::AwaitingTarget {
                deadline: Some(now.plus(self.policy.target_wait_max)),
                timer: Some((AwaitTimer::Backoff, now.plus(backoff))),
            }
        };
        self.transition(pid, stage, msg.clone(), now);
        self.alert(
            now,
            Severity::Error,
            format!("failed:{pid}:{attempts}"),
            format!("{pid}: attempt {attempts} failed"),
            msg,
            None,
        );
    }

    /// The device is gone and nothing about it is remembered: quarantine the port with an
    /// alert whose remedy is the command that re-creates it by hand.
    fn refuse_unknown_device(&mut self, pid: &PortId, device: &str, now: Instant) {
        let reason = format!(
            "RDMA device {device} is gone and iser-guard never saw it while it existed (it \
             was deleted before the daemon started, or the journal predates remembering \
             devices), so it does not know the netdev or PCI function to re-create it from"
        );
        let down = self.down_sessions_text(pid);
        self.transition(pid, Stage::Quarantined, reason.clone(), now);
        self.mark_reported(pid);
        self.alert(
            now,
            Severity::Critical,
            format!("quarantine:{pid}"),
            format!("{pid}: RDMA device {device} is gone and cannot be re-created automatically"),
            format!(
                "{reason}; {}. Sessions not restored: {down}",
                crate::reset_plan::manual_recreate_hint(device)
            ),
            Some(format!(
                "rdma link add {device} type rxe netdev NETDEV   # Soft-RoCE; hardware: rebind \
                 its RDMA driver; then: iser-guard recover {pid}"
            )),
        );
    }

    fn quarantine(&mut self, pid: &PortId, reason: String, now: Instant) {
        let down = self.down_sessions_text(pid);
        self.transition(pid, Stage::Quarantined, reason.clone(), now);
        self.mark_reported(pid);
        self.alert(
            now,
            Severity::Critical,
            format!("quarantine:{pid}"),
            format!("{pid}: automatic recovery stopped, an operator must act"),
            format!("{reason}. Sessions not restored: {down}"),
            Some(format!("iser-guard recover {pid}")),
        );
    }

    fn become_healthy(&mut self, pid: &PortId, reason: String, now: Instant) {
        let Some(p) = self.ports.get(pid) else {
            return;
        };
        let ep = p.episode();
        let since = ep.map(|e| e.since);
        let evidence = ep.map_or(0, |e| e.evidence);
        let recreated = ep.is_some_and(Episode::was_recreated);
        let unverified_qp = ep.is_some_and(Episode::awaiting_fresh_qp);
        let attempts = ep.map_or(0, |e| e.attempts);
        let n = self
            .ports
            .get(pid)
            .map(|p| {
                p.sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .filter(|s| s.is_healthy())
                    .count()
            })
            .unwrap_or(0);
        let qp = if !recreated {
            String::new()
        } else if unverified_qp {
            " The device's new QP 1 was not verified: the RDMA netlink QP table is not \
             available on this host."
                .to_string()
        } else {
            " The device's new GSI QP 1 was seen in RTS in the QP table.".to_string()
        };
        self.transition_healthy(pid, reason.clone(), now);
        let keys = self
            .ports
            .get(pid)
            .map(|p| p.sessions.clone())
            .unwrap_or_default();
        for k in keys {
            if let Some(s) = self.sessions.get_mut(&k) {
                s.op = None;
                s.reported = false;
                s.io_errors.clear();
            }
        }
        for prefix in ["fault:", "hold:", "listener:", "quarantine:", "failed:"] {
            self.gate.reset(&format!("{prefix}{pid}"));
        }
        let down_for = since.map(|s| now.since(s).as_secs()).unwrap_or(0);
        let how = if recreated {
            format!("the device was re-created ({attempts} attempt(s))")
        } else {
            "no device re-creation was needed".to_string()
        };
        let summary = if n == 0 {
            format!("{pid}: recovered; no iSCSI session is known on this port to verify")
        } else {
            format!("{pid}: storage is back ({n} session(s) logged in)")
        };
        self.alert(
            now,
            Severity::Info,
            format!("healthy:{pid}:{}", now.as_millis()),
            summary,
            format!(
                "{reason}. Down for {down_for}s; {how}; the fault was reported {evidence} \
                 time(s).{qp}"
            ),
            None,
        );
    }

    /// A quarantined port does nothing automatically, so every session that goes down there
    /// is named in an alert: nothing is lost silently.
    fn report_quarantined_losses(&mut self, pid: &PortId, now: Instant) {
        let Some(p) = self.ports.get(pid) else {
            return;
        };
        if p.phase() != Phase::Quarantined {
            return;
        }
        let unreported: Vec<String> = p
            .sessions
            .iter()
            .filter_map(|k| self.sessions.get(k))
            .filter(|s| !s.is_healthy() && !s.reported)
            .map(describe_session)
            .collect();
        if unreported.is_empty() {
            return;
        }
        self.mark_reported(pid);
        self.alert(
            now,
            Severity::Error,
            format!("quarantine-down:{pid}"),
            format!("{pid} is quarantined and more sessions are down"),
            format!("not restored automatically: {}", unreported.join("; ")),
            Some(format!("iser-guard recover {pid}")),
        );
    }

    fn slot_freed(&mut self, now: Instant) {
        let waiting: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| matches!(p.hold, Some(Hold::WaitingForSlot { .. })))
            .map(|p| p.id.clone())
            .collect();
        for pid in waiting {
            if let Some(p) = self.ports.get_mut(&pid) {
                p.hold = None;
            }
            self.evaluate(&pid, now);
        }
    }

    fn rename_device(&mut self, from: &str, to: &str, now: Instant) {
        if from == to {
            return;
        }
        if let Some(mut d) = self.devices.remove(from) {
            d.name = to.to_string();
            self.devices.insert(to.to_string(), d);
        }
        if self.recreating.as_deref() == Some(from) {
            self.recreating = Some(to.to_string());
        }
        let moved: Vec<(PortId, Instant)> = self
            .gsi_rts_at
            .iter()
            .filter(|(pid, _)| pid.device == from)
            .map(|(pid, at)| (PortId::new(to, pid.port), *at))
            .collect();
        self.gsi_rts_at.retain(|pid, _| pid.device != from);
        self.gsi_rts_at.extend(moved);
        for pid in self.ports_of_device(from) {
            if let Some(mut p) = self.ports.remove(&pid) {
                let new = PortId::new(to, pid.port);
                p.id = new.clone();
                for k in &p.sessions {
                    if let Some(s) = self.sessions.get_mut(k) {
                        s.port = new.clone();
                    }
                }
                self.ports.insert(new, p);
            }
        }
        for i in self.inflight.values_mut() {
            if i.kind == InFlightKind::Recreate(from.to_string()) {
                i.kind = InFlightKind::Recreate(to.to_string());
            }
        }
        self.mark_dirty(format!("device {from} renamed to {to}"));
        if !self.policy.allows(to) && self.policy.allows(from) {
            self.alert(
                now,
                Severity::Warning,
                format!("renamed:{from}:{to}"),
                format!("RDMA device {from} is now named {to}, which is not in devices.allow"),
                "udev normally renames a re-created device back; check the rdma-core naming \
                 rules"
                    .into(),
                Some(format!(
                    "add \"{to}\" to devices.allow if this name is permanent"
                )),
            );
        }
    }

    // ---------------------------------------------------------------------------------------
    // Helpers
    // ---------------------------------------------------------------------------------------

    /// A session seen with trouble (connection error, recovery timeout) is not forgotten if
    /// it vanishes: that was no clean logout.
    fn mark_troubled(&mut self, sid: u32) {
        if let Some(key) = self.by_sid.get(&sid).cloned() {
            if let Some(rec) = self.sessions.get_mut(&key) {
                rec.troubled = true;
            }
        }
    }

    /// A session placed on `old` may be placed elsewhere by a scan only while `old` is
    /// healthy and its device present: while a port recovers (its device gone or being
    /// re-created, its sessions failed), a scan that places the session on another device
    /// guesses, and the other device must never be blamed.
    fn may_move(&self, old: &PortId) -> bool {
        let healthy = self
            .ports
            .get(old)
            .is_none_or(|p| p.phase() == Phase::Healthy);
        let present = self.devices.get(&old.device).is_none_or(|d| d.present);
        healthy && present
    }

    fn phase(&self, pid: &PortId) -> Option<Phase> {
        self.ports.get(pid).map(PortRecord::phase)
    }

    fn stage_mut(&mut self, pid: &PortId) -> Option<&mut Stage> {
        self.ports.get_mut(pid).and_then(PortRecord::stage_mut)
    }

    fn episode_mut(&mut self, pid: &PortId) -> Option<&mut Episode> {
        self.ports.get_mut(pid).and_then(PortRecord::episode_mut)
    }

    /// Reconnecting: the grace period or back-off is over; act on a session list at least
    /// this recent.
    fn set_ops_not_before(&mut self, pid: &PortId, at: Instant) {
        if let Some(Stage::Reconnecting { ops_not_before, .. }) = self.stage_mut(pid) {
            *ops_not_before = Some(at);
        }
    }

    fn port_or_create(&mut self, pid: &PortId, now: Instant) -> &mut PortRecord {
        if !self.devices.contains_key(&pid.device) {
            self.device_or_create(&pid.device);
        }
        self.ports
            .entry(pid.clone())
            .or_insert_with(|| PortRecord::new(pid.clone(), now))
    }

    fn device_or_create(&mut self, name: &str) -> &mut DeviceRecord {
        self.devices
            .entry(name.to_string())
            .or_insert_with(|| DeviceRecord {
                name: name.to_string(),
                present: true,
                parent: None,
                driver: None,
                remembered: None,
                recreation: None,
                completed_recreations: 0,
            })
    }

    /// The ports of `device` waiting on its re-creation.
    fn ports_resetting(&self, device: &str) -> Vec<PortId> {
        self.ports_of_device(device)
            .into_iter()
            .filter(|pid| self.phase(pid) == Some(Phase::ResettingDevice))
            .collect()
    }

    /// Records that the device's current re-creation attempt failed.
    fn mark_recreation_failed(&mut self, device: &str) {
        if let Some(r) = self
            .devices
            .get_mut(device)
            .and_then(|d| d.recreation.as_mut())
        {
            r.state = RecreationState::Failed;
        }
    }

    fn ports_of_device(&self, device: &str) -> Vec<PortId> {
        let start = PortId::new(device, 0);
        self.ports
            .range(start..)
            .take_while(|(k, _)| k.device == device)
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn portals_of(&self, pid: &PortId) -> Vec<Portal> {
        let mut v: Vec<Portal> = self
            .ports
            .get(pid)
            .map(|p| {
                p.sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .map(|s| s.key.portal.clone())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v.dedup();
        v
    }

    fn targets_of(&self, pid: &PortId) -> Vec<String> {
        let mut v: Vec<String> = self
            .ports
            .get(pid)
            .map(|p| p.sessions.iter().map(|k| k.target.clone()).collect())
            .unwrap_or_default();
        v.sort();
        v.dedup();
        v
    }

    /// At least one session, and every remembered session (by target + portal + iface,
    /// whatever its SID now) LOGGED_IN with its disks running.
    fn all_healthy(&self, pid: &PortId) -> bool {
        self.ports.get(pid).is_some_and(|p| {
            !p.sessions.is_empty()
                && p.sessions
                    .iter()
                    .all(|k| self.sessions.get(k).is_some_and(SessionRecord::is_healthy))
        })
    }

    /// The new QP 1 of a re-created device was seen in RTS, or cannot be (no QP table).
    fn fresh_qp_ok(&self, pid: &PortId) -> bool {
        self.ports.get(pid).is_some_and(|p| {
            !p.episode().is_some_and(Episode::awaiting_fresh_qp) || self.qp_table == Some(false)
        })
    }

    /// The port's recovery is verified: its sessions are healthy (or, for a port without
    /// any session, its device was re-created) and a re-created device's new QP 1 is in RTS.
    fn verified(&self, pid: &PortId) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let sessions_ok = if p.sessions.is_empty() {
            p.episode().is_some_and(Episode::was_recreated)
        } else {
            self.all_healthy(pid)
        };
        sessions_ok && self.fresh_qp_ok(pid)
    }

    fn healthy_sessions_of_device(&self, device: &str) -> Vec<SessionKey> {
        self.ports_of_device(device)
            .iter()
            .filter_map(|pid| self.ports.get(pid))
            .flat_map(|p| p.sessions.iter())
            .filter_map(|k| self.sessions.get(k))
            .filter(|s| s.is_up())
            .map(|s| s.key.clone())
            .collect()
    }

    fn down_sessions_text(&self, pid: &PortId) -> String {
        let v: Vec<String> = self
            .ports
            .get(pid)
            .map(|p| {
                p.sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .filter(|s| {
                        !s.is_healthy() || p.episode().is_some_and(|e| e.targeted.contains(&s.key))
                    })
                    .map(describe_session)
                    .collect()
            })
            .unwrap_or_default();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join("; ")
        }
    }

    fn mark_reported(&mut self, pid: &PortId) {
        let (keys, targeted) = self
            .ports
            .get(pid)
            .map(|p| {
                let targeted = p.episode().map(|e| e.targeted.clone()).unwrap_or_default();
                (p.sessions.clone(), targeted)
            })
            .unwrap_or_default();
        for k in keys {
            if let Some(s) = self.sessions.get_mut(&k) {
                if !s.is_healthy() || targeted.contains(&k) {
                    s.reported = true;
                }
            }
        }
    }

    fn rebuild_indexes(&mut self) {
        self.by_sid.clear();
        self.by_disk.clear();
        for s in self.sessions.values() {
            if let Some(sid) = s.sid {
                self.by_sid.insert(sid, s.key.clone());
            }
            for d in &s.disks {
                self.by_disk.insert(d.name.clone(), s.key.clone());
            }
        }
    }

    /// Moves a port to another stage of its episode (the stage's data replaces the old
    /// stage's; a hold is cleared).
    fn transition(&mut self, pid: &PortId, to: Stage, reason: String, now: Instant) {
        self.transition_in(pid, None, to, reason, now);
    }

    /// Moves a healthy port into `to` with a new episode.
    fn open_episode(
        &mut self,
        pid: &PortId,
        episode: Episode,
        to: Stage,
        reason: String,
        now: Instant,
    ) {
        self.transition_in(pid, Some(episode), to, reason, now);
    }

    /// [`Engine::transition`], with `episode` replacing the port's episode if given.
    fn transition_in(
        &mut self,
        pid: &PortId,
        episode: Option<Episode>,
        to: Stage,
        reason: String,
        now: Instant,
    ) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let from = p.phase();
        let episode = match (episode, std::mem::replace(&mut p.state, PortState::Healthy)) {
            (Some(e), _) => e,
            (None, PortState::Recovering { episode, .. }) => episode,
            // Leaving health without a fault of its own (a late outcome of an earlier
            // episode): its sessions are what is down.
            (None, PortState::Healthy) => Episode::new(Fault::SessionsDown, now, Origin::Automatic),
        };
        let to_phase = to.phase();
        p.state = PortState::Recovering { episode, stage: to };
        self.record_transition(pid, from, to_phase, reason, now);
    }

    /// Ends the port's episode: healthy again.
    fn transition_healthy(&mut self, pid: &PortId, reason: String, now: Instant) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let from = p.phase();
        p.state = PortState::Healthy;
        self.record_transition(pid, from, Phase::Healthy, reason, now);
    }

    fn record_transition(
        &mut self,
        pid: &PortId,
        from: Phase,
        to: Phase,
        reason: String,
        now: Instant,
    ) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        p.since = now;
        p.reason = reason.clone();
        p.hold = None;
        self.transitions.push_back(Transition {
            at: now,
            port: pid.clone(),
            from,
            to,
            reason,
        });
        self.mark_dirty(format!("{pid}: {from} -> {to}"));
    }

    fn request_sessions(&mut self, now: Instant, force: bool) {
        let recent = self
            .last_sessions_request
            .is_some_and(|t| now.since(t) < REFRESH_MIN_GAP);
        if recent && !force {
            return;
        }
        if recent && self.last_sessions_request == Some(now) {
            return; // Already asked at this very instant.
        }
        self.last_sessions_request = Some(now);
        self.push(
            None,
            None,
            Origin::Automatic,
            "need the current session states".into(),
            ActionKind::RefreshSessions,
        );
    }

    fn request_topology(&mut self, now: Instant) {
        if self
            .last_topology_request
            .is_some_and(|t| now.since(t) < self.policy.probe_interval)
        {
            return;
        }
        self.last_topology_request = Some(now);
        self.push(
            None,
            None,
            Origin::Automatic,
            "need the current RDMA devices and QP table".into(),
            ActionKind::RefreshTopology,
        );
    }

    fn alloc_id(&mut self) -> ActionId {
        let id = ActionId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    fn jitter(&mut self) -> f64 {
        // splitmix64: tiny, seedable, good enough for spreading retries.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    fn push(
        &mut self,
        port: Option<PortId>,
        device: Option<String>,
        origin: Origin,
        reason: String,
        kind: ActionKind,
    ) -> ActionId {
        let id = self.alloc_id();
        self.push_with_id(id, port, device, origin, reason, kind);
        id
    }

    fn push_with_id(
        &mut self,
        id: ActionId,
        port: Option<PortId>,
        device: Option<String>,
        origin: Origin,
        reason: String,
        kind: ActionKind,
    ) {
        self.actions.push_back(Action {
            id,
            port,
            device,
            origin,
            reason,
            kind,
        });
    }

    fn alert(
        &mut self,
        now: Instant,
        severity: Severity,
        key: String,
        summary: String,
        detail: String,
        remedy: Option<String>,
    ) {
        self.offer_alert(now, None, severity, key, summary, detail, remedy);
    }

    /// Like [`Engine::alert`], but identical alerts within `alert_coalesce` of the first
    /// are merged into it (a storm gives one alert with a count).
    fn alert_coalesced(
        &mut self,
        now: Instant,
        severity: Severity,
        key: String,
        summary: String,
        detail: String,
        remedy: Option<String>,
    ) {
        let window = Some(self.policy.alert_coalesce);
        self.offer_alert(now, window, severity, key, summary, detail, remedy);
    }

    /// Passes an alert through the repeat gate and emits it if the gate lets it out.
    #[allow(clippy::too_many_arguments)]
    fn offer_alert(
        &mut self,
        now: Instant,
        coalesce: Option<std::time::Duration>,
        severity: Severity,
        key: String,
        summary: String,
        detail: String,
        remedy: Option<String>,
    ) {
        let alert = Alert {
            severity,
            summary,
            detail,
            remedy,
            count: 1,
            key,
        };
        if let Some(a) = self
            .gate
            .offer(alert, coalesce, self.policy.alert_repeat_interval, now)
        {
            self.push_alert(a);
        }
    }

    fn push_alert(&mut self, alert: Alert) {
        self.push(
            None,
            None,
            Origin::Automatic,
            alert.summary.clone(),
            ActionKind::Alert(alert),
        );
    }

    fn mark_dirty(&mut self, reason: String) {
        if self.dirty.is_none() {
            self.dirty = Some(reason);
        }
    }

    /// Queues a journal write now (write-ahead before a destructive action).
    fn persist(&mut self, reason: String) {
        self.dirty = None;
        self.journaled = Some(self.journal_view());
        self.push(
            None,
            None,
            Origin::Automatic,
            reason.clone(),
            ActionKind::PersistState { reason },
        );
    }

    /// End of an input: journal what changed.
    fn finish(&mut self) {
        if let Some(reason) = self.dirty.take() {
            // Journal only what changed since the last write (the daemon and the simulator
            // poll every few seconds; rewriting an unchanged journal helps nobody).
            let view = self.journal_view();
            if self.journaled.as_ref() == Some(&view) {
                return;
            }
            self.journaled = Some(view);
            self.push(
                None,
                None,
                Origin::Automatic,
                reason.clone(),
                ActionKind::PersistState { reason },
            );
        }
    }
}

fn iscsiadm_status(outcome: Outcome) -> IscsiadmStatus {
    match outcome {
        Outcome::Iscsiadm(s) => s,
        Outcome::NotRun { reason } => IscsiadmStatus::Other {
            code: None,
            message: format!("not run: {reason}"),
        },
        other => IscsiadmStatus::Other {
            code: None,
            message: format!("unexpected outcome {other:?}"),
        },
    }
}

fn describe_session(s: &SessionRecord) -> String {
    let sid = s.sid.map(|n| format!("sid {n} ")).unwrap_or_default();
    let state = if s.present {
        s.state.name()
    } else {
        "gone from iscsid"
    };
    match &s.placed_by {
        Some(evidence) => format!("{sid}{} ({state}; on {} by {evidence})", s.key, s.port),
        None => format!("{sid}{} ({state})", s.key),
    }
}

fn join_ports(pids: &[PortId]) -> String {
    pids.iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}
