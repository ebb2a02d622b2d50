//! `iser-guard status`: RDMA devices, ports (state, physical state, netdev, driver, parent PCI
//! function), QP counts by state per port, and any stuck port with its evidence.
//!
//! Two witnesses: RDMA netlink (devices, ports, the live QP table) and sysfs (parents,
//! drivers, firmware, link layer). When RDMA netlink is missing (a kernel without ib_core,
//! like the build machines) the command says so and shows what sysfs has.
//!
//! Exit codes: 0 all well (or netlink missing but sysfs listed devices: a warning says the
//! QP states are unknown); 1 a stuck port was found; 69 RDMA netlink is unavailable and sysfs
//! shows no device; other netlink failures with nothing to show map as in
//! [`crate::error::netlink_status`].
//!
//! [`gather`] and [`StatusReport::build`] are the library entry points: tests drive them with a
//! fake kernel transport.

use crate::exit::ExitStatus;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use super::Globals;
use crate::config::Config;
use crate::core::kernel_caps::KernelCaps;
use crate::core::nldev::{path_mig_state_name, IbPortState, PhysState, QpEntry};
use crate::core::time::Instant;
use crate::core::topology::{Device, StuckPort, Topology};
use crate::error::Error;
use crate::io::netlink::{BlockingTransport, NetlinkError, NldevClient, Skips};
use crate::io::sysfs::{self, Parent, SysfsDevice, SysfsScan};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON (link keys as `rdma link show -j`, QP keys as `rdma resource show qp -j`).
    #[arg(long)]
    pub json: bool,
    /// Read sysfs under this root instead of `paths.sysfs-root` from the configuration.
    #[arg(long, value_name = "PATH")]
    pub sysfs_root: Option<PathBuf>,
}

/// Runs the subcommand: the kernel's view, then the running daemon's (engine) view, or a
/// line saying no daemon runs. The daemon's absence never changes the exit code.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let cfg = view_config(globals);
    let root = args.sysfs_root.unwrap_or(cfg.paths.sysfs_root);
    let gathered = gather_with_caps(NldevClient::open(), &root, &cfg.paths.proc_root);
    let mut report = StatusReport::build(&gathered);
    let nvme = nvme_controllers(&gathered);
    let nfs = nfs_mounts(&gathered, &cfg.paths.proc_root);
    if let Some(ports) = report.consumers.as_mut() {
        crate::io::proc_comm::name_processes(ports, &cfg.paths.proc_root);
    }
    let socket = cfg.paths.control_socket;
    let daemon = super::daemon_view::query(&socket);
    if args.json {
        println!(
            "{}",
            to_json(&Combined {
                kernel: &report,
                nvme_controllers: &nvme,
                nfs_mounts: &nfs,
                daemon: &daemon
            })?
        );
    } else {
        let style = super::term::Style::stdout();
        print!("{}", report.render_styled(style));
        print!("{}", super::consumers_view::render_nvme(&nvme));
        print!("{}", super::consumers_view::render_nfs(&nfs));
        print!("\n{}", super::daemon_view::render(&daemon, style));
    }
    report.exit(gathered.netlink_error)
}

/// `status --json`: the kernel's keys as before, plus `daemon`.
#[derive(Serialize)]
struct Combined<'a> {
    #[serde(flatten)]
    kernel: &'a StatusReport,
    /// The NVMe over RDMA controllers; absent when there are none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    nvme_controllers: &'a [crate::core::nvme_fabrics::NvmeRdmaController],
    /// The NFS over RDMA mounts; absent when there are none.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    nfs_mounts: &'a [crate::core::nfs_rdma::NfsRdmaMount],
    daemon: &'a super::daemon_view::DaemonSide,
}

/// The NVMe over RDMA controllers (`/sys/class/nvme` under the sysfs root read), placed on
/// their RDMA ports by nvme_rdma's CM ids: what a re-creation of their device would
/// remember and reconnect.
fn nvme_controllers(g: &Gathered) -> Vec<crate::core::nvme_fabrics::NvmeRdmaController> {
    let (mut c, _) = crate::io::sysfs::nvme::rdma_controllers(&g.sysfs_root);
    crate::core::nvme_fabrics::place_controllers(&mut c, &g.cm_ids, &[]);
    c
}

/// The NFS over RDMA mounts (`self/mountinfo` under `proc_root`), placed on their RDMA ports
/// by rpcrdma's CM ids: what a re-creation of their device would remember and check.
fn nfs_mounts(g: &Gathered, proc_root: &Path) -> Vec<crate::core::nfs_rdma::NfsRdmaMount> {
    let (mut m, _) = crate::io::mountinfo::nfs_rdma_mounts(&proc_root.join("self/mountinfo"));
    crate::core::nfs_rdma::place_mounts(&mut m, &g.cm_ids, &[]);
    m
}

/// The sysfs root: `--sysfs-root`, else `paths.sysfs-root` of the configuration.
pub(crate) fn sysfs_root(flag: Option<PathBuf>, globals: &Globals) -> Result<PathBuf, Error> {
    if let Some(p) = flag {
        return Ok(p);
    }
    Ok(view_config(globals).paths.sysfs_root)
}

/// The configuration of a read-only view (`status`, `qps`). A file that cannot be used (an
/// edit the daemon refused on reload, or a non-root caller who cannot read the 0640 file)
/// must not hide the kernel's view from the operator who is debugging exactly that: warn,
/// then use the built-in paths. The lab's systemd guest showed it: after a refused
/// `systemctl reload`, `status` exited 78 while the daemon ran on with the old file.
fn view_config(globals: &Globals) -> Config {
    match load_config(globals.config.as_deref()) {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!(
                "iser-guard: warning: {e}; this view uses the built-in paths (a running daemon \
                 keeps the configuration it loaded; `iser-guard check-config` says what to fix)"
            );
            Config::default()
        }
    }
}

/// Reads `--config` if given, else the default file if present, else the built-in defaults.
// The config branch provides `config::load_or_default` with permission checks; until it is
// merged this reads the file directly with the same schema.
fn load_config(explicit: Option<&Path>) -> Result<Config, Error> {
    Ok(crate::config::load_or_default(explicit)?.0)
}

pub(crate) fn to_json<T: Serialize>(v: &T) -> Result<String, Error> {
    serde_json::to_string_pretty(v).map_err(|e| Error::Data(format!("cannot encode JSON: {e}")))
}

/// What both witnesses said.
#[derive(Debug)]
pub struct Gathered {
    /// The model folded from one netlink snapshot (`None` if netlink failed).
    pub topology: Option<Topology>,
    /// Why netlink gave nothing.
    pub netlink_error: Option<NetlinkError>,
    /// Netlink entries skipped while decoding.
    pub skips: Skips,
    /// The sysfs scan.
    pub sysfs: SysfsScan,
    /// Why sysfs could not be listed at all.
    pub sysfs_error: Option<String>,
    /// The sysfs root used.
    pub sysfs_root: PathBuf,
    /// Every RDMA CM id of the snapshot's devices (empty without netlink).
    pub cm_ids: Vec<crate::core::nldev::CmIdEntry>,
    /// What the kernel offers the daemon ([`gather_with_caps`] only).
    pub caps: Option<KernelCaps>,
}

/// [`gather`], after probing the kernel's capabilities (device events, the CM id table,
/// driver folders; `io::kernel_caps`) through the same client; the release is read under
/// `proc_root`.
pub fn gather_with_caps<T: BlockingTransport>(
    client: Result<NldevClient<T>, NetlinkError>,
    sysfs_root: &Path,
    proc_root: &Path,
) -> Gathered {
    let mut client = client;
    let caps =
        crate::io::kernel_caps::detect(client.as_mut().map_err(|e| &*e), sysfs_root, proc_root);
    Gathered {
        caps: Some(caps),
        ..gather(client, sysfs_root)
    }
}

/// Reads sysfs, then one netlink snapshot through `client` (or records why there is none).
pub fn gather<T: BlockingTransport>(
    client: Result<NldevClient<T>, NetlinkError>,
    sysfs_root: &Path,
) -> Gathered {
    let (sysfs, sysfs_error) = match sysfs::scan(sysfs_root) {
        Ok(s) => (s, None),
        Err(e) => (SysfsScan::default(), Some(e.to_string())),
    };
    let parent_of = |name: &str| sysfs.device(name).and_then(|d| d.parent.identity());
    let result = client.and_then(|mut c| c.snapshot(&parent_of));
    let (topology, netlink_error, skips, cm_ids) = match result {
        Ok(report) => {
            let mut t = Topology::new();
            // One snapshot: the instant only stamps the evidence.
            t.apply_snapshot(report.snapshot, Instant::ZERO);
            (Some(t), None, report.skips, report.cm_ids)
        }
        Err(e) => (None, Some(e), Skips::default(), Vec::new()),
    };
    Gathered {
        topology,
        netlink_error,
        skips,
        sysfs,
        sysfs_error,
        sysfs_root: sysfs_root.to_path_buf(),
        cm_ids,
        caps: None,
    }
}

/// Netlink's part of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetlinkStatus {
    /// Whether the dump worked.
    pub available: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Entries skipped while decoding.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// Sysfs's part of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SysfsStatus {
    /// The root read.
    pub root: String,
    /// Whether `class/infiniband` exists.
    pub class_present: bool,
    /// Why sysfs could not be listed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Files skipped, with reasons.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

/// One port, with the keys `rdma link show -j` uses plus ours.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LinkStatus {
    /// RDMA device index (iproute2 calls it ifindex).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ifindex: Option<u32>,
    /// RDMA device name.
    pub ifname: String,
    /// Port number.
    pub port: u32,
    /// Logical state (`ACTIVE`, `DOWN`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Physical state (`LINK_UP`, `DISABLED`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub physical_state: Option<String>,
    /// Netdev name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// Netdev ifindex.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netdev_index: Option<u32>,
    /// `Ethernet` or `InfiniBand` (sysfs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub link_layer: Option<String>,
    /// QP counts by state (`RTS`: 2, …); absent when the QP table is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qps: Option<BTreeMap<String, usize>>,
    /// The port's GSI QP is in ERR.
    pub stuck: bool,
}

/// One device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceStatus {
    /// RDMA device index.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ifindex: Option<u32>,
    /// RDMA device name.
    pub ifname: String,
    /// Node type (`CA`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node_type: Option<String>,
    /// Firmware version.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fw: Option<String>,
    /// The driver owning the RDMA function (`irdma`, `irdma.gen_2`, `mlx5_ib.rdma`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    /// The parent PCI function.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pci: Option<String>,
    /// The RDMA auxiliary device (`ice.roce.0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub aux_device: Option<String>,
    /// Which witnesses saw it: `netlink`, `sysfs` or `netlink+sysfs`.
    pub seen_by: &'static str,
    /// QP dump problem for this device, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub qp_error: Option<String>,
    /// Ports.
    pub links: Vec<LinkStatus>,
}

/// Evidence of a stuck port, with QP keys as `rdma resource show qp -j`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StuckStatus {
    /// RDMA device index.
    pub ifindex: u32,
    /// RDMA device name.
    pub ifname: String,
    /// Port.
    pub port: u32,
    /// Netdev.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub netdev: Option<String>,
    /// The GSI QP.
    pub qp: QpRow,
    /// What it means and what recovers it.
    pub explanation: String,
}

/// One QP with the keys and value names of `rdma resource show qp -j`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QpRow {
    /// RDMA device index.
    pub ifindex: u32,
    /// RDMA device name.
    pub ifname: String,
    /// Port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u32>,
    /// Local QP number.
    pub lqpn: u32,
    /// Remote QP number (RC/UC).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub rqpn: Option<u32>,
    /// Type (`GSI`, `RC`, …).
    #[serde(rename = "type")]
    pub qp_type: String,
    /// State (`RTS`, `ERR`, …).
    pub state: String,
    /// Receive PSN.
    #[serde(rename = "rq-psn", skip_serializing_if = "Option::is_none")]
    pub rq_psn: Option<u32>,
    /// Send PSN.
    #[serde(rename = "sq-psn", skip_serializing_if = "Option::is_none")]
    pub sq_psn: Option<u32>,
    /// Path migration state (`MIGRATED`, …).
    #[serde(rename = "path-mig-state", skip_serializing_if = "Option::is_none")]
    pub path_mig_state: Option<String>,
    /// Protection domain number (user QPs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pdn: Option<u32>,
    /// Owning process (user QPs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Owning kernel module (kernel QPs: `ib_core`, `rdma_cm`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comm: Option<String>,
}

impl QpRow {
    /// The row of one QP entry.
    pub fn from_entry(q: &QpEntry) -> QpRow {
        QpRow {
            ifindex: q.dev_index,
            ifname: q.dev_name.clone(),
            port: q.port,
            lqpn: q.lqpn,
            rqpn: q.rqpn,
            qp_type: q.qp_type.name().to_string(),
            state: q.state.name().to_string(),
            rq_psn: q.rq_psn,
            sq_psn: q.sq_psn,
            path_mig_state: q.path_mig_state.map(|m| path_mig_state_name(m).to_string()),
            pdn: q.pdn,
            pid: q.pid,
            comm: q.kern_name.clone(),
        }
    }

    /// The line `rdma resource show qp` prints for it.
    pub fn render_text(&self) -> String {
        let mut s = format!("link {}/", self.ifname);
        match self.port {
            Some(p) => {
                let _ = write!(s, "{p}");
            }
            None => s.push('-'),
        }
        let _ = write!(s, " lqpn {}", self.lqpn);
        if let Some(v) = self.rqpn {
            let _ = write!(s, " rqpn {v}");
        }
        let _ = write!(s, " type {} state {}", self.qp_type, self.state);
        if let Some(v) = self.rq_psn {
            let _ = write!(s, " rq-psn {v}");
        }
        if let Some(v) = self.sq_psn {
            let _ = write!(s, " sq-psn {v}");
        }
        if let Some(v) = &self.path_mig_state {
            let _ = write!(s, " path-mig-state {v}");
        }
        if let Some(v) = self.pdn {
            let _ = write!(s, " pdn {v}");
        }
        if let Some(v) = self.pid {
            let _ = write!(s, " pid {v}");
        }
        if let Some(v) = &self.comm {
            // iproute2 brackets kernel owners.
            let _ = write!(s, " comm [{v}]");
        }
        s
    }
}

/// The whole `status` report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StatusReport {
    /// Netlink's part.
    pub netlink: NetlinkStatus,
    /// Sysfs's part.
    pub sysfs: SysfsStatus,
    /// Devices (netlink order, then sysfs-only ones).
    pub devices: Vec<DeviceStatus>,
    /// Stuck ports with their evidence.
    pub stuck_ports: Vec<StuckStatus>,
    /// The RDMA consumers of every port (CM id table and QP owners); absent without RDMA
    /// netlink.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consumers: Option<Vec<crate::core::consumers::PortConsumers>>,
    /// What the kernel offers the daemon: device events subscribed or polled, the CM id
    /// table, the driver folders found.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub capabilities: Option<KernelCaps>,
}

fn sysfs_port_names(p: Option<&sysfs::SysfsPort>) -> (Option<String>, Option<String>) {
    let code = |c: &Option<sysfs::Coded>| c.as_ref().and_then(|c| u8::try_from(c.code).ok());
    (
        p.and_then(|p| code(&p.state))
            .map(|c| IbPortState::from(c).name().to_string()),
        p.and_then(|p| code(&p.phys_state))
            .map(|c| PhysState::from(c).name().to_string()),
    )
}

fn parent_fields(s: Option<&SysfsDevice>) -> (Option<String>, Option<String>, Option<String>) {
    let Some(d) = s else {
        return (None, None, None);
    };
    let aux = match &d.parent {
        Parent::Pci { aux, .. } => aux.first().map(|a| a.name.clone()),
        Parent::Auxiliary(a) => Some(a.name.clone()),
        Parent::Virtual => None,
    };
    (
        d.parent.rdma_driver().map(str::to_string),
        d.parent.pci_bdf().map(str::to_string),
        aux,
    )
}

fn node_type_name(code: u8) -> String {
    // enum rdma_node_type: CA 1, SWITCH 2, ROUTER 3, RNIC 4, USNIC 5, USNIC_UDP 6, UNSPECIFIED 7.
    match code {
        1 => "CA",
        2 => "SWITCH",
        3 => "ROUTER",
        4 => "RNIC",
        5 => "USNIC",
        6 => "USNIC_UDP",
        7 => "UNSPECIFIED",
        _ => "UNKNOWN",
    }
    .to_string()
}

fn qp_counts(d: &Device, port: u32) -> Option<BTreeMap<String, usize>> {
    let qps = d.qps.as_ref()?;
    let mut m = BTreeMap::new();
    for q in qps.iter().filter(|q| d.qp_port(q) == Some(port)) {
        *m.entry(q.state.name().to_string()).or_insert(0) += 1;
    }
    Some(m)
}

/// What a stuck port means, for the operator.
pub fn stuck_explanation(s: &StuckPort) -> String {
    format!(
        "the GSI QP (QP 1) of {}/{} is in ERR: the MAD layer cannot send RDMA CM handshakes, \
         so no new RDMA (iSER) connection can be made on this port; only re-creating the \
         device recovers it (`iser-guard reset-device {}`)",
        s.device.name, s.port, s.device.name
    )
}

impl StatusReport {
    /// Builds the report from what was gathered.
    pub fn build(g: &Gathered) -> StatusReport {
        let mut devices = Vec::new();
        let mut stuck_ports = Vec::new();
        let t = g.topology.as_ref();
        for d in t.map(Topology::devices).unwrap_or_default() {
            let sys = g.sysfs.device(&d.info.name);
            let (driver, pci, aux_device) = parent_fields(sys);
            let links = d
                .ports
                .iter()
                .map(|p| {
                    let sp = sys.and_then(|s| s.ports.iter().find(|x| x.n == p.port));
                    LinkStatus {
                        ifindex: Some(d.info.index),
                        ifname: d.info.name.clone(),
                        port: p.port,
                        state: Some(p.state.name().to_string()),
                        physical_state: Some(p.phys_state.name().to_string()),
                        netdev: p.netdev.as_ref().and_then(|n| n.name.clone()),
                        netdev_index: p.netdev.as_ref().and_then(|n| n.index),
                        link_layer: sp.and_then(|s| s.link_layer.clone()),
                        qps: qp_counts(d, p.port),
                        stuck: t.is_some_and(|t| {
                            t.stuck_ports()
                                .any(|s| s.device.key == d.key && s.port == p.port)
                        }),
                    }
                })
                .collect();
            devices.push(DeviceStatus {
                ifindex: Some(d.info.index),
                ifname: d.info.name.clone(),
                node_type: d
                    .info
                    .node_type
                    .map(node_type_name)
                    .or_else(|| sys.and_then(|s| s.node_type.as_ref().map(|c| c.name.clone()))),
                fw: d
                    .info
                    .fw_version
                    .clone()
                    .or_else(|| sys.and_then(|s| s.fw_ver.clone())),
                driver,
                pci,
                aux_device,
                seen_by: if sys.is_some() {
                    "netlink+sysfs"
                } else {
                    "netlink"
                },
                qp_error: d.qp_error.clone(),
                links,
            });
        }
        for s in &g.sysfs.devices {
            if t.is_some_and(|t| t.device(&s.name).is_some()) {
                continue;
            }
            let (driver, pci, aux_device) = parent_fields(Some(s));
            devices.push(DeviceStatus {
                ifindex: None,
                ifname: s.name.clone(),
                node_type: s.node_type.as_ref().map(|c| c.name.clone()),
                fw: s.fw_ver.clone(),
                driver,
                pci,
                aux_device,
                seen_by: "sysfs",
                qp_error: None,
                links: s
                    .ports
                    .iter()
                    .map(|p| {
                        let (state, physical_state) = sysfs_port_names(Some(p));
                        LinkStatus {
                            ifindex: None,
                            ifname: s.name.clone(),
                            port: p.n,
                            state,
                            physical_state,
                            netdev: p.netdevs.first().cloned(),
                            netdev_index: None,
                            link_layer: p.link_layer.clone(),
                            qps: None,
                            stuck: false,
                        }
                    })
                    .collect(),
            });
        }
        for s in t
            .map(|t| t.stuck_ports().collect::<Vec<_>>())
            .unwrap_or_default()
        {
            stuck_ports.push(StuckStatus {
                ifindex: s.device.index,
                ifname: s.device.name.clone(),
                port: s.port,
                netdev: s.netdev.clone(),
                qp: QpRow::from_entry(&s.qp),
                explanation: stuck_explanation(s),
            });
        }
        StatusReport {
            netlink: NetlinkStatus {
                available: g.netlink_error.is_none(),
                error: g.netlink_error.as_ref().map(ToString::to_string),
                skipped: g.skips.reasons.clone(),
            },
            sysfs: SysfsStatus {
                root: g.sysfs_root.display().to_string(),
                class_present: g.sysfs.class_present,
                error: g.sysfs_error.clone(),
                skipped: g
                    .sysfs
                    .skipped
                    .iter()
                    .map(|s| format!("{}: {}", s.path.display(), s.reason))
                    .collect(),
            },
            devices,
            stuck_ports,
            consumers: g
                .topology
                .as_ref()
                .map(|t| crate::core::consumers::of_topology(t, &g.cm_ids)),
            capabilities: g.caps.clone(),
        }
    }

    /// The human-readable form, without colour.
    pub fn render_text(&self) -> String {
        self.render_styled(super::term::Style::plain())
    }

    /// The human-readable form; a stuck port in red when `style` colours (a terminal).
    pub fn render_styled(&self, style: super::term::Style) -> String {
        use super::term::Colour;
        let mut out = String::new();
        match &self.netlink.error {
            None => out.push_str("RDMA netlink: ok\n"),
            Some(e) => {
                let _ = writeln!(out, "RDMA netlink: unavailable: {e}");
            }
        }
        for s in &self.netlink.skipped {
            let _ = writeln!(out, "  skipped: {s}");
        }
        if let Some(caps) = &self.capabilities {
            let _ = writeln!(out, "{}", upper_first(&caps.summary()));
        }
        let sysfs_line = match (&self.sysfs.error, self.sysfs.class_present) {
            (Some(e), _) => format!("unreadable: {e}"),
            (None, false) => "no class/infiniband (ib_core not loaded)".to_string(),
            (None, true) => format!(
                "{} device(s)",
                self.devices
                    .iter()
                    .filter(|d| d.seen_by != "netlink")
                    .count()
            ),
        };
        let _ = writeln!(out, "sysfs ({}): {sysfs_line}", self.sysfs.root);
        for s in &self.sysfs.skipped {
            let _ = writeln!(out, "  skipped: {s}");
        }
        if self.devices.is_empty() {
            out.push_str("\nNo RDMA devices.\n");
        } else {
            let mut rows = vec![[
                "DEVICE", "INDEX", "DRIVER", "PCI", "PORT", "STATE", "PHYS", "NETDEV", "QPS",
            ]
            .map(String::from)];
            for d in &self.devices {
                let dash = || "-".to_string();
                if d.links.is_empty() {
                    let mut r = std::array::from_fn(|_| dash());
                    r[0].clone_from(&d.ifname);
                    rows.push(r);
                }
                for l in &d.links {
                    let qps = match &l.qps {
                        None => "?".to_string(),
                        Some(m) if m.is_empty() => "none".to_string(),
                        Some(m) => m
                            .iter()
                            .map(|(k, v)| format!("{k}:{v}"))
                            .collect::<Vec<_>>()
                            .join(" "),
                    };
                    rows.push([
                        d.ifname.clone(),
                        d.ifindex.map_or_else(dash, |i| i.to_string()),
                        d.driver.clone().unwrap_or_else(dash),
                        d.pci.clone().unwrap_or_else(dash),
                        l.port.to_string(),
                        l.state.clone().unwrap_or_else(dash),
                        l.physical_state.clone().unwrap_or_else(dash),
                        l.netdev.clone().unwrap_or_else(dash),
                        // The last column is not padded: colour cannot shift the others.
                        if l.stuck {
                            format!("{qps} {}", style.paint(Colour::Red, "STUCK"))
                        } else {
                            qps
                        },
                    ]);
                }
            }
            out.push('\n');
            out.push_str(&table(&rows));
        }
        for d in self.devices.iter().filter(|d| d.qp_error.is_some()) {
            let _ = writeln!(
                out,
                "\n{}: QP table not read: {}",
                d.ifname,
                d.qp_error.as_deref().unwrap_or_default()
            );
        }
        out.push_str(&super::consumers_view::render(self.consumers.as_deref()));
        for s in &self.stuck_ports {
            let _ = writeln!(
                out,
                "\n{} {}/{}{}: {}\n  evidence: {}",
                style.paint(Colour::Red, "STUCK PORT"),
                s.ifname,
                s.port,
                s.netdev
                    .as_ref()
                    .map(|n| format!(" (netdev {n})"))
                    .unwrap_or_default(),
                s.explanation,
                s.qp.render_text()
            );
        }
        out
    }

    /// The exit code (see the module docs); prints the netlink warning to stderr.
    pub fn exit(&self, netlink_error: Option<NetlinkError>) -> Result<ExitCode, Error> {
        if let Some(e) = netlink_error {
            if self.devices.is_empty() {
                return Err(e.into());
            }
            eprintln!(
                "iser-guard: warning: {e}; showing sysfs only (QP states, and so stuck ports, \
                 are unknown)"
            );
        }
        if self.stuck_ports.is_empty() {
            Ok(ExitCode::SUCCESS)
        } else {
            Ok(ExitCode::from(ExitStatus::Finding.code()))
        }
    }
}

/// Left-aligned columns separated by two spaces.
pub(crate) fn table<const N: usize>(rows: &[[String; N]]) -> String {
    let mut widths = [0usize; N];
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let mut out = String::new();
    for r in rows {
        let mut line = String::new();
        for (i, (w, c)) in widths.iter().zip(r).enumerate() {
            if i + 1 == N {
                line.push_str(c);
            } else {
                let _ = write!(line, "{c:<w$}  ");
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// `s` with its first letter in upper case (a summary that starts a line).
fn upper_first(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
