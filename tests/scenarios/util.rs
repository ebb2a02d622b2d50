//! Helpers for the scenario tests: run a named scenario with a step bound, and look at what
//! the agent did.

use iser_guard::core::recovery::{ActionKind, Alert, AlertClass, Origin, Phase, PortId};
use iser_guard::sim::{scenarios, Harness};

/// Steps allowed for one scenario run (livelock = failure).
pub const MAX_STEPS: usize = 20_000;
/// Steps allowed when the agent restarts after every step.
pub const MAX_STEPS_RESTARTING: usize = 60_000;

/// Runs a named scenario to its end.
pub fn run(name: &str) -> Harness {
    let s = scenarios::find(name).unwrap_or_else(|| panic!("no scenario {name}"));
    s.run(7, MAX_STEPS)
        .unwrap_or_else(|e| panic!("scenario {name}: {e}\n"))
}

/// Runs a named scenario restarting the agent after every step.
pub fn run_restarting(name: &str) -> Harness {
    let s = scenarios::find(name).unwrap_or_else(|| panic!("no scenario {name}"));
    let mut h = s.harness(7);
    h.restart_every_step = true;
    let end = iser_guard::core::time::Instant::ZERO.plus(s.duration);
    h.run_until(end, MAX_STEPS_RESTARTING)
        .unwrap_or_else(|e| panic!("scenario {name} (restarting): {e}"));
    h
}

/// The phase of a port at the end.
pub fn phase(h: &Harness, device: &str, port: u32) -> Phase {
    h.engine()
        .port(&PortId::new(device, port))
        .map(|p| p.phase())
        .unwrap_or_else(|| panic!("no port {device}/{port}"))
}

/// Destructive actions the engine asked for (re-create, login, logout, rescan).
pub fn destructive(h: &Harness) -> usize {
    h.count_actions(ActionKind::is_destructive)
}

/// iscsiadm actions.
pub fn iscsiadm_actions(h: &Harness) -> usize {
    h.count_actions(|k| {
        matches!(
            k,
            ActionKind::IscsiLogin { .. }
                | ActionKind::IscsiLogout { .. }
                | ActionKind::IscsiRescan { .. }
        )
    })
}

/// Alerts whose summary contains `needle`.
pub fn alerts_with<'a>(h: &'a Harness, needle: &str) -> Vec<&'a Alert> {
    h.alerts
        .iter()
        .map(|(_, a)| a)
        .filter(|a| a.summary.contains(needle))
        .collect()
}

/// Alerts at or above a severity.
pub fn alerts_at_least(h: &Harness, s: AlertClass) -> Vec<&Alert> {
    h.alerts
        .iter()
        .map(|(_, a)| a)
        .filter(|a| a.severity >= s)
        .collect()
}

/// When the first re-creation of `device` was asked for, in seconds.
pub fn first_recreate_secs(h: &Harness, device: &str) -> Option<u64> {
    h.actions.iter().find_map(|(at, a)| match &a.kind {
        ActionKind::RecreateDevice { device: d, .. } if d == device => Some(at.as_millis() / 1000),
        _ => None,
    })
}

/// Every destructive action was preceded by a journal write, and none was automatic on a
/// device outside the allow-list.
pub fn assert_safety(h: &Harness) {
    assert_eq!(
        h.unjournaled_destructive, 0,
        "a destructive action ran before its journal write"
    );
    for (_, a) in &h.actions {
        if a.kind.is_destructive() && a.origin == Origin::Automatic {
            let dev = a.device.as_deref().unwrap_or("");
            assert!(
                h.policy.allows(dev),
                "automatic {a} on {dev}, which is outside devices.allow"
            );
        }
    }
    assert!(
        h.host.max_concurrent_recreations <= 1,
        "two re-creations at once"
    );
    assert_eq!(
        h.host.overlapping_recreations, 0,
        "a device re-created twice at once"
    );
}
