//! The simulated host: RDMA devices with ports and a GSI QP each, iSCSI targets, iscsid's
//! sessions and its reconnect loop, an iscsiadm with its real output and exit codes, and the
//! kernel log, all in virtual time.
//!
//! Physics kept from the real systems (reference kernel-facts.md, lab.md):
//! - irdma: when iscsid's CM handshake goes to a target that vanished, QP 1 (GSI) goes to ERR
//!   and stays there; every later MAD send logs the `modify_qp invalid` / `ib_mad_send_error`
//!   pair, and no session can reconnect on that port until the device is re-created. rxe's
//!   GSI QP never gets stuck.
//! - NOP-Out 5 s + 5 s detects a dead target (conn error 1022); iscsid retries every 3 s;
//!   after `replacement_timeout` (120 s) the session recovery times out and I/O fails.
//! - A connect attempt whose CM requests are all lost (a port whose CM path is silently dead,
//!   as under the lab's GSI stand-in) lasts iscsid's login timer (15 s), and re-creating the
//!   device does not end it (lab, 6.1 and 6.12: ib_iser leaves a connecting endpoint pending
//!   when its device goes).
//! - A short target link outage leaves a zombie: LOGGED_IN, but every I/O fails with
//!   DID_ABORT until the session is logged out and in.
//! - A target whose iSER listener died rejects CM connections while its portal still
//!   answers TCP; the 6.1 kernel logs `RDMA CM: REJECTED: invalid service ID` only with
//!   dynamic debug on ([`SimHost::cm_debug`], off by default). A missing initiator device
//!   gives `ADDR_ERROR … -19`.
//!
//! Host facts kept from the lab (Debian 6.1/6.12 guests, rxe on both ends of a veth):
//! - `iscsiadm -m session -P 3` is rendered as the real tool prints it and parsed by the
//!   real parser: iSER ifaces say `Iface IPaddress: [default]` and `Iface Netdev: default`,
//!   so nothing in it ties a session to a device; a session is known by target + portal +
//!   iface, and its SID changes with every new login (iscsid's own reconnects keep it);
//! - the default host has two RDMA devices: the initiator's and the target's (`rxe_tgt` on
//!   `tgt0`, holding ib_isert's listener and its side of every connection);
//! - the RDMA CM id table (`RES_CM_ID_GET`): one ib_iser cm_id per connected session, on its
//!   device and port, src = the netdev's address and a new source port per connection,
//!   dst = the portal; gone while the session is down;
//! - the route to each portal names the initiator netdev (as `ip route get` does in the
//!   lab), and each RDMA port's netdev is what sysfs `gid_attrs/ndevs` says;
//! - a device deleted and added back gets a new index (rxe_ini 0 -> 2); its netdev stays.
//! - a deleted device (`rdma link delete rxe_ini`, lab nldevcap-*: `rdma dev` no longer lists
//!   it, session FAILED / REOPEN) is gone from sysfs and RDMA netlink with its QPs and CM ids;
//!   nothing about it can be read any more. Only `rdma link add NAME type rxe netdev N` on a
//!   netdev that exists brings it back (lab: 0.09 s), with a new index and new QPs. A
//!   hardware device comes back only through its parent function (aux `bind`, devlink).
//!
//! Re-creations are planned by the resetter's own planner ([`reset_plan::plan`] on what this
//! host's sysfs shows, [`reset_plan::plan_gone`] on what the action remembered when the
//! device is gone); the host executes the chosen method's commands with their kernel effects.
//!
//! The sessions the agent sees are placed on RDMA ports by the daemon's own code
//! (`core::session_map::place_listing` with its `Placer`, the daemon's door) from those facts.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap, VecDeque};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::kernel;
use crate::core::consumers::PortConsumers;
use crate::core::nldev::{CmIdEntry, QpTypeOrRaw, SockAddr};
use crate::core::qp::QpState;
use crate::core::recovery::{
    ActionId, DiskInfo, Observation, OperatorCommand, Outcome, PortId, Portal, ProbeResult,
    RecreateResult, SessionInfo, SessionKey, SessionState,
};
use crate::core::reset_plan::{
    self, AuxFacts, DeviceFacts, ParentFacts, PlanOptions, RecreateFrom, ResetMethod,
};
use crate::core::session_map::{HostFacts, NetdevAddr, Placer, RdmaPortNetdev};
use crate::core::time::Instant;
use crate::io::neighbour::NeighAnswer;
use crate::io::probe::TcpAnswer;

/// NOP-Out interval + timeout: how long a dead target goes unnoticed.
const NOP_DETECT: Duration = Duration::from_secs(10);
/// iscsid's reconnect interval after an attempt that failed at once (an error from the CM).
const ISCSID_RETRY: Duration = Duration::from_secs(3);
/// The lab's irdma-like rdma_rxe: QP 1 goes to ERR this long after the target's host goes
/// away (measured 10-33 s, 21 s typical: the CM's DREQ retransmission after the kernel's
/// probes of the target's neighbour entry failed; scripts/lab/kmod/README.md).
const KERNEL_NOTICES_GONE: Duration = Duration::from_secs(21);
/// `node.conn[0].timeo.login_timeout`: how long an attempt whose CM requests get no answer at
/// all lasts before iscsid starts the next one. Re-creating the device does not end it: ib_iser
/// leaves an endpoint that is still connecting pending when its device goes (lab, 6.1 and
/// 6.12: attempts under the GSI stand-in began 15.0-15.4 s apart, and the first one after a
/// re-creation began 15 s after the one it interrupted).
const ISCSID_LOGIN_TIMEOUT: Duration = Duration::from_secs(15);
/// `node.session.timeo.replacement_timeout`.
const REPLACEMENT_TIMEOUT: Duration = Duration::from_secs(120);
/// Device re-creation: the device is gone this long.
const RECREATE_TIME: Duration = Duration::from_secs(3);
/// iscsiadm login and logout durations (lab: login ~1.2 s, logout 0.2 s).
const LOGIN_TIME: Duration = Duration::from_millis(1200);
const LOGOUT_TIME: Duration = Duration::from_millis(200);
/// Zombie I/O errors: one failed write every 350 ms, at most this many.
const ZOMBIE_IO_PERIOD: Duration = Duration::from_millis(350);
const ZOMBIE_IO_MAX: u32 = 60;

/// The RDMA driver, which decides whether QP 1 gets stuck.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimDriver {
    /// Intel E810 (ice + irdma): QP 1 gets stuck in ERR when its target vanishes.
    Irdma,
    /// Soft-RoCE: QP 1 never gets stuck (unless [`SimDevice::irdma_gsi`]).
    Rxe,
}

/// What the next re-creation of a device does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecreateBehaviour {
    /// Works.
    Ok,
    /// Fails with this message; the device is unchanged.
    Fail(String),
    /// Works, but the executor's outcome is lost (daemon crash): the engine must verify.
    LoseOutcome,
    /// The step that takes the device down blocks in the kernel for this long (its
    /// unregistration waits for a user of the device to let go), then the re-creation
    /// completes. The executor reports it blocked once the step has outlived its deadline
    /// and the kill grace ([`SimHost::reset_step_deadline`]) and the final result later.
    Blocked(Duration),
    /// No method applies.
    Unsupported(String),
    /// A reset of the function lands between the two devlink calls: ice re-plugs the RDMA
    /// device as `ice.iwarp.0` (its mode bit says RoCE is off). The executor's mode check
    /// finds it and toggles `enable_roce` once more; the device is back as RoCE one
    /// re-creation time later, and the outcome says what was restored.
    IwarpFlip,
}

/// How iscsiadm behaves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IscsiadmPlan {
    /// The next this many invocations hang; the daemon kills each after its timeout.
    pub hang_next: u32,
    /// Logins fail with exit 24 (authentication failed).
    pub auth_fail: bool,
}

/// The target's own RDMA device on the default host (the lab's layout).
pub const TARGET_DEVICE: &str = "rxe_tgt";
/// Its netdev.
pub const TARGET_NETDEV: &str = "tgt0";

/// `enum rdma_cm_state`: RDMA_CM_CONNECT.
const CM_STATE_CONNECT: u8 = 5;
/// RDMA_CM_LISTEN.
const CM_STATE_LISTEN: u8 = 8;
/// RDMA_PS_TCP.
const RDMA_PS_TCP: u32 = 0x106;

/// One simulated RDMA device.
#[derive(Debug, Clone)]
pub struct SimDevice {
    /// Name.
    pub name: String,
    /// RDMA device index (a device deleted and added back gets a new one).
    pub index: u32,
    /// The netdev of each port (index 0 = port 1), as sysfs `gid_attrs/ndevs` names it.
    pub netdevs: Vec<String>,
    /// PCI function.
    pub pci: String,
    /// The RDMA driver.
    pub driver: SimDriver,
    /// Present.
    pub present: bool,
    /// GSI QP state per port (index 0 = port 1).
    pub gsi: Vec<QpState>,
    /// What the next re-creations do (front first); empty = Ok.
    pub plans: VecDeque<RecreateBehaviour>,
    /// Re-creations started.
    pub recreations_started: u32,
    /// Re-creations completed.
    pub recreations_completed: u32,
    /// Re-creation in progress.
    pub recreating: bool,
    /// What the executor's RDMA-mode check will report with this re-creation's outcome.
    pub mode_restored: Option<String>,
    /// Registrations still to come whose CM path is silently dead: QP 1 reaches RTS (the
    /// QP table shows it), yet no connection request gets an answer and nothing is logged,
    /// as a Soft-RoCE connect whose requests are lost times out (scenario fault).
    pub cm_silent_registrations: u32,
    /// This registration's CM path is silently dead: every new RDMA connection on it
    /// (iscsid's, iscsiadm's, the self-test's) times out.
    pub cm_silent: bool,
    /// The lab's irdma-like rdma_rxe (scripts/lab/kmod) for an rxe device: QP 1 goes to ERR
    /// once the kernel notices the target's host is gone ([`KERNEL_NOTICES_GONE`] after the
    /// power-off, the CM then being busy with the failed connection's DREQ), and every CM
    /// attempt once the host answers again prints irdma's refusal (without a parent prefix)
    /// and the MAD layer's line; attempts while it does not answer fail address resolution.
    pub irdma_gsi: bool,
    /// The driver folder its RDMA auxiliary device is bound to (`irdma`; Intel's
    /// out-of-tree irdma names it `irdma.gen_2` on every kernel).
    pub aux_folder: String,
    /// Its RDMA module's `/sys/module/M/taint` (`O`: built outside the kernel tree).
    pub module_taint: String,
    /// Its function's devlink has the `enable_roce` parameter (an out-of-tree ice may not:
    /// the toggle then fails before changing anything and the next method is tried).
    pub devlink_roce: bool,
    /// The methods that failed before the one that worked, with the method, for this
    /// re-creation's outcome.
    pub recreated_by: Option<Vec<crate::io::reset::ResetMethodFailure>>,
}

/// One simulated target portal.
#[derive(Debug, Clone)]
pub struct SimTarget {
    /// IQN.
    pub iqn: String,
    /// Portal.
    pub portal: Portal,
    /// Powered on.
    pub powered: bool,
    /// Link up.
    pub link_up: bool,
    /// iSER listener alive.
    pub listener: bool,
    /// A TCP listener on the portal (false: an iSER-only portal, as arrays with iSER-only
    /// ports have; the host refuses TCP to it and answers ARP/ND).
    pub tcp_listener: bool,
}

impl SimTarget {
    fn reachable(&self) -> bool {
        self.powered && self.link_up
    }
}

/// One iSCSI session as iscsid holds it.
#[derive(Debug, Clone)]
pub struct SimSession {
    /// SID.
    pub sid: u32,
    /// Target, portal, iface.
    pub key: SessionKey,
    /// The RDMA port it runs on.
    pub port: PortId,
    /// State.
    pub state: SessionState,
    /// SCSI host number.
    pub host: u32,
    /// Disks.
    pub disks: Vec<DiskInfo>,
    /// LOGGED_IN but every I/O fails.
    pub zombie: bool,
    /// I/O errors emitted while a zombie.
    pub zombie_errors: u32,
    /// When the connection failed.
    pub down_since: Option<Instant>,
    /// The live connection's ib_iser cm_id (source port, cm-idn); `None` while down.
    pub conn: Option<(u16, u32)>,
}

/// A finished iscsiadm as the daemon's runner captures it (its output on stdout).
fn iscsiadm_output(code: i32, output: &str) -> crate::io::process::Output {
    crate::io::process::Output {
        exit: crate::io::process::Exit::Code(code),
        stdout: output.to_string(),
        stderr: String::new(),
        truncated: false,
        took: Duration::ZERO,
    }
}

/// What the host tells the agent.
#[derive(Debug, Clone, PartialEq)]
pub enum Delivery {
    /// A kernel-log record (`facility` 0 = kernel, anything else = written by userspace).
    Kmsg {
        /// Syslog facility.
        facility: u8,
        /// The record: level, text and dictionary.
        record: kernel::KernelRecord,
    },
    /// An RDMA netlink fact.
    Netlink(Observation),
    /// A full iscsiadm session list.
    Sessions(Vec<SessionInfo>),
    /// An action's outcome.
    Outcome {
        /// Action.
        id: ActionId,
        /// Outcome.
        outcome: Outcome,
    },
    /// An operator command.
    Command(OperatorCommand),
    /// iscsiadm printed this (for the timeline only).
    IscsiadmOutput {
        /// The command line.
        command: String,
        /// What it printed.
        output: String,
        /// Exit code.
        code: i32,
    },
    /// A scenario note for the timeline ("target powered off").
    Note(String),
    /// An event from a device's async event channel (the agent's verbs listener).
    AsyncEvent(crate::core::selftest::AsyncEvent),
    /// A re-creation reported blocked has returned: its final result.
    RecreationReturned {
        /// The device.
        device: String,
        /// The re-creation's result.
        result: RecreateResult,
    },
}

/// Something scheduled on the host.
#[derive(Debug, Clone)]
pub enum HostEvent {
    /// Power a target's portal off or on.
    TargetPower {
        /// Portal.
        portal: Portal,
        /// On.
        on: bool,
    },
    /// The target's link goes down or up.
    TargetLink {
        /// Portal.
        portal: Portal,
        /// Up.
        up: bool,
    },
    /// The target's iSER listener dies or is re-enabled.
    TargetListener {
        /// Portal.
        portal: Portal,
        /// Alive.
        up: bool,
    },
    /// An initiator RDMA device is removed (e.g. `rdma link delete`) or added back.
    InitiatorDevice {
        /// Device.
        device: String,
        /// Present.
        present: bool,
    },
    /// An E810 function's netdev joins a bond: ice unplugs its RDMA auxiliary device, so
    /// its RDMA device is gone (ice_lag.c, 6.8).
    Bonded {
        /// The device on that function.
        device: String,
        /// The bond.
        bond: String,
    },
    /// iscsid drops a session (e.g. an admin ran a logout by mistake while it was failing).
    DropSession {
        /// SID.
        sid: u32,
    },
    /// Raw kernel-log records (storms, forged records).
    Lines {
        /// Facility (0 kernel, 1 user: a userspace writer, whose records carry no
        /// dictionary).
        facility: u8,
        /// The records.
        lines: Vec<kernel::KernelRecord>,
    },
    /// An operator command.
    Command(OperatorCommand),
    /// A note for the timeline.
    Note(String),
    /// A multipath path iser-guard does not carry (FC, SAS) fails or comes back.
    MultipathOther {
        /// Its block device.
        dev: String,
        /// Failed.
        failed: bool,
    },
    /// The device's driver declares a fatal error (firmware or hardware): every QP on it,
    /// QP 1 included, goes to ERR and its iSER connections fail; the device stays
    /// registered until it is re-created.
    DeviceFatal {
        /// Device.
        device: String,
    },
    /// Internal: a session's NOP-Out timed out.
    NopTimeout(u32),
    /// Internal: the kernel noticed that a target's host is gone while the CM still sends
    /// to it ([`SimDevice::irdma_gsi`] devices' QP 1 goes to ERR).
    KernelNoticesGone {
        /// Portal.
        portal: Portal,
        /// The port whose CM was busy with it.
        port: PortId,
    },
    /// Internal: iscsid retries a session.
    IscsidRetry(u32),
    /// Internal: replacement_timeout of a session.
    RecoveryTimeout(u32),
    /// Internal: a zombie session's next failed I/O.
    ZombieIo(u32),
    /// Internal: a re-created device comes back.
    RecreateDone {
        /// Device.
        device: String,
        /// Action.
        id: ActionId,
        /// How the result reaches the agent.
        report: RecreateReport,
        /// The method that ran, and whether it brought a gone device back.
        method: ResetMethod,
        /// Only the method's "up" step ran (the device was gone).
        brought_back: bool,
        /// From the first step to the device being back.
        took: Duration,
    },
    /// Internal: deliver to the agent.
    Deliver(Box<Delivery>),
    /// Internal: the periodic netlink dump.
    NetlinkPoll,
    /// Internal: a netlink dump the agent asked for (taken when it runs).
    DumpTopology,
    /// Internal: an `iscsiadm -m session -P 3` the agent asked for (taken when it runs).
    DumpSessions,
    /// Internal: the periodic iscsiadm session poll.
    IscsiPoll,
    /// Internal: an iscsiadm login finishes.
    LoginDone {
        /// Action.
        id: ActionId,
        /// Node.
        key: SessionKey,
        /// RDMA port of the iface.
        port: PortId,
    },
}

/// How a re-creation's result reaches the agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecreateReport {
    /// As the action's outcome.
    Outcome,
    /// Not at all (the executor's outcome is lost).
    Lost,
    /// After the executor reported it blocked: as the blocked re-creation's late result.
    Late,
}

/// The whole simulated host.
#[derive(Debug, Clone)]
pub struct SimHost {
    /// Devices by name.
    pub devices: BTreeMap<String, SimDevice>,
    /// Targets by portal.
    pub targets: BTreeMap<Portal, SimTarget>,
    /// iscsid's sessions by SID.
    pub sessions: BTreeMap<u32, SimSession>,
    /// Disk names per node, kept across re-logins.
    pub node_disks: BTreeMap<SessionKey, (u32, Vec<String>)>,
    /// The RDMA port each node's iface runs on.
    pub node_ports: BTreeMap<SessionKey, PortId>,
    /// iscsiadm behaviour.
    pub iscsiadm: IscsiadmPlan,
    /// Netlink dump interval.
    pub netlink_poll: Duration,
    /// Session poll interval.
    pub iscsi_poll: Duration,
    /// Kill a hung iscsiadm after this long (the daemon's timeout).
    pub iscsiadm_timeout: Duration,
    /// How long a re-creation step may run before the executor reports it blocked (the
    /// resetter's step deadline plus the kill grace: `io::reset` with its defaults).
    pub reset_step_deadline: Duration,
    next_sid: u32,
    seq: u64,
    queue: BinaryHeap<Reverse<(Instant, u64)>>,
    events: BTreeMap<u64, HostEvent>,
    /// Devices being re-created right now (the invariant: at most one).
    pub concurrent_recreations: usize,
    /// Highest number of concurrent re-creations seen.
    pub max_concurrent_recreations: usize,
    /// Re-creations started on a device while one was in progress on that same device.
    pub overlapping_recreations: u32,
    /// Dynamic debug for rdma_cm is on: the kernel logs `RDMA CM: REJECTED` (6.1 prints it
    /// with `pr_debug` only).
    pub cm_debug: bool,
    /// RDMA netlink answers RES_CM_ID_GET (false: the agent runs on sysfs alone and sees no
    /// CM id).
    pub cm_id_table: bool,
    /// The kernel sends RDMA netlink device events (6.12): a device that comes or goes is
    /// reported at once. False (6.1, 6.8): only the next dump shows it (`netlink_poll`, or a
    /// dump the agent asks for).
    pub device_events: bool,
    /// The netdev the kernel routes each portal address through (`ip route get`).
    pub routes: BTreeMap<IpAddr, String>,
    /// Each netdev's address.
    pub netdev_addrs: BTreeMap<String, IpAddr>,
    /// The agent's session placement (the daemon's memory, kept here until the harness
    /// runs the daemon's own loop).
    pub placer: Placer,
    /// The placement warnings the agent logged, in order.
    pub placement_warnings: Vec<String>,
    /// The GSI QP state each dump last reported per port, with the device index it was
    /// reported for: like the daemon's netlink model, a dump reports a QP 1 state only when
    /// it is new (a port whose QP 1 stays in RTS is not re-reported every poll).
    gsi_reported: BTreeMap<(String, u32), (u32, QpState)>,
    /// A port self-test can run (false: the daemon has no verbs self-test, it answers
    /// unavailable).
    pub selftest_available: bool,
    /// The agent listens on each device's async event channel: unregistering a device
    /// sends DEVICE_FATAL to it (uverbs), a driver's fatal error too.
    pub async_events: bool,
    /// The recipe each device's last report carried (the daemon sends one when it changes).
    recipes_reported: BTreeMap<String, RecreateFrom>,
    /// Every re-creation command run on the host (`rdma link add ...`, `echo ... > bind`).
    pub commands: Vec<String>,
    /// The running kernel's `(major, minor)` (6.8: Ubuntu 24.04's).
    pub kernel: (u32, u32),
    /// NIC functions whose netdev is a bond member.
    pub bonded: Vec<crate::core::doctor::BondedPort>,
    /// The driver-stack conditions the agent was last told of (none at first, as the
    /// daemon's `daemon::driver_stack`).
    stack_reported: Vec<crate::core::driver_stack::StackCondition>,
    /// RDMA consumers other than iSER (NVMe over RDMA, processes).
    pub rdma_consumers: Vec<super::consumers::SimConsumer>,
    /// The consumers per port the agent was last told of.
    consumers_reported: Option<Vec<PortConsumers>>,
    /// The NVMe over RDMA controllers last reported (and placed).
    nvme_reported: Option<Vec<crate::core::nvme_fabrics::NvmeRdmaController>>,
    /// nvme-cli is installed.
    pub nvme_cli: bool,
    /// dm-multipath maps and multipathd (`None`: multipath-tools not installed).
    pub multipath: Option<super::multipath::SimMultipath>,
    /// The multipath paths last reported.
    multipath_reported: Option<Vec<crate::core::multipath::MultipathPath>>,
    /// The next NVMe controller instance (`nvmeN`) the kernel hands out.
    nvme_next: u32,
    /// NFS over RDMA mounts (their transports are rpcrdma consumers in `rdma_consumers`).
    pub nfs_mounts: Vec<super::consumers::SimNfsMount>,
    /// The NFS over RDMA mounts last reported (and placed).
    nfs_reported: Option<Vec<crate::core::nfs_rdma::NfsRdmaMount>>,
    /// Portal probes: the network's answers through the daemon's probe choice.
    pub probes: super::probe::SimProbes,
    next_dev_index: u32,
    next_cm_idn: u32,
    next_src_port: u16,
}

impl Default for SimHost {
    fn default() -> Self {
        SimHost::new()
    }
}

impl SimHost {
    /// The default host, as truthful as the lab: the target's own RDMA device (`rxe_tgt` on
    /// `tgt0`) is present beside whatever initiator devices the scenario adds.
    pub fn new() -> Self {
        let mut h = SimHost::bare();
        h.add_device(TARGET_DEVICE, "tgt0", SimDriver::Rxe, 1);
        h
    }

    /// A host with no device at all.
    pub fn bare() -> Self {
        SimHost {
            devices: BTreeMap::new(),
            targets: BTreeMap::new(),
            sessions: BTreeMap::new(),
            node_disks: BTreeMap::new(),
            node_ports: BTreeMap::new(),
            iscsiadm: IscsiadmPlan::default(),
            netlink_poll: Duration::from_secs(5),
            iscsi_poll: Duration::from_secs(10),
            iscsiadm_timeout: Duration::from_secs(30),
            reset_step_deadline: Duration::from_secs(32),
            next_sid: 1,
            seq: 0,
            queue: BinaryHeap::new(),
            events: BTreeMap::new(),
            concurrent_recreations: 0,
            max_concurrent_recreations: 0,
            overlapping_recreations: 0,
            cm_debug: false,
            cm_id_table: true,
            device_events: true,
            routes: BTreeMap::new(),
            netdev_addrs: BTreeMap::new(),
            placer: Placer::new(),
            placement_warnings: Vec::new(),
            gsi_reported: BTreeMap::new(),
            selftest_available: true,
            async_events: false,
            recipes_reported: BTreeMap::new(),
            rdma_consumers: Vec::new(),
            kernel: (6, 8),
            bonded: Vec::new(),
            stack_reported: Vec::new(),
            consumers_reported: None,
            nvme_reported: None,
            nvme_cli: false,
            multipath: None,
            multipath_reported: None,
            nvme_next: 10,
            nfs_mounts: Vec::new(),
            nfs_reported: None,
            commands: Vec::new(),
            probes: super::probe::SimProbes::default(),
            next_dev_index: 0,
            next_cm_idn: 0,
            next_src_port: 57998,
        }
    }

    /// Adds a device with `ports` ports, QP 1 in RTS on each. Each port gets a netdev
    /// (`rxe_ini` → `ini0` as in the lab; `rocep2s0f0` → `rocep2s0f0np0`, …) with an address.
    pub fn add_device(&mut self, name: &str, pci: &str, driver: SimDriver, ports: u32) {
        let ports = ports.max(1);
        let netdevs: Vec<String> = (0..ports)
            .map(|i| match name.strip_prefix("rxe_") {
                Some(short) if ports == 1 => format!("{short}0"),
                _ => format!("{name}np{i}"),
            })
            .collect();
        self.add_device_on(name, pci, driver, &netdevs);
    }

    /// Adds a device whose ports run over these netdevs (one per port).
    pub fn add_device_on(&mut self, name: &str, pci: &str, driver: SimDriver, netdevs: &[String]) {
        for n in netdevs {
            if !self.netdev_addrs.contains_key(n) {
                let k = u8::try_from(self.netdev_addrs.len() + 1).unwrap_or(u8::MAX);
                self.netdev_addrs
                    .insert(n.clone(), IpAddr::from([192, 168, k, 1]));
            }
        }
        let index = self.next_dev_index;
        self.next_dev_index += 1;
        let ports = netdevs.len().max(1);
        self.devices.insert(
            name.to_string(),
            SimDevice {
                name: name.to_string(),
                index,
                netdevs: netdevs.to_vec(),
                pci: pci.to_string(),
                driver,
                present: true,
                gsi: vec![QpState::Rts; ports],
                plans: VecDeque::new(),
                recreations_started: 0,
                recreations_completed: 0,
                mode_restored: None,
                recreating: false,
                cm_silent_registrations: 0,
                cm_silent: false,
                irdma_gsi: false,
                aux_folder: "irdma".into(),
                module_taint: String::new(),
                devlink_roce: true,
                recreated_by: None,
            },
        );
    }

    /// Adds a target portal.
    pub fn add_target(&mut self, iqn: &str, portal: Portal) {
        self.targets.insert(
            portal.clone(),
            SimTarget {
                iqn: iqn.to_string(),
                portal,
                powered: true,
                link_up: true,
                listener: true,
                tcp_listener: true,
            },
        );
    }

    /// Adds a logged-in session with its disks; returns its SID.
    pub fn add_session(&mut self, iqn: &str, portal: &Portal, port: PortId, disks: &[&str]) -> u32 {
        let key = SessionKey {
            target: iqn.to_string(),
            portal: portal.clone(),
            iface: "iser".to_string(),
        };
        let host = self.next_sid + 1;
        self.node_disks.insert(
            key.clone(),
            (host, disks.iter().map(|d| d.to_string()).collect()),
        );
        // The kernel routes the portal through the port's netdev (the scenario's layout).
        if let Some(n) = self.netdev_of(&port) {
            self.routes.entry(portal.ip()).or_insert(n);
        }
        self.login_session(key, port)
    }

    /// The netdev a port runs over.
    pub fn netdev_of(&self, port: &PortId) -> Option<String> {
        let d = self.devices.get(&port.device)?;
        let i = usize::try_from(port.port.checked_sub(1)?).ok()?;
        d.netdevs.get(i).cloned()
    }

    fn new_conn(&mut self) -> (u16, u32) {
        let c = (self.next_src_port, self.next_cm_idn);
        self.next_src_port = self.next_src_port.wrapping_add(1).max(32768);
        self.next_cm_idn += 1;
        c
    }

    fn login_session(&mut self, key: SessionKey, port: PortId) -> u32 {
        let sid = self.next_sid;
        self.next_sid += 1;
        let (host, disks) = self
            .node_disks
            .get(&key)
            .cloned()
            .unwrap_or((sid + 1, Vec::new()));
        self.node_ports.insert(key.clone(), port.clone());
        let conn = Some(self.new_conn());
        self.sessions.insert(
            sid,
            SimSession {
                sid,
                key,
                port,
                state: SessionState::LoggedIn,
                host,
                disks: disks
                    .iter()
                    .map(|d| DiskInfo::new(d.clone(), "running"))
                    .collect(),
                zombie: false,
                zombie_errors: 0,
                down_since: None,
                conn,
            },
        );
        sid
    }

    /// Schedules an event.
    pub fn schedule(&mut self, at: Instant, ev: HostEvent) {
        self.seq += 1;
        self.queue.push(Reverse((at, self.seq)));
        self.events.insert(self.seq, ev);
    }

    /// Starts the periodic polls at `now`.
    pub fn start(&mut self, now: Instant) {
        self.schedule(now, HostEvent::NetlinkPoll);
        self.schedule(now, HostEvent::IscsiPoll);
    }

    /// The next scheduled event.
    pub fn next_event(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((at, _))| *at)
    }

    /// Processes every event due at or before `now`; returns what the agent sees.
    pub fn advance(&mut self, now: Instant) -> Vec<Delivery> {
        let mut out = Vec::new();
        while let Some(Reverse((at, seq))) = self.queue.peek().copied() {
            if at > now {
                break;
            }
            self.queue.pop();
            if let Some(ev) = self.events.remove(&seq) {
                self.apply(ev, at, &mut out);
            }
        }
        out
    }

    fn kmsg(out: &mut Vec<Delivery>, record: kernel::KernelRecord) {
        out.push(Delivery::Kmsg {
            facility: 0,
            record,
        });
    }

    fn apply(&mut self, ev: HostEvent, now: Instant, out: &mut Vec<Delivery>) {
        match ev {
            HostEvent::TargetPower { portal, on } => {
                out.push(Delivery::Note(format!(
                    "target {portal} powered {}",
                    if on { "on" } else { "off" }
                )));
                if let Some(t) = self.targets.get_mut(&portal) {
                    t.powered = on;
                }
                if !on {
                    self.target_gone(&portal, now, true);
                }
            }
            HostEvent::TargetLink { portal, up } => {
                out.push(Delivery::Note(format!(
                    "target {portal} link {}",
                    if up { "up" } else { "down" }
                )));
                if let Some(t) = self.targets.get_mut(&portal) {
                    t.link_up = up;
                }
                if up {
                    // Lab fact (linkdown40): sessions that never noticed the outage come back
                    // as zombies: LOGGED_IN, every I/O fails.
                    let sids = self.logged_in_sessions(|s| s.key.portal == portal);
                    for sid in sids {
                        if let Some(s) = self.sessions.get_mut(&sid) {
                            s.zombie = true;
                            s.zombie_errors = 0;
                        }
                        self.schedule(
                            now.plus(Duration::from_millis(500)),
                            HostEvent::ZombieIo(sid),
                        );
                    }
                }
            }
            HostEvent::TargetListener { portal, up } => {
                out.push(Delivery::Note(format!(
                    "target {portal}: iSER listener {}",
                    if up {
                        "re-enabled"
                    } else {
                        "gone (target RDMA device re-created)"
                    }
                )));
                if let Some(t) = self.targets.get_mut(&portal) {
                    t.listener = up;
                }
                if !up {
                    let sids = self.logged_in_sessions(|s| s.key.portal == portal);
                    for sid in sids {
                        self.fail_session(sid, 1011, now, out);
                    }
                }
            }
            HostEvent::InitiatorDevice { device, present } => {
                out.push(Delivery::Note(format!(
                    "initiator RDMA device {device} {}",
                    if present { "added back" } else { "deleted" }
                )));
                self.set_device_present(&device, present, now, out);
            }
            HostEvent::Bonded { device, bond } => {
                if let Some(d) = self.devices.get(&device) {
                    let (pci, netdev) = (d.pci.clone(), d.netdevs.first().cloned());
                    out.push(Delivery::Note(format!(
                        "{} of {pci} joined {bond}: ice unplugged its RDMA auxiliary device, \
                         {device} is gone",
                        netdev.as_deref().unwrap_or("its netdev")
                    )));
                    self.bonded.push(crate::core::doctor::BondedPort {
                        pci,
                        driver: "ice".into(),
                        netdev: netdev.unwrap_or_default(),
                        master: bond,
                        has_rdma: false,
                    });
                    self.set_device_present(&device, false, now, out);
                }
            }
            HostEvent::DropSession { sid } => {
                if let Some(s) = self.sessions.remove(&sid) {
                    out.push(Delivery::Note(format!(
                        "iscsid dropped session {sid} {} (logged out while failing)",
                        s.key
                    )));
                }
            }
            HostEvent::Lines { facility, lines } => {
                for record in lines {
                    let record = if facility == 0 {
                        record
                    } else {
                        record.written()
                    };
                    out.push(Delivery::Kmsg { facility, record });
                }
            }
            HostEvent::Command(c) => out.push(Delivery::Command(c)),
            HostEvent::Note(n) => out.push(Delivery::Note(n)),
            HostEvent::MultipathOther { dev, failed } => {
                out.push(Delivery::Note(format!(
                    "multipath path {dev} (not over RDMA) {}",
                    if failed { "failed" } else { "back" }
                )));
                if let Some(mp) = self.multipath.as_mut() {
                    mp.set_other(&dev, failed);
                }
            }
            HostEvent::DeviceFatal { device } => self.device_fatal(&device, now, out),
            HostEvent::NopTimeout(sid) => {
                let dead = self.sessions.get(&sid).is_some_and(|s| {
                    s.state == SessionState::LoggedIn && !self.path_ok_to_target(&s.key.portal)
                });
                if dead {
                    Self::kmsg(out, kernel::ping_timeout(sid));
                    self.fail_session(sid, 1022, now, out);
                }
            }
            HostEvent::IscsidRetry(sid) => self.iscsid_retry(sid, now, out),
            HostEvent::KernelNoticesGone { portal, port } => {
                self.kernel_notices_gone(&portal, &port, out)
            }
            HostEvent::RecoveryTimeout(sid) => {
                if let Some(s) = self.sessions.get_mut(&sid) {
                    if s.state != SessionState::LoggedIn {
                        s.state = SessionState::Free;
                        for d in &mut s.disks {
                            d.state = "transport-offline".into();
                        }
                        let host = s.host;
                        let disk = s.disks.first().map(|d| d.name.clone());
                        Self::kmsg(out, kernel::recovery_timed_out(sid, 120));
                        Self::kmsg(out, kernel::rejecting_offline(host));
                        if let Some(d) = disk {
                            Self::kmsg(out, kernel::io_error(&d, 0));
                        }
                    }
                }
            }
            HostEvent::ZombieIo(sid) => {
                let mut again = false;
                if let Some(s) = self.sessions.get_mut(&sid) {
                    if s.zombie
                        && s.state == SessionState::LoggedIn
                        && s.zombie_errors < ZOMBIE_IO_MAX
                    {
                        s.zombie_errors += 1;
                        let tag = 57 + s.zombie_errors;
                        if let Some(d) = s.disks.first() {
                            let (host, name) = (s.host, d.name.clone());
                            Self::kmsg(out, kernel::did_abort(host, &name, tag));
                            Self::kmsg(out, kernel::io_error(&name, 0));
                        }
                        again = true;
                    }
                }
                if again {
                    self.schedule(now.plus(ZOMBIE_IO_PERIOD), HostEvent::ZombieIo(sid));
                }
            }
            HostEvent::RecreateDone {
                device,
                id,
                report,
                method,
                brought_back,
                took,
            } => {
                self.concurrent_recreations = self.concurrent_recreations.saturating_sub(1);
                if let Some(d) = self.devices.get_mut(&device) {
                    d.recreating = false;
                    d.recreations_completed += 1;
                    for g in &mut d.gsi {
                        *g = QpState::Rts;
                    }
                }
                out.push(Delivery::Note(format!(
                    "{device} re-registered: MAD layer opened its ports, new QP 1 walked RESET->INIT->RTR->RTS"
                )));
                self.set_device_present(&device, true, now, out);
                let mode_restored = self
                    .devices
                    .get_mut(&device)
                    .and_then(|d| d.mode_restored.take());
                let failed_before = self
                    .devices
                    .get_mut(&device)
                    .and_then(|d| d.recreated_by.take())
                    .unwrap_or_default();
                // The resetter's report, translated as the daemon translates it.
                let result = crate::answers::recreated(&crate::io::reset::Recreated {
                    method,
                    old_name: device.clone(),
                    new_name: device.clone(),
                    took_ms: u64::try_from(took.as_millis()).unwrap_or(u64::MAX),
                    failed_before,
                    brought_back,
                    mode_restored,
                });
                match report {
                    RecreateReport::Outcome => out.push(Delivery::Outcome {
                        id,
                        outcome: Outcome::Recreate(result),
                    }),
                    RecreateReport::Late => {
                        out.push(Delivery::RecreationReturned { device, result })
                    }
                    RecreateReport::Lost => {}
                }
            }
            HostEvent::Deliver(d) => out.push(*d),
            HostEvent::NetlinkPoll => {
                out.extend(self.topology());
                let next = now.plus(self.netlink_poll);
                self.schedule(next, HostEvent::NetlinkPoll);
            }
            HostEvent::DumpTopology => out.extend(self.topology()),
            HostEvent::DumpSessions => out.push(Delivery::Sessions(self.session_list())),
            HostEvent::IscsiPoll => {
                out.push(Delivery::Sessions(self.session_list()));
                let next = now.plus(self.iscsi_poll);
                self.schedule(next, HostEvent::IscsiPoll);
            }
            HostEvent::LoginDone { id, key, port } => {
                let exists = self.sessions.values().any(|s| s.key == key);
                let (code, output) = if exists {
                    (
                        15,
                        "iscsiadm: default: 1 session requested, but 1 already present.\n\
                         iscsiadm: Could not log into all portals"
                            .to_string(),
                    )
                } else if self.iscsiadm.auth_fail {
                    (
                        24,
                        format!(
                            "{}\niscsiadm: Could not login to {}.\niscsiadm: initiator reported error \
                             (24 - iSCSI login failed due to authorization failure)\n\
                             iscsiadm: Could not log into all portals",
                            login_banner(&key),
                            node_text(&key)
                        ),
                    )
                } else {
                    match self.connect_error(&key.portal, &port) {
                        None => {
                            self.login_session(key.clone(), port);
                            (0, format!("{}\nLogin to {} successful.", login_banner(&key), node_text(&key)))
                        }
                        Some(code) => (
                            code,
                            format!(
                                "{}\niscsiadm: Could not login to {}.\niscsiadm: initiator reported \
                                 error ({code} - {})\niscsiadm: Could not log into all portals",
                                login_banner(&key),
                                node_text(&key),
                                if code == 8 { "connection timed out" } else { "encountered connection failure" }
                            ),
                        ),
                    }
                };
                let command = format!(
                    "iscsiadm -m node -T {} -p {} -I {} --login",
                    key.target, key.portal, key.iface
                );
                // Read as the daemon reads a real iscsiadm's exit and output.
                let answer = crate::io::iscsiadm::login_answer(
                    command.clone(),
                    &iscsiadm_output(code, &output),
                );
                out.push(Delivery::IscsiadmOutput {
                    command,
                    output,
                    code,
                });
                out.push(Delivery::Outcome {
                    id,
                    outcome: crate::answers::login(&answer).outcome,
                });
            }
        }
    }

    /// The path from the iface to the target is usable for a new connection, or why not:
    /// `None` = ok, else the iscsiadm exit code (8 timeout, 4 connection failure).
    fn connect_error(&self, portal: &Portal, port: &PortId) -> Option<i32> {
        let Some(d) = self.devices.get(&port.device) else {
            return Some(4);
        };
        if !d.present || d.recreating {
            return Some(4);
        }
        let idx = usize::try_from(port.port.saturating_sub(1)).unwrap_or(0);
        if d.gsi.get(idx) == Some(&QpState::Err) {
            return Some(4);
        }
        if d.cm_silent {
            return Some(8); // The CM request is never answered: iscsiadm times out.
        }
        match self.targets.get(portal) {
            Some(t) if t.reachable() && t.listener => None,
            Some(t) if t.reachable() => Some(4),
            _ => Some(8),
        }
    }

    fn path_ok_to_target(&self, portal: &Portal) -> bool {
        self.targets.get(portal).is_some_and(SimTarget::reachable)
    }

    fn target_gone(&mut self, portal: &Portal, now: Instant, power: bool) {
        let sids = self.logged_in_sessions(|s| &s.key.portal == portal);
        for sid in sids {
            self.schedule(now.plus(NOP_DETECT), HostEvent::NopTimeout(sid));
            let port = self.sessions.get(&sid).map(|s| s.port.clone());
            let lab_model = port
                .as_ref()
                .and_then(|p| self.devices.get(&p.device))
                .is_some_and(|d| d.irdma_gsi);
            if let (true, true, Some(port)) = (power, lab_model, port) {
                self.schedule(
                    now.plus(KERNEL_NOTICES_GONE),
                    HostEvent::KernelNoticesGone {
                        portal: portal.clone(),
                        port,
                    },
                );
            }
        }
    }

    /// The lab's irdma-like QP 1 meets a send to a host that is gone: ERR, and the pair.
    fn kernel_notices_gone(&mut self, portal: &Portal, port: &PortId, out: &mut Vec<Delivery>) {
        if self.path_ok_to_target(portal) {
            return; // back before the kernel noticed: nothing failed
        }
        let idx = usize::try_from(port.port.saturating_sub(1)).unwrap_or(0);
        let Some(d) = self.devices.get_mut(&port.device) else {
            return;
        };
        if !d.present || d.recreating || d.gsi.get(idx) != Some(&QpState::Rts) {
            return;
        }
        if let Some(g) = d.gsi.get_mut(idx) {
            *g = QpState::Err;
        }
        Self::kmsg(out, kernel::modify_qp_invalid_unparented(&d.name));
        Self::kmsg(out, kernel::mad_send_error(&d.name));
    }

    /// The SIDs of the logged-in sessions that `pick` selects.
    fn logged_in_sessions(&self, pick: impl Fn(&SimSession) -> bool) -> Vec<u32> {
        self.sessions
            .values()
            .filter(|s| s.state == SessionState::LoggedIn && pick(s))
            .map(|s| s.sid)
            .collect()
    }

    fn fail_session(&mut self, sid: u32, code: u32, now: Instant, out: &mut Vec<Delivery>) {
        let Some(s) = self.sessions.get_mut(&sid) else {
            return;
        };
        if s.state != SessionState::LoggedIn {
            return;
        }
        s.state = SessionState::Failed;
        s.conn = None;
        s.zombie = false;
        s.down_since = Some(now);
        for d in &mut s.disks {
            d.state = "blocked".into();
        }
        Self::kmsg(out, kernel::conn_error(sid, code));
        self.schedule(now.plus(ISCSID_RETRY), HostEvent::IscsidRetry(sid));
        self.schedule(
            now.plus(REPLACEMENT_TIMEOUT),
            HostEvent::RecoveryTimeout(sid),
        );
    }

    fn iscsid_retry(&mut self, sid: u32, now: Instant, out: &mut Vec<Delivery>) {
        let Some(s) = self.sessions.get(&sid) else {
            return;
        };
        if s.state == SessionState::LoggedIn {
            return;
        }
        let (portal, port) = (s.key.portal.clone(), s.port.clone());
        let idx = usize::try_from(port.port.saturating_sub(1)).unwrap_or(0);
        let reachable = self.path_ok_to_target(&portal);
        let listener = self.targets.get(&portal).is_some_and(|t| t.listener);
        let cm_debug = self.cm_debug;
        let mut ok = false;
        let mut next_attempt = ISCSID_RETRY;
        match self.devices.get_mut(&port.device) {
            Some(d) if !d.present || d.recreating => {
                Self::kmsg(out, kernel::cm(kernel::CM_ADDR_ERROR))
            }
            None => Self::kmsg(out, kernel::cm(kernel::CM_ADDR_ERROR)),
            Some(d) if d.irdma_gsi => {
                // The lab's irdma-like rdma_rxe: while the host does not answer, address
                // resolution fails before any MAD; once it answers, a stuck QP 1 fails every
                // attempt at once.
                let stuck = d.gsi.get(idx) == Some(&QpState::Err);
                if !reachable {
                    if cm_debug {
                        Self::kmsg(out, kernel::cm(kernel::CM_ADDR_TIMEOUT));
                    }
                } else if stuck {
                    Self::kmsg(out, kernel::modify_qp_invalid_unparented(&d.name));
                    Self::kmsg(out, kernel::mad_send_error(&d.name));
                } else if !listener {
                    if cm_debug {
                        Self::kmsg(out, kernel::cm(kernel::CM_REJECTED));
                    }
                } else {
                    ok = true;
                }
            }
            Some(d) => {
                let stuck = d.gsi.get(idx) == Some(&QpState::Err);
                if stuck || (!reachable && d.driver == SimDriver::Irdma) {
                    // The CM MAD send fails; irdma refuses ERR->RTS for QP 1 from now on.
                    if let Some(g) = d.gsi.get_mut(idx) {
                        *g = QpState::Err;
                    }
                    Self::kmsg(out, kernel::modify_qp_invalid(&d.pci, &d.name));
                    Self::kmsg(out, kernel::mad_send_error(&d.name));
                } else if d.cm_silent {
                    // The port's CM path is dead (the lab's GSI stand-in): every request of
                    // this attempt is lost, nothing is logged, and the attempt lasts until
                    // iscsid's login timer, a re-creation in between or not.
                    next_attempt = ISCSID_LOGIN_TIMEOUT;
                } else if !reachable {
                    // rxe, target away: the CM request times out, nothing in the log; one
                    // of its retransmissions gets through once the target answers again.
                } else if !listener {
                    if cm_debug {
                        Self::kmsg(out, kernel::cm(kernel::CM_REJECTED));
                    }
                } else {
                    ok = true;
                }
            }
        }
        if ok {
            let conn = self.new_conn();
            if let Some(s) = self.sessions.get_mut(&sid) {
                s.conn = Some(conn);
                s.state = SessionState::LoggedIn;
                s.down_since = None;
                s.zombie = false;
                for d in &mut s.disks {
                    d.state = "running".into();
                }
            }
            out.push(Delivery::Note(format!(
                "iscsid: connection{sid}:0 is operational after recovery"
            )));
        } else {
            self.schedule(now.plus(next_attempt), HostEvent::IscsidRetry(sid));
        }
    }

    fn set_device_present(
        &mut self,
        device: &str,
        present: bool,
        now: Instant,
        out: &mut Vec<Delivery>,
    ) {
        let Some(d) = self.devices.get_mut(device) else {
            return;
        };
        let was = d.present;
        d.present = present;
        if present && !was {
            // A device added back is a new device to the RDMA core: a new index.
            d.index = self.next_dev_index;
            self.next_dev_index += 1;
            d.cm_silent = d.cm_silent_registrations > 0;
            d.cm_silent_registrations = d.cm_silent_registrations.saturating_sub(1);
            for g in &mut d.gsi {
                *g = QpState::Rts;
            }
            if self.device_events {
                out.push(Delivery::Netlink(Observation::DeviceAppeared {
                    device: device.to_string(),
                    parent: pci_parent(d),
                    driver: Some(driver_name(d.driver).to_string()),
                    ports: u32::try_from(d.gsi.len()).unwrap_or(1),
                }));
            }
        }
        if !present && was {
            if self.async_events {
                // ib_uverbs_free_hw_resources, while the device is being unregistered (before
                // it is gone from RDMA netlink): every open context is told DEVICE_FATAL.
                out.push(Delivery::AsyncEvent(crate::core::selftest::AsyncEvent {
                    device: device.to_string(),
                    port: None,
                    kind: crate::core::selftest::AsyncEventKind::DeviceFatal,
                }));
            }
            if self.device_events {
                out.push(Delivery::Netlink(Observation::DeviceGone {
                    device: device.to_string(),
                }));
            }
            // Every RDMA consumer is dropped: iSER connections fail (DEVICE_REMOVAL); the
            // others are destroyed (nvme_rdma deletes its controllers).
            for c in self
                .rdma_consumers
                .iter_mut()
                .filter(|c| c.device == device)
            {
                c.gone = true;
            }
            let sids = self.logged_in_sessions(|s| s.port.device == device);
            for sid in sids {
                self.fail_session(sid, 1011, now, out);
            }
        }
    }

    /// A driver's fatal error on `device`: its QPs go to ERR, its iSER connections fail
    /// (ib_iser logs the event), and the agent's event listener reads DEVICE_FATAL.
    fn device_fatal(&mut self, device: &str, now: Instant, out: &mut Vec<Delivery>) {
        let Some(d) = self.devices.get_mut(device) else {
            return;
        };
        if !d.present {
            return;
        }
        for g in &mut d.gsi {
            *g = QpState::Err;
        }
        out.push(Delivery::Note(format!(
            "{device}: the driver reports a fatal device error; every QP is in ERR"
        )));
        // iser_event_handler prints every async event of the device it is registered on.
        // (`iser_err`, a `pr_err`: no dictionary.)
        Self::kmsg(
            out,
            kernel::cm(&format!(
                "iser: iser_event_handler: async event device fatal (8) on device {device} port 1"
            )),
        );
        if self.async_events {
            out.push(Delivery::AsyncEvent(crate::core::selftest::AsyncEvent {
                device: device.to_string(),
                port: None,
                kind: crate::core::selftest::AsyncEventKind::DeviceFatal,
            }));
        }
        let sids = self.logged_in_sessions(|s| s.port.device == device);
        for sid in sids {
            self.fail_session(sid, 1011, now, out);
        }
    }

    /// A restarted agent's netlink model starts empty: it has reported nothing yet.
    pub fn forget_reports(&mut self) {
        self.gsi_reported.clear();
        self.recipes_reported.clear();
        self.stack_reported.clear();
    }

    /// What the daemon's `io::sysfs::stack` reader would read on this host: the modules of
    /// the present irdma devices with their taint and aux devices, the bonded functions.
    pub fn stack_facts(&self) -> crate::core::driver_stack::StackFacts {
        let mut modules: Vec<crate::core::driver_stack::RdmaModule> = Vec::new();
        for d in self.devices.values() {
            if d.driver != SimDriver::Irdma || !d.present {
                continue;
            }
            let aux = irdma_aux(d);
            let module = aux.module.clone().unwrap_or_else(|| "irdma".into());
            let i = match modules.iter().position(|m| m.name == module) {
                Some(i) => i,
                None => {
                    modules.push(crate::core::driver_stack::RdmaModule {
                        name: module,
                        taint: Some(d.module_taint.clone()),
                        ..Default::default()
                    });
                    modules.len() - 1
                }
            };
            modules[i].devices.push(d.name.clone());
            modules[i]
                .aux
                .push((aux.name, aux.driver_dir.unwrap_or_default()));
        }
        crate::core::driver_stack::StackFacts {
            kernel: Some(self.kernel),
            bonded: self.bonded.clone(),
            modules,
        }
    }

    /// What sysfs shows of a device now, as the resetter's reader returns it; `None` when it
    /// is gone (a deleted device leaves nothing under `class/infiniband`).
    pub fn sysfs_facts(&self, device: &str) -> Option<DeviceFacts> {
        let d = self.devices.get(device).filter(|d| d.present)?;
        Some(match d.driver {
            // Virtual: no `device` link; rxe's own `parent` attribute names its netdev.
            SimDriver::Rxe => DeviceFacts {
                name: d.name.clone(),
                parent: None,
                aux: None,
                node_type: Some(1),
                node_desc: Some("rxe".into()),
                netdevs: d.netdevs.clone(),
                soft_netdev: d.netdevs.first().cloned(),
            },
            SimDriver::Irdma => DeviceFacts {
                name: d.name.clone(),
                parent: Some(ParentFacts {
                    bus: "pci".into(),
                    name: d.pci.clone(),
                    driver: Some("ice".into()),
                }),
                aux: Some(irdma_aux(d)),
                node_type: Some(1),
                node_desc: None,
                netdevs: d.netdevs.clone(),
                soft_netdev: None,
            },
        })
    }

    /// What a netlink dump shows now, as the daemon's netlink model reports it
    /// (`core::topology`): a port's QP 1 state when it is new: first seen, changed, or on
    /// a re-created device (`PortStuck`, `PortUnstuck`, `GsiReady`); nothing while it
    /// stays as it was.
    pub fn topology(&mut self) -> Vec<Delivery> {
        let mut out = Vec::new();
        for d in self.devices.values() {
            if !d.present {
                out.push(Delivery::Netlink(Observation::DeviceGone {
                    device: d.name.clone(),
                }));
                continue;
            }
            out.push(Delivery::Netlink(Observation::DeviceAppeared {
                device: d.name.clone(),
                parent: pci_parent(d),
                driver: Some(driver_name(d.driver).to_string()),
                ports: u32::try_from(d.gsi.len()).unwrap_or(1),
            }));
            for (i, g) in d.gsi.iter().enumerate() {
                let port = u32::try_from(i + 1).unwrap_or(1);
                let key = (d.name.clone(), port);
                let news = self
                    .gsi_reported
                    .get(&key)
                    .is_none_or(|(index, state)| *index != d.index || state != g);
                self.gsi_reported.insert(key, (d.index, *g));
                if news {
                    out.push(Delivery::Netlink(Observation::GsiQpState {
                        device: d.name.clone(),
                        port,
                        state: *g,
                    }));
                }
            }
        }
        // As the daemon's topology source: the consumers per port, from the CM id and QP
        // tables, when they changed.
        for c in &mut self.rdma_consumers {
            if let Some(t) = &c.target {
                if !self.targets.get(t).is_some_and(SimTarget::reachable) {
                    c.broken = true;
                }
            }
        }
        if self.cm_id_table {
            let ports = self.consumers_per_port();
            if self.consumers_reported.as_ref() != Some(&ports) {
                self.consumers_reported = Some(ports.clone());
                out.push(Delivery::Netlink(Observation::Consumers { ports }));
            }
            // As the daemon's topology source: /sys/class/nvme read and placed by
            // nvme_rdma's CM ids, when it changed.
            if self.rdma_consumers.iter().any(|c| c.sysfs.is_some()) {
                let ctrls = self.nvme_controllers();
                if self.nvme_reported.as_ref() != Some(&ctrls) {
                    self.nvme_reported = Some(ctrls.clone());
                    out.push(Delivery::Netlink(Observation::NvmeControllers {
                        controllers: ctrls,
                    }));
                }
            }
            // As the daemon's topology source: /proc/self/mountinfo read and placed by
            // rpcrdma's CM ids, when it changed.
            if !self.nfs_mounts.is_empty() {
                let mounts = self.nfs_rdma_mounts();
                if self.nfs_reported.as_ref() != Some(&mounts) {
                    self.nfs_reported = Some(mounts.clone());
                    out.push(Delivery::Netlink(Observation::NfsMounts { mounts }));
                }
            }
        }
        // As the daemon's multipathd reader: the maps' paths after a checker pass, when
        // they changed.
        if let Some(paths) = self.multipath_check() {
            if self.multipath_reported.as_ref() != Some(&paths) {
                self.multipath_reported = Some(paths.clone());
                out.push(Delivery::Netlink(Observation::MultipathPaths { paths }));
            }
        }
        // As the daemon's `daemon::driver_stack`: the driver-stack conditions of the host's
        // facts, when they changed.
        let stack = crate::core::driver_stack::detect(&self.stack_facts());
        if self.stack_reported != stack {
            self.stack_reported.clone_from(&stack);
            out.push(Delivery::Netlink(Observation::DriverStack {
                conditions: stack,
            }));
        }
        // As the daemon's `daemon::recipes`: what each present device's sysfs facts say would
        // re-create it, when it is new or changed.
        let names: Vec<String> = self.devices.keys().cloned().collect();
        for name in names {
            let Some(recipe) = self.sysfs_facts(&name).and_then(|f| RecreateFrom::of(&f)) else {
                continue;
            };
            if self.recipes_reported.get(&name) != Some(&recipe) {
                self.recipes_reported.insert(name.clone(), recipe.clone());
                out.push(Delivery::Netlink(Observation::DeviceRecipe {
                    device: name,
                    recipe,
                }));
            }
        }
        out
    }

    /// What `iscsiadm -m session -P 3` prints now (the real layout: iSER ifaces at
    /// `[default]`/`default`, no local address).
    pub fn session_text(&self) -> String {
        if self.sessions.is_empty() {
            return "iscsiadm: No active sessions.\n".to_string();
        }
        let mut t = String::from("iSCSI Transport Class version 2.0-870\nversion 2.1.8\n");
        for s in self.sessions.values() {
            let portal = format!("{},1", s.key.portal);
            let (conn, state, internal) = match s.state {
                SessionState::LoggedIn => ("LOGGED IN", "LOGGED_IN", "NO CHANGE"),
                SessionState::Failed => ("TRANSPORT WAIT", "FAILED", "REOPEN"),
                SessionState::Free => ("TRANSPORT WAIT", "FREE", "REOPEN"),
                SessionState::Unknown => ("UNKNOWN", "UNKNOWN", "NO CHANGE"),
            };
            let _ = write!(
                t,
                "Target: {} (non-flash)\n\tCurrent Portal: {portal}\n\tPersistent Portal: {portal}\n\
                 \t\t**********\n\t\tInterface:\n\t\t**********\n\t\tIface Name: {}\n\
                 \t\tIface Transport: iser\n\
                 \t\tIface Initiatorname: iqn.2004-10.com.example:sim-initiator\n\
                 \t\tIface IPaddress: [default]\n\t\tIface HWaddress: default\n\
                 \t\tIface Netdev: default\n\t\tSID: {}\n\
                 \t\tiSCSI Connection State: {conn}\n\t\tiSCSI Session State: {state}\n\
                 \t\tInternal iscsid Session State: {internal}\n\
                 \t\t*********\n\t\tTimeouts:\n\t\t*********\n\t\tRecovery Timeout: 120\n\
                 \t\t************************\n\t\tAttached SCSI devices:\n\
                 \t\t************************\n\t\tHost Number: {}\tState: running\n",
                s.key.target, s.key.iface, s.sid, s.host
            );
            for (lun, d) in s.disks.iter().enumerate() {
                let _ = write!(
                    t,
                    "\t\tscsi{} Channel 00 Id 0 Lun: {lun}\n\t\t\tAttached scsi disk {}\t\tState: {}\n",
                    s.host, d.name, d.state
                );
            }
        }
        t
    }

    /// The RDMA CM id table (`rdma resource show cm_id`): ib_iser's cm_id of every connected
    /// session on its device, and ib_isert's listener and connections on the target's device.
    pub fn cm_ids(&self) -> Vec<CmIdEntry> {
        let entry = |d: &SimDevice,
                     port: u32,
                     src: SocketAddr,
                     dst: SocketAddr,
                     st: u8,
                     idn: u32,
                     kern: &str| CmIdEntry {
            dev_index: d.index,
            dev_name: d.name.clone(),
            port: Some(port),
            lqpn: (st == CM_STATE_CONNECT).then_some(17 + idn),
            qp_type: (st == CM_STATE_CONNECT).then_some(QpTypeOrRaw::from(2u8)),
            ps: Some(RDMA_PS_TCP),
            state: st,
            src_addr: Some(SockAddr::from_socket_addr(src)),
            dst_addr: Some(SockAddr::from_socket_addr(dst)),
            cm_idn: Some(idn),
            pid: None,
            kern_name: Some(kern.to_string()),
        };
        let mut out = Vec::new();
        if !self.cm_id_table {
            return out;
        }
        for s in self.sessions.values() {
            let (Some((sport, idn)), Some(d)) = (s.conn, self.devices.get(&s.port.device)) else {
                continue;
            };
            let Some(local) = self
                .netdev_of(&s.port)
                .and_then(|n| self.netdev_addrs.get(&n).copied())
            else {
                continue;
            };
            if !d.present || s.state != SessionState::LoggedIn {
                continue;
            }
            let src = SocketAddr::new(local, sport);
            let dst = s.key.portal.socket_addr();
            out.push(entry(
                d,
                s.port.port,
                src,
                dst,
                CM_STATE_CONNECT,
                idn,
                "ib_iser",
            ));
            if let Some(t) = self.devices.get(TARGET_DEVICE).filter(|t| t.present) {
                out.push(entry(
                    t,
                    1,
                    dst,
                    src,
                    CM_STATE_CONNECT,
                    idn + 1000,
                    "ib_isert",
                ));
            }
        }
        if let Some(t) = self.devices.get(TARGET_DEVICE).filter(|t| t.present) {
            for (i, tg) in self.targets.values().filter(|t| t.listener).enumerate() {
                {
                    let any = SocketAddr::new(IpAddr::from([0, 0, 0, 0]), 0);
                    let idn = u32::try_from(i).unwrap_or(0) + 2000;
                    out.push(entry(
                        t,
                        1,
                        tg.portal.socket_addr(),
                        any,
                        CM_STATE_LISTEN,
                        idn,
                        "ib_isert",
                    ));
                }
            }
        }
        out
    }

    /// A session's disk as the maps see it.
    fn sim_disk(&self, node: &SessionKey, lun: usize) -> Option<super::multipath::SimDisk> {
        // A session in recovery keeps its SCSI devices (blocked, transport-offline): the
        // path stays in its map, failed. Only a logout removes them.
        let s = self.sessions.values().rev().find(|s| s.key == *node)?;
        let d = s.disks.get(lun)?;
        let present = self.devices.get(&s.port.device).is_some_and(|d| d.present);
        Some(super::multipath::SimDisk {
            dev: d.name.clone(),
            host: s.host,
            working: present
                && s.state == SessionState::LoggedIn
                && !s.zombie
                && s.down_since.is_none()
                && d.is_running(),
        })
    }

    /// A multipathd checker pass, then the paths it shows (`None`: no multipathd).
    pub fn multipath_check(&mut self) -> Option<Vec<crate::core::multipath::MultipathPath>> {
        let mut mp = self.multipath.take()?;
        mp.check(|n, l| self.sim_disk(n, l));
        let paths = mp.paths(|n, l| self.sim_disk(n, l));
        self.multipath = Some(mp);
        Some(paths)
    }

    /// The simulated multipathd executor: the remembered paths checked, the reinstatable
    /// reinstated.
    pub fn multipath_restore(
        &mut self,
        paths: &[crate::core::multipath::MultipathPathRef],
        carriers: &[crate::core::multipath::BlockCarrier],
    ) -> Vec<crate::core::multipath::PathBackReport> {
        let Some(mut mp) = self.multipath.take() else {
            return paths
                .iter()
                .map(|p| crate::core::multipath::PathBackReport {
                    path: p.clone(),
                    result: crate::core::multipath::PathBackResult::Failed {
                        dev: p.dev.clone(),
                        reason: "multipathd is not installed".into(),
                    },
                })
                .collect();
        };
        let host = &*self;
        let r = mp.restore(paths, carriers, |n, l| host.sim_disk(n, l));
        self.multipath = Some(mp);
        r
    }

    /// The NVMe over RDMA controllers sysfs shows now, read and placed by the core, as the
    /// daemon's topology source does.
    pub fn nvme_controllers(&self) -> Vec<crate::core::nvme_fabrics::NvmeRdmaController> {
        let mut ctrls: Vec<_> = super::consumers::nvme_files(&self.rdma_consumers)
            .iter()
            .filter_map(|f| crate::core::nvme_fabrics::read_ctrl_files(f).ok().flatten())
            .collect();
        let (ids, _) = self.consumer_tables();
        crate::core::nvme_fabrics::place_controllers(
            &mut ctrls,
            &ids,
            self.nvme_reported.as_deref().unwrap_or_default(),
        );
        ctrls
    }

    /// The NFS over RDMA mounts mountinfo shows now, read and placed by the core, as the
    /// daemon's topology source does.
    pub fn nfs_rdma_mounts(&self) -> Vec<crate::core::nfs_rdma::NfsRdmaMount> {
        let text = super::consumers::mountinfo(&self.nfs_mounts);
        let mut mounts = crate::core::nfs_rdma::parse_mountinfo(&text).mounts;
        let (ids, _) = self.consumer_tables();
        crate::core::nfs_rdma::place_mounts(
            &mut mounts,
            &ids,
            self.nfs_reported.as_deref().unwrap_or_default(),
        );
        mounts
    }

    /// A stat of `mount_point` on this host: `true` when it returned. It is an RPC: when the
    /// mount's transport was dropped with its device, xprtrdma connects again for it if a
    /// device is back on its port and the server answers; a mount whose server wedged
    /// (`stat_hangs`) or that has no transport back hangs.
    pub fn nfs_stat(&mut self, mount_point: &str) -> bool {
        let Some(m) = self
            .nfs_mounts
            .iter()
            .find(|m| m.mount_point == mount_point)
        else {
            return false;
        };
        if m.stat_hangs {
            return false;
        }
        let server = m.server;
        let present: Vec<String> = self
            .devices
            .values()
            .filter(|d| d.present)
            .map(|d| d.name.clone())
            .collect();
        let targets = &self.targets;
        let Some(c) = self
            .rdma_consumers
            .iter_mut()
            .find(|c| c.is_rpcrdma() && c.nvme_traddr() == server)
        else {
            return false;
        };
        let reachable = present.contains(&c.device)
            && c.target
                .as_ref()
                .is_none_or(|t| targets.get(t).is_some_and(SimTarget::reachable));
        if reachable {
            c.gone = false;
            c.broken = false;
        }
        reachable
    }

    /// `nvme ARGS` on this host (its nvme-cli): `Err` with nvme-cli's words.
    pub fn nvme_connect(&mut self, args: &[String]) -> Result<(), String> {
        if !self.nvme_cli {
            return Err("nvme: command not found".into());
        }
        let present: Vec<String> = self
            .devices
            .values()
            .filter(|d| d.present)
            .map(|d| d.name.clone())
            .collect();
        let targets = &self.targets;
        let n = self.nvme_next;
        let r = super::consumers::connect(
            &mut self.rdma_consumers,
            args,
            |c| {
                present.contains(&c.device)
                    && c.target
                        .as_ref()
                        .is_none_or(|t| targets.get(t).is_some_and(SimTarget::reachable))
            },
            n,
        );
        if r.is_ok() {
            self.nvme_next += 1;
        }
        r
    }

    /// The CM id and QP rows of the host's sessions and consumers.
    fn consumer_tables(&self) -> (Vec<CmIdEntry>, Vec<crate::core::nldev::QpEntry>) {
        let mut ids = self.cm_ids();
        let mut qps = Vec::new();
        for d in self.devices.values().filter(|d| d.present) {
            let on: Vec<_> = self
                .rdma_consumers
                .iter()
                .filter(|c| c.device == d.name)
                .cloned()
                .collect();
            let local = self
                .netdev_of(&PortId::new(&d.name, 1))
                .and_then(|n| self.netdev_addrs.get(&n).copied())
                .unwrap_or(IpAddr::from([192, 0, 2, 1]));
            let (i, q) = super::consumers::rows(&on, d.index, local);
            ids.extend(i);
            qps.extend(q);
        }
        (ids, qps)
    }

    /// The consumers per port the CM id and QP tables show now, read by the core's model
    /// with the processes named, as the daemon reads them.
    pub fn consumers_per_port(&self) -> Vec<PortConsumers> {
        let (ids, qps) = self.consumer_tables();
        let mut ports = crate::core::consumers::per_port(&ids, &qps);
        crate::core::consumers::name_processes(&mut ports, |pid| {
            self.rdma_consumers.iter().find_map(|c| c.comm(pid))
        });
        ports
    }

    /// Every present RDMA port with its netdev (sysfs `gid_attrs/ndevs`).
    pub fn port_netdevs(&self) -> Vec<RdmaPortNetdev> {
        let mut out = Vec::new();
        for d in self.devices.values().filter(|d| d.present) {
            for (i, n) in d.netdevs.iter().enumerate() {
                out.push(RdmaPortNetdev {
                    device: d.name.clone(),
                    port: u32::try_from(i + 1).unwrap_or(1),
                    netdev: n.clone(),
                });
            }
        }
        out
    }

    /// The host's interface addresses (initiator netdevs; the target's netdev holds the
    /// portal addresses when the target device is present, as in the lab).
    pub fn addresses(&self) -> Vec<NetdevAddr> {
        let mut out: Vec<NetdevAddr> = self
            .netdev_addrs
            .iter()
            .filter(|(n, _)| n.as_str() != TARGET_NETDEV)
            .map(|(n, ip)| NetdevAddr {
                netdev: n.clone(),
                ip: *ip,
            })
            .collect();
        if self.devices.contains_key(TARGET_DEVICE) {
            for t in self.targets.values() {
                {
                    let ip = t.portal.ip();
                    out.push(NetdevAddr {
                        netdev: TARGET_NETDEV.into(),
                        ip,
                    });
                }
            }
        }
        out
    }

    /// What the agent gets from `iscsiadm -m session -P 3`: the rendered text, parsed by the
    /// real parser and placed through the core's listing door, as the daemon's are, from the host's facts (CM ids,
    /// routes, addresses, port netdevs).
    pub fn session_list(&mut self) -> Vec<SessionInfo> {
        let parsed = crate::core::iscsi::parse_session_tree(&self.session_text());
        let (cm, addrs, ports) = (self.cm_ids(), self.addresses(), self.port_netdevs());
        let routes = self.routes.clone();
        let facts = HostFacts {
            cm_ids: &cm,
            routes: &routes,
            addrs: &addrs,
            ports: &ports,
        };
        let mapped =
            crate::core::session_map::place_listing(&parsed.items, &facts, &mut self.placer);
        self.placement_warnings.extend(mapped.warnings);
        mapped.sessions
    }

    /// The resetter's planner on this host: from what sysfs shows of `device`, or, for a gone
    /// device, from what was remembered (with irdma's current aux device); `None` when there
    /// is neither. The flag says the device is absent.
    fn reset_plan(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
    ) -> Option<(reset_plan::Plan, bool)> {
        let opts = PlanOptions {
            allow_module_reload: false,
            devlink_available: true,
            rdma_available: true,
            same_module_devices: Vec::new(),
        };
        match (self.sysfs_facts(device), remembered) {
            (Some(facts), _) => Some((reset_plan::plan(&facts, &opts), false)),
            (None, Some(r)) => {
                let current_aux = self
                    .devices
                    .get(device)
                    .filter(|d| d.driver == SimDriver::Irdma)
                    .map(irdma_aux);
                Some((
                    reset_plan::plan_gone(device, r, current_aux.as_ref(), &opts),
                    true,
                ))
            }
            (None, None) => None,
        }
    }

    /// What the resetter's planner would try for `device` on this host (the plan an operator
    /// command shows), or why it can do nothing.
    pub fn recreate_methods(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
    ) -> Result<crate::core::driver::RecreateMethods, String> {
        let Some((plan, absent)) = self.reset_plan(device, remembered) else {
            return Err(format!("no RDMA device {device} in sysfs"));
        };
        Ok(crate::core::driver::RecreateMethods {
            methods: plan
                .methods
                .iter()
                .map(|m| crate::core::driver::MethodSteps {
                    method: m.to_string(),
                    steps: method_commands(m, absent),
                })
                .collect(),
            skipped: plan.skipped,
        })
    }

    /// Starts re-creating a device (the executor's side of `RecreateDevice`): plans with the
    /// resetter's planner from what this host's sysfs shows, or, for a gone device, from
    /// `remembered` (what the action carries), and runs the first method's commands.
    pub fn recreate(
        &mut self,
        device: &str,
        remembered: Option<&RecreateFrom>,
        id: ActionId,
        now: Instant,
    ) -> Vec<Delivery> {
        let mut out = Vec::new();
        // A scripted result: what the scenario says the resetter answered.
        let fail = |out: &mut Vec<Delivery>, result: RecreateResult| {
            out.push(Delivery::Outcome {
                id,
                outcome: Outcome::Recreate(result),
            })
        };
        // A resetter's answer, translated as the daemon translates it.
        let answered = |out: &mut Vec<Delivery>, a: crate::answers::Answer| {
            out.push(Delivery::Outcome {
                id,
                outcome: a.outcome,
            })
        };
        // A scripted failure overrides the physics (the scenario says what goes wrong).
        let scripted = self
            .devices
            .get_mut(device)
            .and_then(|d| d.plans.pop_front())
            .unwrap_or(RecreateBehaviour::Ok);
        let (plan, absent) = match self.reset_plan(device, remembered) {
            Some(p) => p,
            None => {
                let e = crate::io::reset::ResetError::NoSuchDevice {
                    device: device.to_string(),
                    root: "/sys".into(),
                };
                answered(&mut out, crate::answers::recreate(device, &Err(e)));
                return out;
            }
        };
        // As the resetter: a devlink toggle whose parameter cannot be read fails before
        // changing anything, and the next method is tried.
        let lacks_roce = self.devices.get(device).is_some_and(|d| !d.devlink_roce);
        let mut failed_before = Vec::new();
        let mut methods = plan.methods.iter();
        let method = loop {
            match methods.next() {
                Some(m @ ResetMethod::DevlinkToggle { handle, param }) if lacks_roce => {
                    let show = format!("devlink dev param show {handle} name {} -j", param.name());
                    self.commands.push(show.clone());
                    out.push(Delivery::Note(format!("{device}: {show}")));
                    failed_before.push(crate::io::reset::ResetMethodFailure {
                        method: m.clone(),
                        error: format!(
                            "`{show}` exited with code 1: kernel answers: Invalid argument"
                        ),
                    });
                }
                other => break other.cloned(),
            }
        };
        let Some(method) = method else {
            let e = crate::io::reset::ResetError::NoMethod {
                device: device.to_string(),
                reasons: plan.skipped,
            };
            answered(&mut out, crate::answers::recreate(device, &Err(e)));
            return out;
        };
        if let Some(d) = self.devices.get_mut(device) {
            if d.recreating {
                self.overlapping_recreations += 1;
            }
            d.recreations_started += 1;
        }
        match scripted {
            RecreateBehaviour::Fail(reason) => {
                let at = now.plus(Duration::from_millis(800));
                self.schedule(
                    at,
                    HostEvent::Deliver(Box::new(Delivery::Outcome {
                        id,
                        outcome: Outcome::Recreate(RecreateResult::Failed { reason }),
                    })),
                );
                return out;
            }
            RecreateBehaviour::Unsupported(reason) => {
                fail(&mut out, RecreateResult::Unsupported { reason });
                return out;
            }
            RecreateBehaviour::Ok
            | RecreateBehaviour::LoseOutcome
            | RecreateBehaviour::Blocked(_)
            | RecreateBehaviour::IwarpFlip => {}
        }
        let mut report = match scripted {
            RecreateBehaviour::LoseOutcome => RecreateReport::Lost,
            _ => RecreateReport::Outcome,
        };
        let commands = method_commands(&method, absent);
        // `rdma link add` needs the netdev; the kernel answers ENODEV without it.
        if let ResetMethod::RdmaLinkReadd { netdev, .. } = &method {
            if !self.netdev_addrs.contains_key(netdev) {
                self.commands.extend(commands.iter().cloned());
                fail(
                    &mut out,
                    RecreateResult::Failed {
                        reason: format!(
                            "`{}` exited with code 1: error: No such device",
                            commands.join("; ")
                        ),
                    },
                );
                return out;
            }
            if !self.devices.contains_key(device) {
                // A link never seen on this host: the kernel creates it all the same.
                self.add_device_on(device, netdev, SimDriver::Rxe, std::slice::from_ref(netdev));
                if let Some(d) = self.devices.get_mut(device) {
                    d.present = false;
                }
            }
        }
        // A blocked step is the last one run until it returns.
        let (now_run, later) = match scripted {
            RecreateBehaviour::Blocked(held) if !commands.is_empty() => {
                (&commands[..1], Some((&commands[1..], held)))
            }
            _ => (&commands[..], None),
        };
        for c in now_run {
            out.push(Delivery::Note(format!("{device}: {c}")));
        }
        if let Some((rest, held)) = later {
            for c in rest {
                self.schedule(
                    now.plus(held),
                    HostEvent::Deliver(Box::new(Delivery::Note(format!("{device}: {c}")))),
                );
            }
        }
        self.commands.extend(commands);
        let Some(d) = self.devices.get_mut(device) else {
            fail(
                &mut out,
                RecreateResult::Failed {
                    reason: format!("{method} ran but {device} did not appear"),
                },
            );
            return out;
        };
        d.recreating = true;
        d.recreated_by = Some(failed_before);
        self.concurrent_recreations += 1;
        self.max_concurrent_recreations = self
            .max_concurrent_recreations
            .max(self.concurrent_recreations);
        self.set_device_present(device, false, now, &mut out);
        // Lab: `rdma link add` took 0.09 s; a hardware function's RDMA driver probes for
        // seconds.
        let mut back_after = match method {
            ResetMethod::RdmaLinkReadd { .. } => Duration::from_millis(200),
            _ => RECREATE_TIME,
        };
        if let (RecreateBehaviour::IwarpFlip, ResetMethod::DevlinkToggle { handle, .. }) =
            (&scripted, &method)
        {
            // The check after the toggle, and the toggle that restores RoCE.
            let bdf = handle.trim_start_matches("pci/");
            let n = bdf.rsplit('.').next().unwrap_or("0");
            out.push(Delivery::Note(format!(
                "a reset of {bdf} between the two devlink calls: ice re-plugged the RDMA \
                 device as ice.iwarp.{n}"
            )));
            self.commands.extend(method_commands(&method, false));
            if let Some(d) = self.devices.get_mut(device) {
                d.mode_restored = Some(format!(
                    "its RDMA auxiliary device is ice.iwarp.{n} (not roce); restored by \
                     toggling enable_roce once more (the RDMA device is back as RoCE)"
                ));
            }
            back_after += RECREATE_TIME;
        }
        if let RecreateBehaviour::Blocked(held) = scripted {
            // The device is disabled at once (unregistration starts: netlink no longer
            // lists it), and its removal waits for the holder: the down step does not return.
            back_after += held;
            if held > self.reset_step_deadline {
                let step = blocked_step(&method, self.reset_step_deadline);
                self.schedule(
                    now.plus(self.reset_step_deadline),
                    HostEvent::Deliver(Box::new(Delivery::Outcome {
                        id,
                        outcome: Outcome::Recreate(RecreateResult::Blocked(step)),
                    })),
                );
                report = RecreateReport::Late;
            }
        }
        self.schedule(
            now.plus(back_after),
            HostEvent::RecreateDone {
                device: device.to_string(),
                id,
                report,
                method,
                brought_back: absent,
                took: back_after,
            },
        );
        out
    }

    /// Runs `iscsiadm --logout` for a session (the executor's side of `IscsiLogout`).
    pub fn logout(&mut self, sid: u32, key: &SessionKey, id: ActionId, now: Instant) {
        let command = format!("iscsiadm -m session -r {sid} --logout");
        if self.take_hang() {
            self.hang(command, id, now);
            return;
        }
        let (code, output) = match self.sessions.get(&sid) {
            Some(s) if &s.key == key => {
                self.sessions.remove(&sid);
                (
                    0,
                    format!(
                        "Logging out of session [sid: {sid}, target: {}, portal: {}]\nLogout of \
                         [sid: {sid}, target: {}, portal: {}] successful.",
                        key.target,
                        portal_text(&key.portal),
                        key.target,
                        portal_text(&key.portal)
                    ),
                )
            }
            _ => (21, "iscsiadm: No matching sessions found".to_string()),
        };
        let answer =
            crate::io::iscsiadm::logout_answer(command.clone(), &iscsiadm_output(code, &output));
        let at = now.plus(LOGOUT_TIME);
        self.schedule(
            at,
            HostEvent::Deliver(Box::new(Delivery::IscsiadmOutput {
                command,
                output,
                code,
            })),
        );
        self.schedule(
            at,
            HostEvent::Deliver(Box::new(Delivery::Outcome {
                id,
                outcome: crate::answers::logout(&answer).outcome,
            })),
        );
    }

    /// Runs `iscsiadm --login` for a node (the executor's side of `IscsiLogin`).
    pub fn login(&mut self, key: &SessionKey, id: ActionId, now: Instant) {
        // Lab (6.1, target's rxe device deleted and re-added): with the iSER listener dead
        // the login gets no answer and hangs until the daemon's iscsiadm timeout.
        let dead_listener = self
            .targets
            .get(&key.portal)
            .is_some_and(|t| t.reachable() && !t.listener);
        if self.take_hang() || dead_listener {
            let command = format!(
                "iscsiadm -m node -T {} -p {} -I {} --login",
                key.target, key.portal, key.iface
            );
            self.hang(command, id, now);
            return;
        }
        // The iface decides the RDMA port; reuse the port the node last ran on.
        let port = self
            .node_port(key)
            .unwrap_or_else(|| PortId::new("unknown", 1));
        self.schedule(
            now.plus(LOGIN_TIME),
            HostEvent::LoginDone {
                id,
                key: key.clone(),
                port,
            },
        );
    }

    fn node_port(&self, key: &SessionKey) -> Option<PortId> {
        // The kernel picks the device by the route to the portal (ib_iser connects by the
        // target address alone).
        let routed = self.routes.get(&key.portal.ip()).and_then(|n| {
            self.devices.values().find_map(|d| {
                let i = d.netdevs.iter().position(|x| x == n)?;
                Some(PortId::new(d.name.clone(), u32::try_from(i + 1).ok()?))
            })
        });
        if routed.is_some() {
            return routed;
        }
        self.sessions
            .values()
            .find(|s| &s.key == key)
            .map(|s| s.port.clone())
            .or_else(|| self.node_ports.get(key).cloned())
    }

    fn take_hang(&mut self) -> bool {
        if self.iscsiadm.hang_next > 0 {
            self.iscsiadm.hang_next -= 1;
            true
        } else {
            false
        }
    }

    fn hang(&mut self, command: String, id: ActionId, now: Instant) {
        let at = now.plus(self.iscsiadm_timeout);
        // The daemon's iscsiadm runner kills it at the deadline and reports it hung.
        let hung = crate::answers::login(&Err(crate::io::iscsiadm::IscsiadmError::Hung {
            command: command.clone(),
            timeout: self.iscsiadm_timeout,
        }));
        self.schedule(
            at,
            HostEvent::Deliver(Box::new(Delivery::IscsiadmOutput {
                command,
                output: format!(
                    "(no output; killed after {}s)",
                    self.iscsiadm_timeout.as_secs()
                ),
                code: -9,
            })),
        );
        self.schedule(
            at,
            HostEvent::Deliver(Box::new(Delivery::Outcome {
                id,
                outcome: hung.outcome,
            })),
        );
    }

    /// Probes a portal (the executor's side of `ProbePortal`), through the daemon's probe
    /// choice: TCP answers when the target has a TCP listener, ARP/ND whenever its host is up.
    pub fn probe(&mut self, portal: &Portal, timeout: Duration, id: ActionId, now: Instant) {
        let netdev = self.portal_netdev(portal);
        // Another service of a target's host (an NVMe over RDMA portal, 4420, on the iSCSI
        // target's address) is up with its host and, like nvmet-rdma, has no TCP listener.
        let host_of = self
            .targets
            .iter()
            .find(|(p, _)| p.ip() == portal.ip())
            .map(|(_, t)| t);
        let target = self.targets.get(portal).or(host_of);
        let listens = self.targets.get(portal).is_some_and(|t| t.tcp_listener);
        let (tcp, neighbour) = match target {
            Some(t) if t.reachable() => (
                if listens {
                    TcpAnswer::Reachable {
                        rtt: Duration::from_millis(5),
                    }
                } else {
                    TcpAnswer::Refused
                },
                crate::io::probe_choice::answered_on(&netdev),
            ),
            _ => (
                TcpAnswer::Timeout,
                NeighAnswer::NoAnswer {
                    netdev,
                    state: Some("FAILED"),
                },
            ),
        };
        let (result, _) = self
            .probes
            .probe(portal.socket_addr(), tcp, neighbour, timeout);
        let after = if result == ProbeResult::Reachable {
            Duration::from_millis(5)
        } else {
            timeout
        };
        self.schedule(
            now.plus(after),
            HostEvent::Deliver(Box::new(Delivery::Outcome {
                id,
                outcome: Outcome::Probe(result),
            })),
        );
    }

    /// The netdev of the port whose sessions use `portal` (what the route would name).
    fn portal_netdev(&self, portal: &Portal) -> String {
        self.node_ports
            .iter()
            .find(|(k, _)| &k.portal == portal)
            .and_then(|(_, port)| {
                let d = self.devices.get(&port.device)?;
                d.netdevs
                    .get(usize::try_from(port.port.saturating_sub(1)).ok()?)
                    .cloned()
            })
            .unwrap_or_else(|| "?".into())
    }

    /// How each portal is probed now, for `status` (as the daemon reports it).
    pub fn portal_probes(
        &self,
    ) -> std::collections::BTreeMap<String, crate::io::probe_choice::PortalProbeView> {
        self.targets
            .keys()
            .map(|p| (p.to_string(), self.probes.choice().view(p.socket_addr())))
            .collect()
    }

    /// Every node that ever had a session has one LOGGED_IN, not a zombie, disks running.
    pub fn storage_ok(&self) -> bool {
        self.node_ports.keys().all(|k| {
            self.sessions.values().any(|s| {
                &s.key == k
                    && s.state == SessionState::LoggedIn
                    && !s.zombie
                    && s.disks.iter().all(DiskInfo::is_running)
            })
        })
    }

    /// A LOGGED_IN, non-zombie session exists for this node.
    pub fn node_ok(&self, key: &SessionKey) -> bool {
        self.sessions
            .values()
            .any(|s| &s.key == key && s.state == SessionState::LoggedIn && !s.zombie)
    }
}

/// The parent a netlink report gives: the PCI function of a hardware device, none for a
/// virtual (rxe) one.
fn pci_parent(d: &SimDevice) -> Option<String> {
    (d.driver == SimDriver::Irdma).then(|| d.pci.clone())
}

/// An E810 function's RDMA auxiliary device (`ice.roce.N`, bound to irdma).
fn irdma_aux(d: &SimDevice) -> AuxFacts {
    let n = d.pci.rsplit('.').next().unwrap_or("0");
    AuxFacts {
        name: format!("ice.roce.{n}"),
        driver_dir: Some(d.aux_folder.clone()),
        module: Some("irdma".into()),
    }
}

/// The commands a method runs, as the resetter runs them (only the "up" step when the device
/// is gone).
/// What the executor reports for a re-creation whose down step is blocked in the kernel:
/// the step, and the task as `/proc` shows it, its stack the path a device removal takes in
/// the kernel sources (drivers/infiniband/core/device.c `disable_device`,
/// `remove_client_context`; a client whose users have not let go waits there).
fn blocked_step(method: &ResetMethod, after: Duration) -> crate::core::recovery::BlockedStep {
    let (tool, driver_frames): (&str, &[&str]) = match method {
        ResetMethod::DevlinkToggle { .. } => (
            "devlink",
            &[
                "irdma_ib_unregister_device [irdma]",
                "icrdma_remove [irdma]",
                "auxiliary_bus_remove",
                "device_release_driver_internal",
                "bus_remove_device",
                "device_del",
                "ice_unplug_aux_dev [ice]",
                "ice_devlink_enable_roce_set [ice]",
                "devlink_nl_param_set_doit",
            ],
        ),
        ResetMethod::AuxRebind { .. } => (
            "iser-guard",
            &[
                "irdma_ib_unregister_device [irdma]",
                "auxiliary_bus_remove",
                "device_release_driver_internal",
                "unbind_store",
                "kernfs_fop_write_iter",
            ],
        ),
        ResetMethod::RdmaLinkReadd { .. } => (
            "rdma",
            &[
                "ib_unregister_device_and_put [ib_core]",
                "nldev_dellink [ib_core]",
            ],
        ),
        ResetMethod::ModuleReload { .. } => ("modprobe", &["delete_module"]),
    };
    let mut stack = vec![
        "ib_uverbs_remove_one [ib_uverbs]".to_string(),
        "remove_client_context [ib_core]".to_string(),
        "disable_device [ib_core]".to_string(),
        "__ib_unregister_device [ib_core]".to_string(),
    ];
    stack.extend(driver_frames.iter().map(|f| f.to_string()));
    crate::core::recovery::BlockedStep {
        step: method.down_command(),
        blocked_ms: u64::try_from(after.as_millis()).unwrap_or(u64::MAX),
        task: format!(
            "{tool} (pid 4242) in D (uninterruptible sleep), waiting in ib_uverbs_remove_one"
        ),
        uninterruptible: true,
        stack,
        id: crate::core::recovery::TaskId {
            pid: 4242,
            tid: None,
            start_time: Some(1),
        },
    }
}

fn method_commands(m: &ResetMethod, absent: bool) -> Vec<String> {
    if absent {
        vec![m.up_command()]
    } else {
        vec![m.down_command(), m.up_command()]
    }
}

fn driver_name(d: SimDriver) -> &'static str {
    match d {
        SimDriver::Irdma => "irdma",
        SimDriver::Rxe => "rxe",
    }
}

fn portal_text(p: &Portal) -> String {
    format!("{},{}", p.ip(), p.port())
}

fn node_text(key: &SessionKey) -> String {
    format!(
        "[iface: {}, target: {}, portal: {}]",
        key.iface,
        key.target,
        portal_text(&key.portal)
    )
}

fn login_banner(key: &SessionKey) -> String {
    format!("Logging in to {}", node_text(key))
}
