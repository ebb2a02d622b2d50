//! Reads the host into the core's [`Facts`] for `iser-guard doctor`: every path under the
//! configured roots (`paths.sysfs-root`, `paths.proc-root`, `paths.dev-root`,
//! `paths.modules-root`, `paths.iscsi-dir`, `paths.unit-file`, `paths.unit-dropins`), RDMA
//! netlink through the client it is given, iscsiadm, the resetter's plan and devlink through
//! their traits. Reads only; a file that cannot be read becomes the reason its check says
//! "unknown", never an error of the whole audit.
//!
//! Reuses the project's readers rather than reading anew: the sysfs scan
//! ([`crate::io::sysfs::scan`]) and the resetter's sysfs facts ([`crate::io::reset::Sysfs`]),
//! the resetter's plan ([`DeviceResetter::plan`], hence `core::reset_plan`), the nldev client,
//! iscsiadm's session listing and the core's session placement (`place_listing`).

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::config::Config;
use crate::core::doctor::parse::{
    parse_dev_number, parse_iscsi_settings, parse_modules_builtin, parse_modules_dep,
    parse_proc_devices, parse_proc_modules, parse_unit, UnitFile,
};
use crate::core::doctor::{
    CmIdFact, CmIdOwner, ConfigFacts, DaemonWitness, DevNode, DevlinkParamFact, FactPaths, Facts,
    Gsi, IscsiFacts, KernelFacts, ModuleFacts, ModuleInfo, NodeRecord, RdmaDevice, RdmaFacts,
    RdmaPort, RecreatePlan, SandboxFacts, SessionFact,
};
use crate::core::nldev::{cm_state_name, CmIdEntry, DeviceInfo, PortInfo, QpEntry};
use crate::core::reset_plan::{parse_devlink_param, soft_type};
use crate::core::session_map::{place_listing, HostFacts, NetdevAddr, Placer, RdmaPortNetdev};
use crate::io::iscsiadm::IscsiAdm;
use crate::io::netlink::{BlockingTransport, NetlinkError, NldevClient, Skips};
use crate::io::process::{is_executable, Invocation, Runner};
use crate::io::reset::{DeviceResetter, Sysfs};
use crate::io::route::RouteLookup;
use crate::io::sysfs::attr::{link_name, read_attr};
use crate::io::sysfs::{self as sysfs_scan, Parent, SysfsDevice};

/// Where doctor reads, from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sources {
    /// `paths.sysfs-root`.
    pub sysfs: PathBuf,
    /// `paths.proc-root`.
    pub proc: PathBuf,
    /// `paths.dev-root`.
    pub dev: PathBuf,
    /// `paths.modules-root`.
    pub modules: PathBuf,
    /// `paths.iscsi-dir`.
    pub iscsi: PathBuf,
    /// `paths.unit-file`.
    pub unit_file: PathBuf,
    /// `paths.unit-dropins`.
    pub unit_dropins: PathBuf,
    /// `paths.devlink`.
    pub devlink: PathBuf,
}

impl Sources {
    /// The paths of `cfg`.
    pub fn of(cfg: &Config) -> Sources {
        let p = &cfg.paths;
        Sources {
            sysfs: p.sysfs_root.clone(),
            proc: p.proc_root.clone(),
            dev: p.dev_root.clone(),
            modules: p.modules_root.clone(),
            iscsi: p.iscsi_dir.clone(),
            unit_file: p.unit_file.clone(),
            unit_dropins: p.unit_dropins.clone(),
            devlink: p.devlink.clone(),
        }
    }

    /// True when these are this kernel's own trees (route lookups and addresses then apply).
    pub fn is_live(&self) -> bool {
        self.sysfs == Path::new("/sys") && self.proc == Path::new("/proc")
    }
}

/// What doctor asks besides files: the kernel (netlink), iscsiadm, the resetter's plan, the
/// tools it runs (devlink), the host's addresses and routes, and the daemon's answer.
pub struct Witnesses<'a, T> {
    /// RDMA netlink, or why there is none.
    pub netlink: Result<NldevClient<T>, NetlinkError>,
    /// iscsiadm.
    pub iscsi: &'a dyn IscsiAdm,
    /// The resetter (its plan only).
    pub resetter: &'a dyn DeviceResetter,
    /// Runs `devlink dev param show` (read-only).
    pub runner: &'a dyn Runner,
    /// The host's interface addresses (session placement).
    pub addresses: Vec<NetdevAddr>,
    /// Route lookups (session placement).
    pub routes: &'a RouteLookup,
    /// The daemon's answer on its control socket.
    pub daemon: DaemonWitness,
}

/// The configuration's part of the facts: where it came from and why it could not be used.
#[derive(Debug, Clone, Default)]
pub struct ConfigOrigin {
    /// The file, or the built-in defaults.
    pub source: String,
    /// Why the file was refused (the audit then uses the built-in defaults).
    pub problems: Vec<String>,
    /// Why the file could not be read by this caller, when so.
    pub unread: Option<String>,
}

/// Reads everything.
pub fn gather<T: BlockingTransport>(
    cfg: &Config,
    origin: &ConfigOrigin,
    w: Witnesses<'_, T>,
) -> Facts {
    let src = Sources::of(cfg);
    let kernel = read_kernel(&src);
    let release = kernel.release.as_ref().ok().cloned();
    let modules_dir = match &release {
        Some(r) => src.modules.join(r),
        None => src.modules.clone(),
    };
    let mut facts = Facts {
        paths: FactPaths {
            sysfs: shown(&src.sysfs),
            proc: shown(&src.proc),
            dev: shown(&src.dev),
            modules: shown(&modules_dir),
            iscsi: shown(&src.iscsi),
        },
        kernel,
        config: config_facts(cfg, origin),
        daemon: w.daemon,
        ..Facts::default()
    };
    let netlink = read_netlink(w.netlink);
    facts.rdma = read_rdma(&src, &netlink, w.resetter, w.runner);
    let parents: Vec<&str> = facts
        .rdma
        .devices
        .iter()
        .filter_map(|d| d.pci.as_deref())
        .collect();
    facts.bonded = crate::io::sysfs::stack::read_bonded(&src.sysfs, &parents);
    facts.modules = read_modules(&src, &modules_dir, &facts.rdma.devices);
    facts.sandbox = read_sandbox(&src);
    let ports: Vec<RdmaPortNetdev> = facts
        .rdma
        .devices
        .iter()
        .flat_map(|d| {
            d.ports.iter().flat_map(move |p| {
                p.netdevs.iter().map(move |n| RdmaPortNetdev {
                    device: d.name.clone(),
                    port: p.port,
                    netdev: n.clone(),
                })
            })
        })
        .collect();
    facts.iscsi = read_iscsi(
        &src,
        w.iscsi,
        &netlink.cm_ids,
        &ports,
        &w.addresses,
        w.routes,
    );
    facts
}

fn shown(p: &Path) -> String {
    p.display().to_string()
}

/// A file's text; `Err` names the file.
fn read_text(path: &Path) -> Result<String, io::Error> {
    fs::read_to_string(path)
}

fn why(path: &Path, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::NotFound => format!("{} does not exist", path.display()),
        io::ErrorKind::PermissionDenied => {
            format!("{}: permission denied (run doctor as root)", path.display())
        }
        _ => format!("{}: {e}", path.display()),
    }
}

fn read_kernel(src: &Sources) -> KernelFacts {
    let p = src.proc.join("sys/kernel/osrelease");
    KernelFacts {
        release: read_text(&p)
            .map(|s| s.trim().to_string())
            .map_err(|e| why(&p, &e)),
        version: read_text(&src.proc.join("version"))
            .ok()
            .map(|s| s.trim().to_string()),
        tainted: read_text(&src.proc.join("sys/kernel/tainted"))
            .ok()
            .and_then(|s| s.trim().parse().ok()),
    }
}

fn config_facts(cfg: &Config, origin: &ConfigOrigin) -> ConfigFacts {
    let r = &cfg.recovery;
    ConfigFacts {
        source: origin.source.clone(),
        problems: origin.problems.clone(),
        unread: origin.unread.clone(),
        allow: cfg.devices.allow.clone(),
        dry_run: r.dry_run,
        iscsid_grace_s: r.iscsid_grace.as_secs_f64(),
        target_back_s: cfg.poll.probe.as_secs_f64() * f64::from(r.probe_successes.max(1)),
        probe_method: serde_json::to_value(r.probe_method)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_else(|| format!("{:?}", r.probe_method).to_lowercase()),
        probe_port: r.probe_port,
        allow_module_reload: r.allow_module_reload,
        selftest: r.selftest == crate::config::SelfTestPolicy::Auto,
    }
}

/// What RDMA netlink said, device by device.
struct Netlink {
    available: Result<(), String>,
    devices: Vec<NetlinkDevice>,
    cm_ids: Vec<CmIdEntry>,
}

struct NetlinkDevice {
    info: DeviceInfo,
    ports: Vec<PortInfo>,
    qps: Result<Vec<QpEntry>, String>,
    cm_ids: Result<Vec<CmIdEntry>, String>,
}

impl Netlink {
    fn unavailable(e: &NetlinkError) -> Netlink {
        Netlink {
            available: Err(e.to_string()),
            devices: Vec::new(),
            cm_ids: Vec::new(),
        }
    }
}

fn read_netlink<T: BlockingTransport>(client: Result<NldevClient<T>, NetlinkError>) -> Netlink {
    let mut client = match client {
        Ok(c) => c,
        Err(e) => return Netlink::unavailable(&e),
    };
    let mut skips = Skips::default();
    let infos = match client.devices(&mut skips) {
        Ok(d) => d,
        Err(e) => return Netlink::unavailable(&e),
    };
    let mut out = Netlink {
        available: Ok(()),
        devices: Vec::new(),
        cm_ids: Vec::new(),
    };
    for info in infos {
        // A device that vanishes between the dumps is left out.
        let Ok(ports) = client.ports(info.index, &mut skips) else {
            continue;
        };
        let qps = client
            .qps(info.index, &mut skips)
            .map_err(|e| format!("the QP table of {} could not be dumped: {e}", info.name));
        let cm_ids = client
            .cm_ids(info.index, &mut skips)
            .map_err(|e| format!("the CM id table of {} could not be dumped: {e}", info.name));
        if let Ok(ids) = &cm_ids {
            out.cm_ids.extend(ids.iter().cloned());
        }
        out.devices.push(NetlinkDevice {
            info,
            ports,
            qps,
            cm_ids,
        });
    }
    out
}

fn read_rdma(
    src: &Sources,
    nl: &Netlink,
    resetter: &dyn DeviceResetter,
    runner: &dyn Runner,
) -> RdmaFacts {
    let (scan, sysfs_error) = match sysfs_scan::scan(&src.sysfs) {
        Ok(s) => (s, None),
        Err(e) => (sysfs_scan::SysfsScan::default(), Some(e.to_string())),
    };
    let reset_sysfs = Sysfs::new(src.sysfs.clone());
    let mut names: Vec<String> = scan.devices.iter().map(|d| d.name.clone()).collect();
    for d in &nl.devices {
        if !names.contains(&d.info.name) {
            names.push(d.info.name.clone());
        }
    }
    let devices = names
        .iter()
        .map(|name| {
            let sys = scan.device(name);
            let net = nl.devices.iter().find(|d| &d.info.name == name);
            device(src, name, sys, net, nl, &reset_sysfs, resetter, runner)
        })
        .collect();
    RdmaFacts {
        class_present: scan.class_present,
        sysfs_error,
        netlink: nl.available.clone(),
        devices,
    }
}

#[allow(clippy::too_many_arguments)]
fn device(
    src: &Sources,
    name: &str,
    sys: Option<&SysfsDevice>,
    net: Option<&NetlinkDevice>,
    nl: &Netlink,
    reset_sysfs: &Sysfs,
    resetter: &dyn DeviceResetter,
    runner: &dyn Runner,
) -> RdmaDevice {
    let mut d = RdmaDevice::named(name);
    d.in_sysfs = sys.is_some();
    d.in_netlink = net.is_some();
    d.node_type = sys
        .and_then(|s| s.node_type.as_ref())
        .and_then(|c| u8::try_from(c.code).ok())
        .or_else(|| net.and_then(|n| n.info.node_type));
    d.fw = sys
        .and_then(|s| s.fw_ver.clone())
        .or_else(|| net.and_then(|n| n.info.fw_version.clone()))
        .filter(|f| !f.is_empty());
    let facts = reset_sysfs.facts(name).ok().flatten();
    if let Some(s) = sys {
        match &s.parent {
            Parent::Pci { bdf, driver, .. } => {
                d.pci = Some(bdf.clone());
                d.pci_driver = driver.clone();
            }
            Parent::Auxiliary(a) => d.pci = a.pci_bdf.clone(),
            Parent::Virtual => {}
        }
    }
    if let Some(f) = &facts {
        d.aux = f.aux.clone();
        if d.pci_driver.is_none() {
            d.pci_driver = f
                .parent
                .as_ref()
                .filter(|p| p.bus == "pci")
                .and_then(|p| p.driver.clone());
        }
        d.soft = soft_type(f).map(|k| k.name().to_string());
    }
    // The modules that serve it: the RDMA driver, then the NIC driver.
    if let Some(kind) = d.soft.as_deref() {
        d.modules
            .push(if kind == "rxe" { "rdma_rxe" } else { "siw" }.into());
    }
    if let Some(a) = &d.aux {
        if let Some(m) = a.module.clone().or_else(|| {
            a.driver_dir
                .as_deref()
                .map(|dir| crate::core::reset_plan::module_of_driver_dir(dir).to_string())
        }) {
            d.modules.push(m);
        }
    }
    if let Some(drv) = &d.pci_driver {
        let m = link_name(&src.sysfs.join("bus/pci/drivers").join(drv).join("module"))
            .unwrap_or_else(|| drv.replace('-', "_"));
        if !d.modules.contains(&m) {
            d.modules.push(m);
        }
    }
    // Ports: sysfs for link layer and netdevs, netlink's names for the states when present.
    let mut ports: Vec<RdmaPort> = Vec::new();
    if let Some(s) = sys {
        for p in &s.ports {
            let mut port = RdmaPort::numbered(p.n);
            port.state = p.state.as_ref().map(|c| c.name.to_uppercase());
            port.phys_state = p.phys_state.as_ref().map(|c| c.name.clone());
            port.link_layer = p.link_layer.clone();
            port.netdevs = p.netdevs.clone();
            ports.push(port);
        }
    }
    if let Some(n) = net {
        for p in &n.ports {
            let i = match ports.iter().position(|x| x.port == p.port) {
                Some(i) => i,
                None => {
                    ports.push(RdmaPort::numbered(p.port));
                    ports.len() - 1
                }
            };
            let port = &mut ports[i];
            port.state = Some(p.state.name().to_string());
            port.phys_state = Some(p.phys_state.name().to_string());
            if let Some(nd) = &p.netdev_name {
                if !port.netdevs.contains(nd) {
                    port.netdevs.push(nd.clone());
                }
            }
        }
    }
    ports.sort_by_key(|p| p.port);
    let first_port = ports.first().map(|p| p.port);
    for port in &mut ports {
        port.gsi = match (&nl.available, net.map(|n| &n.qps)) {
            (Err(_), _) | (Ok(()), None) => Gsi::Unknown,
            (Ok(()), Some(Err(e))) => {
                d.qp_error = Some(e.clone());
                Gsi::Unknown
            }
            (Ok(()), Some(Ok(qps))) => qps
                .iter()
                .find(|q| q.is_gsi() && q.port == Some(port.port))
                .map(|q| Gsi::State {
                    state: q.state.name().to_string(),
                    evidence: format!(
                        "QP table: {}/{} lqpn 1 type GSI state {}{}",
                        q.dev_name,
                        port.port,
                        q.state.name(),
                        q.kern_name
                            .as_deref()
                            .map(|k| format!(" owner {k}"))
                            .unwrap_or_default()
                    ),
                })
                .unwrap_or(Gsi::Absent),
        };
        port.cm_ids = match (&nl.available, net.map(|n| &n.cm_ids)) {
            (Err(e), _) => Err(format!("RDMA netlink: {e}")),
            (Ok(()), None) => Err(format!("RDMA netlink does not list {name}")),
            (Ok(()), Some(Err(e))) => Err(e.clone()),
            (Ok(()), Some(Ok(ids))) => Ok(ids
                .iter()
                // CM ids bound to the device but to no port yet are shown on its first port.
                .filter(|c| c.port.or(first_port) == Some(port.port))
                .map(|c| cm_id(src, c))
                .collect()),
        };
    }
    d.ports = ports;
    d.recreate = resetter
        .plan(name)
        .map(|p| RecreatePlan {
            methods: p.methods.into_iter().map(|m| (m.method, m.steps)).collect(),
            skipped: p.skipped,
        })
        .map_err(|e| e.to_string());
    d.devlink = devlink_param(src, &d, runner);
    d
}

fn cm_id(src: &Sources, c: &CmIdEntry) -> CmIdFact {
    let consumer = match (&c.kern_name, c.pid) {
        (Some(k), _) if !k.is_empty() => CmIdOwner::Kernel { module: k.clone() },
        (_, Some(pid)) => CmIdOwner::Process {
            pid,
            comm: read_attr(&src.proc.join(pid.to_string()).join("comm"))
                .ok()
                .flatten(),
        },
        _ => CmIdOwner::Unknown,
    };
    CmIdFact {
        consumer,
        state: cm_state_name(c.state).to_string(),
        src: c.src().map(|a| a.to_string()),
        dst: c.dst().map(|a| a.to_string()),
    }
}

/// The ice function's RDMA parameter, read with `devlink dev param show … -j`.
fn devlink_param(src: &Sources, d: &RdmaDevice, runner: &dyn Runner) -> Option<DevlinkParamFact> {
    let aux = d.aux.as_ref()?;
    let pci = d.pci.as_ref()?;
    if d.pci_driver.as_deref() != Some("ice")
        || !(aux.name.starts_with("ice.roce.") || aux.name.starts_with("ice.iwarp."))
    {
        return None;
    }
    let name = if aux.name.contains(".iwarp.") {
        "enable_iwarp"
    } else {
        "enable_roce"
    };
    let handle = format!("pci/{pci}");
    let value = if is_executable(&src.devlink) {
        let inv = Invocation::new(
            src.devlink.clone(),
            ["dev", "param", "show", handle.as_str(), "name", name, "-j"],
            Duration::from_secs(10),
        );
        match runner.run(&inv) {
            Ok(out) if out.success() => parse_devlink_param(&out.stdout, name),
            Ok(out) => Err(format!("`{}` failed: {}", inv.display(), out.last_words())),
            Err(e) => Err(e.to_string()),
        }
    } else {
        Err(format!(
            "{} is not installed (iproute2)",
            src.devlink.display()
        ))
    };
    Some(DevlinkParamFact {
        handle,
        name: name.into(),
        value,
    })
}

/// The modules iser-guard cares about besides the devices' own.
const WATCHED: &[&str] = &["ib_core", "rdma_cm", "ib_iser", "ib_uverbs", "rdma_ucm"];

fn read_modules(src: &Sources, modules_dir: &Path, devices: &[RdmaDevice]) -> ModuleFacts {
    let proc_modules = src.proc.join("modules");
    let loaded = read_text(&proc_modules)
        .map(|t| parse_proc_modules(&t).0)
        .map_err(|e| why(&proc_modules, &e));
    let builtin_path = modules_dir.join("modules.builtin");
    let builtin = read_text(&builtin_path)
        .map(|t| parse_modules_builtin(&t))
        .map_err(|e| why(&builtin_path, &e));
    let dep: BTreeMap<String, String> = read_text(&modules_dir.join("modules.dep"))
        .map(|t| parse_modules_dep(&t))
        .unwrap_or_default();
    let mut names: Vec<String> = Vec::new();
    for m in devices
        .iter()
        .flat_map(|d| d.modules.iter().cloned())
        .chain(WATCHED.iter().map(|s| s.to_string()))
    {
        if !names.contains(&m) {
            names.push(m);
        }
    }
    let info = names
        .into_iter()
        .map(|name| {
            let dir = src.sysfs.join("module").join(&name);
            let attr = |f: &str| read_attr(&dir.join(f)).ok().flatten();
            ModuleInfo {
                in_sysfs: dir.is_dir(),
                version: attr("version"),
                srcversion: attr("srcversion"),
                taint: attr("taint"),
                path: dep.get(&name).cloned(),
                builtin: builtin.as_ref().is_ok_and(|b| b.iter().any(|x| x == &name)),
                name,
            }
        })
        .collect();
    ModuleFacts {
        loaded,
        builtin,
        info,
    }
}

fn read_sandbox(src: &Sources) -> SandboxFacts {
    let unit_path = src.unit_file.clone();
    let mut drop_ins = Vec::new();
    let unit = match read_text(&unit_path) {
        Ok(t) => {
            let mut unit: UnitFile = parse_unit(&t);
            if let Ok(rd) = fs::read_dir(&src.unit_dropins) {
                let mut confs: Vec<PathBuf> = rd
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|e| e == "conf"))
                    .collect();
                confs.sort();
                for c in confs {
                    if let Ok(t) = read_text(&c) {
                        unit = unit.with(parse_unit(&t));
                        drop_ins.push(shown(&c));
                    }
                }
            }
            Ok(Some(unit))
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(why(&unit_path, &e)),
    };
    let devices_path = src.proc.join("devices");
    SandboxFacts {
        unit_path: shown(&unit_path),
        unit,
        drop_ins,
        proc_devices: read_text(&devices_path)
            .map(|t| parse_proc_devices(&t))
            .map_err(|e| why(&devices_path, &e)),
        verbs_nodes: verbs_nodes(src),
    }
}

/// The nodes under `<dev>/infiniband`, with their device numbers: from the node itself when
/// it is a character device, else from the sysfs class device udev made it from.
fn verbs_nodes(src: &Sources) -> Result<Vec<DevNode>, String> {
    let dir = src.dev.join("infiniband");
    let rd = match fs::read_dir(&dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(why(&dir, &e)),
    };
    let mut names: Vec<String> = rd
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    Ok(names
        .into_iter()
        .map(|name| {
            let number = char_number(&dir.join(&name)).or_else(|| {
                let class = if name == "rdma_cm" {
                    "misc"
                } else if name.starts_with("uverbs") {
                    "infiniband_verbs"
                } else {
                    "infiniband_mad"
                };
                read_attr(&src.sysfs.join("class").join(class).join(&name).join("dev"))
                    .ok()
                    .flatten()
                    .and_then(|t| parse_dev_number(&t))
            });
            DevNode {
                path: format!("/dev/infiniband/{name}"),
                name,
                number,
            }
        })
        .collect())
}

fn char_number(path: &Path) -> Option<(u32, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    let m = fs::metadata(path).ok()?;
    if !m.file_type().is_char_device() {
        return None;
    }
    let rdev = m.rdev();
    // Linux's majors have 12 bits and minors 20: both always fit.
    Some((
        u32::try_from(nix::sys::stat::major(rdev)).ok()?,
        u32::try_from(nix::sys::stat::minor(rdev)).ok()?,
    ))
}

fn read_iscsi(
    src: &Sources,
    iscsi: &dyn IscsiAdm,
    cm_ids: &[CmIdEntry],
    ports: &[RdmaPortNetdev],
    addresses: &[NetdevAddr],
    routes: &RouteLookup,
) -> IscsiFacts {
    let conf = src.iscsi.join("iscsid.conf");
    let iscsid_conf = match read_text(&conf) {
        Ok(t) => Ok(Some(parse_iscsi_settings(&t))),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(why(&conf, &e)),
    };
    IscsiFacts {
        iscsid_conf,
        nodes: node_records(&src.iscsi.join("nodes")),
        sessions: sessions(iscsi, cm_ids, ports, addresses, routes),
    }
}

/// `nodes/IQN/ADDRESS,PORT,TPGT/IFACE` (open-iscsi 2.x), or `…/ADDRESS,PORT,TPGT` as a file
/// of the default iface (older layouts).
fn node_records(dir: &Path) -> Result<Vec<NodeRecord>, String> {
    let targets = match fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(why(dir, &e)),
    };
    let mut out = Vec::new();
    let sorted = |rd: fs::ReadDir| -> Vec<fs::DirEntry> {
        let mut v: Vec<fs::DirEntry> = rd.flatten().collect();
        v.sort_by_key(fs::DirEntry::file_name);
        v
    };
    for t in sorted(targets) {
        let target = t.file_name().to_string_lossy().into_owned();
        let Ok(portals) = fs::read_dir(t.path()) else {
            continue;
        };
        for p in sorted(portals) {
            let name = p.file_name().to_string_lossy().into_owned();
            let Some((addr_port, _tpgt)) = name.rsplit_once(',') else {
                continue;
            };
            let portal = match addr_port.rsplit_once(',') {
                Some((addr, port)) if addr.contains(':') => format!("[{addr}]:{port}"),
                Some((addr, port)) => format!("{addr}:{port}"),
                None => continue,
            };
            let path = p.path();
            let files: Vec<(String, PathBuf)> = if path.is_dir() {
                match fs::read_dir(&path) {
                    Ok(rd) => sorted(rd)
                        .into_iter()
                        .map(|f| (f.file_name().to_string_lossy().into_owned(), f.path()))
                        .collect(),
                    Err(e) => {
                        out.push(NodeRecord {
                            target: target.clone(),
                            portal: portal.clone(),
                            iface: "?".into(),
                            settings: Err(why(&path, &e)),
                        });
                        continue;
                    }
                }
            } else {
                vec![("default".into(), path.clone())]
            };
            for (iface, f) in files {
                out.push(NodeRecord {
                    target: target.clone(),
                    portal: portal.clone(),
                    iface,
                    settings: read_text(&f)
                        .map(|t| parse_iscsi_settings(&t))
                        .map_err(|e| why(&f, &e)),
                });
            }
        }
    }
    Ok(out)
}

fn sessions(
    iscsi: &dyn IscsiAdm,
    cm_ids: &[CmIdEntry],
    ports: &[RdmaPortNetdev],
    addresses: &[NetdevAddr],
    routes: &RouteLookup,
) -> Result<Vec<SessionFact>, String> {
    let parsed = iscsi.session_details().map_err(|e| e.to_string())?;
    let mut route_map = BTreeMap::new();
    for ip in crate::core::session_map::portal_addresses(&parsed.items) {
        if let Ok(netdev) = routes(ip) {
            route_map.insert(ip, netdev);
        }
    }
    let host = HostFacts {
        cm_ids,
        routes: &route_map,
        addrs: addresses,
        ports,
    };
    let mapped = place_listing(&parsed.items, &host, &mut Placer::new());
    Ok(parsed
        .items
        .iter()
        .map(|d| {
            let placed = mapped.sessions.iter().find(|s| s.sid == d.sid);
            let portal = d
                .persistent_portal
                .as_ref()
                .or(d.current_portal.as_ref())
                .map(|p| {
                    if p.address.contains(':') {
                        format!("[{}]:{}", p.address, p.port)
                    } else {
                        format!("{}:{}", p.address, p.port)
                    }
                })
                .unwrap_or_default();
            SessionFact {
                sid: d.sid,
                target: d.target.clone(),
                portal,
                iface: d.iface.name.clone().unwrap_or_else(|| "default".into()),
                transport: d.transport().name().to_string(),
                state: session_state(d),
                port: placed
                    .and_then(|s| s.rdma.as_ref())
                    .map(|p| (p.device.clone(), p.port)),
                placed_by: placed
                    .and_then(|s| s.placed_by.as_ref())
                    .map(|e| e.describe()),
                disks: d.devices.iter().filter_map(|s| s.disk.clone()).collect(),
            }
        })
        .collect())
}

fn session_state(d: &crate::core::iscsi::SessionDetail) -> String {
    use crate::core::iscsi::ListedSessionState as S;
    match &d.session_state {
        Some(S::LoggedIn) => "LOGGED_IN".into(),
        Some(S::Failed) => "FAILED".into(),
        Some(S::Free) => "FREE".into(),
        Some(S::Unknown) | None => "unknown".into(),
        Some(S::Other(s)) => s.clone(),
    }
}
