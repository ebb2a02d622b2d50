//! Unit tests of the subsystem layer on real published lines (the development set,
//! eval/kernel-lines/dev.tsv, wrappers removed) and on the kernel's prefix formats.

use super::*;

fn rec(t: &str) -> SubsystemEvent {
    recognise(t, None, None).unwrap_or_else(|| panic!("not recognised: {t}"))
}

#[test]
fn dev_printk_prefixes_name_subsystem_and_device() {
    let e = rec("mlx5_core 0000:01:00.0: handle_hca_cap failed");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.device.pci.as_deref(), Some("0000:01:00.0"));
    assert_eq!(e.message, "handle_hca_cap failed");
    assert_eq!(e.level, 3);
    assert!(!e.level_from_record);

    let e =
        rec("infiniband rocep33s0f0: mlx5_poll_one:527:(pid 0): Responder error cqe on cqn 0x406:");
    assert_eq!(e.subsystem, Subsystem::RdmaCore);
    assert_eq!(e.device.rdma_dev.as_deref(), Some("rocep33s0f0"));

    let e = rec("nvme nvme1: Connect rejected: status 8 (invalid service ID).");
    assert_eq!(e.subsystem, Subsystem::Nvme);
    assert_eq!(e.device.other.as_deref(), Some("nvme1"));
    assert_eq!(e.device.label(), "nvme1");

    let e = rec("block nvme0n4: no path available - requeuing I/O");
    assert_eq!(e.subsystem, Subsystem::Block);
    assert_eq!(e.device.disk.as_deref(), Some("nvme0n4"));
    assert_eq!(e.level, 4);

    let e = rec("nvme 10000:e1:00.0: PCI INT A: not connected");
    assert_eq!(e.device.pci.as_deref(), Some("10000:e1:00.0"));

    let e = rec("sd 5:0:0:1: [sde] tag#99 Sense Key : Medium Error [current] ");
    assert_eq!(e.subsystem, Subsystem::Scsi);
    assert_eq!(e.device.scsi_hctl.as_deref(), Some("5:0:0:1"));
    assert_eq!(e.device.disk.as_deref(), Some("sde"));

    let e = rec("scsi host26: iSCSI Initiator over TCP/IP");
    assert_eq!(e.device.scsi_host, Some(26));

    let e = rec("mlx4_core 0000:86:00.0 ens803: renamed from eth0");
    assert_eq!(e.device.pci.as_deref(), Some("0000:86:00.0"));
    assert_eq!(e.subsystem, Subsystem::Nic);
}

#[test]
fn module_and_function_prefixes() {
    let e = rec("mlx5_core: probe of 0000:01:00.0 failed with error -22");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.device.pci.as_deref(), Some("0000:01:00.0"));

    let e = rec("mlx4_en: 0000:86:00.0: Port 1: Using 32 TX rings");
    assert_eq!(e.device.pci.as_deref(), Some("0000:86:00.0"));
    assert_eq!(e.message, "Port 1: Using 32 TX rings");

    let e = rec("mlx4_en: enp1s0: Link Down");
    assert_eq!(e.device.netdev.as_deref(), Some("enp1s0"));
    assert_eq!(e.level, 4);

    assert_eq!(rec("rdma_rxe: null vaddr").subsystem, Subsystem::RdmaDriver);
    assert_eq!(
        rec("<mlx4_ib> mlx4_ib_add: counter index 3 for port 1 allocated 1").subsystem,
        Subsystem::RdmaDriver
    );
    // ib_core's cache.c prints `__func__` without a module prefix (format string
    // "%s: unable to add gid %pI6 error=%d\n").
    let e = rec(
        "__ib_cache_gid_add: unable to add gid fe80:0000:0000:0000:0e42:a1ff:fe52:1f48 error=-28",
    );
    assert_eq!(e.subsystem, Subsystem::RdmaCore);
    assert_eq!(e.level, 3);
    assert_eq!(
        rec("blk_update_request: critical medium error, dev sde, sector 4595720 op 0x0:(READ) flags 0x80700 phys_seg 1 prio class 0").subsystem,
        Subsystem::Block
    );
    let e = rec("Buffer I/O error on device sde, logical block 574464");
    assert_eq!(e.device.disk.as_deref(), Some("sde"));
}

#[test]
fn partition_lines_of_scsi_and_nvme_disks() {
    // block/partitions/check.c prints " %s: unable to read partition table" and the
    // partition list after the disk name.
    let e = rec(" sdb: unable to read partition table");
    assert_eq!(e.subsystem, Subsystem::Block);
    assert_eq!(e.device.disk.as_deref(), Some("sdb"));
    assert_eq!(e.level, 3);
    assert_eq!(
        rec("nvme0n1: p1 p2").device.disk.as_deref(),
        Some("nvme0n1")
    );
    assert!(recognise(" vda: vda1", None, None).is_none());
}

#[test]
fn iscsi_class_devices_with_and_without_the_leading_blank() {
    for t in [
        " connection1:0: detected conn error (1020)",
        "connection10:0: ping timeout of 15 secs expired, recv timeout 5, last rx 10236428121, last ping ",
        "kernel: connection3:0: ping timeout of 5 secs expired, recv timeout 5, last rx 36174282912, last ping 36174287936, now 36174292992",
    ] {
        let e = rec(t);
        assert_eq!(e.subsystem, Subsystem::Iscsi, "{t}");
        assert!(e.device.iscsi_conn.is_some(), "{t}");
    }
    let e = rec(" session1: session recovery timed out after 120 secs");
    assert_eq!(e.device.iscsi_session, Some(1));
    assert_eq!(e.device.iscsi_conn, None);
}

#[test]
fn frames_reports_and_watchdog_lines() {
    let e = rec(" [<ffffffffa068ba11>] iscsi_iser_ep_disconnect+0xb1/0x120 [ib_iser]");
    assert_eq!(e.subsystem, Subsystem::Iser);
    assert_eq!(
        e.shape,
        LineShape::Frame {
            function: "iscsi_iser_ep_disconnect".into(),
            module: Some("ib_iser".into())
        }
    );
    let e = rec("WARNING: CPU: 3 PID: 1416 at drivers/nvme/host/rdma.c:1394 nvme_rdma_map_data+0x561/0x630 [nvme_rdma]");
    assert_eq!(e.subsystem, Subsystem::Nvme);
    assert!(
        matches!(e.shape, LineShape::ReportHeader { ref location, .. } if location == "drivers/nvme/host/rdma.c:1394")
    );
    let e = rec("NETDEV WATCHDOG: eth1 (mlx4_core): transmit queue 0 timed out");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.device.netdev.as_deref(), Some("eth1"));
    let e = rec("RIP: 0010:ib_dealloc_pd_user+0x1c/0x80 [ib_core]");
    assert_eq!(e.subsystem, Subsystem::RdmaCore);
    // A frame of a module outside these subsystems, and a tag that is no module.
    assert!(recognise(
        "RIP: 0010:ku_setup_inst_retired+0x29/0xf0 [kutrace_mod]",
        None,
        None
    )
    .is_none());
    assert!(recognise("Workqueue: ksmbd-io ksmbd_ipc_init [ksmbd]", None, None).is_none());
}

#[test]
fn unrelated_lines_stay_silent_whatever_they_say_mid_line() {
    for t in [
        "pcieport 10000:e0:1c.4: can't derive routing for PCI INT A",
        "IPv6: ADDRCONF(NETDEV_UP): ens803: link is not ready",
        "igc 0000:05:00.0 eth5: NIC Link is Down",
        "br-lan: port 6(phy0-ap0) entered disabled state",
        "ath11k c000000.wifi phy0-ap0: left allmulticast mode",
        "bond0: Releasing backup interface ens1f0",
        "ata1: SATA link down (SStatus 0 SControl 300)",
        "usb 1-6: Manufacturer: Realtek",
        "SELinux:  policy capability genfs_seclabel_symlinks=1",
        "(NULL net_device): hw csum failure",
        "GLBL_DSC_ERR_STS_RQ_CANCEL               [   22]   0x0",
        "EXT4-fs warning (device sde): ext4_end_bio:344: I/O error 7 writing to inode 131164",
        "NETDEV WATCHDOG: eth5 (igc): transmit queue 0 timed out",
        "Modules linked in: ib_iser libiscsi scsi_transport_iscsi rdma_rxe ib_core",
        "",
        "   ",
        "sd",
        "nvme nvme1",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t:?}");
    }
}

#[test]
fn the_records_level_wins_and_the_dictionary_completes_the_device() {
    let e = recognise(
        "mlx5_core 0000:61:00.0: wait_func:1132:(pid 141181): CREATE_DCT(0x710) timeout. Will cause a leak of a command resource",
        Some(3),
        Some("+pci:0000:61:00.0"),
    )
    .unwrap();
    assert_eq!(e.level, 3);
    assert!(e.level_from_record);
    assert_eq!(e.device.pci.as_deref(), Some("0000:61:00.0"));
    let e = recognise(
        "infiniband mlx5_0: added ens1f0np0",
        Some(6),
        Some("+pci:0000:08:00.0"),
    )
    .unwrap();
    assert_eq!(e.device.rdma_dev.as_deref(), Some("mlx5_0"));
    assert_eq!(e.device.pci.as_deref(), Some("0000:08:00.0"));
}

#[test]
fn fatal_device_errors_are_flagged_and_explained_with_what_the_driver_does() {
    // mlx5 health.c: mlx5_core_err(dev, "Fatal error %u detected\n", fatal_error), printed
    // with mlx5_core_err's "func:line:(pid N): " after the dev_printk prefix.
    let e = rec("mlx5_core 0000:08:00.0: poll_health:800:(pid 0): Fatal error 1 detected");
    assert!(e.fatal_device_error);
    assert_eq!(e.level, 2);
    let x = explain_event(&e);
    assert!(
        x.driver_action
            .as_deref()
            .unwrap()
            .contains("health recovery"),
        "{x:?}"
    );
    assert!(
        x.meaning.contains("fatal firmware or device error"),
        "{x:?}"
    );
    let e = rec("mlx4_core 0000:00:05.0: Internal error detected:");
    assert!(e.fatal_device_error);
    assert!(explain_event(&e)
        .driver_action
        .unwrap()
        .contains("internal_err_reset"));
    // The same words from the block layer are no device error.
    assert!(!rec("blk_update_request: Fatal error detected, dev sdb, sector 0").fatal_device_error);
    // A record's level is kept, but a fatal device error is at least critical.
    assert_eq!(
        recognise(
            "mlx5_core 0000:08:00.0: poll_health:800:(pid 0): Fatal error 1 detected",
            Some(3),
            None
        )
        .unwrap()
        .level,
        2
    );
}

#[test]
fn every_subsystem_has_an_explanation_naming_what_to_look_at() {
    for s in Subsystem::ALL {
        let ev = SubsystemEvent {
            subsystem: s,
            origin: Some("x".into()),
            device: NamedDevices::default(),
            level: 3,
            level_from_record: false,
            shape: LineShape::Message,
            message: "something failed".into(),
            fatal_device_error: false,
        };
        let x = explain_event(&ev);
        assert!(x.next.contains('`'), "{s}: {x:?}");
        assert!(x.meaning.starts_with("an operation on"), "{s}: {x:?}");
        assert!(!s.name().is_empty());
    }
}

#[test]
fn serde_round_trip() {
    let e = rec(" [<ffffffffa068ba11>] iscsi_iser_ep_disconnect+0xb1/0x120 [ib_iser]");
    let j = serde_json::to_string(&e).unwrap();
    assert!(j.contains("\"subsystem\":\"iser\""), "{j}");
    assert_eq!(serde_json::from_str::<SubsystemEvent>(&j).unwrap(), e);
}

#[test]
fn the_cheap_pretest_never_rejects_a_line_recognise_takes() {
    for t in [
        "mlx5_core 0000:01:00.0: handle_hca_cap failed",
        " connection1:0: detected conn error (1020)",
        " [<ffffffffa068ba11>] iscsi_iser_ep_disconnect+0xb1/0x120 [ib_iser]",
        " iser_free_ib_conn_res+0x65/0x1a0 [ib_iser]",
        "nvme0n1: p1 p2",
        " sdb: unable to read partition table",
        "__ib_cache_gid_add: unable to add gid fe80::1 error=-28",
        "NETDEV WATCHDOG: eth1 (mlx4_core): transmit queue 0 timed out",
        "kernel: connection3:0: ping timeout of 5 secs expired",
        "<mlx4_ib> mlx4_ib_add: counter index 3 for port 1 allocated 1",
        "Buffer I/O error on device sde, logical block 574464",
    ] {
        assert!(recognise(t, None, None).is_some(), "{t}");
        assert!(could_recognise(t), "{t}");
    }
    assert!(!could_recognise("usb 1-6: Manufacturer: Realtek"));
    assert!(!could_recognise(
        "IPv6: ADDRCONF(NETDEV_UP): ens803: link is not ready"
    ));
}

// The fixtures below are written from the kernel's own format strings (file and format
// named above each), not copied from the evaluation sets.

#[test]
fn lio_target_lines_are_the_iscsi_target_subsystem() {
    for t in [
        // iscsi_target_login.c: pr_err("iSCSI Login timeout on Network Portal %pISpc\n")
        "iSCSI Login timeout on Network Portal 192.168.10.5:3260",
        // iscsi_target_nego.c: pr_err("Unable to locate Target Portal Group on %s\n")
        "Unable to locate Target Portal Group on iqn.2003-01.org.linux-iscsi.lab:sn.0123",
        // target_core_device.c: pr_err("TARGET_CORE[%s]: Detected WRITE_PROTECTED LUN Access for 0x%08llx\n")
        "TARGET_CORE[iSCSI]: Detected WRITE_PROTECTED LUN Access for 0x00000002",
        // target_core_tmr.c: printk("ABORT_TASK: Found referenced %s task_tag: %llu\n")
        "ABORT_TASK: Found referenced iSCSI task_tag: 4711",
        "ABORT_TASK: Sending TMR_FUNCTION_COMPLETE for ref_tag: 4711",
        // iscsi_target_login.c: pr_err("iSCSI Initiator Node: %s is not authorized to access iSCSI target portal group: %hu.\n")
        "iSCSI Initiator Node: iqn.1994-05.com.redhat:host2 is not authorized to access iSCSI target portal group: 1.",
        // ib_isert.h: isert_err(fmt) = pr_err("isert: %s: " fmt, __func__)
        "isert: isert_allocate_cmd: Unable to allocate iscsit_cmd + isert_cmd",
    ] {
        let e = rec(t);
        assert_eq!(e.subsystem, Subsystem::IscsiTarget, "{t}");
        assert!(could_recognise(t), "{t}");
        let x = explain_event(&e);
        assert!(x.title.contains("iSCSI target (LIO)"), "{x:?}");
        assert!(x.next.contains("targetcli"), "{x:?}");
    }
    // target_core_transport.c: "%s/%s: Unsupported SCSI Opcode 0x%02x, sending CHECK_CONDITION.\n"
    let e = rec("iSCSI/iqn.1994-05.com.redhat:host2: Unsupported SCSI Opcode 0x85, sending CHECK_CONDITION.");
    assert_eq!(
        e.device.other.as_deref(),
        Some("iqn.1994-05.com.redhat:host2")
    );
    // A WARN in drivers/target and a frame tagged with a target module.
    let e = rec("WARNING: CPU: 7 PID: 901 at drivers/target/target_core_transport.c:3010 target_put_cmd_and_wait+0x5e/0x70 [target_core_mod]");
    assert_eq!(e.subsystem, Subsystem::IscsiTarget);
    assert_eq!(
        rec(" isert_cq_comp_err+0x91/0xb0 [ib_isert]").subsystem,
        Subsystem::IscsiTarget
    );
    // The initiator's own `iscsi:` and `iser:` lines stay theirs.
    assert_eq!(
        rec("iscsi: registered transport (iser)").subsystem,
        Subsystem::Iscsi
    );
    // Words that merely start alike are not target lines.
    for t in [
        "iSCSI is great",
        "TARGET reached",
        "Unable to handle kernel paging request",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn bare_block_and_scsi_lines_of_old_and_new_kernels() {
    // 2.6 sd.c: printk(KERN_INFO "SCSI error: return code = 0x%08x\n", result)
    let e = rec("SCSI error: return code = 0x00070000");
    assert_eq!(e.subsystem, Subsystem::Scsi);
    // 2.6 blk-core.c end_request: "end_request: I/O error, dev %s, sector %llu\n"
    let e = rec("end_request: I/O error, dev sdk, sector 20971392");
    assert_eq!(e.subsystem, Subsystem::Block);
    assert_eq!(e.device.disk.as_deref(), Some("sdk"));
    // blk-core.c blk_print_req_error (5.x+): "%s error, dev %s, sector %llu op 0x%x:(%s) flags 0x%x phys_seg %u prio class %u\n"
    for (t, disk) in [
        ("I/O error, dev sdd, sector 8 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 2", "sdd"),
        ("critical target error, dev dm-4, sector 2048 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0", "dm-4"),
        ("recoverable transport error, dev nvme1n1, sector 64 op 0x0:(READ) flags 0x0 phys_seg 8 prio class 0", "nvme1n1"),
    ] {
        let e = rec(t);
        assert_eq!(e.subsystem, Subsystem::Block, "{t}");
        assert_eq!(e.device.disk.as_deref(), Some(disk), "{t}");
        assert!(could_recognise(t), "{t}");
    }
    // fs/buffer.c on a partition: "Buffer I/O error on dev %pg, logical block %llu, async page read\n"
    assert_eq!(
        rec("Buffer I/O error on dev sdf1, logical block 0, async page read")
            .device
            .disk
            .as_deref(),
        Some("sdf1")
    );
    // Disks no storage session can be: a floppy, a loop device, a virtio or MMC disk.
    for t in [
        "I/O error, dev fd0, sector 0 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0",
        "blk_update_request: I/O error, dev loop3, sector 0 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0",
        "end_request: I/O error, dev fd0, sector 0",
        "Buffer I/O error on dev mmcblk0p2, logical block 0, async page read",
        "io error, dev sda: the end",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
    // `scsi H:C:T:L:` and `scsi hostN:` lines of a session's LUN.
    assert_eq!(
        rec("scsi 7:0:0:2: Direct-Access     LIO-ORG  block2           4.0  PQ: 0 ANSI: 5")
            .device
            .scsi_hctl
            .as_deref(),
        Some("7:0:0:2")
    );
    assert_eq!(
        rec("scsi host7: iSCSI Initiator over iSER")
            .device
            .scsi_host,
        Some(7)
    );
}

#[test]
fn qed_and_qede_bracketed_function_lines() {
    // qed.h DP_NOTICE/DP_ERR: "[%s:%d(%s)]" fmt, __func__, __LINE__, DP_NAME(cdev)
    let t =
        "[qed_mcp_cmd_and_union:565(0000:3b:00.1)]MFW failed to respond [cmd 0x30000000 param 0x0]";
    let e = rec(t);
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.device.pci.as_deref(), Some("0000:3b:00.1"));
    assert_eq!(e.device.rdma_dev, None);
    assert_eq!(
        e.message,
        "MFW failed to respond [cmd 0x30000000 param 0x0]"
    );
    assert_eq!(e.level, 3);
    let e = rec("[qede_tx_timeout:527(enp59s0f1)]TX timeout on queue 3");
    assert_eq!(e.device.netdev.as_deref(), Some("enp59s0f1"));
    // qedr keeps its RDMA device.
    let e = rec("[qedr_poll_cq_req:4012(qedr1)]Error: POLL CQ with RDMA_CQE_REQ_STS_WORK_REQUEST_FLUSHED_ERR. CQ icid=0x1, QP icid=0x6");
    assert_eq!(e.subsystem, Subsystem::RdmaDriver);
    assert_eq!(e.device.rdma_dev.as_deref(), Some("qedr1"));
    // dev_err on a qede PCI function.
    assert_eq!(
        rec("qede 0000:3b:00.1 enp59s0f1: Link is down").subsystem,
        Subsystem::Nic
    );
    // A bracketed word that is no qed function.
    assert_eq!(recognise("[drm] Initialized i915 1.6.0", None, None), None);
}

#[test]
fn ice_reset_failure_has_its_pci_function() {
    // ice_main.c ice_do_reset: dev_err(dev, "reset %d failed\n", reset_type)
    let e = rec("ice 0000:af:00.0: reset 2 failed");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.device.pci.as_deref(), Some("0000:af:00.0"));
    assert_eq!(e.level, 3);
    assert!(explain_event(&e)
        .meaning
        .starts_with("0000:af:00.0 is being reset"));
}

#[test]
fn frames_of_older_kernels_and_without_module_tags() {
    for (t, function, module, sub) in [
        // 3.x: "[<addr>] ? func+off/size [mod]"
        (" [<ffffffffa03c1e2b>] ? iser_cq_callback+0x2b/0x60 [ib_iser]", "iser_cq_callback", Some("ib_iser"), Subsystem::Iser),
        // 2.6.18: "[<addr>] :module:func+off/size"
        (" [<ffffffff8846c0d8>] :ib_iser:iser_rcv_completion+0x8a/0x1a0", "iser_rcv_completion", Some("ib_iser"), Subsystem::Iser),
        // 3.x RIP lines.
        ("RIP: 0010:[<ffffffffa0401d6e>]  [<ffffffffa0401d6e>] mlx5_cmd_comp_handler+0x4e/0x3c0 [mlx5_core]", "mlx5_cmd_comp_handler", Some("mlx5_core"), Subsystem::Nic),
        (" RIP  [<ffffffffa0401d6e>] mlx5_cmd_comp_handler+0x4e/0x3c0 [mlx5_core]", "mlx5_cmd_comp_handler", Some("mlx5_core"), Subsystem::Nic),
        // Offsets without 0x.
        (" irdma_cqp_ce_handler+1b4/2c0 [irdma]", "irdma_cqp_ce_handler", Some("irdma"), Subsystem::RdmaDriver),
        // No module tag (built in, or cut by a renderer).
        (" ib_dispatch_event+0x41/0x70", "ib_dispatch_event", None, Subsystem::RdmaCore),
        (" ? mlx5_ib_event+0x15c/0x1c0", "mlx5_ib_event", None, Subsystem::RdmaDriver),
        (" [<ffffffff815a1b2c>] irdma_flush_wqes+0x9a/0x160", "irdma_flush_wqes", None, Subsystem::RdmaDriver),
        ("RIP: 0010:mlx5_eq_comp_int+0x2e/0x120", "mlx5_eq_comp_int", None, Subsystem::Nic),
    ] {
        let e = rec(t);
        assert_eq!(e.subsystem, sub, "{t}");
        assert_eq!(
            e.shape,
            LineShape::Frame {
                function: function.into(),
                module: module.map(str::to_string)
            },
            "{t}"
        );
        assert!(could_recognise(t), "{t}");
    }
    for t in [
        // Untagged frames of other code, and sentences ending in a symbol-like word.
        " ? usb_submit_urb+0x12/0x40",
        " ext4_end_bio+0x1c/0x90",
        " [<ffffffff81234567>] ? kthread+0x12/0x40",
        "RIP: 0010:[<ffffffff81234567>]  [<ffffffff81234567>] intel_idle+0x12/0x40",
        "called from ib_foo+0x1/0x2",
        " ib_foo+0xzz/0x2",
        " :snd_hda:azx_send_cmd+0x8a/0x1a0",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

// Shapes of the second pass (issue 25, recog2): each line is built from the kernel's own
// format string, named above it as file:function.

#[test]
fn nfs_over_rdma_lines_are_the_nfs_subsystem() {
    // net/sunrpc/xprtrdma/verbs.c rpcrdma_ia_open: pr_err("rpcrdma: ib_alloc_pd() returned %d\n")
    let e = rec("rpcrdma: ib_alloc_pd() returned -12");
    assert_eq!(e.subsystem, Subsystem::Nfs);
    assert_eq!(e.level, 6);
    // verbs.c rpcrdma_cm_event_handler: pr_info("rpcrdma: removing device %s for %s:%s\n")
    let e = rec("rpcrdma: removing device mlx5_0 for 192.168.10.5:20049");
    assert_eq!(e.device.rdma_dev.as_deref(), Some("mlx5_0"));
    assert_eq!(e.device.other.as_deref(), Some("192.168.10.5:20049"));
    // verbs.c rpcrdma_ep_create: pr_warn("rpcrdma: HCA provides only %d send SGEs\n")
    assert_eq!(
        rec("rpcrdma: HCA provides only 2 send SGEs").subsystem,
        Subsystem::Nfs
    );
    // svc_rdma_transport.c svc_rdma_accept: dprintk("svcrdma: failed to create send CQ\n")
    assert_eq!(
        rec("svcrdma: failed to create send CQ").subsystem,
        Subsystem::Nfs
    );
    // verbs.c rpcrdma_update_connect_private: dprintk("RPC:       %s: max send %u, max recv %u\n", __func__, …)
    let e = rec("RPC:       rpcrdma_update_connect_private: max send 4096, max recv 4096");
    assert_eq!(e.subsystem, Subsystem::Nfs);
    // net/sunrpc/xprt.c xprt_register_transport: printk(KERN_INFO "RPC: Registered %s transport module.\n")
    assert_eq!(
        rec("RPC: Registered rdma transport module.").subsystem,
        Subsystem::Nfs
    );
    // net/sunrpc/clnt.c call_timeout: "%s: server %s not responding, still trying\n"
    // (cl_program->name), and call_decode: "%s: server %s OK\n".
    let e = rec("nfs: server 10.0.0.5 not responding, still trying");
    assert_eq!(e.subsystem, Subsystem::Nfs);
    assert_eq!(e.device.other.as_deref(), Some("10.0.0.5"));
    assert_eq!(e.level, 4);
    assert_eq!(rec("nfs: server 10.0.0.5 OK").level, 6);
    let x = explain_event(&e);
    assert!(x.title.contains("NFS over RDMA"), "{x:?}");
    assert!(x.next.contains("proto=rdma"), "{x:?}");
    // A frame of the transport module, and a WARN in its sources.
    assert_eq!(
        rec(" rpcrdma_reply_handler+0x2d8/0x510 [rpcrdma]").subsystem,
        Subsystem::Nfs
    );
    assert_eq!(
        rec("WARNING: CPU: 2 PID: 77 at net/sunrpc/xprtrdma/verbs.c:1210 rpcrdma_mr_put+0x1a/0x40 [rpcrdma]").subsystem,
        Subsystem::Nfs
    );
    for t in [
        "rpcrdma: ib_alloc_pd() returned -12",
        "RPC:       rpcrdma_update_connect_private: max send 4096, max recv 4096",
        "nfs: server 10.0.0.5 OK",
        "svcrdma: failed to create send CQ",
    ] {
        assert!(could_recognise(t), "{t}");
    }
    // The socket transports' lines and the rest of NFS stay silent: they are not the RDMA
    // transport (xprt.c for tcp/udp; fs/nfs and nfsd's own lines).
    for t in [
        "RPC: Registered tcp transport module.",
        "RPC: Registered named UNIX socket transport module.",
        "NFS: Registering the id_resolver key type",
        "nfsd: last server has exited, flushing export cache",
        "rpc-srv/tcp: nfsd: got error -104 when sending 140 bytes - shutting down socket",
        // fs/nfs's frames are the file system, not the transport.
        " nfs_file_write+0x1c/0x90 [nfs]",
        " [<ffffffffa07eb80d>] nfs_updatepage+0x5d/0x1a0 [nfs]",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn mlx5_pid_prefix_without_dev_printk() {
    // mlx5_core.h of 4.x: mlx5_core_err = dev_err(…, "%s:%s:%d:(pid %d): " fmt,
    // priv.name, __func__, __LINE__, current->pid): the `dev_printk` prefix cut away.
    let e = rec("0000:04:00.0:mlx5_cmd_check:795:(pid 9993): RTR2RTS_QP(0x504) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x4bb88f)");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.device.pci.as_deref(), Some("0000:04:00.0"));
    assert_eq!(e.level, 3);
    assert!(
        e.message.starts_with("mlx5_cmd_check:795:"),
        "{}",
        e.message
    );
    // cmd.c mlx5_cmd_check with nothing before the function (a renderer cut the rest).
    let e = rec("mlx5_cmd_check:810:(pid 923941): create_mkey(0x200) op_mod(0x0) failed, status bad parameter(0x3), syndrome (0x35e6ec)");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.origin.as_deref(), Some("mlx5_core"));
    // drivers/infiniband/hw/mlx5/mlx5_ib.h mlx5_ib_warn: pr_warn("%s:%s:%d:(pid %d): " fmt,
    // ib_dev.name, __func__, __LINE__, current->pid)
    let e = rec("mlx5_0:dump_cqe:275:(pid 0): dump error cqe");
    assert_eq!(e.subsystem, Subsystem::RdmaDriver);
    assert_eq!(e.device.rdma_dev.as_deref(), Some("mlx5_0"));
    // health.c poll_health with the device cut: still the fatal device error.
    let e = rec("poll_health:800:(pid 0): Fatal error 1 detected");
    assert!(e.fatal_device_error);
    assert_eq!(e.level, 2);
    for t in [
        "0000:04:00.0:mlx5_cmd_check:795:(pid 9993): RTR2RTS_QP(0x504) failed",
        "mlx5_0:dump_cqe:275:(pid 0): dump error cqe",
        "poll_health:800:(pid 0): Fatal error 1 detected",
    ] {
        assert!(could_recognise(t), "{t}");
    }
    // The marker must be whole: `(pid` with no number, or a sentence, is not it.
    for t in [
        "foo:12:(pid x): bar",
        "a b:12:(pid 3): c",
        "systemd[1]: foo:1:(pid 2) bar",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn rdma_device_and_port_without_dev_printk() {
    // drivers/infiniband/hw/mlx5/qp.c mlx5_ib_qp_err_syndrome:
    // pr_err("%s/%d: QP %d error: %s (0x%x 0x%x 0x%x)\n", ibqp->device->name, ibqp->port, …)
    let e = rec("rocep2s0/1: QP 137 error: unrecognized status (0x41 0x0 0x0)");
    assert_eq!(e.subsystem, Subsystem::RdmaDriver);
    assert_eq!(e.device.rdma_dev.as_deref(), Some("rocep2s0"));
    assert_eq!(e.device.port, Some(1));
    assert_eq!(e.level, 3);
    let e = rec("mlx5_bond_0/1: QP 51291 error: local length error (0x8e 0x0 0x0)");
    assert_eq!(e.device.rdma_dev.as_deref(), Some("mlx5_bond_0"));
    assert!(could_recognise(
        "mlx5_bond_0/1: QP 51291 error: local length error (0x8e 0x0 0x0)"
    ));
    // Other `name/N:` openings are not RDMA devices.
    for t in [
        "eth0/1: link up",
        "md/raid1:md0: active with 2 out of 2 mirrors",
        "rxe/x: y",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn ipoib_rdma_cm_srp_and_dynamic_debug_prefixes() {
    // drivers/infiniband/ulp/ipoib/ipoib_multicast.c ipoib_mcast_join_complete:
    // ipoib_warn(priv, "multicast join failed for %pI6, status %d\n") with ipoib.h's
    // printk(level "%s: " format, priv->dev->name)
    let e =
        rec("ib0: multicast join failed for ff12:401b:ffff:0000:0000:0000:ffff:ffff, status -22");
    assert_eq!(e.subsystem, Subsystem::RdmaCore);
    assert_eq!(e.device.netdev.as_deref(), Some("ib0"));
    assert_eq!(
        rec("ib0.8001: enabling connected mode will cause multicast packet drops").subsystem,
        Subsystem::RdmaCore
    );
    assert_eq!(
        rec("ibp3s0: Budget exhausted after napi rescheduled").subsystem,
        Subsystem::RdmaCore
    );
    assert!(could_recognise(
        "ib0: multicast join failed for ff12::1, status -22"
    ));
    // drivers/infiniband/core/cma.c cma_listen_on_dev (before 5.x): pr_warn("RDMA CMA:
    // cma_listen_on_dev, error %d\n")
    let e = rec("RDMA CMA: cma_listen_on_dev, error -98");
    assert_eq!(e.subsystem, Subsystem::RdmaCm);
    assert_eq!(e.level, 3);
    // drivers/infiniband/ulp/srpt/ib_srpt.c srpt_cm_req_recv: pr_info("Received
    // SRP_LOGIN_REQ with i_port_id %pI6, …") under pr_fmt "ib_srpt " (no colon).
    let e = rec("ib_srpt Received SRP_LOGIN_REQ with i_port_id fe80:0000:0000:0000:0002:c903:0010:f0f1, t_port_id 0002:c903:0010:f0f1:0002:c903:0010:f0f1 and it_iu_len 8260 on port 1 (guid=fe80:0000:0000:0000:0002:c903:0010:f0f1); pkey 0xffff");
    assert_eq!(e.subsystem, Subsystem::IscsiTarget);
    assert!(
        e.message.starts_with("Received SRP_LOGIN_REQ"),
        "{}",
        e.message
    );
    // drivers/infiniband/ulp/srp/ib_srp.c srp_max_it_iu_len: pr_debug("max_iu_len = %d\n")
    // with dynamic debug's `+mf` decoration (lib/dynamic_debug.c __dynamic_emit_prefix).
    let e = rec("ib_srp:srp_max_it_iu_len: ib_srp: max_iu_len = 8260");
    assert_eq!(e.subsystem, Subsystem::Scsi);
    assert_eq!(e.origin.as_deref(), Some("ib_srp"));
    // An auxiliary-bus driver word (drivers/base/auxiliary.c names the driver
    // "<module>.<name>"): a dev_printk of mlx5's SF driver.
    let e = rec("mlx5_core.sf mlx5_core.sf.2: firmware version: 16.35.1012");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert!(could_recognise(
        "mlx5_core.sf mlx5_core.sf.2: firmware version: 16.35.1012"
    ));
    // block/blk-mq.c blk_insert_cloned_request → blk_cloned_rq_check_limits:
    // printk(KERN_ERR "%s: over max size limit. (%u > %u)\n", __func__, …)
    assert_eq!(
        rec("blk_cloned_rq_check_limits: over max size limit. (1024 > 256)").subsystem,
        Subsystem::Block
    );
    // lib/ratelimit.c ___ratelimit: "%s: %d callbacks suppressed\n" with the SCSI
    // midlayer's function.
    assert_eq!(
        rec("scsi_io_completion_action: 3 callbacks suppressed").subsystem,
        Subsystem::Scsi
    );
    // arch/x86/kernel/dumpstack.c __die of 4.x: printk("RIP: %pS RSP: %016lx\n")
    let e = rec("RIP: nvme_rdma_alloc_queue+0x3c/0x190 [nvme_rdma] RSP: ffffc90001e4bdf0");
    assert_eq!(e.subsystem, Subsystem::Nvme);
    // block/blk-mq.c's own format (no pr_fmt there): the block layer, found by the bare
    // formats rather than a prefix.
    assert_eq!(
        rec("blk-mq: reduced tag depth to 128").subsystem,
        Subsystem::Block
    );
    // mlx5's E-Switch of 4.x–5.x: `(PCI): E-Switch: `.
    let e = rec("(0000:04:00.0): E-Switch: SRIOV enabled: active vports(5)");
    assert_eq!(e.subsystem, Subsystem::Nic);
    assert_eq!(e.device.pci.as_deref(), Some("0000:04:00.0"));
    assert_eq!(recognise("(0000:04:00.0): other: x", None, None), None);
    // The bare formats: ib_core's WARN text, siw's banner, a leading function name.
    assert_eq!(
        rec("failed to drain send queue: -110").subsystem,
        Subsystem::RdmaCore
    );
    assert_eq!(rec("SoftiWARP attached").subsystem, Subsystem::RdmaDriver);
    assert_eq!(
        rec("iwpm_register_pid: Unable to send a nlmsg (client = 2)").subsystem,
        Subsystem::RdmaCore
    );
    // The block layer's disk-first formats name a storage disk only.
    let e = rec("sdc: detected capacity change from 0 to 1073741824");
    assert_eq!(e.device.disk.as_deref(), Some("sdc"));
    assert_eq!(
        recognise(
            "loop0: detected capacity change from 0 to 1073741824",
            None,
            None
        ),
        None
    );
    // Offload iSCSI initiators: their pr_fmt, their banner, the old SCSI host line.
    let e = rec("libcxgbi:libcxgbi_init_module: Chelsio iSCSI driver library libcxgbi v0.9.1-ko (Apr. 2015)");
    assert_eq!(e.subsystem, Subsystem::Iscsi);
    let e = rec("QLogic NetXtreme II iSCSI Driver bnx2i v2.7.10.1 (Jul 16, 2014)");
    assert_eq!(
        (e.subsystem, e.device.driver.as_deref()),
        (Subsystem::Iscsi, Some("bnx2i"))
    );
    let e = rec("scsi1 : QLogic Offload iSCSI Initiator");
    assert_eq!(
        (e.subsystem, e.device.scsi_host),
        (Subsystem::Scsi, Some(1))
    );
    let e = rec("QLogic FastLinQ 4xxxx Core Module qed 8.37.0.20");
    assert_eq!(
        (e.subsystem, e.device.driver.as_deref()),
        (Subsystem::Nic, Some("qed"))
    );
    // A banner of another module, and a version after a word of no table, stay silent.
    assert_eq!(
        recognise(
            "Intel(R) Gigabit Ethernet Network Driver igb v5.6.0-k",
            None,
            None
        ),
        None
    );
    assert_eq!(
        recognise(
            "usbcore: registered new interface driver usbfs v2",
            None,
            None
        ),
        None
    );
    // Look-alikes of these prefixes stay silent.
    for t in [
        "sdhci: Secure Digital Host Controller Interface driver",
        "sdhci-pci 0000:00:1e.6: SDHCI controller found [8086:9dc4] (rev 30)",
        "ibmvscsi 30000003: partner initialization complete",
        "ibus: started",
        "RDMA is not configured",
        "usb 1-6: new high-speed USB device number 3 using xhci_hcd",
        "EXT4-fs (sdb1): mounted filesystem with ordered data mode. Opts: (null)",
        "pci 0000:00:14.0: PME# supported from D0 D3hot D3cold",
        "systemd[1]: Started Journal Service.",
        "xhci_hcd 0000:00:14.0: xHCI Host Controller",
        "i915 0000:00:02.0: [drm] GuC firmware i915/tgl_guc_70.bin version 70.1",
        "RIP: 0010:ext4_writepages+0x10/0x600 RSP: ffffc90001e4bdf0",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn more_lio_openings_from_the_target_sources() {
    for t in [
        // iscsi_target_util.c iscsit_handle_nopin_response_timeout: pr_err("Did not receive
        // response to NOPIN on CID: %hu, failing connection for I_T Nexus
        // %s,i,0x%6phN,%s,t,0x%02x\n")
        "Did not receive response to NOPIN on CID: 0, failing connection for I_T Nexus iqn.1994-05.com.redhat:client,i,0x00023d000001,iqn.2003-01.org.linux-iscsi.t:sn.1,t,0x01",
        // iscsi_target_erl0.c iscsit_handle_time2retain_timeout: "Time2Retain timer expired
        // for SID: %u, cleaning up iSCSI session.\n"
        "Time2Retain timer expired for SID: 3, cleaning up iSCSI session.",
        // target_core_device.c se_dev_align_max_sectors: pr_info("Rounding down aligned
        // max_sectors from %u to %u\n")
        "Rounding down aligned max_sectors from 4294967295 to 4294967288",
        // target_core_configfs.c target_init_dbroot: pr_err("db_root: cannot open: %s\n")
        "db_root: cannot open: /etc/target",
        // iscsi_target_login.c: pr_debug("Moving to TARG_CONN_STATE_FREE.\n")
        "Moving to TARG_CONN_STATE_FREE.",
        // iscsi_target_nego.c: pr_err("Unable to locate Target IQN: %s in Storage Node\n")
        "Unable to locate Target IQN: iqn.2003-01.org.linux-iscsi.t:sn.2 in Storage Node",
    ] {
        let e = rec(t);
        assert_eq!(e.subsystem, Subsystem::IscsiTarget, "{t}");
        assert!(could_recognise(t), "{t}");
    }
    for t in [
        "Moving on",
        "Time to wake up",
        "Did not find a matching device",
        "iSCSI is great",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn partition_scan_device_handler_and_transport_banner_lines() {
    // block/partitions/amiga.c amiga_partition: pr_err("Dev %s: unable to read RDB block %d\n")
    let e = rec("Dev sdb: unable to read RDB block 8");
    assert_eq!(e.subsystem, Subsystem::Block);
    assert_eq!(e.device.disk.as_deref(), Some("sdb"));
    assert_eq!(e.level, 3);
    assert!(could_recognise("Dev sdb: unable to read RDB block 8"));
    // …not for a floppy or a loop device.
    assert_eq!(
        recognise("Dev fd0: unable to read RDB block 0", None, None),
        None
    );
    assert_eq!(
        recognise("Dev loop0: unable to read RDB block 0", None, None),
        None
    );
    // block/partitions/ldm.c ldm_validate_partition_table: ldm_crit("Disk read failed.")
    // = printk(KERN_CRIT "%s(): " f "\n", __func__)
    let e = rec("ldm_validate_partition_table(): Disk read failed.");
    assert_eq!(e.subsystem, Subsystem::Block);
    // scsi_dh_alua.c alua_init: pr_info(ALUA_DH_NAME ": device handler registered\n")
    assert_eq!(
        rec("alua: device handler registered").subsystem,
        Subsystem::Scsi
    );
    // scsi_transport_iscsi.c iscsi_transport_init: printk(KERN_INFO "Loading iSCSI
    // transport class v%s.\n", ISCSI_TRANSPORT_VERSION)
    let e = rec("Loading iSCSI transport class v2.0-870.");
    assert_eq!(e.subsystem, Subsystem::Iscsi);
    assert!(could_recognise("Loading iSCSI transport class v2.0-870."));
    for t in [
        "Dev: nothing",
        "Loading compiled-in X.509 certificates",
        "foo(): bar",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn other_rdma_drivers_function_and_tag_prefixes() {
    // drivers/infiniband/hw/bnxt_re/qplib_rcfw.c __send_message_basic:
    // "QPLIB: cmdq[%#x]=%#x timedout (%d)msec\n" (its dev_err prefix cut away)
    let e = rec("QPLIB: cmdq[0x4b]=0x15 timedout (20000)msec");
    assert_eq!(e.subsystem, Subsystem::RdmaDriver);
    assert_eq!(e.level, 3);
    assert!(could_recognise(
        "QPLIB: cmdq[0x4b]=0x15 timedout (20000)msec"
    ));
    // i40iw_pr_err(fmt) = pr_err("%s: " fmt, __func__) (drivers/infiniband/hw/i40iw/i40iw.h)
    assert_eq!(
        rec("i40iw_deinit_device: state = 11").subsystem,
        Subsystem::RdmaDriver
    );
    // An untagged frame of iw_cxgb4 (built in).
    assert_eq!(
        rec(" c4iw_ev_dispatch+0x1d4/0x3a0").subsystem,
        Subsystem::RdmaDriver
    );
    assert_eq!(recognise("QPLIBX: nothing", None, None), None);
}

#[test]
fn device_handlers_banners_ratelimits_and_vendor_lio_prefixes() {
    // scsi_dh_emc.c clariion_init: pr_info(CLARIION_NAME ": device handler registered\n"),
    // scsi_dh_hp_sw.c: HP_SW_NAME.
    assert_eq!(
        rec("emc: device handler registered").subsystem,
        Subsystem::Scsi
    );
    assert_eq!(
        rec("hp_sw: device handler registered").subsystem,
        Subsystem::Scsi
    );
    // drivers/scsi/scsi.c init_scsi: printk(KERN_NOTICE "SCSI subsystem initialized\n")
    assert_eq!(rec("SCSI subsystem initialized").subsystem, Subsystem::Scsi);
    assert!(could_recognise("SCSI subsystem initialized"));
    // lib/ratelimit.c ___ratelimit: "%s: %d callbacks suppressed\n" with fs/buffer.c's
    // buffer_io_error as the function.
    let t = "buffer_io_error: 3055 callbacks suppressed";
    assert_eq!(rec(t).subsystem, Subsystem::Block);
    assert!(could_recognise(t));
    // A vendor pr_fmt "iSCSI:" __FILE__ ":" __LINE__ ":" __func__ on LIO's own files.
    let t = "iSCSI:target_core_transport.c:1959:target_setup_cmd_from_cdb vhost/naa.1: \
             Unsupported SCSI Opcode 0x83, sending CHECK_CONDITION.";
    assert_eq!(rec(t).subsystem, Subsystem::IscsiTarget);
    assert!(could_recognise(t));
    assert_eq!(
        rec("iSCSI:iscsi_target_login.c:1200:iscsi_target_login_thread x").subsystem,
        Subsystem::IscsiTarget
    );
    for t in [
        "iSCSI:usb.c:1:x y",
        "SCSI subsystem initialized twice",
        "ext4_io_error: 3 callbacks suppressed",
        "emcx: device handler registered",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn an_unknown_roce_link_speed_is_the_rdma_core_s() {
    // drivers/infiniband/core/verbs.c ib_get_eth_speed: pr_warn("%s speed is unknown,
    // defaulting to %u\n", netdev->name, netdev_speed)
    let t = "enP2p1s0f1 speed is unknown, defaulting to 1000";
    assert!(could_recognise(t));
    let e = rec(t);
    assert_eq!(e.subsystem, Subsystem::RdmaCore);
    assert_eq!(e.device.netdev.as_deref(), Some("enP2p1s0f1"));
    for t in [
        "eth0 speed is fast",
        "speed is unknown, defaulting to 1000",
        "a very long interface name speed is unknown, defaulting to 1000",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
}

#[test]
fn a_usb_attached_disk_s_scsi_lines_stay_silent() {
    // drivers/usb/storage/uas.c uas_eh_abort_handler: uas_log_cmd_state(cmnd, __func__, …)
    // prints through scmd_printk: `sd 1:0:0:0: [sda] tag#21 uas_eh_abort_handler 0 uas-tag 1
    // inflight: CMD IN`.
    for t in [
        "sd 1:0:0:0: [sda] tag#21 uas_eh_abort_handler 0 uas-tag 1 inflight: CMD IN",
        "sd 2:0:0:0: [sdb] tag#3 uas_zap_pending 0 uas-tag 4 inflight: CMD",
    ] {
        assert_eq!(recognise(t, None, None), None, "{t}");
    }
    // the same disk's own sd lines are still the SCSI layer's
    assert_eq!(
        rec("sd 1:0:0:0: [sda] tag#21 FAILED Result: hostbyte=DID_TIME_OUT driverbyte=DRIVER_OK")
            .subsystem,
        Subsystem::Scsi
    );
}
