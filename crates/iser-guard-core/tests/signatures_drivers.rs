//! The classifier against the lines real ice/irdma hosts print around a driver's own reset,
//! and dm-multipath's path lines. Each fixture is the kernel's format string (file and
//! function named per test) filled in as the kernel prints it.

use iser_guard_core::signatures::{classify, RdmaDriver, Signature, SignatureKind};

fn sig(text: &str) -> Signature {
    classify(text, None).unwrap_or_else(|| panic!("not classified: {text:?}"))
}

#[test]
fn irdma_cqp_command_failure() {
    // drivers/infiniband/hw/irdma/utils.c irdma_handle_cqp_op: ibdev_err(…, "[%s Error]
    // [op_code=%d] status=%d waiting=%d completion_err=%d maj=0x%x min=0x%x\n",
    // irdma_cqp_cmd_names[cmd], …); ibdev_err prefixes the parent's driver, the PCI
    // function and the RDMA device.
    let s = sig(
        "ice 0000:02:00.0 rocep2s0f0: [Modify QP Cmd Error][op_code=6] status=-110 \
                 waiting=1 completion_err=0 maj=0x0 min=0x0",
    );
    assert_eq!(
        s.kind,
        SignatureKind::IrdmaCqpFailed {
            command: "Modify QP Cmd".into(),
            op_code: 6,
            status: -110,
            maj: 0,
            min: 0,
        }
    );
    assert_eq!(s.kind.rdma_driver(), Some(RdmaDriver::Irdma));
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
    assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
    // A completion error with codes.
    let s = sig(
        "ice 0000:02:00.0 rocep2s0f0: [Destroy QP Cmd Error][op_code=8] status=-5 \
                 waiting=1 completion_err=1 maj=0x8029 min=0x8003",
    );
    assert!(matches!(
        s.kind,
        SignatureKind::IrdmaCqpFailed {
            op_code: 8,
            status: -5,
            maj: 0x8029,
            min: 0x8003,
            ..
        }
    ));
}

#[test]
fn irdma_cqp_drifted_format_is_reported_as_drift() {
    let s = sig("ice 0000:02:00.0 rocep2s0f0: [Modify QP Cmd Error][op_code=6] status=timeout");
    assert!(
        matches!(s.kind, SignatureKind::UnknownVariant { .. }),
        "{s:?}"
    );
}

#[test]
fn irdma_modify_qp_suspend_timeout() {
    // drivers/infiniband/hw/irdma/verbs.c irdma_wait_for_suspend: ibdev_warn(…,
    // "modify_qp timed out waiting for suspend. qp_id = %d, last_ae = 0x%x\n", …).
    let s = sig(
        "ice 0000:02:00.0 rocep2s0f0: modify_qp timed out waiting for suspend. \
                 qp_id = 17, last_ae = 0x503",
    );
    assert_eq!(
        s.kind,
        SignatureKind::IrdmaSuspendTimeout {
            qp: 17,
            last_ae: 0x503
        }
    );
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
}

#[test]
fn irdma_requests_a_reset() {
    // drivers/infiniband/hw/irdma/main.c (6.1–6.14) and icrdma_if.c (6.15+)
    // irdma_request_reset: ibdev_warn(&rf->iwdev->ibdev, "Requesting a reset\n").
    let s = sig("ice 0000:02:00.0 rocep2s0f0: Requesting a reset");
    assert_eq!(
        s.kind,
        SignatureKind::DriverResetRequested {
            driver: RdmaDriver::Irdma
        }
    );
    assert_eq!(s.device.rdma_dev.as_deref(), Some("rocep2s0f0"));
    assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
    // Not a reset request: other drivers' words, or the phrase inside another message.
    assert_eq!(classify("usb 1-1: Requesting a reset", None), None);
    assert_eq!(
        classify(
            "ice 0000:02:00.0 rocep2s0f0: Requesting a reset of the PHY later",
            None
        ),
        None
    );
}

#[test]
fn ice_rebuild_failure() {
    // drivers/net/ethernet/intel/ice/ice_main.c ice_rebuild: dev_err(dev, "Rebuild failed,
    // unload and reload driver\n").
    let s = sig("ice 0000:02:00.0: Rebuild failed, unload and reload driver");
    assert_eq!(s.kind, SignatureKind::NicRebuildFailed);
    assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
    assert_eq!(s.device.driver.as_deref(), Some("ice"));
}

#[test]
fn ice_safe_mode() {
    // ice_main.c ice_probe: dev_err(dev, "Package download failed. Advanced features
    // disabled - Device now in Safe Mode\n"); ice_load_pkg: "The DDP package file was not
    // found or could not be read. Entering Safe Mode\n".
    for line in [
        "ice 0000:02:00.0: Package download failed. Advanced features disabled - Device now in Safe Mode",
        "ice 0000:02:00.0: The DDP package file was not found or could not be read. Entering Safe Mode",
    ] {
        let s = sig(line);
        assert_eq!(s.kind, SignatureKind::NicSafeMode, "{line}");
        assert_eq!(s.device.pci.as_deref(), Some("0000:02:00.0"));
    }
    assert_eq!(classify("i915 0000:00:02.0: Safe Mode", None), None);
}

#[test]
fn dm_multipath_path_failed_and_reinstated() {
    // drivers/md/dm-mpath.c fail_path: DMWARN("%s: Failing path %s.",
    // dm_table_device_name(m->ti->table), pgpath->path.dev->name); reinstate_path:
    // DMWARN("%s: Reinstating path %s.", …); DMWARN prints "device-mapper: multipath: ".
    let s = sig("device-mapper: multipath: 253:0: Failing path 8:16.");
    assert_eq!(
        s.kind,
        SignatureKind::MultipathPath {
            map: Some("253:0".into()),
            path: "8:16".into(),
            failed: true
        }
    );
    let s = sig("device-mapper: multipath: 253:0: Reinstating path 8:16.");
    assert_eq!(
        s.kind,
        SignatureKind::MultipathPath {
            map: Some("253:0".into()),
            path: "8:16".into(),
            failed: false
        }
    );
    // Kernels before the map name was added (4.x): DMWARN("Failing path %s.", …).
    let s = sig("device-mapper: multipath: Failing path 8:32.");
    assert_eq!(
        s.kind,
        SignatureKind::MultipathPath {
            map: None,
            path: "8:32".into(),
            failed: true
        }
    );
    // Other multipath messages are not path events.
    assert_eq!(
        classify(
            "device-mapper: multipath: 253:0: queue_if_no_path enabled",
            None
        ),
        None
    );
}

#[test]
fn merged_anchors_still_find_their_messages() {
    // The prefilter's anchors were shared to keep at most 32 (classify.rs): each message
    // under a shared anchor still classifies.
    let kasan = sig("BUG: KASAN: use-after-free in iser_conn_terminate+0x1c/0x90 [ib_iser]");
    assert!(
        matches!(kasan.kind, SignatureKind::KernelBug { .. }),
        "{kasan:?}"
    );
    let bug = sig("kernel BUG at drivers/infiniband/core/cq.c:345!");
    assert!(
        matches!(bug.kind, SignatureKind::KernelBug { .. }),
        "{bug:?}"
    );
    assert!(matches!(
        sig("ice 0000:02:00.0 ens1f0: NIC Link is Down").kind,
        SignatureKind::NetdevLinkDown
    ));
    assert!(matches!(
        sig("mlx5_core 0000:03:00.0 ens2f0np0: Link down").kind,
        SignatureKind::NetdevLinkDown
    ));
    assert!(matches!(
        sig("sd 2:0:0:0: rejecting I/O to offline device").kind,
        SignatureKind::ScsiRejectingOffline
    ));
    assert!(matches!(
        sig("Buffer I/O error on dev sdb, logical block 0, lost async page write").kind,
        SignatureKind::BufferIoError { .. }
    ));
    assert!(matches!(
        sig("blk_update_request: I/O error, dev sdb, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0").kind,
        SignatureKind::BlockIoError { .. }
    ));
    // "DEBUG" contains the BUG anchor: not a bug report.
    assert_eq!(classify("usb 1-1: DEBUG mode enabled", None), None);
}
