//! Moving a port between states: a stage's data replaces the last stage's, an episode opens
//! when a healthy port leaves health and ends when it is healthy again; every move is a
//! [`Transition`](crate::recovery::Transition) with its reason. Port and device records are
//! created here on first sight.

use super::Engine;
use crate::recovery::action::Origin;
use crate::recovery::input::PortId;
use crate::recovery::state::{
    DeviceRecord, Episode, Fault, Phase, PortRecord, PortState, Stage, Transition,
};
use crate::time::Instant;

impl Engine {
    /// Moves a port to another stage of its episode (the stage's data replaces the old
    /// stage's; a hold is cleared).
    pub(super) fn transition(&mut self, pid: &PortId, to: Stage, reason: String, now: Instant) {
        self.transition_in(pid, None, to, reason, now);
    }

    /// Moves a healthy port into `to` with a new episode.
    pub(super) fn open_episode(
        &mut self,
        pid: &PortId,
        episode: Episode,
        to: Stage,
        reason: String,
        now: Instant,
    ) {
        self.transition_in(pid, Some(episode), to, reason, now);
    }

    /// [`Engine::transition`], with `episode` replacing the port's episode if given.
    pub(super) fn transition_in(
        &mut self,
        pid: &PortId,
        episode: Option<Episode>,
        to: Stage,
        reason: String,
        now: Instant,
    ) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let from = p.phase();
        let episode = match (episode, std::mem::replace(&mut p.state, PortState::Healthy)) {
            (Some(e), _) => e,
            (None, PortState::Recovering { episode, .. }) => episode,
            // Leaving health without a fault of its own (a late outcome of an earlier
            // episode): its sessions are what is down.
            (None, PortState::Healthy) => Episode::new(Fault::SessionsDown, now, Origin::Automatic),
        };
        let to_phase = to.phase();
        p.state = PortState::Recovering { episode, stage: to };
        self.record_transition(pid, from, to_phase, reason, now);
    }

    /// Ends the port's episode: healthy again.
    pub(super) fn transition_healthy(&mut self, pid: &PortId, reason: String, now: Instant) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        let from = p.phase();
        p.state = PortState::Healthy;
        self.record_transition(pid, from, Phase::Healthy, reason, now);
    }

    pub(super) fn record_transition(
        &mut self,
        pid: &PortId,
        from: Phase,
        to: Phase,
        reason: String,
        now: Instant,
    ) {
        let Some(p) = self.ports.get_mut(pid) else {
            return;
        };
        p.since = now;
        p.reason = reason.clone();
        p.hold = None;
        self.transitions.push_back(Transition {
            at: now,
            port: pid.clone(),
            from,
            to,
            reason,
        });
        self.mark_dirty(format!("{pid}: {from} -> {to}"));
    }

    pub(super) fn phase(&self, pid: &PortId) -> Option<Phase> {
        self.ports.get(pid).map(PortRecord::phase)
    }

    pub(super) fn stage_mut(&mut self, pid: &PortId) -> Option<&mut Stage> {
        self.ports.get_mut(pid).and_then(PortRecord::stage_mut)
    }

    pub(super) fn episode_mut(&mut self, pid: &PortId) -> Option<&mut Episode> {
        self.ports.get_mut(pid).and_then(PortRecord::episode_mut)
    }

    /// Reconnecting: the grace period or back-off is over; act on a session list at least
    /// this recent.
    pub(super) fn set_ops_not_before(&mut self, pid: &PortId, at: Instant) {
        if let Some(Stage::Reconnecting { ops_not_before, .. }) = self.stage_mut(pid) {
            *ops_not_before = Some(at);
        }
    }

    pub(super) fn port_or_create(&mut self, pid: &PortId, now: Instant) -> &mut PortRecord {
        if !self.devices.contains_key(&pid.device) {
            self.device_or_create(&pid.device);
        }
        self.ports
            .entry(pid.clone())
            .or_insert_with(|| PortRecord::new(pid.clone(), now))
    }

    pub(super) fn device_or_create(&mut self, name: &str) -> &mut DeviceRecord {
        self.devices
            .entry(name.to_string())
            .or_insert_with(|| DeviceRecord {
                name: name.to_string(),
                present: true,
                parent: None,
                driver: None,
                remembered: None,
                recreation: None,
                completed_recreations: 0,
                blocked: None,
                driver_reset: None,
            })
    }
}
