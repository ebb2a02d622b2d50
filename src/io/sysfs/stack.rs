//! The host facts behind [`crate::core::driver_stack`]: which modules serve the RDMA devices
//! (with their `taint`, `O` for out-of-tree), their RDMA auxiliary devices and driver
//! folders, and the NIC functions whose netdev is in a bond. Read here once for doctor and
//! the daemon, so both recognise the same conditions the same way.
//!
//! Reads, never writes; an unreadable file leaves its fact out (the condition is then not
//! recognised, never wrongly claimed).

use std::fs;
use std::path::Path;

use super::attr::link_name;
use crate::core::doctor::parse::parse_kernel_release;
use crate::core::doctor::BondedPort;
use crate::core::driver_stack::{RdmaModule, StackFacts};
use crate::io::sysfs::{is_pci_bdf, Parent, SysfsScan};

/// The facts of `scan` (the RDMA devices under `sysfs_root`), with the kernel release read
/// under `proc_root` when given (a fixture sysfs tree belongs to no running kernel).
pub fn read(sysfs_root: &Path, proc_root: Option<&Path>, scan: &SysfsScan) -> StackFacts {
    let kernel = proc_root
        .and_then(|p| fs::read_to_string(p.join("sys/kernel/osrelease")).ok())
        .and_then(|r| parse_kernel_release(&r))
        .map(|v| (v.major, v.minor));
    let mut modules: Vec<RdmaModule> = Vec::new();
    for d in &scan.devices {
        let aux: Vec<(String, String)> = match &d.parent {
            Parent::Pci { aux, .. } => aux
                .iter()
                .filter_map(|a| Some((a.name.clone(), a.driver.clone()?)))
                .collect(),
            Parent::Auxiliary(a) => a
                .driver
                .clone()
                .map(|f| vec![(a.name.clone(), f)])
                .unwrap_or_default(),
            Parent::Virtual => Vec::new(),
        };
        for (aux_name, folder) in aux {
            let module = link_name(
                &sysfs_root
                    .join("bus/auxiliary/drivers")
                    .join(&folder)
                    .join("module"),
            )
            .unwrap_or_else(|| crate::core::reset_plan::module_of_driver_dir(&folder).to_string());
            let m = match modules.iter_mut().position(|m| m.name == module) {
                Some(i) => &mut modules[i],
                None => {
                    modules.push(RdmaModule {
                        taint: fs::read_to_string(
                            sysfs_root.join("module").join(&module).join("taint"),
                        )
                        .ok()
                        .map(|t| t.trim().to_string()),
                        name: module,
                        ..RdmaModule::default()
                    });
                    let last = modules.len() - 1;
                    &mut modules[last]
                }
            };
            if !m.devices.contains(&d.name) {
                m.devices.push(d.name.clone());
            }
            m.aux.push((aux_name, folder));
        }
    }
    let parents: Vec<&str> = scan
        .devices
        .iter()
        .filter_map(|d| d.parent.pci_bdf())
        .collect();
    StackFacts {
        kernel,
        bonded: read_bonded(sysfs_root, &parents),
        modules,
    }
}

/// ice functions whose netdev is a bond member (`class/net/NETDEV/master`); `rdma_parents`
/// are the PCI functions that carry an RDMA device.
pub fn read_bonded(sysfs_root: &Path, rdma_parents: &[&str]) -> Vec<BondedPort> {
    let mut out = Vec::new();
    for drv in ["ice"] {
        let Ok(rd) = fs::read_dir(sysfs_root.join("bus/pci/drivers").join(drv)) else {
            continue;
        };
        let mut bdfs: Vec<String> = rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| is_pci_bdf(n))
            .collect();
        bdfs.sort();
        for bdf in bdfs {
            let net = sysfs_root.join("bus/pci/devices").join(&bdf).join("net");
            let Ok(nets) = fs::read_dir(&net) else {
                continue;
            };
            let mut netdevs: Vec<String> = nets
                .flatten()
                .map(|n| n.file_name().to_string_lossy().into_owned())
                .collect();
            netdevs.sort();
            for netdev in netdevs {
                let Some(master) =
                    link_name(&sysfs_root.join("class/net").join(&netdev).join("master"))
                else {
                    continue;
                };
                out.push(BondedPort {
                    has_rdma: rdma_parents.contains(&bdf.as_str()),
                    pci: bdf.clone(),
                    driver: drv.into(),
                    netdev,
                    master,
                });
            }
        }
    }
    out
}
