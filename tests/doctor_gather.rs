//! doctor's reading of RDMA netlink, against the kernel's own bytes: the lab's 6.12 guest
//! with the iSER session logged in (crates/iser-guard-core/tests/fixtures/nldev,
//! k612/nldev-1-loggedin), replayed by the fake kernel, with the Soft-RoCE sysfs fixture and
//! the lab's `iscsiadm -m session -P 3`. The QP 1 and CM id checks must say what
//! `rdma resource show qp` and `rdma resource show cm_id` said at that moment.

#[path = "support/fake_kernel.rs"]
mod fake_kernel;

use std::path::Path;

use fake_kernel::*;
use iser_guard::config::Config;
use iser_guard::core::doctor::{audit, CheckKind, CheckVerdict, CmIdOwner, DaemonWitness, Gsi};
use iser_guard::doctor::{gather, ConfigOrigin, Witnesses};
use iser_guard::io::iscsiadm::{ScriptedIscsiAdm, SessionListing};
use iser_guard::io::netlink::NldevClient;
use iser_guard::io::process::SystemRunner;
use iser_guard::io::reset::{ResetConfig, SysfsResetter};

const P3: &str = include_str!("fixtures/stubs/iscsiadm.d/session-P3-loggedin.txt");

fn manifest(rel: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(rel)
}

#[test]
fn the_lab_host_logged_in_as_rdma_netlink_showed_it() {
    let mut cfg = Config::default();
    cfg.paths.sysfs_root = manifest("tests/fixtures/sysfs/rxe");
    cfg.paths.rdma = manifest("tests/fixtures/stubs/rdma");
    cfg.devices.allow = vec!["rxe_ini".into()];
    let empty = tempfile::tempdir().unwrap();
    for p in [
        &mut cfg.paths.proc_root,
        &mut cfg.paths.dev_root,
        &mut cfg.paths.modules_root,
        &mut cfg.paths.iscsi_dir,
        &mut cfg.paths.unit_dropins,
    ] {
        *p = empty.path().to_path_buf();
    }
    cfg.paths.unit_file = empty.path().join("none.service");
    let iscsi = ScriptedIscsiAdm::default();
    iscsi.push_sessions(Ok(SessionListing::Text(P3.into())));
    let resetter = SysfsResetter::new(ResetConfig::new(
        cfg.paths.sysfs_root.clone(),
        cfg.paths.devlink.clone(),
        cfg.paths.rdma.clone(),
        cfg.paths.modprobe.clone(),
        false,
    ));
    let (t, h) = serve(Replay::default().moment("k612/nldev-1-loggedin"));
    let no_route = |_: std::net::IpAddr| -> Result<String, String> { Err("no routes".into()) };
    let facts = gather(
        &cfg,
        &ConfigOrigin {
            source: "test".into(),
            ..ConfigOrigin::default()
        },
        Witnesses {
            netlink: Ok(NldevClient::new(t)),
            iscsi: &iscsi,
            resetter: &resetter,
            runner: &SystemRunner,
            addresses: vec![],
            routes: &no_route,
            daemon: DaemonWitness::NotAsked,
        },
    );
    h.join().unwrap();

    // rdma resource show qp: rxe_ini/1 lqpn 1 GSI RTS, rxe_tgt/1 lqpn 1 GSI RTS.
    let names: Vec<&str> = facts.rdma.devices.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["rxe_ini", "rxe_tgt"]);
    for d in &facts.rdma.devices {
        assert!(
            matches!(&d.ports[0].gsi, Gsi::State { state, .. } if state == "RTS"),
            "{:?}",
            d.ports[0].gsi
        );
    }
    // rdma resource show cm_id: rxe_ini/1 ib_iser CONNECT 192.0.2.1:38141 -> 192.0.2.2:3260;
    // rxe_tgt/1 ib_isert LISTEN on 192.0.2.2:3260 and CONNECT to 192.0.2.1:38141.
    let ini = facts.rdma.devices[0].ports[0].cm_ids.as_ref().unwrap();
    assert_eq!(ini.len(), 1);
    assert_eq!(
        ini[0].consumer,
        CmIdOwner::Kernel {
            module: "ib_iser".into()
        }
    );
    assert_eq!(ini[0].state, "CONNECT");
    assert_eq!(ini[0].src.as_deref(), Some("192.0.2.1:38141"));
    assert_eq!(ini[0].dst.as_deref(), Some("192.0.2.2:3260"));
    let tgt = facts.rdma.devices[1].ports[0].cm_ids.as_ref().unwrap();
    let states: Vec<(&str, String)> = tgt
        .iter()
        .map(|c| (c.state.as_str(), c.consumer.describe()))
        .collect();
    assert_eq!(
        states,
        [
            ("LISTEN", "ib_isert".to_string()),
            ("CONNECT", "ib_isert".to_string())
        ]
    );
    // The session is placed on rxe_ini/1 by ib_iser's CM id.
    let s = &facts.iscsi.sessions.as_ref().unwrap()[0];
    assert_eq!(s.port, Some(("rxe_ini".to_string(), 1)));
    assert!(s.placed_by.as_deref().unwrap().contains("CM id"), "{s:?}");
    assert_eq!(s.disks, ["sda"]);
    // rxe_ini, a software device, is re-created by `rdma link` delete/add on ini0.
    let plan = facts.rdma.devices[0].recreate.as_ref().unwrap();
    assert_eq!(plan.methods[0].0.kind(), "rdma-link-readd");
    assert_eq!(facts.rdma.devices[0].soft.as_deref(), Some("rxe"));
    assert_eq!(facts.rdma.devices[0].modules, ["rdma_rxe"]);

    let r = audit(&facts);
    let c = r.find(CheckKind::GsiQp, "rxe_ini/1").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Ok);
    assert_eq!(
        c.evidence,
        ["QP table: rxe_ini/1 lqpn 1 type GSI state RTS owner ib_core"]
    );
    let c = r.find(CheckKind::CmIds, "rxe_ini/1").unwrap();
    assert_eq!(
        c.verdict,
        CheckVerdict::Ok,
        "only ib_iser on the allow-listed device"
    );
    assert_eq!(c.finding, "consumers: ib_iser (1 connection)");
    let c = r.find(CheckKind::CmIds, "rxe_tgt/1").unwrap();
    assert_eq!(
        c.verdict,
        CheckVerdict::Ok,
        "rxe_tgt is not iser-guard's to re-create"
    );
    assert_eq!(c.finding, "consumers: ib_isert (1 connection, 1 listener)");
    // rxe_tgt is in netlink only (the sysfs fixture has rxe_ini alone).
    let c = r.find(CheckKind::Device, "rxe_tgt").unwrap();
    assert_eq!(c.verdict, CheckVerdict::Warning);
}
