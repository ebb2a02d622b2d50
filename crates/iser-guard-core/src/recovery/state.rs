//! The engine's state: per port, per remembered session, per device, and what is in flight.
//! Everything here is serde-serializable: [`EngineSnapshot`] is what the journal holds.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::action::{ActionId, IscsiNode, Origin};
use super::input::{
    BlockedStep, DiskInfo, PortId, Portal, SessionKey, SessionState, StuckEvidence,
};
use crate::time::Instant;

/// The name of a port's state ([`PortState::phase`]): what transitions, the log and the
/// journal say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// Sessions logged in, nothing wrong known.
    Healthy,
    /// A fault was just seen; the engine is deciding what to do.
    Faulted,
    /// Probing the portals of the sessions that lived on this port, waiting for the target.
    AwaitingTarget,
    /// The local RDMA device vanished; waiting for it to come back (bounded).
    AwaitingDevice,
    /// The RDMA device is being re-created.
    ResettingDevice,
    /// Giving iscsid its grace period, then logging sessions out and in.
    Reconnecting,
    /// Waiting for the sessions to show LOGGED_IN with running disks.
    Verifying,
    /// Attempts exhausted or retrying cannot help: automatic actions stopped for this port.
    Quarantined,
    /// A step of the device's re-creation is blocked in the kernel: nothing else is tried on
    /// the device (no second writer) until it returns; then verification resumes.
    RecreationBlocked,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Phase::Healthy => "Healthy",
            Phase::Faulted => "Faulted",
            Phase::AwaitingTarget => "AwaitingTarget",
            Phase::AwaitingDevice => "AwaitingDevice",
            Phase::ResettingDevice => "ResettingDevice",
            Phase::Reconnecting => "Reconnecting",
            Phase::Verifying => "Verifying",
            Phase::Quarantined => "Quarantined",
            Phase::RecreationBlocked => "RecreationBlocked",
        })
    }
}

/// Why a port is not healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// QP 1 (GSI) is stuck in ERR: only re-creating the device helps.
    GsiStuck {
        /// How it was first seen.
        evidence: StuckEvidence,
    },
    /// The initiator's RDMA device vanished.
    DeviceGone,
    /// Sessions are down with no local cause known (target or path side).
    SessionsDown,
    /// One session reports LOGGED_IN but its I/O keeps failing.
    Zombie {
        /// The session.
        session: SessionKey,
    },
    /// An operator asked for recovery.
    Operator,
}

impl Fault {
    /// In operator words.
    pub fn describe(&self) -> String {
        match self {
            Fault::GsiStuck {
                evidence: StuckEvidence::AsyncDeviceFatal,
            } => "the device reported a fatal error (DEVICE_FATAL on its async event \
                  channel): every QP on it, QP 1 included, is lost; no new RDMA connection \
                  can be made on this port until the device is re-created"
                .to_string(),
            Fault::GsiStuck { evidence } => format!(
                "GSI QP 1 is stuck in ERR ({}); no new RDMA connection can be made on this \
                 port until the device is re-created",
                evidence.describe()
            ),
            Fault::DeviceGone => "the initiator's RDMA device is gone".to_string(),
            Fault::SessionsDown => "iSCSI sessions on this port are down".to_string(),
            Fault::Zombie { session } => {
                format!("session {session} reports LOGGED_IN but I/O on its disks keeps failing")
            }
            Fault::Operator => "an operator asked for recovery".to_string(),
        }
    }
}

/// Why a port that wants to act does not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hold {
    /// `iser-guard pause` is in effect.
    Paused,
    /// `recovery.dry-run`: the engine decides and alerts only.
    DryRun,
    /// The device is not in `devices.allow`.
    NotAllowed,
    /// Re-creating the device would drop these healthy sessions or live RDMA consumers
    /// (`recovery.other-sessions`, `[recovery.consumers]`); waiting for the operator.
    OtherSessionsHealthy {
        /// The sessions that would be disrupted.
        sessions: Vec<SessionKey>,
        /// The live consumers other than iSER that would lose their connections.
        #[serde(default)]
        consumers: Vec<crate::consumers::ConsumerRef>,
    },
    /// Re-creating the device would take the last usable path of these dm-multipath maps
    /// (`recovery.multipath-last-path`); waiting for another path or the operator.
    LastMultipathPath {
        /// The maps' usable paths, all on the device.
        paths: Vec<crate::multipath::MultipathPathRef>,
    },
    /// Another device is being re-created; one at a time.
    WaitingForSlot {
        /// The device being re-created.
        busy: String,
    },
    /// `recovery.reset-when = target-back`, but no session of this port names a target
    /// portal to probe: the engine cannot know when the target is back, so it does not
    /// re-create the device on its own.
    NoPortalKnown,
    /// The kernel reported a bug in a module this device depends on
    /// ([`Observation::KernelBug`](super::Observation::KernelBug)): a re-creation may make
    /// it worse, so none runs on the engine's own decision until an operator command.
    KernelBug {
        /// The module the report named (`None`: a panic or hung iSCSI task, every device).
        module: Option<String>,
        /// The report in operator words.
        report: String,
    },
}

/// A kernel bug the engine holds automatic re-creation on (journaled: a restart does not
/// forget it). Lifted by `resume`; `recover`/`reset-device` of a device act on the operator's
/// word and lift it for that device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelBugHold {
    /// The module the report named, if any.
    pub module: Option<String>,
    /// The report in operator words.
    pub report: String,
    /// When it was first seen.
    pub at: Instant,
    /// Every device is held (the module is shared by all of them: ib_core, ib_iser, the
    /// iSCSI and CM layers, or no module was named); otherwise only the devices whose driver
    /// is `module`, or whose driver is not known.
    pub all_devices: bool,
    /// Devices the operator lifted it for (`recover`, `reset-device`).
    #[serde(default)]
    pub lifted_for: Vec<String>,
}

impl KernelBugHold {
    /// The hold concerns `device` (whose driver is `driver`, if known).
    pub fn concerns(&self, device: &str, driver: Option<&str>) -> bool {
        if self.lifted_for.iter().any(|d| d == device) {
            return false;
        }
        if self.all_devices {
            return true;
        }
        match (self.module.as_deref(), driver) {
            (Some(m), Some(d)) => m == d,
            // A device whose driver is not known might be the module's: held, since a
            // re-creation under a kernel bug can make it worse.
            _ => true,
        }
    }
}

/// What a port timer means when it fires (the one vocabulary of the stages' timers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerKind {
    /// Start the next round of portal probes.
    ProbeRound,
    /// The back-off before the next attempt is over.
    Backoff,
    /// iscsid's grace period is over: log sessions out and in.
    Grace,
    /// Refresh the session list while recovering.
    SessionRefresh,
}

/// Where one session is in its reconnect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionOp {
    /// A logout is in flight.
    LoggingOut(ActionId),
    /// The logout succeeded; the login comes next.
    LoggedOut,
    /// A login is in flight.
    LoggingIn(ActionId),
    /// The login succeeded (or the session was already logged in).
    Done,
    /// The last logout or login failed.
    Failed(String),
}

/// One remembered session: restored after a fault even if iscsid dropped it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Target, portal, iface.
    pub key: SessionKey,
    /// iface transport.
    pub transport: String,
    /// The port it runs on.
    pub port: PortId,
    /// Last known SID.
    pub sid: Option<u32>,
    /// Present in the last iscsiadm snapshot.
    pub present: bool,
    /// Last known state.
    pub state: SessionState,
    /// Last known disks.
    pub disks: Vec<DiskInfo>,
    /// I/O errors seen on its disks while LOGGED_IN (times, within the zombie window).
    pub io_errors: Vec<Instant>,
    /// Its reconnect in this episode.
    pub op: Option<SessionOp>,
    /// Named in an alert as not restored.
    pub reported: bool,
    /// A connection error, recovery timeout or I/O error was seen for it since it was last
    /// seen healthy: if it vanishes now, that was no clean logout.
    #[serde(default)]
    pub troubled: bool,
    /// What placed it on its port, in operator words (the CM id, the route, the iface
    /// fields, ...): every decision that names the session names this evidence too.
    #[serde(default)]
    pub placed_by: Option<String>,
}

impl SessionRecord {
    /// Present in the last snapshot and LOGGED_IN.
    pub fn is_up(&self) -> bool {
        self.present && self.state == SessionState::LoggedIn
    }

    /// LOGGED_IN, present, and every disk running.
    pub fn is_healthy(&self) -> bool {
        self.is_up() && self.disks.iter().all(DiskInfo::is_running)
    }

    /// LOGGED_IN with every disk running in the last snapshot that listed it.
    pub(crate) fn is_healthy_when_last_seen(&self) -> bool {
        self.state == SessionState::LoggedIn && self.disks.iter().all(DiskInfo::is_running)
    }
}

/// One RDMA port: where it is in its recovery ([`PortState`]) and what it remembers across
/// states (its sessions, the last transition, a hold and when it was alerted, the last
/// listener rejection, the link).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortRecord {
    /// The port.
    pub id: PortId,
    /// Where it is, with the data of that state only.
    pub state: PortState,
    /// The reason of the last transition, in operator words.
    pub reason: String,
    /// When the current state was entered.
    pub since: Instant,
    /// Why it is not acting, if it wants to and may not. A hold is decided in the states
    /// that act (waiting for the target or the device, reconnecting) and cleared by every
    /// transition.
    pub hold: Option<Hold>,
    /// When the current hold's alert was last decided: a hold re-evaluated on every input
    /// is re-alerted at most once per `alerts.repeat-interval` (kept across states).
    pub hold_alerted_at: Option<Instant>,
    /// When the last `invalid service ID` rejection was attributed to this port (a kernel
    /// fact about the port, kept across episodes).
    pub listener_rejected_at: Option<Instant>,
    /// Port link state as last seen.
    pub link_up: bool,
    /// The sessions remembered on this port.
    pub sessions: Vec<SessionKey>,
    /// The port's last self-test (kept across episodes, for `status` and metrics).
    #[serde(default)]
    pub last_selftest: Option<SelfTestRecord>,
}

/// What a port self-test concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelfTestVerdict {
    /// Every step worked: the port can make a new RDMA connection.
    Passed,
    /// A step failed: the port cannot (the report's summary says where).
    Failed,
    /// It could not run (no verbs, no device visible to libibverbs, no answer in time).
    Unavailable,
}

impl SelfTestVerdict {
    /// `passed`, `failed`, `unavailable` (metric label and status word).
    pub fn name(self) -> &'static str {
        match self {
            SelfTestVerdict::Passed => "passed",
            SelfTestVerdict::Failed => "failed",
            SelfTestVerdict::Unavailable => "unavailable",
        }
    }
}

/// The last self-test of a port, as `status` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfTestRecord {
    /// When its result came in.
    pub at: Instant,
    /// What it concluded.
    pub verdict: SelfTestVerdict,
    /// The report's summary (or why it could not run).
    pub summary: String,
    /// Steps that ran.
    pub steps: u32,
    /// How long the steps took together (milliseconds).
    pub took_ms: u64,
}

impl SelfTestRecord {
    /// The record of `result`, received at `at`.
    pub fn of(result: &crate::selftest::SelfTestResult, at: Instant) -> Self {
        use crate::selftest::SelfTestResult;
        match result {
            SelfTestResult::Ran(r) => SelfTestRecord {
                at,
                verdict: if r.passed() {
                    SelfTestVerdict::Passed
                } else {
                    SelfTestVerdict::Failed
                },
                summary: r.summary(),
                steps: u32::try_from(r.steps.len()).unwrap_or(u32::MAX),
                took_ms: u64::try_from(r.total().as_millis()).unwrap_or(u64::MAX),
            },
            SelfTestResult::Unavailable { reason } => SelfTestRecord {
                at,
                verdict: SelfTestVerdict::Unavailable,
                summary: format!("self-test unavailable: {reason}"),
                steps: 0,
                took_ms: 0,
            },
        }
    }
}

/// Where the self-test of the current attempt is (after a re-creation, while verifying).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelfTestProgress {
    /// Asked for; its outcome is awaited.
    Running(ActionId),
    /// It passed: a witness that the port makes new RDMA connections.
    Passed {
        /// The report's summary.
        summary: String,
    },
    /// It could not run: verification goes on without it, as before self-tests existed.
    Unavailable {
        /// Why.
        reason: String,
    },
}

impl PortRecord {
    /// A healthy port.
    pub fn new(id: PortId, now: Instant) -> Self {
        PortRecord {
            id,
            state: PortState::Healthy,
            reason: "first seen".to_string(),
            since: now,
            hold: None,
            hold_alerted_at: None,
            listener_rejected_at: None,
            link_up: true,
            sessions: Vec::new(),
            last_selftest: None,
        }
    }

    /// The name of its state.
    pub fn phase(&self) -> Phase {
        self.state.phase()
    }

    /// The fault episode in progress (none while healthy).
    pub fn episode(&self) -> Option<&Episode> {
        match &self.state {
            PortState::Healthy => None,
            PortState::Recovering { episode, .. } => Some(episode),
        }
    }

    /// The fault episode in progress, to change it.
    pub(crate) fn episode_mut(&mut self) -> Option<&mut Episode> {
        match &mut self.state {
            PortState::Healthy => None,
            PortState::Recovering { episode, .. } => Some(episode),
        }
    }

    /// The recovery stage (none while healthy).
    pub fn stage(&self) -> Option<&Stage> {
        match &self.state {
            PortState::Healthy => None,
            PortState::Recovering { stage, .. } => Some(stage),
        }
    }

    /// The recovery stage, to change it.
    pub(crate) fn stage_mut(&mut self) -> Option<&mut Stage> {
        match &mut self.state {
            PortState::Healthy => None,
            PortState::Recovering { stage, .. } => Some(stage),
        }
    }

    /// Why it is not healthy.
    pub fn fault(&self) -> Option<&Fault> {
        self.episode().map(|e| &e.fault)
    }

    /// Repair attempts in this episode (0 while healthy).
    pub fn attempts(&self) -> u32 {
        self.episode().map_or(0, |e| e.attempts)
    }

    /// Kernel lines seen for this fault (0 while healthy).
    pub fn evidence(&self) -> u64 {
        self.episode().map_or(0, |e| e.evidence)
    }

    /// The fault needs a device re-creation that has not happened yet.
    pub fn needs_recreate(&self) -> bool {
        self.episode().is_some_and(|e| e.needs_recreate)
    }

    /// Who drives this episode (automatic while healthy).
    pub fn origin(&self) -> Origin {
        self.episode().map_or(Origin::Automatic, |e| e.origin)
    }

    /// The state's timer, if it has one set.
    pub fn wake(&self) -> Option<(TimerKind, Instant)> {
        self.stage().and_then(Stage::wake)
    }

    /// When the state gives up, if it does.
    pub fn deadline(&self) -> Option<Instant> {
        self.stage().and_then(Stage::deadline)
    }
}

/// Where a port is: healthy, or in a fault episode at some stage of its recovery.
// One per RDMA port (a handful per host), replaced in place: boxing the episode would buy
// nothing but an allocation per fault.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum PortState {
    /// Sessions logged in, nothing wrong known.
    Healthy,
    /// A fault was seen and the port is not healthy again yet.
    Recovering {
        /// What this episode remembers across its stages.
        episode: Episode,
        /// Where the recovery is, with that stage's own data.
        stage: Stage,
    },
}

impl PortState {
    /// The name of the state.
    pub fn phase(&self) -> Phase {
        match self {
            PortState::Healthy => Phase::Healthy,
            PortState::Recovering { stage, .. } => stage.phase(),
        }
    }
}

/// What a fault episode remembers from its first fault until the port is healthy again,
/// whatever stage it is in: the fault, who drives it, the attempts used, what the device
/// and the target did so far.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Episode {
    /// Why the port is not healthy.
    pub fault: Fault,
    /// When this episode began.
    pub since: Instant,
    /// Who drives it.
    pub origin: Origin,
    /// Repair attempts (re-creations and reconnect rounds) used.
    pub attempts: u32,
    /// The current attempt started with a device re-creation: its reconnect belongs to that
    /// attempt and does not count as another one.
    pub attempt_recreated: bool,
    /// The fault needs a device re-creation that has not happened yet.
    pub needs_recreate: bool,
    /// A re-creation completed in this episode (never repeated after a restart), and
    /// whether the device's new GSI QP 1 has been seen in RTS since.
    pub recreated: Option<FreshQp>,
    /// Do not wait for the target (operator `reset-device`).
    pub skip_target_wait: bool,
    /// The target answers TCP but rejects iSER connections: nothing local can fix it.
    pub listener_gone: bool,
    /// Only probes started at or after this count towards "the target is back" (set when
    /// the wait for the target begins, and again after a back-off); the episode's start
    /// otherwise.
    pub probes_count_from: Option<Instant>,
    /// Since when the target counts as back (hysteresis met).
    pub target_back_at: Option<Instant>,
    /// Kernel lines seen for this fault (storm counter).
    pub evidence: u64,
    /// Sessions to log out and in even though they look logged in (zombie, operator).
    pub targeted: Vec<SessionKey>,
    /// The port self-test of the current attempt, once the re-created device's fresh port
    /// was seen (reset by every re-creation).
    #[serde(default)]
    pub selftest: Option<SelfTestProgress>,
}

impl Episode {
    /// A new episode: nothing tried yet.
    pub fn new(fault: Fault, since: Instant, origin: Origin) -> Self {
        Episode {
            fault,
            since,
            origin,
            attempts: 0,
            attempt_recreated: false,
            needs_recreate: false,
            recreated: None,
            skip_target_wait: false,
            listener_gone: false,
            probes_count_from: None,
            target_back_at: None,
            evidence: 0,
            targeted: Vec::new(),
            selftest: None,
        }
    }

    /// The device was re-created in this episode.
    pub(crate) fn was_recreated(&self) -> bool {
        self.recreated.is_some()
    }

    /// The device was re-created and its new GSI QP 1 has not been seen in RTS yet: the
    /// port is not verified healthy until it is (or a scan said the QP table cannot be
    /// read, and the verdict says so).
    pub(crate) fn awaiting_fresh_qp(&self) -> bool {
        self.recreated == Some(FreshQp::Awaited)
    }
}

/// After a re-creation: has the device's new GSI QP 1 been seen in RTS?
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum FreshQp {
    /// Not yet (the QP table is asked).
    Awaited,
    /// Seen in RTS.
    Seen,
}

/// A stage of a port's recovery, with the data only that stage has.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stage {
    /// A fault was just seen; the engine is deciding what to do (left within the same input).
    Faulted,
    /// Probing the portals of the sessions that lived on this port, waiting for the target.
    AwaitingTarget {
        /// When the wait gives up (`target_wait_max`); none while only the target side can
        /// help (dead listener) or once the target is back.
        deadline: Option<Instant>,
        /// The next probe round, or the end of a back-off.
        timer: Option<(AwaitTimer, Instant)>,
    },
    /// The local RDMA device vanished; waiting for it to come back (bounded).
    AwaitingDevice {
        /// When the wait gives up and the device is re-created from its parent.
        deadline: Option<Instant>,
    },
    /// The RDMA device is being re-created.
    ResettingDevice {
        /// The re-creation's outcome was lost (timeout or restart): it is verified through
        /// the QP table until then, never repeated.
        verify_until: Option<Instant>,
    },
    /// Giving iscsid its grace period, then logging sessions in (or out and in).
    Reconnecting {
        /// The end of the grace period or of a back-off, or the next session-list refresh.
        timer: Option<(ReconnectTimer, Instant)>,
        /// Log sessions out and in only with a session list at least this recent (so a
        /// session iscsid just restored is never disrupted).
        ops_not_before: Option<Instant>,
    },
    /// Waiting for the sessions to show LOGGED_IN with running disks.
    Verifying {
        /// When the verification is judged (extended once to wait for a fresh list).
        deadline: Option<Instant>,
        /// When the deadline first passed and a fresh session list was asked for.
        list_asked_at: Option<Instant>,
    },
    /// Attempts exhausted or retrying cannot help: automatic actions stopped for this port.
    Quarantined,
    /// The device's re-creation is blocked in the kernel ([`DeviceRecord::blocked`]): the
    /// port waits for it to return, reporting how long it has been blocked.
    RecreationBlocked {
        /// When the report is repeated (with the time blocked so far).
        next_report: Option<Instant>,
    },
}

impl Stage {
    /// Waiting for the target, nothing scheduled yet.
    pub(crate) fn awaiting_target() -> Self {
        Stage::AwaitingTarget {
            deadline: None,
            timer: None,
        }
    }

    /// Waiting for the device, no deadline yet.
    pub(crate) fn awaiting_device() -> Self {
        Stage::AwaitingDevice { deadline: None }
    }

    /// Re-creating the device, outcome awaited.
    pub(crate) fn resetting_device() -> Self {
        Stage::ResettingDevice { verify_until: None }
    }

    /// Reconnecting, nothing scheduled yet.
    pub fn reconnecting() -> Self {
        Stage::Reconnecting {
            timer: None,
            ops_not_before: None,
        }
    }

    /// Verifying, no deadline yet.
    pub fn verifying() -> Self {
        Stage::Verifying {
            deadline: None,
            list_asked_at: None,
        }
    }

    /// The name of the stage.
    pub fn phase(&self) -> Phase {
        match self {
            Stage::Faulted => Phase::Faulted,
            Stage::AwaitingTarget { .. } => Phase::AwaitingTarget,
            Stage::AwaitingDevice { .. } => Phase::AwaitingDevice,
            Stage::ResettingDevice { .. } => Phase::ResettingDevice,
            Stage::Reconnecting { .. } => Phase::Reconnecting,
            Stage::Verifying { .. } => Phase::Verifying,
            Stage::Quarantined => Phase::Quarantined,
            Stage::RecreationBlocked { .. } => Phase::RecreationBlocked,
        }
    }

    /// The stage's timer, if set.
    pub fn wake(&self) -> Option<(TimerKind, Instant)> {
        match self {
            Stage::AwaitingTarget { timer, .. } => timer.map(|(k, at)| (k.kind(), at)),
            Stage::Reconnecting { timer, .. } => timer.map(|(k, at)| (k.kind(), at)),
            _ => None,
        }
    }

    /// Takes the stage's timer if it is due at `now`.
    pub(crate) fn take_due_wake(&mut self, now: Instant) -> Option<TimerKind> {
        match self {
            Stage::AwaitingTarget { timer, .. } => match *timer {
                Some((k, at)) if at <= now => {
                    *timer = None;
                    Some(k.kind())
                }
                _ => None,
            },
            Stage::Reconnecting { timer, .. } => match *timer {
                Some((k, at)) if at <= now => {
                    *timer = None;
                    Some(k.kind())
                }
                _ => None,
            },
            _ => None,
        }
    }

    /// When the stage gives up (target wait, device wait, verification, lost re-creation),
    /// or, blocked, when it reports again.
    pub fn deadline(&self) -> Option<Instant> {
        match self {
            Stage::AwaitingTarget { deadline, .. }
            | Stage::AwaitingDevice { deadline }
            | Stage::Verifying { deadline, .. } => *deadline,
            Stage::ResettingDevice { verify_until } => *verify_until,
            Stage::RecreationBlocked { next_report } => *next_report,
            Stage::Faulted | Stage::Reconnecting { .. } | Stage::Quarantined => None,
        }
    }

    /// Sets (or clears) the stage's deadline; a stage without one ignores it.
    pub(crate) fn set_deadline(&mut self, at: Option<Instant>) {
        match self {
            Stage::AwaitingTarget { deadline, .. }
            | Stage::AwaitingDevice { deadline }
            | Stage::Verifying { deadline, .. } => *deadline = at,
            Stage::ResettingDevice { verify_until } => *verify_until = at,
            Stage::RecreationBlocked { next_report } => *next_report = at,
            Stage::Faulted | Stage::Reconnecting { .. } | Stage::Quarantined => {}
        }
    }
}

/// The timer of [`Stage::AwaitingTarget`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AwaitTimer {
    /// Start the next round of portal probes.
    ProbeRound,
    /// The back-off before the next attempt is over.
    Backoff,
}

impl AwaitTimer {
    /// Its kind.
    pub fn kind(self) -> TimerKind {
        match self {
            AwaitTimer::ProbeRound => TimerKind::ProbeRound,
            AwaitTimer::Backoff => TimerKind::Backoff,
        }
    }
}

/// The timer of [`Stage::Reconnecting`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ReconnectTimer {
    /// iscsid's grace period is over: log sessions in.
    Grace,
    /// The back-off before the next attempt is over.
    Backoff,
    /// Refresh the session list.
    SessionRefresh,
}

impl ReconnectTimer {
    /// Its kind.
    pub fn kind(self) -> TimerKind {
        match self {
            ReconnectTimer::Grace => TimerKind::Grace,
            ReconnectTimer::Backoff => TimerKind::Backoff,
            ReconnectTimer::SessionRefresh => TimerKind::SessionRefresh,
        }
    }
}

/// A device re-creation and where it got.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecreationState {
    /// Started, outcome not known yet.
    InFlight,
    /// Completed (the device came back with QP 1 in RTS).
    Completed,
    /// Failed.
    Failed,
}

/// The last re-creation of a device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Recreation {
    /// The action.
    pub id: ActionId,
    /// Attempt number.
    pub attempt: u32,
    /// When it started.
    pub started: Instant,
    /// Where it got.
    pub state: RecreationState,
    /// Who asked.
    pub origin: Origin,
    /// The RDMA consumers other than iSER on the device when it was decided (live or
    /// broken): what the re-creation was allowed to take down.
    #[serde(default)]
    pub consumers: Vec<crate::consumers::ConsumerRef>,
    /// The NVMe over RDMA controllers on the device when it was decided: what
    /// `nvme connect` brings back after it.
    #[serde(default)]
    pub nvme: Vec<crate::nvme_fabrics::NvmeRdmaController>,
    /// What became of them (empty until the reconnect reported).
    #[serde(default)]
    pub nvme_back: Vec<crate::nvme_fabrics::NvmeReconnectReport>,
    /// The NFS over RDMA mounts on the device when it was decided: what is checked after it.
    #[serde(default)]
    pub nfs: Vec<crate::nfs_rdma::NfsRdmaMount>,
    /// What their checks said (empty until reported).
    #[serde(default)]
    pub nfs_checks: Vec<crate::nfs_rdma::NfsCheckReport>,
    /// The dm-multipath paths on the device when it was decided: what must be active in
    /// their maps again after it.
    #[serde(default)]
    pub multipath: Vec<crate::multipath::MultipathPathRef>,
    /// What became of them (empty until the check reported).
    #[serde(default)]
    pub multipath_back: Vec<crate::multipath::PathBackReport>,
    /// The check of those paths was asked (not journaled: after a restart the record's
    /// results, or their absence, say enough).
    #[serde(default)]
    pub multipath_asked: bool,
}

/// What the engine knows about an RDMA device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceRecord {
    /// Name.
    pub name: String,
    /// Present on the host as last seen.
    pub present: bool,
    /// Parent (PCI function), if known.
    pub parent: Option<String>,
    /// Driver, if known.
    pub driver: Option<String>,
    /// What re-creating it needs, as last seen while it existed
    /// ([`Observation::DeviceRecipe`](super::Observation::DeviceRecipe)); kept while it is
    /// gone, since it is what brings it back.
    #[serde(default)]
    pub remembered: Option<crate::reset_plan::RecreateFrom>,
    /// The last re-creation.
    pub recreation: Option<Recreation>,
    /// Completed re-creations since the journal began.
    pub completed_recreations: u64,
    /// A re-creation whose step is blocked in the kernel: no other writer touches the
    /// device until it returns.
    #[serde(default)]
    pub blocked: Option<BlockedRecreation>,
    /// The device's own driver is re-creating it (it asked its NIC driver for a reset, or
    /// the device left without the engine's doing): the engine starts no re-creation of its
    /// own meanwhile.
    #[serde(default)]
    pub driver_reset: Option<DriverReset>,
}

/// A re-creation of a device by its own driver, in progress.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct DriverReset {
    /// When it was first seen (the reset request, or the device's departure).
    pub since: Instant,
    /// The driver said so (`Requesting a reset`); otherwise the device just left.
    pub requested: bool,
}

/// A device re-creation blocked in the kernel (journaled: a restarted daemon still knows
/// that a writer it cannot see may hold the device).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedRecreation {
    /// The re-creation action.
    pub action: ActionId,
    /// Its attempt number.
    pub attempt: u32,
    /// Who asked for it.
    pub origin: Origin,
    /// When the blocked step started.
    pub since: Instant,
    /// What the executor saw.
    pub step: BlockedStep,
}

/// What a portal's probes said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortalRecord {
    /// The portal.
    pub portal: Portal,
    /// Consecutive successful probes.
    pub consecutive_ok: u32,
    /// The probe in flight.
    pub inflight: Option<ActionId>,
    /// When the probe in flight started.
    #[serde(default)]
    pub inflight_started: Option<Instant>,
    /// When the probes of the current run of successes started, oldest first (bounded). A
    /// port counts only those started after its fault, so a success from an earlier episode
    /// never counts.
    #[serde(default)]
    pub ok_started: Vec<Instant>,
    /// When the probe whose result is the newest started: an older probe's late result never
    /// overrides a newer one.
    #[serde(default)]
    pub newest_started: Option<Instant>,
}

impl PortalRecord {
    /// Most successes a portal record keeps (more than any sane `probe-successes`).
    pub(crate) const MAX_OK_KEPT: usize = 64;

    /// A portal never probed.
    pub fn new(portal: Portal) -> Self {
        PortalRecord {
            portal,
            consecutive_ok: 0,
            inflight: None,
            inflight_started: None,
            ok_started: Vec::new(),
            newest_started: None,
        }
    }

    /// Consecutive successes of probes started at or after `from`.
    pub(crate) fn successes_since(&self, from: Instant) -> u32 {
        let n = self.ok_started.iter().filter(|t| **t >= from).count();
        u32::try_from(n).unwrap_or(u32::MAX)
    }
}

/// What an in-flight action was for, so its outcome (or its silence) can be handled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum InFlightKind {
    /// A portal probe.
    Probe(Portal),
    /// A device re-creation.
    Recreate(String),
    /// A logout of a session.
    Logout(SessionKey),
    /// A login of a session.
    Login(SessionKey),
    /// A rescan of a session.
    Rescan(SessionKey),
    /// A self-test of a port.
    SelfTest(PortId),
    /// An operator's `reconnect` of a live session no port holds (not placed on an RDMA
    /// port): its logout; the login follows.
    OperatorLogout(IscsiNode),
    /// The login that follows [`InFlightKind::OperatorLogout`].
    OperatorLogin(IscsiNode),
}

/// An action whose outcome is awaited.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InFlight {
    /// The action.
    pub id: ActionId,
    /// What for.
    pub kind: InFlightKind,
    /// No outcome by then = timed out (or lost in a restart).
    pub deadline: Instant,
}

/// A change of phase, with its reason in operator words.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Transition {
    /// When.
    pub at: Instant,
    /// Which port.
    pub port: PortId,
    /// From.
    pub from: Phase,
    /// To.
    pub to: Phase,
    /// Why.
    pub reason: String,
}

impl fmt::Display for Transition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} -> {}: {}",
            self.port, self.from, self.to, self.reason
        )
    }
}

/// The journal: everything needed to resume after a restart.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EngineSnapshot {
    /// Format version ([`EngineSnapshot::VERSION`]).
    pub version: u32,
    /// When it was taken.
    pub taken_at: Instant,
    /// The next action id.
    pub next_id: u64,
    /// Jitter generator state.
    pub rng: u64,
    /// Automatic actions paused by the operator.
    pub paused: bool,
    /// The device being re-created, if any.
    pub recreating: Option<String>,
    /// Ports.
    pub ports: Vec<PortRecord>,
    /// Remembered sessions.
    pub sessions: Vec<SessionRecord>,
    /// Devices.
    pub devices: Vec<DeviceRecord>,
    /// Portals being probed.
    pub portals: Vec<PortalRecord>,
    /// Actions awaiting an outcome.
    pub inflight: Vec<InFlight>,
    /// Kernel bugs automatic re-creation is held on.
    #[serde(default)]
    pub kernel_bugs: Vec<KernelBugHold>,
}

impl EngineSnapshot {
    /// The current format version.
    pub const VERSION: u32 = 1;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stage_fires_its_own_timer_once_and_only_when_due() {
        let mut s = Stage::Reconnecting {
            timer: Some((ReconnectTimer::Grace, Instant(5_000))),
            ops_not_before: None,
        };
        assert_eq!(s.wake(), Some((TimerKind::Grace, Instant(5_000))));
        assert_eq!(s.take_due_wake(Instant(4_999)), None);
        assert_eq!(s.take_due_wake(Instant(5_000)), Some(TimerKind::Grace));
        assert_eq!(s.take_due_wake(Instant(6_000)), None);
        assert_eq!(s.wake(), None);
    }

    #[test]
    fn only_stages_that_give_up_have_a_deadline() {
        let mut reconnecting = Stage::reconnecting();
        reconnecting.set_deadline(Some(Instant(1)));
        assert_eq!(reconnecting.deadline(), None);
        let mut resetting = Stage::resetting_device();
        resetting.set_deadline(Some(Instant(1)));
        assert_eq!(
            resetting,
            Stage::ResettingDevice {
                verify_until: Some(Instant(1))
            }
        );
    }

    #[test]
    fn a_healthy_port_reports_no_episode_data() {
        let p = PortRecord::new(PortId::new("rxe_ini", 1), Instant(0));
        assert_eq!(p.phase(), Phase::Healthy);
        assert_eq!(
            (p.fault(), p.attempts(), p.evidence(), p.needs_recreate()),
            (None, 0, 0, false)
        );
        assert_eq!(
            (p.origin(), p.wake(), p.deadline()),
            (Origin::Automatic, None, None)
        );
    }
}
