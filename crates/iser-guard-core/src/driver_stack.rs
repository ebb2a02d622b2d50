//! Driver stacks that change what iser-guard can do on a host: an RDMA driver built outside
//! the kernel tree (Intel's ice/irdma from a DKMS package), an E810 function whose netdev is
//! in a bond (ice gives it no RDMA device: ice_lag.c, read on 6.8), and ice's safe mode (no
//! DDP package: RDMA is off on the function).
//!
//! Owns recognising them from the host's facts (pure: the shell reads sysfs and the kernel
//! log, doctor and the daemon read the same facts the same way) and naming them: the
//! daemon's status lists each, the engine alerts once per condition and never re-creates a
//! device on a function that has no RDMA ([`StackCondition::function_without_rdma`]).

use serde::{Deserialize, Serialize};

use crate::doctor::BondedPort;

/// A kernel module serving RDMA devices, as sysfs shows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RdmaModule {
    /// Module name (`irdma`).
    pub name: String,
    /// `/sys/module/NAME/taint` (`O` = out-of-tree), when readable.
    pub taint: Option<String>,
    /// The RDMA devices it serves.
    pub devices: Vec<String>,
    /// Their RDMA auxiliary devices with the driver folder each is bound to
    /// (`iavf.roce.0`, `irdma.gen_2`).
    pub aux: Vec<(String, String)>,
}

/// What the shell read.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StackFacts {
    /// The running kernel's `(major, minor)`, when known (`irdma.gen_2` is in-tree from
    /// 6.18 only).
    pub kernel: Option<(u32, u32)>,
    /// NIC functions whose netdev is a bond member.
    pub bonded: Vec<BondedPort>,
    /// The modules serving RDMA devices.
    pub modules: Vec<RdmaModule>,
}

/// One recognised condition.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum StackCondition {
    /// An RDMA driver built outside the kernel tree.
    OutOfTree {
        /// The module.
        module: String,
        /// The devices it serves.
        devices: Vec<String>,
        /// How it was recognised.
        evidence: String,
    },
    /// An E810 function in a bond, with no RDMA device.
    BondedWithoutRdma {
        /// The PCI function.
        pci: String,
        /// Its netdev.
        netdev: String,
        /// The bond.
        bond: String,
    },
    /// ice's safe mode on a function (the DDP package did not load): RDMA is off.
    SafeMode {
        /// The PCI function.
        pci: String,
    },
}

impl StackCondition {
    /// One key per condition (alerts are said once per key).
    pub fn key(&self) -> String {
        match self {
            StackCondition::OutOfTree { module, .. } => format!("out-of-tree:{module}"),
            StackCondition::BondedWithoutRdma { pci, .. } => format!("bonded:{pci}"),
            StackCondition::SafeMode { pci } => format!("safe-mode:{pci}"),
        }
    }

    /// The PCI function this condition leaves without RDMA: nothing on it is re-created.
    pub fn function_without_rdma(&self) -> Option<&str> {
        match self {
            StackCondition::OutOfTree { .. } => None,
            StackCondition::BondedWithoutRdma { pci, .. } | StackCondition::SafeMode { pci } => {
                Some(pci)
            }
        }
    }

    /// What it is, in one line.
    pub fn summary(&self) -> String {
        match self {
            StackCondition::OutOfTree {
                module,
                devices,
                evidence,
            } => format!(
                "{module} (serving {}) is an out-of-tree driver ({evidence})",
                if devices.is_empty() {
                    "no RDMA device yet".to_string()
                } else {
                    devices.join(", ")
                }
            ),
            StackCondition::BondedWithoutRdma { pci, netdev, bond } => format!(
                "{pci} ({netdev}) is a member of bond {bond} and has no RDMA device: no iSER \
                 session can use this port"
            ),
            StackCondition::SafeMode { pci } => format!(
                "ice is in safe mode on {pci} (no DDP package): RDMA is disabled on this \
                 function"
            ),
        }
    }

    /// What it means for iser-guard.
    pub fn detail(&self) -> String {
        match self {
            StackCondition::OutOfTree { .. } => {
                "iser-guard's driver knowledge (folder names, devlink parameters, kernel \
                 messages) was read from the in-tree drivers; re-creation uses only what sysfs \
                 shows (a devlink toggle only when the parameter reads true, the aux device's \
                 own driver folder), but nothing of this driver has been validated"
                    .into()
            }
            StackCondition::BondedWithoutRdma { .. } => {
                "ice gives a function whose netdev is a bond member no RDMA auxiliary device \
                 (ice_lag.c), so iser-guard has nothing to re-create there and does not try"
                    .into()
            }
            StackCondition::SafeMode { .. } => {
                "no re-creation repairs this, so iser-guard does not try; the iSER sessions \
                 on this function's ports stay down until it is fixed"
                    .into()
            }
        }
    }

    /// What the operator can do.
    pub fn remedy(&self) -> String {
        match self {
            StackCondition::OutOfTree { .. } => {
                "run `iser-guard doctor --active DEVICE` on a maintenance window and send the \
                 report; prefer the in-tree driver where it does what you need"
                    .into()
            }
            StackCondition::BondedWithoutRdma { .. } => {
                "run iSER on unbonded ports (multipath across two ports gives the redundancy \
                 instead), or check whether your ice driver supports RDMA on a bond"
                    .into()
            }
            StackCondition::SafeMode { .. } => {
                "install the DDP package (/lib/firmware/intel/ice/ddp/ice.pkg, from \
                 linux-firmware) and reload ice on a maintenance window"
                    .into()
            }
        }
    }
}

impl StackCondition {
    /// The one command an alert offers (`next`), when one helps: doctor's active checks of
    /// an out-of-tree driver's device.
    pub fn command(&self) -> Option<String> {
        match self {
            StackCondition::OutOfTree { devices, .. } => devices
                .first()
                .map(|d| format!("iser-guard doctor --active {d}")),
            _ => None,
        }
    }
}

/// The conditions `facts` show, sorted. Safe mode is not among them: only the kernel log
/// says it (the classifier's `nic_safe_mode` signature, fed to the engine as its own
/// observation).
pub fn detect(facts: &StackFacts) -> Vec<StackCondition> {
    let mut out = Vec::new();
    for m in &facts.modules {
        let mut why = Vec::new();
        if m.taint.as_deref().is_some_and(|t| t.contains('O')) {
            why.push(format!("/sys/module/{}/taint has O", m.name));
        }
        for (aux, folder) in &m.aux {
            // In-tree iavf plugs no RDMA auxiliary device; Intel's out-of-tree one does.
            if aux.starts_with("iavf.") {
                why.push(format!("RDMA auxiliary device {aux}"));
            }
            // In-tree irdma names its folder irdma.gen_2 from 6.18 only.
            if folder == "irdma.gen_2" && facts.kernel.is_some_and(|k| k < (6, 18)) {
                why.push(format!("driver folder {folder} before Linux 6.18"));
            }
        }
        why.dedup();
        if !why.is_empty() {
            out.push(StackCondition::OutOfTree {
                module: m.name.clone(),
                devices: m.devices.clone(),
                evidence: why.join(", "),
            });
        }
    }
    for b in &facts.bonded {
        if b.driver == "ice" && !b.has_rdma {
            out.push(StackCondition::BondedWithoutRdma {
                pci: b.pci.clone(),
                netdev: b.netdev.clone(),
                bond: b.master.clone(),
            });
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn irdma(taint: &str, aux: &str, folder: &str) -> RdmaModule {
        RdmaModule {
            name: "irdma".into(),
            taint: Some(taint.into()),
            devices: vec!["rocep2s0f0".into()],
            aux: vec![(aux.into(), folder.into())],
        }
    }

    #[test]
    fn an_out_of_tree_irdma_is_recognised_by_taint_folder_or_iavf_aux() {
        let facts = |m, k| StackFacts {
            kernel: Some(k),
            modules: vec![m],
            ..StackFacts::default()
        };
        let d = detect(&facts(irdma("O", "ice.roce.0", "irdma.gen_2"), (6, 8)));
        assert_eq!(d.len(), 1);
        let StackCondition::OutOfTree { evidence, .. } = &d[0] else {
            panic!("{d:?}")
        };
        assert_eq!(
            evidence,
            "/sys/module/irdma/taint has O, driver folder irdma.gen_2 before Linux 6.18"
        );
        // In-tree on 6.18: the same folder says nothing.
        assert!(detect(&facts(irdma("", "ice.roce.0", "irdma.gen_2"), (6, 18))).is_empty());
        let d = detect(&facts(irdma("", "iavf.roce.0", "irdma"), (6, 8)));
        assert_eq!(d[0].key(), "out-of-tree:irdma");
        assert_eq!(d[0].function_without_rdma(), None);
    }

    #[test]
    fn a_bonded_e810_function_without_rdma_has_no_rdma() {
        let bond = |has_rdma| BondedPort {
            pci: "0000:3b:00.0".into(),
            driver: "ice".into(),
            netdev: "ens1f0".into(),
            master: "bond0".into(),
            has_rdma,
        };
        let d = detect(&StackFacts {
            bonded: vec![bond(false)],
            ..StackFacts::default()
        });
        assert_eq!(d[0].function_without_rdma(), Some("0000:3b:00.0"));
        assert!(d[0].summary().contains("bond bond0"), "{}", d[0].summary());
        assert!(detect(&StackFacts {
            bonded: vec![bond(true)],
            ..StackFacts::default()
        })
        .is_empty());
    }
}
