//! A failed attempt (back-off, or stage `Quarantined` once attempts are exhausted) and the
//! quarantined port's duty to name every session it loses.

use super::queries::describe_session;
use super::Engine;
use crate::recovery::action::AlertClass;
use crate::recovery::input::PortId;
use crate::recovery::state::{AwaitTimer, Phase, ReconnectTimer, SessionOp, Stage};
use crate::time::Instant;

impl Engine {
    /// An attempt failed: back off, or quarantine when attempts are exhausted.
    pub(super) fn after_failed_attempt(&mut self, pid: &PortId, reason: String, now: Instant) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let was_reconnect = matches!(p.phase(), Phase::Reconnecting | Phase::Verifying);
        let most = self.policy.max_attempts.max(1);
        let attempts = match p.episode_mut() {
            Some(e) => {
                if was_reconnect {
                    if e.attempt_recreated {
                        // The reconnect after a re-creation is part of that attempt.
                        e.attempt_recreated = false;
                    } else {
                        e.attempts = e.attempts.saturating_add(1);
                    }
                }
                e.attempts = e.attempts.min(most);
                e.attempts
            }
            None => 0,
        };
        let keys = p.sessions.clone();
        for k in keys {
            if let Some(s) = self.sessions.get_mut(&k) {
                if matches!(s.op, Some(SessionOp::Failed(_) | SessionOp::Done)) {
                    s.op = None;
                }
            }
        }
        if attempts >= self.policy.max_attempts {
            self.quarantine(
                pid,
                format!("{reason}; {attempts} attempt(s) exhausted"),
                now,
            );
            return;
        }
        let j = self.jitter();
        let backoff = self.policy.backoff(attempts.max(1), j);
        let msg = format!("{reason}; next attempt in {}s", backoff.as_secs());
        let stage = if was_reconnect {
            Stage::Reconnecting {
                timer: Some((ReconnectTimer::Backoff, now.plus(backoff))),
                ops_not_before: None,
            }
        } else {
            Stage::AwaitingTarget {
                deadline: Some(now.plus(self.policy.target_wait_max)),
                timer: Some((AwaitTimer::Backoff, now.plus(backoff))),
            }
        };
        self.transition(pid, stage, msg.clone(), now);
        self.alert(
            now,
            AlertClass::Error,
            format!("failed:{pid}:{attempts}"),
            format!("{pid}: attempt {attempts} failed"),
            msg,
            None,
        );
    }

    /// The device is gone and nothing about it is remembered: quarantine the port with an
    /// alert whose remedy is the command that re-creates it by hand.
    pub(super) fn refuse_unknown_device(&mut self, pid: &PortId, device: &str, now: Instant) {
        let reason = format!(
            "RDMA device {device} is gone and iser-guard never saw it while it existed (it \
             was deleted before the daemon started, or the journal predates remembering \
             devices), so it does not know the netdev or PCI function to re-create it from"
        );
        let down = self.down_sessions_text(pid);
        self.transition(pid, Stage::Quarantined, reason.clone(), now);
        self.mark_reported(pid);
        self.alert(
            now,
            AlertClass::Critical,
            format!("quarantine:{pid}"),
            format!("{pid}: RDMA device {device} is gone and cannot be re-created automatically"),
            format!(
                "{reason}; {}, then run the command below. Sessions not restored: {down}",
                crate::reset_plan::manual_recreate_hint(device)
            ),
            Some(format!("iser-guard recover {pid}")),
        );
    }

    pub(super) fn quarantine(&mut self, pid: &PortId, reason: String, now: Instant) {
        let down = self.down_sessions_text(pid);
        self.transition(pid, Stage::Quarantined, reason.clone(), now);
        self.mark_reported(pid);
        self.alert(
            now,
            AlertClass::Critical,
            format!("quarantine:{pid}"),
            format!("{pid}: automatic recovery stopped, an operator must act"),
            format!("{reason}. Sessions not restored: {down}"),
            Some(format!("iser-guard recover {pid}")),
        );
    }

    /// A quarantined port does nothing automatically, so every session that goes down there
    /// is named in an alert: nothing is lost silently.
    pub(super) fn report_quarantined_losses(&mut self, pid: &PortId, now: Instant) {
        let Some(p) = self.ports.get(pid) else {
            return;
        };
        if p.phase() != Phase::Quarantined {
            return;
        }
        let unreported: Vec<String> = p
            .sessions
            .iter()
            .filter_map(|k| self.sessions.get(k))
            .filter(|s| !s.is_healthy() && !s.reported)
            .map(describe_session)
            .collect();
        if unreported.is_empty() {
            return;
        }
        self.mark_reported(pid);
        self.alert(
            now,
            AlertClass::Error,
            format!("quarantine-down:{pid}"),
            format!("{pid} is quarantined and more sessions are down"),
            format!("not restored automatically: {}", unreported.join("; ")),
            Some(format!("iser-guard recover {pid}")),
        );
    }
}
