//! Journal format version 2: version 1 plus what the engine learned from the real-kernel run
//! (target-back gating by probe start times, the fresh-QP check after a re-creation, hold
//! re-alert times, troubled sessions, the `NoPortalKnown` hold, operator logout/login in
//! flight; later, without a format bump, the RDMA consumers named by a hold or a
//! re-creation, absent when none; the NVMe over RDMA controllers a re-creation remembered and
//! what became of them, `nvme-controllers`, absent when none: a release from before it
//! refuses a file that has it, as it refuses any unknown field; the NFS over RDMA mounts a
//! re-creation remembered and what their checks said, `nfs-mounts`, absent when none, the
//! same way). Every field added since v1 has a default, so a v1 file is a v2 file without them
//! ([`super::migrate_v1`]).
//!
//! Frozen once released: these types say what is on disk, not what the engine holds. Names, variants and
//! shapes must never change here; a new format is a new module (see the parent module).
//! Times are milliseconds on the engine's monotonic clock; action ids are plain numbers.
//! Unknown fields are refused, so a file is either read completely or not at all.

use serde::{Deserialize, Serialize};

/// The whole file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalFile {
    /// Always 2.
    pub version: u32,
    /// When the snapshot was taken (ms).
    pub taken_at: u64,
    /// The next action id.
    pub next_id: u64,
    /// Jitter generator state.
    pub rng: u64,
    /// Automatic actions paused by the operator.
    pub paused: bool,
    /// The device being re-created.
    pub recreating: Option<String>,
    /// Ports.
    pub ports: Vec<Port>,
    /// Remembered sessions.
    pub sessions: Vec<Session>,
    /// RDMA devices.
    pub devices: Vec<Device>,
    /// Portals being probed.
    pub portals: Vec<PortalProbe>,
    /// Actions awaiting an outcome.
    pub inflight: Vec<InFlight>,
    /// Past and ongoing incidents, oldest first (bounded by the daemon); absent in files
    /// written before incidents were kept.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub incidents: Vec<Incident>,
    /// Kernel bugs automatic re-creation is held on; absent when none (and in files written
    /// before kernel bugs were held).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_bugs: Vec<KernelBug>,
}

/// An RDMA port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortId {
    /// RDMA device name.
    pub device: String,
    /// Port number, from 1.
    pub port: u32,
}

/// A target portal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Portal {
    /// Address without brackets.
    pub address: String,
    /// TCP port.
    pub port: u16,
}

/// A session's node identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SessionKey {
    /// Target IQN.
    pub target: String,
    /// Portal.
    pub portal: Portal,
    /// iscsiadm iface.
    pub iface: String,
}

/// Phase of a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Phase {
    /// Healthy.
    Healthy,
    /// Faulted.
    Faulted,
    /// AwaitingTarget.
    AwaitingTarget,
    /// AwaitingDevice.
    AwaitingDevice,
    /// ResettingDevice.
    ResettingDevice,
    /// Reconnecting.
    Reconnecting,
    /// Verifying.
    Verifying,
    /// Quarantined.
    Quarantined,
    /// A re-creation step blocked in the kernel (added without a format bump: older
    /// journals never hold it).
    RecreationBlocked,
}

/// How a stuck GSI QP was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StuckEvidence {
    /// irdma modify_qp invalid.
    ModifyQpInvalid,
    /// MAD ib_modify_qp to RTS: -22.
    MadRtsFailed,
    /// Fatal error on MAD QP 1.
    MadQpFatal,
    /// The QP table.
    QpTable,
    /// MAD `Couldn't open port N` (added without a format bump: older journals never hold it).
    MadPortOpenFailed,
    /// DEVICE_FATAL on the async event channel (same).
    AsyncDeviceFatal,
}

/// Why a port is not healthy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Fault {
    /// GSI QP stuck.
    GsiStuck {
        /// How it was seen.
        evidence: StuckEvidence,
    },
    /// Device gone.
    DeviceGone,
    /// Sessions down.
    SessionsDown,
    /// Zombie session.
    Zombie {
        /// The session.
        session: SessionKey,
    },
    /// Operator.
    Operator,
}

/// Why a port does not act.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Hold {
    /// Paused.
    Paused,
    /// Dry run.
    DryRun,
    /// Not in the allow-list.
    NotAllowed,
    /// Healthy sessions would be disrupted.
    OtherSessionsHealthy {
        /// Those sessions.
        sessions: Vec<SessionKey>,
        /// Live RDMA consumers other than iSER that would lose their connections; absent
        /// when none (and in files written before consumers were known).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        consumers: Vec<Consumer>,
    },
    /// The last usable paths of dm-multipath maps are on the device (a release from before
    /// it refuses a file that has it).
    LastMultipathPath {
        /// Those paths.
        paths: Vec<JournalMultipathPath>,
    },
    /// Another device is being re-created.
    WaitingForSlot {
        /// That device.
        busy: String,
    },
    /// Target-back mode, but no portal is known to probe (v2).
    NoPortalKnown,
    /// A kernel bug report holds automatic re-creation (v2).
    KernelBug {
        /// The module the report named.
        module: Option<String>,
        /// The report in operator words.
        report: String,
    },
}

/// A kernel bug automatic re-creation is held on (v2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KernelBug {
    /// The module the report named.
    pub module: Option<String>,
    /// The report in operator words.
    pub report: String,
    /// When it was first seen (ms).
    pub at: u64,
    /// Every device is held.
    pub all_devices: bool,
    /// Devices the operator lifted it for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lifted_for: Vec<String>,
}

/// A port timer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerKind {
    /// ProbeRound.
    ProbeRound,
    /// Backoff.
    Backoff,
    /// Grace.
    Grace,
    /// SessionRefresh.
    SessionRefresh,
}

/// Who drives an episode or asked for an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Origin {
    /// Automatic.
    Automatic,
    /// Operator.
    Operator,
}

/// One port's recovery.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Port {
    /// The port.
    pub id: PortId,
    /// Phase.
    pub phase: Phase,
    /// Fault.
    pub fault: Option<Fault>,
    /// Reason of the last transition.
    pub reason: String,
    /// Phase entered at (ms).
    pub since: u64,
    /// Episode began at (ms).
    pub fault_since: Option<u64>,
    /// Attempts in this episode.
    pub attempts: u32,
    /// Hold.
    pub hold: Option<Hold>,
    /// Phase timer: kind and when (ms).
    pub wake: Option<(TimerKind, u64)>,
    /// Phase deadline (ms).
    pub deadline: Option<u64>,
    /// Target back since (ms).
    pub target_back_at: Option<u64>,
    /// Target rejects iSER connections.
    pub listener_gone: bool,
    /// Last `invalid service ID` rejection (ms).
    pub listener_rejected_at: Option<u64>,
    /// A re-creation is needed.
    pub needs_recreate: bool,
    /// A re-creation completed in this episode.
    pub recreated: bool,
    /// A re-creation was in flight at a restart.
    pub verify_recreate: bool,
    /// Kernel lines seen for this fault.
    pub evidence: u64,
    /// Link state.
    pub link_up: bool,
    /// Who drives this episode.
    pub origin: Origin,
    /// Do not wait for the target.
    pub skip_target_wait: bool,
    /// Session ops need a session list at least this recent (ms).
    pub ops_not_before: Option<u64>,
    /// Remembered sessions on this port.
    pub sessions: Vec<SessionKey>,
    /// Sessions to log out and in regardless.
    pub targeted: Vec<SessionKey>,
    /// Only probes started at or after this count toward the target's return (ms; v2).
    #[serde(default)]
    pub probes_count_from: Option<u64>,
    /// After a re-creation: the new GSI QP has not yet been seen in RTS (v2).
    #[serde(default)]
    pub awaiting_fresh_qp: bool,
    /// This attempt already re-created the device (v2).
    #[serde(default)]
    pub attempt_recreated: bool,
    /// When the current hold was last alerted (ms; v2).
    #[serde(default)]
    pub hold_alerted_at: Option<u64>,
    /// The current attempt's port self-test (added without a format bump: absent when none,
    /// and in every file written before self-tests).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selftest: Option<SelfTestProgress>,
    /// The port's last self-test (same: absent when none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_selftest: Option<SelfTestRecord>,
}

/// Where the current attempt's self-test is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelfTestProgress {
    /// In flight (action id).
    Running(u64),
    /// Passed, with the report's summary.
    Passed(String),
    /// Could not run, with the reason.
    Unavailable(String),
}

/// What a self-test concluded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SelfTestVerdict {
    /// Passed.
    Passed,
    /// Failed.
    Failed,
    /// Unavailable.
    Unavailable,
}

/// A port's last self-test.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SelfTestRecord {
    /// When its result came (ms).
    pub at: u64,
    /// What it concluded.
    pub verdict: SelfTestVerdict,
    /// Its summary.
    pub summary: String,
    /// Steps that ran.
    pub steps: u32,
    /// Time of the steps (ms).
    pub took_ms: u64,
}

/// iSCSI session state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionState {
    /// LOGGED_IN.
    #[serde(rename = "LOGGED_IN")]
    LoggedIn,
    /// FAILED.
    #[serde(rename = "FAILED")]
    Failed,
    /// FREE.
    #[serde(rename = "FREE")]
    Free,
    /// Anything else.
    #[serde(rename = "UNKNOWN")]
    Unknown,
}

/// A disk of a session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Disk {
    /// Block device name.
    pub name: String,
    /// sysfs device state.
    pub state: String,
}

/// A session's reconnect.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SessionOp {
    /// Logout in flight (action id).
    LoggingOut(u64),
    /// Logged out.
    LoggedOut,
    /// Login in flight (action id).
    LoggingIn(u64),
    /// Done.
    Done,
    /// Failed, with the reason.
    Failed(String),
}

/// A remembered session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Session {
    /// Node identity.
    pub key: SessionKey,
    /// iface transport.
    pub transport: String,
    /// Its port.
    pub port: PortId,
    /// Last SID.
    pub sid: Option<u32>,
    /// In the last iscsiadm list.
    pub present: bool,
    /// Last state.
    pub state: SessionState,
    /// Last disks.
    pub disks: Vec<Disk>,
    /// I/O error times (ms).
    pub io_errors: Vec<u64>,
    /// Reconnect in this episode.
    pub op: Option<SessionOp>,
    /// Named in an alert as not restored.
    pub reported: bool,
    /// Trouble seen since it was last healthy: vanishing now is no clean logout (v2).
    #[serde(default)]
    pub troubled: bool,
    /// What placed it on its port, in operator words (v2).
    #[serde(default)]
    pub placed_by: Option<String>,
}

/// Where a re-creation got.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecreationState {
    /// InFlight.
    InFlight,
    /// Completed.
    Completed,
    /// Failed.
    Failed,
}

/// A device's last re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Recreation {
    /// Action id.
    pub id: u64,
    /// Attempt.
    pub attempt: u32,
    /// Started at (ms).
    pub started: u64,
    /// State.
    pub state: RecreationState,
    /// Who asked.
    pub origin: Origin,
    /// The RDMA consumers other than iSER on the device when it was decided; absent when
    /// none (and in files written before consumers were known).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub consumers: Vec<Consumer>,
    /// The NVMe over RDMA controllers on the device when it was decided, each with what
    /// became of it once reported; absent when none (a release from before this field
    /// refuses a file that has it).
    #[serde(
        rename = "nvme-controllers",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub nvme_controllers: Vec<JournalNvmeCtrl>,
    /// The NFS over RDMA mounts on the device when it was decided, each with what its check
    /// said once reported; absent when none (a release from before this field refuses a file
    /// that has it).
    #[serde(rename = "nfs-mounts", default, skip_serializing_if = "Vec::is_empty")]
    pub nfs_mounts: Vec<JournalNfsMount>,
    /// The dm-multipath paths on the device when it was decided, each with what became of
    /// it once reported; absent when none (a release from before this field refuses a file
    /// that has it).
    #[serde(
        rename = "multipath-paths",
        default,
        skip_serializing_if = "Vec::is_empty"
    )]
    pub multipath_paths: Vec<JournalMultipathPath>,
}

/// An NFS over RDMA mount remembered by a re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalNfsMount {
    /// Mount point.
    pub mount_point: String,
    /// Mount source (`server:/export`).
    pub source: String,
    /// `nfs` or `nfs4`.
    pub fstype: String,
    /// `vers=`.
    pub version: Option<String>,
    /// `addr=`.
    pub server: String,
    /// `port=`.
    pub port: Option<u16>,
    /// `clientaddr=`.
    pub client_addr: Option<String>,
    /// `rdma` or `rdma6`.
    pub proto: String,
    /// RDMA device and port it was placed on.
    pub placed: Option<(String, u32)>,
    /// What its check said after the re-creation; absent until reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<JournalNfsCheck>,
}

/// What the check of a remembered NFS mount said.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalNfsCheck {
    /// `answered`, `no-answer`, `error`.
    pub result: String,
    /// Milliseconds to the answer (`answered`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_ms: Option<u64>,
    /// The bound in seconds (`no-answer`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_s: Option<u64>,
    /// A stat from an earlier check was still pending (`no-answer`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub earlier_pending: bool,
    /// The OS error (`error`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub errno: Option<String>,
}

/// A dm-multipath path remembered by a re-creation or named by a hold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalMultipathPath {
    /// Map alias.
    pub map: String,
    /// Block device then.
    pub dev: String,
    /// H:C:T:L then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hcil: Option<String>,
    /// Port of the device.
    pub port: u32,
    /// The iSCSI session or NVMe controller carrying it.
    pub link: String,
    /// dm state then: `active`, `failed`, `undef`.
    pub dm: String,
    /// What became of it: `active`, `reinstated`, `failed`, `missing`; absent until
    /// reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// Its block device after the re-creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    /// Why it is not back (`failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An NVMe over RDMA controller remembered by a re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalNvmeCtrl {
    /// Its name when remembered (`nvme0`).
    pub name: String,
    /// `traddr`.
    pub traddr: String,
    /// `trsvcid`.
    pub trsvcid: Option<String>,
    /// `host_traddr`.
    pub host_traddr: Option<String>,
    /// `host_iface`.
    pub host_iface: Option<String>,
    /// Subsystem NQN.
    pub subsysnqn: String,
    /// Host NQN.
    pub hostnqn: Option<String>,
    /// Host ID.
    pub hostid: Option<String>,
    /// Its state when remembered.
    pub state: String,
    /// I/O queues.
    pub io_queues: Option<u32>,
    /// Queue size.
    pub queue_size: Option<u32>,
    /// ctrl_loss_tmo seconds (-1: off).
    pub ctrl_loss_tmo: Option<i64>,
    /// reconnect_delay seconds.
    pub reconnect_delay: Option<u32>,
    /// Keep-alive timeout seconds.
    pub kato: Option<u32>,
    /// Namespaces: block device and NSID.
    pub namespaces: Vec<(String, Option<u32>)>,
    /// RDMA device and port it was placed on.
    pub placed: Option<(String, u32)>,
    /// What became of it after the re-creation; absent until reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<JournalNvmeResult>,
}

/// What became of a remembered NVMe controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalNvmeResult {
    /// `back`, `no-nvme-cli`, `disabled`, `connect-failed`, `not-found`, `not-live`,
    /// `namespaces-missing`, `read-failed`.
    pub result: String,
    /// Its name after the reconnect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub now: Option<String>,
    /// Its last state (`not-live`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Missing namespaces (`namespaces-missing`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing: Vec<String>,
    /// The namespace whose read failed (`read-failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The error (`connect-failed`, `read-failed`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// An RDMA device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Device {
    /// Name.
    pub name: String,
    /// Present when last seen.
    pub present: bool,
    /// Parent.
    pub parent: Option<String>,
    /// Driver.
    pub driver: Option<String>,
    /// What re-creating it needs, remembered while it existed (v2).
    #[serde(default)]
    pub remembered: Option<Recipe>,
    /// Last re-creation.
    pub recreation: Option<Recreation>,
    /// Completed re-creations.
    pub completed_recreations: u64,
    /// A re-creation blocked in the kernel (added without a format bump: older journals
    /// never hold it, and it is written only while one is blocked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blocked: Option<BlockedRecreation>,
    /// A re-creation by the device's own driver in progress (added without a format bump,
    /// like `blocked`: written only while one is in progress).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver_reset: Option<DriverReset>,
}

/// A re-creation by the device's own driver.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DriverReset {
    /// First seen at (ms).
    pub since: u64,
    /// The driver asked for it (`Requesting a reset`).
    pub requested: bool,
}

/// A re-creation whose step is blocked in the kernel.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockedRecreation {
    /// Action id.
    pub action: u64,
    /// Attempt.
    pub attempt: u32,
    /// Who asked.
    pub origin: Origin,
    /// The blocked step started at (ms).
    pub since: u64,
    /// The step as typed.
    pub step: String,
    /// How long it had run when reported (ms).
    pub blocked_ms: u64,
    /// The task in words.
    pub task: String,
    /// In uninterruptible sleep.
    pub uninterruptible: bool,
    /// Its kernel stack.
    pub stack: Vec<String>,
    /// Process id.
    pub pid: i32,
    /// Thread id.
    pub tid: Option<i32>,
    /// Start time (clock ticks since boot).
    pub start_time: Option<u64>,
}

/// What re-creating a device needs once it is gone (v2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case", deny_unknown_fields)]
pub enum Recipe {
    /// `rdma link add NAME type KIND netdev NETDEV`.
    SoftLink {
        /// `rxe` or `siw`.
        kind: String,
        /// The netdev.
        netdev: String,
    },
    /// The parent function.
    Parent {
        /// Its bus (`pci`).
        bus: String,
        /// Its name on that bus (`0000:02:00.0`).
        name: String,
        /// Its driver (`ice`).
        driver: Option<String>,
        /// The RDMA auxiliary device.
        aux: Option<AuxDevice>,
        /// Netdevs of the device's ports.
        netdevs: Vec<String>,
    },
}

/// An RDMA auxiliary device (v2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuxDevice {
    /// Name (`ice.roce.0`).
    pub name: String,
    /// Driver folder (`irdma.gen_2`).
    pub driver_dir: Option<String>,
    /// Module (`irdma`).
    pub module: Option<String>,
}

/// Probes of a portal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PortalProbe {
    /// The portal.
    pub portal: Portal,
    /// Consecutive successes.
    pub consecutive_ok: u32,
    /// Probe in flight (action id).
    pub inflight: Option<u64>,
    /// When the probe in flight started (ms; v2).
    #[serde(default)]
    pub inflight_started: Option<u64>,
    /// Start times of the current run of successes, oldest first (ms; v2).
    #[serde(default)]
    pub ok_started: Vec<u64>,
    /// Start time of the probe whose result is the newest (ms; v2).
    #[serde(default)]
    pub newest_started: Option<u64>,
}

/// What an in-flight action is for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum InFlightKind {
    /// Probe.
    Probe(Portal),
    /// Re-creation of a device.
    Recreate(String),
    /// Logout.
    Logout(SessionKey),
    /// Login.
    Login(SessionKey),
    /// Rescan.
    Rescan(SessionKey),
    /// An operator's logout of a live session (v2).
    OperatorLogout(Node),
    /// The login that follows an operator's logout (v2).
    OperatorLogin(Node),
    /// A port self-test (added without a format bump: older journals never hold it).
    SelfTest(PortId),
}

/// An iSCSI node addressed by an operator's reconnect (v2).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Node {
    /// Target, portal and iface.
    pub key: SessionKey,
    /// iface transport.
    pub transport: String,
}

/// An action awaiting its outcome.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InFlight {
    /// Action id.
    pub id: u64,
    /// What for.
    pub kind: InFlightKind,
    /// Deadline (ms).
    pub deadline: u64,
}

/// A moment on both clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Stamp {
    /// Engine clock (ms).
    pub mono: u64,
    /// Wall clock (ms since the Unix epoch).
    pub unix_ms: u64,
}

/// How an incident ended, so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IncidentOutcome {
    /// Still recovering.
    Ongoing,
    /// Verified healthy again.
    Recovered,
    /// Automatic recovery stopped.
    Quarantined,
}

/// An incident's first repair action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IncidentAction {
    /// When.
    pub at: Stamp,
    /// What, in words.
    pub what: String,
    /// Run, or only planned.
    pub run: bool,
}

/// One incident (see `observe::incidents`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Incident {
    /// Number.
    pub id: u64,
    /// `device/port`.
    pub port: String,
    /// First sign.
    pub started: Stamp,
    /// What it was.
    pub first_sign: String,
    /// Cause known.
    pub detected: Stamp,
    /// The cause.
    pub cause: String,
    /// The cause is on this host.
    pub local: bool,
    /// First repair action.
    pub first_action: Option<IncidentAction>,
    /// Quarantined at.
    pub quarantined: Option<Stamp>,
    /// Recovered at.
    pub recovered: Option<Stamp>,
    /// Outcome.
    pub outcome: IncidentOutcome,
    /// Attempts used.
    pub attempts: u32,
    /// Last transition's reason.
    pub last_reason: String,
    /// How the device was last re-created; absent when none was (and in files written
    /// before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recreation: Option<String>,
}

/// An RDMA consumer named by a decision (a hold, a re-creation).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Consumer {
    /// Port of the device.
    pub port: u32,
    /// Kind (`nvme-rdma`, `user-space`, …: the keys of `[recovery.consumers]`).
    pub kind: String,
    /// Who, in operator words.
    pub owner: String,
    /// Had something live on the port.
    pub live: bool,
}
