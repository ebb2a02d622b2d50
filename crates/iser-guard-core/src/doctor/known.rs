//! What is known to go wrong on iSER hosts, as tables: kernel defects by version and driver,
//! and hazards of a setup, each with its sources. `iser-guard doctor` matches the running
//! kernel and the host's drivers against them; docs/guide/hardware.md lists every row by its
//! id (tests/doctor_cli.rs checks that it does).
//!
//! A row says only what was seen or read: where it was met (the lab's runs, a driver's
//! source), which versions that covers, and what is not known. Sources name upstream files,
//! commit subjects and the project's own lab records, so an operator can check them.

use serde::Serialize;

use super::parse::KernelVersion;

/// Which kernels a row concerns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Kernels {
    /// Every kernel (the defect has no upstream fix).
    All,
    /// Series `from` to `to`, both included (`(6, 1)` to `(6, 12)`).
    Series {
        /// The first series.
        from: (u32, u32),
        /// The last series.
        to: (u32, u32),
    },
    /// Every kernel before this version (fixed in it; stable backports may exist).
    Before(KernelVersion),
}

impl Kernels {
    /// True when `v` is in the range.
    pub fn contains(self, v: KernelVersion) -> bool {
        match self {
            Kernels::All => true,
            Kernels::Series { from, to } => (from..=to).contains(&v.series()),
            Kernels::Before(fixed) => v < fixed,
        }
    }
}

/// What a row needs on the host besides the kernel version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Needs {
    /// An iSER initiator (ib_iser loaded, or an iSER session).
    Iser,
    /// An RDMA device served by irdma (E810, X722).
    Irdma,
    /// An E810 function (PCI driver ice) whose netdev is a bond member.
    BondedIce,
    /// An RDMA or NIC driver module built outside the kernel tree.
    OutOfTreeDriver,
}

/// One known defect or hazard.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Known {
    /// Stable id (also the anchor in docs/guide/hardware.md).
    pub id: &'static str,
    /// A kernel defect (`true`) or a hazard of a setup (`false`).
    pub defect: bool,
    /// One line: what goes wrong.
    pub title: &'static str,
    /// The kernels concerned.
    pub kernels: Kernels,
    /// What the host must have for it to apply.
    pub needs: Needs,
    /// What happens, in operator words.
    pub effect: &'static str,
    /// What to do.
    pub remedy: &'static str,
    /// Where it comes from.
    pub sources: &'static [&'static str],
}

/// The table.
pub const KNOWN: &[Known] = &[
    Known {
        id: "iser-task-rsp-crash",
        defect: true,
        title: "the kernel crashes in iser_task_rsp when a link comes back after an outage in \
                which the iSCSI connection failed",
        kernels: Kernels::Series {
            from: (6, 1),
            to: (6, 12),
        },
        needs: Needs::Iser,
        effect: "a NULL pointer dereference in iser_task_rsp (6.1) or in iscsi_complete_pdu \
                 called from iser_task_rsp (6.12.95) on the RDMA completion work queue, within \
                 a second of the link's return after a link loss of 40 s or more: the host \
                 panics, whatever iser-guard does. Met on 6.1 and 6.12; the series between \
                 were not tried, later ones neither",
        remedy: "no fix is known: on this kernel a link loss of 40 s or more with an iSER \
                 session on it can panic the host whatever iser-guard does. Keep the RDMA links \
                 redundant below the host (switch side), and report whether your kernel \
                 survives such a link loss",
        sources: &[
            "drivers/infiniband/ulp/iser/iser_initiator.c (iser_task_rsp)",
            "drivers/scsi/libiscsi.c (iscsi_complete_pdu)",
            "the project's lab, docs/lab.md \"Kernel facts the lab relies on\" (6.1: link-loss \
             scenarios panic; 6.12.95: 6 of 9 reference runs of zombie-iscsid-alone, \
             2026-12-01/02)",
        ],
    },
    Known {
        id: "irdma-gsi-stuck",
        defect: true,
        title: "irdma's GSI QP (QP 1) sticks in ERR and every ERR->RTS attempt fails with \
                EINVAL; no new RDMA connection can be made on the port",
        kernels: Kernels::All,
        needs: Needs::Irdma,
        effect: "after a send error on QP 1 (a target gone, its neighbour entry with it) the \
                 MAD layer asks for SQE->RTS, irdma checks its own cached state (ERR) and \
                 refuses; nothing in the kernel walks QP 1 through RESET again. The port stays \
                 unusable for iSER until the device is re-created. No upstream fix up to 7.x",
        remedy: "this is the failure iser-guard repairs: list the device in devices.allow so \
                 the daemon re-creates it, and run `iser-guard doctor --active DEVICE` once on \
                 a maintenance window to prove the re-creation on this host",
        sources: &[
            "drivers/infiniband/hw/irdma/verbs.c (irdma_modify_qp_roce: \"modify_qp invalid \
             for qp_id=%d, old_state=0x%x, new_state=0x%x\")",
            "drivers/infiniband/core/mad.c (ib_mad_send_error: \"ib_modify_qp to RTS: %d\")",
            "drivers/infiniband/core/verbs.c (ib_modify_qp_is_ok: ERR leads to RESET or ERR only)",
        ],
    },
    Known {
        id: "irdma-qp-state-fix",
        defect: true,
        title: "irdma without \"RDMA/irdma: Update ibqp state to error if QP is already in error \
                state\" keeps a stale cached QP state",
        kernels: Kernels::Before(KernelVersion::new(7, 0, 0)),
        needs: Needs::Irdma,
        effect: "a QP already in ERR that is asked to go to ERR or RESET returns early without \
                 updating irdma's cached state, so what ib_query_qp (and the RDMA netlink QP \
                 table) reports can lag the hardware; RESET->INIT still fails. The fix is in \
                 Linux 7.0 with a Fixes: tag, so a distribution kernel may carry it earlier. \
                 It does not recover QP 1: only re-creating the device does",
        remedy: "check your kernel's changelog for the commit subject; either way keep the \
                 device in devices.allow (iser-guard's re-creation does not depend on it)",
        sources: &[
            "\"RDMA/irdma: Update ibqp state to error if QP is already in error state\" \
             (linux-rdma, 2026-03; merged for Linux 7.0)",
            "drivers/infiniband/hw/irdma/verbs.c (irdma_modify_qp_roce, the ERR/RESET branch)",
        ],
    },
    Known {
        id: "bonded-e810-no-rdma",
        defect: false,
        title: "an E810 port in a bond has no RDMA device",
        kernels: Kernels::All,
        needs: Needs::BondedIce,
        effect: "ice gives a function whose netdev is a bond member no RDMA auxiliary device \
                 (ice_lag.c; read on 6.8, Ubuntu 24.04's kernel), so no RDMA device and no \
                 iSER session can use that port, and iser-guard has nothing to re-create",
        remedy: "run iSER on unbonded ports (multipath across two ports gives the redundancy \
                 instead), or check whether your ice driver supports RDMA on a bond",
        sources: &["drivers/net/ethernet/intel/ice/ice_lag.c (6.8)"],
    },
    Known {
        id: "out-of-tree-driver",
        defect: false,
        title: "an RDMA or NIC driver built outside the kernel tree",
        kernels: Kernels::All,
        needs: Needs::OutOfTreeDriver,
        effect: "iser-guard's knowledge (driver folder names, devlink parameters, kernel \
                 messages) was read from the in-tree drivers; an out-of-tree build (Intel's \
                 ice/irdma from a DKMS package, a vendor's OFED) may differ: Intel's irdma \
                 names its driver folder irdma.gen_2 on every kernel. Nothing of it has been \
                 validated",
        remedy: "run `iser-guard doctor --active DEVICE` on a maintenance window and send the \
                 report (docs/guide/hardware.md says how); prefer the in-tree driver where it \
                 does what you need",
        sources: &[
            "/sys/module/MODULE/taint (O: out-of-tree), modules.dep (updates/ or extra/)",
            "Intel's out-of-tree irdma (driver folder irdma.gen_2)",
        ],
    },
];

/// The row with this id.
pub fn known(id: &str) -> Option<&'static Known> {
    KNOWN.iter().find(|k| k.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges() {
        let v = KernelVersion::new;
        let series = Kernels::Series {
            from: (6, 1),
            to: (6, 12),
        };
        assert!(series.contains(v(6, 1, 0)));
        assert!(series.contains(v(6, 12, 95)));
        assert!(series.contains(v(6, 8, 0)));
        assert!(!series.contains(v(6, 13, 0)));
        assert!(!series.contains(v(5, 15, 0)));
        let before = Kernels::Before(v(7, 0, 0));
        assert!(before.contains(v(6, 19, 3)));
        assert!(!before.contains(v(7, 0, 0)));
        assert!(Kernels::All.contains(v(2, 6, 32)));
    }

    #[test]
    fn every_row_has_an_id_a_source_and_a_remedy() {
        let mut ids: Vec<_> = KNOWN.iter().map(|k| k.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), KNOWN.len());
        for k in KNOWN {
            assert!(!k.sources.is_empty() && !k.remedy.is_empty(), "{}", k.id);
            assert_eq!(known(k.id), Some(k));
        }
    }
}
