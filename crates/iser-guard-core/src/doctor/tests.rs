//! The checks against hosts built as data: an E810 host as the field report describes it,
//! and variations of it, one thing changed at a time. The shell's readers are tested against
//! fixture trees in tests/doctor_cli.rs.

use super::parse::{parse_iscsi_settings, parse_proc_devices, parse_unit};
use super::*;
use crate::reset_plan::{AuxFacts, DevlinkParam as Param, ResetMethod};

const UNIT: &str = include_str!("../../../../packaging/debian/iser-guard.service");

fn irdma_device() -> RdmaDevice {
    let mut d = RdmaDevice::named("rocep2s0f0");
    d.in_sysfs = true;
    d.in_netlink = true;
    d.node_type = Some(1);
    d.fw = Some("1.70".into());
    d.pci = Some("0000:02:00.0".into());
    d.pci_driver = Some("ice".into());
    d.aux = Some(AuxFacts {
        name: "ice.roce.0".into(),
        driver_dir: Some("irdma".into()),
        module: Some("irdma".into()),
    });
    d.modules = vec!["irdma".into(), "ice".into()];
    let mut p = RdmaPort::numbered(1);
    p.state = Some("ACTIVE".into());
    p.phys_state = Some("LINK_UP".into());
    p.link_layer = Some("Ethernet".into());
    p.netdevs = vec!["enp2s0f0".into()];
    p.gsi = Gsi::State {
        state: "RTS".into(),
        evidence: "link rocep2s0f0/1 lqpn 1 type GSI state RTS sq-psn 0 comm [ib_core]".into(),
    };
    p.cm_ids = Ok(vec![CmIdFact {
        consumer: CmIdOwner::Kernel {
            module: "ib_iser".into(),
        },
        state: "CONNECT".into(),
        src: Some("192.0.2.1:40000".into()),
        dst: Some("192.0.2.2:3260".into()),
    }]);
    d.ports = vec![p];
    d.recreate = Ok(RecreatePlan {
        methods: vec![
            (
                ResetMethod::DevlinkToggle {
                    handle: "pci/0000:02:00.0".into(),
                    param: Param::EnableRoce,
                },
                vec!["devlink dev param set … false".into()],
            ),
            (
                ResetMethod::AuxRebind {
                    device: "ice.roce.0".into(),
                    driver: "irdma".into(),
                },
                vec!["echo ice.roce.0 > …/unbind".into()],
            ),
        ],
        skipped: vec!["module reload of irdma: not allowed".into()],
    });
    d.devlink = Some(DevlinkParamFact {
        handle: "pci/0000:02:00.0".into(),
        name: "enable_roce".into(),
        value: Ok(true),
    });
    d
}

const GOOD_NODE: &str = "node.name = iqn.2003-01.org.example.lab:tgt0\nnode.startup = automatic\n\
    iface.transport_name = iser\nnode.session.timeo.replacement_timeout = 120\n\
    node.conn[0].timeo.login_timeout = 15\nnode.conn[0].timeo.noop_out_interval = 5\n\
    node.conn[0].timeo.noop_out_timeout = 5\nnode.session.auth.password = s3cret\n";

/// A healthy, well set-up E810 host with one iSER session, the packaged unit and a daemon
/// that was not asked.
fn host() -> Facts {
    let mut f = Facts {
        paths: FactPaths {
            sysfs: "/sys".into(),
            proc: "/proc".into(),
            dev: "/dev".into(),
            modules: "/lib/modules/6.8.0-51-generic".into(),
            iscsi: "/etc/iscsi".into(),
        },
        ..Facts::default()
    };
    f.kernel.release = Ok("6.8.0-51-generic".into());
    f.modules.loaded = Ok([
        "ib_core",
        "rdma_cm",
        "ib_iser",
        "ib_uverbs",
        "rdma_ucm",
        "irdma",
        "ice",
    ]
    .map(String::from)
    .to_vec());
    f.modules.builtin = Ok(vec![]);
    f.modules.info = vec![
        ModuleInfo {
            name: "irdma".into(),
            in_sysfs: true,
            taint: Some(String::new()),
            path: Some("kernel/drivers/infiniband/hw/irdma/irdma.ko.zst".into()),
            ..ModuleInfo::default()
        },
        ModuleInfo {
            name: "ice".into(),
            in_sysfs: true,
            taint: Some(String::new()),
            path: Some("kernel/drivers/net/ethernet/intel/ice/ice.ko.zst".into()),
            ..ModuleInfo::default()
        },
    ];
    f.rdma.class_present = true;
    f.rdma.netlink = Ok(());
    f.rdma.devices = vec![irdma_device()];
    f.sandbox.unit_path = "/usr/lib/systemd/system/iser-guard.service".into();
    f.sandbox.unit = Ok(Some(parse_unit(UNIT)));
    f.sandbox.proc_devices = Ok(parse_proc_devices(
        "Character devices:\n  1 mem\n 10 misc\n231 infiniband_mad\n231 infiniband_verbs\n",
    ));
    f.sandbox.verbs_nodes = Ok(vec![
        DevNode {
            path: "/dev/infiniband/rdma_cm".into(),
            name: "rdma_cm".into(),
            number: Some((10, 58)),
        },
        DevNode {
            path: "/dev/infiniband/uverbs0".into(),
            name: "uverbs0".into(),
            number: Some((231, 192)),
        },
    ]);
    f.config = ConfigFacts {
        source: "/etc/iser-guard/config.toml".into(),
        problems: vec![],
        unread: None,
        allow: vec!["rocep2s0f0".into()],
        dry_run: false,
        iscsid_grace_s: 20.0,
        target_back_s: 15.0,
        probe_method: "tcp".into(),
        probe_port: 3260,
        allow_module_reload: false,
        selftest: true,
    };
    f.iscsi.iscsid_conf = Ok(Some(parse_iscsi_settings(
        "node.startup = automatic\nnode.session.timeo.replacement_timeout = 120\n",
    )));
    f.iscsi.nodes = Ok(vec![NodeRecord {
        target: "iqn.2003-01.org.example.lab:tgt0".into(),
        portal: "192.0.2.2:3260".into(),
        iface: "iser".into(),
        settings: Ok(parse_iscsi_settings(GOOD_NODE)),
    }]);
    f.iscsi.sessions = Ok(vec![SessionFact {
        sid: 1,
        target: "iqn.2003-01.org.example.lab:tgt0".into(),
        portal: "192.0.2.2:3260".into(),
        iface: "iser".into(),
        transport: "iser".into(),
        state: "LOGGED_IN".into(),
        port: Some(("rocep2s0f0".into(), 1)),
        placed_by: Some("its RDMA CM id".into()),
        disks: vec!["sdb".into()],
    }]);
    f
}

fn verdict(r: &Report, kind: CheckKind, subject: &str) -> CheckVerdict {
    r.find(kind, subject)
        .unwrap_or_else(|| panic!("no {kind:?} check of {subject}: {:#?}", r.checks))
        .verdict
}

#[test]
fn a_well_set_up_e810_host_has_only_the_irdma_defects_as_warnings() {
    let r = audit(&host());
    let not_ok: Vec<String> = r
        .checks
        .iter()
        .filter(|c| c.verdict != CheckVerdict::Ok)
        .map(|c| format!("{} {} {:?}", c.check.name(), c.subject, c.verdict))
        .collect();
    // 6.8 is in the iser_task_rsp crash's range and before irdma's QP-state fix.
    assert_eq!(
        not_ok,
        [
            "known-issue iser-task-rsp-crash Warning",
            "known-issue irdma-qp-state-fix Warning"
        ],
        "{:#?}",
        r.checks
    );
    assert_eq!(
        verdict(&r, CheckKind::KnownIssue, "irdma-gsi-stuck"),
        CheckVerdict::Ok
    );
    assert_eq!(r.outcome(), AuditOutcome::Warnings);
    // Every kind but the daemon's (not asked) is there, in report order.
    let kinds: Vec<CheckKind> = r.checks.iter().map(|c| c.check).collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(kinds, sorted);
    for k in CheckKind::ALL {
        assert!(
            k == CheckKind::Daemon || kinds.contains(&k),
            "{k:?} missing"
        );
    }
    let d = r.find(CheckKind::Device, "rocep2s0f0").unwrap();
    assert!(
        d.finding.contains("PCI 0000:02:00.0 (ice)"),
        "{}",
        d.finding
    );
    assert!(
        d.finding.contains("aux ice.roce.0 -> irdma"),
        "{}",
        d.finding
    );
    assert!(d.evidence.iter().any(|e| e.contains("link layer Ethernet")));
    let rc = r.find(CheckKind::Recreate, "rocep2s0f0").unwrap();
    assert_eq!(
        rc.finding,
        "the daemon would toggle devlink parameter enable_roce of pci/0000:02:00.0"
    );
    assert!(rc
        .evidence
        .iter()
        .any(|e| e.starts_with("method 2: unbind/bind")));
    assert!(rc.evidence.iter().any(|e| e.contains("enable_roce: true")));
}

#[test]
fn no_check_prints_a_chap_secret() {
    let r = audit(&host());
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("s3cret"));
    let facts = serde_json::to_string(&host()).unwrap();
    assert!(
        !facts.contains("s3cret"),
        "node settings are never serialized"
    );
}

#[test]
fn a_host_without_rdma_says_so_whatever_else_it_finds() {
    let mut f = host();
    f.rdma = RdmaFacts {
        class_present: false,
        sysfs_error: None,
        netlink: Err("RDMA netlink is not available on this kernel".into()),
        devices: vec![],
    };
    let r = audit(&f);
    assert_eq!(r.outcome(), AuditOutcome::NoRdma);
    let why = r.no_rdma.as_deref().unwrap();
    assert!(
        why.contains("/sys/class/infiniband does not exist"),
        "{why}"
    );
    assert!(
        why.contains("RDMA netlink: RDMA netlink is not available on this kernel"),
        "{why}"
    );
    assert!(r.checks.iter().all(|c| c.check != CheckKind::Device));
}

#[test]
fn out_of_tree_drivers_are_warned_about() {
    let mut f = host();
    f.modules.info[0].taint = Some("OE".into());
    f.modules.info[1].path = Some("updates/dkms/ice.ko".into());
    f.modules.info[1].taint = None;
    let r = audit(&f);
    for m in ["irdma", "ice"] {
        let c = r.find(CheckKind::Driver, m).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning, "{c:?}");
        assert!(c.action.as_deref().unwrap().contains("out-of-tree-driver"));
    }
    f.modules.info.clear();
    let r = audit(&f);
    assert_eq!(
        verdict(&r, CheckKind::Driver, "irdma"),
        CheckVerdict::Unknown
    );
}

#[test]
fn a_stuck_port_is_a_problem_with_the_command_that_fixes_it() {
    let mut f = host();
    f.rdma.devices[0].ports[0].gsi = Gsi::State {
        state: "ERR".into(),
        evidence: "link rocep2s0f0/1 lqpn 1 type GSI state ERR".into(),
    };
    let r = audit(&f);
    let c = r.find(CheckKind::GsiQp, "rocep2s0f0/1").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Problem);
    assert!(c
        .action
        .as_deref()
        .unwrap()
        .contains("iser-guard recover rocep2s0f0/1"));
    assert_eq!(r.outcome(), AuditOutcome::Problems);
    // An iWARP port has no QP 1 at all, and that is fine; a RoCE port without one is not.
    f.rdma.devices[0].ports[0].gsi = Gsi::Absent;
    assert_eq!(
        verdict(&audit(&f), CheckKind::GsiQp, "rocep2s0f0/1"),
        CheckVerdict::Warning
    );
    f.rdma.devices[0].node_type = Some(4);
    assert_eq!(
        verdict(&audit(&f), CheckKind::GsiQp, "rocep2s0f0/1"),
        CheckVerdict::Ok
    );
    f.rdma.devices[0].ports[0].gsi = Gsi::Unknown;
    f.rdma.netlink = Err("RDMA netlink is not available".into());
    let r = audit(&f);
    let c = r.find(CheckKind::GsiQp, "rocep2s0f0/1").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Unknown);
    assert!(c.evidence[0].contains("not available"));
}

#[test]
fn every_consumer_on_a_port_is_listed_and_others_than_iser_are_warned_about() {
    let mut f = host();
    if let Ok(ids) = &mut f.rdma.devices[0].ports[0].cm_ids {
        ids.push(CmIdFact {
            consumer: CmIdOwner::Kernel {
                module: "nvme_rdma".into(),
            },
            state: "CONNECT".into(),
            src: None,
            dst: Some("192.0.2.3:4420".into()),
        });
        ids.push(CmIdFact {
            consumer: CmIdOwner::Process {
                pid: 4242,
                comm: Some("spdk_tgt".into()),
            },
            state: "LISTEN".into(),
            src: Some("0.0.0.0:4420".into()),
            dst: None,
        });
    }
    let r = audit(&f);
    let c = r.find(CheckKind::CmIds, "rocep2s0f0/1").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    assert_eq!(
        c.finding,
        "consumers: ib_iser (1 connection), nvme_rdma (1 connection), pid 4242 (spdk_tgt) (1 listener)"
    );
    assert!(c
        .action
        .as_deref()
        .unwrap()
        .contains("nvme_rdma, pid 4242 (spdk_tgt)"));
    // A device iser-guard never touches: listed, not warned about.
    f.config.allow.clear();
    f.iscsi.sessions = Ok(vec![]);
    assert_eq!(
        verdict(&audit(&f), CheckKind::CmIds, "rocep2s0f0/1"),
        CheckVerdict::Ok
    );
}

#[test]
fn re_creation_methods_and_their_failures() {
    let mut f = host();
    f.rdma.devices[0].devlink.as_mut().unwrap().value = Ok(false);
    let c = audit(&f)
        .find(CheckKind::Recreate, "rocep2s0f0")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    assert!(c.action.unwrap().contains("enable_roce is off"));
    f.rdma.devices[0].recreate =
        Err("no way to re-create rocep2s0f0: aux unbind/bind: no RDMA auxiliary device".into());
    assert_eq!(
        verdict(&audit(&f), CheckKind::Recreate, "rocep2s0f0"),
        CheckVerdict::Problem
    );
    // Out of iser-guard's scope (not allowed, no session): a warning only.
    f.config.allow.clear();
    f.iscsi.sessions = Ok(vec![]);
    assert_eq!(
        verdict(&audit(&f), CheckKind::Recreate, "rocep2s0f0"),
        CheckVerdict::Warning
    );
}

#[test]
fn a_port_that_is_down_is_a_warning() {
    let mut f = host();
    f.rdma.devices[0].ports[0].state = Some("DOWN".into());
    let c = audit(&f)
        .find(CheckKind::Device, "rocep2s0f0")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    assert!(c.action.unwrap().contains("rocep2s0f0/1 is DOWN"));
}

#[test]
fn the_packaged_unit_lets_the_service_open_what_it_needs() {
    let r = audit(&host());
    let c = r.find(CheckKind::Sandbox, "service").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Ok, "{c:#?}");
    assert!(c
        .evidence
        .iter()
        .any(|e| e == "/dev/infiniband/uverbs0: allowed by DeviceAllow=char-infiniband_verbs rw (major 231 in /proc/devices)"));
    assert!(
        c.evidence
            .iter()
            .any(|e| e
                == "/dev/infiniband/rdma_cm: allowed by DeviceAllow=/dev/infiniband/rdma_cm rw")
    );
    assert!(c
        .evidence
        .iter()
        .any(|e| e == "/dev/kmsg: allowed by DeviceAllow=/dev/kmsg r"));
}

#[test]
fn a_sandbox_that_locks_out_verbs_or_resolves_late_is_reported() {
    // A drop-in that empties the list and allows the kernel log only.
    let mut f = host();
    let unit = parse_unit(UNIT).with(parse_unit(
        "[Service]\nDeviceAllow=\nDeviceAllow=/dev/kmsg r\n",
    ));
    f.sandbox.unit = Ok(Some(unit));
    let c = audit(&f)
        .find(CheckKind::Sandbox, "service")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Problem);
    assert!(c
        .evidence
        .iter()
        .any(|e| e.starts_with("/dev/infiniband/uverbs0: DENIED")));
    assert!(c
        .action
        .unwrap()
        .contains("DeviceAllow=/dev/infiniband/rdma_cm rw"));
    // ib_uverbs not loaded: char-infiniband_verbs resolves to nothing at start.
    let mut f = host();
    f.sandbox.proc_devices = Ok(parse_proc_devices(
        "Character devices:\n  1 mem\n 10 misc\n",
    ));
    f.sandbox.verbs_nodes = Ok(vec![]);
    let c = audit(&f)
        .find(CheckKind::Sandbox, "service")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning, "{c:#?}");
    let a = c.action.unwrap();
    assert!(
        a.contains("DeviceAllow=char-infiniband_verbs names no group"),
        "{a}"
    );
    assert!(
        a.contains("no uverbs node") && a.contains("no rdma_cm node"),
        "{a}"
    );
    // PrivateDevices=yes hides everything.
    let mut f = host();
    f.sandbox.unit = Ok(Some(
        parse_unit(UNIT).with(parse_unit("[Service]\nPrivateDevices=yes\n")),
    ));
    assert_eq!(
        verdict(&audit(&f), CheckKind::Sandbox, "service"),
        CheckVerdict::Problem
    );
    // Module reload configured inside the packaged unit.
    let mut f = host();
    f.config.allow_module_reload = true;
    let c = audit(&f)
        .find(CheckKind::Sandbox, "service")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Problem);
    assert!(c.action.unwrap().contains("ProtectKernelModules=yes"));
    // No unit installed.
    let mut f = host();
    f.sandbox.unit = Ok(None);
    assert_eq!(
        verdict(&audit(&f), CheckKind::Sandbox, "service"),
        CheckVerdict::Unknown
    );
}

#[test]
fn missing_modules_by_how_much_they_matter() {
    let mut f = host();
    f.modules.loaded = Ok(vec!["ib_core".into(), "rdma_cm".into(), "ib_iser".into()]);
    let c = audit(&f).find(CheckKind::Modules, "host").cloned().unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    assert_eq!(c.finding, "not loaded: ib_uverbs, rdma_ucm");
    f.modules.loaded = Ok(vec![]);
    f.modules.builtin = Ok(vec!["ib_core".into()]);
    let c = audit(&f).find(CheckKind::Modules, "host").cloned().unwrap();
    assert_eq!(
        c.verdict,
        CheckVerdict::Warning,
        "ib_core built in counts as loaded"
    );
    f.modules.builtin = Ok(vec![]);
    assert_eq!(
        verdict(&audit(&f), CheckKind::Modules, "host"),
        CheckVerdict::Problem
    );
    f.modules.loaded = Err("/proc/modules: not found".into());
    f.modules.builtin = Err("modules.builtin: not found".into());
    f.modules.info.clear();
    assert_eq!(
        verdict(&audit(&f), CheckKind::Modules, "host"),
        CheckVerdict::Unknown
    );
}

#[test]
fn the_configuration_against_the_host() {
    let mut f = host();
    f.config.allow = vec!["rocep2s0f0".into(), "mlx5_1".into()];
    let r = audit(&f);
    let c = r.find(CheckKind::Config, "devices.allow").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    assert!(c.finding.ends_with("mlx5_1"), "{}", c.finding);
    // The device with the session is not allowed.
    f.config.allow = vec!["mlx5_1".into()];
    let r = audit(&f);
    let c = r.find(CheckKind::Config, "rocep2s0f0").unwrap();
    assert!(c
        .finding
        .contains("carries 1 iSCSI session but is not in devices.allow"));
    // Empty list, dry-run, a broken file.
    f.config.allow.clear();
    f.config.dry_run = true;
    f.config.problems = vec!["line 2: recovery.max-attempts: 0 is out of range".into()];
    let r = audit(&f);
    assert_eq!(
        verdict(&r, CheckKind::Config, "devices.allow"),
        CheckVerdict::Warning
    );
    assert_eq!(
        verdict(&r, CheckKind::Config, "configuration"),
        CheckVerdict::Problem
    );
    // The portal is probed as configured; a node record without a session is listed.
    let r = audit(&host());
    let c = r.find(CheckKind::Config, "portal 192.0.2.2:3260").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Ok);
    assert!(
        c.finding.contains("a TCP connect to 192.0.2.2:3260"),
        "{}",
        c.finding
    );
    assert!(
        c.evidence[0].contains("session 1 LOGGED_IN on rocep2s0f0/1 (placed by its RDMA CM id)")
    );
    let mut f = host();
    f.iscsi.sessions = Ok(vec![]);
    let r = audit(&f);
    let c = r.find(CheckKind::Config, "portal 192.0.2.2:3260").unwrap();
    assert_eq!(
        c.verdict,
        CheckVerdict::Warning,
        "node.startup = automatic without a session"
    );
}

#[test]
fn open_iscsi_settings_that_fight_recovery() {
    let mut f = host();
    let bad = "iface.transport_name = iser\nnode.startup = onboot\n\
               node.session.timeo.replacement_timeout = 10\nnode.conn[0].timeo.login_timeout = 30\n\
               node.conn[0].timeo.noop_out_interval = 0\nnode.session.reopen_max = 4\n";
    f.iscsi.nodes.as_mut().unwrap()[0].settings = Ok(parse_iscsi_settings(bad));
    let r = audit(&f);
    let c = r
        .find(
            CheckKind::OpenIscsi,
            "iqn.2003-01.org.example.lab:tgt0 192.0.2.2:3260 iser",
        )
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    for key in [
        "node.session.timeo.replacement_timeout",
        "node.conn[0].timeo.login_timeout",
        "node.conn[0].timeo.noop_out_interval",
        "node.startup",
        "node.session.reopen_max",
    ] {
        assert!(c.finding.contains(key), "{key} not in {}", c.finding);
    }
    assert!(!c.finding.contains("noop_out_timeout"), "{}", c.finding);
    assert!(c
        .evidence
        .iter()
        .any(|e| e == "node.conn[0].timeo.noop_out_timeout = 5 (open-iscsi's default)"));
    let a = c.action.as_deref().unwrap();
    assert!(a.contains("recovery.iscsid-grace to at least 35 s"), "{a}");
    assert!(a.contains("above 35 s"), "{a}");
    // The same record is fine with the defaults and a session.
    let r = audit(&host());
    assert_eq!(
        verdict(
            &r,
            CheckKind::OpenIscsi,
            "iqn.2003-01.org.example.lab:tgt0 192.0.2.2:3260 iser"
        ),
        CheckVerdict::Ok
    );
    assert_eq!(
        verdict(&r, CheckKind::OpenIscsi, "iscsid.conf"),
        CheckVerdict::Ok
    );
    // A record root alone may read.
    let mut f = host();
    f.iscsi.nodes.as_mut().unwrap()[0].settings = Err("permission denied".into());
    assert_eq!(
        verdict(
            &audit(&f),
            CheckKind::OpenIscsi,
            "iqn.2003-01.org.example.lab:tgt0 192.0.2.2:3260 iser"
        ),
        CheckVerdict::Unknown
    );
    // No open-iscsi at all.
    let mut f = host();
    f.iscsi.nodes = Ok(vec![]);
    f.iscsi.iscsid_conf = Ok(None);
    assert_eq!(
        verdict(&audit(&f), CheckKind::OpenIscsi, "iscsid.conf"),
        CheckVerdict::Warning
    );
}

#[test]
fn known_defects_follow_the_kernel_and_the_drivers() {
    let mut f = host();
    f.kernel.release = Ok("6.12.95+deb13-amd64".into());
    let r = audit(&f);
    assert!(r
        .find(CheckKind::KnownIssue, "iser-task-rsp-crash")
        .is_some());
    let c = r
        .find(CheckKind::KnownIssue, "iser-task-rsp-crash")
        .unwrap();
    assert!(c.evidence.iter().any(|e| e.contains("docs/lab.md")));
    f.kernel.release = Ok("7.1.0".into());
    let r = audit(&f);
    assert!(r
        .find(CheckKind::KnownIssue, "iser-task-rsp-crash")
        .is_none());
    assert!(r
        .find(CheckKind::KnownIssue, "irdma-qp-state-fix")
        .is_none());
    assert!(r.find(CheckKind::KnownIssue, "irdma-gsi-stuck").is_some());
    // Not allow-listed: the stuck-GSI defect is a warning.
    f.config.allow.clear();
    assert_eq!(
        verdict(&audit(&f), CheckKind::KnownIssue, "irdma-gsi-stuck"),
        CheckVerdict::Warning
    );
    // A Soft-RoCE host on 6.13 without iSER: nothing applies.
    let mut f = host();
    f.kernel.release = Ok("6.13.2".into());
    let d = &mut f.rdma.devices[0];
    d.modules = vec!["rdma_rxe".into()];
    d.aux = None;
    d.pci = None;
    let r = audit(&f);
    let c = r.find(CheckKind::KnownIssue, "host").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Ok);
    assert!(c.finding.contains("Linux 6.13.2"));
    // Unknown version: rows that need a version cannot be matched.
    let mut f = host();
    f.kernel.release = Err("unreadable".into());
    assert_eq!(
        verdict(&audit(&f), CheckKind::KnownIssue, "iser-task-rsp-crash"),
        CheckVerdict::Unknown
    );
}

#[test]
fn a_bonded_e810_port_without_rdma_is_named() {
    let mut f = host();
    f.bonded = vec![BondedPort {
        pci: "0000:02:00.1".into(),
        driver: "ice".into(),
        netdev: "enp2s0f1".into(),
        master: "bond0".into(),
        has_rdma: false,
    }];
    let r = audit(&f);
    let c = r
        .find(CheckKind::KnownIssue, "bonded-e810-no-rdma")
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    assert!(c
        .evidence
        .iter()
        .any(|e| e == "enp2s0f1 (PCI 0000:02:00.1) is a member of bond0 and has no RDMA device"));
}

#[test]
fn a_tainted_kernel_that_oopsed_is_a_warning() {
    let mut f = host();
    f.kernel.tainted = Some(1 << 12);
    assert_eq!(
        verdict(&audit(&f), CheckKind::Kernel, "host"),
        CheckVerdict::Ok
    );
    f.kernel.tainted = Some(1 << 12 | 1 << 7);
    let c = audit(&f).find(CheckKind::Kernel, "host").cloned().unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
    assert!(
        c.evidence[1].contains("D: the kernel died"),
        "{:?}",
        c.evidence
    );
}

#[test]
fn the_daemon_against_the_kernel() {
    use crate::observe::DaemonSnapshot;
    use crate::recovery::Phase;
    // A daemon's answer as the control socket carries it (the daemon's own JSON).
    let snapshot = |phase: Phase, port: &str| -> DaemonSnapshot {
        let stamp = serde_json::json!({"mono": 0, "unix_ms": 0});
        serde_json::from_value(serde_json::json!({
            "format": 1,
            "daemon": {
                "version": "0.1.0", "pid": 42, "started": stamp, "now": stamp, "uptime_ms": 0,
                "status": "ok", "paused": false, "dry_run": false, "scan_complete": true
            },
            "ports": [{
                "port": port, "device": "rocep2s0f0", "phase": phase, "why": "sessions logged in",
                "since": stamp, "fault": null, "fault_since": null, "driven_by": "engine",
                "next": null, "deadline": null, "attempts": 0, "max_attempts": 3, "holds": [],
                "notes": [], "in_flight": [], "sessions": [], "portals": [], "last_selftest": null
            }],
            "paused": false,
            "safe_mode": null
        }))
        .expect("a daemon snapshot")
    };
    let mut f = host();
    f.daemon = DaemonWitness::Running {
        snapshot: Box::new(snapshot(Phase::Healthy, "rocep2s0f0/1")),
    };
    let c = audit(&f)
        .find(CheckKind::Daemon, "daemon")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Ok, "{c:#?}");
    f.rdma.devices[0].ports[0].gsi = Gsi::State {
        state: "ERR".into(),
        evidence: String::new(),
    };
    let c = audit(&f)
        .find(CheckKind::Daemon, "daemon")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Problem);
    assert!(c
        .evidence
        .iter()
        .any(|e| e.contains("QP 1 is in ERR but the daemon says Healthy")));
    let mut f = host();
    f.daemon = DaemonWitness::Running {
        snapshot: Box::new(snapshot(Phase::Healthy, "mlx5_0/1")),
    };
    let c = audit(&f)
        .find(CheckKind::Daemon, "daemon")
        .cloned()
        .unwrap();
    assert_eq!(c.verdict, CheckVerdict::Problem);
    f.daemon = DaemonWitness::NotRunning {
        socket: "/run/iser-guard/control.sock".into(),
    };
    assert_eq!(
        verdict(&audit(&f), CheckKind::Daemon, "daemon"),
        CheckVerdict::Warning
    );
}
