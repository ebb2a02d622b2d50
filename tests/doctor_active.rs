//! `doctor --active`'s run ([`iser_guard::doctor::active::run`]) with the executors'
//! doubles: the scripted resetter and self-test, an iscsiadm whose session state the test
//! sets, and doubles of its own readers (QP 1, direct I/O, the kernel's lines). What each
//! method's record holds, and where the run stops: a failed self-test, a failed or hung
//! re-creation, QP 1 not in RTS, sessions that iscsid does not bring back.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iser_guard::core::doctor::active::{ActivePlan, MethodOutcome, WatchedSession};
use iser_guard::core::iscsi::NodeId;
use iser_guard::core::reset_plan::{AuxFacts, DevlinkParam, ResetMethod};
use iser_guard::core::selftest::{SelfTestReport, SelfTestResult, SelfTestStep};
use iser_guard::doctor::active::{
    run, ActiveDeps, ActiveTiming, DiskReader, GsiError, GsiReader, KernelLines,
};
use iser_guard::io::iscsiadm::{
    IscsiAdm, IscsiadmError, LoginOutcome, LogoutOutcome, NodeOutcome, SessionListing,
};
use iser_guard::io::reset::{
    DeviceResetter, Recreated, ResetError, ResetOutcome, ResetPlan, ScriptedResetter, StepTiming,
};
use iser_guard::io::selftest_scripted::ScriptedSelfTest;

const P3_LOGGED_IN: &str = include_str!("fixtures/stubs/iscsiadm.d/session-P3-loggedin.txt");
const P3_FAILED: &str = include_str!("fixtures/stubs/iscsiadm.d/session-P3-failed.txt");
const TARGET: &str = "iqn.2003-01.org.example.lab:tgt0";

fn methods() -> Vec<ResetMethod> {
    vec![
        ResetMethod::DevlinkToggle {
            handle: "pci/0000:02:00.0".into(),
            param: DevlinkParam::EnableRoce,
        },
        ResetMethod::AuxRebind {
            device: "ice.roce.0".into(),
            driver: "irdma".into(),
        },
    ]
}

fn plan() -> ActivePlan {
    ActivePlan {
        device: "rocep2s0f0".into(),
        ports: vec![1],
        methods: methods(),
        skipped: vec![],
        sessions: vec![WatchedSession {
            sid: 2,
            target: TARGET.into(),
            portal: "192.0.2.2:3260".into(),
            iface: "iser".into(),
            disk: Some("sda".into()),
        }],
        iscsid_grace_s: 0.3,
        step_timeout_s: 1.0,
    }
}

fn timing() -> ActiveTiming {
    ActiveTiming {
        recreate: Duration::from_secs(1),
        gsi: Duration::from_millis(300),
        grace: Duration::from_millis(300),
        verify: Duration::from_secs(2),
        selftest: Duration::from_secs(1),
        every: Duration::from_millis(10),
    }
}

fn passed_selftest(port: u32) -> SelfTestResult {
    SelfTestResult::Ran(SelfTestReport {
        device: "rocep2s0f0".into(),
        port,
        steps: vec![SelfTestStep {
            name: "cm-connect".into(),
            took: Duration::from_millis(3),
            ok: true,
            detail: "connected".into(),
        }],
    })
}

/// iscsiadm with one session whose state the test (or a login) sets.
#[derive(Default)]
struct Iscsi {
    logged_in: Mutex<bool>,
    /// Listings before iscsid "logs the session back in" by itself (None: never).
    back_after: Mutex<Option<u32>>,
    listings: AtomicU32,
    logins: Mutex<Vec<NodeId>>,
}

impl Iscsi {
    fn back_after(n: Option<u32>) -> Arc<Iscsi> {
        Arc::new(Iscsi {
            logged_in: Mutex::new(false),
            back_after: Mutex::new(n),
            ..Iscsi::default()
        })
    }
}

impl IscsiAdm for Iscsi {
    fn sessions(&self, _detail: bool) -> Result<SessionListing, IscsiadmError> {
        let n = self.listings.fetch_add(1, Ordering::SeqCst);
        let mut up = self.logged_in.lock().unwrap();
        if self
            .back_after
            .lock()
            .unwrap()
            .is_some_and(|after| n >= after)
        {
            *up = true;
        }
        Ok(SessionListing::Text(
            if *up { P3_LOGGED_IN } else { P3_FAILED }.to_string(),
        ))
    }
    fn login(&self, node: &NodeId) -> Result<LoginOutcome, IscsiadmError> {
        self.logins.lock().unwrap().push(node.clone());
        *self.logged_in.lock().unwrap() = true;
        Ok(LoginOutcome::LoggedIn)
    }
    fn logout(&self, _: &NodeId) -> Result<LogoutOutcome, IscsiadmError> {
        Ok(LogoutOutcome::LoggedOut)
    }
    fn rescan(&self, _: u32) -> Result<(), IscsiadmError> {
        Ok(())
    }
    fn create_node(&self, _: &NodeId) -> Result<NodeOutcome, IscsiadmError> {
        Ok(NodeOutcome::Written)
    }
    fn update_node(&self, _: &NodeId, _: &str, _: &str) -> Result<NodeOutcome, IscsiadmError> {
        Ok(NodeOutcome::Written)
    }
}

/// QP 1 in the given state, or no QP table at all.
struct Gsi(Result<&'static str, GsiError>);

impl GsiReader for Gsi {
    fn gsi(&self, _device: &str) -> Result<Vec<(u32, String)>, GsiError> {
        self.0.clone().map(|s| vec![(1, s.to_string())])
    }
}

/// Reads fail for the first `fail_first` reads after each `reset()`.
#[derive(Default)]
struct Disk {
    reads: AtomicU32,
    fail_first: u32,
}

impl DiskReader for Disk {
    fn read(&self, disk: &str) -> Result<(), String> {
        assert_eq!(disk, "sda");
        let n = self.reads.fetch_add(1, Ordering::SeqCst);
        if n < self.fail_first {
            Err("Input/output error (os error 5)".into())
        } else {
            Ok(())
        }
    }
}

/// Kernel lines: one numbered line per take.
#[derive(Default)]
struct Kernel {
    marks: Arc<AtomicU32>,
}

impl KernelLines for Kernel {
    fn mark(&mut self) {
        self.marks.fetch_add(1, Ordering::SeqCst);
    }
    fn take(&mut self) -> Vec<String> {
        vec![format!(
            "[  12.000000] infiniband rocep2s0f0: line of method {}",
            self.marks.load(Ordering::SeqCst)
        )]
    }
}

fn deps(
    resetter: Arc<dyn DeviceResetter>,
    selftest: Arc<ScriptedSelfTest>,
    iscsi: Arc<Iscsi>,
    gsi: Gsi,
    disk: Arc<Disk>,
) -> ActiveDeps {
    ActiveDeps {
        resetter,
        selftest,
        iscsi,
        gsi: Arc::new(gsi),
        disks: disk,
        kernel: Box::new(Kernel::default()),
    }
}

fn quiet(_: &str) {}

#[test]
fn every_method_runs_on_its_own_and_its_record_says_what_happened() {
    let resetter = Arc::new(ScriptedResetter::default());
    let selftest = Arc::new(ScriptedSelfTest::default());
    selftest.push((0..3).map(|_| passed_selftest(1)));
    // iscsid brings the session back by itself after a few listings.
    let iscsi = Iscsi::back_after(Some(3));
    *iscsi.logged_in.lock().unwrap() = true;
    let disk = Arc::new(Disk {
        fail_first: 3,
        ..Disk::default()
    });
    let mut d = deps(
        resetter.clone(),
        selftest.clone(),
        iscsi.clone(),
        Gsi(Ok("RTS")),
        disk,
    );
    let lines = Mutex::new(Vec::new());
    let r = run(
        &plan(),
        &mut d,
        &timing(),
        "2026-12-03 10:00:00Z".into(),
        &|m| lines.lock().unwrap().push(m.to_string()),
    );
    assert!(r.passed(), "{r:#?}");
    assert_eq!(r.stopped, None);
    // One re-creation per method, in order, each by that method alone.
    assert_eq!(
        resetter.calls(),
        [
            ("rocep2s0f0".to_string(), false),
            ("rocep2s0f0".to_string(), false)
        ]
    );
    assert_eq!(r.methods.len(), 2);
    for (run, m) in r.methods.iter().zip(methods()) {
        assert_eq!(run.method, m);
        assert_eq!(run.outcome, MethodOutcome::Passed);
        assert_eq!(run.gsi_after, vec![(1, Some("RTS".to_string()))]);
        assert!(run
            .steps
            .iter()
            .any(|s| s.name == format!("scripted {}", m.kind())));
        assert!(run.steps.iter().any(
            |s| s.name.starts_with("re-create rocep2s0f0") && s.detail == "back as rocep2s0f0"
        ));
        assert_eq!(run.sessions.len(), 1);
        assert!(run.sessions[0].back);
        assert_eq!(run.sessions[0].sid, Some(2));
        assert!(run.io.ok_at_end && run.io.ok > 0, "{:?}", run.io);
        assert_eq!(run.selftest_after.len(), 1);
    }
    // The first method's reads met the failures.
    assert_eq!(r.methods[0].io.failed, 3);
    assert_eq!(
        r.methods[0].io.first_error.as_deref(),
        Some("sda: Input/output error (os error 5)")
    );
    // Each method keeps the kernel lines of its own window.
    assert!(r.methods[0].kernel_lines[0].ends_with("line of method 1"));
    assert!(r.methods[1].kernel_lines[0].ends_with("line of method 2"));
    // Self-test before, and after each method.
    assert_eq!(selftest.calls().len(), 3);
    assert!(
        iscsi.logins.lock().unwrap().is_empty(),
        "iscsid brought it back"
    );
    let lines = lines.into_inner().unwrap();
    assert!(lines
        .iter()
        .any(|l| l.starts_with("method 2 of 2: unbind/bind")));
}

#[test]
fn a_failed_self_test_stops_the_run_before_any_re_creation() {
    let resetter = Arc::new(ScriptedResetter::default());
    let selftest = Arc::new(ScriptedSelfTest::default());
    selftest.push([SelfTestResult::Ran(SelfTestReport {
        device: "rocep2s0f0".into(),
        port: 1,
        steps: vec![SelfTestStep {
            name: "cm-connect".into(),
            took: Duration::from_secs(1),
            ok: false,
            detail: "no answer within 1 s".into(),
        }],
    })]);
    let mut d = deps(
        resetter.clone(),
        selftest,
        Iscsi::back_after(Some(0)),
        Gsi(Ok("RTS")),
        Arc::new(Disk::default()),
    );
    let r = run(&plan(), &mut d, &timing(), String::new(), &quiet);
    assert!(!r.passed());
    assert!(r.methods.is_empty());
    assert!(r.stopped.unwrap().contains("failed before any re-creation"));
    assert!(resetter.calls().is_empty());
}

#[test]
fn a_failed_method_stops_the_run_and_the_next_is_not_tried() {
    let resetter = Arc::new(ScriptedResetter::default());
    resetter.push(Err("devlink: Operation not supported".into()));
    let iscsi = Iscsi::back_after(Some(0));
    let mut d = deps(
        resetter.clone(),
        Arc::new(ScriptedSelfTest::default()),
        iscsi,
        Gsi(Ok("RTS")),
        Arc::new(Disk::default()),
    );
    let r = run(&plan(), &mut d, &timing(), String::new(), &quiet);
    assert_eq!(resetter.calls().len(), 1);
    assert_eq!(r.methods.len(), 1);
    match &r.methods[0].outcome {
        MethodOutcome::Failed { why } => {
            assert!(why.contains("devlink: Operation not supported"), "{why}")
        }
        other => panic!("{other:?}"),
    }
    assert!(r.stopped.unwrap().starts_with("stopped after method 1"));
}

/// A resetter whose re-creation blocks (a step stuck in the kernel) until released.
struct Blocking {
    release: Mutex<std::sync::mpsc::Receiver<()>>,
}

impl DeviceResetter for Blocking {
    fn plan_from(
        &self,
        d: &str,
        _: Option<&iser_guard::core::reset_plan::RecreateFrom>,
    ) -> Result<ResetPlan, ResetError> {
        Err(ResetError::NoMethod {
            device: d.into(),
            reasons: vec![],
        })
    }
    fn recreate_from(
        &self,
        d: &str,
        _: Option<&iser_guard::core::reset_plan::RecreateFrom>,
        _: bool,
    ) -> Result<ResetOutcome, ResetError> {
        Err(ResetError::NoMethod {
            device: d.into(),
            reasons: vec![],
        })
    }
    fn recreate_by(
        &self,
        d: &str,
        m: &ResetMethod,
        _: &mut Vec<StepTiming>,
    ) -> Result<Recreated, ResetError> {
        let _ = self.release.lock().unwrap().recv();
        Ok(Recreated {
            method: m.clone(),
            old_name: d.into(),
            new_name: d.into(),
            took_ms: 0,
            failed_before: vec![],
            brought_back: false,
            mode_restored: None,
        })
    }
}

#[test]
fn a_re_creation_that_does_not_return_is_reported_hung_and_the_run_stops() {
    let (tx, rx) = std::sync::mpsc::channel();
    let resetter = Arc::new(Blocking {
        release: Mutex::new(rx),
    });
    let mut d = deps(
        resetter,
        Arc::new(ScriptedSelfTest::default()),
        Iscsi::back_after(Some(0)),
        Gsi(Ok("RTS")),
        Arc::new(Disk::default()),
    );
    let mut t = timing();
    t.recreate = Duration::from_millis(300);
    let start = Instant::now();
    let r = run(&plan(), &mut d, &t, String::new(), &quiet);
    // It gave up at the step's time, without waiting for the blocked step.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(r.methods.len(), 1);
    assert!(matches!(
        &r.methods[0].outcome,
        MethodOutcome::Hung { step, after_ms } if step.contains("devlink") && *after_ms >= 300
    ));
    assert!(r.stopped.as_deref().unwrap().contains("HUNG"));
    assert!(!r.passed());
    let _ = tx.send(());
}

#[test]
fn sessions_iscsid_leaves_down_are_logged_in_after_the_grace() {
    let iscsi = Iscsi::back_after(None);
    let mut d = deps(
        Arc::new(ScriptedResetter::default()),
        Arc::new(ScriptedSelfTest::default()),
        iscsi.clone(),
        Gsi(Ok("RTS")),
        Arc::new(Disk::default()),
    );
    let mut p = plan();
    p.methods.truncate(1);
    let r = run(&p, &mut d, &timing(), String::new(), &quiet);
    assert!(r.passed(), "{r:#?}");
    let s = &r.methods[0].sessions[0];
    assert!(s.back);
    assert_eq!(s.by.as_deref(), Some("iscsiadm login"));
    assert!(s.after_ms.unwrap() >= 300, "after the grace: {s:?}");
    let logins = iscsi.logins.lock().unwrap().clone();
    assert_eq!(logins.len(), 1);
    assert_eq!(logins[0].target, TARGET);
    assert_eq!(logins[0].address, "192.0.2.2");
    assert_eq!(logins[0].port, 3260);
    assert_eq!(logins[0].iface.as_deref(), Some("iser"));
}

#[test]
fn qp_1_not_in_rts_after_the_re_creation_fails_the_method() {
    for (gsi, want) in [
        (Gsi(Ok("ERR")), "port 1: ERR"),
        (
            Gsi(Err(GsiError::Unavailable(
                "RDMA netlink is not available".into(),
            ))),
            "port 1: no QP 1",
        ),
    ] {
        let mut d = deps(
            Arc::new(ScriptedResetter::default()),
            Arc::new(ScriptedSelfTest::default()),
            Iscsi::back_after(Some(0)),
            gsi,
            Arc::new(Disk::default()),
        );
        let r = run(&plan(), &mut d, &timing(), String::new(), &quiet);
        assert_eq!(r.methods.len(), 1, "stopped at the first method");
        match &r.methods[0].outcome {
            MethodOutcome::Failed { why } => assert!(why.contains(want), "{why}"),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn the_plan_watches_only_logged_in_sessions_of_the_device() {
    use iser_guard::core::doctor::{Facts, RdmaDevice, RdmaPort, RecreatePlan, SessionFact};
    let mut f = Facts::default();
    let mut d = RdmaDevice::named("rocep2s0f0");
    d.ports = vec![RdmaPort::numbered(1)];
    d.aux = Some(AuxFacts {
        name: "ice.roce.0".into(),
        driver_dir: Some("irdma".into()),
        module: None,
    });
    d.recreate = Ok(RecreatePlan {
        methods: methods().into_iter().map(|m| (m, vec![])).collect(),
        skipped: vec!["module reload of irdma: not allowed".into()],
    });
    f.rdma.devices = vec![d];
    let session = |sid: u32, state: &str, dev: &str| SessionFact {
        sid,
        target: TARGET.into(),
        portal: format!("192.0.2.{sid}:3260"),
        iface: "iser".into(),
        transport: "iser".into(),
        state: state.into(),
        port: Some((dev.into(), 1)),
        placed_by: None,
        disks: vec![format!("sd{sid}")],
    };
    f.iscsi.sessions = Ok(vec![
        session(1, "LOGGED_IN", "rocep2s0f0"),
        session(2, "FAILED", "rocep2s0f0"),
        session(3, "LOGGED_IN", "mlx5_0"),
    ]);
    let t = timing();
    let p = iser_guard::doctor::active::plan(&f, "rocep2s0f0", &t).unwrap();
    assert_eq!(p.sessions.len(), 1);
    assert_eq!(p.sessions[0].disk.as_deref(), Some("sd1"));
    assert!(p
        .skipped
        .iter()
        .any(|s| s.contains("session 2") && s.contains("FAILED")));
    assert_eq!(p.methods, methods());
    let e = iser_guard::doctor::active::plan(&f, "mlx5_9", &t).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no RDMA device mlx5_9 on this host; it has rocep2s0f0"
    );
}
