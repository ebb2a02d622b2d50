//! The port self-test after a re-creation (a new RDMA connection made on the port, the
//! very thing a stuck QP 1 breaks) and the devices' asynchronous events, two witnesses next
//! to the kernel log and the QP table.
//!
//! The self-test is asked for once per attempt, as soon as a re-created device's fresh port
//! is seen (its new QP 1 in RTS, or no QP table to show it, and its link up) while the port
//! reconnects or verifies. A pass is a witness in the healthy verdict; a failure fails the
//! attempt (the device still needs a re-creation: back-off, then the next attempt, or
//! quarantine with the report's summary); an unavailable self-test never blocks (said
//! once, shown in status). docs/history/engine.md "Port self-test and async events".

use std::time::Duration;

use super::Engine;
use crate::recovery::action::{ActionId, ActionKind, AlertClass};
use crate::recovery::input::{PortId, StuckEvidence};
use crate::recovery::policy::SelfTestPolicy;
use crate::recovery::state::{
    AwaitTimer, Episode, InFlight, InFlightKind, Phase, SelfTestProgress, SelfTestRecord,
    SessionOp, Stage,
};
use crate::selftest::{AsyncEvent, AsyncEventKind, SelfTestResult};
use crate::time::Instant;

/// Beyond its own timeout, how long the engine waits for a self-test's outcome before it
/// counts as unavailable (the worker queue, a restart).
pub(super) const SELFTEST_MARGIN: Duration = Duration::from_secs(10);

impl Engine {
    /// The port's device was re-created in this episode, the policy wants a self-test, and
    /// none has answered for this attempt yet (running, passed or unavailable).
    fn selftest_due(&self, pid: &PortId) -> bool {
        self.policy.selftest == SelfTestPolicy::Auto
            && self
                .ports
                .get(pid)
                .and_then(|p| p.episode())
                .is_some_and(|e| e.was_recreated() && e.selftest.is_none())
    }

    /// Starts the self-test if it is due and the fresh port is seen: its new QP 1 in RTS (or
    /// no QP table to show it) and its link up. True if it started.
    pub(super) fn maybe_start_selftest(&mut self, pid: &PortId, now: Instant) -> bool {
        if !self.selftest_due(pid) || !self.fresh_qp_ok(pid) {
            return false;
        }
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        if !p.link_up {
            return false;
        }
        let origin = p.origin();
        let timeout = self.policy.selftest_timeout;
        let id = self.alloc_id();
        self.inflight.insert(
            id,
            InFlight {
                id,
                kind: InFlightKind::SelfTest(pid.clone()),
                deadline: now.plus(timeout + SELFTEST_MARGIN),
            },
        );
        if let Some(e) = self.episode_mut(pid) {
            e.selftest = Some(SelfTestProgress::Running(id));
        }
        self.mark_dirty(format!("{pid}: self-test started"));
        self.push_with_id(
            id,
            Some(pid.clone()),
            Some(pid.device.clone()),
            origin,
            format!(
                "{} was re-created and its fresh port is up: checking that {pid} can make a \
                 new RDMA connection (rdma_cm connect and a send on the port, whose CM MADs \
                 go through the new QP 1)",
                pid.device
            ),
            ActionKind::SelfTestPort {
                device: pid.device.clone(),
                port: pid.port,
                timeout,
            },
        );
        true
    }

    /// Nothing about the self-test keeps the port from being verified: it is off, the
    /// device was not re-created, or this attempt's self-test passed or was unavailable.
    pub(super) fn selftest_settled(&self, pid: &PortId) -> bool {
        if self.policy.selftest == SelfTestPolicy::Off {
            return true;
        }
        self.ports
            .get(pid)
            .and_then(|p| p.episode())
            .is_none_or(|e| {
                !e.was_recreated()
                    || matches!(
                        e.selftest,
                        Some(
                            SelfTestProgress::Passed { .. } | SelfTestProgress::Unavailable { .. }
                        )
                    )
            })
    }

    /// This attempt's self-test is in flight.
    pub(super) fn selftest_running(&self, pid: &PortId) -> bool {
        self.ports
            .get(pid)
            .and_then(|p| p.episode())
            .is_some_and(|e| matches!(e.selftest, Some(SelfTestProgress::Running(_))))
    }

    /// Words for the healthy verdict about this episode's self-test (empty without one).
    pub(super) fn selftest_verdict_words(&self, pid: &PortId) -> String {
        match self
            .ports
            .get(pid)
            .and_then(|p| p.episode())
            .and_then(|e| e.selftest.as_ref())
        {
            Some(SelfTestProgress::Passed { summary }) => {
                format!(" The port self-test made a new RDMA connection on it: {summary}.")
            }
            Some(SelfTestProgress::Unavailable { reason }) => {
                format!(" No port self-test ran ({reason}).")
            }
            _ => String::new(),
        }
    }

    /// Why the self-test keeps the port from being verified, for a failed verification.
    pub(super) fn selftest_missing_words(&self, pid: &PortId) -> String {
        let Some(p) = self.ports.get(pid) else {
            return String::new();
        };
        match p.episode().and_then(|e| e.selftest.as_ref()) {
            Some(SelfTestProgress::Running(_)) => "the port self-test has not answered".into(),
            _ if !p.link_up => "the port's link is down, so its self-test could not start".into(),
            _ => "the port self-test could not start (the fresh QP 1 was not seen)".into(),
        }
    }

    /// The outcome of self-test `id` of `pid` (or its silence: `Unavailable`).
    pub(super) fn on_selftest(
        &mut self,
        pid: &PortId,
        id: ActionId,
        result: SelfTestResult,
        now: Instant,
    ) {
        let record = SelfTestRecord::of(&result, now);
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        p.last_selftest = Some(record.clone());
        let current = p
            .episode()
            .is_some_and(|e| e.selftest == Some(SelfTestProgress::Running(id)));
        self.mark_dirty(format!("{pid}: {}", record.summary));
        if !current || self.policy.selftest == SelfTestPolicy::Off {
            // The port moved on (healthy, another attempt, the device gone), or a reload
            // turned self-tests off meanwhile: the result is recorded for status, and
            // decides nothing.
            return;
        }
        match result {
            SelfTestResult::Ran(report) if report.passed() => {
                if let Some(e) = self.episode_mut(pid) {
                    e.selftest = Some(SelfTestProgress::Passed {
                        summary: report.summary(),
                    });
                }
                self.evaluate(pid, now);
            }
            SelfTestResult::Ran(report) => self.selftest_failed(pid, report.summary(), now),
            SelfTestResult::Unavailable { reason } => {
                if let Some(e) = self.episode_mut(pid) {
                    e.selftest = Some(SelfTestProgress::Unavailable {
                        reason: reason.clone(),
                    });
                }
                if !self.selftest_unavailable_said {
                    self.selftest_unavailable_said = true;
                    self.alert(
                        now,
                        AlertClass::Info,
                        "selftest-unavailable".to_string(),
                        format!("{pid}: the port self-test is not available: {reason}"),
                        "recovery is verified on the QP table and the iSCSI sessions alone, as \
                         without a self-test; said once per daemon run (status shows each \
                         port's last self-test)"
                            .to_string(),
                        None,
                    );
                }
                self.evaluate(pid, now);
            }
        }
    }

    /// The self-test failed after a re-creation: the port cannot make a new RDMA connection
    /// although its device came back with QP 1 in RTS. The attempt failed and the device
    /// still needs re-creating: back off (and wait for the target again), or quarantine
    /// with the report's summary once attempts are exhausted.
    pub(super) fn selftest_failed(&mut self, pid: &PortId, summary: String, now: Instant) {
        let most = self.policy.max_attempts.max(1);
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let attempts = match p.episode_mut() {
            Some(e) => {
                e.needs_recreate = true;
                e.attempt_recreated = false;
                e.selftest = None;
                e.target_back_at = None;
                e.attempts = e.attempts.max(1).min(most);
                e.attempts
            }
            None => return,
        };
        for k in p.sessions.clone() {
            if let Some(s) = self.sessions.get_mut(&k) {
                if matches!(s.op, Some(SessionOp::Failed(_) | SessionOp::Done)) {
                    s.op = None;
                }
            }
        }
        let reason = format!(
            "{summary}: {pid} cannot make a new RDMA connection although {} was re-created \
             and its QP 1 is in RTS, so the device still needs a re-creation",
            pid.device
        );
        if attempts >= self.policy.max_attempts {
            self.quarantine(
                pid,
                format!("{reason}; {attempts} attempt(s) exhausted"),
                now,
            );
            return;
        }
        let j = self.jitter();
        let backoff = self.policy.backoff(attempts, j);
        let msg = format!("{reason}; next attempt in {}s", backoff.as_secs());
        self.transition(
            pid,
            Stage::AwaitingTarget {
                deadline: Some(now.plus(self.policy.target_wait_max)),
                timer: Some((AwaitTimer::Backoff, now.plus(backoff))),
            },
            msg.clone(),
            now,
        );
        // The target must answer again after the back-off before the next re-creation.
        if let Some(e) = self.episode_mut(pid) {
            e.probes_count_from = Some(now.plus(backoff));
        }
        self.alert(
            now,
            AlertClass::Error,
            format!("failed:{pid}:{attempts}"),
            format!("{pid}: attempt {attempts} failed: the port self-test failed"),
            msg,
            None,
        );
    }

    /// An event from a device's asynchronous event channel. It comes from the kernel
    /// through uverbs, so it is trusted like RDMA netlink (the caller says `Trusted`).
    pub(super) fn on_async_event(&mut self, ev: AsyncEvent, now: Instant) {
        let watched =
            self.devices.contains_key(&ev.device) || !self.ports_of_device(&ev.device).is_empty();
        if !watched {
            return;
        }
        let pid = ev.port.map(|n| PortId::new(ev.device.clone(), n));
        match ev.kind {
            AsyncEventKind::DeviceFatal => {
                // uverbs also sends DEVICE_FATAL to every open context of a device being
                // unregistered (ib_uverbs_free_hw_resources): during our own re-creation
                // it is the old device going, not news.
                if self.recreating.as_deref() == Some(ev.device.as_str())
                    || self.devices.get(&ev.device).is_some_and(|d| !d.present)
                {
                    return;
                }
                self.on_gsi_stuck(&ev.device, None, StuckEvidence::AsyncDeviceFatal, now);
            }
            AsyncEventKind::PortErr => {
                let went_down = pid
                    .as_ref()
                    .and_then(|pid| self.ports.get_mut(pid))
                    .is_some_and(|p| std::mem::replace(&mut p.link_up, false));
                if went_down {
                    self.mark_dirty(format!("{ev}"));
                }
            }
            AsyncEventKind::PortActive => {
                let Some(pid) = pid else {
                    return;
                };
                let Some(p) = self.ports.get_mut(&pid) else {
                    return;
                };
                let came_up = !p.link_up;
                p.link_up = true;
                let awaiting = p.episode().is_some_and(Episode::awaiting_fresh_qp);
                let phase = p.phase();
                if came_up {
                    self.mark_dirty(format!("{ev}"));
                }
                if awaiting {
                    // A re-created port came up: look for its fresh QP 1 now rather than
                    // at the next poll.
                    self.request_topology(now);
                }
                if matches!(phase, Phase::Reconnecting | Phase::Verifying) {
                    self.evaluate(&pid, now);
                }
            }
            // A RoCE GID follows the netdev's addresses: the placement of sessions and the
            // port's netdev may have changed.
            AsyncEventKind::GidChange => self.request_topology(now),
            // QP, CQ, SRQ and WQ events belong to the verbs consumer whose objects they name
            // (the self-test's own QPs); the IB fabric events (LID, P_Key, SM, client
            // reregister) do not concern RoCE's iSER path. Kept in `events` by the daemon.
            _ => {}
        }
    }
}
