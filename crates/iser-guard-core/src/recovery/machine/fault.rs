//! A fault opens or escalates a port's episode; the evaluation loop that steps a port
//! through its stages; stage `Faulted`, which chooses the repair.

use super::Engine;
use crate::recovery::action::{AlertClass, Origin};
use crate::recovery::input::PortId;
use crate::recovery::state::{AwaitTimer, Episode, Fault, Phase, Stage};
use crate::time::Instant;

/// Bound on re-evaluating one port within one input (each step changes the phase).
pub(super) const MAX_STEPS_PER_EVALUATION: usize = 16;

impl Engine {
    /// A fault seen on a port: a healthy port opens an episode (`Faulted`, decided at once);
    /// a recovering one only escalates, when QP 1 is newly stuck (a re-creation is needed)
    /// or its device vanished. Every sighting counts as evidence (storm counter).
    pub(super) fn enter_fault(&mut self, pid: &PortId, fault: Fault, reason: String, now: Instant) {
        self.port_or_create(pid, now);
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let phase = p.phase();
        let Some(e) = p.episode_mut() else {
            // A healthy port: a new episode.
            let mut e = Episode::new(fault.clone(), now, Origin::Automatic);
            e.needs_recreate = matches!(fault, Fault::GsiStuck { .. } | Fault::Operator);
            e.evidence = 1;
            if let Fault::Zombie { session } = &fault {
                e.targeted.push(session.clone());
            }
            self.open_episode(pid, e, Stage::Faulted, reason.clone(), now);
            let severity = match fault {
                Fault::Zombie { .. } | Fault::SessionsDown => AlertClass::Warning,
                _ => AlertClass::Error,
            };
            self.alert(
                now,
                severity,
                format!("fault:{pid}"),
                format!("{pid}: {}", fault.describe()),
                reason,
                None,
            );
            self.evaluate(pid, now);
            return;
        };
        e.evidence = e.evidence.saturating_add(1);
        match phase {
            // Nothing escalates a port whose device is being re-created (or whose
            // re-creation is blocked in the kernel: no second writer).
            Phase::Healthy
            | Phase::Quarantined
            | Phase::ResettingDevice
            | Phase::RecreationBlocked => {}
            _ => match fault {
                Fault::GsiStuck { evidence } if !e.needs_recreate => {
                    e.fault = Fault::GsiStuck { evidence };
                    e.needs_recreate = true;
                    e.listener_gone = false;
                    let stuck_again = e.was_recreated();
                    let attempts = e.attempts;
                    self.alert(
                        now,
                        AlertClass::Error,
                        format!("fault:{pid}:gsi"),
                        format!("{pid}: {}", Fault::GsiStuck { evidence }.describe()),
                        reason.clone(),
                        None,
                    );
                    self.transition(pid, Stage::awaiting_target(), reason, now);
                    if stuck_again {
                        // QP 1 got stuck again after a re-creation: the target is not really
                        // back. Probe it afresh (hysteresis) and back off before re-creating.
                        for portal in self.down_portals_of(pid) {
                            if let Some(r) = self.portals.get_mut(&portal) {
                                r.consecutive_ok = 0;
                            }
                        }
                    }
                    self.enter_awaiting_target(pid, now);
                    if stuck_again && attempts > 0 {
                        let j = self.jitter();
                        let backoff = self.policy.backoff(attempts, j);
                        if let Some(p) = self.ports.get_mut(pid) {
                            if let Some(Stage::AwaitingTarget { timer, .. }) = p.stage_mut() {
                                *timer = Some((AwaitTimer::Backoff, now.plus(backoff)));
                            }
                            if let Some(e) = p.episode_mut() {
                                e.probes_count_from = Some(now.plus(backoff));
                            }
                        }
                    }
                    self.evaluate(pid, now);
                }
                Fault::DeviceGone if phase != Phase::AwaitingDevice => {
                    e.fault = Fault::DeviceGone;
                    self.transition(pid, Stage::awaiting_device(), reason, now);
                    self.enter_awaiting_device(pid, now);
                }
                _ => {}
            },
        }
    }

    pub(super) fn evaluate_all(&mut self, now: Instant) {
        let pids: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| p.phase() != Phase::Healthy)
            .map(|p| p.id.clone())
            .collect();
        for pid in pids {
            self.evaluate(&pid, now);
        }
    }

    pub(super) fn evaluate(&mut self, pid: &PortId, now: Instant) {
        for _ in 0..MAX_STEPS_PER_EVALUATION {
            if !self.step(pid, now) {
                return;
            }
        }
    }

    /// One decision for one port; true if its state changed (evaluate again).
    pub(super) fn step(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        match p.phase() {
            Phase::Healthy | Phase::Quarantined => false,
            Phase::RecreationBlocked => self.step_blocked(pid, now),
            Phase::ResettingDevice => self.step_resetting(pid, now),
            Phase::Faulted => {
                self.decide(pid, now);
                true
            }
            Phase::AwaitingTarget => self.step_awaiting_target(pid, now),
            Phase::AwaitingDevice => self.step_awaiting_device(pid, now),
            Phase::Reconnecting => self.step_reconnect(pid, now),
            Phase::Verifying => self.step_verifying(pid, now),
        }
    }

    /// Phase Faulted: choose the repair.
    pub(super) fn decide(&mut self, pid: &PortId, now: Instant) {
        let Some(p) = self.ports.get(pid) else {
            return;
        };
        let fault = p.fault().cloned().unwrap_or(Fault::SessionsDown);
        let needs_recreate = p.needs_recreate();
        match fault {
            Fault::DeviceGone => {
                let r = format!(
                    "waiting up to {}s for {} to come back before re-creating it",
                    self.policy.device_wait.as_secs(),
                    pid.device
                );
                self.transition(pid, Stage::awaiting_device(), r, now);
                self.enter_awaiting_device(pid, now);
            }
            Fault::Zombie { .. } => {
                self.start_reconnect(
                    pid,
                    false,
                    "logging the zombie session out and in".into(),
                    now,
                );
            }
            Fault::Operator if !needs_recreate => {
                self.start_reconnect(pid, false, "operator asked for a reconnect".into(), now);
            }
            Fault::GsiStuck { .. } | Fault::Operator | Fault::SessionsDown => {
                let reason = if needs_recreate {
                    if self.no_wait(pid) {
                        "re-creating the device without waiting for the target".to_string()
                    } else {
                        format!(
                            "waiting for the target to answer ({} consecutive probes) before \
                             re-creating {} (recovery.reset-when = target-back)",
                            self.policy.probe_successes, pid.device
                        )
                    }
                } else {
                    "probing the target; iscsid keeps retrying meanwhile".to_string()
                };
                self.transition(pid, Stage::awaiting_target(), reason, now);
                self.enter_awaiting_target(pid, now);
            }
        }
    }
}
