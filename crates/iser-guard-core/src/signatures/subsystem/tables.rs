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
    n("hfi1", Subsystem::RdmaDriver),
    n("ib_qib", Subsystem::RdmaDriver),
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
    // drivers/net/ethernet/mellanox/mlxfw: firmware flashing of mlx5 adapters (`mlxfw: …`).
    n("mlxfw", Subsystem::Nic),
    // iSER and iSCSI initiator.
    n("iser", Subsystem::Iser),
    n("ib_iser", Subsystem::Iser),
    n("libiscsi", Subsystem::Iscsi),
    n("libiscsi_tcp", Subsystem::Iscsi),
    n("iscsi_tcp", Subsystem::Iscsi),
    n("scsi_transport_iscsi", Subsystem::Iscsi),
    n("iscsi", Subsystem::Iscsi),
    n("qedi", Subsystem::Iscsi),
    // Offload iSCSI initiators (drivers/scsi/cxgbi, bnx2i, be2iscsi, qla4xxx): the same
    // sessions through an adapter's own iSCSI engine.
    n("libcxgbi", Subsystem::Iscsi),
    n("cxgb3i", Subsystem::Iscsi),
    n("cxgb4i", Subsystem::Iscsi),
    n("bnx2i", Subsystem::Iscsi),
    n("be2iscsi", Subsystem::Iscsi),
    n("qla4xxx", Subsystem::Iscsi),
    // The SRP initiator (drivers/infiniband/ulp/srp) is a SCSI low-level driver over RDMA:
    // its lines concern the SCSI hosts and disks of its targets.
    n("ib_srp", Subsystem::Scsi),
    n("scsi_transport_srp", Subsystem::Scsi),
    // The LIO target (drivers/target, its iSCSI fabric and iSER's target side): a host that
    // also exports storage, or a lab box that is both ends, logs these.
    n("target_core_mod", Subsystem::IscsiTarget),
    n("target_core_iblock", Subsystem::IscsiTarget),
    n("target_core_file", Subsystem::IscsiTarget),
    n("target_core_pscsi", Subsystem::IscsiTarget),
    n("target_core_user", Subsystem::IscsiTarget),
    n("iscsi_target_mod", Subsystem::IscsiTarget),
    n("ib_isert", Subsystem::IscsiTarget),
    n("isert", Subsystem::IscsiTarget),
    n("tcm_loop", Subsystem::IscsiTarget),
    n("target_core_rbd", Subsystem::IscsiTarget),
    // LIO's SRP fabric (drivers/infiniband/ulp/srpt): `pr_fmt` is "ib_srpt " + message,
    // without a colon.
    n("ib_srpt", Subsystem::IscsiTarget),
    // SCSI disks and hosts.
    n("sd", Subsystem::Scsi),
    n("sd_mod", Subsystem::Scsi),
    n("scsi", Subsystem::Scsi),
    n("scsi_mod", Subsystem::Scsi),
    n("scsi_dh_alua", Subsystem::Scsi),
    // The device handlers' own names (scsi_dh_alua.c ALUA_DH_NAME, scsi_dh_rdac.c
    // RDAC_NAME): `alua: device handler registered`, `rdac: LUN 0 (IOSHIP) (owned)`.
    n("alua", Subsystem::Scsi),
    n("rdac", Subsystem::Scsi),
    // scsi_dh_emc.c CLARIION_NAME and scsi_dh_hp_sw.c HP_SW_NAME: `emc: device handler
    // registered`, `hp_sw: device handler registered`.
    n("emc", Subsystem::Scsi),
    n("hp_sw", Subsystem::Scsi),
    // Block layer and multipath.
    n("block", Subsystem::Block),
    n("blk_update_request", Subsystem::Block),
    n("print_req_error", Subsystem::Block),
    n("blk_print_req_error", Subsystem::Block),
    // Kernels before 4.12 (block/blk-core.c end_request, "end_request: I/O error, dev sdc,
    // sector 123").
    n("end_request", Subsystem::Block),
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
    n("nvme-tcp", Subsystem::Nvme),
    n("nvme_auth", Subsystem::Nvme),
    n("nvme_keyring", Subsystem::Nvme),
    // NFS over RDMA: the client transport's `pr_fmt`-less `pr_err("rpcrdma: …")` (verbs.c,
    // frwr_ops.c, transport.c), the module names as frame tags, and the server transport's
    // `svcrdma: …` (svc_rdma_transport.c, svc_rdma_rw.c). The NFS client's `nfs: ` is not
    // here: it opens a line ([`line_prefix_subsystem`]) but a frame tagged `[nfs]` is
    // fs/nfs code, not the RDMA transport.
    n("rpcrdma", Subsystem::Nfs),
    n("xprtrdma", Subsystem::Nfs),
    n("svcrdma", Subsystem::Nfs),
];

/// The subsystem of a `<word>: ` line prefix: a name of [`NAMES`], or `nfs`, the NFS
/// client's RPC program name that net/sunrpc/clnt.c prints before `server … not
/// responding, still trying` and `server … OK`.
pub(crate) fn line_prefix_subsystem(word: &str) -> Option<Subsystem> {
    subsystem_of(word).or_else(|| (word == "nfs").then_some(Subsystem::Nfs))
}

/// How the kernel and rdma-core name RDMA devices: the drivers' `ib_register_device` name
/// templates (`mlx5_%d`, `mlx5_bond_%d`, `irdma%d`, `bnxt_re%d`, `qedr%d`, `hns_%d`,
/// `efa_%d`, `erdma_%d`, `mana_%d`, `siw_…`/`rxe_…` as the user names them) and
/// rdma-core's udev naming (`rocep33s0f0`, `roceo1`, `ibp3s0`, `iwp2s0`, …: the `NAME_*`
/// policies of kernel-boot/rdma_rename.c).
#[rustfmt::skip]
const RDMA_DEV_PREFIXES: &[&str] = &[
    "mlx5_", "mlx4_", "irdma", "i40iw", "bnxt_re", "qedr", "hns_", "efa_", "erdma_",
    "mana_", "ionic_", "ocrdma", "vmw_pvrdma", "cxgb4_", "hfi1_", "qib", "usnic_", "rxe",
    "siw", "roce", "ibp", "ibs", "ibo", "iwp", "iws", "iwo",
];

/// True when `name` is an RDMA device name ([`RDMA_DEV_PREFIXES`], then word characters
/// only, at most 64 bytes as IB_DEVICE_NAME_MAX allows).
pub(crate) fn looks_like_rdma_dev(name: &str) -> bool {
    name.len() <= 64
        && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'_')
        && RDMA_DEV_PREFIXES
            .iter()
            .any(|p| name.len() > p.len() && name.starts_with(p))
}

/// Names whose `pr_fmt` is `"<name> "`, without a colon (drivers/infiniband/ulp/srpt/
/// ib_srpt.c).
pub(crate) const SPACE_PREFIXED: &[&str] = &["ib_srpt"];

/// The subsystem of a name of [`NAMES`] (exact match), or of an auxiliary-bus driver whose
/// name is `<module>.<driver>` (`mlx5_core.sf`, `mlx5_ib.rdma`, `irdma.gen_2`: the
/// auxiliary bus names a driver after its module, drivers/base/auxiliary.c).
pub(crate) fn subsystem_of(word: &str) -> Option<Subsystem> {
    // Most words fail on the first byte: a linear scan over ~90 short names is a handful of
    // byte compares, cheaper here than hashing.
    let first = *word.as_bytes().first()?;
    let exact = |w: &str| {
        NAMES
            .iter()
            .find(|n| n.text.as_bytes()[0] == first && n.text == w)
            .map(|n| n.subsystem)
    };
    exact(word).or_else(|| {
        let (module, driver) = word.split_once('.')?;
        let ok = !driver.is_empty()
            && driver
                .bytes()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.'));
        // `nfs.x` is no driver; only the RDMA and NIC modules register auxiliary drivers.
        ok.then(|| exact(module))
            .flatten()
            .filter(|s| matches!(s, Subsystem::Nic | Subsystem::RdmaDriver))
    })
}

/// Function-name prefixes of RDMA, iSER and iSCSI code: a line that starts with
/// `<function>: ` (a `pr_*` with `__func__` and no `pr_fmt`, e.g. ib_core's
/// `__ib_cache_gid_add: unable to add gid …`) or a frame whose function starts so.
#[rustfmt::skip]
pub(crate) const FUNCTION_PREFIXES: &[(&str, Subsystem)] = &[
    ("ib_mad_", Subsystem::RdmaCore),
    ("ib_", Subsystem::RdmaCore),
    ("__ib_", Subsystem::RdmaCore),
    // ib_core's iWARP port mapper client (iwpm_msg.c, iwpm_util.c: `pr_info("%s: …",
    // __func__)`).
    ("iwpm_", Subsystem::RdmaCore),
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
    // Other RDMA drivers' function names (i40iw_pr_err = pr_err("%s: " fmt, __func__),
    // iw_cxgb4's c4iw_, rdmavt's rvt_, …): their `__func__` lines and untagged frames.
    ("i40iw_", Subsystem::RdmaDriver),
    ("c4iw_", Subsystem::RdmaDriver),
    ("rvt_", Subsystem::RdmaDriver),
    ("hfi1_", Subsystem::RdmaDriver),
    ("efa_", Subsystem::RdmaDriver),
    ("erdma_", Subsystem::RdmaDriver),
    ("mana_ib_", Subsystem::RdmaDriver),
    ("ocrdma_", Subsystem::RdmaDriver),
    ("pvrdma_", Subsystem::RdmaDriver),
    // qed/qede print `[%s:%d(%s)]` with __func__ (qed.h DP_ERR/DP_NOTICE/DP_INFO).
    ("qed_", Subsystem::Nic),
    ("qede_", Subsystem::Nic),
    ("qedi_", Subsystem::Iscsi),
    ("isert_", Subsystem::IscsiTarget),
    ("iscsit_", Subsystem::IscsiTarget),
    ("hns_roce_", Subsystem::RdmaDriver),
    ("rxe_", Subsystem::RdmaDriver),
    ("siw_", Subsystem::RdmaDriver),
    ("nvme_rdma_", Subsystem::Nvme),
    ("nvmf_", Subsystem::Nvme),
    ("nvme_", Subsystem::Nvme),
    // NFS over RDMA (net/sunrpc/xprtrdma): client, server and FRWR registration.
    ("rpcrdma_", Subsystem::Nfs),
    ("xprt_rdma_", Subsystem::Nfs),
    ("svc_rdma_", Subsystem::Nfs),
    ("frwr_", Subsystem::Nfs),
    ("ipoib_", Subsystem::RdmaCore),
    ("mlx5e_", Subsystem::Nic),
    ("mlx5_", Subsystem::Nic),
    ("mlx4_", Subsystem::Nic),
    ("srpt_", Subsystem::IscsiTarget),
    ("srp_", Subsystem::Scsi),
    ("iscsi_target_", Subsystem::IscsiTarget),
    ("iscsi_", Subsystem::Iscsi),
    // The SCSI midlayer (`scsi_io_completion_action: 3 callbacks suppressed`) and the
    // block layer (`blk_cloned_rq_check_limits: over max size limit`).
    ("scsi_", Subsystem::Scsi),
    ("blk_", Subsystem::Block),
    // block/partitions/ldm.c ldm_crit/ldm_error: `printk("%s(): " f, __func__)`, the
    // partition scan of a disk that does not answer (`ldm_validate_partition_table():
    // Disk read failed.`).
    ("ldm_", Subsystem::Block),
    // fs/buffer.c's ratelimit of `Buffer I/O error …` (lib/ratelimit.c: `buffer_io_error:
    // 3055 callbacks suppressed`).
    ("buffer_io_error", Subsystem::Block),
];

/// The subsystem of a function name by its prefix (`__ib_cache_gid_add` → RDMA core).
pub(crate) fn subsystem_of_function(func: &str) -> Option<Subsystem> {
    by_prefix(FUNCTION_PREFIXES, func)
}

/// The subsystem of the first entry of `table` that `s` starts with.
fn by_prefix(table: &[(&str, Subsystem)], s: &str) -> Option<Subsystem> {
    // The first byte rules out all but a few entries before any longer compare: this runs
    // on the first word of every line the cheap pretest sees.
    let first = *s.as_bytes().first()?;
    table
        .iter()
        .find(|(p, _)| p.as_bytes()[0] == first && s.starts_with(p))
        .map(|(_, sub)| *sub)
}

/// Source directories of `WARNING: … at <path>:<line>` and `kernel BUG at <path>:<line>`.
#[rustfmt::skip]
pub(crate) const SOURCE_DIRS: &[(&str, Subsystem)] = &[
    ("drivers/infiniband/core/", Subsystem::RdmaCore),
    ("drivers/infiniband/ulp/iser/", Subsystem::Iser),
    ("drivers/infiniband/ulp/isert/", Subsystem::IscsiTarget),
    ("drivers/infiniband/ulp/srpt/", Subsystem::IscsiTarget),
    ("drivers/infiniband/ulp/srp/", Subsystem::Scsi),
    ("drivers/infiniband/ulp/ipoib/", Subsystem::RdmaCore),
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
    ("drivers/target/", Subsystem::IscsiTarget),
    ("block/", Subsystem::Block),
    ("net/sunrpc/xprtrdma/", Subsystem::Nfs),
];

/// The subsystem of a kernel source path (`drivers/nvme/host/rdma.c`).
pub(crate) fn subsystem_of_path(path: &str) -> Option<Subsystem> {
    by_prefix(SOURCE_DIRS, path)
}

/// Function-name prefixes a call-trace frame may carry without a `[module]` tag (the module
/// built in, or the tag cut off by a renderer): only names no other subsystem uses.
#[rustfmt::skip]
pub(crate) const UNTAGGED_FRAME_PREFIXES: &[(&str, Subsystem)] = &[
    ("ib_", Subsystem::RdmaCore),
    ("__ib_", Subsystem::RdmaCore),
    ("rdma_", Subsystem::RdmaCm),
    ("cma_", Subsystem::RdmaCm),
    ("iser_", Subsystem::Iser),
    ("iscsi_iser_", Subsystem::Iser),
    ("isert_", Subsystem::IscsiTarget),
    ("iscsit_", Subsystem::IscsiTarget),
    ("mlx5_ib_", Subsystem::RdmaDriver),
    ("mlx4_ib_", Subsystem::RdmaDriver),
    ("mlx5_", Subsystem::Nic),
    ("mlx4_", Subsystem::Nic),
    ("irdma_", Subsystem::RdmaDriver),
    ("bnxt_re_", Subsystem::RdmaDriver),
    ("bnxt_qplib_", Subsystem::RdmaDriver),
    ("qedr_", Subsystem::RdmaDriver),
    ("i40iw_", Subsystem::RdmaDriver),
    ("c4iw_", Subsystem::RdmaDriver),
    ("rvt_", Subsystem::RdmaDriver),
    ("hfi1_", Subsystem::RdmaDriver),
    ("nvme_rdma_", Subsystem::Nvme),
    ("nvme_tcp_", Subsystem::Nvme),
    ("nvmf_", Subsystem::Nvme),
    ("mlx5e_", Subsystem::Nic),
    ("ipoib_", Subsystem::RdmaCore),
    ("rpcrdma_", Subsystem::Nfs),
    ("xprt_rdma_", Subsystem::Nfs),
    ("svc_rdma_", Subsystem::Nfs),
    ("iscsi_sw_tcp_", Subsystem::Iscsi),
    ("iscsi_tcp_", Subsystem::Iscsi),
];

/// The subsystem of a frame's function without a module tag.
pub(crate) fn subsystem_of_untagged_frame(func: &str) -> Option<Subsystem> {
    by_prefix(UNTAGGED_FRAME_PREFIXES, func)
}

/// How LIO's messages start: iscsi_target_mod and target_core_mod print with a bare
/// `pr_err`/`pr_warn` and no module prefix, so their first words are what names them
/// (format strings of drivers/target/iscsi/iscsi_target_login.c, _nego.c, _erl0.c,
/// _util.c, target_core_transport.c, target_core_tmr.c, target_core_device.c).
#[rustfmt::skip]
pub(crate) const TARGET_OPENINGS: &[&str] = &[
    // `iSCSI` + `/`, `_`, ` - ` or a capitalised word: see [`is_target_iscsi_opening`].
    "TARGET_CORE[",
    "Target_Core_ConfigFS: ",
    // iscsi_target_util.c iscsit_handle_nopin_response_timeout, iscsi_target_erl0.c
    // iscsit_handle_time2retain_timeout, iscsi_target_erl1.c.
    "Did not receive response to NOPIN",
    "Time2Retain timer expired",
    "Moving to TARG_",
    // target_core_device.c se_dev_align_max_sectors, target_core_configfs.c
    // target_init_dbroot.
    "Rounding down aligned max_sectors",
    "db_root: ",
    "Unable to locate ITT",
    "Unable to locate Target",
    "ABORT_TASK: ",
    "LUN_RESET: ",
    "TMR_",
    "Unable to recover from DataOut timeout",
    "Unable to accept connection for",
    "Initiator is requesting CSG",
    "rx_data returned",
    "tx_data returned",
    "Detected MISCOMPARE",
];

/// True when `t` opens with one of [`TARGET_OPENINGS`] (the first byte picks the few to
/// compare).
pub(crate) fn is_target_opening(t: &str) -> bool {
    let Some(&first) = t.as_bytes().first() else {
        return false;
    };
    if !matches!(
        first,
        b'i' | b'T' | b'A' | b'L' | b'U' | b'I' | b'r' | b't' | b'D' | b'M' | b'R' | b'd'
    ) {
        return false;
    }
    if first == b'i' && is_target_iscsi_opening(t) {
        return true;
    }
    TARGET_OPENINGS
        .iter()
        .any(|o| o.as_bytes()[0] == first && t.starts_with(o))
}

/// A kernel line that opens with the protocol's name followed by `/`, `_`, ` - ` or a
/// capitalised word is the target's: LIO names its objects so (`iSCSI Login timeout on
/// Network Portal …`, `iSCSI Login negotiation failed.`, `iSCSI Initiator Node: … is not
/// authorized …`, `iSCSI Target Portal Group …`, `iSCSI/<initiator>: Unsupported SCSI
/// Opcode …`, `iSCSI_TPG[1] - …`: iscsi_target_login.c, _nego.c, _tpg.c,
/// target_core_transport.c), while the initiator (libiscsi, scsi_transport_iscsi) prints
/// behind ` connectionN:M: `, ` sessionN: `, `scsi hostN: ` or `iscsi: `.
fn is_target_iscsi_opening(t: &str) -> bool {
    let Some(rest) = t.strip_prefix("iSCSI") else {
        return false;
    };
    rest.starts_with(['/', '_'])
        || rest.starts_with(" - ")
        // A vendor `pr_fmt` of "iSCSI:" __FILE__ ":" __LINE__ ":" __func__, on LIO's own
        // files: `iSCSI:target_core_transport.c:1959:target_setup_cmd_from_cdb …`.
        || rest
            .strip_prefix(':')
            .is_some_and(|r| r.starts_with("target_core_") || r.starts_with("iscsi_target"))
        || rest
            .strip_prefix(' ')
            .and_then(|r| r.as_bytes().first())
            .is_some_and(u8::is_ascii_uppercase)
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
