//! The doubles behind `Executors` (what the daemon's tests and the simulator use) and the
//! exit codes each executor error maps to.

use std::net::SocketAddr;

use iser_guard::config::Config;
use iser_guard::core::severity::Severity;
use iser_guard::error::{self, Error};
use iser_guard::io::executors::Doubles;
use iser_guard::io::iscsiadm::{IscsiCall, LoginOutcome, NodeId, SessionListing, StatusClass};
use iser_guard::io::lock::RecoveryLock;
use iser_guard::io::probe::{ProbeResult, ProbeSource, TcpAnswer};
use iser_guard::io::reset::ResetOutcome;
use iser_guard::io::syslog::AlertMessage;

#[test]
fn scripted_executors_answer_in_order_and_record_calls() {
    let d = Doubles::default();
    let ex = d.executors(iser_guard::compose::probe_options(&Config::default()));
    let portal: SocketAddr = "192.0.2.2:3260".parse().unwrap();

    d.prober.push(portal, [TcpAnswer::Refused]);
    let src = ProbeSource::default();
    let t = ex.probe_timeout;
    // Refused, and the host does not answer ARP/ND either (nothing queued): refused.
    assert_eq!(ex.probes.probe(portal, &src, t).0, ProbeResult::Refused);
    assert_eq!(ex.probes.probe(portal, &src, t).0, ProbeResult::Unreachable);
    assert_eq!(d.prober.calls().len(), 2);
    assert_eq!(d.neighbour.calls(), vec![portal]);

    let node = NodeId {
        target: "iqn.2003-01.org.example.lab:tgt0".into(),
        address: "192.0.2.2".into(),
        port: 3260,
        iface: Some("iser".into()),
    };
    d.iscsi.push_login(Err(24));
    let err = ex.iscsi.login(&node).unwrap_err();
    assert_eq!(err.class(), StatusClass::Permanent);
    assert_eq!(ex.iscsi.login(&node).unwrap(), LoginOutcome::LoggedIn);
    assert_eq!(ex.iscsi.sessions(true).unwrap(), SessionListing::NoSessions);
    assert_eq!(
        d.iscsi.calls(),
        [
            IscsiCall::Login(node.clone()),
            IscsiCall::Login(node),
            IscsiCall::Sessions(true)
        ]
    );

    assert!(matches!(
        ex.resetter.recreate("rocep2s0f0", false).unwrap(),
        ResetOutcome::Recreated(_)
    ));
    d.resetter.push(Err("no way".into()));
    assert!(ex.resetter.recreate("rocep2s0f0", true).is_err());
    assert_eq!(
        d.resetter.calls(),
        [
            ("rocep2s0f0".to_string(), false),
            ("rocep2s0f0".to_string(), true)
        ]
    );

    let a = AlertMessage {
        severity: Severity::Alert,
        what: "w".into(),
        why: "y".into(),
        todo: "t".into(),
    };
    ex.alerts.as_ref().unwrap().send(&a).unwrap();
    assert_eq!(d.alerts.alerts(), [a]);
}

#[test]
fn executor_errors_map_to_documented_exit_codes() {
    let dir = tempfile::tempdir().unwrap();
    let _held = RecoveryLock::try_acquire(dir.path(), "first").unwrap();
    let e: Error = RecoveryLock::try_acquire(dir.path(), "second")
        .unwrap_err()
        .into();
    assert_eq!(e.exit_code(), error::ExitStatus::TempFail.code());

    let d = Doubles::default();
    let ex = d.executors(iser_guard::compose::probe_options(&Config::default()));
    let node = NodeId {
        target: "iqn.x:y".into(),
        address: "192.0.2.2".into(),
        port: 3260,
        iface: None,
    };
    for (code, exit) in [
        (8, error::ExitStatus::TempFail.code()),
        (24, error::ExitStatus::Config.code()),
        (21, error::ExitStatus::NoInput.code()),
    ] {
        d.iscsi.push_login(Err(code));
        let e: Error = ex.iscsi.login(&node).unwrap_err().into();
        assert_eq!(e.exit_code(), exit, "iscsiadm exit {code}");
    }

    let cfg = iser_guard::compose::reset_config(&Config::default());
    let r = iser_guard::io::reset::SysfsResetter::new(cfg);
    use iser_guard::io::reset::DeviceResetter;
    let e: Error = r.recreate("rocep2s0f0", false).unwrap_err().into();
    // No allow-list check here any more (the driver decides before calling): the resetter
    // looks for the device and does not find it.
    assert_ne!(e.exit_code(), error::ExitStatus::NoPerm.code(), "{e}");
    assert!(e.to_string().contains("rocep2s0f0"), "{e}");
}

#[test]
fn reset_config_comes_from_the_configuration() {
    let mut cfg = Config::default();
    cfg.paths.sysfs_root = "/tmp/fake-sys".into();
    cfg.paths.devlink = "/opt/iproute2/devlink".into();
    cfg.paths.rdma = "/opt/iproute2/rdma".into();
    cfg.paths.modprobe = "/opt/kmod/modprobe".into();
    cfg.recovery.allow_module_reload = true;
    let r = iser_guard::compose::reset_config(&cfg);
    assert_eq!(r.sysfs_root, cfg.paths.sysfs_root);
    assert_eq!(r.devlink, cfg.paths.devlink);
    assert_eq!(r.rdma, cfg.paths.rdma);
    assert_eq!(r.modprobe, cfg.paths.modprobe);
    assert!(r.allow_module_reload);
}
