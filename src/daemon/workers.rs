//! Bounded blocking work for the daemon loop: a fixed pool of executor threads and one alert
//! sender, each fed through a bounded queue the loop never waits on.
//!
//! Why not `tokio::task::spawn_blocking`: tokio's blocking pool grows a thread per call that
//! finds no idle one, up to 512. A storm of 20 000 kernel-log records each naming a
//! different device gave 20 000 alerts, each a blocking syslog send (up to a 1 s timeout),
//! and the daemon went from 6 to 517 threads; the loop, which also reads the kernel log,
//! fell behind the ring. Here the number of threads is fixed at start, a full queue is
//! answered at once (the job is refused, or the alert coalesced and counted), and the loop
//! goes back to reading.

use std::collections::{BTreeSet, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use crate::io::syslog::{Alert, AlertSink, Severity};

/// Executor threads: enough for a probe, an iscsiadm call and a re-creation to overlap on a
/// few devices (the engine runs one re-creation at a time).
pub const EXECUTOR_THREADS: usize = 4;
/// Executor jobs queued beyond the running ones before new ones are refused.
pub const EXECUTOR_QUEUE: usize = 256;
/// Alerts queued for the sender before new ones are coalesced into a count.
pub const ALERT_QUEUE: usize = 64;
/// How long the sender waits before reporting coalesced alerts on their own.
const COALESCE_FLUSH: Duration = Duration::from_secs(1);
/// Sample descriptions kept of coalesced alerts, for the summary.
const COALESCE_SAMPLES: usize = 3;

type Job = Box<dyn FnOnce() + Send + 'static>;

/// The executor job queue is full: the job was not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error(
    "the executor queue is full ({EXECUTOR_QUEUE} jobs waiting for {EXECUTOR_THREADS} threads)"
)]
pub struct QueueFull;

/// A fixed set of threads running blocking jobs in order of submission.
///
/// Idle workers wait on one condition variable and a job wakes exactly one of them. (A
/// channel receiver behind a mutex, as before, woke two threads per job: the one waiting in
/// `recv` and, when it let the mutex go, the next one queued on it, only for it to wait
/// again: one wasted wakeup per session listing on an idle host.)
#[derive(Debug, Clone)]
pub struct WorkerPool {
    shared: Arc<PoolShared>,
    /// The last clone dropped closes the queue (the workers finish what is queued and stop).
    _closer: Arc<PoolCloser>,
    threads: usize,
}

#[derive(Default)]
struct PoolQueue {
    jobs: VecDeque<Job>,
    closed: bool,
}

struct PoolShared {
    queue: Mutex<PoolQueue>,
    wake: Condvar,
    capacity: usize,
}

impl std::fmt::Debug for PoolShared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolShared")
            .field("capacity", &self.capacity)
            .finish_non_exhaustive()
    }
}

impl PoolShared {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolQueue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[derive(Debug)]
struct PoolCloser(Arc<PoolShared>);

impl Drop for PoolCloser {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.wake.notify_all();
    }
}

impl WorkerPool {
    /// Starts `threads` threads named `name-N` with room for `queue` waiting jobs.
    pub fn new(name: &str, threads: usize, queue: usize) -> std::io::Result<WorkerPool> {
        let shared = Arc::new(PoolShared {
            queue: Mutex::new(PoolQueue::default()),
            wake: Condvar::new(),
            capacity: queue,
        });
        for n in 0..threads.max(1) {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name(format!("{name}-{n}"))
                .spawn(move || worker(&shared))?;
        }
        Ok(WorkerPool {
            _closer: Arc::new(PoolCloser(shared.clone())),
            shared,
            threads: threads.max(1),
        })
    }

    /// Queues `job`; never blocks. `Err(QueueFull)`: it will not run.
    pub fn submit(&self, job: impl FnOnce() + Send + 'static) -> Result<(), QueueFull> {
        let mut q = self.shared.lock();
        if q.jobs.len() >= self.shared.capacity {
            return Err(QueueFull);
        }
        q.jobs.push_back(Box::new(job));
        drop(q);
        self.shared.wake.notify_one();
        Ok(())
    }

    /// The number of threads.
    pub fn threads(&self) -> usize {
        self.threads
    }
}

fn worker(shared: &PoolShared) {
    loop {
        let job = {
            let mut q = shared.lock();
            loop {
                if let Some(job) = q.jobs.pop_front() {
                    break job;
                }
                if q.closed {
                    // Every pool handle is gone: the daemon is stopping.
                    return;
                }
                q = shared.wake.wait(q).unwrap_or_else(|p| p.into_inner());
            }
        };
        // A panicking job (a bug) must not shrink the pool.
        if std::panic::catch_unwind(std::panic::AssertUnwindSafe(job)).is_err() {
            tracing::error!("an executor job panicked; the worker carries on");
        }
    }
}

/// Alerts that did not fit in the queue, waiting to be reported as one.
#[derive(Debug, Default)]
struct Coalesced {
    count: u64,
    /// The most urgent severity among them (lowest number).
    severity: Option<Severity>,
    samples: BTreeSet<String>,
}

impl Coalesced {
    fn add(&mut self, alert: &Alert) {
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

type Pending = (Arc<dyn AlertSink>, Alert);

/// The queue and the count of what did not fit, under one lock: the sender can then wait
/// without a timeout while there is nothing to report (an idle daemon's alert thread never
/// wakes), and still never miss a count that arrives while it waits.
#[derive(Default)]
struct State {
    queue: VecDeque<Pending>,
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
    pub fn send(&self, sink: Arc<dyn AlertSink>, alert: Alert) -> Queued {
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
    Alert(Pending),
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
                        let summary = Alert {
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

fn deliver(sink: &dyn AlertSink, alert: &Alert, shared: &Shared) {
    if let Err(e) = sink.send(alert) {
        // "No syslog here" once; a failed send every time.
        if !e.is_unavailable() || !shared.unavailable_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!("{e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::io::syslog::{RecordingSink, SyslogError};

    /// A sink that blocks until released, like a stalled syslog receiver.
    struct Gate {
        open: Mutex<bool>,
        cv: std::sync::Condvar,
        inner: RecordingSink,
        /// Sends begun (the sender holds an alert).
        entered: std::sync::atomic::AtomicUsize,
    }
    impl AlertSink for Gate {
        fn send(&self, alert: &Alert) -> Result<(), SyslogError> {
            self.entered.fetch_add(1, Ordering::SeqCst);
            let mut open = self.open.lock().unwrap();
            while !*open {
                open = self.cv.wait(open).unwrap();
            }
            self.inner.send(alert)
        }
    }

    fn alert(severity: Severity, what: &str) -> Alert {
        Alert {
            severity,
            what: what.into(),
            why: String::new(),
            todo: String::new(),
        }
    }

    #[test]
    fn a_full_alert_queue_coalesces_and_reports_the_count_at_the_most_urgent_severity() {
        let gate = Arc::new(Gate {
            open: Mutex::new(false),
            cv: std::sync::Condvar::new(),
            inner: RecordingSink::default(),
            entered: std::sync::atomic::AtomicUsize::new(0),
        });
        let q = AlertQueue::new(4).unwrap();
        // The sender takes the first alert and stalls on the receiver before the storm, so
        // the whole count rides on one later alert (otherwise how much the sender thread
        // saw before its first take depends on when it was first scheduled).
        assert_eq!(
            q.send(gate.clone(), alert(Severity::Warning, "dev0")),
            Queued::Queued
        );
        let started = std::time::Instant::now();
        while gate.entered.load(Ordering::SeqCst) == 0 {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "sender never started"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let start = std::time::Instant::now();
        let mut coalesced = 0;
        for i in 1..10_000 {
            let sev = if i == 5000 {
                Severity::Crit
            } else {
                Severity::Warning
            };
            if q.send(gate.clone(), alert(sev, &format!("dev{i}"))) == Queued::Coalesced {
                coalesced += 1;
            }
        }
        // Never waited on the stalled receiver, never grew a thread.
        assert!(start.elapsed() < Duration::from_secs(2));
        assert!(coalesced >= 10_000 - 6, "{coalesced}");
        *gate.open.lock().unwrap() = true;
        gate.cv.notify_all();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        let sent = loop {
            let sent = gate.inner.alerts();
            if sent.iter().any(|a| a.why.contains("coalesced")) {
                break sent;
            }
            assert!(
                std::time::Instant::now() < end,
                "no coalesced report: {sent:#?}"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        assert!(sent.len() <= 6, "{sent:#?}");
        let report = sent.iter().find(|a| a.why.contains("coalesced")).unwrap();
        assert!(
            report.why.contains(&format!("{coalesced} more alert(s)")),
            "{report:?}"
        );
        assert_eq!(report.severity, Severity::Crit);
    }

    #[test]
    fn a_job_wakes_one_worker_not_two() {
        // Thread names are cut to 15 bytes by the kernel: "wake-one-0" .. "wake-one-3".
        let pool = WorkerPool::new("wake-one", 4, 8).unwrap();
        std::thread::sleep(Duration::from_millis(100));
        let voluntary = || -> u64 {
            (0..4)
                .flat_map(|n| voluntary_switches_of(&format!("wake-one-{n}")))
                .sum()
        };
        let before = voluntary();
        let jobs = 20u64;
        for _ in 0..jobs {
            let (tx, rx) = std::sync::mpsc::channel();
            pool.submit(move || {
                let _ = tx.send(());
            })
            .unwrap();
            rx.recv().unwrap();
            std::thread::sleep(Duration::from_millis(5));
        }
        let after = voluntary();
        // One wait per job; a mutex-guarded receiver gave two (the next thread woke on the
        // mutex only to wait again).
        let per_job = (after - before) as f64 / jobs as f64;
        assert!(per_job < 1.5, "{per_job} waits per job");
    }

    /// Voluntary context switches (waits) of this process's threads called `name`.
    fn voluntary_switches_of(name: &str) -> Vec<u64> {
        status_counts_of(name, |l| l.starts_with("voluntary_ctxt_switches:"))
    }

    /// Context switches of this process's threads called `name` (each one a wakeup).
    fn switches_of(name: &str) -> Vec<u64> {
        status_counts_of(name, |l| l.contains("ctxt_switches:"))
    }

    /// Per thread called `name`, the sum of the /proc status counters whose lines `pick` takes.
    fn status_counts_of(name: &str, pick: impl Fn(&str) -> bool) -> Vec<u64> {
        let mut out = Vec::new();
        for t in std::fs::read_dir("/proc/self/task").unwrap().flatten() {
            let comm = std::fs::read_to_string(t.path().join("comm")).unwrap_or_default();
            if comm.trim() != name {
                continue;
            }
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            out.push(
                status
                    .lines()
                    .filter(|l| pick(l))
                    .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
                    .sum(),
            );
        }
        out
    }

    #[test]
    fn an_idle_alert_sender_never_wakes_and_a_count_rides_on_the_next_alert() {
        let gate = Arc::new(Gate {
            open: Mutex::new(true),
            cv: std::sync::Condvar::new(),
            inner: RecordingSink::default(),
            entered: std::sync::atomic::AtomicUsize::new(0),
        });
        let q = AlertQueue::named("idle-alerts", 1).unwrap();
        q.send(gate.clone(), alert(Severity::Warning, "first"));
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while gate.inner.alerts().is_empty() {
            assert!(std::time::Instant::now() < end, "first alert never sent");
            std::thread::sleep(Duration::from_millis(5));
        }
        // Idle: the old sender woke every second to look for a count to flush.
        std::thread::sleep(Duration::from_millis(100));
        let before = switches_of("idle-alerts");
        std::thread::sleep(Duration::from_millis(2500));
        let after = switches_of("idle-alerts");
        assert_eq!(before.len(), 1);
        assert_eq!(before, after, "the idle sender woke up");
        // The sender stalls on one alert; a burst the queue (one slot) cannot hold is
        // counted, and the count rides on the alert sent after it.
        *gate.open.lock().unwrap() = false;
        q.send(gate.clone(), alert(Severity::Warning, "stalls"));
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while gate.entered.load(Ordering::SeqCst) < 2 {
            assert!(std::time::Instant::now() < end, "sender never took it");
            std::thread::sleep(Duration::from_millis(1));
        }
        let queued: Vec<Queued> = (0..10)
            .map(|i| q.send(gate.clone(), alert(Severity::Err, &format!("dev{i}"))))
            .collect();
        assert_eq!(queued.first(), Some(&Queued::Queued));
        assert!(queued.iter().skip(1).all(|q| *q == Queued::Coalesced));
        *gate.open.lock().unwrap() = true;
        gate.cv.notify_all();
        let end = std::time::Instant::now() + Duration::from_secs(5);
        loop {
            let sent = gate.inner.alerts();
            if let Some(a) = sent.iter().find(|a| a.what == "dev0") {
                assert!(a.why.contains("9 more alert(s) coalesced"), "{a:?}");
                assert_eq!(a.severity, Severity::Err);
                break;
            }
            assert!(std::time::Instant::now() < end, "{sent:#?}");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Dropping the last handle stops the thread.
        drop(q);
        let end = std::time::Instant::now() + Duration::from_secs(5);
        while !switches_of("idle-alerts").is_empty() {
            assert!(
                std::time::Instant::now() < end,
                "sender thread still running"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    #[test]
    fn the_pool_runs_jobs_on_a_fixed_set_of_threads_and_refuses_beyond_its_queue() {
        let pool = WorkerPool::new("test-exec", 2, 3).unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let release = Arc::new((Mutex::new(false), std::sync::Condvar::new()));
        let mut refused = 0;
        for i in 0..100 {
            let tx = tx.clone();
            let release = release.clone();
            let job = move || {
                let (m, cv) = &*release;
                let mut open = m.lock().unwrap();
                while !*open {
                    open = cv.wait(open).unwrap();
                }
                let _ = tx.send((i, std::thread::current().name().map(str::to_string)));
            };
            if pool.submit(job).is_err() {
                refused += 1;
            }
        }
        // 2 running + 3 queued accepted (a worker may not have picked its job up yet).
        assert!((95..=97).contains(&refused), "{refused}");
        *release.0.lock().unwrap() = true;
        release.1.notify_all();
        drop(tx);
        let ran: Vec<_> = rx.iter().collect();
        assert_eq!(ran.len(), 100 - refused);
        assert!(ran
            .iter()
            .all(|(_, n)| n.as_deref().is_some_and(|n| n.starts_with("test-exec-"))));
    }
}
