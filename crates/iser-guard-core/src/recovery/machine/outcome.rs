//! Outcomes and timers: each is routed to the stage that waits for it (probe, re-creation,
//! iscsiadm, operator logout/login); a missing outcome becomes a timeout.

use super::Engine;
use crate::recovery::action::{ActionId, AlertClass};
use crate::recovery::input::{IscsiadmOutcome, Outcome, PortId, ProbeResult, RecreateResult};
use crate::recovery::state::{InFlightKind, Phase, PortRecord, ReconnectTimer, Stage, TimerKind};
use crate::selftest::SelfTestResult;
use crate::time::Instant;

impl Engine {
    /// The outcome of an action the engine asked for.
    pub fn handle_outcome(&mut self, id: ActionId, outcome: Outcome, now: Instant) {
        self.now = now;
        if let Outcome::PersistFailed { reason } = &outcome {
            self.alert(
                now,
                AlertClass::Critical,
                "journal-failed".to_string(),
                format!("cannot write the state journal: {reason}"),
                "iser-guard journals its state before every destructive action; until the \
                 journal can be written, those actions are skipped. Check the state \
                 directory (paths.state-dir): free space, permissions"
                    .to_string(),
                None,
            );
            self.finish();
            return;
        }
        // Not tracked in flight (the port's recovery does not wait for it): its verdict
        // names its device.
        let outcome = match outcome {
            Outcome::NvmeReconnect { device, reports } => {
                self.on_nvme_reconnect(&device, reports, now);
                self.finish();
                return;
            }
            Outcome::NfsCheck { device, reports } => {
                self.on_nfs_check(&device, reports, now);
                self.finish();
                return;
            }
            Outcome::MultipathReinstate { device, reports } => {
                self.on_multipath_reinstate(&device, reports, now);
                self.finish();
                return;
            }
            other => other,
        };
        let Some(inf) = self.inflight.remove(&id) else {
            // A blocked step reported after the re-creation's own deadline (its outcome was
            // taken for lost and is being verified): it is still the one writer on the
            // device, and the block must be known.
            if let Outcome::Recreate(RecreateResult::Blocked(step)) = outcome {
                if let Some(device) = self.recreation_of(id) {
                    self.on_recreate_blocked(&device, step, now);
                    self.finish();
                    return;
                }
            }
            self.stats.stale_outcomes += 1;
            self.finish();
            return;
        };
        match (inf.kind, outcome) {
            (InFlightKind::Probe(portal), Outcome::Probe(result)) => {
                self.on_probe(&portal, id, result, now)
            }
            (InFlightKind::Probe(portal), _) => {
                self.on_probe(&portal, id, ProbeResult::Unreachable, now)
            }
            (InFlightKind::Recreate(device), Outcome::Recreate(result)) => {
                self.on_recreate_done(&device, result, now)
            }
            (InFlightKind::Recreate(device), Outcome::NotRun { reason }) => {
                self.on_recreate_not_run(&device, &reason, now)
            }
            (InFlightKind::Recreate(device), Outcome::Planned { hold, plan }) => {
                self.on_recreate_planned(&device, hold, &plan, now)
            }
            (
                InFlightKind::Logout(key) | InFlightKind::Login(key),
                Outcome::Planned { hold, plan },
            ) => self.on_session_op_planned(&key, hold, &plan, now),
            (InFlightKind::Recreate(device), other) => self.on_recreate_done(
                &device,
                RecreateResult::Failed {
                    reason: format!("unexpected outcome ({other})"),
                },
                now,
            ),
            (InFlightKind::Logout(key), outcome) => {
                self.on_iscsiadm(&key, true, iscsiadm_status(outcome), now)
            }
            (InFlightKind::Login(key), outcome) => {
                self.on_iscsiadm(&key, false, iscsiadm_status(outcome), now)
            }
            (InFlightKind::OperatorLogout(node), outcome) => {
                self.on_operator_logout(node, iscsiadm_status(outcome), now)
            }
            (InFlightKind::OperatorLogin(node), outcome) => {
                self.on_operator_login(&node, iscsiadm_status(outcome), now)
            }
            (InFlightKind::SelfTest(pid), Outcome::SelfTest(result)) => {
                self.on_selftest(&pid, id, result, now)
            }
            (InFlightKind::SelfTest(pid), other) => self.on_selftest(
                &pid,
                id,
                SelfTestResult::Unavailable {
                    reason: match other {
                        Outcome::NotRun { reason } => format!("not run: {reason}"),
                        other => format!("unexpected outcome ({other})"),
                    },
                },
                now,
            ),
            (InFlightKind::Rescan(key), _) => {
                if let Some(pid) = self.sessions.get(&key).map(|s| s.port.clone()) {
                    self.request_sessions(now, true);
                    self.evaluate(&pid, now);
                }
            }
        }
        self.finish();
    }

    /// Time passed: fires due timers (probe rounds, back-off, grace, deadlines, alert flush).
    pub fn handle_timeout(&mut self, now: Instant) {
        self.now = now;
        let due: Vec<ActionId> = self
            .inflight
            .values()
            .filter(|i| i.deadline <= now)
            .map(|i| i.id)
            .collect();
        for id in due {
            let Some(inf) = self.inflight.remove(&id) else {
                continue;
            };
            match inf.kind {
                InFlightKind::Probe(portal) => {
                    self.on_probe(&portal, id, ProbeResult::Unreachable, now)
                }
                InFlightKind::Recreate(device) => self.on_recreate_silent(&device, now),
                InFlightKind::Logout(key) => {
                    self.on_iscsiadm(&key, true, IscsiadmOutcome::Timeout, now)
                }
                InFlightKind::Login(key) => {
                    self.on_iscsiadm(&key, false, IscsiadmOutcome::Timeout, now)
                }
                InFlightKind::Rescan(_) => {}
                InFlightKind::SelfTest(pid) => {
                    let secs = self.policy.selftest_timeout.as_secs();
                    self.on_selftest(
                        &pid,
                        id,
                        SelfTestResult::Unavailable {
                            reason: format!(
                                "no result within {secs}s (the worker is stuck, or the daemon \
                                 restarted while it ran)"
                            ),
                        },
                        now,
                    )
                }
                InFlightKind::OperatorLogout(node) => {
                    self.on_operator_logout(node, IscsiadmOutcome::Timeout, now)
                }
                InFlightKind::OperatorLogin(node) => {
                    self.on_operator_login(&node, IscsiadmOutcome::Timeout, now)
                }
            }
        }
        let pids: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| {
                p.wake().is_some_and(|(_, at)| at <= now) || p.deadline().is_some_and(|d| d <= now)
            })
            .map(|p| p.id.clone())
            .collect();
        // A probe round's timer alone is journaled with the round (throttled); any other
        // timer or deadline at once.
        let only_probe_rounds = self.ports.values().all(|p| {
            p.deadline().is_none_or(|d| d > now)
                && p.wake()
                    .is_none_or(|(k, at)| at > now || k == TimerKind::ProbeRound)
        });
        if !pids.is_empty() && !only_probe_rounds {
            self.mark_dirty("timers fired".into());
        }
        for pid in pids {
            let wake = self
                .ports
                .get_mut(&pid)
                .and_then(PortRecord::stage_mut)
                .and_then(|s| s.take_due_wake(now));
            let awaiting_target = self.phase(&pid) == Some(Phase::AwaitingTarget);
            match wake {
                Some(TimerKind::ProbeRound) if awaiting_target => self.start_probes(&pid, now),
                Some(TimerKind::ProbeRound) => {}
                Some(TimerKind::Backoff) => {
                    if self.phase(&pid) == Some(Phase::AwaitingTarget) {
                        self.start_probes(&pid, now);
                    } else {
                        self.set_ops_not_before(&pid, now);
                    }
                }
                Some(TimerKind::Grace) => self.set_ops_not_before(&pid, now),
                Some(TimerKind::SessionRefresh) => self.request_sessions(now, true),
                None => {}
            }
            self.evaluate(&pid, now);
            // A deadline the stage did not consume must not fire again and again.
            let refresh = self.policy.session_refresh;
            if let Some(stage) = self.ports.get_mut(&pid).and_then(PortRecord::stage_mut) {
                if stage.deadline().is_some_and(|d| d <= now) {
                    stage.set_deadline(None);
                }
                if let Stage::Reconnecting {
                    timer: timer @ None,
                    ops_not_before: Some(_),
                } = stage
                {
                    // Still waiting for a fresh session list: ask again later.
                    *timer = Some((ReconnectTimer::SessionRefresh, now.plus(refresh)));
                }
            }
        }
        for alert in self.gate.due(now, self.policy.alert_repeat_interval) {
            self.push_alert(alert);
        }
        self.finish();
    }
}

pub(super) fn iscsiadm_status(outcome: Outcome) -> IscsiadmOutcome {
    match outcome {
        Outcome::Iscsiadm(s) => s,
        Outcome::NotRun { reason } => IscsiadmOutcome::Other {
            code: None,
            message: format!("not run: {reason}"),
        },
        other => IscsiadmOutcome::Other {
            code: None,
            message: format!("unexpected outcome ({other})"),
        },
    }
}
