//! The one alert sender: a thread fed through a bounded queue; alerts that do not fit are
//! coalesced into a count reported with the next alert, at the most urgent severity.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::core::severity::Severity;
use crate::io::syslog::{AlertMessage, AlertSink};

/// How long the sender waits before reporting coalesced alerts on their own.
const COALESCE_FLUSH: Duration = Duration::from_secs(1);
/// Sample descriptions kept of coalesced alerts, for the summary.
const COALESCE_SAMPLES: usize = 3;

/// Alerts that did not fit in the queue, waiting to be reported as one.
#[derive(Debug, Default)]
struct Coalesced {
    count: u64,
    /// The most urgent severity among them (lowest number).
    severity: Option<Severity>,
    samples: BTreeSet<String>,
}

impl Coalesced {
    fn add(&mut self, alert: &AlertMessage) {
        self.count += 1;
        self.severity = Some(
            self.severity
                .map_or(alert.severity, |s| s.min(alert.severity)),
        );
        if self.samples.len() < COALESCE_SAMPLES {
            self.samples.insert(alert.what.clone());
        }
    }

    fn describe(&self) -> String {
        let samples: Vec<&str> = self.samples.iter().map(String::as_str).collect();
        format!(
            "{} more alert(s) coalesced because the alert queue was full (e.g. {})",
            self.count,
            samples.join("; ")
        )
    }
}

/// An alert waiting in the queue, with the sink it goes to.
type QueuedAlert = (Arc<dyn AlertSink>, AlertMessage);

/// The queue and the count of what did not fit, under one lock: the sender can then wait
/// without a timeout while there is nothing to report (an idle daemon's alert thread never
/// wakes), and still never miss a count that arrives while it waits.
#[derive(Default)]
struct State {
    queue: VecDeque<QueuedAlert>,
    coalesced: Coalesced,
    /// Every [`AlertQueue`] is gone: the sender drains what is left and stops.
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    wake: Condvar,
    capacity: usize,
    unavailable_logged: AtomicBool,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Held by every clone of an [`AlertQueue`]; the last one dropped tells the sender to stop.
struct Closer(Arc<Shared>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.wake.notify_all();
    }
}

/// The one alert sender: a thread draining a bounded queue into the alert sink. When the
/// queue is full, [`AlertQueue::send`] counts the alert instead of queueing it; the count
/// (with the most urgent severity and a few examples) rides on the next alert sent and is
/// sent on its own within a second when no alert follows, and is logged. With nothing
/// queued and nothing counted the thread sleeps until an alert comes (no periodic wakeup).
#[derive(Clone)]
pub struct AlertQueue {
    shared: Arc<Shared>,
    _closer: Arc<Closer>,
}

impl std::fmt::Debug for AlertQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AlertQueue").finish_non_exhaustive()
    }
}

/// What [`AlertQueue::send`] did with an alert.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Queued {
    /// Queued for the sender.
    Queued,
    /// The queue was full: counted, reported with the next alert.
    Coalesced,
}

impl AlertQueue {
    /// Starts the sender thread with room for `capacity` alerts.
    pub fn new(capacity: usize) -> std::io::Result<AlertQueue> {
        AlertQueue::named("iser-guard-alerts", capacity)
    }

    /// [`AlertQueue::new`] with the sender thread called `name`.
    pub fn named(name: &str, capacity: usize) -> std::io::Result<AlertQueue> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
            capacity: capacity.max(1),
            unavailable_logged: AtomicBool::new(false),
        });
        let s = shared.clone();
        std::thread::Builder::new()
            .name(name.into())
            .spawn(move || sender(&s))?;
        Ok(AlertQueue {
            _closer: Arc::new(Closer(shared.clone())),
            shared,
        })
    }

    /// Queues `alert` for `sink`; never blocks (beyond the short queue lock).
    pub fn send(&self, sink: Arc<dyn AlertSink>, alert: AlertMessage) -> Queued {
        let mut st = self.shared.lock();
        let queued = if st.queue.len() < self.shared.capacity {
            st.queue.push_back((sink, alert));
            Queued::Queued
        } else {
            st.coalesced.add(&alert);
            Queued::Coalesced
        };
        drop(st);
        self.shared.wake.notify_one();
        queued
    }
}

/// What the sender found when it woke.
enum Next {
    Alert(QueuedAlert),
    /// No alert within [`COALESCE_FLUSH`] while a count waits.
    Flush,
    Closed,
}

fn sender(shared: &Shared) {
    let mut last_sink: Option<Arc<dyn AlertSink>> = None;
    loop {
        let (next, taken) = {
            let mut st = shared.lock();
            loop {
                if let Some(p) = st.queue.pop_front() {
                    break (Next::Alert(p), std::mem::take(&mut st.coalesced));
                }
                if st.closed {
                    break (Next::Closed, std::mem::take(&mut st.coalesced));
                }
                if st.coalesced.count == 0 {
                    // Nothing to send, nothing to report: sleep until an alert comes.
                    st = shared.wake.wait(st).unwrap_or_else(|p| p.into_inner());
                    continue;
                }
                let (guard, waited) = shared
                    .wake
                    .wait_timeout(st, COALESCE_FLUSH)
                    .unwrap_or_else(|p| p.into_inner());
                st = guard;
                if waited.timed_out() && st.queue.is_empty() {
                    break (Next::Flush, std::mem::take(&mut st.coalesced));
                }
            }
        };
        if taken.count > 0 {
            tracing::warn!(coalesced = taken.count, "{}", taken.describe());
        }
        match next {
            Next::Alert((sink, mut alert)) => {
                if taken.count > 0 {
                    alert.severity = alert.severity.min(taken.severity.unwrap_or(alert.severity));
                    alert.why = if alert.why.trim().is_empty() {
                        taken.describe()
                    } else {
                        format!("{}; {}", alert.why.trim(), taken.describe())
                    };
                }
                deliver(&*sink, &alert, shared);
                last_sink = Some(sink);
            }
            Next::Flush | Next::Closed => {
                if taken.count > 0 {
                    if let Some(sink) = &last_sink {
                        let summary = AlertMessage {
                            severity: taken.severity.unwrap_or(Severity::Warning),
                            what: "iser-guard: alert storm".into(),
                            why: taken.describe(),
                            todo: "see the daemon log (journalctl -u iser-guard) for each one"
                                .into(),
                        };
                        deliver(&**sink, &summary, shared);
                    }
                }
                if matches!(next, Next::Closed) {
                    return;
                }
            }
        }
    }
}

fn deliver(sink: &dyn AlertSink, alert: &AlertMessage, shared: &Shared) {
    if let Err(e) = sink.send(alert) {
        // "No syslog here" once; a failed send every time.
        if !e.is_unavailable() || !shared.unavailable_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!("{e}");
        }
    }
}
