//! Reads the engine's per-port record (its state is `PortState`: healthy, or an episode at a
//! stage, each stage with its own data); every field the observer needs is read here and
//! nowhere else, so a change of the engine's state touches these functions only.

use crate::recovery::{
    Episode, Fault, Hold, Origin, Phase, PortId, PortRecord, SelfTestProgress, SelfTestRecord,
    SessionKey, Stage, TimerKind,
};
use crate::time::Instant;

/// The port.
pub(super) fn id(p: &PortRecord) -> &PortId {
    &p.id
}

/// Where it is in its recovery.
pub(super) fn phase(p: &PortRecord) -> Phase {
    p.phase()
}

/// The reason of its last transition.
pub(super) fn reason(p: &PortRecord) -> &str {
    &p.reason
}

/// When it entered its phase.
pub(super) fn since(p: &PortRecord) -> Instant {
    p.since
}

/// Why it is not healthy.
pub(super) fn fault(p: &PortRecord) -> Option<&Fault> {
    p.fault()
}

/// When this fault episode began.
pub(super) fn fault_since(p: &PortRecord) -> Option<Instant> {
    p.episode().map(|e| e.since)
}

/// Repair attempts in this episode.
pub(super) fn attempts(p: &PortRecord) -> u32 {
    p.attempts()
}

/// Why it does not act, if it wants to and may not.
pub(super) fn hold(p: &PortRecord) -> Option<&Hold> {
    p.hold.as_ref()
}

/// The phase timer: what it means and when it fires.
pub(super) fn wake(p: &PortRecord) -> Option<(TimerKind, Instant)> {
    p.wake()
}

/// When the phase gives up.
pub(super) fn deadline(p: &PortRecord) -> Option<Instant> {
    p.deadline()
}

/// The sessions remembered on it.
pub(super) fn sessions(p: &PortRecord) -> &[SessionKey] {
    &p.sessions
}

/// Who drives the episode.
pub(super) fn origin(p: &PortRecord) -> Origin {
    p.origin()
}

/// Its last self-test.
pub(super) fn last_selftest(p: &PortRecord) -> Option<&SelfTestRecord> {
    p.last_selftest.as_ref()
}

/// Facts about the episode worth showing, in words (empty when healthy). A moment is said
/// as an age at `now`, never as the engine clock's raw seconds.
pub(super) fn notes(p: &PortRecord, now: Instant) -> Vec<String> {
    let mut out = Vec::new();
    let e = p.episode();
    let recreated = e.is_some_and(Episode::was_recreated);
    if p.needs_recreate() && !recreated {
        out.push("needs a device re-creation".to_string());
    }
    if recreated {
        out.push("the device was re-created in this episode".to_string());
    }
    if e.is_some_and(Episode::awaiting_fresh_qp) {
        out.push("waiting to see the new GSI QP 1 in RTS".to_string());
    }
    if matches!(
        p.stage(),
        Some(Stage::ResettingDevice {
            verify_until: Some(_)
        })
    ) {
        out.push("verifying a re-creation that was in flight at a restart".to_string());
    }
    if e.is_some_and(|e| e.listener_gone) {
        out.push("the target answers TCP but refuses iSER logins (its listener)".to_string());
    }
    if let Some(t) = e.and_then(|e| e.target_back_at) {
        out.push(format!(
            "the target has counted as back for {}",
            crate::driver::words(now.since(t))
        ));
    }
    match e.and_then(|e| e.selftest.as_ref()) {
        Some(SelfTestProgress::Running(_)) => out.push("the port self-test is running".to_string()),
        Some(SelfTestProgress::Passed { .. }) => {
            out.push("the port self-test passed: a new RDMA connection was made on it".to_string())
        }
        Some(SelfTestProgress::Unavailable { reason }) => {
            out.push(format!("no port self-test ({reason})"))
        }
        None => {}
    }
    if !p.link_up {
        out.push("the port's link is down".to_string());
    }
    out
}
