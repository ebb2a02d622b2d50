//! What the engine is told: kernel-log and netlink observations, iscsiadm session snapshots,
//! outcomes of the actions it asked for, and operator commands.
//!
//! These are the engine's own types. Adapters from the parsers (`core::signatures`,
//! `core::nldev`, `core::iscsi`) are small pure functions that build them; the engine never
//! sees raw text.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use serde::{Deserialize, Serialize};

use crate::qp::QpState;
use crate::signatures::explain::errno_name;

/// One RDMA port: the unit the state machine works on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PortId {
    /// The RDMA device name, e.g. `rocep2s0f0` (follow renames with
    /// [`Observation::DeviceRenamed`]; never identify devices by index).
    pub device: String,
    /// The port number, from 1.
    pub port: u32,
}

impl PortId {
    /// A port id.
    pub fn new(device: impl Into<String>, port: u32) -> Self {
        PortId {
            device: device.into(),
            port,
        }
    }
}

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.device, self.port)
    }
}

/// A target portal: an IP address and a TCP port. Displayed as iscsiadm prints it
/// (`192.0.2.2:3260`, `[fd00::2]:3260`). Text from iscsiadm or an operator becomes a portal
/// only through [`Portal::parse`], so a portal that is not an address never reaches the engine.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(into = "PortalFields", try_from = "PortalFields")]
pub struct Portal(SocketAddr);

/// The serde form of a [`Portal`]: `{"address": "192.0.2.2", "port": 3260}`, as before
/// portals were typed (status output and the control socket keep their shape).
#[derive(Serialize, Deserialize)]
struct PortalFields {
    address: String,
    port: u16,
}

/// Text that is not a portal address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("portal address {address:?} is not an IP address")]
pub struct PortalError {
    /// The text given.
    pub address: String,
}

impl Portal {
    /// A portal.
    pub fn new(ip: impl Into<IpAddr>, port: u16) -> Self {
        Portal(SocketAddr::new(ip.into(), port))
    }

    /// The portal of an address as iscsiadm prints it (IPv6 with or without brackets).
    pub fn parse(address: &str, port: u16) -> Result<Self, PortalError> {
        let bare = address
            .strip_prefix('[')
            .and_then(|a| a.strip_suffix(']'))
            .unwrap_or(address);
        bare.parse::<IpAddr>()
            .map(|ip| Portal::new(ip, port))
            .map_err(|_| PortalError {
                address: address.to_string(),
            })
    }

    /// The IP address.
    pub fn ip(&self) -> IpAddr {
        self.0.ip()
    }

    /// The TCP port.
    pub fn port(&self) -> u16 {
        self.0.port()
    }

    /// The socket address, to connect to.
    pub fn socket_addr(&self) -> SocketAddr {
        self.0
    }
}

impl From<SocketAddr> for Portal {
    fn from(addr: SocketAddr) -> Self {
        Portal(addr)
    }
}

impl From<Portal> for PortalFields {
    fn from(p: Portal) -> Self {
        PortalFields {
            address: p.ip().to_string(),
            port: p.port(),
        }
    }
}

impl TryFrom<PortalFields> for Portal {
    type Error = PortalError;
    fn try_from(f: PortalFields) -> Result<Self, PortalError> {
        Portal::parse(&f.address, f.port)
    }
}

impl fmt::Display for Portal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            SocketAddr::V4(a) => write!(f, "{}:{}", a.ip(), a.port()),
            // No scope id: iscsiadm prints none, and a portal is compared by address and port.
            SocketAddr::V6(a) => write!(f, "[{}]:{}", a.ip(), a.port()),
        }
    }
}

/// What identifies an iSCSI session across reconnects: the node record iscsiadm logs in with.
/// The session id (SID) changes when iscsid drops and re-creates a session; this does not.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct SessionKey {
    /// Target IQN.
    pub target: String,
    /// Target portal.
    pub portal: Portal,
    /// iscsiadm iface name (e.g. `iser`).
    pub iface: String,
}

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "[iface: {}, target: {}, portal: {}]",
            self.iface, self.target, self.portal
        )
    }
}

/// `iSCSI Session State` as iscsiadm `-P 3` prints it (sysfs `iscsi_session/state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SessionState {
    /// `LOGGED_IN`.
    LoggedIn,
    /// `FAILED`: the connection failed; iscsid is reconnecting.
    Failed,
    /// `FREE`: recovery timed out or the session is being torn down.
    Free,
    /// Anything else.
    Unknown,
}

impl SessionState {
    /// The word iscsiadm prints.
    pub fn name(self) -> &'static str {
        match self {
            SessionState::LoggedIn => "LOGGED_IN",
            SessionState::Failed => "FAILED",
            SessionState::Free => "FREE",
            SessionState::Unknown => "UNKNOWN",
        }
    }
}

/// One SCSI disk of a session, with its sysfs device state (`running`, `transport-offline`, …).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DiskInfo {
    /// Block device name, e.g. `sda`.
    pub name: String,
    /// sysfs device state as iscsiadm prints it.
    pub state: String,
}

impl DiskInfo {
    /// A disk.
    pub fn new(name: impl Into<String>, state: impl Into<String>) -> Self {
        DiskInfo {
            name: name.into(),
            state: state.into(),
        }
    }

    /// The disk accepts I/O.
    pub fn is_running(&self) -> bool {
        self.state == "running"
    }
}

/// One session from `iscsiadm -m session -P 3`, mapped to its RDMA port by the daemon
/// (iface transport iser, local address → netdev → RDMA device and port).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionInfo {
    /// Session id (`SID:`).
    pub sid: u32,
    /// Target, portal and iface.
    pub key: SessionKey,
    /// iface transport (`iser`, `tcp`, …).
    pub transport: String,
    /// Local netdev, if known.
    pub netdev: Option<String>,
    /// Local IP address, if known.
    pub local_ip: Option<String>,
    /// The RDMA port the session runs on; `None` if the daemon could not map it (then the
    /// engine only counts it).
    pub rdma: Option<PortId>,
    /// Why the session is on `rdma` (CM id, route, iface field, only port, remembered): every
    /// automatic decision about the session names it. `None` when `rdma` is `None`.
    #[serde(default)]
    pub placed_by: Option<crate::session_map::Evidence>,
    /// iSCSI session state.
    pub state: SessionState,
    /// Attached disks.
    pub disks: Vec<DiskInfo>,
}

/// Whether a kernel-log record may trigger actions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Trust {
    /// Written by the kernel (facility 0), or learned from RDMA netlink or iscsiadm.
    Trusted,
    /// Written by userspace into /dev/kmsg: anyone with write access could forge it.
    Untrusted,
}

/// How a stuck GSI QP was seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum StuckEvidence {
    /// `modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3` (irdma).
    ModifyQpInvalid,
    /// `ib_mad_send_error - ib_modify_qp to RTS: -22`.
    MadRtsFailed,
    /// `Fatal error (N) on MAD QP (1)`.
    MadQpFatal,
    /// The QP table (RDMA netlink): QP 1, type GSI, state ERR.
    QpTable,
    /// `Couldn't open port N` (mad.c, at device registration): the port came up without
    /// MAD QPs; after a re-creation, the re-creation failed.
    MadPortOpenFailed,
    /// `IBV_EVENT_DEVICE_FATAL` on the device's asynchronous event channel (uverbs): the
    /// driver declared the device dead, every QP on it (QP 1 included) is lost.
    AsyncDeviceFatal,
}

impl StuckEvidence {
    /// The words an operator recognises.
    pub fn describe(self) -> &'static str {
        match self {
            StuckEvidence::ModifyQpInvalid => {
                "the driver refused ERR->RTS for QP 1 (modify_qp invalid)"
            }
            StuckEvidence::MadRtsFailed => "the MAD layer cannot move QP 1 back to RTS (-22)",
            StuckEvidence::MadQpFatal => "a fatal error was reported on MAD QP 1",
            StuckEvidence::QpTable => "the QP table shows QP 1 (GSI) in ERR",
            StuckEvidence::MadPortOpenFailed => {
                "the MAD layer could not open the port (no QP 1): the device came up broken"
            }
            StuckEvidence::AsyncDeviceFatal => {
                "the device reported a fatal error (DEVICE_FATAL on its async event channel)"
            }
        }
    }
}

/// Why an I/O on a disk failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum IoErrorKind {
    /// `FAILED Result: hostbyte=DID_ABORT`.
    DidAbort,
    /// `I/O error, dev sda, sector …`.
    IoError,
    /// `rejecting I/O to offline device`.
    Offline,
}

impl fmt::Display for IoErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            IoErrorKind::DidAbort => "aborted by the host (DID_ABORT)",
            IoErrorKind::IoError => "I/O error",
            IoErrorKind::Offline => "the disk is offline",
        })
    }
}

/// A fact from the kernel log or RDMA netlink, already classified.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Observation {
    /// QP 1 (GSI) of a device is in ERR and cannot return to RTS. `port` is `None` when the
    /// line does not name one (the irdma and MAD lines never do).
    GsiQpStuck {
        /// RDMA device.
        device: String,
        /// Port, if known.
        port: Option<u32>,
        /// How it was seen.
        evidence: StuckEvidence,
    },
    /// The QP table shows QP 1 (GSI) of a port in this state (RDMA netlink poll).
    GsiQpState {
        /// RDMA device.
        device: String,
        /// Port.
        port: u32,
        /// Live state.
        state: QpState,
    },
    /// The port went down (netlink port state, or `iser_event_handler: async event port error`).
    PortDown {
        /// RDMA device.
        device: String,
        /// Port.
        port: u32,
    },
    /// The port became active again.
    PortUp {
        /// RDMA device.
        device: String,
        /// Port.
        port: u32,
    },
    /// The RDMA device disappeared (netlink UNREGISTER, or missing from a dump).
    DeviceGone {
        /// RDMA device.
        device: String,
    },
    /// The NVMe over RDMA controllers of the host (`/sys/class/nvme`), placed on their RDMA
    /// ports by nvme_rdma's CM ids ([`crate::nvme_fabrics::place_controllers`]). Sent when
    /// it changes; the engine keeps the last one and remembers a device's controllers in
    /// the record of its re-creation.
    NvmeControllers {
        /// Every rdma controller.
        controllers: Vec<crate::nvme_fabrics::NvmeRdmaController>,
    },
    /// The NFS over RDMA mounts of the host (`/proc/self/mountinfo`), placed on their RDMA
    /// ports by rpcrdma's CM ids ([`crate::nfs_rdma::place_mounts`]). Sent when it changes;
    /// the engine keeps the last one and remembers a device's mounts in the record of its
    /// re-creation.
    NfsMounts {
        /// Every NFS over RDMA mount.
        mounts: Vec<crate::nfs_rdma::NfsRdmaMount>,
    },
    /// The dm-multipath paths of the host (multipathd's `show paths`), sent when they
    /// change. A host without multipathd sends an empty list: no map to protect.
    MultipathPaths {
        /// Every path of a map.
        paths: Vec<crate::multipath::MultipathPath>,
    },
    /// An RDMA device (re)appeared (netlink REGISTER, or present in a dump).
    DeviceAppeared {
        /// RDMA device.
        device: String,
        /// Parent (PCI function, e.g. `0000:02:00.0`), if known.
        parent: Option<String>,
        /// Kernel driver (e.g. `irdma`, `rxe`), if known.
        driver: Option<String>,
        /// Number of ports.
        ports: u32,
    },
    /// What re-creating a present device would need once it is gone (from sysfs and RDMA
    /// netlink: a software device's link type and netdev, a hardware device's parent
    /// function). Sent whenever it changes; the engine keeps the last one.
    DeviceRecipe {
        /// RDMA device.
        device: String,
        /// What brings it back.
        recipe: crate::reset_plan::RecreateFrom,
    },
    /// An RDMA device was renamed (udev renames a re-created device back).
    DeviceRenamed {
        /// Old name.
        from: String,
        /// New name.
        to: String,
    },
    /// ` connectionS:C: detected conn error (CODE)`.
    ConnError {
        /// Session id (the S of `connectionS:C`).
        sid: u32,
        /// iSCSI error code (1011, 1020, 1022, …).
        code: u32,
    },
    /// ` sessionS: session recovery timed out after N secs`.
    SessionRecoveryTimedOut {
        /// Session id.
        sid: u32,
    },
    /// An I/O on a disk failed.
    IoError {
        /// Block device name, e.g. `sda`.
        disk: String,
        /// How.
        kind: IoErrorKind,
    },
    /// `RDMA CM: REJECTED: invalid service ID`: the target refused the RDMA CM connection
    /// because nothing listens on the iSER service there.
    CmRejectedInvalidServiceId,
    /// `RDMA CM: ADDR_ERROR: ... status N` (a dynamic-debug line): address resolution of an
    /// RDMA CM connect failed. What it means depends on the status ([`CmAddrCause`]).
    CmAddrError {
        /// The status (-19 ENODEV, -110 ETIMEDOUT, ...).
        status: i32,
    },
    /// A kernel bug report (oops, `kernel BUG at`, `WARNING:`, KASAN, panic, a hung iSCSI
    /// task) in a module this job depends on. Not repairable by the agent: the engine alerts
    /// the operator and holds automatic re-creation on the devices the module concerns
    /// until an operator command.
    KernelBug {
        /// The module the report names (`ib_iser`, `rdma_rxe`), if it names one; `None`
        /// (a panic, a hung iscsid) concerns every device.
        module: Option<String>,
        /// The report in operator words (`kernel oops in ib_iser (iser_conn_terminate+0x1c/0x90)`).
        report: String,
    },
    /// ib_iser's QP event callback (`iser_qp_event_callback: qp event %s (%d)`): an
    /// asynchronous event on some iSER connection's QP. The line names no device or session,
    /// so it only makes the engine re-read the sessions' state promptly.
    IserQpEvent {
        /// `enum ib_event_type` value.
        event: u32,
        /// `ib_event_msg()` text.
        name: String,
    },
    /// An event read from a device's asynchronous event channel (libibverbs
    /// `ibv_get_async_event`, delivered by the kernel through uverbs): trusted like RDMA
    /// netlink. What each kind means to the engine: docs/history/engine.md "Async events".
    AsyncEvent(crate::selftest::AsyncEvent),
    /// The device's RDMA driver asked its NIC driver for a reset (irdma `Requesting a
    /// reset`): the NIC driver is about to unplug the device and plug it in again.
    DriverResetRequested {
        /// RDMA device.
        device: String,
    },
    /// A NIC function lost RDMA for a reason no re-creation repairs (ice safe mode, a
    /// failed rebuild after a reset): said once, never acted on.
    NicWithoutRdma {
        /// The PCI function.
        pci: String,
        /// What happened, in operator words.
        what: String,
        /// What the operator can do.
        remedy: String,
    },
    /// The driver-stack conditions the host's facts show ([`crate::driver_stack::detect`]:
    /// an out-of-tree RDMA driver, a bonded E810 function without RDMA), whole: it replaces
    /// the last list. Sent when it changes; never from the kernel log.
    DriverStack {
        /// Every condition shown now.
        conditions: Vec<crate::driver_stack::StackCondition>,
    },
    /// A driver-stack condition the kernel log said (ice's safe mode): kept for the
    /// daemon's run.
    DriverStackSaid {
        /// The condition.
        condition: crate::driver_stack::StackCondition,
    },
    /// The RDMA consumers of every port (RDMA netlink: the CM id table and the QP table's
    /// owners, [`crate::consumers::per_port`]), whole: it replaces the last one. Sent when
    /// it changes; never from the kernel log.
    Consumers {
        /// Every port with a consumer.
        ports: Vec<crate::consumers::PortConsumers>,
    },
}

/// What the status of an `RDMA CM: ADDR_ERROR` line says. The kernel logs the line for any
/// failed address resolution; only -19 means a local RDMA device is missing (6.12 with the
/// target away logs `failed to resolve IP. status -110` on every iscsid attempt, lab).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmAddrCause {
    /// -19 ENODEV (`failed to acquire device`): no local RDMA device owns the source address.
    LocalDeviceMissing,
    /// -110 ETIMEDOUT, -112 EHOSTDOWN, -113 EHOSTUNREACH (`failed to resolve IP`): the
    /// portal's address got no neighbour answer: the target or the network to it is away.
    PortalUnresolved,
    /// Anything else (-101 ENETUNREACH: no route to the portal, ...).
    Other,
}

impl CmAddrCause {
    /// The cause an ADDR_ERROR status names.
    pub fn of(status: i32) -> Self {
        match status {
            -19 => Self::LocalDeviceMissing,
            -110 | -112 | -113 => Self::PortalUnresolved,
            _ => Self::Other,
        }
    }
}

impl Observation {
    /// A key grouping identical observations, for storm deduplication.
    pub fn dedup_key(&self) -> String {
        match self {
            Observation::GsiQpStuck {
                device, evidence, ..
            } => format!("gsi-stuck:{device}:{evidence:?}"),
            Observation::GsiQpState {
                device,
                port,
                state,
            } => format!("gsi-state:{device}/{port}:{state}"),
            Observation::PortDown { device, port } => format!("port-down:{device}/{port}"),
            Observation::PortUp { device, port } => format!("port-up:{device}/{port}"),
            Observation::DeviceGone { device } => format!("device-gone:{device}"),
            Observation::DeviceAppeared { device, .. } => format!("device-appeared:{device}"),
            Observation::DeviceRecipe { device, .. } => format!("device-recipe:{device}"),
            Observation::DeviceRenamed { from, to } => format!("device-renamed:{from}:{to}"),
            Observation::ConnError { sid, code } => format!("conn-error:{sid}:{code}"),
            Observation::SessionRecoveryTimedOut { sid } => format!("recovery-timeout:{sid}"),
            Observation::IoError { disk, kind } => format!("io-error:{disk}:{kind:?}"),
            Observation::CmRejectedInvalidServiceId => "cm-rejected".to_string(),
            Observation::CmAddrError { status } => format!("cm-addr-error:{status}"),
            Observation::KernelBug { module, .. } => {
                format!("kernel-bug:{}", module.as_deref().unwrap_or("kernel"))
            }
            Observation::IserQpEvent { event, .. } => format!("iser-qp-event:{event}"),
            Observation::DriverResetRequested { device } => format!("driver-reset:{device}"),
            Observation::NicWithoutRdma { pci, what, .. } => format!("nic-no-rdma:{pci}:{what}"),
            Observation::DriverStack { .. } => "driver-stack".to_string(),
            Observation::DriverStackSaid { condition } => {
                format!("driver-stack:{}", condition.key())
            }
            Observation::AsyncEvent(e) => format!(
                "async-event:{}/{}:{}",
                e.device,
                e.port.unwrap_or(0),
                e.kind
            ),
            Observation::Consumers { .. } => "consumers".to_string(),
            Observation::NvmeControllers { .. } => "nvme-controllers".to_string(),
            Observation::NfsMounts { .. } => "nfs-mounts".to_string(),
            Observation::MultipathPaths { .. } => "multipath-paths".to_string(),
        }
    }

    /// A short description for alerts and the timeline.
    pub fn describe(&self) -> String {
        match self {
            Observation::GsiQpStuck {
                device, evidence, ..
            } => format!("{device}: {}", evidence.describe()),
            Observation::GsiQpState {
                device,
                port,
                state,
            } => format!("{device}/{port}: GSI QP 1 is {state}"),
            Observation::PortDown { device, port } => format!("{device}/{port}: port down"),
            Observation::PortUp { device, port } => format!("{device}/{port}: port active"),
            Observation::DeviceGone { device } => format!("RDMA device {device} disappeared"),
            Observation::DeviceAppeared { device, .. } => format!("RDMA device {device} appeared"),
            Observation::DeviceRecipe { device, recipe } => {
                format!(
                    "RDMA device {device} can be re-created from its {}",
                    recipe.describe()
                )
            }
            Observation::DeviceRenamed { from, to } => {
                format!("RDMA device {from} was renamed to {to}")
            }
            Observation::ConnError { sid, code } => {
                format!("iSCSI connection of session {sid} failed (error {code})")
            }
            Observation::SessionRecoveryTimedOut { sid } => {
                format!("session {sid}: recovery timed out, its disks now fail I/O")
            }
            Observation::IoError { disk, kind } => format!("{disk}: I/O failed ({kind})"),
            Observation::CmRejectedInvalidServiceId => {
                "RDMA CM connection rejected by the target: invalid service ID".to_string()
            }
            Observation::CmAddrError { status } => match CmAddrCause::of(*status) {
                CmAddrCause::LocalDeviceMissing => format!(
                    "RDMA CM cannot acquire a local RDMA device (status {})",
                    errno_name(*status)
                ),
                CmAddrCause::PortalUnresolved => format!(
                    "RDMA CM could not resolve a portal's address (status {}): no answer from \
                     the target's network",
                    errno_name(*status)
                ),
                CmAddrCause::Other => format!(
                    "RDMA CM address resolution failed (status {})",
                    errno_name(*status)
                ),
            },
            Observation::KernelBug { report, .. } => report.clone(),
            Observation::IserQpEvent { event, name } => {
                format!("ib_iser: QP event on an iSER connection: {name} ({event})")
            }
            Observation::AsyncEvent(e) => format!("async event {e}"),
            Observation::DriverResetRequested { device } => {
                format!("the driver of {device} requested a reset of its device")
            }
            Observation::NicWithoutRdma { pci, what, .. } => format!("{pci}: {what}"),
            Observation::DriverStack { conditions } => format!(
                "driver stack: {}",
                if conditions.is_empty() {
                    "nothing special".to_string()
                } else {
                    conditions
                        .iter()
                        .map(|c| c.summary())
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            ),
            Observation::DriverStackSaid { condition } => condition.summary(),
            Observation::NfsMounts { mounts } => format!(
                "NFS over RDMA mounts: {}",
                crate::nfs_rdma::list_mounts(mounts)
            ),
            Observation::NvmeControllers { controllers } => format!(
                "NVMe over RDMA controllers: {}",
                crate::nvme_fabrics::list_controllers(controllers)
            ),
            Observation::MultipathPaths { paths } => format!(
                "dm-multipath paths: {}",
                if paths.is_empty() {
                    "none".to_string()
                } else {
                    paths
                        .iter()
                        .map(|p| format!("{} {}", p.map, p.describe()))
                        .collect::<Vec<_>>()
                        .join("; ")
                }
            ),
            Observation::Consumers { ports } => format!(
                "RDMA consumers: {}",
                ports
                    .iter()
                    .map(|p| format!("{}/{} {}", p.device, p.port, p.consumers.len()))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        }
    }
}

/// Result of a TCP probe of a portal.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum ProbeResult {
    /// The portal accepted a TCP connection.
    Reachable,
    /// The host answered with a reset: it is up but nothing listens on the port.
    Refused,
    /// No answer within the timeout (host down or path broken).
    Unreachable,
}

impl fmt::Display for ProbeResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProbeResult::Reachable => "reachable",
            ProbeResult::Refused => "refused (host up, portal not listening)",
            ProbeResult::Unreachable => "no answer",
        })
    }
}

/// Result of re-creating an RDMA device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecreateResult {
    /// The device went away and came back with a new GSI QP in RTS (verified by the
    /// executor); `name` is its name now (normally unchanged after udev's rename).
    Recreated {
        /// The device name after re-creation.
        name: String,
        /// The device came back in the wrong RDMA mode (re-plugged as iWARP by a reset of
        /// the function during the toggle) and the executor restored RoCE: what it found.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mode_restored: Option<String>,
        /// The method that worked, in operator words (`unbind/bind auxiliary device
        /// ice.roce.0 (driver irdma)`), when the executor says.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        method: Option<String>,
        /// Methods tried before it that failed without changing anything (a refused
        /// devlink step): each is named to the operator with its error, since the device
        /// was re-created another way than the plan's first.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        failed_before: Vec<MethodFailure>,
    },
    /// The re-creation failed; the device state is whatever the executor saw.
    Failed {
        /// What went wrong, in operator words.
        reason: String,
    },
    /// No re-creation method applies to this device (driver not supported, module reload
    /// not allowed).
    Unsupported {
        /// Why.
        reason: String,
    },
    /// A step of the re-creation did not return: it is blocked in the kernel (a `devlink`
    /// or an `unbind` that ends in `ib_unregister_device`, which waits uninterruptibly for
    /// every user of the device to let go). The executor gave up waiting for it without
    /// ending it (nothing can) and without starting another writer on the device; its
    /// final result comes later ([`crate::driver::Driver::handle_recreation_returned`]).
    Blocked(BlockedStep),
}

/// A re-creation method that failed before changing anything, so the next one was tried.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MethodFailure {
    /// The method, in operator words (`toggle devlink parameter enable_roce of
    /// pci/0000:02:00.0`).
    pub method: String,
    /// What went wrong.
    pub error: String,
}

impl MethodFailure {
    /// Failed methods in one phrase: `FIRST failed (ERROR); SECOND failed (ERROR)`.
    pub fn words(failed: &[MethodFailure]) -> String {
        failed
            .iter()
            .map(|f| format!("{} failed ({})", f.method, f.error))
            .collect::<Vec<_>>()
            .join("; ")
    }
}

impl fmt::Display for MethodFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.method, self.error)
    }
}

impl RecreateResult {
    /// For a re-creation that worked: how, in one phrase (`by METHOD after FAILED: ERROR
    /// failed`), or nothing when the executor did not say.
    pub fn how_recreated(&self) -> Option<String> {
        let RecreateResult::Recreated {
            method,
            failed_before,
            ..
        } = self
        else {
            return None;
        };
        let mut out = String::new();
        if let Some(m) = method {
            out.push_str("by ");
            out.push_str(m);
        }
        if !failed_before.is_empty() {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str("after ");
            out.push_str(&MethodFailure::words(failed_before));
        }
        (!out.is_empty()).then_some(out)
    }
}

/// A re-creation step blocked in the kernel, as the executor saw it when it gave up
/// waiting.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedStep {
    /// The step as an operator would type it (`rdma link delete rxe_ini`,
    /// `echo ice.roce.0 > /sys/bus/auxiliary/drivers/irdma/unbind`).
    pub step: String,
    /// How long the step had been running when reported (milliseconds).
    pub blocked_ms: u64,
    /// The blocked task in words (`rdma (pid 4242) in D (uninterruptible sleep), waiting
    /// in ib_uverbs_remove_one`).
    pub task: String,
    /// The task is in uninterruptible sleep: no signal ends it, only the kernel.
    pub uninterruptible: bool,
    /// Its kernel stack, innermost frame first, or one line saying why it is unreadable.
    pub stack: Vec<String>,
    /// Which task it is, so that a restarted daemon can tell whether it is still there.
    pub id: TaskId,
}

/// A kernel task (a process, or one thread of one), with its start time: the same pid with
/// another start time is another task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskId {
    /// Process id.
    pub pid: i32,
    /// Thread id, for a thread that is not its process's main thread.
    pub tid: Option<i32>,
    /// Start time (clock ticks since boot, `/proc/PID/stat` field 22), when read.
    pub start_time: Option<u64>,
}

impl fmt::Display for RecreateResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecreateResult::Recreated { name, .. } => write!(f, "re-created as {name}"),
            RecreateResult::Failed { reason } => write!(f, "failed: {reason}"),
            RecreateResult::Unsupported { reason } => write!(f, "no method applies: {reason}"),
            RecreateResult::Blocked(b) => write!(
                f,
                "blocked in the kernel: `{}` has not returned after {} s ({})",
                b.step,
                b.blocked_ms / 1000,
                b.task
            ),
        }
    }
}

/// What one iscsiadm invocation means to the engine; the exit codes themselves are given
/// meaning in one table, [`crate::iscsi::IscsiadmStatus`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum IscsiadmOutcome {
    /// Exit 0.
    Success,
    /// Exit 15 (ISCSI_ERR_SESS_EXISTS): already logged in. Counts as success for a login.
    AlreadyLoggedIn,
    /// Exit 21 (ISCSI_ERR_NO_OBJS_FOUND) or 2 (SESS_NOT_FOUND): no such session. Counts as
    /// success for a logout.
    NotFound,
    /// Exit 8, 11 or 33 (transport, PDU or iscsid request timeout), or the child was killed
    /// after the configured timeout.
    Timeout,
    /// Exit 24 (ISCSI_ERR_LOGIN_AUTH_FAILED) or 19 (FATAL_LOGIN): retrying will not help.
    AuthFailed,
    /// Anything else.
    Other {
        /// Exit code (`None` if killed by a signal).
        code: Option<i32>,
        /// The last line iscsiadm printed.
        message: String,
    },
}

impl IscsiadmOutcome {
    /// Maps an iscsiadm exit code (and its last output line) to a status, through the one
    /// exit-code table ([`crate::iscsi::IscsiadmStatus`], see
    /// [`iscsiadm_outcome`](super::iscsiadm_outcome)).
    pub fn from_exit_code(code: i32, message: &str) -> Self {
        super::adapter::iscsiadm_outcome(crate::iscsi::IscsiadmStatus::from_code(code), message)
    }
}

impl fmt::Display for IscsiadmOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IscsiadmOutcome::Success => f.write_str("succeeded"),
            IscsiadmOutcome::AlreadyLoggedIn => f.write_str("already logged in"),
            IscsiadmOutcome::NotFound => f.write_str("no such session"),
            IscsiadmOutcome::Timeout => f.write_str("timed out"),
            IscsiadmOutcome::AuthFailed => f.write_str("login refused (authentication)"),
            IscsiadmOutcome::Other {
                code: Some(code),
                message,
            } if message.is_empty() => write!(f, "exit {code}"),
            IscsiadmOutcome::Other {
                code: Some(code),
                message,
            } => write!(f, "exit {code}: {message}"),
            IscsiadmOutcome::Other {
                code: None,
                message,
            } if message.is_empty() => f.write_str("killed by a signal"),
            IscsiadmOutcome::Other {
                code: None,
                message,
            } => write!(f, "killed by a signal: {message}"),
        }
    }
}

/// The outcome of an action, reported by the executor with the action's id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Outcome {
    /// For [`ActionKind::ProbePortal`](super::ActionKind::ProbePortal).
    Probe(ProbeResult),
    /// For [`ActionKind::RecreateDevice`](super::ActionKind::RecreateDevice).
    Recreate(RecreateResult),
    /// For the iscsiadm actions.
    Iscsiadm(IscsiadmOutcome),
    /// For [`ActionKind::SelfTestPort`](super::ActionKind::SelfTestPort): what the port
    /// self-test found, or why it could not run.
    SelfTest(crate::selftest::SelfTestResult),
    /// For [`ActionKind::PersistState`](super::ActionKind::PersistState): the journal
    /// could not be written. The executor must then not run the destructive actions that
    /// follow and report [`Outcome::NotRun`] for each.
    PersistFailed {
        /// The OS error, in words.
        reason: String,
    },
    /// For [`ActionKind::NvmeReconnect`](super::ActionKind::NvmeReconnect): what became of
    /// each remembered controller.
    NvmeReconnect {
        /// The re-created device.
        device: String,
        /// One per controller, in the action's order.
        reports: Vec<crate::nvme_fabrics::NvmeReconnectReport>,
    },
    /// For [`ActionKind::NfsCheck`](super::ActionKind::NfsCheck): what each remembered
    /// mount's check said.
    NfsCheck {
        /// The re-created device.
        device: String,
        /// One per mount, in the action's order.
        reports: Vec<crate::nfs_rdma::NfsCheckReport>,
    },
    /// For [`ActionKind::MultipathReinstate`](super::ActionKind::MultipathReinstate): what
    /// became of each remembered path.
    MultipathReinstate {
        /// The re-created device.
        device: String,
        /// One per remembered path, in the action's order.
        reports: Vec<crate::multipath::PathBackReport>,
    },
    /// The executor did not run the action (journal write failed, shutting down).
    NotRun {
        /// Why.
        reason: String,
    },
    /// Planned, not run: the driver ([`crate::driver`]) decided the action may not run now
    /// (dry-run, paused, outside `devices.allow`). Neither success nor failure: the engine
    /// holds the port with the plan visible and counts no attempt.
    Planned {
        /// Why it was not run (the hold the port shows).
        hold: super::state::Hold,
        /// What would have been done, in operator words.
        plan: String,
    },
}

impl fmt::Display for Outcome {
    /// A few words for the log line of a finished action (its summary says the rest).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Probe(p) => write!(f, "probe: {p}"),
            Outcome::Recreate(RecreateResult::Recreated { .. }) => f.write_str("re-created"),
            Outcome::Recreate(RecreateResult::Failed { .. }) => f.write_str("re-creation failed"),
            Outcome::Recreate(RecreateResult::Unsupported { .. }) => {
                f.write_str("no re-creation method")
            }
            Outcome::Recreate(RecreateResult::Blocked(_)) => {
                f.write_str("re-creation blocked in the kernel")
            }
            Outcome::Iscsiadm(s) => write!(f, "iscsiadm {s}"),
            Outcome::SelfTest(crate::selftest::SelfTestResult::Ran(r)) if r.passed() => {
                f.write_str("self-test passed")
            }
            Outcome::SelfTest(crate::selftest::SelfTestResult::Ran(_)) => {
                f.write_str("self-test failed")
            }
            Outcome::SelfTest(crate::selftest::SelfTestResult::Unavailable { .. }) => {
                f.write_str("self-test unavailable")
            }
            Outcome::NvmeReconnect { reports, .. } => write!(
                f,
                "{} of {} NVMe controller(s) back",
                reports.iter().filter(|r| r.result.is_back()).count(),
                reports.len()
            ),
            Outcome::NfsCheck { reports, .. } => write!(
                f,
                "{} of {} NFS mount(s) answer",
                reports.iter().filter(|r| r.result.answered()).count(),
                reports.len()
            ),
            Outcome::MultipathReinstate { reports, .. } => write!(
                f,
                "{} of {} multipath path(s) active",
                reports.iter().filter(|r| r.result.is_back()).count(),
                reports.len()
            ),
            Outcome::PersistFailed { .. } => f.write_str("journal write failed"),
            Outcome::NotRun { .. } => f.write_str("not run"),
            Outcome::Planned { .. } => f.write_str("planned, not run"),
        }
    }
}

/// What an operator asked for (CLI through the control socket).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum OperatorCommand {
    /// Stop automatic actions everywhere (maintenance); detection and alerts continue.
    Pause,
    /// Resume automatic actions.
    Resume,
    /// `iser-guard recover DEVICE[/PORT]`: check the target, re-create the device, reconnect,
    /// verify. Lifts quarantine and the other-sessions hold for that port; the operator's
    /// word also overrides the allow-list.
    Recover {
        /// Device.
        device: String,
        /// Port; `None` = every port of the device.
        port: Option<u32>,
    },
    /// `iser-guard reset-device DEVICE`: re-create the device now, then reconnect.
    ResetDevice {
        /// Device.
        device: String,
    },
    /// `iser-guard reconnect [--target IQN] [--portal ADDR]`: log matching sessions out and in.
    Reconnect {
        /// Only sessions of this target.
        target: Option<String>,
        /// Only sessions to this portal.
        portal: Option<Portal>,
    },
}

impl fmt::Display for OperatorCommand {
    /// The command line that asks for it: `recover rocep2s0f0/1`, `reconnect --portal …`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OperatorCommand::Pause => f.write_str("pause"),
            OperatorCommand::Resume => f.write_str("resume"),
            OperatorCommand::Recover { device, port } => match port {
                Some(p) => write!(f, "recover {device}/{p}"),
                None => write!(f, "recover {device}"),
            },
            OperatorCommand::ResetDevice { device } => write!(f, "reset-device {device}"),
            OperatorCommand::Reconnect { target, portal } => {
                f.write_str("reconnect")?;
                if let Some(t) = target {
                    write!(f, " --target {t}")?;
                }
                if let Some(p) = portal {
                    write!(f, " --portal {p}")?;
                }
                Ok(())
            }
        }
    }
}

/// Any input, for callers that queue inputs (the simulator, fuzzing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Input {
    /// A classified kernel-log record or netlink fact.
    Observation {
        /// The fact.
        observation: Observation,
        /// Whether it may trigger actions.
        trust: Trust,
    },
    /// A full `iscsiadm -m session -P 3` snapshot.
    Sessions(Vec<SessionInfo>),
    /// The outcome of an action.
    Outcome {
        /// The action's id.
        id: super::ActionId,
        /// What happened.
        outcome: Outcome,
    },
    /// An operator command.
    Command(OperatorCommand),
    /// Time passed (`handle_timeout`).
    Timeout,
    /// A complete scan finished (`handle_scan_complete`): lets a wrapper that forwards
    /// [`Input`]s (the driver) report it without a method of its own.
    ScanComplete(ScanComplete),
}

/// A complete scan of the host finished: the iscsiadm session list and the RDMA topology
/// (devices, ports, QP table) have both been fed to the engine since the start. The daemon
/// reports this once after its first scan at start (and may report later scans too); until
/// the first report, the engine runs nothing destructive, so a journal resumed after a
/// restart is never acted on before the host has been looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScanComplete {
    /// The RDMA netlink QP table could be read (`false` without RDMA netlink: then a fresh
    /// GSI QP after a re-creation cannot be verified, and the verdict says so).
    pub qp_table_available: bool,
}
