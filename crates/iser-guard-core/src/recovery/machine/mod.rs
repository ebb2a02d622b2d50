//! The engine: inputs and `now` in, actions out.
//!
//! [`Engine`] holds every port's [`PortRecord`](super::PortRecord); a port's
//! [`PortState`](super::PortState) is `Healthy`, or `Recovering` with the episode (what spans
//! its stages) and the [`Stage`](super::Stage) it is in, each stage carrying its own timer and
//! deadline. This module owns the engine's data and its public face (construction, queries,
//! `poll_*`, `next_timeout`, input dispatch); each part of the machine lives in its own file:
//!
//! | File | Owns |
//! |---|---|
//! | `observe.rs` | detection: kernel-log and netlink observations → faults |
//! | `sessions.rs` | the iscsiadm session list, remembered sessions, placement kept |
//! | `outcome.rs` | routing outcomes and timers to the stage that waits for them |
//! | `fault.rs` | opening/escalating an episode, the evaluation loop, stage `Faulted` |
//! | `await_target.rs` | stage `AwaitingTarget`: probes, hysteresis, dead listener |
//! | `device.rs` | the device going and coming back, stage `AwaitingDevice`, renames |
//! | `reset.rs` | stage `ResettingDevice`: deciding a re-creation, its outcome |
//! | `blocked.rs` | stage `RecreationBlocked`: a re-creation step held by the kernel, no second writer |
//! | `reconnect.rs` | stage `Reconnecting`: grace period, logins, iscsiadm outcomes |
//! | `verify.rs` | stage `Verifying` and the way back to `Healthy` |
//! | `selftest.rs` | the port self-test after a re-creation, async events as witnesses |
//! | `quarantine.rs` | failed attempts, back-off, stage `Quarantined` |
//! | `hold.rs` | holds (dry-run, pause, allow-list, other sessions, slot, no portal) |
//! | `kernel_bug.rs` | kernel bug reports: the operator alert and the re-creation hold |
//! | `operator.rs` | operator commands |
//! | `transition.rs` | moving a port between states, records on first sight |
//! | `journal.rs` | resume, snapshot, write-ahead and unchanged-write skipping |
//! | `emit.rs` | actions, refresh requests, alerts, jitter |
//! | `queries.rs` | read-only views of the records |
//! | `unknown.rs` | records about devices never shown: no port, counted, kept bounded |

mod await_target;
mod blocked;
mod device;
mod driver_reset;
mod emit;
mod fault;
mod hold;
mod journal;
mod kernel_bug;
mod multipath;
mod nfs;
mod nvme;
pub use multipath::MULTIPATH_BACK_TIMEOUT;
pub use nfs::NFS_CHECK_WINDOW;
pub use nvme::NVME_BACK_TIMEOUT;
mod observe;
mod operator;
mod outcome;
mod quarantine;
mod queries;
mod reconnect;
mod reset;
mod selftest;
mod sessions;
mod stack;
mod transition;
mod unknown;
mod verify;

use std::collections::{BTreeMap, HashMap, VecDeque};

use super::action::{Action, ActionId};
use super::alerts::AlertGate;
use super::input::{Input, PortId, Portal, ScanComplete, SessionInfo, SessionKey};
use super::policy::Policy;
use super::state::{
    DeviceRecord, EngineSnapshot, Hold, InFlight, KernelBugHold, PortRecord, PortalRecord,
    SessionRecord, Transition,
};
use crate::time::Instant;

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
    #[error("no RDMA device named {device} is known on this host; {}", known_devices(.known))]
    UnknownDevice {
        /// The device asked for.
        device: String,
        /// The devices that are known.
        known: Vec<String>,
    },
    /// The device has no such port.
    #[error("RDMA device {device} has no port {port}; {}", known_ports(device, .ports))]
    UnknownPort {
        /// The device.
        device: String,
        /// The port asked for.
        port: u32,
        /// The ports it has.
        ports: Vec<u32>,
    },
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
    /// The device's re-creation is blocked in the kernel: another would block behind it.
    #[error(
        "the re-creation of {device} has been blocked in the kernel for {secs} s (`{step}` has \
         not returned): another re-creation would block behind it. Free the device (`rdma \
         resource show cm_id`, `fuser -v /dev/infiniband/*`: stop what holds it); iser-guard \
         resumes by itself when the step returns"
    )]
    RecreationBlocked {
        /// The device.
        device: String,
        /// The blocked step.
        step: String,
        /// Seconds blocked so far.
        secs: u64,
    },
}

fn known_devices(known: &[String]) -> String {
    if known.is_empty() {
        "none is known (`iser-guard status` lists what the kernel shows)".to_string()
    } else {
        format!("the known devices are {}", known.join(", "))
    }
}

fn known_ports(device: &str, ports: &[u32]) -> String {
    if ports.is_empty() {
        format!("no port of {device} is known")
    } else {
        let list: Vec<String> = ports.iter().map(|p| format!("{device}/{p}")).collect();
        format!("its ports are {}", list.join(", "))
    }
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
    /// Kernel-log records about a device topology never showed (no port made for them).
    pub unknown_device_records: u64,
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
///    write is [`Outcome::PersistFailed`] and [`Outcome::NotRun`] for the destructive
///    actions of that batch), decides dry-run, pause and the allow-list, and reports an
///    action it did not run as [`Outcome::Planned`] (the port is held, no attempt is
///    counted);
/// 4. drain [`poll_transition`](Engine::poll_transition) into the log;
/// 5. sleep until `next_timeout()` or the next input.
///
/// After a restart, build the engine with [`Engine::resume`] from the journal: a device
/// re-creation that completed is never repeated, and one that was in flight is verified
/// (QP table), not repeated.
///
/// [`Outcome::PersistFailed`]: crate::recovery::Outcome::PersistFailed
/// [`Outcome::NotRun`]: crate::recovery::Outcome::NotRun
/// [`Outcome::Planned`]: crate::recovery::Outcome::Planned
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
    /// When a probe round last marked the journal dirty (`journal::PROBE_ROUND_JOURNAL`).
    last_probe_round_journal: Option<Instant>,
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
    /// Kernel bugs automatic re-creation is held on (journaled), one per module.
    kernel_bugs: Vec<KernelBugHold>,
    /// "The port self-test is not available" was said (once per engine run, not journaled).
    selftest_unavailable_said: bool,
    /// Records about devices never shown (no port made for them), bounded; not journaled.
    unknown: unknown::UnknownDevices,
    /// The RDMA consumers per port, as last reported (`None`: never, e.g. no RDMA
    /// netlink). Not journaled: the first dump after a start reports them.
    consumers: Option<Vec<crate::consumers::PortConsumers>>,
    /// The NVMe over RDMA controllers, as last reported (`None`: never).
    nvme: Option<Vec<crate::nvme_fabrics::NvmeRdmaController>>,
    /// The NFS over RDMA mounts, as last reported (`None`: never).
    nfs: Option<Vec<crate::nfs_rdma::NfsRdmaMount>>,
    /// The dm-multipath paths, as last reported (`None`: never; not journaled).
    multipath: Option<Vec<crate::multipath::MultipathPath>>,
    /// Driver-stack conditions the host's facts show, as last reported; not journaled (the
    /// first scan after a start reports them again).
    stack_facts: Vec<crate::driver_stack::StackCondition>,
    /// Driver-stack conditions the kernel log said (safe mode), for this run.
    stack_said: Vec<crate::driver_stack::StackCondition>,
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
            last_probe_round_journal: None,
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
            kernel_bugs: Vec::new(),
            selftest_unavailable_said: false,
            unknown: unknown::UnknownDevices::default(),
            consumers: None,
            nvme: None,
            nfs: None,
            multipath: None,
            stack_facts: Vec::new(),
            stack_said: Vec::new(),
        }
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

    /// A complete scan was reported since the start (destructive actions may run).
    pub fn scan_complete(&self) -> bool {
        self.scanned
    }
}
