//! Stage `Verifying` and the way back to `Healthy`: every remembered session logged in with
//! running disks, a re-created device's fresh QP 1 seen, and the "storage is back" alert.

use super::Engine;
use crate::recovery::action::AlertClass;
use crate::recovery::input::PortId;
use crate::recovery::state::{Episode, SessionRecord, Stage};
use crate::time::Instant;

impl Engine {
    /// Verifying: every session back (healthy), or the deadline judged on a fresh list.
    pub(super) fn step_verifying(&mut self, pid: &PortId, now: Instant) -> bool {
        // Starting it changes no stage: the verdict below waits for its answer.
        self.maybe_start_selftest(pid, now);
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let fresh = self.last_sessions_at.is_some_and(|t| t >= p.since);
        if fresh && self.verified(pid) {
            self.become_healthy(
                pid,
                "every session is logged in with its disks running".into(),
                now,
            );
            return true;
        }
        let Some(Stage::Verifying {
            deadline,
            list_asked_at,
        }) = p.stage()
        else {
            return false;
        };
        if deadline.is_some_and(|d| d <= now) {
            // Judge on a session list taken at the deadline, never on an older one
            // (the session may be back under a new SID already).
            let asked = list_asked_at.unwrap_or(now);
            if self.last_sessions_at.is_none_or(|t| t < asked) {
                let wait = self.policy.session_refresh;
                if let Some(Stage::Verifying {
                    deadline,
                    list_asked_at,
                }) = self.stage_mut(pid)
                {
                    *list_asked_at = Some(asked);
                    *deadline = Some(now.plus(wait));
                }
                self.request_sessions(now, true);
                return false;
            }
            let secs = self.policy.verify_timeout.as_secs();
            // Name what is missing: the sessions still down, or (all of them up)
            // the re-created device's fresh QP 1 never seen in RTS.
            let why = if !self.all_healthy(pid) {
                format!(
                    "sessions not back within {secs}s after the reconnect: {}",
                    self.down_sessions_text(pid)
                )
            } else if !self.fresh_qp_ok(pid) {
                format!(
                    "every session is logged in, but the QP table did not show {pid}'s new GSI \
                     QP 1 in RTS within {secs}s after the re-creation"
                )
            } else if !self.selftest_settled(pid) {
                format!(
                    "every session is logged in and the new QP 1 is in RTS, but {} within \
                     {secs}s after the reconnect",
                    self.selftest_missing_words(pid)
                )
            } else {
                format!("{pid} has no session, and its device was not re-created")
            };
            self.after_failed_attempt(pid, why, now);
            return true;
        }
        false
    }

    /// The port's recovery is verified: its sessions are healthy (or, for a port without
    /// any session, its device was re-created) and a re-created device's new QP 1 is in RTS.
    pub(super) fn verified(&self, pid: &PortId) -> bool {
        let Some(p) = self.ports.get(pid) else {
            return false;
        };
        let sessions_ok = if p.sessions.is_empty() {
            p.episode().is_some_and(Episode::was_recreated)
        } else {
            self.all_healthy(pid)
        };
        sessions_ok && self.fresh_qp_ok(pid) && self.selftest_settled(pid)
    }

    /// At least one session, and every remembered session (by target + portal + iface,
    /// whatever its SID now) LOGGED_IN with its disks running.
    pub(super) fn all_healthy(&self, pid: &PortId) -> bool {
        self.ports.get(pid).is_some_and(|p| {
            !p.sessions.is_empty()
                && p.sessions
                    .iter()
                    .all(|k| self.sessions.get(k).is_some_and(SessionRecord::is_healthy))
        })
    }

    /// The new QP 1 of a re-created device was seen in RTS, or cannot be (no QP table).
    pub(super) fn fresh_qp_ok(&self, pid: &PortId) -> bool {
        self.ports.get(pid).is_some_and(|p| {
            !p.episode().is_some_and(Episode::awaiting_fresh_qp) || self.qp_table == Some(false)
        })
    }

    pub(super) fn become_healthy(&mut self, pid: &PortId, reason: String, now: Instant) {
        let Some(p) = self.ports.get(pid) else {
            return;
        };
        let ep = p.episode();
        let since = ep.map(|e| e.since);
        let evidence = ep.map_or(0, |e| e.evidence);
        let recreated = ep.is_some_and(Episode::was_recreated);
        let unverified_qp = ep.is_some_and(Episode::awaiting_fresh_qp);
        let attempts = ep.map_or(0, |e| e.attempts);
        let n = self
            .ports
            .get(pid)
            .map(|p| {
                p.sessions
                    .iter()
                    .filter_map(|k| self.sessions.get(k))
                    .filter(|s| s.is_healthy())
                    .count()
            })
            .unwrap_or(0);
        let qp = if !recreated {
            String::new()
        } else if unverified_qp {
            " The device's new QP 1 was not verified: the RDMA netlink QP table is not \
             available on this host."
                .to_string()
        } else {
            " The device's new GSI QP 1 was seen in RTS in the QP table.".to_string()
        };
        let selftest = self.selftest_verdict_words(pid);
        let origin = self
            .ports
            .get(pid)
            .map_or(crate::recovery::action::Origin::Automatic, |p| p.origin());
        self.transition_healthy(pid, reason.clone(), now);
        if recreated {
            self.ask_multipath_reinstate(&pid.device, origin);
        }
        let keys = self
            .ports
            .get(pid)
            .map(|p| p.sessions.clone())
            .unwrap_or_default();
        for k in keys {
            if let Some(s) = self.sessions.get_mut(&k) {
                s.op = None;
                s.reported = false;
                s.io_errors.clear();
            }
        }
        for prefix in ["fault:", "hold:", "listener:", "quarantine:", "failed:"] {
            self.gate.reset(&format!("{prefix}{pid}"));
        }
        let down_for = since.map(|s| now.since(s).as_secs()).unwrap_or(0);
        let how = if recreated {
            format!("the device was re-created ({attempts} attempt(s))")
        } else {
            "no device re-creation was needed".to_string()
        };
        let summary = if n == 0 {
            format!("{pid}: recovered; no iSCSI session is known on this port to verify")
        } else {
            format!("{pid}: storage is back ({n} session(s) logged in)")
        };
        self.alert(
            now,
            AlertClass::Info,
            format!("healthy:{pid}:{}", now.as_millis()),
            summary,
            format!(
                "{reason}. Down for {down_for}s; {how}; the fault was reported {evidence} \
                 time(s).{qp}{selftest}"
            ),
            None,
        );
    }
}
