//! What `iser-guard doctor` read from the host, as plain data: the shell fills it in
//! (sysfs, /proc, RDMA netlink, iscsiadm, the unit file, the daemon's control socket) and the
//! checks ([`super::audit`]) judge it. Every fact that could not be read carries why
//! (`Err(reason)`), so a check can say "unknown" with the reason instead of guessing.

use serde::Serialize;

use super::parse::{CharDevices, IscsiSettings, UnitFile};
use crate::observe::DaemonSnapshot;
use crate::reset_plan::{AuxFacts, ResetMethod};

/// A fact, or why it could not be read (operator words, with the path).
pub type Read<T> = Result<T, String>;

/// Everything the audit looks at.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Facts {
    /// Where each kind of fact was read (named in the evidence).
    pub paths: FactPaths,
    /// The running kernel.
    pub kernel: KernelFacts,
    /// Kernel modules.
    pub modules: ModuleFacts,
    /// RDMA devices and what the kernel's two witnesses said about them.
    pub rdma: RdmaFacts,
    /// The service's sandbox and the verbs device nodes.
    pub sandbox: SandboxFacts,
    /// The configuration in force for this host.
    pub config: ConfigFacts,
    /// open-iscsi: settings, node records and sessions.
    pub iscsi: IscsiFacts,
    /// The running daemon, if any.
    pub daemon: DaemonWitness,
    /// NIC functions whose netdev is a bond member (for the bonded-E810 hazard).
    pub bonded: Vec<BondedPort>,
}

/// The roots the facts were read under (`/sys`, `/proc`, …, or a fixture's).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct FactPaths {
    /// `paths.sysfs-root`.
    pub sysfs: String,
    /// `paths.proc-root`.
    pub proc: String,
    /// `paths.dev-root`.
    pub dev: String,
    /// `paths.modules-root` with the running release (`/lib/modules/RELEASE`).
    pub modules: String,
    /// `paths.iscsi-dir`.
    pub iscsi: String,
}

/// The running kernel.
#[derive(Debug, Clone, Serialize)]
pub struct KernelFacts {
    /// `/proc/sys/kernel/osrelease`.
    pub release: Read<String>,
    /// `/proc/version` (compiler and build), when readable.
    pub version: Option<String>,
    /// `/proc/sys/kernel/tainted`, when readable.
    pub tainted: Option<u64>,
}

impl Default for KernelFacts {
    fn default() -> Self {
        KernelFacts {
            release: Err("not read".into()),
            version: None,
            tainted: None,
        }
    }
}

/// Kernel modules: which are loaded or built in, and what sysfs and modules.dep say about
/// the ones that matter.
#[derive(Debug, Clone, Serialize)]
pub struct ModuleFacts {
    /// Names from `/proc/modules`.
    pub loaded: Read<Vec<String>>,
    /// Names from `modules.builtin` of the running release.
    pub builtin: Read<Vec<String>>,
    /// The modules of interest (RDMA drivers in use, the ones iser-guard needs).
    pub info: Vec<ModuleInfo>,
}

impl Default for ModuleFacts {
    fn default() -> Self {
        ModuleFacts {
            loaded: Err("not read".into()),
            builtin: Err("not read".into()),
            info: Vec::new(),
        }
    }
}

impl ModuleFacts {
    /// Loaded, built in, or present under /sys/module (`None`: no source could be read).
    pub fn present(&self, name: &str) -> Option<bool> {
        let info = self.info(name);
        let in_sys = info.is_some_and(|i| i.in_sysfs);
        let loaded = self
            .loaded
            .as_ref()
            .ok()
            .map(|l| l.iter().any(|n| n == name));
        let builtin = self
            .builtin
            .as_ref()
            .ok()
            .map(|b| b.iter().any(|n| n == name));
        match (loaded, builtin) {
            (None, None) if !in_sys && info.is_none() => None,
            (l, b) => Some(in_sys || l.unwrap_or(false) || b.unwrap_or(false)),
        }
    }

    /// What is known about `name`.
    pub fn info(&self, name: &str) -> Option<&ModuleInfo> {
        self.info.iter().find(|i| i.name == name)
    }
}

/// One module, from `/sys/module/NAME` and `modules.dep`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ModuleInfo {
    /// The module name (`irdma`).
    pub name: String,
    /// `/sys/module/NAME` exists.
    pub in_sysfs: bool,
    /// `/sys/module/NAME/version` (only modules that declare one).
    pub version: Option<String>,
    /// `/sys/module/NAME/srcversion`.
    pub srcversion: Option<String>,
    /// `/sys/module/NAME/taint` (`O` = out-of-tree, `E` = unsigned).
    pub taint: Option<String>,
    /// Its path in `modules.dep`, relative to the release's module folder.
    pub path: Option<String>,
    /// Listed in `modules.builtin`.
    pub builtin: bool,
}

/// The RDMA devices.
#[derive(Debug, Clone, Serialize)]
pub struct RdmaFacts {
    /// `class/infiniband` exists (it does not without ib_core).
    pub class_present: bool,
    /// Why sysfs could not be listed, if it could not.
    pub sysfs_error: Option<String>,
    /// RDMA netlink answered (`Err`: why not; QP states and CM ids are then unknown).
    pub netlink: Read<()>,
    /// Every device either witness saw, by name.
    pub devices: Vec<RdmaDevice>,
}

impl Default for RdmaFacts {
    fn default() -> Self {
        RdmaFacts {
            class_present: false,
            sysfs_error: None,
            netlink: Err("not asked".into()),
            devices: Vec::new(),
        }
    }
}

/// One RDMA device.
#[derive(Debug, Clone, Serialize)]
pub struct RdmaDevice {
    /// Its name (`rocep2s0f0`, `rxe_ini`).
    pub name: String,
    /// Listed under `class/infiniband`.
    pub in_sysfs: bool,
    /// Listed by RDMA netlink.
    pub in_netlink: bool,
    /// Node type number (1 CA, 4 RNIC = iWARP).
    pub node_type: Option<u8>,
    /// Firmware version.
    pub fw: Option<String>,
    /// The parent PCI function (`0000:02:00.0`), none for a software device.
    pub pci: Option<String>,
    /// The PCI function's driver (`ice`, `mlx5_core`).
    pub pci_driver: Option<String>,
    /// The RDMA auxiliary device, its driver folder and module.
    pub aux: Option<AuxFacts>,
    /// Software device type (`rxe`, `siw`), when it is one.
    pub soft: Option<String>,
    /// The kernel modules that serve it (RDMA driver first, then the NIC driver).
    pub modules: Vec<String>,
    /// Its ports.
    pub ports: Vec<RdmaPort>,
    /// How the daemon would re-create it (the resetter's plan), or why it cannot.
    pub recreate: Read<RecreatePlan>,
    /// The devlink parameter an ice function's RDMA hangs on, when it has one.
    pub devlink: Option<DevlinkParamFact>,
    /// The QP table could not be dumped for this device.
    pub qp_error: Option<String>,
}

/// One port of an RDMA device.
#[derive(Debug, Clone, Serialize)]
pub struct RdmaPort {
    /// Port number, from 1.
    pub port: u32,
    /// Logical state (`ACTIVE`, `DOWN`, …).
    pub state: Option<String>,
    /// Physical state (`LINK_UP`, `LinkUp`, `DISABLED`, …).
    pub phys_state: Option<String>,
    /// `Ethernet` or `InfiniBand`.
    pub link_layer: Option<String>,
    /// Its netdevs.
    pub netdevs: Vec<String>,
    /// QP 1 in the live QP table.
    pub gsi: Gsi,
    /// The RDMA CM ids on this port, by consumer.
    pub cm_ids: Read<Vec<CmIdFact>>,
}

impl RdmaDevice {
    /// A device of this name that nothing is known about yet.
    pub fn named(name: impl Into<String>) -> Self {
        RdmaDevice {
            name: name.into(),
            in_sysfs: false,
            in_netlink: false,
            node_type: None,
            fw: None,
            pci: None,
            pci_driver: None,
            aux: None,
            soft: None,
            modules: Vec::new(),
            ports: Vec::new(),
            recreate: Err("not planned".into()),
            devlink: None,
            qp_error: None,
        }
    }
}

impl RdmaPort {
    /// Port `port` that nothing is known about yet.
    pub fn numbered(port: u32) -> Self {
        RdmaPort {
            port,
            state: None,
            phys_state: None,
            link_layer: None,
            netdevs: Vec::new(),
            gsi: Gsi::Unknown,
            cm_ids: Err("not listed".into()),
        }
    }
}

/// QP 1 of a port, as the RDMA netlink QP table shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(tag = "seen", rename_all = "kebab-case")]
pub enum Gsi {
    /// The QP table is not known (no RDMA netlink, or the dump failed).
    #[default]
    Unknown,
    /// The table has no GSI QP for this port.
    Absent,
    /// QP 1 of type GSI, in this state (`RTS`, `ERR`, …).
    State {
        /// The state's name.
        state: String,
        /// The row as `rdma resource show qp` prints it.
        evidence: String,
    },
}

/// Who holds an RDMA CM id.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum CmIdOwner {
    /// A kernel module (`ib_iser`, `nvme_rdma`, `rpcrdma`, `ib_isert`, …).
    Kernel {
        /// Its name.
        module: String,
    },
    /// A process (librdmacm users: SPDK, Ceph, MPI, a self-test).
    Process {
        /// Its pid.
        pid: u32,
        /// Its `comm`, when it could be read.
        comm: Option<String>,
    },
    /// The kernel named no owner.
    Unknown,
}

impl CmIdOwner {
    /// How an operator reads it: `ib_iser`, `pid 4242 (spdk_tgt)`.
    pub fn describe(&self) -> String {
        match self {
            CmIdOwner::Kernel { module } => module.clone(),
            CmIdOwner::Process { pid, comm } => match comm {
                Some(c) => format!("pid {pid} ({c})"),
                None => format!("pid {pid}"),
            },
            CmIdOwner::Unknown => "an unnamed owner".into(),
        }
    }

    /// The iSER initiator, whose sessions iser-guard brings back.
    pub fn is_iser_initiator(&self) -> bool {
        matches!(self, CmIdOwner::Kernel { module } if module == "ib_iser")
    }
}

/// One RDMA CM id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CmIdFact {
    /// Its owner.
    pub consumer: CmIdOwner,
    /// `rdma_cm` state name (`CONNECT`, `LISTEN`, …).
    pub state: String,
    /// Source address, when AF_INET/AF_INET6.
    pub src: Option<String>,
    /// Destination address, when AF_INET/AF_INET6.
    pub dst: Option<String>,
}

impl CmIdFact {
    /// A listener (no QP, LISTEN state).
    pub(crate) fn is_listener(&self) -> bool {
        self.state == "LISTEN"
    }
}

/// The resetter's plan for a device, as data.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RecreatePlan {
    /// Methods in the order the daemon would try them, each with its steps.
    pub methods: Vec<(ResetMethod, Vec<String>)>,
    /// Methods left out, with why.
    pub skipped: Vec<String>,
}

/// An ice function's RDMA devlink parameter.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevlinkParamFact {
    /// devlink handle (`pci/0000:02:00.0`).
    pub handle: String,
    /// `enable_roce` or `enable_iwarp`.
    pub name: String,
    /// Its runtime value, or why it could not be read.
    pub value: Read<bool>,
}

/// The sandbox of the service and the nodes it must open.
#[derive(Debug, Clone, Serialize)]
pub struct SandboxFacts {
    /// The unit file read.
    pub unit_path: String,
    /// The unit with its drop-ins applied; `Ok(None)` when the unit file does not exist.
    pub unit: Read<Option<UnitFile>>,
    /// The drop-ins applied, in order.
    pub drop_ins: Vec<String>,
    /// `/proc/devices`.
    pub proc_devices: Read<CharDevices>,
    /// The nodes under `/dev/infiniband` (uverbsN, rdma_cm, umadN, …).
    pub verbs_nodes: Read<Vec<DevNode>>,
}

impl Default for SandboxFacts {
    fn default() -> Self {
        SandboxFacts {
            unit_path: String::new(),
            unit: Ok(None),
            drop_ins: Vec::new(),
            proc_devices: Err("not read".into()),
            verbs_nodes: Err("not read".into()),
        }
    }
}

/// A device node and its number.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DevNode {
    /// The node's path (`/dev/infiniband/uverbs0`).
    pub path: String,
    /// Its name (`uverbs0`).
    pub name: String,
    /// `MAJOR:MINOR`, from the node, else from the device's sysfs `dev` file.
    pub number: Option<(u32, u32)>,
}

/// The configuration in force, as the audit needs it.
#[derive(Debug, Clone, Default, Serialize)]
pub struct ConfigFacts {
    /// Where it came from (a file, or the built-in defaults).
    pub source: String,
    /// Why the file could not be used (the audit then judges the built-in defaults).
    pub problems: Vec<String>,
    /// Why the file could not be read by this caller (not root), when so: nothing is known
    /// about it, and the audit judges the built-in defaults.
    pub unread: Option<String>,
    /// `devices.allow`.
    pub allow: Vec<String>,
    /// `recovery.dry-run`.
    pub dry_run: bool,
    /// `recovery.iscsid-grace`, seconds.
    pub iscsid_grace_s: f64,
    /// `recovery.probe-successes` × `poll.probe`: how long the target must answer before a
    /// re-creation, seconds.
    pub target_back_s: f64,
    /// `recovery.probe-method`, as the file spells it.
    pub probe_method: String,
    /// `recovery.probe-port`.
    pub probe_port: u16,
    /// `recovery.allow-module-reload`.
    pub allow_module_reload: bool,
    /// `recovery.selftest` is `auto`.
    pub selftest: bool,
}

/// open-iscsi on this host.
#[derive(Debug, Clone, Serialize)]
pub struct IscsiFacts {
    /// `iscsid.conf` (the defaults of new node records); `Ok(None)` when absent.
    pub iscsid_conf: Read<Option<IscsiSettings>>,
    /// The node records (`nodes/IQN/PORTAL,TPGT/IFACE`).
    pub nodes: Read<Vec<NodeRecord>>,
    /// The sessions, placed on their RDMA ports.
    pub sessions: Read<Vec<SessionFact>>,
}

impl Default for IscsiFacts {
    fn default() -> Self {
        IscsiFacts {
            iscsid_conf: Ok(None),
            nodes: Ok(Vec::new()),
            sessions: Err("not listed".into()),
        }
    }
}

/// One node record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeRecord {
    /// Target IQN.
    pub target: String,
    /// Portal `ADDRESS:PORT`.
    pub portal: String,
    /// iface name.
    pub iface: String,
    /// Its settings (never printed whole: they hold CHAP secrets).
    #[serde(skip)]
    pub settings: Read<IscsiSettings>,
}

/// One iSCSI session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionFact {
    /// Session id.
    pub sid: u32,
    /// Target IQN.
    pub target: String,
    /// Portal `ADDRESS:PORT`.
    pub portal: String,
    /// iface name.
    pub iface: String,
    /// Transport (`iser`, `tcp`).
    pub transport: String,
    /// iSCSI session state (`LOGGED_IN`, `FAILED`, …).
    pub state: String,
    /// The RDMA port it runs on (`device/port`), when placed.
    pub port: Option<(String, u32)>,
    /// What placed it there.
    pub placed_by: Option<String>,
    /// Its disks (`sdb`).
    pub disks: Vec<String>,
}

/// The daemon, as its control socket answered.
#[derive(Debug, Clone, Default, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum DaemonWitness {
    /// Not asked (the audit of a fixture host).
    #[default]
    NotAsked,
    /// Nothing listens on the socket.
    NotRunning {
        /// The socket.
        socket: String,
    },
    /// Something answered and cannot be read, or refused.
    Unreadable {
        /// Why.
        why: String,
    },
    /// A daemon answered with its state.
    Running {
        /// Its state.
        snapshot: Box<DaemonSnapshot>,
    },
}

/// A NIC function whose netdev is a member of a bond.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BondedPort {
    /// The PCI function.
    pub pci: String,
    /// Its PCI driver (`ice`).
    pub driver: String,
    /// The netdev.
    pub netdev: String,
    /// The bond it is a member of.
    pub master: String,
    /// An RDMA device has this function as its parent.
    pub has_rdma: bool,
}
