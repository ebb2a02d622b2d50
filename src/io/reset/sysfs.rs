//! Reads [`DeviceFacts`] for RDMA devices from a sysfs tree (config `paths.sysfs-root`).
//!
//! Owns the sysfs layout knowledge: `class/infiniband/<dev>` → its `device` link (the parent:
//! a PCI function, or an auxiliary device), the parent's `subsystem` and `driver` links, the
//! RDMA auxiliary devices under a PCI function (`bus/auxiliary/devices/*` whose parent is that
//! function), their driver folder (the `driver` link's target, else a search of
//! `bus/auxiliary/drivers/*/<aux>`), the folder's `module` link, the ports' netdevs. Reads only.
//!
//! Files and links are read with the shared primitives of [`crate::io::sysfs::attr`]: a
//! missing optional attribute is `None`; an unreadable one is `None` and logged as skipped
//! with its reason (real sysfs returns EINVAL for, e.g., an empty GID slot's `ndevs` file);
//! only a missing device is an error.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use crate::core::reset_plan::{is_rdma_aux_name, AuxFacts, DeviceFacts, ParentFacts};
use crate::io::sysfs::attr::{gid_ndevs, link_name, read_opt};

/// A sysfs tree rooted at `root` (`/sys`, or a fixture).
#[derive(Debug, Clone)]
pub struct Sysfs {
    root: PathBuf,
}

impl Sysfs {
    /// The tree at `root`.
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Sysfs { root: root.into() }
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<root>/class/infiniband`.
    pub fn class_dir(&self) -> PathBuf {
        self.root.join("class/infiniband")
    }

    /// `<root>/bus/auxiliary/drivers/<driver>`.
    pub fn aux_driver_dir(&self, driver: &str) -> PathBuf {
        self.root.join("bus/auxiliary/drivers").join(driver)
    }

    /// Names of the RDMA devices present now, sorted. A missing class folder (no RDMA at all)
    /// is an empty list.
    pub fn device_names(&self) -> io::Result<Vec<String>> {
        let mut names = Vec::new();
        match fs::read_dir(self.class_dir()) {
            Ok(rd) => {
                for e in rd {
                    names.push(e?.file_name().to_string_lossy().into_owned());
                }
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        names.sort();
        Ok(names)
    }

    /// Facts about device `name`; `Ok(None)` when it does not exist (right now).
    pub fn facts(&self, name: &str) -> io::Result<Option<DeviceFacts>> {
        if name.is_empty() || name.contains('/') || name == "." || name == ".." {
            return Ok(None);
        }
        let dev = self.class_dir().join(name);
        let dev_real = match fs::canonicalize(&dev) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let (parent, aux) = match fs::canonicalize(dev_real.join("device")) {
            Ok(parent_path) => self.parent_and_aux(&parent_path),
            Err(_) => (None, None),
        };
        let mut skipped = Vec::new();
        let facts = DeviceFacts {
            name: name.to_string(),
            parent,
            aux,
            node_type: read_opt(&dev_real.join("node_type"), &mut skipped).and_then(|s| {
                // "1: CA", "4: RNIC"
                s.split(':').next().and_then(|n| n.trim().parse().ok())
            }),
            node_desc: read_opt(&dev_real.join("node_desc"), &mut skipped),
            netdevs: port_netdevs(&dev_real),
            soft_netdev: read_opt(&dev_real.join("parent"), &mut skipped).filter(|s| !s.is_empty()),
        };
        for s in &skipped {
            tracing::debug!(path = %s.path.display(), reason = %s.reason, "sysfs: skipped");
        }
        Ok(Some(facts))
    }

    /// The RDMA auxiliary device under PCI function `bdf` now (`bus/pci/devices/<bdf>`), as
    /// for a present device's parent; `NotFound` when the function itself is gone.
    pub fn pci_rdma_aux(&self, bdf: &str) -> io::Result<Option<AuxFacts>> {
        if bdf.is_empty() || bdf.contains('/') || bdf == "." || bdf == ".." {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "not a PCI function name",
            ));
        }
        let pci = fs::canonicalize(self.root.join("bus/pci/devices").join(bdf))?;
        Ok(self.find_rdma_aux(&pci))
    }

    /// Facts of every device present now (devices vanishing mid-scan are skipped).
    pub fn all_facts(&self) -> io::Result<Vec<DeviceFacts>> {
        let mut out = Vec::new();
        for n in self.device_names()? {
            if let Some(f) = self.facts(&n)? {
                out.push(f);
            }
        }
        Ok(out)
    }

    fn parent_and_aux(&self, parent_path: &Path) -> (Option<ParentFacts>, Option<AuxFacts>) {
        let bus = link_name(&parent_path.join("subsystem"));
        let name = file_name(parent_path);
        let parent = ParentFacts {
            bus: bus.clone().unwrap_or_default(),
            name: name.clone(),
            driver: link_name(&parent_path.join("driver")),
        };
        match bus.as_deref() {
            // The ib_device hangs off its auxiliary device: the PCI function is one level up.
            Some("auxiliary") => {
                let aux = self.aux_facts(&name, parent_path);
                let pci = parent_path.parent().map(|p| ParentFacts {
                    bus: link_name(&p.join("subsystem")).unwrap_or_default(),
                    name: file_name(p),
                    driver: link_name(&p.join("driver")),
                });
                (pci.or(Some(parent)), Some(aux))
            }
            _ => {
                let aux = self.find_rdma_aux(parent_path);
                (Some(parent), aux)
            }
        }
    }

    /// The RDMA auxiliary device whose parent is `pci_path`; when there are several, the bound
    /// one; when still ambiguous, none (we never guess which to unbind).
    fn find_rdma_aux(&self, pci_path: &Path) -> Option<AuxFacts> {
        let devices = self.root.join("bus/auxiliary/devices");
        let mut found = Vec::new();
        for e in fs::read_dir(&devices).ok()?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !is_rdma_aux_name(&name) {
                continue;
            }
            let Ok(real) = fs::canonicalize(e.path()) else {
                continue;
            };
            if real.parent() == Some(pci_path) {
                found.push(self.aux_facts(&name, &real));
            }
        }
        if found.len() > 1 {
            found.retain(|a| a.driver_dir.is_some());
        }
        match found.len() {
            1 => found.pop(),
            _ => None,
        }
    }

    fn aux_facts(&self, name: &str, aux_path: &Path) -> AuxFacts {
        let driver_dir = link_name(&aux_path.join("driver")).or_else(|| {
            // No driver link: find the folder that lists it (bound devices appear there).
            let drivers = self.root.join("bus/auxiliary/drivers");
            fs::read_dir(drivers).ok()?.flatten().find_map(|d| {
                d.path()
                    .join(name)
                    .exists()
                    .then(|| d.file_name().to_string_lossy().into_owned())
            })
        });
        let module = driver_dir
            .as_deref()
            .and_then(|d| link_name(&self.aux_driver_dir(d).join("module")));
        AuxFacts {
            name: name.to_string(),
            driver_dir,
            module,
        }
    }
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// Netdevs named by `ports/*/gid_attrs/ndevs/*`, deduplicated, in port/GID order. The first
/// few GIDs carry the netdev; reading thousands of empty slots is wasted work (each returns
/// EINVAL on real sysfs).
fn port_netdevs(dev: &Path) -> Vec<String> {
    const SLOTS: usize = 16;
    let mut out: Vec<String> = Vec::new();
    let Ok(ports) = fs::read_dir(dev.join("ports")) else {
        return out;
    };
    let mut ports: Vec<PathBuf> = ports.flatten().map(|e| e.path()).collect();
    ports.sort();
    for port in ports {
        for n in gid_ndevs(&port.join("gid_attrs/ndevs"), SLOTS) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}
