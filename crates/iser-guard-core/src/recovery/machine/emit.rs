//! What the engine emits besides decisions: actions with their ids, session-list and
//! topology refreshes (rate-limited), alerts through the repeat gate, back-off jitter.

use std::time::Duration;

use super::Engine;
use crate::recovery::action::{Action, ActionId, ActionKind, Alert, AlertClass, Origin};
use crate::recovery::input::PortId;
use crate::time::Instant;

/// Session-list refreshes the engine asks for are at least this far apart.
pub(super) const REFRESH_MIN_GAP: Duration = Duration::from_secs(1);

impl Engine {
    pub(super) fn request_sessions(&mut self, now: Instant, force: bool) {
        let recent = self
            .last_sessions_request
            .is_some_and(|t| now.since(t) < REFRESH_MIN_GAP);
        if recent && !force {
            return;
        }
        if recent && self.last_sessions_request == Some(now) {
            return; // Already asked at this very instant.
        }
        self.last_sessions_request = Some(now);
        self.push(
            None,
            None,
            Origin::Automatic,
            "need the current session states".into(),
            ActionKind::RefreshSessions,
        );
    }

    pub(super) fn request_topology(&mut self, now: Instant) {
        if self
            .last_topology_request
            .is_some_and(|t| now.since(t) < self.policy.probe_interval)
        {
            return;
        }
        self.last_topology_request = Some(now);
        self.push(
            None,
            None,
            Origin::Automatic,
            "need the current RDMA devices and QP table".into(),
            ActionKind::RefreshTopology,
        );
    }

    pub(super) fn alloc_id(&mut self) -> ActionId {
        let id = ActionId(self.next_id);
        self.next_id = self.next_id.saturating_add(1);
        id
    }

    pub(super) fn jitter(&mut self) -> f64 {
        // splitmix64: tiny, seedable, good enough for spreading retries.
        self.rng = self.rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        (z >> 11) as f64 / (1u64 << 53) as f64
    }

    pub(super) fn push(
        &mut self,
        port: Option<PortId>,
        device: Option<String>,
        origin: Origin,
        reason: String,
        kind: ActionKind,
    ) -> ActionId {
        let id = self.alloc_id();
        self.push_with_id(id, port, device, origin, reason, kind);
        id
    }

    pub(super) fn push_with_id(
        &mut self,
        id: ActionId,
        port: Option<PortId>,
        device: Option<String>,
        origin: Origin,
        reason: String,
        kind: ActionKind,
    ) {
        self.actions.push_back(Action {
            id,
            port,
            device,
            origin,
            reason,
            kind,
        });
    }

    pub(super) fn alert(
        &mut self,
        now: Instant,
        severity: AlertClass,
        key: String,
        summary: String,
        detail: String,
        remedy: Option<String>,
    ) {
        self.offer_alert(now, None, severity, key, summary, detail, remedy);
    }

    /// Like [`Engine::alert`], but identical alerts within `alert_coalesce` of the first
    /// are merged into it (a storm gives one alert with a count).
    pub(super) fn alert_coalesced(
        &mut self,
        now: Instant,
        severity: AlertClass,
        key: String,
        summary: String,
        detail: String,
        remedy: Option<String>,
    ) {
        let window = Some(self.policy.alert_coalesce);
        self.offer_alert(now, window, severity, key, summary, detail, remedy);
    }

    /// Passes an alert through the repeat gate and emits it if the gate lets it out.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn offer_alert(
        &mut self,
        now: Instant,
        coalesce: Option<std::time::Duration>,
        severity: AlertClass,
        key: String,
        summary: String,
        detail: String,
        remedy: Option<String>,
    ) {
        let alert = Alert {
            severity,
            summary,
            detail,
            remedy,
            count: 1,
            key,
        };
        if let Some(a) = self
            .gate
            .offer(alert, coalesce, self.policy.alert_repeat_interval, now)
        {
            self.push_alert(a);
        }
    }

    pub(super) fn push_alert(&mut self, alert: Alert) {
        self.push(
            None,
            None,
            Origin::Automatic,
            alert.summary.clone(),
            ActionKind::Alert(alert),
        );
    }
}
