//! Sysfs as a second witness of the RDMA devices: `<root>/class/infiniband/<dev>/…`.
//!
//! Reads, never writes. Owns the layout knowledge of the InfiniBand class directory:
//! `node_type` ("1: CA"), `fw_ver`, `ports/<n>/{state ("4: ACTIVE"), phys_state ("5: LinkUp"),
//! link_layer, gid_attrs/ndevs/<i>}`, and the `device` link to the parent, with the parent's
//! `driver` link. The root (`/sys`) comes from the configuration (`paths.sysfs_root`) so tests
//! run against fixture trees.
//!
//! Parents, as the drivers register them:
//! - irdma (E810, X722) and mlx5 set the ib_device's parent to the **PCI function**; the
//!   auxiliary device their driver binds to (`ice.roce.0` → `irdma` or, from 6.18,
//!   `irdma.gen_2`; `mlx5_core.rdma.0` → `mlx5_ib.rdma`) is a child of that PCI function, so it
//!   is reported in [`Parent::Pci::aux`];
//! - a driver that parents the ib_device on the auxiliary device itself gives
//!   [`Parent::Auxiliary`];
//! - rxe and siw have no `device` link: [`Parent::Virtual`]; they are followed by netdev.
//!
//! Malformed or unreadable files never fail the scan: the item is skipped and the reason is
//! recorded in [`SysfsScan::skipped`].

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use serde::Serialize;

pub mod attr;
pub mod nvme;
pub mod stack;

use crate::core::reset_plan::is_rdma_aux_name;
pub use attr::SkippedPath;
use attr::{gid_ndevs, link_name, read_opt, skip};

/// The InfiniBand class directory, relative to the sysfs root.
pub const CLASS_INFINIBAND: &str = "class/infiniband";

/// A numbered sysfs value such as `4: ACTIVE` or `5: LinkUp`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Coded {
    /// The number before the colon (the kernel's enum value).
    pub code: u32,
    /// The text after the colon, as the kernel spells it.
    pub name: String,
}

impl Coded {
    /// Parses `"<number>: <name>"` (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Option<Coded> {
        let (num, name) = text.trim().split_once(':')?;
        let code = num.trim().parse().ok()?;
        let name = name.trim();
        if name.is_empty() {
            return None;
        }
        Some(Coded {
            code,
            name: name.to_string(),
        })
    }
}

/// An auxiliary device (`ice.roce.0`, `mlx5_core.rdma.0`) and the driver bound to it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AuxDevice {
    /// The auxiliary device's name, e.g. `ice.roce.0`.
    pub name: String,
    /// The bound driver's folder name under `/sys/bus/auxiliary/drivers/` (`irdma`,
    /// `irdma.gen_2`, `mlx5_ib.rdma`), `None` when unbound.
    pub driver: Option<String>,
    /// The PCI function it hangs off, when it has one.
    pub pci_bdf: Option<String>,
}

/// What the RDMA device's `device` link points at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Parent {
    /// A PCI function, e.g. `0000:02:00.0` bound to `ice` or `mlx5_core`.
    Pci {
        /// Domain:bus:device.function.
        bdf: String,
        /// The PCI driver (`ice`, `mlx5_core`), `None` when unbound.
        driver: Option<String>,
        /// RDMA auxiliary devices under this function (`ice.roce.0` …).
        aux: Vec<AuxDevice>,
    },
    /// An auxiliary device is the parent itself.
    Auxiliary(AuxDevice),
    /// No `device` link: a software device (rxe, siw) parented on nothing.
    Virtual,
}

impl Parent {
    /// The PCI function behind the device, if any.
    pub fn pci_bdf(&self) -> Option<&str> {
        match self {
            Parent::Pci { bdf, .. } => Some(bdf),
            Parent::Auxiliary(aux) => aux.pci_bdf.as_deref(),
            Parent::Virtual => None,
        }
    }

    /// The driver that owns the RDMA function: the auxiliary driver when there is one
    /// (`irdma`, `mlx5_ib.rdma`), else the parent's driver.
    pub fn rdma_driver(&self) -> Option<&str> {
        match self {
            Parent::Pci { driver, aux, .. } => aux
                .iter()
                .find_map(|a| a.driver.as_deref())
                .or(driver.as_deref()),
            Parent::Auxiliary(aux) => aux.driver.as_deref(),
            Parent::Virtual => None,
        }
    }

    /// A stable identity for following a device across re-creation: the PCI function or the
    /// auxiliary device name. `None` for virtual devices (follow them by netdev).
    pub fn identity(&self) -> Option<String> {
        match self {
            Parent::Pci { bdf, .. } => Some(format!("pci:{bdf}")),
            Parent::Auxiliary(aux) => Some(match &aux.pci_bdf {
                Some(bdf) => format!("pci:{bdf}"),
                None => format!("aux:{}", aux.name),
            }),
            Parent::Virtual => None,
        }
    }
}

/// One port of an RDMA device as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SysfsPort {
    /// Port number (1-based).
    pub n: u32,
    /// `ports/<n>/state`, e.g. `4: ACTIVE`.
    pub state: Option<Coded>,
    /// `ports/<n>/phys_state`, e.g. `5: LinkUp`.
    pub phys_state: Option<Coded>,
    /// `ports/<n>/link_layer`: `Ethernet` or `InfiniBand`.
    pub link_layer: Option<String>,
    /// Distinct netdev names from `ports/<n>/gid_attrs/ndevs/*`, in GID-index order.
    pub netdevs: Vec<String>,
}

/// One RDMA device under `class/infiniband`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SysfsDevice {
    /// The device name (directory name), e.g. `rocep2s0f0`.
    pub name: String,
    /// `node_type`, e.g. `1: CA`.
    pub node_type: Option<Coded>,
    /// `fw_ver`, when the driver provides one.
    pub fw_ver: Option<String>,
    /// The parent device.
    pub parent: Parent,
    /// Ports, by number.
    pub ports: Vec<SysfsPort>,
}

impl SysfsDevice {
    /// Every netdev name of every port (deduplicated, in port order).
    pub fn netdevs(&self) -> Vec<&str> {
        let mut out: Vec<&str> = Vec::new();
        for n in self.ports.iter().flat_map(|p| p.netdevs.iter()) {
            if !out.contains(&n.as_str()) {
                out.push(n);
            }
        }
        out
    }
}

/// The result of one scan.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct SysfsScan {
    /// Whether `class/infiniband` exists at all (it does not without ib_core).
    pub class_present: bool,
    /// Devices, sorted by name.
    pub devices: Vec<SysfsDevice>,
    /// Everything that was skipped, with reasons (counted and logged).
    pub skipped: Vec<SkippedPath>,
}

impl SysfsScan {
    /// The device with this name.
    pub fn device(&self, name: &str) -> Option<&SysfsDevice> {
        self.devices.iter().find(|d| d.name == name)
    }
}

/// Why sysfs could not be read at all.
#[derive(Debug, thiserror::Error)]
pub enum SysfsError {
    /// The class directory exists but cannot be listed.
    #[error("cannot list {path}: {source} (is sysfs mounted and readable?)")]
    List {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: io::Error,
    },
}

/// Reads every RDMA device under `<sysfs_root>/class/infiniband`.
///
/// A missing class directory is not an error: it is what a kernel without ib_core looks like
/// (`class_present` is then false).
pub fn scan(sysfs_root: &Path) -> Result<SysfsScan, SysfsError> {
    let class = sysfs_root.join(CLASS_INFINIBAND);
    let mut out = SysfsScan::default();
    let entries = match fs::read_dir(&class) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
        Err(source) => {
            return Err(SysfsError::List {
                path: class,
                source,
            })
        }
    };
    out.class_present = true;
    let mut names = Vec::new();
    for entry in entries {
        match entry {
            Ok(e) => match e.file_name().into_string() {
                Ok(name) => names.push(name),
                Err(raw) => skip(
                    &mut out.skipped,
                    class.join(&raw),
                    "device name is not valid UTF-8",
                ),
            },
            Err(e) => skip(&mut out.skipped, class.clone(), format!("read_dir: {e}")),
        }
    }
    names.sort();
    for name in names {
        let dir = class.join(&name);
        if !dir.is_dir() {
            skip(&mut out.skipped, dir, "not a directory");
            continue;
        }
        let dev = read_device(&dir, name, &mut out.skipped);
        out.devices.push(dev);
    }
    for s in &out.skipped {
        tracing::debug!(path = %s.path.display(), reason = %s.reason, "sysfs: skipped");
    }
    Ok(out)
}

fn read_coded(path: &Path, skipped: &mut Vec<SkippedPath>) -> Option<Coded> {
    let text = read_opt(path, skipped)?;
    match Coded::parse(&text) {
        Some(c) => Some(c),
        None => {
            skip(
                skipped,
                path.to_path_buf(),
                format!("expected \"<number>: <name>\", found {text:?}"),
            );
            None
        }
    }
}

fn read_device(dir: &Path, name: String, skipped: &mut Vec<SkippedPath>) -> SysfsDevice {
    let node_type = read_coded(&dir.join("node_type"), skipped);
    let fw_ver = read_opt(&dir.join("fw_ver"), skipped).filter(|s| !s.is_empty());
    let parent = read_parent(dir, skipped);
    let ports = read_ports(&dir.join("ports"), skipped);
    SysfsDevice {
        name,
        node_type,
        fw_ver,
        parent,
        ports,
    }
}

/// True for a PCI address `dddd:bb:dd.f` (hex digits).
pub fn is_pci_bdf(s: &str) -> bool {
    let b = s.as_bytes();
    let hex = |r: std::ops::Range<usize>| {
        b.get(r)
            .is_some_and(|x| x.iter().all(|c| c.is_ascii_hexdigit()))
    };
    b.len() == 12
        && hex(0..4)
        && b.get(4) == Some(&b':')
        && hex(5..7)
        && b.get(7) == Some(&b':')
        && hex(8..10)
        && b.get(10) == Some(&b'.')
        && hex(11..12)
}

fn read_parent(dir: &Path, skipped: &mut Vec<SkippedPath>) -> Parent {
    let link = dir.join("device");
    if fs::symlink_metadata(&link).is_err() {
        return Parent::Virtual;
    }
    let resolved = match fs::canonicalize(&link) {
        Ok(p) => p,
        Err(e) => {
            skip(skipped, link, format!("dangling parent link: {e}"));
            return Parent::Virtual;
        }
    };
    let Some(name) = resolved.file_name().and_then(|n| n.to_str()) else {
        skip(skipped, link, "parent link has no name");
        return Parent::Virtual;
    };
    let driver = link_name(&resolved.join("driver"));
    if is_pci_bdf(name) {
        let aux = read_aux_children(&resolved, name);
        return Parent::Pci {
            bdf: name.to_string(),
            driver,
            aux,
        };
    }
    // Any other parent: an auxiliary device; its PCI function is the nearest ancestor
    // directory that looks like one.
    let pci_bdf = resolved
        .ancestors()
        .skip(1)
        .filter_map(|a| a.file_name().and_then(|n| n.to_str()))
        .find(|n| is_pci_bdf(n))
        .map(str::to_string);
    Parent::Auxiliary(AuxDevice {
        name: name.to_string(),
        driver,
        pci_bdf,
    })
}

fn read_aux_children(pci_dir: &Path, bdf: &str) -> Vec<AuxDevice> {
    let Ok(entries) = fs::read_dir(pci_dir) else {
        return Vec::new();
    };
    let mut aux: Vec<AuxDevice> = entries
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| is_rdma_aux_name(n))
        .map(|n| AuxDevice {
            driver: link_name(&pci_dir.join(&n).join("driver")),
            name: n,
            pci_bdf: Some(bdf.to_string()),
        })
        .collect();
    aux.sort_by(|a, b| a.name.cmp(&b.name));
    aux
}

fn read_ports(ports_dir: &Path, skipped: &mut Vec<SkippedPath>) -> Vec<SysfsPort> {
    let entries = match fs::read_dir(ports_dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            skip(
                skipped,
                ports_dir.to_path_buf(),
                "device has no ports directory",
            );
            return Vec::new();
        }
        Err(e) => {
            skip(skipped, ports_dir.to_path_buf(), format!("unreadable: {e}"));
            return Vec::new();
        }
    };
    let mut ports = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        let Some(n) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            skip(skipped, path, "port directory name is not a number");
            continue;
        };
        ports.push(SysfsPort {
            n,
            state: read_coded(&path.join("state"), skipped),
            phys_state: read_coded(&path.join("phys_state"), skipped),
            link_layer: read_opt(&path.join("link_layer"), skipped),
            netdevs: gid_ndevs(&path.join("gid_attrs").join("ndevs"), usize::MAX),
        });
    }
    ports.sort_by_key(|p| p.n);
    ports
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coded_values_parse_like_the_kernel_prints_them() {
        assert_eq!(
            Coded::parse("4: ACTIVE\n"),
            Some(Coded {
                code: 4,
                name: "ACTIVE".into()
            })
        );
        assert_eq!(Coded::parse("5: LinkUp").map(|c| c.code), Some(5));
        assert_eq!(Coded::parse("ACTIVE"), None);
        assert_eq!(Coded::parse("x: ACTIVE"), None);
        assert_eq!(Coded::parse("4:"), None);
    }

    #[test]
    fn pci_addresses_and_aux_names() {
        assert!(is_pci_bdf("0000:02:00.0"));
        assert!(is_pci_bdf("0000:af:1f.7"));
        assert!(!is_pci_bdf("0000:02:00"));
        assert!(!is_pci_bdf("ice.roce.0"));
        assert!(!is_pci_bdf("pci0000:00"));
        assert!(is_rdma_aux_name("ice.roce.0"));
        assert!(is_rdma_aux_name("ice.iwarp.12"));
        assert!(is_rdma_aux_name("mlx5_core.rdma.0"));
        assert!(!is_rdma_aux_name("mlx5_core.eth.0"));
        assert!(!is_rdma_aux_name("ice.roce."));
        assert!(!is_rdma_aux_name("net"));
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs")
            .join(name)
    }

    fn coded(code: u32, name: &str) -> Option<Coded> {
        Some(Coded {
            code,
            name: name.into(),
        })
    }

    #[test]
    fn e810_device_is_parented_on_its_pci_function_with_the_irdma_aux_device() {
        let scan = scan(&fixture("e810")).unwrap();
        assert!(scan.class_present);
        assert_eq!(scan.skipped, vec![]);
        assert_eq!(
            scan.devices,
            vec![SysfsDevice {
                name: "rocep2s0f0".into(),
                node_type: coded(1, "CA"),
                fw_ver: Some("1.70".into()),
                parent: Parent::Pci {
                    bdf: "0000:02:00.0".into(),
                    driver: Some("ice".into()),
                    aux: vec![AuxDevice {
                        name: "ice.roce.0".into(),
                        driver: Some("irdma".into()),
                        pci_bdf: Some("0000:02:00.0".into()),
                    }],
                },
                ports: vec![SysfsPort {
                    n: 1,
                    state: coded(4, "ACTIVE"),
                    phys_state: coded(5, "LinkUp"),
                    link_layer: Some("Ethernet".into()),
                    netdevs: vec!["enp2s0f0".into()],
                }],
            }]
        );
        let dev = &scan.devices[0];
        assert_eq!(dev.parent.pci_bdf(), Some("0000:02:00.0"));
        assert_eq!(dev.parent.rdma_driver(), Some("irdma"));
        assert_eq!(dev.parent.identity().as_deref(), Some("pci:0000:02:00.0"));
    }

    #[test]
    fn kernel_6_18_names_the_irdma_driver_folder_gen_2() {
        let scan = scan(&fixture("e810-k618")).unwrap();
        let names: Vec<_> = scan.devices.iter().map(|d| d.name.as_str()).collect();
        assert_eq!(names, ["rocep2s0f0", "rocep2s0f1"]);
        let f1 = scan.device("rocep2s0f1").unwrap();
        assert_eq!(f1.parent.rdma_driver(), Some("irdma.gen_2"));
        assert_eq!(f1.parent.pci_bdf(), Some("0000:02:00.1"));
        assert_eq!(f1.ports[0].state, coded(1, "DOWN"));
        assert_eq!(f1.ports[0].phys_state, coded(3, "Disabled"));
    }

    #[test]
    fn mlx5_lists_only_the_rdma_aux_device() {
        let scan = scan(&fixture("mlx5")).unwrap();
        let dev = scan.device("mlx5_0").unwrap();
        match &dev.parent {
            Parent::Pci { bdf, driver, aux } => {
                assert_eq!(bdf, "0000:03:00.0");
                assert_eq!(driver.as_deref(), Some("mlx5_core"));
                let names: Vec<_> = aux.iter().map(|a| a.name.as_str()).collect();
                assert_eq!(names, ["mlx5_core.rdma.0"]);
            }
            other => panic!("unexpected parent {other:?}"),
        }
        assert_eq!(dev.parent.rdma_driver(), Some("mlx5_ib.rdma"));
        assert_eq!(dev.fw_ver.as_deref(), Some("22.36.1010"));
    }

    #[test]
    fn rxe_has_no_parent_and_is_known_by_its_netdev() {
        let scan = scan(&fixture("rxe")).unwrap();
        let dev = scan.device("rxe_ini").unwrap();
        assert_eq!(dev.parent, Parent::Virtual);
        assert_eq!(dev.parent.identity(), None);
        assert_eq!(dev.fw_ver, None);
        assert_eq!(dev.netdevs(), ["ini0"]);
    }

    #[test]
    fn malformed_files_are_skipped_with_reasons() {
        let scan = scan(&fixture("malformed")).unwrap();
        let dev = scan.device("rxe_bad").unwrap();
        assert_eq!(dev.node_type, None);
        assert_eq!(dev.ports.len(), 1);
        assert_eq!(dev.ports[0].state, None);
        assert_eq!(dev.ports[0].phys_state, None);
        assert_eq!(dev.ports[0].netdevs, ["ini9"]);
        assert_eq!(dev.parent, Parent::Virtual);
        let reasons: Vec<String> = scan
            .skipped
            .iter()
            .map(|s| {
                let file = s.path.file_name().unwrap().to_string_lossy();
                format!("{file}: {}", s.reason)
            })
            .collect();
        assert_eq!(reasons.len(), 6, "{reasons:#?}");
        for expected in [
            "not-a-device: not a directory",
            "node_type: unreadable: not valid UTF-8",
            "state: expected \"<number>: <name>\", found \"garbage\"",
            "phys_state: expected \"<number>: <name>\", found \"LinkUp\"",
            "notaport: port directory name is not a number",
            "device: dangling parent link",
        ] {
            assert!(
                reasons.iter().any(|r| r.starts_with(expected)),
                "missing {expected:?} in {reasons:#?}"
            );
        }
    }

    #[test]
    fn no_class_directory_means_no_ib_core() {
        let dir = tempfile::tempdir().unwrap();
        let scan = scan(dir.path()).unwrap();
        assert!(!scan.class_present);
        assert!(scan.devices.is_empty());
        let scan = super::scan(&fixture("empty")).unwrap();
        assert!(scan.class_present);
        assert!(scan.devices.is_empty());
    }
}
