//! What real RDMA drivers do that Soft-RoCE does not (issue 22), on the simulated host.
//!
//! - `recreate-hang`: the re-creation's first step blocks in the kernel (device removal
//!   waits, uninterruptibly, for every user of the device): the daemon reports it with the
//!   blocked task's state and stack, starts no second writer, refuses the operator's
//!   `recover` meanwhile, and resumes verification when the step returns.
//! - `driver-reset`: irdma asks ice for a reset while the target is away and the device is
//!   gone for 3 minutes (longer than `recovery.device-wait`): the engine starts no
//!   re-creation of its own, and verifies the port when the driver brings the device back.
//! - `iwarp-flip`: a reset of the function lands between the re-creation's two devlink
//!   calls and ice re-plugs the device as iWARP: the executor's mode check restores RoCE,
//!   the operator is told once, verification goes on as usual.
//! - `iser-only-portal`: the target's portal has no TCP listener (refused) while its host
//!   answers ARP/ND: the portal is probed by the neighbour probe and the port recovers only
//!   once the target is back.

use iser_guard::core::recovery::{AlertClass, Phase};
use iser_guard::sim::scenarios::FIELD_DEVICE;
use iser_guard::sim::Entry;

use super::util::*;

#[test]
fn a_recreation_blocked_in_the_kernel_is_reported_never_doubled_and_resumed() {
    let h = run("recreate-hang");
    assert_safety(&h);
    // One writer, ever: nothing else was started on the device while its step was blocked.
    assert_eq!(h.recreations(), vec![FIELD_DEVICE.to_string()]);
    assert_eq!(h.host.devices[FIELD_DEVICE].recreations_started, 1);
    let started = first_recreate_secs(&h, FIELD_DEVICE).expect("re-created");
    // Reported once the step outlived its deadline and the kill grace (32 s), with the
    // blocked task's state and kernel stack.
    let blocked = h
        .transitions
        .iter()
        .find(|t| t.to == Phase::RecreationBlocked)
        .expect("never reported blocked");
    assert_eq!(blocked.at.as_millis() / 1000, started + 32, "{blocked}");
    assert!(
        blocked
            .reason
            .contains("has been blocked in the kernel for 32 s")
            && blocked.reason.contains("enable_roce value false"),
        "{}",
        blocked.reason
    );
    let first = alerts_with(
        &h,
        "re-creation of rocep2s0f0 has been blocked in the kernel for 32 s",
    );
    assert_eq!(first.len(), 1, "{:#?}", h.alerts);
    assert_eq!(first[0].severity, AlertClass::Critical);
    for needle in [
        "D (uninterruptible sleep)",
        "ice_devlink_enable_roce_set [ice]",
        "__ib_unregister_device [ib_core]",
        "fuser -v /dev/infiniband",
        "only a reboot",
    ] {
        assert!(
            first[0].detail.contains(needle),
            "{needle}: {}",
            first[0].detail
        );
    }
    // Reported again with the time so far (every alerts.repeat-interval, 300 s).
    assert_eq!(
        alerts_with(&h, "has been blocked in the kernel for 332 s").len(),
        1,
        "{:#?}",
        h.alerts
    );
    // The operator's `recover` during the block was refused: it would be a second writer.
    assert!(
        h.timeline
            .iter()
            .any(|e| matches!(e, Entry::Note { text, .. }
            if text.contains("recover rocep2s0f0/1: refused: the re-creation of rocep2s0f0 has \
                been blocked in the kernel for"))),
        "{}",
        h.render()
    );
    // When the step returned (420 s after it started; the device is back 3 s later),
    // verification resumed and storage came back with no second re-creation.
    let unblocked = alerts_with(&h, "is no longer blocked (after 423 s)");
    assert_eq!(unblocked.len(), 1, "{:#?}", h.alerts);
    let phases: Vec<Phase> = h
        .transitions
        .iter()
        .skip_while(|t| t.to != Phase::RecreationBlocked)
        .map(|t| t.to)
        .collect();
    assert_eq!(
        phases.get(..3),
        Some(
            &[
                Phase::RecreationBlocked,
                Phase::ResettingDevice,
                Phase::Reconnecting
            ][..]
        ),
        "{phases:?}"
    );
    // Nothing else alarmed the operator meanwhile: iscsid's failed reconnects to the
    // disabled device are explained by the block.
    assert!(alerts_with(&h, "cannot acquire a local RDMA device").is_empty());
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
    let back = h.storage_back_at().expect("storage back").as_millis() / 1000;
    assert!(
        back > started + 420,
        "storage back at {back}s, before the step returned"
    );
}

#[test]
fn a_blocked_recreation_survives_restarts_without_a_second_writer() {
    let h = run_restarting("recreate-hang");
    assert!(h.restarts > 100, "only {} restarts", h.restarts);
    assert_eq!(h.host.devices[FIELD_DEVICE].recreations_started, 1);
    assert!(h
        .transitions
        .iter()
        .any(|t| t.to == Phase::RecreationBlocked));
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
    assert_safety(&h);
}

#[test]
fn a_reset_by_the_driver_is_waited_for_and_verified_like_our_own() {
    let h = run("driver-reset");
    assert_safety(&h);
    // The device was gone 179 s, longer than device-wait (60 s), after which a device that
    // just vanished is re-created from its parent: the driver's reset request held that.
    assert!(h.recreations().is_empty(), "{}", h.render());
    assert_eq!(h.host.devices[FIELD_DEVICE].recreations_started, 0);
    let alert = alerts_with(&h, "the driver of rocep2s0f0 requested a reset");
    assert_eq!(alert.len(), 1, "{:#?}", h.alerts);
    assert_eq!(alert[0].severity, AlertClass::Warning);
    // Verified as after our own re-creation: a fresh QP 1 is expected, the port goes
    // through Reconnecting (iscsid's grace, the self-test) to Healthy.
    let back = h
        .transitions
        .iter()
        .find(|t| {
            t.reason
                .contains("re-created by its driver's reset after 180s")
        })
        .expect("the driver's re-creation was not taken as one");
    assert_eq!(back.from, Phase::AwaitingDevice);
    assert_eq!(back.to, Phase::Reconnecting);
    assert_eq!(back.at.as_millis() / 1000, 300);
    assert!(
        h.timeline
            .iter()
            .any(|e| matches!(e, Entry::Note { text, .. }
            if text.contains("self-test of rocep2s0f0/1 passed"))),
        "{}",
        h.render()
    );
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
}

#[test]
fn a_device_replugged_as_iwarp_is_restored_and_the_operator_told() {
    let h = run("iwarp-flip");
    assert_safety(&h);
    // One re-creation: the restoring toggle is part of it, not a second attempt.
    assert_eq!(h.recreations(), vec![FIELD_DEVICE.to_string()]);
    assert_eq!(h.host.devices[FIELD_DEVICE].recreations_started, 1);
    let alert = alerts_with(&h, "came back from its re-creation in the wrong RDMA mode");
    assert_eq!(alert.len(), 1, "{:#?}", h.alerts);
    assert_eq!(alert[0].severity, AlertClass::Error);
    assert!(
        alert[0].detail.contains("ice.iwarp.0 (not roce)")
            && alert[0]
                .detail
                .contains("restored by toggling enable_roce once more"),
        "{}",
        alert[0].detail
    );
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
}

#[test]
fn an_iser_only_portal_is_probed_by_arp_and_recovers_only_after_the_target_returns() {
    let h = run("iser-only-portal");
    assert_safety(&h);
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
    // Target powered off at 60 s, back at 240 s: no re-creation while it was away.
    let started = first_recreate_secs(&h, FIELD_DEVICE).expect("re-created");
    assert!((240..260).contains(&started), "re-created at {started} s");
    assert_eq!(h.recreations(), vec![FIELD_DEVICE.to_string()]);
    // status says how the portal is probed, and why.
    let probes = h.host.portal_probes();
    let view = probes.values().next().expect("the portal");
    assert_eq!(view.method, "neighbour", "{view:?}");
    assert!(
        view.why.contains("refused") && view.why.contains("answers ARP/ND on "),
        "{}",
        view.why
    );
}

#[test]
fn the_same_host_with_a_tcp_listener_keeps_the_tcp_probe() {
    let h = run("field-incident");
    assert!(h.host.storage_ok());
    let probes = h.host.portal_probes();
    assert_eq!(probes.values().next().expect("the portal").method, "tcp");
}

/// `status` as the daemon answers it for the harness's engine now: the JSON document (read
/// back as the CLI reads it) and its text.
fn status_of(h: &iser_guard::sim::Harness) -> (serde_json::Value, String) {
    use iser_guard::core::observe::{snapshot::DaemonContext, Clocks, DaemonSnapshot};
    let doc = DaemonSnapshot::build(
        &h.driver,
        DaemonContext {
            version: "test".into(),
            pid: 1,
            started: iser_guard::core::time::Instant::ZERO,
            clocks: Clocks {
                mono: h.now,
                unix_ms: 1_796_158_800_000 + h.now.as_millis(),
            },
            status: String::new(),
            safe_mode: None,
            sources: Vec::new(),
            events_kept: 0,
            events_dropped: 0,
            portal_probes: h.host.portal_probes(),
        },
    );
    let json = serde_json::to_value(&doc).unwrap();
    let back: DaemonSnapshot = serde_json::from_value(json.clone()).unwrap();
    let text = iser_guard::cli::daemon_view::render(
        &iser_guard::cli::daemon_view::DaemonSide::Running {
            snapshot: Box::new(back),
        },
        iser_guard::cli::term::Style::plain(),
    );
    (json, text)
}

#[test]
fn an_out_of_tree_irdma_is_named_once_and_recreated_without_the_devlink_toggle_it_lacks() {
    let h = run("out-of-tree-irdma");
    assert_safety(&h);
    assert!(h.host.storage_ok());
    assert_eq!(phase(&h, FIELD_DEVICE, 1), Phase::Healthy);
    // Named once, from the first report of the host's facts on.
    let named = alerts_with(&h, "irdma (serving rocep2s0f0) is an out-of-tree driver");
    assert_eq!(named.len(), 1, "{:#?}", h.alerts);
    assert_eq!(named[0].severity, AlertClass::Warning);
    assert!(
        named[0]
            .summary
            .contains("/sys/module/irdma/taint has O, driver folder irdma.gen_2 before Linux 6.18"),
        "{}",
        named[0].summary
    );
    // The devlink parameter was only read, never set; the aux device was rebound into the
    // out-of-tree driver's own folder.
    assert!(
        !h.host.commands.iter().any(|c| c.contains("param set")),
        "{:?}",
        h.host.commands
    );
    assert!(h
        .host
        .commands
        .iter()
        .any(|c| c == "echo ice.roce.0 > /sys/bus/auxiliary/drivers/irdma.gen_2/bind"));
    // The failed step is reported with the method that worked.
    let told = alerts_with(
        &h,
        "was re-created by unbind/bind auxiliary device ice.roce.0",
    );
    assert_eq!(told.len(), 1, "{:#?}", h.alerts);
    assert!(told[0].detail.contains("kernel answers: Invalid argument"));
    let (json, text) = status_of(&h);
    let stack = &json["daemon"]["driver_stack"];
    assert_eq!(stack[0]["kind"], "out-of-tree", "{json:#}");
    assert_eq!(stack[0]["module"], "irdma");
    assert!(
        text.contains("driver stack: irdma (serving rocep2s0f0) is an out-of-tree driver"),
        "{text}"
    );
}

#[test]
fn a_bonded_e810_port_without_rdma_is_named_once_and_never_recreated() {
    let h = run("bonded-no-rdma");
    assert_safety(&h);
    assert!(h.recreations().is_empty(), "{:?}", h.recreations());
    assert!(h.host.commands.is_empty(), "{:?}", h.host.commands);
    let named = alerts_with(&h, "is a member of bond bond0 and has no RDMA device");
    assert_eq!(named.len(), 1, "{:#?}", h.alerts);
    assert_eq!(named[0].severity, AlertClass::Critical);
    // Held with the reason: nothing to re-create, an operator must act.
    let held = quarantined(&h);
    assert!(
        held.reason.contains("rocep2s0f0 is not re-created") && held.reason.contains("bond bond0"),
        "{}",
        held.reason
    );
    let (json, text) = status_of(&h);
    let stack = &json["daemon"]["driver_stack"];
    assert_eq!(stack[0]["kind"], "bonded-without-rdma", "{json:#}");
    assert_eq!(stack[0]["pci"], "0000:02:00.0");
    assert_eq!(stack[0]["bond"], "bond0");
    assert!(
        text.contains("driver stack: 0000:02:00.0 (rocep2s0f0np0) is a member of bond bond0"),
        "{text}"
    );
}

#[test]
fn ice_safe_mode_is_named_once_and_never_recreated() {
    let h = run("nic-safe-mode");
    assert_safety(&h);
    assert!(h.recreations().is_empty(), "{:?}", h.recreations());
    let named = alerts_with(&h, "ice is in safe mode on 0000:02:00.0");
    assert_eq!(named.len(), 1, "{:#?}", h.alerts);
    assert_eq!(named[0].severity, AlertClass::Critical);
    let held = quarantined(&h);
    assert!(held.reason.contains("safe mode"), "{}", held.reason);
    let (json, text) = status_of(&h);
    assert_eq!(
        json["daemon"]["driver_stack"][0]["kind"], "safe-mode",
        "{json:#}"
    );
    assert!(
        text.contains("driver stack: ice is in safe mode on 0000:02:00.0"),
        "{text}"
    );
}

/// The field port is quarantined (held for an operator: nothing the daemon could re-create);
/// the transition that put it there.
fn quarantined(h: &iser_guard::sim::Harness) -> &iser_guard::core::recovery::Transition {
    assert_eq!(phase(h, FIELD_DEVICE, 1), Phase::Quarantined);
    h.transitions
        .iter()
        .find(|t| t.to == Phase::Quarantined)
        .expect("held")
}
