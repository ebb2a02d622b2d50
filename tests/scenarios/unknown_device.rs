//! Kernel-log records about RDMA devices the host never showed (issue 12's distinct-device
//! storm): no port is made for them, they are counted and alerted once per window, and a
//! device that appears later still gets its fault.

use iser_guard::core::recovery::{
    ActionKind, Engine, Observation, Phase, PortId, StuckEvidence, Trust,
};
use iser_guard::core::time::Instant;
use iser_guard::sim::scenarios;

/// RDMA netlink (or sysfs) listing `device` for the first time.
pub fn appeared(device: &str) -> Observation {
    Observation::DeviceAppeared {
        device: device.to_string(),
        parent: None,
        driver: None,
        ports: 1,
    }
}

fn stuck(device: &str) -> Observation {
    Observation::GsiQpStuck {
        device: device.to_string(),
        port: None,
        evidence: StuckEvidence::ModifyQpInvalid,
    }
}

fn drain(e: &mut Engine) -> Vec<ActionKind> {
    std::iter::from_fn(|| e.poll_action())
        .map(|a| a.kind)
        .collect()
}

#[test]
fn a_storm_naming_sixty_thousand_unknown_devices_makes_no_port_and_one_alert_per_window() {
    let mut e = Engine::new(scenarios::base_policy(), 1);
    let mut actions = Vec::new();
    // 60 000 records at 6 000/s (the flood script's rate), then the rest of a window.
    for i in 0..60_000u64 {
        e.handle_observation(stuck(&format!("flood{i}")), Trust::Trusted, Instant(i / 6));
        actions.extend(drain(&mut e));
    }
    for t in (10_000..700_000).step_by(1_000) {
        e.handle_timeout(Instant(t));
        actions.extend(drain(&mut e));
    }
    assert_eq!(e.ports().count(), 0, "a port per unknown device");
    assert_eq!(e.devices().count(), 0);
    assert_eq!(e.stats().unknown_device_records, 60_000);
    let alerts: Vec<_> = actions
        .iter()
        .filter_map(|k| match k {
            ActionKind::Alert(a) => Some(a),
            _ => None,
        })
        .collect();
    assert!(
        alerts.iter().all(|a| a.key.starts_with("unknown-device")),
        "{alerts:?}"
    );
    // The first (held 2 s to gather its repeats), the early batch, the window's summary.
    assert!(alerts.len() <= 3, "{} alerts: {alerts:?}", alerts.len());
    assert_eq!(alerts.iter().map(|a| a.count).sum::<u64>(), 60_000);
    assert!(
        !actions
            .iter()
            .any(|k| matches!(k, ActionKind::PersistState { .. })),
        "nothing to journal about devices that do not exist"
    );
}

#[test]
fn a_record_about_a_device_that_appears_later_counts_once_it_shows_up() {
    let mut e = Engine::new(scenarios::base_policy(), 1);
    e.handle_observation(stuck("irdma7"), Trust::Trusted, Instant(1_000));
    assert_eq!(e.ports().count(), 0);
    e.handle_observation(appeared("irdma7"), Trust::Trusted, Instant(5_000));
    let p = e
        .port(&PortId::new("irdma7", 1))
        .expect("the port, once known");
    assert_ne!(p.phase(), Phase::Healthy);
    let why: Vec<String> = std::iter::from_fn(|| e.poll_transition())
        .map(|t| t.reason)
        .collect();
    assert!(
        why.iter()
            .any(|r| r.contains("1 kernel-log record(s) 4 s before RDMA device irdma7 was seen")),
        "{why:?}"
    );
}

#[test]
fn a_record_older_than_the_memory_is_not_acted_on_when_the_device_appears() {
    let mut e = Engine::new(scenarios::base_policy(), 1);
    e.handle_observation(stuck("irdma7"), Trust::Trusted, Instant(1_000));
    e.handle_observation(
        appeared("irdma7"),
        Trust::Trusted,
        Instant(1_000 + 11 * 60_000),
    );
    assert!(
        e.ports().all(|p| p.phase() == Phase::Healthy),
        "a stale record opened an episode"
    );
}

#[test]
fn a_known_device_is_faulted_at_once() {
    let mut e = Engine::new(scenarios::base_policy(), 1);
    e.handle_observation(appeared("irdma7"), Trust::Trusted, Instant(0));
    e.handle_observation(stuck("irdma7"), Trust::Trusted, Instant(1_000));
    assert_ne!(
        e.port(&PortId::new("irdma7", 1)).map(|p| p.phase()),
        Some(Phase::Healthy)
    );
    assert_eq!(e.stats().unknown_device_records, 0);
}
