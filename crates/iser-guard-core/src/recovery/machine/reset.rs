//! Stage `ResettingDevice`: the decision to re-create a device (attempts, holds, one at a
//! time on the host, joining ports), and what its outcome, plan, refusal or silence means.

use std::time::Duration;

use super::Engine;
use crate::recovery::action::{ActionKind, AlertClass, Origin, RecreateMethod};
use crate::recovery::input::{PortId, RecreateResult};
use crate::recovery::policy::OtherSessions;
use crate::recovery::state::{
    Episode, Fault, FreshQp, Hold, InFlight, InFlightKind, Phase, PortRecord, Recreation,
    RecreationState, Stage, TimerKind,
};
use crate::time::Instant;

/// How long to wait for the QP table after a re-creation whose outcome was lost.
pub(super) const VERIFY_RECREATE_WINDOW: Duration = Duration::from_secs(30);

impl Engine {
    /// Target back (or no wait): re-create the device if everything allows it.
    pub(super) fn try_recreate(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        if p.wake()
            .is_some_and(|(k, at)| k == TimerKind::Backoff && at > now)
        {
            return false;
        }
        if !self.scanned {
            // Started (or restarted) and not looked at the host yet: a journal's view may be
            // stale, so nothing destructive until the first complete scan.
            return false;
        }
        if self.join_blocked(pid, now) {
            // Its device's re-creation is blocked in the kernel: no second writer.
            return true;
        }
        if self
            .ports
            .get(pid)
            .is_some_and(|p| p.origin() == Origin::Automatic)
            && self.hold_for_driver_reset(pid, now)
        {
            // Its driver is re-creating it: no second writer either.
            return false;
        }
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let device = pid.device.clone();
        let origin = p.origin();
        let attempt = p.attempts() + 1;
        if p.attempts() >= self.policy.max_attempts && origin == Origin::Automatic {
            let n = p.attempts();
            self.quarantine(
                pid,
                format!("{n} re-creation attempt(s) of {device} did not bring the port back"),
                now,
            );
            return true;
        }
        let why = p.reason.clone();
        let what = format!("re-create RDMA device {device} (attempt {attempt})");
        if let Some(hold) = self.destructive_hold(pid) {
            self.set_hold(pid, hold, &what, &why, now);
            return false;
        }
        if origin == Origin::Automatic {
            if let Some(k) = self.kernel_bug_hold(&device) {
                let hold = Hold::KernelBug {
                    module: k.module.clone(),
                    report: k.report.clone(),
                };
                self.set_hold(pid, hold, &what, &why, now);
                return false;
            }
        }
        if let Some(c) = self.function_without_rdma(&device) {
            // Nothing to re-create: the function has no RDMA (a bond member, safe mode), so
            // any recipe would be the wrong one. Held until an operator fixes the function.
            self.quarantine(
                pid,
                format!(
                    "{device} is not re-created: {}; {}",
                    c.summary(),
                    c.remedy()
                ),
                now,
            );
            return true;
        }
        if origin == Origin::Automatic {
            let sessions = if self.policy.other_sessions == OtherSessions::Wait {
                self.healthy_sessions_of_device(&device)
            } else {
                Vec::new()
            };
            let consumers = self.consumers_in_the_way(&device);
            if !sessions.is_empty() || !consumers.is_empty() {
                self.set_hold(
                    pid,
                    Hold::OtherSessionsHealthy {
                        sessions,
                        consumers,
                    },
                    &what,
                    &why,
                    now,
                );
                return false;
            }
            let paths = self.multipath_in_the_way(&device);
            if !paths.is_empty() {
                self.set_hold(pid, Hold::LastMultipathPath { paths }, &what, &why, now);
                return false;
            }
        }
        let dropped = self.consumers_of(&device).unwrap_or_default();
        let nvme = self.nvme_of(&device);
        let nfs = self.nfs_of(&device);
        let multipath = self.multipath_of(&device);
        if let Some(busy) = self.recreating.clone() {
            if busy == device {
                if let Some(p) = self.ports.get_mut(pid) {
                    p.hold = None;
                }
                self.transition(
                    pid,
                    Stage::resetting_device(),
                    format!("joining the re-creation of {device} already in progress"),
                    now,
                );
                return true;
            }
            if self.ports.get(pid).is_some_and(|p| p.hold.is_none()) {
                self.set_hold(pid, Hold::WaitingForSlot { busy }, &what, &why, now);
            }
            return false;
        }
        let present = self.devices.get(&device).is_none_or(|d| d.present);
        let (parent, driver, remembered) = self
            .devices
            .get(&device)
            .map(|d| (d.parent.clone(), d.driver.clone(), d.remembered.clone()))
            .unwrap_or((None, None, None));
        if !present && remembered.is_none() && parent.is_none() {
            // Gone, and never seen while it existed (deleted before this daemon started,
            // with a journal that did not remember it): nothing to re-create it from. An
            // attempt would only fail; the operator gets the commands instead.
            self.refuse_unknown_device(pid, &device, now);
            return true;
        }
        // Go.
        let id = self.alloc_id();
        self.device_or_create(&device).recreation = Some(Recreation {
            id,
            attempt,
            started: now,
            state: RecreationState::InFlight,
            origin,
            consumers: dropped.clone(),
            nvme: nvme.clone(),
            nvme_back: Vec::new(),
            nfs: nfs.clone(),
            nfs_checks: Vec::new(),
            multipath: multipath.clone(),
            multipath_back: Vec::new(),
            multipath_asked: false,
        });
        self.recreating = Some(device.clone());
        self.inflight.insert(
            id,
            InFlight {
                id,
                kind: InFlightKind::Recreate(device.clone()),
                deadline: now.plus(self.policy.recreate_timeout),
            },
        );
        let reason = if origin == Origin::Operator {
            format!("operator asked: re-creating {device} (attempt {attempt})")
        } else if !present {
            let from = remembered
                .as_ref()
                .map(|r| format!("its remembered {}", r.describe()))
                .unwrap_or_else(|| "its parent PCI function".into());
            format!(
                "{device} is gone and did not come back within {}s: re-creating it from {from} \
                 (attempt {attempt})",
                self.policy.device_wait.as_secs()
            )
        } else if self.no_wait(pid) {
            format!(
                "re-creating {device} at once (attempt {attempt}, recovery.reset-when = \
                 immediately) to give the port a fresh QP 1"
            )
        } else if self.down_portals_of(pid).is_empty() || self.portals_of(pid).is_empty() {
            format!("re-creating {device} (attempt {attempt}) to give the port a fresh QP 1")
        } else {
            format!(
                "the target answers again ({} consecutive probes): re-creating {device} \
                 (attempt {attempt}) to give the port a fresh QP 1",
                self.policy.probe_successes
            )
        };
        let reason = if dropped.is_empty() {
            reason
        } else {
            format!(
                "{reason}; other RDMA consumers on {device} lose their connections with it: {}",
                crate::consumers::list(&dropped)
            )
        };
        let reason = if nvme.is_empty() {
            reason
        } else {
            format!(
                "{reason}; NVMe over RDMA controllers remembered for nvme connect after it: {}",
                crate::nvme_fabrics::list_controllers(&nvme)
            )
        };
        let reason = if nfs.is_empty() {
            reason
        } else {
            format!(
                "{reason}; NFS over RDMA mounts remembered for a check after it (xprtrdma \
                 reconnects them): {}",
                crate::nfs_rdma::list_mounts(&nfs)
            )
        };
        let reason = if multipath.is_empty() {
            reason
        } else {
            format!(
                "{reason}; dm-multipath paths it takes down, checked after it: {}",
                crate::multipath::list_paths(&multipath)
            )
        };
        for q in self.ports_of_device(&device) {
            let join = q == *pid
                || self.ports.get(&q).is_some_and(|r| {
                    !r.sessions.is_empty()
                        && !matches!(r.phase(), Phase::ResettingDevice | Phase::Quarantined)
                });
            if !join {
                continue;
            }
            let mut opened = None;
            if let Some(r) = self.ports.get_mut(&q) {
                r.hold = None;
                match r.episode_mut() {
                    Some(e) if q == *pid => {
                        e.attempts = attempt;
                        e.attempt_recreated = true;
                    }
                    Some(_) => {}
                    // A healthy port of the device: its sessions drop with the device.
                    None => opened = Some(Episode::new(Fault::SessionsDown, now, origin)),
                }
            }
            let r = if q == *pid {
                reason.clone()
            } else {
                format!("{device} is being re-created for {pid}: its sessions will reconnect")
            };
            self.transition_in(&q, opened, Stage::resetting_device(), r, now);
        }
        self.persist(format!("about to re-create {device}, attempt {attempt}"));
        let method = if present {
            RecreateMethod::Auto
        } else {
            RecreateMethod::FromParent
        };
        self.push_with_id(
            id,
            Some(pid.clone()),
            Some(device.clone()),
            origin,
            reason.clone(),
            ActionKind::RecreateDevice {
                device: device.clone(),
                parent,
                driver,
                method,
                attempt,
                remembered,
            },
        );
        let max = self.policy.max_attempts;
        self.alert(
            now,
            AlertClass::Warning,
            format!("recreate:{device}:{attempt}"),
            format!("re-creating RDMA device {device} (attempt {attempt} of {max})"),
            reason,
            None,
        );
        true
    }

    /// ResettingDevice: a re-creation whose outcome was lost and that the QP table did not
    /// confirm in time failed.
    pub(super) fn step_resetting(&mut self, pid: &PortId, now: Instant) -> bool {
        let expired = matches!(
            self.ports.get(pid).and_then(PortRecord::stage),
            Some(Stage::ResettingDevice { verify_until: Some(d) }) if *d <= now
        );
        if !expired {
            return false;
        }
        let device = pid.device.clone();
        self.on_recreate_done(
            &device,
            RecreateResult::Failed {
                reason: "could not verify that it completed (no outcome, QP table did not show \
                         QP 1 in RTS)"
                    .into(),
            },
            now,
        );
        true
    }

    pub(super) fn on_recreate_done(&mut self, device: &str, result: RecreateResult, now: Instant) {
        let result = match result {
            RecreateResult::Blocked(step) => return self.on_recreate_blocked(device, step, now),
            other => other,
        };
        if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
        }
        self.inflight
            .retain(|_, i| i.kind != InFlightKind::Recreate(device.to_string()));
        let attempt = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref().map(|r| r.attempt))
            .unwrap_or(0);
        let started = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref().map(|r| r.started));
        let how = result.how_recreated();
        let origin = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref().map(|r| r.origin))
            .unwrap_or(Origin::Automatic);
        let was = device.to_string();
        match result {
            RecreateResult::Recreated {
                name,
                mode_restored,
                method,
                failed_before,
            } => {
                if !failed_before.is_empty() {
                    // The device was re-created, but not the way the plan's first method
                    // would have: the operator confirmed that plan, so what failed and
                    // what worked instead is said once, as its own alert.
                    let worked = method.as_deref().unwrap_or("a later method");
                    self.alert(
                        now,
                        AlertClass::Warning,
                        format!("recreate-fallback:{device}"),
                        format!(
                            "{device} was re-created by {worked} after {} failed",
                            failed_before
                                .iter()
                                .map(|f| f.method.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ),
                        format!(
                            "{}. Nothing was changed by the failed step, so the next method \
                             was tried; recovery continues as usual. Look at why the first \
                             method failed (for a devlink toggle: devlink dev param show), so \
                             the next re-creation takes the least disruptive way",
                            failed_before
                                .iter()
                                .map(|f| format!("{} failed: {}", f.method, f.error))
                                .collect::<Vec<_>>()
                                .join("; ")
                        ),
                        None,
                    );
                }
                if let Some(found) = mode_restored {
                    self.alert(
                        now,
                        AlertClass::Error,
                        format!("mode:{device}"),
                        format!(
                            "{device} came back from its re-creation in the wrong RDMA mode; \
                             RoCE was restored"
                        ),
                        format!(
                            "after the devlink toggle: {found}. ice names the RDMA device it \
                             plugs from its mode bit, so a reset of the function while \
                             enable_roce was off re-plugs it as iWARP, over which iSER never \
                             connects. Verification continues as usual; if it happens again, \
                             look for the reset's cause in the kernel log (irdma `Requesting a \
                             reset`, ice reset messages)"
                        ),
                        None,
                    );
                }
                if let Some(d) = self.devices.get_mut(device) {
                    d.present = true;
                    d.completed_recreations += 1;
                    if let Some(r) = d.recreation.as_mut() {
                        r.state = RecreationState::Completed;
                    }
                }
                let device = if name != device && !name.is_empty() {
                    self.rename_device(device, &name, now);
                    name
                } else {
                    device.to_string()
                };
                for pid in self.ports_of_device(&device) {
                    if self.phase(&pid) != Some(Phase::ResettingDevice) {
                        continue;
                    }
                    // The fresh QP 1 may have been reported already (the dump after
                    // the device came back can beat the executor's outcome).
                    let seen = started
                        .is_some_and(|t| self.gsi_rts_at.get(&pid).is_some_and(|at| *at >= t));
                    if let Some(e) = self.episode_mut(&pid) {
                        e.recreated = Some(if seen {
                            FreshQp::Seen
                        } else {
                            FreshQp::Awaited
                        });
                        e.needs_recreate = false;
                        // A new device: its port is self-tested afresh.
                        e.selftest = None;
                    }
                    let grace = self.policy.iscsid_grace.as_secs();
                    self.start_reconnect(
                        &pid,
                        true,
                        format!(
                            "{device} re-created (attempt {attempt}{}): QP 1 is fresh; giving \
                             iscsid {grace}s to reconnect before logging sessions in",
                            how.as_deref().map(|h| format!(", {h}")).unwrap_or_default()
                        ),
                        now,
                    );
                }
                self.persist(format!(
                    "re-created {device} (attempt {attempt}): completed{}",
                    how.as_deref().map(|h| format!(" {h}")).unwrap_or_default()
                ));
                self.ask_nvme_reconnect(&was, &device, origin);
                self.ask_nfs_check(&was, &device, origin);
                // Verification looks at the QP table itself: the new QP 1 must be in RTS.
                self.push(
                    None,
                    Some(device.clone()),
                    Origin::Automatic,
                    format!("{device} re-created: is its new QP 1 in RTS?"),
                    ActionKind::RefreshTopology,
                );
                self.last_topology_request = Some(now);
            }
            RecreateResult::Failed { reason } => {
                self.mark_recreation_failed(device);
                for pid in self.ports_resetting(device) {
                    self.after_failed_attempt(
                        &pid,
                        format!("re-creating {device} failed (attempt {attempt}): {reason}"),
                        now,
                    );
                }
            }
            RecreateResult::Blocked(_) => {} // Handled above.
            RecreateResult::Unsupported { reason } => {
                self.mark_recreation_failed(device);
                for pid in self.ports_resetting(device) {
                    self.quarantine(
                        &pid,
                        format!("{device} cannot be re-created here: {reason}"),
                        now,
                    );
                }
            }
        }
        self.slot_freed(now);
    }

    pub(super) fn on_recreate_not_run(&mut self, device: &str, reason: &str, now: Instant) {
        if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
        }
        if let Some(d) = self.devices.get_mut(device) {
            d.recreation = None;
        }
        for pid in self.ports_of_device(device) {
            if self.phase(&pid) != Some(Phase::ResettingDevice) {
                continue;
            }
            if let Some(e) = self.episode_mut(&pid) {
                e.attempts = e.attempts.saturating_sub(1);
            }
            self.after_failed_attempt(&pid, format!("{device} was not re-created: {reason}"), now);
        }
        self.slot_freed(now);
    }

    /// The driver planned the re-creation instead of running it (dry-run, paused, not
    /// allowed): nothing happened to the device, no attempt is counted, and the port waits
    /// with the hold (and the plan) visible until something changes (policy reload, resume,
    /// an operator command, a new transition).
    pub(super) fn on_recreate_planned(
        &mut self,
        device: &str,
        hold: Hold,
        plan: &str,
        now: Instant,
    ) {
        if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
        }
        let attempt = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref())
            .map(|r| r.attempt);
        if let Some(d) = self.devices.get_mut(device) {
            d.recreation = None;
        }
        // Nothing is being re-created: take back the "re-creating" alert queued behind the
        // action, so the operator reads the plan, not an announcement.
        if let Some(n) = attempt {
            let key = format!("recreate:{device}:{n}");
            self.actions
                .retain(|a| !matches!(&a.kind, ActionKind::Alert(al) if al.key == key));
            self.gate.reset(&key);
        }
        for pid in self.ports_of_device(device) {
            if self.phase(&pid) != Some(Phase::ResettingDevice) {
                continue;
            }
            let why = match self.ports.get_mut(&pid) {
                Some(p) => {
                    if let Some(e) = p.episode_mut() {
                        e.attempts = e.attempts.saturating_sub(1);
                    }
                    p.reason.clone()
                }
                None => continue,
            };
            self.transition(
                &pid,
                Stage::awaiting_target(),
                format!("planned, not run: {plan}"),
                now,
            );
            self.set_hold(&pid, hold.clone(), plan, &why, now);
        }
        self.slot_freed(now);
    }

    /// The re-creation's outcome never came (timeout, or lost in a restart): verify through
    /// the QP table instead of repeating it.
    pub(super) fn on_recreate_silent(&mut self, device: &str, now: Instant) {
        let mut any = false;
        for pid in self.ports_of_device(device) {
            if let Some(Stage::ResettingDevice { verify_until }) =
                self.ports.get_mut(&pid).and_then(PortRecord::stage_mut)
            {
                *verify_until = Some(now.plus(VERIFY_RECREATE_WINDOW));
                any = true;
            }
        }
        // The fresh QP 1 may have been reported already, before the outcome was missed.
        let started = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref().map(|r| r.started));
        let seen: Vec<PortId> = self
            .ports_of_device(device)
            .into_iter()
            .filter(|pid| self.phase(pid) == Some(Phase::ResettingDevice))
            .filter(|pid| {
                started.is_some_and(|t| self.gsi_rts_at.get(pid).is_some_and(|at| *at >= t))
            })
            .collect();
        if let Some(pid) = seen.first() {
            self.on_gsi_rts(pid, now);
            return;
        }
        if any {
            self.push(
                None,
                Some(device.to_string()),
                Origin::Automatic,
                format!("no outcome for the re-creation of {device}: checking the QP table"),
                ActionKind::RefreshTopology,
            );
            self.last_topology_request = Some(now);
        } else if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
            self.slot_freed(now);
        }
    }

    pub(super) fn slot_freed(&mut self, now: Instant) {
        let waiting: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| matches!(p.hold, Some(Hold::WaitingForSlot { .. })))
            .map(|p| p.id.clone())
            .collect();
        for pid in waiting {
            if let Some(p) = self.ports.get_mut(&pid) {
                p.hold = None;
            }
            self.evaluate(&pid, now);
        }
    }

    /// The ports of `device` waiting on its re-creation.
    pub(super) fn ports_resetting(&self, device: &str) -> Vec<PortId> {
        self.ports_of_device(device)
            .into_iter()
            .filter(|pid| self.phase(pid) == Some(Phase::ResettingDevice))
            .collect()
    }

    /// Records that the device's current re-creation attempt failed.
    pub(super) fn mark_recreation_failed(&mut self, device: &str) {
        if let Some(r) = self
            .devices
            .get_mut(device)
            .and_then(|d| d.recreation.as_mut())
        {
            r.state = RecreationState::Failed;
        }
    }
}
