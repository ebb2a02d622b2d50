//! dm-multipath maps on the simulated host (its multipathd answers in `show paths raw
//! format`, read through the core's parser): the last usable path of a map holds an
//! automatic re-creation, the paths a re-creation takes down are remembered, journaled and
//! checked after it, and one still failed is reinstated.

use iser_guard::core::multipath::{DmPathState, PathBackResult};
use iser_guard::core::recovery::{ActionKind, AlertClass, Hold, OperatorCommand, Origin};
use iser_guard::sim::scenarios::FIELD_DEVICE;

use super::util::*;

#[test]
fn the_last_usable_path_of_a_map_holds_until_another_path_is_back() {
    let h = run("last-multipath-path");
    assert_safety(&h);
    let held = alerts_with(
        &h,
        "would take the last usable path of dm-multipath map(s) mpathb",
    );
    assert_eq!(held.len(), 1, "one hold alert");
    assert_eq!(held[0].severity, AlertClass::Critical);
    assert!(
        held[0]
            .detail
            .contains("Usable paths all on rocep2s0f0: mpathb: sdb on port 1 (active, session [iface: iser, target: iqn.2003-01.org.example:backup"),
        "{}",
        held[0].detail
    );
    assert!(
        held[0]
            .detail
            .contains("recovery.multipath-last-path = \"proceed\""),
        "{}",
        held[0].detail
    );
    // Not before the FC path came back at 400 s, and on the engine's own decision.
    let t = first_recreate_secs(&h, FIELD_DEVICE).unwrap();
    assert!(
        t >= 400,
        "re-created at {t}s, while mpathb had no other path"
    );
    assert_eq!(h.recreations().len(), 1);
    // The re-creation named the path it took down; the check after it found it active.
    let (_, act) = h
        .actions
        .iter()
        .find(|(_, a)| matches!(a.kind, ActionKind::MultipathReinstate { .. }))
        .unwrap();
    assert_eq!(act.origin, Origin::Automatic);
    let back = alerts_with(
        &h,
        "1 dm-multipath path(s) on rocep2s0f0 active in their maps again",
    );
    assert_eq!(back.len(), 1);
    assert_eq!(back[0].severity, AlertClass::Info);
    assert!(h.host.storage_ok());
}

#[test]
fn with_proceed_the_last_path_does_not_hold() {
    let s = iser_guard::sim::scenarios::find("last-multipath-path").unwrap();
    let (host, mut p) = (s.build)();
    p.multipath_last_path = iser_guard::core::consumers::ConsumerAction::Proceed;
    let mut h = iser_guard::sim::Harness::new(host, p, 7);
    h.run_until(iser_guard::core::time::Instant(700_000), MAX_STEPS)
        .unwrap();
    assert!(alerts_with(&h, "last usable path").is_empty());
    let t = first_recreate_secs(&h, FIELD_DEVICE).unwrap();
    assert!(
        t < 400,
        "re-created at {t}s: proceed does not wait for the FC path"
    );
}

#[test]
fn a_path_still_failed_after_the_recreation_is_reinstated_and_journaled() {
    let h = run("multipath-paths-reinstated");
    assert_safety(&h);
    assert_eq!(h.recreations().len(), 1);
    // The map kept a usable path elsewhere: no hold.
    assert!(alerts_with(&h, "last usable path").is_empty());
    let r = alerts_with(&h, "re-creating RDMA device");
    assert!(
        r[0].detail.contains(
            "dm-multipath paths it takes down, checked after it: mpatha: sda on port 1 (failed"
        ),
        "{}",
        r[0].detail
    );
    let mp = h.host.multipath.as_ref().unwrap();
    assert_eq!(mp.reinstated, vec!["sda".to_string()]);
    assert!(
        mp.maps[0].paths.iter().all(|p| !p.failed),
        "both paths active"
    );
    let back = alerts_with(
        &h,
        "1 dm-multipath path(s) on rocep2s0f0 active in their maps again",
    );
    assert_eq!(back.len(), 1);
    assert!(
        back[0].detail.contains("reinstated as sda"),
        "{}",
        back[0].detail
    );
    // The record keeps the path and its result, and survives the journal.
    let snap = h.engine().snapshot();
    let bytes = iser_guard::core::journal::encode(&snap);
    assert!(String::from_utf8_lossy(&bytes).contains("multipath-paths"));
    let decoded = iser_guard::core::journal::decode(&bytes).unwrap();
    let rec = decoded
        .devices
        .iter()
        .find(|d| d.name == FIELD_DEVICE)
        .and_then(|d| d.recreation.clone())
        .unwrap();
    assert_eq!(rec.multipath.len(), 1);
    assert_eq!(rec.multipath[0].map, "mpatha");
    assert_eq!(rec.multipath[0].dm, DmPathState::Failed);
    assert_eq!(
        rec.multipath_back[0].result,
        PathBackResult::Reinstated { dev: "sda".into() }
    );
    assert!(h.host.storage_ok());
    // The next re-creation's plan (reset-device --dry-run) names the path it takes down.
    let plan = h
        .plan(&OperatorCommand::ResetDevice {
            device: FIELD_DEVICE.into(),
        })
        .unwrap();
    let lines = plan.lines().join("\n");
    assert!(
        lines.contains("check the dm-multipath path on the device active in their maps again"),
        "{lines}"
    );
    assert!(
        lines.contains("  mpatha: sda on port 1 (active, session"),
        "{lines}"
    );
    assert!(
        !lines.contains("WARNING"),
        "mpatha has sdb elsewhere: {lines}"
    );
}

#[test]
fn the_plan_warns_when_it_takes_a_map_s_last_path() {
    let s = iser_guard::sim::scenarios::find("last-multipath-path").unwrap();
    let mut h = s.harness(7);
    h.run_until(iser_guard::core::time::Instant(300_000), MAX_STEPS)
        .unwrap();
    assert!(matches!(
        h.engine()
            .port(&iser_guard::sim::scenarios::field_port())
            .and_then(|p| p.hold.clone()),
        Some(Hold::LastMultipathPath { .. })
    ));
    let plan = h
        .plan(&OperatorCommand::Recover {
            device: FIELD_DEVICE.into(),
            port: Some(1),
        })
        .unwrap();
    let lines = plan.lines().join("\n");
    assert!(
        lines.contains(
            "WARNING: the re-creation takes the last usable path of dm-multipath map(s) mpathb"
        ),
        "{lines}"
    );
}
