//! The iscsiadm runner against a stub iscsiadm (tests/fixtures/stubs/iscsiadm) that prints
//! the real output formats and exit codes, and one that hangs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use iser_guard::core::iscsi::{ListedSessionState, Transport};
use iser_guard::io::iscsiadm::{
    IscsiAdm, Iscsiadm, IscsiadmError, IscsiadmStatus, LoginOutcome, LogoutOutcome, NodeId,
    NodeOutcome, SessionListing, StatusClass,
};

const TARGET: &str = "iqn.2003-01.org.example.lab:tgt0";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stubs")
}

/// A private copy of the stub with its own scenario and argv log.
struct Stub {
    dir: tempfile::TempDir,
}

impl Stub {
    fn new(scenario: &str) -> Stub {
        let dir = tempfile::tempdir().unwrap();
        std::fs::copy(fixtures().join("iscsiadm"), dir.path().join("iscsiadm")).unwrap();
        std::os::unix::fs::symlink(fixtures().join("iscsiadm.d"), dir.path().join("fixtures"))
            .unwrap();
        std::fs::write(dir.path().join("scenario"), scenario).unwrap();
        Stub { dir }
    }
    fn adm(&self, timeout: Duration) -> Iscsiadm {
        Iscsiadm::new(self.dir.path().join("iscsiadm"), timeout)
    }
    fn argv(&self) -> Vec<String> {
        std::fs::read_to_string(self.dir.path().join("argv.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.dir.path().join(name)).unwrap()
    }
}

fn node() -> NodeId {
    NodeId {
        target: TARGET.into(),
        address: "192.0.2.2".into(),
        port: 3260,
        iface: Some("iser".into()),
    }
}

const T: Duration = Duration::from_secs(20);

#[test]
fn session_listing_passes_the_real_text_through() {
    let s = Stub::new("loggedin");
    let adm = s.adm(T);
    let want =
        std::fs::read_to_string(fixtures().join("iscsiadm.d/session-P3-loggedin.txt")).unwrap();
    assert_eq!(adm.sessions(true).unwrap(), SessionListing::Text(want));
    match adm.sessions(false).unwrap() {
        SessionListing::Text(t) => assert!(t.starts_with("iser: [2] 192.0.2.2:3260,1 "), "{t}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(s.argv(), ["-m session -P 3", "-m session"]);
}

#[test]
fn parsed_listings_come_from_the_core_parsers() {
    let s = Stub::new("failed");
    let details = s.adm(T).session_details().unwrap();
    assert!(details.is_clean(), "{:?}", details.skipped);
    let [d] = details.items.as_slice() else {
        panic!("{:?}", details.items)
    };
    assert_eq!(d.sid, 2);
    assert_eq!(d.session_state, Some(ListedSessionState::Failed));
    assert_eq!(d.node_id(), Some(node()));
    let flat = s.adm(T).session_summaries().unwrap();
    assert_eq!(flat.items.len(), 1);
    assert_eq!(flat.items[0].transport, Transport::Iser);
    // And the node id from a parsed session drives a login.
    let s = Stub::new("none");
    assert!(s.adm(T).session_details().unwrap().items.is_empty());
    assert_eq!(s.adm(T).login(&node()).unwrap(), LoginOutcome::LoggedIn);
}

#[test]
fn no_sessions_exit_21_is_an_empty_listing() {
    let s = Stub::new("none");
    assert_eq!(s.adm(T).sessions(true).unwrap(), SessionListing::NoSessions);
    assert_eq!(
        s.adm(T).sessions(false).unwrap(),
        SessionListing::NoSessions
    );
}

#[test]
fn login_new_and_already_logged_in() {
    let s = Stub::new("none");
    assert_eq!(s.adm(T).login(&node()).unwrap(), LoginOutcome::LoggedIn);
    assert_eq!(
        s.argv(),
        [format!(
            "-m node -T {TARGET} -p 192.0.2.2:3260 -I iser --login"
        )]
    );
    let s = Stub::new("loggedin");
    assert_eq!(
        s.adm(T).login(&node()).unwrap(),
        LoginOutcome::AlreadyLoggedIn
    );
}

#[test]
fn logout_and_logout_without_session() {
    let s = Stub::new("loggedin");
    assert_eq!(s.adm(T).logout(&node()).unwrap(), LogoutOutcome::LoggedOut);
    assert_eq!(
        s.argv(),
        [format!(
            "-m node -T {TARGET} -p 192.0.2.2:3260 -I iser --logout"
        )]
    );
    let s = Stub::new("none");
    assert_eq!(
        s.adm(T).logout(&node()).unwrap(),
        LogoutOutcome::NotLoggedIn
    );
}

#[test]
fn login_failures_are_typed_with_retry_advice() {
    for (scenario, code, class, words) in [
        ("auth", 24, StatusClass::Permanent, "authorization failure"),
        ("timeout", 8, StatusClass::Transient, "connection timed out"),
        (
            "reqtimeout",
            33,
            StatusClass::Transient,
            "iscsid request timed out",
        ),
        (
            "nodaemon",
            20,
            StatusClass::Transient,
            "could not connect to iscsid",
        ),
        ("norecord", 21, StatusClass::NotFound, "No records found"),
    ] {
        let s = Stub::new(scenario);
        let err = s.adm(T).login(&node()).unwrap_err();
        assert_eq!(
            err.status(),
            Some(IscsiadmStatus::from_code(code)),
            "{scenario}: {err}"
        );
        assert_eq!(err.class(), class, "{scenario}");
        let msg = err.to_string();
        // "Could not log into all portals" is the last line for most; the message keeps the
        // last stderr line, and Display names the code.
        assert!(msg.contains(&format!("exit code {code} (")), "{msg}");
        assert_eq!(err.is_no_record(), scenario == "norecord");
        // The message is iscsiadm's reported error, not its last line.
        assert!(msg.contains(words), "{msg}");
    }
    let msg = Stub::new("auth")
        .adm(T)
        .login(&node())
        .unwrap_err()
        .to_string();
    assert!(msg.contains("retrying will not help"), "{msg}");
}

#[test]
fn rescan_and_node_record_restore() {
    let s = Stub::new("none");
    let adm = s.adm(T);
    adm.rescan(2).unwrap();
    assert_eq!(adm.create_node(&node()).unwrap(), NodeOutcome::Written);
    assert_eq!(
        adm.update_node(&node(), "node.session.timeo.replacement_timeout", "-1")
            .unwrap(),
        NodeOutcome::Written
    );
    assert_eq!(
        s.argv(),
        [
            "-m session -r 2 --rescan".to_string(),
            format!("-m node -T {TARGET} -p 192.0.2.2:3260 -I iser -o new"),
            format!(
                "-m node -T {TARGET} -p 192.0.2.2:3260 -I iser -o update -n \
                 node.session.timeo.replacement_timeout -v -1"
            ),
        ]
    );
    // An unknown session: the stub answers like an unknown command (exit 7, ISCSI_ERR_INVAL).
    let err = adm.rescan(9).unwrap_err();
    assert_eq!(err.status(), Some(IscsiadmStatus::Inval));
    assert_eq!(err.class(), StatusClass::Permanent);
}

#[test]
fn option_like_names_are_refused_before_running() {
    let s = Stub::new("none");
    let bad = NodeId {
        target: "--op=delete".into(),
        ..node()
    };
    let err = s.adm(T).login(&bad).unwrap_err();
    assert!(
        matches!(err, IscsiadmError::BadArgument { what: "target", .. }),
        "{err:?}"
    );
    assert!(s.argv().is_empty(), "nothing may run");
}

#[test]
fn missing_binary_is_not_runnable() {
    let adm = Iscsiadm::new("/nonexistent/iscsiadm", T);
    let err = adm.sessions(true).unwrap_err();
    assert!(matches!(err, IscsiadmError::NotRunnable { .. }), "{err:?}");
    assert_eq!(err.class(), StatusClass::Permanent);
}

fn process_state(pid: &str) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the state follows the last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

#[test]
fn hung_iscsiadm_and_its_helpers_are_killed_and_reaped() {
    let s = Stub::new("hang");
    // Long enough for the stub to start and write its pids on a loaded machine (it takes
    // milliseconds), short against the stub's 600 s.
    let timeout = Duration::from_secs(3);
    let start = Instant::now();
    let err = s.adm(timeout).login(&node()).unwrap_err();
    let took = start.elapsed();
    assert!(matches!(err, IscsiadmError::Hung { .. }), "{err:?}");
    assert_eq!(err.class(), StatusClass::Transient);
    // A correctness bound, not a speed claim: without the kill this would take 600 s.
    assert!(took < timeout + Duration::from_secs(10), "{took:?}");

    // The stub itself was our child: it must be reaped (no zombie, no process).
    let stub_pid = s.read("stub.pid");
    assert_eq!(
        process_state(stub_pid.trim()),
        None,
        "stub pid {stub_pid} still exists"
    );
    // Its helper `sleep` was in the same process group: killed too. It was reparented when
    // the stub died, so reaping it is init's job; it must at least not be running.
    let helper = s.read("helper.pid");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match process_state(helper.trim()) {
            None | Some('Z') | Some('X') => break,
            Some(st) if Instant::now() > deadline => panic!("helper still in state {st}"),
            Some(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// A runner that answers every invocation with a cut listing, and records the limit asked.
struct CutListing(std::sync::Mutex<Vec<usize>>);

impl iser_guard::io::process::Runner for CutListing {
    fn run(
        &self,
        inv: &iser_guard::io::process::Invocation,
    ) -> Result<iser_guard::io::process::Output, iser_guard::io::process::RunError> {
        self.0.lock().unwrap().push(inv.capture_limit);
        Ok(iser_guard::io::process::Output {
            exit: iser_guard::io::process::Exit::Code(0),
            stdout: "tcp: [1] 192.0.2.2:3260,1 iqn.x (non-flash)\n".into(),
            stderr: String::new(),
            truncated: true,
            took: Duration::from_millis(1),
        })
    }
}

#[test]
fn a_cut_session_listing_is_an_error_not_a_shorter_listing() {
    let runner = std::sync::Arc::new(CutListing(Default::default()));
    let adm = Iscsiadm::with_runner("/usr/sbin/iscsiadm", Duration::from_secs(1), runner.clone());
    let e = adm.sessions(true).expect_err("cut listing");
    assert!(e.to_string().contains("was cut and is not used"), "{e}");
    assert_eq!(
        *runner.0.lock().unwrap(),
        vec![iser_guard::io::iscsiadm::SESSION_LISTING_LIMIT]
    );
}
