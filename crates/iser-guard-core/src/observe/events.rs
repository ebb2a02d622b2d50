//! The daemon's recent decisions and transitions, with their reasons, in a bounded ring:
//! what `iser-guard events` shows and `events --follow` streams. The oldest entries go first
//! when the ring is full, and the ring counts them, so a reader knows what it missed (older
//! incidents stay in the journal's incident list, [`super::IncidentLog`]).

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::Stamp;
use crate::driver::{Authority, Refusal};
use crate::recovery::{Action, ActionKind, Transition};
use crate::severity::AlertSeverities;

/// Entries the daemon keeps (about 0.5 MB at most).
pub const EVENT_RING_CAPACITY: usize = 1024;

/// What happened.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum EventKind {
    /// A port changed phase.
    Transition {
        /// From.
        from: String,
        /// To.
        to: String,
    },
    /// The driver let an action run.
    Decided {
        /// What allowed it (`devices.allow lists …`, `operator command #1`, `harmless`).
        allowed_by: String,
    },
    /// A destructive action was planned or refused instead of run.
    NotRun {
        /// Why.
        refusal: String,
    },
    /// An action finished.
    Finished,
    /// An alert was sent.
    Alert {
        /// Its severity: the configured syslog severity of its class, the name syslog gets.
        severity: String,
    },
    /// An operator request reached the daemon.
    Operator,
    /// The daemon itself (start, reload, safe mode, a source failing).
    Daemon,
    /// A witness the engine was told about besides the kernel log and the QP table (a
    /// device's asynchronous event; a self-test's result is the `finished` entry of its
    /// action).
    Witness {
        /// `async-event`.
        source: String,
    },
    /// A severe kernel-log line of the RDMA storage stack, or a whole oops/WARN report in
    /// it (the subsystem layer: explained, never acted on).
    Kernel {
        /// `rdma-core`, `nic`, `nvme`, …
        subsystem: String,
        /// Syslog level name (`err`, `crit`).
        level: String,
    },
}

impl EventKind {
    /// The short word the text listing shows.
    pub fn word(&self) -> &'static str {
        match self {
            EventKind::Transition { .. } => "transition",
            EventKind::Decided { .. } => "decided",
            EventKind::NotRun { .. } => "not-run",
            EventKind::Finished => "finished",
            EventKind::Alert { .. } => "alert",
            EventKind::Operator => "operator",
            EventKind::Daemon => "daemon",
            EventKind::Witness { .. } => "witness",
            EventKind::Kernel { .. } => "kernel",
        }
    }
}

/// One entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Its number, from 1, never reused while the daemon runs.
    pub seq: u64,
    /// When.
    pub at: Stamp,
    /// The port it concerns (`device/port`), if any.
    pub port: Option<String>,
    /// What kind.
    #[serde(flatten)]
    pub kind: EventKind,
    /// What, in operator words.
    pub message: String,
    /// Why, in operator words.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The bounded ring.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRing {
    capacity: usize,
    events: VecDeque<Event>,
    next_seq: u64,
    dropped: u64,
}

impl Default for EventRing {
    fn default() -> Self {
        EventRing::new(EVENT_RING_CAPACITY)
    }
}

impl EventRing {
    /// An empty ring keeping at most `capacity` entries (at least one).
    pub fn new(capacity: usize) -> Self {
        EventRing {
            capacity: capacity.max(1),
            events: VecDeque::new(),
            next_seq: 1,
            dropped: 0,
        }
    }

    /// Appends an entry, dropping the oldest when full; returns it.
    pub fn push(
        &mut self,
        at: Stamp,
        port: Option<String>,
        kind: EventKind,
        message: String,
        reason: Option<String>,
    ) -> &Event {
        if self.events.len() == self.capacity {
            self.events.pop_front();
            self.dropped += 1;
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.events.push_back(Event {
            seq,
            at,
            port,
            kind,
            message,
            reason,
        });
        // Just pushed: never empty.
        &self.events[self.events.len() - 1]
    }

    /// A port's transition.
    pub fn transition(&mut self, at: Stamp, t: &Transition) -> &Event {
        self.push(
            at,
            Some(t.port.to_string()),
            EventKind::Transition {
                from: t.from.to_string(),
                to: t.to.to_string(),
            },
            format!("{} -> {}", t.from, t.to),
            Some(t.reason.clone()),
        )
    }

    /// An action the driver let run. Alerts are entered as alerts, with the severity
    /// `severities` (the configuration's) gives their class: the one syslog gets.
    pub fn decided(
        &mut self,
        at: Stamp,
        action: &Action,
        authority: &Authority,
        severities: &AlertSeverities,
    ) -> &Event {
        let port = action.port.as_ref().map(ToString::to_string);
        let kind = match &action.kind {
            ActionKind::Alert(a) => EventKind::Alert {
                severity: severities.of(a.severity).name().to_string(),
            },
            _ => EventKind::Decided {
                allowed_by: authority.to_string(),
            },
        };
        let message = match &action.kind {
            ActionKind::Alert(a) => a.summary.clone(),
            _ => action.to_string(),
        };
        let reason = match &action.kind {
            ActionKind::Alert(a) => a.detail.clone(),
            _ => action.reason.clone(),
        };
        self.push(at, port, kind, message, Some(reason))
    }

    /// A destructive action planned or refused instead of run.
    pub fn not_run(&mut self, at: Stamp, action: &Action, refusal: &Refusal) -> &Event {
        self.push(
            at,
            action.port.as_ref().map(ToString::to_string),
            EventKind::NotRun {
                refusal: refusal.to_string(),
            },
            action.to_string(),
            Some(action.reason.clone()),
        )
    }

    /// A device's asynchronous event, as the engine was told it.
    pub fn async_event(&mut self, at: Stamp, ev: &crate::selftest::AsyncEvent) -> &Event {
        self.push(
            at,
            ev.port.map(|p| format!("{}/{p}", ev.device)),
            EventKind::Witness {
                source: "async-event".into(),
            },
            format!("async event {ev}"),
            None,
        )
    }

    /// Entries with `seq` greater than `after`, oldest first.
    pub fn after(&self, after: u64) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(move |e| e.seq > after)
    }

    /// Entries at or after `unix_ms` (wall clock), oldest first.
    pub fn since(&self, unix_ms: u64) -> impl Iterator<Item = &Event> {
        self.events.iter().filter(move |e| e.at.unix_ms >= unix_ms)
    }

    /// Every entry kept, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &Event> {
        self.events.iter()
    }

    /// Entries kept.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Nothing kept.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Entries dropped to stay bounded.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The most entries kept.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The oldest entry kept.
    pub fn oldest(&self) -> Option<&Event> {
        self.events.front()
    }
}
