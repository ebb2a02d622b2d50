//! The driver's effects run: journal writes on a blocking thread, actions on the worker
//! pool, plans logged; their results fed back to the driver, and the engine's transitions
//! reported to the observer, the metrics, the log and the operators following a port.

use super::{Finished, Loop};
use crate::core::driver::{Effect, EffectId, EffectKind, EffectOutcome, Refusal};
use crate::core::recovery::{ActionKind, EngineSnapshot, Outcome, RecreateResult};
use crate::daemon::exec::{execute, syslog_alert, Executed};
use crate::daemon::observe::clocks;

impl Loop {
    /// Drains the driver's effects (starting them in order) and the engine's transitions.
    pub(super) fn pump(&mut self) {
        loop {
            let mut progressed = false;
            while let Some(effect) = self.driver.poll_effect(self.now()) {
                progressed = true;
                self.start(effect);
            }
            while let Some(t) = self.driver.poll_transition() {
                progressed = true;
                self.obs.transition(&t, &self.driver, clocks(self.now()));
                self.metrics.transition(&t);
                tracing::info!(
                    port = %t.port,
                    from = %t.from,
                    to = %t.to,
                    why = %t.reason,
                    "transition"
                );
                self.tell(
                    Some(&t.port),
                    &format!("{}: {} -> {}: {}", t.port, t.from, t.to, t.reason),
                );
            }
            if !progressed {
                break;
            }
        }
    }

    /// Starts one effect. Executors only execute: what may run was decided by the driver.
    fn start(&mut self, effect: Effect) {
        self.metrics.effect(&effect, &self.settings.config.alerts);
        let id = effect.id;
        match effect.kind {
            EffectKind::WriteJournal { snapshot, reason } => {
                tracing::debug!(%reason, "writing the journal");
                self.write_journal(id, snapshot, reason);
            }
            EffectKind::Plan { action, refusal } => {
                let port = action.port.clone();
                self.obs.not_run(&action, &refusal, clocks(self.now()));
                tracing::warn!(action = %action, id = %action.id, why = %action.reason, "not run: {refusal}");
                self.tell(port.as_ref(), &format!("not run: {action}: {refusal}"));
                if let (
                    ActionKind::RecreateDevice {
                        device, remembered, ..
                    },
                    Refusal::DryRun,
                ) = (&action.kind, &refusal)
                {
                    self.log_reset_plan(device.clone(), remembered.clone());
                }
            }
            EffectKind::Run { action, authority } => {
                let port = action.port.clone();
                // A probe's decision is routine (every poll.probe while a target is away):
                // only its answer can be news (core::observe::probes).
                let routine = self.probe_news.started(id, &action);
                if routine {
                    tracing::debug!(action = %action, id = %action.id, "decided");
                } else {
                    let severities = self.settings.config.alerts.severities();
                    if !matches!(action.kind, ActionKind::PersistState { .. }) {
                        self.obs
                            .decided(&action, &authority, &severities, clocks(self.now()));
                    }
                    let severity = match &action.kind {
                        ActionKind::Alert(a) => Some(severities.of(a.severity).name()),
                        _ => None,
                    };
                    tracing::info!(
                        action = %action,
                        severity,
                        id = %action.id,
                        origin = %action.origin,
                        allowed_by = %authority,
                        why = %action.reason,
                        "decided"
                    );
                }
                match &action.kind {
                    ActionKind::Alert(alert) => {
                        let cfg = &self.settings.config.alerts;
                        crate::logging::alert(alert, cfg, self.ex.alerts.is_some());
                        self.tell(port.as_ref(), &format!("alert: {}", alert.summary));
                        if let Some(sink) = self.ex.alerts.clone() {
                            // Never waits: a full queue coalesces (the sender reports the
                            // count), so the loop goes straight back to the kernel log.
                            let msg = syslog_alert(alert, &self.settings.config.alerts);
                            self.alert_queue.send(sink, msg);
                        }
                    }
                    ActionKind::RefreshSessions => self.request_sessions(),
                    ActionKind::RefreshTopology => self.refresh_topology.raise(),
                    // The driver turns these into journal effects.
                    ActionKind::PersistState { .. } => {}
                    _ => {
                        if let (ActionKind::RecreateDevice { device, .. }, Some(w)) =
                            (&action.kind, self.witness.as_mut())
                        {
                            // Our own listener's open context would hold the deletion up.
                            w.release(device);
                        }
                        if !routine {
                            self.tell(port.as_ref(), &format!("running: {action}"));
                        }
                        if let ActionKind::RecreateDevice { device, .. } = &action.kind {
                            self.recreations.insert(id, (device.clone(), false));
                        }
                        self.inflight.insert(id, port);
                        let ex = self.ex.clone();
                        let lock_dir = self
                            .settings
                            .take_lock
                            .then(|| self.settings.config.paths.state_dir.clone());
                        let tx = self.done_tx.clone();
                        let probe_from = match &action.kind {
                            ActionKind::ProbePortal { portal, .. } => {
                                self.probe_from.get(portal).copied()
                            }
                            _ => None,
                        };
                        let refused_tx = tx.clone();
                        let blocked_tx = tx.clone();
                        let what = action.to_string();
                        let job = move || {
                            // Sent at once, from this thread or the resetter's watchdog; the
                            // re-creation's final result follows when the step returns.
                            let on_blocked = |step: crate::core::recovery::BlockedStep| {
                                let summary = format!(
                                    "{action}: blocked in the kernel: `{}` has not returned \
                                     after {} s ({})",
                                    step.step,
                                    step.blocked_ms / 1000,
                                    step.task
                                );
                                let _ = blocked_tx.send(Finished {
                                    id,
                                    executed: Executed {
                                        outcome: Outcome::Recreate(RecreateResult::Blocked(step)),
                                        summary,
                                        method: None,
                                    },
                                });
                            };
                            let executed =
                                execute(&ex, &action, lock_dir.as_deref(), probe_from, &on_blocked);
                            if let Some(executed) = executed {
                                let _ = tx.send(Finished { id, executed });
                            }
                        };
                        if let Err(full) = self.pool.submit(job) {
                            // Answered at once so the engine is not left waiting.
                            tracing::error!("not run: {what}: {full}");
                            let _ = refused_tx.send(Finished {
                                id,
                                executed: Executed {
                                    outcome: Outcome::NotRun {
                                        reason: full.to_string(),
                                    },
                                    summary: format!("{what}: not run: {full}"),
                                    method: None,
                                },
                            });
                        }
                    }
                }
            }
        }
    }

    /// An alert the daemon raises itself (not the engine's), at the operator severity: counted,
    /// entered in the event ring, logged and sent to syslog.
    pub(super) fn daemon_alert(
        &mut self,
        kind: &str,
        what: String,
        why: String,
        todo: String,
        now: crate::core::time::Instant,
    ) {
        let severity = self.settings.config.alerts.severity_operator;
        self.metrics.alert(kind, severity);
        self.obs.note(
            crate::core::observe::EventKind::Alert {
                severity: severity.name().to_string(),
            },
            what.clone(),
            clocks(now),
        );
        let msg = crate::io::syslog::AlertMessage {
            severity,
            what,
            why,
            todo,
        };
        crate::logging::daemon_alert(&msg, kind, self.ex.alerts.is_some());
        if let Some(sink) = self.ex.alerts.clone() {
            self.alert_queue.send(sink, msg);
        }
    }

    /// The journal write (atomic write, two fsyncs) on a blocking thread; its result comes
    /// back to the loop, which reports it to the driver. The driver hands out nothing after
    /// it (in particular no destructive effect) until then.
    fn write_journal(&mut self, id: EffectId, snapshot: Box<EngineSnapshot>, reason: String) {
        if self.settings.read_only {
            // A plan-only loop keeps its state in memory: it writes nothing on the host.
            let _ = self.journal_tx.send((id, Ok(())));
            return;
        }
        self.obs.sync(&snapshot, clocks(self.now()));
        let incidents = self.obs.incidents().to_vec();
        let journal = self.journal.clone();
        let tx = self.journal_tx.clone();
        // The driver hands out one journal write at a time: the previous one is done.
        self.journal_write = Some(tokio::task::spawn_blocking(move || {
            let written = journal
                .save_with_incidents(&snapshot, &incidents)
                .map_err(|e| {
                    tracing::error!("cannot write the journal ({reason}): {e}");
                    e.to_string()
                });
            let _ = tx.send((id, written));
        }));
    }

    /// Logs what a planned (dry-run) re-creation would do, from the resetter's own plan.
    fn log_reset_plan(
        &self,
        device: String,
        remembered: Option<crate::core::reset_plan::RecreateFrom>,
    ) {
        let resetter = self.ex.resetter.clone();
        let plan = move || match resetter.plan_from(&device, remembered.as_ref()) {
            Ok(plan) => {
                for m in &plan.methods {
                    tracing::info!(%device, method = %m.method, steps = %m.steps.join("; "), "dry-run plan");
                }
            }
            Err(e) => tracing::info!(%device, "dry-run plan: {e}"),
        };
        if let Err(full) = self.pool.submit(plan) {
            tracing::info!("dry-run plan not logged: {full}");
        }
    }

    pub(super) fn on_finished(&mut self, f: Finished) {
        let blocked_now = matches!(
            f.executed.outcome,
            Outcome::Recreate(RecreateResult::Blocked(_))
        );
        match self.recreations.get_mut(&f.id) {
            // Reported blocked earlier: this is the re-creation's final result, for the
            // blocked record (the action's own outcome was the block).
            Some((device, true)) if !blocked_now => {
                let device = device.clone();
                self.recreations.remove(&f.id);
                let port = self.inflight.remove(&f.id).flatten();
                self.obs
                    .finished(port.as_ref(), &f.executed.summary, clocks(self.now()));
                tracing::info!(id = %f.id, outcome = %f.executed.outcome, "the blocked step returned: {}", f.executed.summary);
                self.tell(port.as_ref(), &f.executed.summary);
                let result = match f.executed.outcome {
                    Outcome::Recreate(r) => r,
                    other => RecreateResult::Failed {
                        reason: other.to_string(),
                    },
                };
                let now = self.now();
                self.driver
                    .handle_recreation_returned(&device, Some(result), now);
                return;
            }
            // A second report of the same block (never sent twice today): nothing new.
            Some((_, true)) => return,
            Some((_, blocked)) if blocked_now => *blocked = true,
            Some(_) => {
                self.recreations.remove(&f.id);
            }
            None => {}
        }
        let port = if blocked_now {
            self.inflight.get(&f.id).cloned().flatten()
        } else {
            self.inflight.remove(&f.id).flatten()
        };
        if self.probe_news.finished(f.id, &f.executed.outcome) {
            self.obs
                .finished(port.as_ref(), &f.executed.summary, clocks(self.now()));
            tracing::info!(id = %f.id, outcome = %f.executed.outcome, "{}", f.executed.summary);
            self.tell(port.as_ref(), &f.executed.summary);
        } else {
            tracing::debug!(id = %f.id, outcome = %f.executed.outcome, "{}", f.executed.summary);
        }
        self.metrics
            .executed(f.id, &f.executed.outcome, f.executed.method);
        let now = self.now();
        self.driver
            .handle_effect_outcome(f.id, EffectOutcome::Action(f.executed.outcome), now);
    }
}
