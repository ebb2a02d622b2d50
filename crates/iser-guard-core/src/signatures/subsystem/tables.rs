//! Which printk prefixes, `pr_fmt` module names and call-trace `[module]` tags belong to a
//! subsystem an RDMA storage host depends on, and which [`Subsystem`] each names.
//!
//! Why tables of names and not phrases: the kernel prints a line's origin before its
//! message (the `dev_printk` driver or bus word, the module's `pr_fmt`, the module tag of a
//! call-trace frame), and those names change far more slowly than the messages. A name not
//! listed here is another subsystem's (`igc`, `ath11k`, `IPv6`, `bond0`, `ata1`): its lines
//! stay silent whatever they say mid-line.

use super::Subsystem;

/// A driver, bus/class word or module name and its subsystem.
pub(crate) struct Name {
    pub text: &'static str,
    pub subsystem: Subsystem,
}

const fn n(text: &'static str, subsystem: Subsystem) -> Name {
    Name { text, subsystem }
}

/// First words of `dev_printk`/`netdev_printk`/`ibdev_printk` prefixes (`<word> <device>: `)
/// and `pr_fmt` module prefixes (`<word>: `), and module tags of call-trace frames
/// (`[<word>]`). Kernel module names use `_`; a few `pr_fmt`s use `-`.
#[rustfmt::skip]
pub(crate) const NAMES: &[Name] = &[
    // RDMA core (drivers/infiniband/core) and its class/bus words.
    n("infiniband", Subsystem::RdmaCore),
    n("infiniband_verbs", Subsystem::RdmaCore),
    n("ib_core", Subsystem::RdmaCore),
    n("ib_mad", Subsystem::RdmaCore),
    n("ib_sa", Subsystem::RdmaCore),
    n("ib_umad", Subsystem::RdmaCore),
    n("ib_uverbs", Subsystem::RdmaCore),
    n("ib_addr", Subsystem::RdmaCore),
    n("ib_ipoib", Subsystem::RdmaCore),
    n("ib_cm", Subsystem::RdmaCm),
    n("iw_cm", Subsystem::RdmaCm),
    n("rdma_cm", Subsystem::RdmaCm),
    n("rdma_ucm", Subsystem::RdmaCm),
    // RDMA drivers (drivers/infiniband/hw, sw).
    n("mlx5_ib", Subsystem::RdmaDriver),
    n("mlx4_ib", Subsystem::RdmaDriver),
    n("irdma", Subsystem::RdmaDriver),
    n("i40iw", Subsystem::RdmaDriver),
    n("bnxt_re", Subsystem::RdmaDriver),
    n("qedr", Subsystem::RdmaDriver),
    n("hns_roce", Subsystem::RdmaDriver),
    n("hns_roce_hw_v2", Subsystem::RdmaDriver),
    n("rdma_rxe", Subsystem::RdmaDriver),
    n("ib_rxe", Subsystem::RdmaDriver),
    n("rxe", Subsystem::RdmaDriver),
    n("siw", Subsystem::RdmaDriver),
    n("erdma", Subsystem::RdmaDriver),
    n("efa", Subsystem::RdmaDriver),
    n("mana_ib", Subsystem::RdmaDriver),
    n("iw_cxgb4", Subsystem::RdmaDriver),
    n("ocrdma", Subsystem::RdmaDriver),
    n("vmw_pvrdma", Subsystem::RdmaDriver),
    n("ionic_rdma", Subsystem::RdmaDriver),
    n("rdmavt", Subsystem::RdmaDriver),
    // The NIC/firmware side of RDMA devices (PCI functions, netdevs).
    n("mlx5_core", Subsystem::Nic),
    n("mlx4_core", Subsystem::Nic),
    n("mlx4_en", Subsystem::Nic),
    n("ice", Subsystem::Nic),
    n("i40e", Subsystem::Nic),
    n("bnxt_en", Subsystem::Nic),
    n("qede", Subsystem::Nic),
    n("qed", Subsystem::Nic),
    n("hns3", Subsystem::Nic),
    n("hclge", Subsystem::Nic),
    n("cxgb4", Subsystem::Nic),
    n("ionic", Subsystem::Nic),
    n("mana", Subsystem::Nic),
    // iSER and iSCSI initiator.
    n("iser", Subsystem::Iser),
    n("ib_iser", Subsystem::Iser),
    n("libiscsi", Subsystem::Iscsi),
    n("libiscsi_tcp", Subsystem::Iscsi),
    n("iscsi_tcp", Subsystem::Iscsi),
    n("scsi_transport_iscsi", Subsystem::Iscsi),
    n("iscsi", Subsystem::Iscsi),
    // SCSI disks and hosts.
    n("sd", Subsystem::Scsi),
    n("sd_mod", Subsystem::Scsi),
    n("scsi", Subsystem::Scsi),
    n("scsi_mod", Subsystem::Scsi),
    n("scsi_dh_alua", Subsystem::Scsi),
    // Block layer and multipath.
    n("block", Subsystem::Block),
    n("blk_update_request", Subsystem::Block),
    n("print_req_error", Subsystem::Block),
    n("blk_print_req_error", Subsystem::Block),
    n("dm_multipath", Subsystem::Block),
    n("device-mapper", Subsystem::Block),
    // NVMe host (NVMe over RDMA and its PCI sibling).
    n("nvme", Subsystem::Nvme),
    n("nvme_core", Subsystem::Nvme),
    n("nvme_rdma", Subsystem::Nvme),
    n("nvme-rdma", Subsystem::Nvme),
    n("nvme_fabrics", Subsystem::Nvme),
    n("nvme-fabrics", Subsystem::Nvme),
    n("nvme_tcp", Subsystem::Nvme),
];

/// The subsystem of a name of [`NAMES`] (exact match).
pub(crate) fn subsystem_of(word: &str) -> Option<Subsystem> {
    // Most words fail on the first byte: a linear scan over ~80 short names is a handful of
    // byte compares, cheaper here than hashing.
    let first = *word.as_bytes().first()?;
    NAMES
        .iter()
        .find(|n| n.text.as_bytes()[0] == first && n.text == word)
        .map(|n| n.subsystem)
}

/// Function-name prefixes of RDMA, iSER and iSCSI code: a line that starts with
/// `<function>: ` (a `pr_*` with `__func__` and no `pr_fmt`, e.g. ib_core's
/// `__ib_cache_gid_add: unable to add gid …`) or a frame whose function starts so.
#[rustfmt::skip]
pub(crate) const FUNCTION_PREFIXES: &[(&str, Subsystem)] = &[
    ("ib_mad_", Subsystem::RdmaCore),
    ("ib_", Subsystem::RdmaCore),
    ("__ib_", Subsystem::RdmaCore),
    ("rdma_", Subsystem::RdmaCm),
    ("cma_", Subsystem::RdmaCm),
    ("cm_", Subsystem::RdmaCm),
    ("iser_", Subsystem::Iser),
    ("iscsi_iser_", Subsystem::Iser),
    ("mlx5_ib_", Subsystem::RdmaDriver),
    ("mlx4_ib_", Subsystem::RdmaDriver),
    ("irdma_", Subsystem::RdmaDriver),
    ("bnxt_re_", Subsystem::RdmaDriver),
    ("bnxt_qplib_", Subsystem::RdmaDriver),
    ("qedr_", Subsystem::RdmaDriver),
    ("hns_roce_", Subsystem::RdmaDriver),
    ("rxe_", Subsystem::RdmaDriver),
    ("siw_", Subsystem::RdmaDriver),
    ("nvme_rdma_", Subsystem::Nvme),
    ("nvmf_", Subsystem::Nvme),
];

/// The subsystem of a function name by its prefix (`__ib_cache_gid_add` → RDMA core).
pub(crate) fn subsystem_of_function(func: &str) -> Option<Subsystem> {
    by_prefix(FUNCTION_PREFIXES, func)
}

/// The subsystem of the first entry of `table` that `s` starts with.
fn by_prefix(table: &[(&str, Subsystem)], s: &str) -> Option<Subsystem> {
    table
        .iter()
        .find(|(p, _)| s.starts_with(p))
        .map(|(_, sub)| *sub)
}

/// Source directories of `WARNING: … at <path>:<line>` and `kernel BUG at <path>:<line>`.
#[rustfmt::skip]
pub(crate) const SOURCE_DIRS: &[(&str, Subsystem)] = &[
    ("drivers/infiniband/core/", Subsystem::RdmaCore),
    ("drivers/infiniband/ulp/iser/", Subsystem::Iser),
    ("drivers/infiniband/", Subsystem::RdmaDriver),
    ("drivers/net/ethernet/mellanox/", Subsystem::Nic),
    ("drivers/net/ethernet/intel/ice/", Subsystem::Nic),
    ("drivers/net/ethernet/intel/i40e/", Subsystem::Nic),
    ("drivers/net/ethernet/broadcom/bnxt/", Subsystem::Nic),
    ("drivers/net/ethernet/qlogic/", Subsystem::Nic),
    ("drivers/scsi/libiscsi", Subsystem::Iscsi),
    ("drivers/scsi/scsi_transport_iscsi", Subsystem::Iscsi),
    ("drivers/scsi/iscsi_tcp", Subsystem::Iscsi),
    ("drivers/scsi/", Subsystem::Scsi),
    ("drivers/nvme/host/", Subsystem::Nvme),
    ("block/", Subsystem::Block),
];

/// The subsystem of a kernel source path (`drivers/nvme/host/rdma.c`).
pub(crate) fn subsystem_of_path(path: &str) -> Option<Subsystem> {
    by_prefix(SOURCE_DIRS, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_is_found_and_listed_once() {
        for (i, name) in NAMES.iter().enumerate() {
            assert_eq!(
                subsystem_of(name.text),
                Some(name.subsystem),
                "{}",
                name.text
            );
            assert!(
                NAMES[..i].iter().all(|o| o.text != name.text),
                "{} twice",
                name.text
            );
        }
        assert_eq!(subsystem_of("igc"), None);
        assert_eq!(subsystem_of(""), None);
    }

    #[test]
    fn paths_and_functions_map_to_their_subsystem() {
        assert_eq!(
            subsystem_of_path("drivers/infiniband/ulp/iser/iser_verbs.c"),
            Some(Subsystem::Iser)
        );
        assert_eq!(
            subsystem_of_path("drivers/infiniband/hw/mlx5/qp.c"),
            Some(Subsystem::RdmaDriver)
        );
        assert_eq!(subsystem_of_path("net/sched/sch_generic.c"), None);
        assert_eq!(
            subsystem_of_function("__ib_cache_gid_add"),
            Some(Subsystem::RdmaCore)
        );
        assert_eq!(subsystem_of_function("ext4_end_bio"), None);
    }
}
