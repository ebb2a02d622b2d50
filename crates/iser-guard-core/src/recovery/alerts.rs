//! Alert deduplication: a storm of identical lines becomes one alert with a count.
//!
//! Two kinds of alerts pass through the gate:
//! - *immediate* ones (phase changes, holds): sent at once; identical ones within
//!   `alerts.repeat-interval` are counted and summarised once when the interval ends;
//! - *coalesced* ones (raw observations such as ignored forged records or RDMA CM errors):
//!   held for `alert_coalesce` from the first occurrence, so a burst of 10 000 identical
//!   records leaves as one alert carrying the count.

use std::collections::BTreeMap;
use std::time::Duration;

use super::action::Alert;
use crate::time::Instant;

#[derive(Debug, Clone)]
struct Entry {
    /// A coalesced alert waiting for its flush time.
    pending: Option<(Alert, Instant)>,
    /// Until then, repeats are counted instead of sent.
    window_end: Instant,
    /// Repeats counted since the last alert left.
    suppressed: u64,
}

/// The gate. Not journaled: after a restart an alert may be repeated once.
#[derive(Debug, Clone, Default)]
pub(crate) struct AlertGate {
    entries: BTreeMap<String, Entry>,
}

impl AlertGate {
    /// Offers an alert; returns it if it must be sent now.
    pub(crate) fn offer(
        &mut self,
        alert: Alert,
        coalesce: Option<Duration>,
        repeat: Duration,
        now: Instant,
    ) -> Option<Alert> {
        match self.entries.get_mut(&alert.key) {
            Some(e) => {
                if let Some((pending, _)) = e.pending.as_mut() {
                    pending.count = pending.count.saturating_add(alert.count);
                } else {
                    e.suppressed = e.suppressed.saturating_add(alert.count);
                }
                None
            }
            None => {
                let key = alert.key.clone();
                match coalesce {
                    Some(window) => {
                        self.entries.insert(
                            key,
                            Entry {
                                pending: Some((alert, now.plus(window))),
                                window_end: now.plus(window.max(repeat)),
                                suppressed: 0,
                            },
                        );
                        None
                    }
                    None => {
                        self.entries.insert(
                            key,
                            Entry {
                                pending: None,
                                window_end: now.plus(repeat),
                                suppressed: 0,
                            },
                        );
                        Some(alert)
                    }
                }
            }
        }
    }

    /// Forgets a key so the next identical alert is sent at once (the situation changed).
    pub(crate) fn reset(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// Alerts due at `now`: flushed coalesced alerts and repeat summaries.
    pub(crate) fn due(&mut self, now: Instant, repeat: Duration) -> Vec<Alert> {
        let mut out = Vec::new();
        let mut remove = Vec::new();
        for (key, e) in self.entries.iter_mut() {
            if let Some((_, at)) = &e.pending {
                if *at <= now {
                    if let Some((alert, _)) = e.pending.take() {
                        out.push(alert);
                    }
                }
            }
            if e.pending.is_none() && e.window_end <= now {
                if e.suppressed > 0 {
                    out.push(Alert {
                        severity: super::action::Severity::Info,
                        summary: format!(
                            "the previous alert repeated {} more time(s)",
                            e.suppressed
                        ),
                        detail: format!("identical alerts ({key}) were counted, not repeated"),
                        remedy: None,
                        count: e.suppressed,
                        key: key.clone(),
                    });
                    e.suppressed = 0;
                    e.window_end = now.plus(repeat);
                } else {
                    remove.push(key.clone());
                }
            }
        }
        for k in remove {
            self.entries.remove(&k);
        }
        out
    }

    /// The earliest time [`AlertGate::due`] has something to do.
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        self.entries
            .values()
            .map(|e| match &e.pending {
                Some((_, at)) => *at,
                None => e.window_end,
            })
            .min()
    }
}
