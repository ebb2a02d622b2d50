//! Stage `RecreationBlocked`: a step of a device's re-creation did not return, because the
//! kernel is holding it (removing an RDMA device ends in `ib_unregister_device`, which waits
//! uninterruptibly for every connection, QP and open verbs context on the device to go).
//!
//! What the engine guarantees while a re-creation is blocked, until its step returns:
//! - no second writer on the device: no automatic re-creation, and `recover`/`reset-device`
//!   of that device are refused (a second `devlink` or `unbind` would block behind the
//!   first);
//! - the port is out of automatic recovery, the operator is told what is blocked, for how
//!   long, where in the kernel (the task's state and stack), and what frees it; the report
//!   is repeated with the time so far;
//! - the host-wide slot is given back: other devices are recovered meanwhile;
//! - the blocked record is journaled: a restarted daemon still knows a writer it cannot see
//!   may hold the device.
//!
//! When the step returns, the executor's final result comes in
//! ([`Engine::handle_recreation_returned`]) and is read as any re-creation's outcome: the
//! ports go back through `ResettingDevice` to verification.

use std::time::Duration;

use super::{CommandError, Engine};
use crate::recovery::action::{AlertClass, Origin};
use crate::recovery::input::{BlockedStep, PortId, RecreateResult};
use crate::recovery::state::{BlockedRecreation, InFlightKind, Phase, Stage};
use crate::time::Instant;

/// The shortest interval between two reports of the same blocked re-creation (the alert
/// repeat interval, when longer, sets it).
const MIN_REPORT_INTERVAL: Duration = Duration::from_secs(60);

/// Kernel stack frames named in an alert (the innermost, where it waits).
const STACK_FRAMES_NAMED: usize = 16;

impl Engine {
    /// The blocked re-creation of `device`, if one is blocked.
    pub(crate) fn blocked_recreation(&self, device: &str) -> Option<&BlockedRecreation> {
        self.devices.get(device).and_then(|d| d.blocked.as_ref())
    }

    /// Every blocked re-creation, by device.
    pub fn blocked_recreations(&self) -> impl Iterator<Item = (&str, &BlockedRecreation)> {
        self.devices
            .values()
            .filter_map(|d| d.blocked.as_ref().map(|b| (d.name.as_str(), b)))
    }

    /// The executor gave up waiting for a step of `device`'s re-creation: it is blocked in
    /// the kernel.
    pub(super) fn on_recreate_blocked(&mut self, device: &str, step: BlockedStep, now: Instant) {
        if self.recreating.as_deref() == Some(device) {
            self.recreating = None;
        }
        self.inflight
            .retain(|_, i| i.kind != InFlightKind::Recreate(device.to_string()));
        let (action, attempt, origin) = self
            .devices
            .get(device)
            .and_then(|d| d.recreation.as_ref())
            .map(|r| (r.id, r.attempt, r.origin))
            .unwrap_or((Default::default(), 0, Origin::Automatic));
        let since = crate::time::Instant(now.0.saturating_sub(step.blocked_ms));
        self.device_or_create(device).blocked = Some(BlockedRecreation {
            action,
            attempt,
            origin,
            since,
            step,
        });
        let next = Some(now.plus(self.blocked_report_interval()));
        for pid in self.ports_of_device(device) {
            let joins = match self.phase(&pid) {
                Some(Phase::ResettingDevice) => true,
                // A port of the device with sessions, recovering or not, is held too: its
                // device is being torn down.
                Some(Phase::Healthy | Phase::Quarantined | Phase::RecreationBlocked) | None => {
                    false
                }
                Some(_) => self.ports.get(&pid).is_some_and(|p| !p.sessions.is_empty()),
            };
            if joins {
                let reason = self.blocked_words(device, now);
                self.transition(
                    &pid,
                    Stage::RecreationBlocked { next_report: next },
                    reason,
                    now,
                );
            }
        }
        self.persist(format!(
            "the re-creation of {device} is blocked in the kernel"
        ));
        self.alert_blocked(device, now);
        // Other devices may be re-created meanwhile; this one is held by its record.
        self.slot_freed(now);
    }

    /// A port whose device's re-creation is blocked: it joins the block instead of
    /// starting a second writer. True if it moved.
    pub(super) fn join_blocked(&mut self, pid: &PortId, now: Instant) -> bool {
        if self.blocked_recreation(&pid.device).is_none()
            || self.phase(pid) == Some(Phase::RecreationBlocked)
        {
            return false;
        }
        if let Some(p) = self.ports.get_mut(pid) {
            p.hold = None;
        }
        let next = Some(now.plus(self.blocked_report_interval()));
        let reason = self.blocked_words(&pid.device, now);
        self.transition(
            pid,
            Stage::RecreationBlocked { next_report: next },
            reason,
            now,
        );
        true
    }

    /// RecreationBlocked: repeat the report when it is due (nothing else happens here: the
    /// step's return is an input of its own).
    pub(super) fn step_blocked(&mut self, pid: &PortId, now: Instant) -> bool {
        let due = matches!(
            self.ports.get(pid).and_then(|p| p.stage()),
            Some(Stage::RecreationBlocked { next_report: Some(at) }) if *at <= now
        );
        if !due {
            return false;
        }
        let next = now.plus(self.blocked_report_interval());
        if let Some(stage) = self.stage_mut(pid) {
            stage.set_deadline(Some(next));
        }
        let reason = self.blocked_words(&pid.device, now);
        if let Some(p) = self.ports.get_mut(pid) {
            p.reason = reason;
        }
        // One report per device, whichever of its ports comes first.
        let key = blocked_key(&pid.device);
        self.gate.reset(&key);
        self.alert_blocked(&pid.device, now);
        self.mark_dirty(format!("{pid}: the re-creation is still blocked"));
        false
    }

    /// The blocked step of `device`'s re-creation returned; `result` is the re-creation's
    /// final result (`None`: it ended while no daemon watched it, e.g. across a restart, so
    /// its result is unknown and the QP table decides). The ports resume where a
    /// re-creation's outcome takes them: verification.
    pub fn handle_recreation_returned(
        &mut self,
        device: &str,
        result: Option<RecreateResult>,
        now: Instant,
    ) {
        self.now = now;
        let Some(b) = self.devices.get_mut(device).and_then(|d| d.blocked.take()) else {
            self.stats.stale_outcomes += 1;
            self.finish();
            return;
        };
        let secs = now.since(b.since).as_secs();
        let how = match &result {
            None => "it ended while iser-guard was not watching; the QP table decides".into(),
            Some(RecreateResult::Recreated { name, .. }) => format!("the device is {name} again"),
            Some(RecreateResult::Blocked(next)) => {
                format!("but the next step `{}` is blocked now", next.step)
            }
            Some(RecreateResult::Failed { reason } | RecreateResult::Unsupported { reason }) => {
                format!("the re-creation failed: {reason}")
            }
        };
        let reason = format!(
            "the blocked step `{}` of the re-creation of {device} returned after {secs} s; {how}",
            b.step.step
        );
        let blocked_ports: Vec<PortId> = self
            .ports_of_device(device)
            .into_iter()
            .filter(|pid| self.phase(pid) == Some(Phase::RecreationBlocked))
            .collect();
        for pid in &blocked_ports {
            self.transition(pid, Stage::resetting_device(), reason.clone(), now);
        }
        self.gate.reset(&blocked_key(device));
        self.alert(
            now,
            AlertClass::Info,
            format!("unblocked:{device}"),
            format!("the re-creation of {device} is no longer blocked (after {secs} s)"),
            reason,
            None,
        );
        self.mark_dirty(format!("the re-creation of {device} returned"));
        match result {
            Some(RecreateResult::Blocked(step)) => self.on_recreate_blocked(device, step, now),
            Some(other) => self.on_recreate_done(device, other, now),
            None => {
                // As for a re-creation whose outcome was lost: verified through the QP table,
                // never repeated blindly.
                if let Some(r) = self
                    .devices
                    .get_mut(device)
                    .and_then(|d| d.recreation.as_mut())
                {
                    r.started = b.since;
                }
                self.on_recreate_silent(device, now);
            }
        }
        self.finish();
    }

    /// An operator command would re-create `device`: refused while its re-creation is
    /// blocked (a second writer would block behind the first).
    pub(crate) fn refuse_if_blocked(&self, device: &str) -> Result<(), CommandError> {
        match self.blocked_recreation(device) {
            Some(b) => Err(CommandError::RecreationBlocked {
                device: device.to_string(),
                step: b.step.step.clone(),
                secs: self.now.since(b.since).as_secs(),
            }),
            None => Ok(()),
        }
    }

    /// The device whose current re-creation is action `id`.
    pub(super) fn recreation_of(&self, id: crate::recovery::action::ActionId) -> Option<String> {
        self.devices
            .values()
            .find(|d| {
                d.recreation.as_ref().is_some_and(|r| {
                    r.id == id && r.state == crate::recovery::state::RecreationState::InFlight
                })
            })
            .map(|d| d.name.clone())
    }

    fn blocked_report_interval(&self) -> Duration {
        self.policy.alert_repeat_interval.max(MIN_REPORT_INTERVAL)
    }

    /// The port's reason while blocked.
    fn blocked_words(&self, device: &str, now: Instant) -> String {
        match self.blocked_recreation(device) {
            Some(b) => format!(
                "re-creation of {device} has been blocked in the kernel for {} s: `{}` has not \
                 returned ({}); nothing else is tried on {device} until it does",
                now.since(b.since).as_secs(),
                b.step.step,
                b.step.task
            ),
            None => format!("re-creation of {device} is blocked in the kernel"),
        }
    }

    /// The operator alert: what is blocked, for how long, where in the kernel, what it
    /// means and what frees it.
    fn alert_blocked(&mut self, device: &str, now: Instant) {
        let Some(b) = self.blocked_recreation(device).cloned() else {
            return;
        };
        let secs = now.since(b.since).as_secs();
        let frames: Vec<&str> = b
            .step
            .stack
            .iter()
            .take(STACK_FRAMES_NAMED)
            .map(String::as_str)
            .collect();
        let state = if b.step.uninterruptible {
            "no signal can end a task in uninterruptible sleep, only the kernel"
        } else {
            "the task is not in uninterruptible sleep: it may still return by itself"
        };
        let ports: Vec<String> = self
            .ports_of_device(device)
            .into_iter()
            .filter(|p| self.phase(p) == Some(Phase::RecreationBlocked))
            .map(|p| p.to_string())
            .collect();
        let detail = format!(
            "`{}` has not returned ({}); {state}. Kernel stack: {}. Removing an RDMA device \
             waits until every user lets go of it (ib_unregister_device waits for every RDMA \
             connection, QP and open verbs context on it), and a driver that cannot take a \
             user context away waits for that program to close it. iser-guard starts nothing \
             else on {device} meanwhile (a second writer would block behind the first); port(s) \
             {} are out of automatic recovery, and their verification resumes by itself as \
             soon as the step returns. Free the device: find who holds it (`rdma resource show \
             qp`, `rdma resource show cm_id`, `fuser -v /dev/infiniband/*`) and stop those \
             programs or log out their sessions (`iscsiadm -m session`); if it never returns, \
             only a reboot ends it.",
            b.step.step,
            b.step.task,
            if frames.is_empty() {
                "not available".to_string()
            } else {
                frames.join(" <- ")
            },
            if ports.is_empty() {
                "none".to_string()
            } else {
                ports.join(", ")
            },
        );
        self.alert(
            now,
            AlertClass::Critical,
            blocked_key(device),
            format!("re-creation of {device} has been blocked in the kernel for {secs} s"),
            detail,
            // Who holds the device; the detail names the other commands.
            Some("rdma resource show cm_id".to_string()),
        );
    }
}

fn blocked_key(device: &str) -> String {
    format!("blocked:{device}")
}
