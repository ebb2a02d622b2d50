//! The daemon's observable state, as data: what `iser-guard status`, `events` and `history`
//! show, shared by the daemon (which builds it) and the CLI (which renders it). The model is
//! ntpd-rs's observer and `ntp-ctl`: one typed document, serialised as versioned JSON over
//! the control socket, never scraped from log lines.
//!
//! - [`snapshot`]: [`DaemonSnapshot`], built from the [`Driver`](crate::driver::Driver) and
//!   a few daemon-wide facts without I/O: per port the phase, why, since when, the next
//!   action and when, attempts used and allowed, holds, remembered sessions with the
//!   evidence that placed them.
//! - [`events`]: [`EventRing`], the bounded ring of recent decisions and transitions.
//! - [`incidents`]: [`IncidentLog`], the bounded list of incidents the journal keeps
//!   (start, detection, first action, recovery, outcome).
//! - [`probes`]: [`ProbeNews`], which target-back probes are news (the first answer and
//!   each change), so a long outage's probes do not push everything else out of the ring.
//! - `read`: the only place that reads the engine's per-port records field by field, so a
//!   change of the engine's state types changes one small file here.
//!
//! Pure like the rest of the core: both clocks come in as [`Clocks`].

pub mod events;
pub mod incidents;
pub mod probes;
mod read;
pub mod snapshot;
#[cfg(test)]
mod tests;

use serde::{Deserialize, Serialize};

use crate::time::Instant;

pub use events::{Event, EventKind, EventRing, EVENT_RING_CAPACITY};
pub use incidents::{Incident, IncidentAction, IncidentLog, IncidentOutcome, INCIDENTS_KEPT};
pub use probes::ProbeNews;
pub use snapshot::{
    DaemonFacts, DaemonSnapshot, DeviceView, DriverStackView, HoldView, MultipathPortView,
    NextStep, PortView, PortalProbeView, PortalView, SafeModeView, SelfTestView, SessionView,
    SourceState, SourceView, SNAPSHOT_FORMAT,
};

/// Both clocks read at one moment by the caller: the engine's monotonic clock and the wall
/// clock (milliseconds since the Unix epoch). The wall clock only labels what an operator
/// reads; every decision runs on the monotonic one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Clocks {
    /// The engine's clock.
    pub mono: Instant,
    /// Wall-clock milliseconds since the Unix epoch.
    pub unix_ms: u64,
}

impl Clocks {
    /// The stamp of `at` (an engine instant), its wall time derived from this pair.
    pub fn stamp(&self, at: Instant) -> Stamp {
        let unix_ms = if at <= self.mono {
            self.unix_ms
                .saturating_sub(self.mono.as_millis() - at.as_millis())
        } else {
            self.unix_ms
                .saturating_add(at.as_millis() - self.mono.as_millis())
        };
        Stamp { mono: at, unix_ms }
    }

    /// The stamp of this moment.
    pub fn now(&self) -> Stamp {
        self.stamp(self.mono)
    }
}

/// A moment on both clocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Stamp {
    /// On the engine's monotonic clock (milliseconds; CLOCK_BOOTTIME in the daemon).
    pub mono: Instant,
    /// Wall-clock milliseconds since the Unix epoch.
    pub unix_ms: u64,
}
