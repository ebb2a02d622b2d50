//! `doctor --active DEVICE`: the self-test, then one timed re-creation per method the host
//! offers, each with the device's sessions logged in and a direct-I/O read running, each
//! step recorded (its time, the kernel's lines meanwhile, the new QP 1's state, whether the
//! sessions came back); the run stops at the first step that fails or hangs.
//!
//! Everything it does goes through the executors' traits (the resetter, the self-test,
//! iscsiadm) and three of its own here ([`KernelLines`], [`GsiReader`], [`DiskReader`]), so
//! tests run it with doubles. What the plan is and whether a step passed are the core's
//! ([`crate::core::doctor::active`]). A re-creation that does not return within its time is
//! left running on its thread and reported as hung: a step blocked in the kernel cannot be
//! cancelled, only abandoned.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use crate::core::doctor::active::{
    judge, ActivePlan, ActiveReport, IoRecord, MethodOutcome, MethodRun, SessionBack, StepRecord,
    WatchedSession,
};
use crate::core::doctor::{Facts, RdmaDevice};
use crate::core::iscsi::NodeId;
use crate::core::reset_plan::ResetMethod;
use crate::core::selftest::SelfTestResult;
use crate::io::iscsiadm::IscsiAdm;
use crate::io::reset::{DeviceResetter, StepTiming};
use crate::io::selftest::PortSelfTest;

/// The kernel's log lines printed while a step runs.
pub trait KernelLines: Send {
    /// Only lines printed from now on count.
    fn mark(&mut self);
    /// The lines printed since the mark.
    fn take(&mut self) -> Vec<String>;
}

/// QP 1 of each port of a device, from the live QP table.
pub trait GsiReader: Send + Sync {
    /// `(port, state)` for every port of `device` that has a GSI QP.
    fn gsi(&self, device: &str) -> Result<Vec<(u32, String)>, GsiError>;
}

/// Why QP 1 could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GsiError {
    /// There is no QP table to ask (no RDMA netlink): waiting cannot help.
    Unavailable(String),
    /// Not now (the device is not listed yet, a dump failed): asked again until the wait ends.
    NotYet(String),
}

impl std::fmt::Display for GsiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            GsiError::Unavailable(s) | GsiError::NotYet(s) => f.write_str(s),
        }
    }
}

/// One direct-I/O read of a disk (`sdb`).
pub trait DiskReader: Send + Sync {
    /// Reads a block; `Err` with the OS's words.
    fn read(&self, disk: &str) -> Result<(), String>;
}

/// What the run uses.
pub struct ActiveDeps {
    /// Re-creates the device, one method at a time.
    pub resetter: Arc<dyn DeviceResetter>,
    /// The port self-test.
    pub selftest: Arc<dyn PortSelfTest>,
    /// iscsiadm: the sessions, and the login after the grace.
    pub iscsi: Arc<dyn IscsiAdm>,
    /// The QP table.
    pub gsi: Arc<dyn GsiReader>,
    /// Direct-I/O reads.
    pub disks: Arc<dyn DiskReader>,
    /// The kernel's log.
    pub kernel: Box<dyn KernelLines>,
}

/// How long each wait of the run may take.
#[derive(Debug, Clone)]
pub struct ActiveTiming {
    /// One re-creation, from its first step to the device being back: past it, hung.
    pub recreate: Duration,
    /// For QP 1 of the new device to reach RTS.
    pub gsi: Duration,
    /// iscsid's chance to log the sessions back in (`recovery.iscsid-grace`).
    pub grace: Duration,
    /// After the run's own login, for the sessions and a working read
    /// (`recovery.verify-timeout`).
    pub verify: Duration,
    /// One self-test.
    pub selftest: Duration,
    /// Between two direct-I/O reads, and between two polls.
    pub every: Duration,
}

impl Default for ActiveTiming {
    fn default() -> Self {
        ActiveTiming {
            recreate: Duration::from_secs(135),
            gsi: Duration::from_secs(10),
            grace: Duration::from_secs(20),
            verify: Duration::from_secs(60),
            selftest: Duration::from_secs(10),
            every: Duration::from_millis(200),
        }
    }
}

/// The plan for `device` from the passive audit's facts; `Err` (with the exit status the
/// command gives) when there is nothing to run.
pub fn plan(facts: &Facts, device: &str, t: &ActiveTiming) -> Result<ActivePlan, PlanRefusal> {
    let Some(d) = facts.rdma.devices.iter().find(|d| d.name == device) else {
        return Err(PlanRefusal::NoDevice {
            device: device.to_string(),
            present: facts.rdma.devices.iter().map(|d| d.name.clone()).collect(),
        });
    };
    let recreate = d.recreate.as_ref().map_err(|why| PlanRefusal::NoMethod {
        device: device.to_string(),
        why: why.clone(),
    })?;
    if recreate.methods.is_empty() {
        return Err(PlanRefusal::NoMethod {
            device: device.to_string(),
            why: recreate.skipped.join("; "),
        });
    }
    let mut skipped = recreate.skipped.clone();
    let mut sessions = Vec::new();
    if let Ok(list) = &facts.iscsi.sessions {
        for s in list.iter().filter(|s| on(s.port.as_ref(), d)) {
            if s.state == "LOGGED_IN" {
                sessions.push(WatchedSession {
                    sid: s.sid,
                    target: s.target.clone(),
                    portal: s.portal.clone(),
                    iface: s.iface.clone(),
                    disk: s.disks.first().cloned(),
                });
            } else {
                skipped.push(format!(
                    "watching session {} ({} at {}): it is {}, not logged in",
                    s.sid, s.target, s.portal, s.state
                ));
            }
        }
    }
    Ok(ActivePlan {
        device: device.to_string(),
        ports: d.ports.iter().map(|p| p.port).collect(),
        methods: recreate.methods.iter().map(|(m, _)| m.clone()).collect(),
        skipped,
        sessions,
        iscsid_grace_s: t.grace.as_secs_f64(),
        step_timeout_s: t.recreate.as_secs_f64(),
    })
}

fn on(port: Option<&(String, u32)>, d: &RdmaDevice) -> bool {
    port.is_some_and(|(dev, _)| *dev == d.name)
}

/// Why there is nothing to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanRefusal {
    /// No such device on this host.
    NoDevice {
        /// The device asked for.
        device: String,
        /// Those that exist.
        present: Vec<String>,
    },
    /// The device cannot be re-created here.
    NoMethod {
        /// The device.
        device: String,
        /// Why.
        why: String,
    },
}

impl std::fmt::Display for PlanRefusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PlanRefusal::NoDevice { device, present } => write!(
                f,
                "no RDMA device {device} on this host; {}",
                if present.is_empty() {
                    "it has none".to_string()
                } else {
                    format!("it has {}", present.join(", "))
                }
            ),
            PlanRefusal::NoMethod { device, why } => {
                write!(f, "no way to re-create {device} here: {why}")
            }
        }
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Runs `plan`, telling `progress` each step as it starts and ends. `started` is the UTC
/// time the report is stamped with.
pub fn run(
    plan: &ActivePlan,
    deps: &mut ActiveDeps,
    t: &ActiveTiming,
    started: String,
    progress: &dyn Fn(&str),
) -> ActiveReport {
    let mut report = ActiveReport {
        plan: plan.clone(),
        started,
        selftest: Vec::new(),
        methods: Vec::new(),
        stopped: None,
    };
    for &port in &plan.ports {
        progress(&format!("self-test of {}/{port}", plan.device));
        let r = deps.selftest.run(&plan.device, port, t.selftest);
        progress(&format!("  {}", selftest_line(&r)));
        report.selftest.push(r);
    }
    if let Some(why) = report.selftest_failure() {
        progress(&format!("stopping: {why}"));
        report.stopped = Some(why);
        return report;
    }
    let mut device = plan.device.clone();
    for (i, method) in plan.methods.iter().enumerate() {
        progress(&format!(
            "method {} of {}: {method}",
            i + 1,
            plan.methods.len()
        ));
        let run = run_method(plan, &device, method, deps, t, progress);
        if let Some(name) = run
            .steps
            .iter()
            .find_map(|s| s.detail.strip_prefix("back as ").map(str::to_string))
        {
            device = name;
        }
        let outcome = run.outcome.clone();
        progress(&format!("  {}", outcome_line(&outcome)));
        report.methods.push(run);
        if outcome != MethodOutcome::Passed {
            report.stopped = Some(format!(
                "stopped after method {} ({method}): {}",
                i + 1,
                outcome_line(&outcome)
            ));
            break;
        }
    }
    report
}

fn outcome_line(o: &MethodOutcome) -> String {
    match o {
        MethodOutcome::Passed => {
            "passed: the device is back, QP 1 in RTS, the sessions and their I/O back".into()
        }
        MethodOutcome::Failed { why } => format!("FAILED: {why}"),
        MethodOutcome::Hung { step, after_ms } => format!(
            "HUNG: {step} had not returned after {:.1} s (it may be blocked in the kernel: \
             see `cat /proc/PID/stack` of the devlink or the writer, and dmesg)",
            *after_ms as f64 / 1000.0
        ),
    }
}

fn selftest_line(r: &SelfTestResult) -> String {
    match r {
        SelfTestResult::Ran(rep) => rep.summary(),
        SelfTestResult::Unavailable { reason } => format!("self-test not available: {reason}"),
    }
}

/// One direct-I/O read's end and result.
type DiskRead = (Instant, Result<(), String>);

/// The reader loop of one re-creation: reads every disk every `every` until stopped.
struct IoLoop {
    stop: Arc<AtomicBool>,
    reads: Arc<Mutex<Vec<DiskRead>>>,
    started: Instant,
    disks: Vec<String>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl IoLoop {
    fn start(disks: Vec<String>, reader: Arc<dyn DiskReader>, every: Duration) -> IoLoop {
        let stop = Arc::new(AtomicBool::new(false));
        let reads = Arc::new(Mutex::new(Vec::new()));
        let handle = (!disks.is_empty()).then(|| {
            let (stop, reads, disks) = (stop.clone(), reads.clone(), disks.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    for d in &disks {
                        let r = reader.read(d).map_err(|e| format!("{d}: {e}"));
                        reads
                            .lock()
                            .unwrap_or_else(|p| p.into_inner())
                            .push((Instant::now(), r));
                    }
                    std::thread::sleep(every);
                }
            })
        });
        IoLoop {
            stop,
            reads,
            started: Instant::now(),
            disks,
            handle,
        }
    }

    /// The last read worked (false while none happened).
    fn last_ok(&self) -> bool {
        self.reads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .is_some_and(|(_, r)| r.is_ok())
    }

    /// Stops the loop (a read blocked in the kernel is left to finish on its own) and sums
    /// it up.
    fn finish(mut self, every: Duration) -> IoRecord {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            // A read stuck on a FAILED session would hold us: wait a little, then leave it.
            let end = Instant::now() + every * 5;
            while !h.is_finished() && Instant::now() < end {
                std::thread::sleep(every / 4);
            }
            if h.is_finished() {
                let _ = h.join();
            }
        }
        let reads = self.reads.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut rec = IoRecord {
            disks: self.disks,
            ..IoRecord::default()
        };
        let mut last_ok = self.started;
        for (at, r) in &reads {
            match r {
                Ok(()) => {
                    rec.ok += 1;
                    rec.longest_stall_ms = rec.longest_stall_ms.max(ms(*at - last_ok));
                    last_ok = *at;
                }
                Err(e) => {
                    rec.failed += 1;
                    rec.first_error.get_or_insert_with(|| e.clone());
                }
            }
        }
        rec.ok_at_end = reads.last().is_some_and(|(_, r)| r.is_ok());
        rec
    }
}

fn run_method(
    plan: &ActivePlan,
    device: &str,
    method: &ResetMethod,
    deps: &mut ActiveDeps,
    t: &ActiveTiming,
    progress: &dyn Fn(&str),
) -> MethodRun {
    let mut run = MethodRun {
        method: method.clone(),
        steps: Vec::new(),
        kernel_lines: Vec::new(),
        gsi_after: Vec::new(),
        sessions: Vec::new(),
        io: IoRecord::default(),
        selftest_after: Vec::new(),
        outcome: MethodOutcome::Passed,
    };
    deps.kernel.mark();
    let disks: Vec<String> = plan
        .sessions
        .iter()
        .filter_map(|s| s.disk.clone())
        .collect();
    let io = IoLoop::start(disks, deps.disks.clone(), t.every);

    // The re-creation, on its own thread: past its time it is abandoned, reported as hung.
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let (resetter, dev, m) = (deps.resetter.clone(), device.to_string(), method.clone());
    std::thread::spawn(move || {
        let mut steps: Vec<StepTiming> = Vec::new();
        let r = resetter.recreate_by(&dev, &m, &mut steps);
        let _ = tx.send((r, steps));
    });
    let answer = rx.recv_timeout(t.recreate);
    let took = started.elapsed();
    let new_name = match answer {
        Err(_) => {
            run.steps.push(StepRecord {
                name: format!("re-create {device}: {method}"),
                took_ms: ms(took),
                ok: false,
                detail: "no answer: the step is still running".into(),
            });
            run.kernel_lines = deps.kernel.take();
            run.io = io.finish(t.every);
            run.outcome = MethodOutcome::Hung {
                step: format!("re-creating {device} ({method})"),
                after_ms: ms(took),
            };
            return run;
        }
        Ok((result, steps)) => {
            for s in steps {
                run.steps.push(StepRecord {
                    name: s.step,
                    took_ms: s.took_ms,
                    ok: s.ok,
                    detail: String::new(),
                });
            }
            match result {
                Ok(r) => {
                    run.steps.push(StepRecord {
                        name: format!("re-create {device}: {method}"),
                        took_ms: ms(took),
                        ok: true,
                        detail: format!("back as {}", r.new_name),
                    });
                    progress(&format!(
                        "  re-created in {:.2} s, back as {}",
                        took.as_secs_f64(),
                        r.new_name
                    ));
                    r.new_name
                }
                Err(e) => {
                    run.steps.push(StepRecord {
                        name: format!("re-create {device}: {method}"),
                        took_ms: ms(took),
                        ok: false,
                        detail: e.to_string(),
                    });
                    run.kernel_lines = deps.kernel.take();
                    run.io = io.finish(t.every);
                    run.outcome = judge(&run);
                    return run;
                }
            }
        }
    };

    // QP 1 of the new device.
    let gsi_start = Instant::now();
    let last = loop {
        let last = deps.gsi.gsi(&new_name);
        let all_rts = last.as_ref().is_ok_and(|v| {
            plan.ports
                .iter()
                .all(|p| v.iter().any(|(q, s)| q == p && s == "RTS"))
        });
        let hopeless = matches!(last, Err(GsiError::Unavailable(_)));
        if all_rts || hopeless || gsi_start.elapsed() >= t.gsi {
            break last;
        }
        std::thread::sleep(t.every);
    };
    run.gsi_after = plan
        .ports
        .iter()
        .map(|p| {
            (
                *p,
                last.as_ref()
                    .ok()
                    .and_then(|v| v.iter().find(|(q, _)| q == p).map(|(_, s)| s.clone())),
            )
        })
        .collect();
    run.steps.push(StepRecord {
        name: "QP 1 of the new device".into(),
        took_ms: ms(gsi_start.elapsed()),
        ok: true,
        detail: match &last {
            Ok(_) => run
                .gsi_after
                .iter()
                .map(|(p, s)| format!("port {p}: {}", s.as_deref().unwrap_or("none")))
                .collect::<Vec<_>>()
                .join(", "),
            Err(e) => format!("the QP table could not be read: {e}"),
        },
    });
    progress(&format!(
        "  QP 1: {}",
        run.steps.last().map(|s| s.detail.as_str()).unwrap_or("")
    ));

    // The sessions: iscsid's grace, then the run's own login.
    let back_start = Instant::now();
    run.sessions = sessions_back(plan, deps.iscsi.as_ref(), t, back_start, progress);
    run.steps.push(StepRecord {
        name: "sessions back".into(),
        took_ms: ms(back_start.elapsed()),
        ok: true,
        detail: run
            .sessions
            .iter()
            .map(|s| {
                format!(
                    "{} at {}: {}",
                    s.target,
                    s.portal,
                    match (&s.by, s.after_ms) {
                        (Some(by), Some(a)) if s.back =>
                            format!("back after {:.1} s ({by})", a as f64 / 1000.0),
                        _ => "NOT back".into(),
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("; "),
    });

    // I/O: with the sessions back, wait (bounded) for a read that works; then stop the
    // reader.
    let io_end = Instant::now() + t.verify;
    let sessions_back = run.sessions.iter().all(|s| s.back);
    while sessions_back && !io.disks.is_empty() && !io.last_ok() && Instant::now() < io_end {
        std::thread::sleep(t.every);
    }
    // One more read round after everything is back, so the last read says how it is now.
    std::thread::sleep(t.every * 2);
    run.io = io.finish(t.every);
    if !run.io.disks.is_empty() {
        progress(&format!(
            "  direct I/O: {} reads ok, {} failed, longest stall {:.1} s, {}",
            run.io.ok,
            run.io.failed,
            run.io.longest_stall_ms as f64 / 1000.0,
            if run.io.ok_at_end {
                "working"
            } else {
                "NOT working"
            }
        ));
    }

    for &port in &plan.ports {
        let r = deps.selftest.run(&new_name, port, t.selftest);
        progress(&format!(
            "  self-test of {new_name}/{port}: {}",
            selftest_line(&r)
        ));
        run.selftest_after.push(r);
    }
    run.kernel_lines = deps.kernel.take();
    run.outcome = judge(&run);
    run
}

fn node(s: &WatchedSession) -> NodeId {
    let (address, port) = match s.portal.rsplit_once(':') {
        Some((a, p)) => (
            a.trim_start_matches('[').trim_end_matches(']').to_string(),
            p.parse().unwrap_or(3260),
        ),
        None => (s.portal.clone(), 3260),
    };
    NodeId {
        target: s.target.clone(),
        address,
        port,
        iface: Some(s.iface.clone()),
    }
}

/// Which watched sessions are logged in now, with their new sids.
fn logged_in(plan: &ActivePlan, iscsi: &dyn IscsiAdm) -> Vec<Option<u32>> {
    let listed = iscsi.session_details().map(|p| p.items).unwrap_or_default();
    plan.sessions
        .iter()
        .map(|w| {
            let n = node(w);
            listed
                .iter()
                .find(|d| {
                    d.is_logged_in()
                        && d.target == w.target
                        && d.node_id()
                            .is_some_and(|id| id.address == n.address && id.port == n.port)
                })
                .map(|d| d.sid)
        })
        .collect()
}

fn sessions_back(
    plan: &ActivePlan,
    iscsi: &dyn IscsiAdm,
    t: &ActiveTiming,
    from: Instant,
    progress: &dyn Fn(&str),
) -> Vec<SessionBack> {
    let mut out: Vec<SessionBack> = plan
        .sessions
        .iter()
        .map(|s| SessionBack {
            target: s.target.clone(),
            portal: s.portal.clone(),
            back: false,
            after_ms: None,
            by: None,
            sid: None,
        })
        .collect();
    let wait = |deadline: Instant, by: &str, out: &mut Vec<SessionBack>| loop {
        for (o, sid) in out.iter_mut().zip(logged_in(plan, iscsi)) {
            if let (false, Some(sid)) = (o.back, sid) {
                o.back = true;
                o.sid = Some(sid);
                o.after_ms = Some(ms(from.elapsed()));
                o.by = Some(by.to_string());
            }
        }
        if out.iter().all(|o| o.back) || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(t.every);
    };
    wait(from + t.grace, "iscsid", &mut out);
    let missing: Vec<usize> = (0..out.len()).filter(|i| !out[*i].back).collect();
    if missing.is_empty() {
        return out;
    }
    for i in &missing {
        let s = &plan.sessions[*i];
        progress(&format!(
            "  session {} at {} not back after {:.0} s: iscsiadm login",
            s.target,
            s.portal,
            t.grace.as_secs_f64()
        ));
        if let Err(e) = iscsi.login(&node(s)) {
            progress(&format!("  login failed: {e}"));
        }
    }
    wait(Instant::now() + t.verify, "iscsiadm login", &mut out);
    out
}

/// Where the report goes by default: `<state-dir>/doctor-active-DEVICE-YYYYMMDDTHHMMSSZ.json`.
pub fn default_report_path(state_dir: &std::path::Path, device: &str, utc: &str) -> PathBuf {
    let stamp: String = utc
        .chars()
        .filter_map(|c| match c {
            '-' | ':' => None,
            ' ' => Some('T'),
            c => Some(c),
        })
        .collect();
    state_dir.join(format!("doctor-active-{device}-{stamp}.json"))
}

/// The kernel's log at `paths.kmsg`, or why it cannot be read (the lines then say so).
pub struct KmsgLines(pub Result<crate::io::kmsg_tail::KmsgTail, String>);

impl KmsgLines {
    /// Opens `path` at its end.
    pub fn open(path: &std::path::Path) -> KmsgLines {
        KmsgLines(
            crate::io::kmsg_tail::KmsgTail::open(path)
                .map_err(|e| format!("{}: {e}", path.display())),
        )
    }
}

impl KernelLines for KmsgLines {
    fn mark(&mut self) {
        if let Ok(t) = &mut self.0 {
            if let Err(e) = t.mark() {
                self.0 = Err(format!("cannot seek the kernel log: {e}"));
            }
        }
    }

    fn take(&mut self) -> Vec<String> {
        match &mut self.0 {
            Ok(t) => t.take(),
            Err(why) => vec![format!("(the kernel log was not read: {why})")],
        }
    }
}

/// QP 1 from RDMA netlink, one connection per question.
#[derive(Debug, Clone, Copy, Default)]
pub struct NetlinkGsi;

impl GsiReader for NetlinkGsi {
    fn gsi(&self, device: &str) -> Result<Vec<(u32, String)>, GsiError> {
        let unavailable = |e: crate::io::netlink::NetlinkError| {
            if e.is_unavailable() {
                GsiError::Unavailable(e.to_string())
            } else {
                GsiError::NotYet(e.to_string())
            }
        };
        let mut c = crate::io::netlink::NldevClient::open().map_err(unavailable)?;
        let mut skips = crate::io::netlink::Skips::default();
        let devices = c.devices(&mut skips).map_err(unavailable)?;
        let d = devices
            .iter()
            .find(|d| d.name == device)
            .ok_or_else(|| GsiError::NotYet(format!("RDMA netlink does not list {device}")))?;
        let qps = c
            .qps(d.index, &mut skips)
            .map_err(|e| GsiError::NotYet(e.to_string()))?;
        Ok(qps
            .iter()
            .filter(|q| q.is_gsi())
            .filter_map(|q| q.port.map(|p| (p, q.state.name().to_string())))
            .collect())
    }
}

/// Direct-I/O reads of `<paths.dev-root>/DISK`.
#[derive(Debug, Clone)]
pub struct DirectDisks {
    /// `paths.dev-root`.
    pub dev_root: PathBuf,
}

impl DiskReader for DirectDisks {
    fn read(&self, disk: &str) -> Result<(), String> {
        crate::io::direct_read::read_direct(&self.dev_root.join(disk)).map_err(|e| e.to_string())
    }
}

/// The node records of the watched sessions as they are on disk, every CHAP secret
/// replaced: `(path, text)`.
pub fn node_record_texts(iscsi_dir: &std::path::Path, plan: &ActivePlan) -> Vec<(String, String)> {
    use crate::core::doctor::parse::redact_iscsi_secrets;
    let mut out = Vec::new();
    for s in &plan.sessions {
        let n = node(s);
        let dir = iscsi_dir.join("nodes").join(&s.target);
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        let prefix = format!("{},{},", n.address, n.port);
        for e in rd.flatten() {
            if !e.file_name().to_string_lossy().starts_with(&prefix) {
                continue;
            }
            let files: Vec<PathBuf> = if e.path().is_dir() {
                std::fs::read_dir(e.path())
                    .map(|r| r.flatten().map(|f| f.path()).collect())
                    .unwrap_or_default()
            } else {
                vec![e.path()]
            };
            for f in files {
                if let Ok(text) = std::fs::read_to_string(&f) {
                    out.push((f.display().to_string(), redact_iscsi_secrets(&text)));
                }
            }
        }
    }
    out.sort();
    out
}
