//! The lab's field incident on the simulated host (scenario `lab-field-incident`): Soft-RoCE,
//! the target away, rxe_ini's CM path dead until the device is re-created (the lab's GSI
//! stand-in), and iscsid's connect attempts under it lasting its login timer, which a
//! re-creation does not shorten (measured in the lab on 6.1 and 6.12).

use std::time::Duration;

use iser_guard::core::recovery::{ActionKind, Phase, Policy};
use iser_guard::core::time::Instant;
use iser_guard::sim::{scenarios, Entry, Harness};

use super::util::{assert_safety, first_recreate_secs, phase, MAX_STEPS};

/// The target answers again at 95 s (the scenario's script).
const TARGET_BACK_S: u64 = 95;
/// The lab's bound for the daemon's share: poll.probe 5 s × probe-successes 3, plus the
/// first probe's phase.
const RECREATE_BOUND_S: u64 = 5 * 3 + 5;

fn run_with(policy: impl FnOnce(&mut Policy)) -> Harness {
    let s = scenarios::find("lab-field-incident").unwrap();
    let (host, mut p) = (s.build)();
    policy(&mut p);
    let mut h = Harness::new(host, p, 7);
    h.run_until(Instant::ZERO.plus(s.duration), MAX_STEPS)
        .unwrap();
    assert_safety(&h);
    h
}

/// When iscsid's session came back after `after_s`, in seconds.
fn session_back_after(h: &Harness, after_s: u64) -> Option<u64> {
    h.timeline.iter().find_map(|e| match e {
        Entry::Note { at, text }
            if text.contains("operational after recovery") && at.as_millis() / 1000 >= after_s =>
        {
            Some(at.as_millis() / 1000)
        }
        _ => None,
    })
}

fn logouts(h: &Harness) -> usize {
    h.count_actions(|k| matches!(k, ActionKind::IscsiLogout { .. }))
}

#[test]
fn one_recreation_after_the_target_answers_and_iscsid_brings_the_session_back() {
    let h = run_with(|_| {});
    let recreations: Vec<_> = h
        .actions
        .iter()
        .filter(|(_, a)| matches!(a.kind, ActionKind::RecreateDevice { .. }))
        .collect();
    assert_eq!(recreations.len(), 1, "exactly one re-creation");
    let at = first_recreate_secs(&h, "rxe_ini").unwrap();
    assert!(
        at >= TARGET_BACK_S,
        "re-created at {at} s, before the target answered"
    );
    assert!(
        at <= TARGET_BACK_S + RECREATE_BOUND_S,
        "re-created at {at} s, later than the probes allow"
    );
    assert_eq!(phase(&h, "rxe_ini", 1), Phase::Healthy);
    assert_eq!(logouts(&h), 0, "a session iscsid holds is never logged out");
    let back = session_back_after(&h, at).expect("iscsid reconnected the session");
    // The attempt pending at the re-creation ends only at iscsid's login timer (15 s).
    assert!(
        back <= at + 15,
        "session back at {back} s, re-created at {at} s"
    );
    assert!(h.storage_back_at().is_some());
}

#[test]
fn a_grace_shorter_than_iscsids_login_timer_logs_in_nothing_out_and_ends_healthy() {
    // With the grace below the pending attempt's timer the engine finds the session still
    // held by iscsid: a login is answered "already present", nothing is logged out, and the
    // verdict waits for iscsid's attempt.
    let h = run_with(|p| p.iscsid_grace = Duration::from_secs(2));
    assert_eq!(logouts(&h), 0, "a session iscsid holds is never logged out");
    assert_eq!(phase(&h, "rxe_ini", 1), Phase::Healthy);
    assert_eq!(
        h.count_actions(|k| matches!(k, ActionKind::RecreateDevice { .. })),
        1,
        "one re-creation: waiting for iscsid's timer is not a failed attempt"
    );
}
