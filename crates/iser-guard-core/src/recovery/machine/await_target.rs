//! Stage `AwaitingTarget`: probing the portals with the target-back hysteresis, the
//! wait's bound, and a target that answers TCP but takes no iSER login (dead listener).

use std::time::Duration;

use super::Engine;
use crate::recovery::action::{ActionId, ActionKind, AlertClass, Origin};
use crate::recovery::input::{PortId, Portal, ProbeResult};
use crate::recovery::policy::{ProbeMethod, ResetWhen};
use crate::recovery::state::{
    AwaitTimer, Hold, InFlight, InFlightKind, Phase, PortRecord, PortalRecord, Stage,
};
use crate::time::Instant;

/// How long without a `REJECTED` before a dead listener counts as probably back: several of
/// iscsid's retries (every 3-4 s: open-iscsi's 3 s reopen delay plus the attempt), whatever
/// the probe cadence; never less than 3 probe rounds.
const LISTENER_QUIET: Duration = Duration::from_secs(15);

impl Engine {
    /// AwaitingTarget: healthy again by itself, a dead listener, no portal to probe, the
    /// target back (re-create or reconnect), or the wait given up.
    pub(super) fn step_awaiting_target(&mut self, pid: &PortId, now: Instant) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let (needs_recreate, listener_gone) = p
            .episode()
            .map_or((false, false), |e| (e.needs_recreate, e.listener_gone));
        if !needs_recreate && self.all_healthy(pid) {
            self.become_healthy(
                pid,
                "every session is logged in again: iscsid reconnected by itself, no action was \
                 needed"
                    .into(),
                now,
            );
            return true;
        }
        if listener_gone && !needs_recreate {
            // Only the target side can fix a dead listener; iscsid keeps retrying.
            // Once no rejection came for a while, the listener is probably back.
            // While iscsid still holds a failed session it keeps retrying it; the port
            // stays here (no churn) until the sessions come back.
            let quiet = self
                .policy
                .probe_interval
                .saturating_mul(3)
                .max(LISTENER_QUIET);
            let rejected = p.listener_rejected_at.is_some_and(|t| now.since(t) < quiet);
            let retrying = p
                .sessions
                .iter()
                .filter_map(|k| self.sessions.get(k))
                .any(|s| s.present && !s.is_up());
            if rejected || retrying {
                if let Some(stage) = self.stage_mut(pid) {
                    stage.set_deadline(None);
                }
                return false;
            }
            if let Some(e) = self.episode_mut(pid) {
                e.listener_gone = false;
            }
            self.mark_dirty(format!("{pid}: no more rejections from the target"));
        }
        let automatic = self
            .ports
            .get(pid)
            .is_some_and(|p| p.origin() == Origin::Automatic);
        if !self.no_wait(pid) && automatic && self.down_portals_of(pid).is_empty() {
            let Some(p) = self.ports.get(pid) else {
                return false;
            };
            if p.needs_recreate() && p.hold != Some(Hold::NoPortalKnown) {
                let why = p.reason.clone();
                let what = format!("re-create RDMA device {}", pid.device);
                self.set_hold(pid, Hold::NoPortalKnown, &what, &why, now);
            }
            return false;
        }
        if self.target_back(pid) {
            if let Some(p) = self.ports.get_mut(pid) {
                if let Some(stage) = p.stage_mut() {
                    stage.set_deadline(None);
                }
                if let Some(e) = p.episode_mut() {
                    if e.target_back_at.is_none() {
                        e.target_back_at = Some(now);
                    }
                }
            }
            if self.ports.get(pid).is_some_and(PortRecord::needs_recreate) {
                return self.try_recreate(pid, now);
            }
            let grace = self.policy.iscsid_grace.as_secs();
            self.start_reconnect(
                pid,
                true,
                format!(
                    "target answers again ({} consecutive probes); giving iscsid {grace}s to \
                     reconnect by itself",
                    self.policy.probe_successes
                ),
                now,
            );
            return true;
        }
        if self
            .ports
            .get(pid)
            .is_some_and(|p| p.deadline().is_some_and(|d| d <= now))
        {
            let waited = self.policy.target_wait_max.as_secs();
            self.quarantine(
                pid,
                format!(
                    "the target did not answer for {waited}s; automatic recovery gives up waiting"
                ),
                now,
            );
            return true;
        }
        false
    }

    pub(super) fn enter_awaiting_target(&mut self, pid: &PortId, now: Instant) {
        let max = self.policy.target_wait_max;
        if let Some(p) = self.ports.get_mut(pid) {
            if let Some(stage) = p.stage_mut() {
                stage.set_deadline(Some(now.plus(max)));
            }
            if let Some(e) = p.episode_mut() {
                e.target_back_at = None;
                e.probes_count_from = Some(now);
            }
        }
        if !self.no_wait(pid) {
            self.start_probes(pid, now);
        }
    }

    pub(super) fn no_wait(&self, pid: &PortId) -> bool {
        self.policy.reset_when == ResetWhen::Immediately
            || self.policy.probe_method == ProbeMethod::None
            || self
                .ports
                .get(pid)
                .and_then(PortRecord::episode)
                .is_some_and(|e| e.skip_target_wait)
    }

    pub(super) fn target_back(&self, pid: &PortId) -> bool {
        if self.no_wait(pid) {
            return true;
        }
        // Every portal with a session to restore must answer: re-creating the device while
        // one of them is still dead would only get QP 1 stuck again on the next CM retry.
        // Only probes started since the wait began count (a success from an earlier episode
        // says nothing about the target now), N in a row, the newest result winning.
        let portals = self.down_portals_of(pid);
        if portals.is_empty() {
            // Nothing to probe: an operator's word goes; automatic recovery holds
            // (`Hold::NoPortalKnown`).
            return self
                .ports
                .get(pid)
                .is_some_and(|p| p.origin() == Origin::Operator);
        }
        let from = self
            .ports
            .get(pid)
            .and_then(PortRecord::episode)
            .map_or(Instant::ZERO, |e| e.probes_count_from.unwrap_or(e.since));
        let n = self.policy.probe_successes.max(1);
        portals.iter().all(|pt| {
            self.portals
                .get(pt)
                .is_some_and(|r| r.successes_since(from) >= n)
        })
    }

    /// Portals of the sessions and NVMe over RDMA controllers of this port that are not up
    /// (all portals if none is down).
    pub(super) fn down_portals_of(&self, pid: &PortId) -> Vec<Portal> {
        let Some(p) = self.ports.get(pid) else {
            return Vec::new();
        };
        let mut v: Vec<Portal> = p
            .sessions
            .iter()
            .filter_map(|k| self.sessions.get(k))
            .filter(|s| !s.is_up())
            .map(|s| s.key.portal.clone())
            .collect();
        v.extend(
            self.nvme_portals_of(pid)
                .into_iter()
                .filter(|(_, live)| !live)
                .map(|(p, _)| p),
        );
        if v.is_empty() {
            return self.portals_of(pid);
        }
        v.sort();
        v.dedup();
        v
    }

    pub(super) fn start_probes(&mut self, pid: &PortId, now: Instant) {
        let timeout = self.policy.probe_timeout;
        for portal in self.down_portals_of(pid) {
            let rec = self
                .portals
                .entry(portal.clone())
                .or_insert_with(|| PortalRecord::new(portal.clone()));
            if rec.inflight.is_some() {
                continue;
            }
            let id = self.alloc_id();
            if let Some(rec) = self.portals.get_mut(&portal) {
                rec.inflight = Some(id);
                rec.inflight_started = Some(now);
            }
            self.inflight.insert(
                id,
                InFlight {
                    id,
                    kind: InFlightKind::Probe(portal.clone()),
                    deadline: now.plus(timeout + Duration::from_secs(1)),
                },
            );
            self.push_with_id(
                id,
                Some(pid.clone()),
                None,
                Origin::Automatic,
                format!("is the target at {portal} back?"),
                ActionKind::ProbePortal {
                    portal: portal.clone(),
                    timeout,
                },
            );
        }
        let interval = self.policy.probe_interval;
        if let Some(Stage::AwaitingTarget { timer, .. }) = self.stage_mut(pid) {
            *timer = Some((AwaitTimer::ProbeRound, now.plus(interval)));
        }
        // Timers and probes in flight are journaled too (a restart must not replay them), at
        // most every few seconds while the rounds go on.
        self.mark_dirty_probe_round(format!("{pid}: probing"), now);
    }

    pub(super) fn on_probe(
        &mut self,
        portal: &Portal,
        id: ActionId,
        result: ProbeResult,
        now: Instant,
    ) {
        let Some(r) = self.portals.get_mut(portal) else {
            return;
        };
        if r.inflight != Some(id) {
            // Not the probe this record waits for (superseded): its result is not the newest.
            self.stats.stale_outcomes += 1;
            return;
        }
        let started = r.inflight_started.unwrap_or(now);
        r.inflight = None;
        r.inflight_started = None;
        if r.newest_started.is_some_and(|t| t > started) {
            self.stats.stale_outcomes += 1;
            return; // A newer probe already answered: the newest result wins.
        }
        r.newest_started = Some(started);
        let before = (r.consecutive_ok, r.ok_started.len());
        if result == ProbeResult::Reachable {
            r.consecutive_ok = r.consecutive_ok.saturating_add(1);
            r.ok_started.push(started);
            if r.ok_started.len() > PortalRecord::MAX_OK_KEPT {
                r.ok_started.remove(0);
            }
        } else {
            r.consecutive_ok = 0;
            r.ok_started.clear();
        }
        if before != (r.consecutive_ok, r.ok_started.len()) {
            self.mark_dirty(format!("probe of {portal}: {result:?}"));
        }
        let users: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| !matches!(p.phase(), Phase::Healthy | Phase::Quarantined))
            .filter(|p| {
                p.sessions.iter().any(|k| {
                    self.sessions
                        .get(k)
                        .is_some_and(|s| &s.key.portal == portal)
                })
            })
            .map(|p| p.id.clone())
            .collect();
        for pid in users {
            self.evaluate(&pid, now);
        }
    }

    /// Portals of this port's down sessions whose latest probe (in this episode) answered.
    pub(super) fn answering_portals(&self, pid: &PortId) -> Vec<Portal> {
        let Some(p) = self.ports.get(pid) else {
            return Vec::new();
        };
        let from = p.episode().map_or(Instant::ZERO, |e| e.since);
        self.down_portals_of(pid)
            .into_iter()
            .filter(|pt| {
                self.portals
                    .get(pt)
                    .is_some_and(|r| r.consecutive_ok > 0 && r.successes_since(from) > 0)
            })
            .collect()
    }

    pub(super) fn on_cm_rejected(&mut self, now: Instant) {
        let candidates: Vec<PortId> = self
            .ports
            .values()
            .filter(|p| {
                !p.needs_recreate()
                    && matches!(
                        p.phase(),
                        Phase::AwaitingTarget | Phase::Reconnecting | Phase::Verifying
                    )
            })
            .map(|p| p.id.clone())
            .collect();
        let mut marked = false;
        for pid in candidates {
            let reachable: Vec<Portal> = self
                .portals_of(&pid)
                .into_iter()
                .filter(|pt| self.portals.get(pt).is_some_and(|r| r.consecutive_ok > 0))
                .collect();
            if reachable.is_empty() {
                continue;
            }
            marked = true;
            let newly = self.ports.get_mut(&pid).is_some_and(|p| {
                p.listener_rejected_at = Some(now);
                p.episode_mut()
                    .is_some_and(|e| !std::mem::replace(&mut e.listener_gone, true))
            });
            if newly && self.phase(&pid) != Some(Phase::AwaitingTarget) {
                self.transition(
                    &pid,
                    Stage::awaiting_target(),
                    "the target rejects iSER connections (invalid service ID): waiting for the \
                     target side to be fixed, probing meanwhile"
                        .into(),
                    now,
                );
                self.enter_awaiting_target(&pid, now);
            }
            if newly {
                self.mark_dirty(format!("{pid}: target listener gone"));
                let targets = self.targets_of(&pid);
                let portals = reachable.iter().map(|p| p.to_string()).collect::<Vec<_>>();
                let on_target = format!(
                    "On the target, re-enable iSER on the portal, e.g. with LIO: \
                     echo 0 > /sys/kernel/config/target/iscsi/{t}/tpgt_1/np/{p}/iser, then \
                     echo 1 to the same file",
                    t = targets
                        .first()
                        .cloned()
                        .unwrap_or_else(|| "TARGET_IQN".into()),
                    p = portals.first().cloned().unwrap_or_else(|| "PORTAL".into()),
                );
                self.mark_reported(&pid);
                self.alert(
                    now,
                    AlertClass::Error,
                    format!("listener:{pid}"),
                    format!(
                        "target portal {} answers but its iSER listener is gone",
                        portals.join(", ")
                    ),
                    format!(
                        "the portal accepts TCP connections but rejects RDMA CM connections \
                         with 'invalid service ID': the target's iSER listener died (for \
                         example its RDMA device was re-created). Nothing on this host can fix \
                         it, so iser-guard will not re-create {}; it keeps probing and iscsid \
                         keeps retrying. Sessions waiting: {}. {on_target}",
                        pid.device,
                        self.down_sessions_text(&pid)
                    ),
                    None,
                );
            }
        }
        if !marked {
            self.alert_coalesced(
                now,
                AlertClass::Warning,
                "cm-rejected".to_string(),
                "a target rejected an RDMA CM connection: invalid service ID".to_string(),
                "nothing listens on the iSER service at the target; if its portal answers TCP, \
                 its iSER listener is gone"
                    .to_string(),
                None,
            );
        }
    }

    /// The target answers TCP but does not accept iSER logins (its listener died, e.g. its
    /// RDMA device was re-created). Recognised from login outcomes and session states, so it
    /// works without the `RDMA CM: REJECTED` line (pr_debug on 6.1). Nothing local can fix
    /// it: no re-creation, no logout; one target-side alert; the port waits in
    /// AwaitingTarget (probing) until iscsid brings the sessions back.
    pub(super) fn target_refuses_logins(
        &mut self,
        pid: &PortId,
        evidence: String,
        now: Instant,
    ) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        if p.episode().is_some_and(|e| e.listener_gone) {
            return false;
        }
        let targets = self.targets_of(pid);
        let portals = self.answering_portals(pid);
        self.transition(
            pid,
            Stage::awaiting_target(),
            format!(
                "{evidence}: the target does not accept iSER logins; only the target side can \
                 fix that, so nothing is re-created or logged out (iscsid keeps retrying)"
            ),
            now,
        );
        if let Some(e) = self.episode_mut(pid) {
            e.listener_gone = true;
        }
        self.enter_awaiting_target(pid, now);
        let portal_list = portals
            .iter()
            .map(|p| p.to_string())
            .collect::<Vec<_>>()
            .join(", ");
        let on_target = format!(
            "On the target, re-enable iSER on the portal, e.g. with LIO: \
             echo 0 > /sys/kernel/config/target/iscsi/{t}/tpgt_1/np/{p}/iser, then echo 1 to \
             the same file",
            t = targets
                .first()
                .cloned()
                .unwrap_or_else(|| "TARGET_IQN".into()),
            p = portals
                .first()
                .map(|p| p.to_string())
                .unwrap_or_else(|| "PORTAL".into()),
        );
        self.mark_reported(pid);
        let down = self.down_sessions_text(pid);
        self.alert(
            now,
            AlertClass::Error,
            format!("listener:{pid}"),
            format!("target portal {portal_list} answers TCP but does not accept iSER logins"),
            format!(
                "{evidence}. The target's iSER listener is probably gone (for example its RDMA \
                 device was re-created). iser-guard will not re-create {} or log sessions out; \
                 it keeps probing and iscsid keeps retrying. Sessions waiting: {down}. \
                 {on_target}",
                pid.device
            ),
            None,
        );
        true
    }
}
