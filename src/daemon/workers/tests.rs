//! The pool and the alert sender under load: fixed threads, refusals, coalescing, and no
//! wakeup when idle.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::*;
use crate::core::severity::Severity;
use crate::io::syslog::{AlertMessage, AlertSink, RecordingSink, SyslogError};

/// A sink that blocks until released, like a stalled syslog receiver.
struct Gate {
    open: Mutex<bool>,
    cv: std::sync::Condvar,
    inner: RecordingSink,
    /// Sends begun (the sender holds an alert).
    entered: std::sync::atomic::AtomicUsize,
}
impl AlertSink for Gate {
    fn send(&self, alert: &AlertMessage) -> Result<(), SyslogError> {
        self.entered.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.lock().unwrap();
        while !*open {
            open = self.cv.wait(open).unwrap();
        }
        self.inner.send(alert)
    }
}

fn alert(severity: Severity, what: &str) -> AlertMessage {
    AlertMessage {
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
