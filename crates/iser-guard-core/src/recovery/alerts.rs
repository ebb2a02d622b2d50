//! Alert coalescing: a storm becomes one alert per kind and window, with a count and the
//! subjects (devices, ports, sessions) it concerned.
//!
//! An alert's *kind* is its key up to the first `:` (`fault:rxe0/1` is of kind `fault`), its
//! *subject* what follows (see [`subject_of`]). The gate keeps one window per kind, never
//! one per key, so its memory is bounded by the number of kinds the engine has, whatever
//! the input (a driver bug or a forger naming 60 000 distinct devices costs the same as one).
//!
//! - The first alert of a kind opens the kind's window (`alerts.repeat-interval`) and is
//!   sent at once, unless it is a *coalesced* one (raw observations such as ignored forged
//!   records or RDMA CM errors): those are held for `alert_coalesce` from the first, so a
//!   burst of identical records leaves as one alert carrying the count.
//! - Within the window, further alerts of the kind are gathered into one batch. A batch
//!   holding an alert for a subject that has not been alerted in this window (a second
//!   port failing with the first: both ports of a dual-port NIC when the target reboots) is
//!   flushed `alert_coalesce` after that alert, once per window, so a real multi-port fault
//!   is told within seconds. Everything else (identical repeats, and the storm after that
//!   early flush) waits for the end of the window and leaves as one summary, which opens the
//!   next window.
//! - A batch of one alert leaves as that alert, unchanged; a batch of identical repeats as
//!   "the previous alert repeated N more time(s)"; anything else as one alert naming the
//!   first [`MAX_NAMED`] subjects and how many more there were, at the most urgent severity
//!   of the batch, with the text of the first gathered alert.
//!
//! Cost of a sustained storm of one kind: in its first window the first alert, the early
//! batch and the end-of-window summary; then one summary per window.

use std::collections::BTreeMap;
use std::time::Duration;

use super::action::{Alert, AlertClass};
use crate::time::Instant;

/// Subjects named in one coalesced alert; the rest are counted.
pub(crate) const MAX_NAMED: usize = 16;

/// How long a batch with a new subject waits before it leaves (once per window): long
/// enough to gather the ports that fail together, short enough to tell them at once. The
/// same as the default `Policy::alert_coalesce`, which is not configurable.
const EARLY_FLUSH: Duration = Duration::from_secs(2);

/// The kind of an alert key: the text before its first `:`.
pub(crate) fn kind_of(key: &str) -> &str {
    key.split_once(':').map_or(key, |(k, _)| k)
}

/// The subject of an alert key, as named in a coalesced alert: the device or port after the
/// kind (`fault:rxe0/1:gsi` -> `rxe0/1`, `recreate:rxe0:2` -> `rxe0`), a whole session key
/// when it is one (`reconnect:[iface: ..., portal: 192.0.2.2:3260]`), or the kind itself
/// for a key without a subject (`paused`).
pub(crate) fn subject_of(key: &str) -> &str {
    match key.split_once(':') {
        None => key,
        Some((_, rest)) if rest.starts_with('[') => rest,
        Some((_, rest)) => rest.split_once(':').map_or(rest, |(s, _)| s),
    }
}

/// Alerts gathered in a kind's window.
#[derive(Debug, Clone)]
struct Batch {
    /// The first one gathered: its text stands for all.
    first: Alert,
    /// Occurrences gathered (the sum of their counts).
    count: u64,
    /// The most urgent severity gathered.
    severity: AlertClass,
    /// The first [`MAX_NAMED`] distinct keys gathered.
    keys: Vec<String>,
    /// Occurrences whose key is not in `keys`.
    unnamed: u64,
    /// When it leaves.
    flush_at: Instant,
}

impl Batch {
    fn new(alert: Alert, flush_at: Instant) -> Self {
        Batch {
            count: alert.count,
            severity: alert.severity,
            keys: vec![alert.key.clone()],
            unnamed: 0,
            first: alert,
            flush_at,
        }
    }

    fn add(&mut self, alert: &Alert) {
        self.count = self.count.saturating_add(alert.count);
        self.severity = self.severity.max(alert.severity);
        if self.keys.contains(&alert.key) {
            return;
        }
        if self.keys.len() < MAX_NAMED {
            self.keys.push(alert.key.clone());
        } else {
            self.unnamed = self.unnamed.saturating_add(alert.count);
        }
    }

    /// Only occurrences of the first alert's key.
    fn single_key(&self) -> bool {
        self.keys.len() == 1 && self.unnamed == 0
    }
}

/// One kind's window.
#[derive(Debug, Clone)]
struct Window {
    /// Until then, alerts of this kind are gathered instead of sent.
    end: Instant,
    /// Keys that left in this window (at most [`MAX_NAMED`]): an alert for one of them is a
    /// repeat, which never hurries a batch.
    sent: Vec<String>,
    /// The window's one early flush has been used (or the window was opened by a summary).
    early_used: bool,
    /// What waits to leave.
    batch: Option<Batch>,
}

impl Window {
    fn remember_sent(&mut self, key: &str) {
        if self.sent.len() < MAX_NAMED && !self.sent.iter().any(|k| k == key) {
            self.sent.push(key.to_string());
        }
    }
}

/// The gate. Not journaled: after a restart an alert may be repeated once.
#[derive(Debug, Clone, Default)]
pub(crate) struct AlertGate {
    kinds: BTreeMap<String, Window>,
}

impl AlertGate {
    /// Offers an alert; returns it if it must be sent now. `coalesce` set: an alert that is
    /// held for that long even when it is the first of its kind (raw observations).
    pub(crate) fn offer(
        &mut self,
        alert: Alert,
        coalesce: Option<Duration>,
        repeat: Duration,
        now: Instant,
    ) -> Option<Alert> {
        let kind = kind_of(&alert.key).to_string();
        let Some(w) = self.kinds.get_mut(&kind) else {
            let mut w = Window {
                end: now.plus(repeat),
                sent: Vec::new(),
                early_used: false,
                batch: None,
            };
            let out = match coalesce {
                Some(hold) => {
                    w.end = now.plus(hold.max(repeat));
                    w.early_used = true; // The hold is this window's early flush.
                    w.batch = Some(Batch::new(alert, now.plus(hold)));
                    None
                }
                None => {
                    w.remember_sent(&alert.key);
                    Some(alert)
                }
            };
            self.kinds.insert(kind, w);
            return out;
        };
        let is_new = !w.sent.contains(&alert.key)
            && !w
                .batch
                .as_ref()
                .is_some_and(|b| b.keys.contains(&alert.key));
        let hurry = is_new && !w.early_used;
        match w.batch.as_mut() {
            Some(b) => b.add(&alert),
            None => w.batch = Some(Batch::new(alert, w.end)),
        }
        if hurry {
            w.early_used = true;
            if let Some(b) = w.batch.as_mut() {
                b.flush_at = b.flush_at.min(now.plus(EARLY_FLUSH)).min(w.end);
            }
        }
        None
    }

    /// Forgets a key so the next alert for it is sent at once (the situation changed): an
    /// alert for it still waiting alone is dropped, and a window with nothing else in it
    /// is closed.
    pub(crate) fn reset(&mut self, key: &str) {
        let kind = kind_of(key);
        let Some(w) = self.kinds.get_mut(kind) else {
            return;
        };
        w.sent.retain(|k| k != key);
        if w.batch
            .as_ref()
            .is_some_and(|b| b.single_key() && b.first.key == key)
        {
            w.batch = None;
        }
        if w.sent.is_empty() && w.batch.is_none() {
            self.kinds.remove(kind);
        }
    }

    /// Alerts due at `now`: flushed batches and end-of-window summaries.
    pub(crate) fn due(&mut self, now: Instant, repeat: Duration) -> Vec<Alert> {
        let mut out = Vec::new();
        let mut closed = Vec::new();
        for (kind, w) in self.kinds.iter_mut() {
            if w.batch.as_ref().is_some_and(|b| b.flush_at <= now) {
                if let Some(b) = w.batch.take() {
                    let window_over = w.end <= now;
                    out.push(flush(kind, b, w, repeat));
                    if window_over {
                        // The summary opens the next window; a storm that goes on costs
                        // one alert per window from now on.
                        w.end = now.plus(repeat);
                        w.early_used = true;
                    }
                }
            }
            if w.batch.is_none() && w.end <= now {
                closed.push(kind.clone());
            }
        }
        for k in closed {
            self.kinds.remove(&k);
        }
        out
    }

    /// The earliest time [`AlertGate::due`] has something to do.
    pub(crate) fn next_timeout(&self) -> Option<Instant> {
        self.kinds
            .values()
            .map(|w| match &w.batch {
                Some(b) => b.flush_at,
                None => w.end,
            })
            .min()
    }
}

/// The alert a batch leaves as; records its keys as sent in the window.
fn flush(kind: &str, b: Batch, w: &mut Window, repeat: Duration) -> Alert {
    let was_sent = w.sent.contains(&b.first.key);
    for k in &b.keys {
        w.remember_sent(k);
    }
    if b.single_key() {
        if !was_sent {
            // One alert (possibly held and counted): it leaves as it is.
            let mut a = b.first;
            a.count = b.count;
            return a;
        }
        return Alert {
            severity: AlertClass::Info,
            summary: format!("the previous alert repeated {} more time(s)", b.count),
            detail: format!(
                "identical alerts ({}) were counted, not repeated",
                b.first.key
            ),
            remedy: None,
            count: b.count,
            key: b.first.key,
        };
    }
    let mut subjects: Vec<&str> = Vec::new();
    for k in &b.keys {
        let s = subject_of(k);
        if !subjects.contains(&s) {
            subjects.push(s);
        }
    }
    let named = subjects.join(", ");
    let for_whom = if b.unnamed > 0 {
        format!("{named} and {} more", b.unnamed)
    } else {
        named
    };
    Alert {
        severity: b.severity,
        summary: format!(
            "{} {kind} alert(s) within {} s, for {for_whom}; the first: {}",
            b.count,
            repeat.as_secs(),
            b.first.summary
        ),
        detail: format!(
            "{} (alerts of one kind are coalesced within alerts.repeat-interval: one alert per \
             kind and window names the first {MAX_NAMED} subjects and counts the rest)",
            b.first.detail
        ),
        remedy: b.first.remedy,
        count: b.count,
        key: format!("{kind}:coalesced"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REPEAT: Duration = Duration::from_secs(300);
    const EARLY: Duration = Duration::from_secs(2);

    fn at(ms: u64) -> Instant {
        Instant(ms)
    }

    fn alert(key: &str, severity: AlertClass) -> Alert {
        Alert {
            severity,
            summary: format!("{key} happened"),
            detail: format!("detail of {key}"),
            remedy: Some("rdma link show".into()),
            count: 1,
            key: key.into(),
        }
    }

    /// Offers then collects everything due up to `now`, as the engine does on each timeout.
    fn offer(g: &mut AlertGate, key: &str, coalesce: bool, now: Instant) -> Vec<Alert> {
        let c = coalesce.then_some(EARLY);
        let mut out: Vec<Alert> = g
            .offer(alert(key, AlertClass::Error), c, REPEAT, now)
            .into_iter()
            .collect();
        out.extend(g.due(now, REPEAT));
        out
    }

    fn drain_until(g: &mut AlertGate, until: Instant) -> Vec<Alert> {
        let mut out = Vec::new();
        while let Some(t) = g.next_timeout() {
            if t > until {
                break;
            }
            out.extend(g.due(t, REPEAT));
        }
        out
    }

    #[test]
    fn kind_and_subject_come_from_the_key() {
        assert_eq!(kind_of("fault:rxe0/1:gsi"), "fault");
        assert_eq!(subject_of("fault:rxe0/1:gsi"), "rxe0/1");
        assert_eq!(subject_of("recreate:rxe0:2"), "rxe0");
        assert_eq!(kind_of("paused"), "paused");
        assert_eq!(subject_of("paused"), "paused");
        let session =
            "reconnect:[iface: default, target: iqn.2003-01.org:t, portal: 192.0.2.2:3260]";
        assert_eq!(kind_of(session), "reconnect");
        assert_eq!(
            subject_of(session),
            "[iface: default, target: iqn.2003-01.org:t, portal: 192.0.2.2:3260]"
        );
    }

    #[test]
    fn a_single_alert_leaves_at_once_and_unchanged() {
        let mut g = AlertGate::default();
        let out = offer(&mut g, "fault:rxe0/1", false, at(0));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].summary, "fault:rxe0/1 happened");
        assert_eq!(out[0].count, 1);
        // Nothing else follows, and the window closes.
        assert!(drain_until(&mut g, at(400_000)).is_empty());
        assert!(g.next_timeout().is_none());
    }

    #[test]
    fn a_second_port_failing_with_the_first_is_told_within_the_early_delay_unchanged() {
        let mut g = AlertGate::default();
        assert_eq!(offer(&mut g, "fault:rxe0/1", false, at(0)).len(), 1);
        assert!(offer(&mut g, "fault:rxe1/1", false, at(100)).is_empty());
        let out = drain_until(&mut g, at(2_100));
        assert_eq!(out.len(), 1, "{out:#?}");
        assert_eq!(out[0].summary, "fault:rxe1/1 happened");
        assert_eq!(out[0].key, "fault:rxe1/1");
        assert!(drain_until(&mut g, at(400_000)).is_empty());
    }

    #[test]
    fn identical_repeats_are_counted_and_summarised_at_the_end_of_the_window() {
        let mut g = AlertGate::default();
        assert_eq!(offer(&mut g, "quarantine:rxe0/1", false, at(0)).len(), 1);
        for i in 1..=5 {
            assert!(offer(&mut g, "quarantine:rxe0/1", false, at(i * 1000)).is_empty());
        }
        // A repeat never hurries the batch.
        assert!(drain_until(&mut g, at(299_999)).is_empty());
        let out = drain_until(&mut g, at(300_000));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].count, 5);
        assert_eq!(out[0].severity, AlertClass::Info);
        assert!(out[0].summary.contains("repeated 5 more time(s)"));
    }

    #[test]
    fn a_distinct_device_storm_costs_one_alert_per_window_with_the_subjects_and_the_count() {
        let mut g = AlertGate::default();
        let mut sent = Vec::new();
        // 60 000 distinct devices, 100 per second for 10 minutes: two windows and a bit.
        let mut t = 0;
        for i in 0..60_000u64 {
            t = i * 10;
            sent.extend(offer(&mut g, &format!("fault:flood{i}/1"), false, at(t)));
        }
        sent.extend(drain_until(&mut g, at(t + 2 * 300_000)));
        // The first alert, the early batch after 2 s, then one summary per window:
        // windows end at 300 s and 600 s (the storm ends at 599.99 s).
        assert_eq!(
            sent.len(),
            4,
            "{:#?}",
            sent.iter().map(|a| &a.summary).collect::<Vec<_>>()
        );
        assert_eq!(sent[0].summary, "fault:flood0/1 happened");
        let total: u64 = sent.iter().map(|a| a.count).sum();
        assert_eq!(total, 60_000, "no occurrence lost");
        let summary = &sent[2];
        assert_eq!(summary.severity, AlertClass::Error);
        assert!(
            summary.summary.contains("fault alert(s) within 300 s"),
            "{}",
            summary.summary
        );
        assert!(
            summary.summary.contains("for flood202/1, flood203/1"),
            "{}",
            summary.summary
        );
        assert!(summary
            .summary
            .contains(" more; the first: fault:flood202/1 happened"));
        assert_eq!(summary.remedy.as_deref(), Some("rdma link show"));
        // Bounded: one window, at most 16 keys named.
        assert!(g.kinds.len() <= 1);
        assert!(g.kinds.values().all(|w| w.sent.len() <= MAX_NAMED));
    }

    #[test]
    fn named_subjects_are_bounded_and_the_rest_counted() {
        let mut g = AlertGate::default();
        offer(&mut g, "hold:d0/1:allow", false, at(0));
        offer(&mut g, "hold:d0/1:allow", false, at(1)); // A repeat first: no hurry.
        for i in 1..=40 {
            offer(&mut g, &format!("hold:d{i}/1:allow"), false, at(10 + i));
        }
        let out = drain_until(&mut g, at(3_000));
        assert_eq!(out.len(), 1);
        let s = &out[0].summary;
        assert!(
            s.starts_with("41 hold alert(s) within 300 s, for d0/1, d1/1"),
            "{s}"
        );
        assert!(s.contains("d15/1 and 25 more;"), "{s}");
        assert!(!s.contains("d16/1"), "{s}");
        assert_eq!(out[0].count, 41);
    }

    #[test]
    fn coalesced_alerts_are_held_and_leave_with_their_count() {
        let mut g = AlertGate::default();
        for i in 0..10_000 {
            assert!(offer(&mut g, "untrusted", true, at(i / 10)).is_empty());
        }
        let out = drain_until(&mut g, at(2_000));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].count, 10_000);
        assert_eq!(out[0].summary, "untrusted happened");
        // Later repeats in the window: one summary at its end.
        offer(&mut g, "untrusted", true, at(5_000));
        assert!(drain_until(&mut g, at(299_999)).is_empty());
        assert_eq!(drain_until(&mut g, at(300_000)).len(), 1);
    }

    #[test]
    fn reset_lets_the_next_alert_for_the_key_leave_at_once() {
        let mut g = AlertGate::default();
        assert_eq!(offer(&mut g, "paused", false, at(0)).len(), 1);
        assert!(offer(&mut g, "paused", false, at(10)).is_empty());
        g.reset("paused");
        assert_eq!(offer(&mut g, "paused", false, at(20)).len(), 1);
        // A queued lone alert is taken back with its key.
        assert_eq!(offer(&mut g, "recreate:rxe0:1", false, at(0)).len(), 1);
        assert!(offer(&mut g, "recreate:rxe1:1", false, at(5)).is_empty());
        g.reset("recreate:rxe1:1");
        let out = drain_until(&mut g, at(400_000));
        assert!(out.iter().all(|a| a.key != "recreate:rxe1:1"), "{out:#?}");
    }

    #[test]
    fn the_summary_is_as_urgent_as_the_most_urgent_alert_gathered() {
        let mut g = AlertGate::default();
        g.offer(
            alert("failed:a/1:1", AlertClass::Warning),
            None,
            REPEAT,
            at(0),
        );
        g.offer(
            alert("failed:b/1:1", AlertClass::Warning),
            None,
            REPEAT,
            at(1),
        );
        g.offer(
            alert("failed:c/1:1", AlertClass::Critical),
            None,
            REPEAT,
            at(2),
        );
        let out = drain_until(&mut g, at(3_000));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].severity, AlertClass::Critical);
        assert!(
            out[0].summary.contains("for b/1, c/1;"),
            "{}",
            out[0].summary
        );
    }
}
