//! The lab's in-kernel field incident on the simulated host (scenario `lab-field-incident`):
//! Soft-RoCE whose rxe_ini has irdma's QP 1 (the lab's rdma_rxe, scripts/lab/kmod), as
//! measured by the lab's field-kernel-alone and field-incident-kernel: QP 1 goes to ERR when
//! the kernel notices the target's host is gone (no line is injected), attempts while it is
//! away fail address resolution, and every attempt once it answers prints the pair until the
//! device is re-created.

use std::time::Duration;

use iser_guard::core::recovery::{ActionKind, Phase, Policy};
use iser_guard::core::time::Instant;
use iser_guard::sim::{scenarios, Entry, Harness};

use super::util::{assert_safety, first_recreate_secs, phase, MAX_STEPS};

/// The target is powered off at 60 s and answers again at 100 s (the scenario's script).
const TARGET_OFF_S: u64 = 60;
const TARGET_BACK_S: u64 = 100;
/// The daemon's share: 3 probes 0.5 s apart (1 s), the first one's phase, the re-creation.
const RECREATE_BOUND_S: u64 = 3;
/// iscsid's share after the re-creation: its 3 s reopen delay.
const ISCSID_RETRY_S: u64 = 3;

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

/// The seconds at which the kernel printed `line` (exactly).
fn printed_at(h: &Harness, line: &str) -> Vec<u64> {
    h.timeline
        .iter()
        .filter_map(|e| match e {
            Entry::Kernel { at, text, .. } if text == line => Some(at.as_millis() / 1000),
            _ => None,
        })
        .collect()
}

fn logouts(h: &Harness) -> usize {
    h.count_actions(|k| matches!(k, ActionKind::IscsiLogout { .. }))
}

#[test]
fn one_recreation_after_the_target_answers_and_iscsid_brings_the_session_back() {
    let h = run_with(|_| {});
    assert_eq!(
        h.count_actions(|k| matches!(k, ActionKind::RecreateDevice { .. })),
        1,
        "exactly one re-creation"
    );
    let at = first_recreate_secs(&h, "rxe_ini").unwrap();
    assert!(
        at >= TARGET_BACK_S,
        "re-created at {at} s, before the target answered"
    );
    assert!(
        at <= TARGET_BACK_S + RECREATE_BOUND_S,
        "re-created at {at} s, later than 3 probes 0.5 s apart allow"
    );
    assert_eq!(phase(&h, "rxe_ini", 1), Phase::Healthy);
    assert_eq!(logouts(&h), 0, "a session iscsid holds is never logged out");
    let back = session_back_after(&h, at).expect("iscsid reconnected the session");
    assert!(
        back <= at + ISCSID_RETRY_S + 1,
        "session back at {back} s, re-created at {at} s"
    );
    assert!(h.storage_back_at().is_some());
}

#[test]
fn qp1_sticks_when_the_kernel_notices_and_the_pair_repeats_only_once_the_target_answers() {
    let h = run_with(|_| {});
    let refused = "rxe_ini: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";
    let mad = "infiniband rxe_ini: ib_mad_send_error - ib_modify_qp to RTS: -22";
    let pairs = printed_at(&h, refused);
    assert_eq!(pairs, printed_at(&h, mad), "the two lines come as a pair");
    // The kernel notices 21 s after the power-off (the lab: 10-33 s).
    assert_eq!(pairs.first(), Some(&(TARGET_OFF_S + 21)), "{pairs:?}");
    // While the target is away nothing more (address resolution fails first) ...
    assert!(
        pairs
            .iter()
            .all(|&t| t == TARGET_OFF_S + 21 || t >= TARGET_BACK_S),
        "{pairs:?}"
    );
    assert!(!printed_at(&h, "RDMA CM: ADDR_ERROR: failed to resolve IP. status -110").is_empty());
    // ... and once it answers, until the re-creation, every attempt prints the pair.
    assert!(pairs.iter().any(|&t| t >= TARGET_BACK_S), "{pairs:?}");
    let at = first_recreate_secs(&h, "rxe_ini").unwrap();
    assert!(
        pairs.iter().all(|&t| t <= at),
        "a pair after the re-creation: {pairs:?}"
    );
}

#[test]
fn a_grace_shorter_than_iscsids_retry_logs_in_nothing_out_and_ends_healthy() {
    // With a grace below iscsid's reopen delay the engine finds the session still held by
    // iscsid: a login is answered "already present", nothing is logged out.
    let h = run_with(|p| p.iscsid_grace = Duration::from_secs(1));
    assert_eq!(logouts(&h), 0, "a session iscsid holds is never logged out");
    assert_eq!(phase(&h, "rxe_ini", 1), Phase::Healthy);
    assert_eq!(
        h.count_actions(|k| matches!(k, ActionKind::RecreateDevice { .. })),
        1,
        "one re-creation"
    );
}
