//! The initiator's RDMA device deleted and left deleted (issue 9 "Why" 5; lab scenario
//! `dev-left-deleted`): the simulated host models it as the kernel does (captures
//! nldevcap-*: gone from `rdma dev` and sysfs, session FAILED / REOPEN, no QP or CM id left;
//! only `rdma link add NAME type rxe netdev N` brings it back, under a new index).

use iser_guard::core::recovery::{ActionKind, Phase};
use iser_guard::core::reset_plan::{RecreateFrom, SoftType};
use iser_guard::core::time::Instant;
use iser_guard::sim::{scenarios, Entry};

use super::util::*;

const DEV: &str = "rxe_ini";

#[test]
fn a_deleted_rxe_device_left_deleted_is_added_back_on_its_remembered_netdev() {
    let before = scenarios::find("device-stays-gone").unwrap().harness(7);
    let index_before = before.host.devices[DEV].index;
    let h = run("device-stays-gone");
    assert_safety(&h);
    // The kernel's view after the daemon acted: the link was added back, by the command an
    // operator would have typed, once.
    assert_eq!(
        h.host.commands,
        vec!["rdma link add rxe_ini type rxe netdev ini0".to_string()]
    );
    assert!(
        h.timeline
            .iter()
            .any(|e| matches!(e, Entry::Note { text, .. }
            if text == "rxe_ini: rdma link add rxe_ini type rxe netdev ini0")),
        "the host never ran `rdma link add`"
    );
    let d = &h.host.devices[DEV];
    assert!(d.present);
    assert!(
        d.index > index_before,
        "index {index_before} -> {}",
        d.index
    );
    // What the engine handed the executor: the remembered link type and netdev.
    let (at, a) = h
        .actions
        .iter()
        .find(|(_, a)| matches!(a.kind, ActionKind::RecreateDevice { .. }))
        .expect("re-created");
    assert!(
        matches!(&a.kind, ActionKind::RecreateDevice { remembered: Some(RecreateFrom::SoftLink { kind: SoftType::Rxe, netdev }), .. } if netdev == "ini0"),
        "{:?}",
        a.kind
    );
    assert!(
        at.as_millis() >= 120_000,
        "did not wait for the device: {at}"
    );
    assert_eq!(h.recreations(), vec![DEV.to_string()]);
    // Sessions back on the new device, verified.
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, DEV, 1), Phase::Healthy);
    let back = alerts_with(&h, "storage is back");
    assert!(!back.is_empty());
    assert!(
        back.iter()
            .any(|a| a.detail.contains("new GSI QP 1 was seen in RTS")),
        "{back:?}"
    );
    let cm = h.host.cm_ids();
    assert!(cm.iter().any(|c| c.kern_name.as_deref() == Some("ib_iser")
        && c.dev_name == DEV
        && c.dev_index == h.host.devices[DEV].index));
    assert!(alerts_with(&h, "automatic recovery stopped").is_empty());
}

#[test]
fn the_remembered_recipe_survives_a_restart_while_the_device_is_gone() {
    let s = scenarios::find("device-stays-gone").unwrap();
    let mut h = s.harness(7);
    h.run_until(Instant(90_000), MAX_STEPS).unwrap();
    assert!(!h.host.devices[DEV].present);
    h.restart().unwrap();
    h.run_until(Instant::ZERO.plus(s.duration), MAX_STEPS)
        .unwrap();
    assert_safety(&h);
    assert_eq!(
        h.host.commands,
        vec!["rdma link add rxe_ini type rxe netdev ini0".to_string()]
    );
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, DEV, 1), Phase::Healthy);
}

/// The daemon restarts (upgraded from a release that did not remember devices) while the
/// device is gone: it never saw it exist, so it cannot know the netdev.
#[test]
fn a_gone_device_never_seen_is_refused_and_the_alert_says_what_to_run() {
    let s = scenarios::find("device-stays-gone").unwrap();
    let mut h = s.harness(7);
    h.run_until(Instant(61_000), MAX_STEPS).unwrap();
    assert!(!h.host.devices[DEV].present);
    let mut journal: serde_json::Value =
        serde_json::from_slice(h.journal.as_ref().expect("journaled")).unwrap();
    for d in journal["devices"].as_array_mut().unwrap() {
        d["remembered"] = serde_json::Value::Null;
    }
    h.journal = Some(serde_json::to_vec(&journal).unwrap());
    h.restart().unwrap();
    h.run_until(Instant::ZERO.plus(s.duration), MAX_STEPS)
        .unwrap();
    assert_safety(&h);
    assert!(h.host.commands.is_empty(), "{:?}", h.host.commands);
    assert!(h.recreations().is_empty(), "{:?}", h.recreations());
    assert!(!h.host.devices[DEV].present);
    assert_eq!(phase(&h, DEV, 1), Phase::Quarantined);
    let a = alerts_with(&h, "cannot be re-created automatically");
    assert_eq!(a.len(), 1, "{:?}", h.alerts);
    assert_eq!(a[0].remedy.as_deref(), Some("iser-guard recover rxe_ini/1"));
    assert!(
        a[0].detail
            .contains("rdma link add rxe_ini type rxe netdev"),
        "{}",
        a[0].detail
    );
    assert!(a[0].detail.contains("never saw it"), "{}", a[0].detail);
    // The operator's reset-device is refused the same way, with the command to run.
    let now = h.now;
    let err = h
        .driver
        .handle_command(
            iser_guard::core::recovery::OperatorCommand::ResetDevice { device: DEV.into() },
            now,
        )
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("never saw it") && err.contains("rdma link add rxe_ini type rxe netdev"),
        "{err}"
    );
    // Never blamed on the other device.
    for (_, al) in &h.alerts {
        let text = format!("{} {} {:?}", al.summary, al.detail, al.remedy);
        assert!(!text.contains("rxe_tgt"), "{text}");
    }
}
