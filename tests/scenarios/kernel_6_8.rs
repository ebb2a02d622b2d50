//! A 6.8-like kernel (Ubuntu 24.04) on the simulated host: no RDMA netlink device events,
//! the same QP and CM id dumps. A device that comes or goes is seen only at the next dump
//! (`poll.netlink`, 5 s), and the daemon still recovers, at most one poll interval later
//! than with the events of 6.12. Each test runs the scenario twice, without and with events.

use iser_guard::core::recovery::Phase;
use iser_guard::core::time::Instant;
use iser_guard::sim::scenarios;
use iser_guard::sim::scenarios::FIELD_DEVICE;
use iser_guard::sim::Harness;

use super::util::*;

/// Runs scenario `name` as defined (no device events) and with device events on.
fn polled_and_evented(name: &str) -> (Harness, Harness) {
    let s = scenarios::find(name).unwrap_or_else(|| panic!("no scenario {name}"));
    let end = Instant::ZERO.plus(s.duration);
    let (host, policy) = (s.build)();
    assert!(
        !host.device_events,
        "{name} must model a kernel without device events"
    );
    let mut evented_host = host.clone();
    evented_host.device_events = true;
    let mut polled = Harness::new(host, policy.clone(), 7);
    let mut evented = Harness::new(evented_host, policy, 7);
    for h in [&mut polled, &mut evented] {
        h.run_until(end, MAX_STEPS)
            .unwrap_or_else(|e| panic!("scenario {name}: {e}"));
    }
    (polled, evented)
}

/// When the port first went from `from` to `to`, in ms.
fn first_transition_at(h: &Harness, from: Option<Phase>, to: Phase) -> u64 {
    h.transitions
        .iter()
        .find(|t| t.to == to && from.is_none_or(|f| t.from == f))
        .map(|t| t.at.as_millis())
        .unwrap_or_else(|| panic!("never went {from:?} -> {to}"))
}

#[test]
fn field_incident_without_device_events_recovers_by_polling() {
    let (polled, evented) = polled_and_evented("field-incident-6.8");
    for h in [&polled, &evented] {
        assert_safety(h);
        assert_eq!(h.recreations(), vec![FIELD_DEVICE.to_string()]);
        assert!(h.host.storage_ok());
        assert_eq!(phase(h, FIELD_DEVICE, 1), Phase::Healthy);
    }
    let back = |h: &Harness| h.storage_back_at().expect("storage back").as_millis();
    let (p, e) = (back(&polled), back(&evented));
    assert!(
        p >= e && p - e <= 5_000,
        "storage back at {p} ms polled, {e} ms with events"
    );
}

#[test]
fn a_device_gone_and_back_is_seen_at_the_next_dump_without_events() {
    let (polled, evented) = polled_and_evented("device-vanishes-6.8");
    for h in [&polled, &evented] {
        assert_safety(h);
        assert!(h.recreations().is_empty());
        assert!(h.host.storage_ok());
        assert_eq!(phase(h, "rxe_ini", 1), Phase::Healthy);
    }
    // Deleted at 62 s: heard at once with events (the engine's 50 ms settling included),
    // at the 65 s dump without (meanwhile the target answers and the port waits for iscsid).
    let gone = |h: &Harness| first_transition_at(h, None, Phase::AwaitingDevice);
    assert!(
        (62_000..63_000).contains(&gone(&evented)),
        "{}",
        gone(&evented)
    );
    assert_eq!(gone(&polled), 65_000);
    // Back at 83 s: at once with events, at the 85 s dump without.
    let back =
        |h: &Harness| first_transition_at(h, Some(Phase::AwaitingDevice), Phase::Reconnecting);
    assert!(
        (83_000..84_000).contains(&back(&evented)),
        "{}",
        back(&evented)
    );
    assert_eq!(back(&polled), 85_000);
}
