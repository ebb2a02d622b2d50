//! Which way to re-create one RDMA device, least disruptive first. Pure: sysfs facts in,
//! an ordered list of methods out (reference/kernel-facts.md §2).
//!
//! Re-creating the ib_device is the only thing that gives a port a fresh GSI QP (QP 1): the MAD
//! layer walks a new QP 1 RESET→INIT→RTR→RTS only when the device's clients are added again.
//! The methods, in the order tried:
//!
//! 1. [`ResetMethod::DevlinkToggle`] — ice (E810): the `enable_roce` (or `enable_iwarp`) runtime
//!    devlink parameter of that PCI function, off then on. Unplugs and re-plugs only that PF's
//!    RDMA auxiliary device; the netdev is untouched.
//! 2. [`ResetMethod::AuxRebind`] — any driver whose RDMA function is an auxiliary device
//!    (irdma: `ice.roce.N`/`ice.iwarp.N`/`i40e.iwarp.N`; mlx5: `mlx5_core.rdma.N`): unbind and
//!    bind it in its driver folder, whose name is read from sysfs (`irdma` up to 6.17,
//!    `irdma.gen_2` from 6.18, `irdma.gen_1` for X722, `mlx5_ib.rdma`), never assumed.
//! 3. [`ResetMethod::RdmaLinkReadd`] — software devices (rxe, siw): `rdma link delete` and `add`
//!    on the same netdev (only they allow user-driven unregistration, `IBK_ALLOW_USER_UNREG`).
//! 4. [`ResetMethod::ModuleReload`] — only when `recovery.allow-module-reload` is set: it
//!    re-creates *every* device of that driver on the host.
//!
//! The re-created device may come back under a new ib index and name before udev renames it,
//! so it is followed by a [`DeviceIdentity`] (parent PCI function, netdev), not by name.

use serde::{Deserialize, Serialize};

/// The sysfs parent of an ib_device (`/sys/class/infiniband/<dev>/device`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentFacts {
    /// Bus of the parent (`pci`, `auxiliary`, …), from its `subsystem` link.
    pub bus: String,
    /// Device name on that bus, e.g. `0000:02:00.0`.
    pub name: String,
    /// Bound driver, from its `driver` link, e.g. `ice`, `mlx5_core`.
    pub driver: Option<String>,
}

/// The RDMA auxiliary device that spawned the ib_device (`ice.roce.0`, `mlx5_core.rdma.0`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuxFacts {
    /// Name on the auxiliary bus.
    pub name: String,
    /// Folder under `bus/auxiliary/drivers/` it is bound to (`irdma`, `irdma.gen_2`, …).
    pub driver_dir: Option<String>,
    /// Kernel module of that driver (`irdma`, `mlx5_ib`), from the driver's `module` link.
    pub module: Option<String>,
}

/// Everything the planner needs to know about one ib_device, read from sysfs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceFacts {
    /// The ib_device name (`rocep2s0f0`, `rxe0`).
    pub name: String,
    /// The PCI function (or other bus device) behind it; `None` for a virtual device.
    pub parent: Option<ParentFacts>,
    /// The RDMA auxiliary device, when the driver uses the auxiliary bus.
    pub aux: Option<AuxFacts>,
    /// `node_type` (1 = CA, 4 = RNIC/iWARP).
    pub node_type: Option<u8>,
    /// `node_desc`.
    pub node_desc: Option<String>,
    /// Netdevs of its ports (from `ports/*/gid_attrs/ndevs/*`, or rxe's `parent` attribute).
    pub netdevs: Vec<String>,
    /// rxe's own `parent` attribute (the netdev it was added on), when present.
    pub soft_netdev: Option<String>,
}

/// Which devlink parameter controls the PF's RDMA.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum DevlinkParam {
    /// `enable_roce`
    EnableRoce,
    /// `enable_iwarp`
    EnableIwarp,
}

impl DevlinkParam {
    /// The parameter's name.
    pub fn name(self) -> &'static str {
        match self {
            DevlinkParam::EnableRoce => "enable_roce",
            DevlinkParam::EnableIwarp => "enable_iwarp",
        }
    }
}

/// A software RDMA link type for `rdma link add NAME type T netdev N`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SoftType {
    /// Soft-RoCE (`rdma_rxe`).
    Rxe,
    /// Soft-iWARP (`siw`).
    Siw,
}

impl SoftType {
    /// The `type` word of `rdma link add`.
    pub fn name(self) -> &'static str {
        match self {
            SoftType::Rxe => "rxe",
            SoftType::Siw => "siw",
        }
    }
}

/// One way to re-create the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "method", rename_all = "kebab-case")]
pub enum ResetMethod {
    /// `devlink dev param set pci/BDF name P value false|true cmode runtime`.
    DevlinkToggle {
        /// devlink handle, `pci/0000:02:00.0`.
        handle: String,
        /// The parameter toggled.
        param: DevlinkParam,
    },
    /// Write the aux device name to `bus/auxiliary/drivers/<driver>/unbind`, then `bind`.
    AuxRebind {
        /// Aux device, `ice.roce.0`.
        device: String,
        /// Driver folder, `irdma.gen_2`.
        driver: String,
    },
    /// `rdma link delete NAME`, then `rdma link add NAME type T netdev N`.
    RdmaLinkReadd {
        /// The ib_device (link) name.
        name: String,
        /// rxe or siw.
        kind: SoftType,
        /// The netdev it sits on.
        netdev: String,
    },
    /// `modprobe -r MODULE`, then `modprobe MODULE`.
    ModuleReload {
        /// The module.
        module: String,
        /// Other ib_devices of the same module, re-created too.
        also_affects: Vec<String>,
    },
}

impl ResetMethod {
    /// A short name for logs and outcomes.
    pub fn kind(&self) -> &'static str {
        match self {
            ResetMethod::DevlinkToggle { .. } => "devlink-toggle",
            ResetMethod::AuxRebind { .. } => "aux-rebind",
            ResetMethod::RdmaLinkReadd { .. } => "rdma-link-readd",
            ResetMethod::ModuleReload { .. } => "module-reload",
        }
    }
}

impl ResetMethod {
    /// The step that takes the device down, as an operator would type it.
    pub fn down_command(&self) -> String {
        match self {
            ResetMethod::DevlinkToggle { handle, param } => format!(
                "devlink dev param set {handle} name {} value false cmode runtime",
                param.name()
            ),
            ResetMethod::AuxRebind { device, driver } => {
                format!("echo {device} > /sys/bus/auxiliary/drivers/{driver}/unbind")
            }
            ResetMethod::RdmaLinkReadd { name, .. } => format!("rdma link delete {name}"),
            ResetMethod::ModuleReload { module, .. } => format!("modprobe -r {module}"),
        }
    }

    /// The step that brings the device (back) up, as an operator would type it: all that
    /// runs for a device that is already gone.
    pub fn up_command(&self) -> String {
        match self {
            ResetMethod::DevlinkToggle { handle, param } => format!(
                "devlink dev param set {handle} name {} value true cmode runtime",
                param.name()
            ),
            ResetMethod::AuxRebind { device, driver } => {
                format!("echo {device} > /sys/bus/auxiliary/drivers/{driver}/bind")
            }
            ResetMethod::RdmaLinkReadd { name, kind, netdev } => {
                format!("rdma link add {name} type {} netdev {netdev}", kind.name())
            }
            ResetMethod::ModuleReload { module, .. } => format!("modprobe {module}"),
        }
    }
}

impl std::fmt::Display for ResetMethod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ResetMethod::DevlinkToggle { handle, param } => {
                write!(f, "toggle devlink parameter {} of {handle}", param.name())
            }
            ResetMethod::AuxRebind { device, driver } => {
                write!(f, "unbind/bind auxiliary device {device} (driver {driver})")
            }
            ResetMethod::RdmaLinkReadd { name, kind, netdev } => write!(
                f,
                "delete and re-add {} link {name} on {netdev}",
                kind.name()
            ),
            ResetMethod::ModuleReload {
                module,
                also_affects,
            } => {
                write!(f, "reload module {module}")?;
                if !also_affects.is_empty() {
                    write!(f, " (also re-creates {})", also_affects.join(", "))?;
                }
                Ok(())
            }
        }
    }
}

/// What the host offers the planner besides the device's facts.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PlanOptions {
    /// `recovery.allow-module-reload`.
    pub allow_module_reload: bool,
    /// The devlink binary is installed.
    pub devlink_available: bool,
    /// The rdma binary is installed.
    pub rdma_available: bool,
    /// Other ib_devices served by the same module as this one (for the module-reload warning).
    pub same_module_devices: Vec<String>,
}

/// The ordered methods for one device and why others were left out.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// Methods to try, least disruptive first.
    pub methods: Vec<ResetMethod>,
    /// Methods considered and left out, with the reason (shown in dry-run and errors).
    pub skipped: Vec<String>,
}

/// Aux device names that carry RDMA: `<drv>.roce.N`, `<drv>.iwarp.N`, `<drv>.rdma.N`.
pub fn is_rdma_aux_name(name: &str) -> bool {
    let mut parts = name.rsplitn(3, '.');
    let idx = parts.next().unwrap_or("");
    let kind = parts.next().unwrap_or("");
    let modname = parts.next().unwrap_or("");
    !modname.is_empty()
        && !idx.is_empty()
        && idx.bytes().all(|b| b.is_ascii_digit())
        && matches!(kind, "roce" | "iwarp" | "rdma")
}

/// The module behind a driver folder when sysfs has no `module` link: `irdma.gen_2` → `irdma`.
pub fn module_of_driver_dir(dir: &str) -> &str {
    dir.split('.').next().unwrap_or(dir)
}

/// Orders the methods for `facts` (see the module doc). An empty list is returned as is; the
/// caller reports it with the `skipped` reasons.
pub fn plan(facts: &DeviceFacts, opts: &PlanOptions) -> Plan {
    let mut methods = Vec::new();
    let mut skipped = Vec::new();

    if let Some(kind) = soft_type(facts) {
        let netdev = facts
            .soft_netdev
            .clone()
            .or_else(|| facts.netdevs.first().cloned());
        match (netdev, opts.rdma_available) {
            (Some(netdev), true) => methods.push(ResetMethod::RdmaLinkReadd {
                name: facts.name.clone(),
                kind,
                netdev,
            }),
            (None, _) => skipped.push(format!(
                "rdma link re-add: {} has no netdev in sysfs to re-add it on",
                facts.name
            )),
            (_, false) => skipped.push("rdma link re-add: the rdma tool is not installed".into()),
        }
        // Reloading rdma_rxe/siw would delete every link and re-create none.
        skipped.push(format!(
            "module reload: not used for software {} devices (links would not come back)",
            kind.name()
        ));
        return Plan { methods, skipped };
    }

    let pci = facts.parent.as_ref().filter(|p| p.bus == "pci");
    if let (Some(pci), Some(aux)) = (pci, facts.aux.as_ref()) {
        let param = if aux.name.contains(".iwarp.") {
            DevlinkParam::EnableIwarp
        } else {
            DevlinkParam::EnableRoce
        };
        let is_ice = pci.driver.as_deref() == Some("ice")
            && (aux.name.starts_with("ice.roce.") || aux.name.starts_with("ice.iwarp."));
        if is_ice && opts.devlink_available {
            methods.push(ResetMethod::DevlinkToggle {
                handle: format!("pci/{}", pci.name),
                param,
            });
        } else if is_ice {
            skipped.push(format!(
                "devlink {}: the devlink tool is not installed",
                param.name()
            ));
        }
    }
    match facts.aux.as_ref() {
        Some(AuxFacts {
            name,
            driver_dir: Some(driver),
            ..
        }) => methods.push(ResetMethod::AuxRebind {
            device: name.clone(),
            driver: driver.clone(),
        }),
        Some(AuxFacts { name, .. }) => skipped.push(format!(
            "aux unbind/bind: {name} is bound to no driver folder found under bus/auxiliary/drivers"
        )),
        None => skipped.push(format!(
            "aux unbind/bind: no RDMA auxiliary device under {}",
            facts
                .parent
                .as_ref()
                .map(|p| format!("{} {}", p.bus, p.name))
                .unwrap_or_else(|| "the device".into())
        )),
    }
    let module = facts.aux.as_ref().and_then(|a| {
        a.module.clone().or_else(|| {
            a.driver_dir
                .as_deref()
                .map(|d| module_of_driver_dir(d).to_string())
        })
    });
    // Without an auxiliary device the module is unknown: the PCI function's driver (ice,
    // mlx5_core) is the *network* driver, and reloading it would take the netdevs down too.
    match (module, opts.allow_module_reload) {
        (Some(module), true) => methods.push(ResetMethod::ModuleReload {
            module,
            also_affects: opts
                .same_module_devices
                .iter()
                .filter(|d| **d != facts.name)
                .cloned()
                .collect(),
        }),
        (Some(module), false) => skipped.push(format!(
            "module reload of {module}: not allowed (recovery.allow-module-reload = false; it \
             would re-create every {module} device)"
        )),
        (None, _) => skipped.push("module reload: the RDMA driver's module is unknown".into()),
    }
    Plan { methods, skipped }
}

/// What re-creating a device needs once it is gone, remembered while it exists.
///
/// A deleted ib_device leaves nothing behind under `/sys/class/infiniband` (lab, 6.1 and
/// 6.12: after `rdma link delete rxe_ini` the name is absent from sysfs and from RDMA
/// netlink), so the facts [`plan`] needs must have been read before. What survives the
/// device, and is therefore enough to bring it back:
/// - a software device (rxe, siw): its link type and the netdev it sat on, for
///   `rdma link add NAME type T netdev N` (the netdev outlives the link);
/// - a hardware device (irdma, mlx5): its parent PCI function, which stays in
///   `/sys/bus/pci/devices`, and the RDMA auxiliary device and driver folder it was bound
///   to, for the same unbind/bind or devlink toggle as when it is present.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "from", rename_all = "kebab-case")]
pub enum RecreateFrom {
    /// `rdma link add NAME type KIND netdev NETDEV`.
    SoftLink {
        /// rxe or siw.
        kind: SoftType,
        /// The netdev it sat on (`ini0`).
        netdev: String,
    },
    /// The parent function (and RDMA auxiliary device) it was spawned by.
    Parent {
        /// The parent as sysfs showed it (`pci` `0000:02:00.0`, driver `ice`).
        parent: ParentFacts,
        /// The RDMA auxiliary device and its driver folder, when it had one.
        #[serde(default)]
        aux: Option<AuxFacts>,
        /// The netdevs of its ports (to recognise it when it is back).
        #[serde(default)]
        netdevs: Vec<String>,
    },
}

impl RecreateFrom {
    /// What to remember about a present device; `None` when its facts are not enough to
    /// bring it back (a software device with no netdev, a device with no parent).
    pub fn of(facts: &DeviceFacts) -> Option<RecreateFrom> {
        if let Some(kind) = soft_type(facts) {
            let netdev = facts
                .soft_netdev
                .clone()
                .or_else(|| facts.netdevs.first().cloned())?;
            return Some(RecreateFrom::SoftLink { kind, netdev });
        }
        let parent = facts.parent.clone()?;
        Some(RecreateFrom::Parent {
            parent,
            aux: facts.aux.clone(),
            netdevs: facts.netdevs.clone(),
        })
    }

    /// The facts of the absent device `name` as they were: what [`plan_gone`] plans from,
    /// and what the returning device is recognised by ([`DeviceIdentity::of`]).
    pub fn facts(&self, name: &str) -> DeviceFacts {
        match self {
            RecreateFrom::SoftLink { kind, netdev } => DeviceFacts {
                name: name.to_string(),
                parent: None,
                aux: None,
                node_type: Some(match kind {
                    SoftType::Rxe => 1,
                    SoftType::Siw => 4,
                }),
                node_desc: Some(
                    match kind {
                        SoftType::Rxe => "rxe",
                        SoftType::Siw => "Software iWARP stack",
                    }
                    .to_string(),
                ),
                netdevs: vec![netdev.clone()],
                soft_netdev: (*kind == SoftType::Rxe).then(|| netdev.clone()),
            },
            RecreateFrom::Parent {
                parent,
                aux,
                netdevs,
            } => DeviceFacts {
                name: name.to_string(),
                parent: Some(parent.clone()),
                aux: aux.clone(),
                node_type: None,
                node_desc: None,
                netdevs: netdevs.clone(),
                soft_netdev: None,
            },
        }
    }

    /// One line for logs and alerts: "rxe link on ini0", "PCI function 0000:02:00.0".
    pub fn describe(&self) -> String {
        match self {
            RecreateFrom::SoftLink { kind, netdev } => format!("{} link on {netdev}", kind.name()),
            RecreateFrom::Parent { parent, aux, .. } => {
                let mut s = format!("{} function {}", parent.bus.to_uppercase(), parent.name);
                if let Some(a) = aux {
                    s.push_str(&format!(" (RDMA auxiliary device {})", a.name));
                }
                s
            }
        }
    }
}

/// The commands an operator runs to re-create a device iser-guard knows nothing about (it
/// was gone before the daemon ever saw it), for alerts and errors.
pub fn manual_recreate_hint(name: &str) -> String {
    format!(
        "re-create it by hand: `rdma link add {name} type rxe netdev NETDEV` for Soft-RoCE \
         (`type siw` for Soft-iWARP), or, for a hardware device, bind its RDMA auxiliary \
         device again (`echo AUXDEV > /sys/bus/auxiliary/drivers/DRIVER/bind`) or set \
         `devlink dev param set pci/BDF name enable_roce value true cmode runtime`; \
         `rdma dev` shows it when it is back"
    )
}

/// Orders the methods that bring back `name`, which is gone, from what was remembered
/// about it while it existed. The same methods as [`plan`] for the same facts, in the same
/// order; the executor runs only their "up" step (`rdma link add`, `bind`, `enable_roce`
/// true, `modprobe`), since there is nothing left to take down.
///
/// For a hardware device, `current_aux` is the RDMA auxiliary device found under the parent
/// function now (it may have been re-spawned under another index, or be unbound), which
/// wins over the remembered one.
pub fn plan_gone(
    name: &str,
    remembered: &RecreateFrom,
    current_aux: Option<&AuxFacts>,
    opts: &PlanOptions,
) -> Plan {
    let mut facts = remembered.facts(name);
    if let (Some(now), RecreateFrom::Parent { aux: then, .. }) = (current_aux, remembered) {
        let mut aux = now.clone();
        // An unbound aux device has no driver link: the folder it was bound to is the one
        // to bind it to again.
        if aux.driver_dir.is_none() {
            aux.driver_dir = then.as_ref().and_then(|t| t.driver_dir.clone());
        }
        if aux.module.is_none() {
            aux.module = then.as_ref().and_then(|t| t.module.clone());
        }
        facts.aux = Some(aux);
    }
    let mut p = plan(&facts, opts);
    if current_aux.is_some() {
        // ice spawns its RDMA auxiliary device only while `enable_roce` is on: with the aux
        // device there, setting the parameter to true again would change nothing, and the
        // device would never come back. Binding the aux device is what is left.
        p.methods
            .retain(|m| !matches!(m, ResetMethod::DevlinkToggle { .. }));
        p.skipped.push(
            "devlink toggle: the RDMA auxiliary device still exists, so RDMA is enabled on \
             the function; binding it is what brings the device back"
                .into(),
        );
    }
    p
}

/// rxe/siw detection. Software devices have no bus parent (`devices/virtual/infiniband`), and
/// rxe has its own `parent` attribute; `node_desc` ("rxe", "Software iWARP stack") breaks ties
/// on kernels where siw still set a parent device.
pub fn soft_type(facts: &DeviceFacts) -> Option<SoftType> {
    let desc = facts.node_desc.as_deref().unwrap_or("").trim();
    if facts.soft_netdev.is_some() || desc == "rxe" {
        return Some(SoftType::Rxe);
    }
    if desc.starts_with("Software iWARP") {
        return Some(SoftType::Siw);
    }
    if facts.parent.is_none() {
        return match facts.node_type {
            Some(4) => Some(SoftType::Siw),
            Some(1) => Some(SoftType::Rxe),
            _ => None,
        };
    }
    None
}

/// How a re-created device is recognised: same parent function and same netdev, whatever its
/// new ib index and (temporary) name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct DeviceIdentity {
    /// The name before re-creation.
    pub name: String,
    /// `bus/name` of the parent, e.g. `pci/0000:02:00.0`; `None` for virtual devices.
    pub parent: Option<String>,
    /// Netdevs of its ports (may be empty when sysfs showed none).
    pub netdevs: Vec<String>,
}

impl DeviceIdentity {
    /// The identity of `facts`.
    pub fn of(facts: &DeviceFacts) -> Self {
        DeviceIdentity {
            name: facts.name.clone(),
            parent: facts
                .parent
                .as_ref()
                .map(|p| format!("{}/{}", p.bus, p.name)),
            netdevs: facts.netdevs.clone(),
        }
    }

    /// True when `candidate` is this device (possibly re-created and renamed).
    pub fn matches(&self, candidate: &DeviceFacts) -> bool {
        let other = DeviceIdentity::of(candidate);
        let netdev_ok = self.netdevs.is_empty()
            || other.netdevs.is_empty()
            || self.netdevs.iter().any(|n| other.netdevs.contains(n));
        match (&self.parent, &other.parent) {
            (Some(a), Some(b)) => a == b && netdev_ok,
            (None, None) if !self.netdevs.is_empty() && !other.netdevs.is_empty() => netdev_ok,
            // Nothing else to go by: the name.
            (None, None) => self.name == other.name,
            _ => false,
        }
    }
}

/// Reads the runtime value of a boolean devlink parameter from
/// `devlink dev param show HANDLE name P -j`, e.g.
/// `{"param":{"pci/0000:02:00.0":[{"name":"enable_roce","type":"generic",
/// "values":[{"cmode":"runtime","value":true}]}]}}`.
pub fn parse_devlink_param(json: &str, param: &str) -> Result<bool, String> {
    let v: serde_json::Value = serde_json::from_str(json).map_err(|e| format!("not JSON: {e}"))?;
    let handles = v
        .get("param")
        .and_then(|p| p.as_object())
        .ok_or("no \"param\" object")?;
    for entries in handles.values() {
        let Some(entries) = entries.as_array() else {
            continue;
        };
        for e in entries {
            if e.get("name").and_then(|n| n.as_str()) != Some(param) {
                continue;
            }
            let values = e
                .get("values")
                .and_then(|v| v.as_array())
                .ok_or_else(|| format!("{param} has no \"values\" array"))?;
            for val in values {
                if val.get("cmode").and_then(|c| c.as_str()) == Some("runtime") {
                    return val
                        .get("value")
                        .and_then(|b| b.as_bool())
                        .ok_or_else(|| format!("{param} runtime value is not a boolean"));
                }
            }
            return Err(format!("{param} has no runtime value"));
        }
    }
    Err(format!("parameter {param} not listed"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hw(pci_driver: &str, aux: Option<(&str, Option<&str>)>) -> DeviceFacts {
        DeviceFacts {
            name: "rocep2s0f0".into(),
            parent: Some(ParentFacts {
                bus: "pci".into(),
                name: "0000:02:00.0".into(),
                driver: Some(pci_driver.into()),
            }),
            aux: aux.map(|(n, d)| AuxFacts {
                name: n.into(),
                driver_dir: d.map(Into::into),
                module: d.map(|d| module_of_driver_dir(d).to_string()),
            }),
            node_type: Some(1),
            node_desc: None,
            netdevs: vec!["ens1f0".into()],
            soft_netdev: None,
        }
    }

    fn opts(reload: bool) -> PlanOptions {
        PlanOptions {
            allow_module_reload: reload,
            devlink_available: true,
            rdma_available: true,
            same_module_devices: vec!["rocep2s0f0".into(), "rocep2s0f1".into()],
        }
    }

    #[test]
    fn ice_devlink_then_aux_then_reload() {
        let p = plan(
            &hw("ice", Some(("ice.roce.0", Some("irdma.gen_2")))),
            &opts(true),
        );
        assert_eq!(
            p.methods,
            vec![
                ResetMethod::DevlinkToggle {
                    handle: "pci/0000:02:00.0".into(),
                    param: DevlinkParam::EnableRoce
                },
                ResetMethod::AuxRebind {
                    device: "ice.roce.0".into(),
                    driver: "irdma.gen_2".into()
                },
                ResetMethod::ModuleReload {
                    module: "irdma".into(),
                    also_affects: vec!["rocep2s0f1".into()]
                },
            ]
        );
    }

    #[test]
    fn an_out_of_tree_irdma_vf_device_is_rebound_on_its_iavf_aux_device() {
        // Intel's out-of-tree irdma: driver folder irdma.gen_2 on every kernel; a VF's RDMA
        // device hangs off iavf.roce.N. No devlink toggle (iavf has no enable_roce): the
        // aux rebind in the folder it is bound to, never a guessed `irdma`.
        let p = plan(
            &hw("iavf", Some(("iavf.roce.0", Some("irdma.gen_2")))),
            &opts(false),
        );
        assert_eq!(
            p.methods.first(),
            Some(&ResetMethod::AuxRebind {
                device: "iavf.roce.0".into(),
                driver: "irdma.gen_2".into()
            })
        );
        assert!(!p
            .methods
            .iter()
            .any(|m| matches!(m, ResetMethod::DevlinkToggle { .. })));
        assert!(is_rdma_aux_name("iavf.roce.0"));
    }

    #[test]
    fn iwarp_mode_toggles_enable_iwarp_and_reload_needs_permission() {
        let p = plan(
            &hw("ice", Some(("ice.iwarp.1", Some("irdma")))),
            &opts(false),
        );
        assert_eq!(p.methods.len(), 2);
        assert!(matches!(
            p.methods.first(),
            Some(ResetMethod::DevlinkToggle {
                param: DevlinkParam::EnableIwarp,
                ..
            })
        ));
        assert!(p.skipped.iter().any(|s| s.contains("allow-module-reload")));
    }

    #[test]
    fn mlx5_uses_aux_rebind_only() {
        let p = plan(
            &hw(
                "mlx5_core",
                Some(("mlx5_core.rdma.0", Some("mlx5_ib.rdma"))),
            ),
            &opts(false),
        );
        assert_eq!(
            p.methods,
            vec![ResetMethod::AuxRebind {
                device: "mlx5_core.rdma.0".into(),
                driver: "mlx5_ib.rdma".into()
            }]
        );
    }

    #[test]
    fn ice_without_devlink_tool_falls_back_to_aux() {
        let mut o = opts(false);
        o.devlink_available = false;
        let p = plan(&hw("ice", Some(("ice.roce.0", Some("irdma")))), &o);
        assert!(matches!(
            p.methods.as_slice(),
            [ResetMethod::AuxRebind { .. }]
        ));
        assert!(p.skipped.iter().any(|s| s.contains("devlink")));
    }

    #[test]
    fn rxe_and_siw_readd_links() {
        let rxe = DeviceFacts {
            name: "rxe_ini".into(),
            parent: None,
            aux: None,
            node_type: Some(1),
            node_desc: Some("rxe".into()),
            netdevs: vec!["ini0".into()],
            soft_netdev: Some("ini0".into()),
        };
        let p = plan(&rxe, &opts(true));
        assert_eq!(
            p.methods,
            vec![ResetMethod::RdmaLinkReadd {
                name: "rxe_ini".into(),
                kind: SoftType::Rxe,
                netdev: "ini0".into()
            }]
        );
        let siw = DeviceFacts {
            name: "siw0".into(),
            node_type: Some(4),
            node_desc: Some("Software iWARP stack".into()),
            soft_netdev: None,
            ..rxe
        };
        assert!(matches!(
            plan(&siw, &opts(true)).methods.as_slice(),
            [ResetMethod::RdmaLinkReadd {
                kind: SoftType::Siw,
                ..
            }]
        ));
    }

    #[test]
    fn a_present_device_teaches_what_brings_it_back() {
        let rxe = DeviceFacts {
            name: "rxe_ini".into(),
            parent: None,
            aux: None,
            node_type: Some(1),
            node_desc: Some("rxe".into()),
            netdevs: vec!["ini0".into()],
            soft_netdev: Some("ini0".into()),
        };
        let r = RecreateFrom::of(&rxe).unwrap();
        assert_eq!(
            r,
            RecreateFrom::SoftLink {
                kind: SoftType::Rxe,
                netdev: "ini0".into()
            }
        );
        // Planned from memory alone, it is the same link on the same netdev.
        let p = plan_gone("rxe_ini", &r, None, &opts(false));
        assert_eq!(
            p.methods,
            vec![ResetMethod::RdmaLinkReadd {
                name: "rxe_ini".into(),
                kind: SoftType::Rxe,
                netdev: "ini0".into()
            }]
        );
        assert!(DeviceIdentity::of(&r.facts("rxe_ini")).matches(&rxe));
        // siw: no `parent` attribute, the port's netdev.
        let siw = DeviceFacts {
            name: "siw0".into(),
            node_type: Some(4),
            node_desc: Some("Software iWARP stack".into()),
            soft_netdev: None,
            ..rxe.clone()
        };
        assert_eq!(
            RecreateFrom::of(&siw),
            Some(RecreateFrom::SoftLink {
                kind: SoftType::Siw,
                netdev: "ini0".into()
            })
        );
        // Nothing to add it back on: nothing remembered.
        let bare = DeviceFacts {
            netdevs: Vec::new(),
            soft_netdev: None,
            ..rxe
        };
        assert_eq!(RecreateFrom::of(&bare), None);
    }

    #[test]
    fn a_gone_hardware_device_is_planned_from_its_remembered_function() {
        let facts = hw("ice", Some(("ice.roce.0", Some("irdma.gen_2"))));
        let r = RecreateFrom::of(&facts).unwrap();
        // The aux device is gone too (enable_roce was turned off): devlink first.
        let p = plan_gone("rocep2s0f0", &r, None, &opts(false));
        assert_eq!(p.methods, plan(&facts, &opts(false)).methods);
        assert!(matches!(
            p.methods.first(),
            Some(ResetMethod::DevlinkToggle { .. })
        ));
        // The aux device is still there, unbound: bind it to the folder it was bound to.
        let unbound = AuxFacts {
            name: "ice.roce.0".into(),
            driver_dir: None,
            module: None,
        };
        let p = plan_gone("rocep2s0f0", &r, Some(&unbound), &opts(false));
        assert_eq!(
            p.methods,
            vec![ResetMethod::AuxRebind {
                device: "ice.roce.0".into(),
                driver: "irdma.gen_2".into()
            }]
        );
        assert!(DeviceIdentity::of(&r.facts("rocep2s0f0")).matches(&facts));
        assert!(r.describe().contains("0000:02:00.0"));
    }

    #[test]
    fn the_manual_hint_names_the_commands() {
        let h = manual_recreate_hint("rxe_ini");
        assert!(
            h.contains("rdma link add rxe_ini type rxe netdev NETDEV"),
            "{h}"
        );
        assert!(h.contains("/bind"), "{h}");
    }

    #[test]
    fn nothing_known_gives_an_empty_plan_with_reasons() {
        let mut f = hw("weird", None);
        f.parent = None;
        f.node_type = None;
        let p = plan(&f, &opts(false));
        assert!(p.methods.is_empty());
        assert!(!p.skipped.is_empty());
    }

    #[test]
    fn aux_names() {
        for ok in [
            "ice.roce.0",
            "ice.iwarp.12",
            "mlx5_core.rdma.0",
            "i40e.iwarp.1",
        ] {
            assert!(is_rdma_aux_name(ok), "{ok}");
        }
        for no in ["mlx5_core.eth.0", "ice.roce", "roce.0", "ice.roce.x", "x"] {
            assert!(!is_rdma_aux_name(no), "{no}");
        }
    }

    #[test]
    fn identity_follows_parent_and_netdev_not_name() {
        let old = hw("ice", None);
        let id = DeviceIdentity::of(&old);
        let mut renamed = old.clone();
        renamed.name = "irdma0".into();
        assert!(id.matches(&renamed));
        let mut other_pf = old.clone();
        other_pf.parent = Some(ParentFacts {
            bus: "pci".into(),
            name: "0000:02:00.1".into(),
            driver: Some("ice".into()),
        });
        assert!(!id.matches(&other_pf));
        let mut other_netdev = old;
        other_netdev.netdevs = vec!["ens9".into()];
        assert!(!id.matches(&other_netdev));
    }

    #[test]
    fn devlink_json() {
        let j = r#"{"param":{"pci/0000:02:00.0":[{"name":"enable_roce","type":"generic","values":[{"cmode":"runtime","value":true}]}]}}"#;
        assert_eq!(parse_devlink_param(j, "enable_roce"), Ok(true));
        assert!(parse_devlink_param(j, "enable_iwarp").is_err());
        assert!(parse_devlink_param("{", "enable_roce").is_err());
        assert!(parse_devlink_param(r#"{"param":{}}"#, "enable_roce").is_err());
    }
}
