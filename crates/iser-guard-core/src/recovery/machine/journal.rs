//! Resuming from the journal and deciding when to write it: the snapshot, the
//! write-ahead `PersistState` before destructive actions, and the skip of unchanged writes.

use std::collections::BTreeSet;

use super::reset::VERIFY_RECREATE_WINDOW;
use super::{Engine, ResumeError};
use crate::recovery::action::{ActionId, ActionKind, AlertClass, Origin};
use crate::recovery::policy::Policy;
use crate::recovery::state::{
    EngineSnapshot, InFlight, InFlightKind, PortRecord, RecreationState, Stage,
};
use crate::time::Instant;

/// How often a run of probe rounds for an absent target is journaled at most
/// (`Engine::mark_dirty_probe_round`).
pub(super) const PROBE_ROUND_JOURNAL: std::time::Duration = std::time::Duration::from_secs(5);

/// Ids skipped on resume (see [`Engine::resume`]).
pub(super) const RESUME_ID_GAP: u64 = 1 << 20;

impl Engine {
    /// Resumes from a journal snapshot. A re-creation that was in flight is verified through
    /// the QP table (a [`ActionKind::RefreshTopology`] is queued), never blindly repeated.
    pub fn resume(
        snapshot: EngineSnapshot,
        policy: Policy,
        now: Instant,
    ) -> Result<Self, ResumeError> {
        if snapshot.version != EngineSnapshot::VERSION {
            return Err(ResumeError::Version {
                found: snapshot.version,
                expected: EngineSnapshot::VERSION,
            });
        }
        let mut e = Engine::new(policy, snapshot.rng);
        e.now = now;
        // Ids handed out after the last write (alerts, probes whose journal write was skipped)
        // are skipped so an id is never reused for a different action.
        e.next_id = snapshot.next_id.max(1).saturating_add(RESUME_ID_GAP);
        e.paused = snapshot.paused;
        e.kernel_bugs = snapshot.kernel_bugs;
        e.recreating = snapshot.recreating;
        e.ports = snapshot
            .ports
            .into_iter()
            .map(|p| (p.id.clone(), p))
            .collect();
        e.sessions = snapshot
            .sessions
            .into_iter()
            .map(|s| (s.key.clone(), s))
            .collect();
        e.devices = snapshot
            .devices
            .into_iter()
            .map(|d| (d.name.clone(), d))
            .collect();
        e.portals = snapshot
            .portals
            .into_iter()
            .map(|p| (p.portal.clone(), p))
            .collect();
        e.inflight = snapshot.inflight.into_iter().map(|i| (i.id, i)).collect();
        e.rebuild_indexes();
        // A probe whose deadline passed died with the old process: it gives no result (and
        // an unchanged journal need not have recorded that it timed out).
        e.inflight
            .retain(|_, i| !(matches!(i.kind, InFlightKind::Probe(_)) && i.deadline <= now));
        // An operator logout/login of a session on no RDMA port died with the process that
        // ran it (its child was killed at shutdown): no outcome will come, and timing it out
        // later would report a failure of a command that is over (the lab: "the logout
        // failed: Timeout" 40 s into the next command). Said once, and dropped.
        let interrupted: Vec<InFlight> = e
            .inflight
            .values()
            .filter(|i| {
                matches!(
                    i.kind,
                    InFlightKind::OperatorLogout(_) | InFlightKind::OperatorLogin(_)
                )
            })
            .cloned()
            .collect();
        for i in interrupted {
            e.inflight.remove(&i.id);
            let (what, node) = match &i.kind {
                InFlightKind::OperatorLogout(n) => ("logout", n),
                InFlightKind::OperatorLogin(n) => ("login", n),
                _ => continue,
            };
            e.alert(
                now,
                AlertClass::Warning,
                format!("reconnect:{}", node.key),
                format!("an operator reconnect of {} was interrupted", node.key),
                format!(
                    "its iscsiadm --{what} was still running when the last iser-guard process                      stopped; the session may be logged out"
                ),
                Some(format!(
                    "iscsiadm -m session; if it is missing: iscsiadm -m node -T {} -p {} -I {} \
                     --login",
                    node.key.target, node.key.portal, node.key.iface
                )),
            );
        }
        let live: BTreeSet<ActionId> = e.inflight.keys().copied().collect();
        for r in e.portals.values_mut() {
            if r.inflight.is_some_and(|id| !live.contains(&id)) {
                r.inflight = None;
                r.inflight_started = None;
            }
        }
        e.journaled = Some(e.journal_view());
        let mut verify = false;
        let in_flight_devices: Vec<String> = e
            .devices
            .values()
            .filter(|d| {
                d.recreation
                    .as_ref()
                    .is_some_and(|r| r.state == RecreationState::InFlight)
            })
            .map(|d| d.name.clone())
            .collect();
        for dev in in_flight_devices {
            for pid in e.ports_of_device(&dev) {
                if let Some(Stage::ResettingDevice { verify_until }) =
                    e.ports.get_mut(&pid).and_then(PortRecord::stage_mut)
                {
                    *verify_until = Some(now.plus(VERIFY_RECREATE_WINDOW));
                    verify = true;
                }
            }
        }
        if verify {
            e.push(None, None, Origin::Automatic, "resumed from the journal with a device re-creation in flight: checking the QP table instead of repeating it".into(), ActionKind::RefreshTopology);
        }
        Ok(e)
    }

    /// The journal snapshot of the current state.
    ///
    pub fn snapshot(&self) -> EngineSnapshot {
        EngineSnapshot {
            version: EngineSnapshot::VERSION,
            taken_at: self.now,
            next_id: self.next_id,
            rng: self.rng,
            paused: self.paused,
            recreating: self.recreating.clone(),
            ports: self.ports.values().cloned().collect(),
            sessions: self.sessions.values().cloned().collect(),
            devices: self.devices.values().cloned().collect(),
            portals: self.portals.values().cloned().collect(),
            inflight: self.inflight.values().cloned().collect(),
            kernel_bugs: self.kernel_bugs.clone(),
        }
    }

    /// The snapshot without the clock and the storm counters: two equal ones need no journal
    /// write in between (a kernel line repeated on a faulted port, or a QP table poll showing
    /// the same ERR, changes nothing worth a write).
    pub(super) fn journal_view(&self) -> EngineSnapshot {
        let mut s = self.snapshot();
        s.taken_at = Instant::ZERO;
        for e in s.ports.iter_mut().filter_map(PortRecord::episode_mut) {
            e.evidence = 0;
        }
        s
    }

    /// Whether [`Engine::journal_view`] would equal what the last write held, without
    /// building it: field by field, each port compared with its storm counter set aside.
    fn journal_unchanged(&mut self) -> bool {
        let Some(j) = &self.journaled else {
            return false;
        };
        // Exhaustive on purpose: a field added to the snapshot must be compared here too.
        let EngineSnapshot {
            version: _,
            taken_at: _,
            next_id,
            rng,
            paused,
            recreating,
            ports,
            sessions,
            devices,
            portals,
            inflight,
            kernel_bugs,
        } = j;
        if *next_id != self.next_id
            || *rng != self.rng
            || *paused != self.paused
            || *recreating != self.recreating
            || *kernel_bugs != self.kernel_bugs
            || ports.len() != self.ports.len()
            || !self.sessions.values().eq(sessions.iter())
            || !self.devices.values().eq(devices.iter())
            || !self.portals.values().eq(portals.iter())
            || !self.inflight.values().eq(inflight.iter())
        {
            return false;
        }
        self.ports.values_mut().zip(ports).all(|(p, q)| {
            // journal_view zeroes the counter; set it aside for the comparison.
            let evidence = p.episode_mut().map(|e| std::mem::take(&mut e.evidence));
            let same = *p == *q;
            if let (Some(e), Some(n)) = (p.episode_mut(), evidence) {
                e.evidence = n;
            }
            same
        })
    }

    /// A probe round started (its timer and the probes in flight changed): journaled at most
    /// every [`PROBE_ROUND_JOURNAL`]. With rounds every 0.5 s, journaling each one meant two
    /// fsynced writes a second for as long as a target is away; what a restart loses instead
    /// is at most one round's answer, which the next round (0.5 s later) gives again. An
    /// outcome that changes a portal's run of successes is journaled as it comes.
    pub(super) fn mark_dirty_probe_round(&mut self, reason: String, now: Instant) {
        if self
            .last_probe_round_journal
            .is_some_and(|t| now.since(t) < PROBE_ROUND_JOURNAL)
        {
            return;
        }
        self.last_probe_round_journal = Some(now);
        self.mark_dirty(reason);
    }

    pub(super) fn mark_dirty(&mut self, reason: String) {
        if self.dirty.is_none() {
            self.dirty = Some(reason);
        }
    }

    /// Queues a journal write now (write-ahead before a destructive action).
    pub(super) fn persist(&mut self, reason: String) {
        self.dirty = None;
        self.journaled = Some(self.journal_view());
        self.push(
            None,
            None,
            Origin::Automatic,
            reason.clone(),
            ActionKind::PersistState { reason },
        );
    }

    /// End of an input: journal what changed.
    pub(super) fn finish(&mut self) {
        if let Some(reason) = self.dirty.take() {
            // Journal only what changed since the last write (the daemon and the simulator
            // poll every few seconds; rewriting an unchanged journal helps nobody).
            // Compared in place: copying the whole state per input to compare it made every
            // input cost the size of the state (issue 12's storm: about 100 records/s).
            let unchanged = self.journal_unchanged();
            debug_assert_eq!(
                unchanged,
                self.journaled.as_ref() == Some(&self.journal_view()),
                "journal_unchanged disagrees with journal_view"
            );
            if unchanged {
                return;
            }
            self.journaled = Some(self.journal_view());
            self.push(
                None,
                None,
                Origin::Automatic,
                reason.clone(),
                ActionKind::PersistState { reason },
            );
        }
    }
}
