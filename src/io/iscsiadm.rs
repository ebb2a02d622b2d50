//! Runs `iscsiadm` (config `paths.iscsiadm`) and turns its exit codes into typed outcomes.
//!
//! Owns the command lines, the deadline (config `recovery.iscsiadm-timeout`; a hung iscsiadm
//! and its process group are killed, see [`crate::io::process`]), and the meaning of each exit
//! code for each operation. Parsing the text of `-m session [-P 3]` is the core's job
//! ([`crate::core::iscsi`]); this module hands the text over untouched.
//!
//! Idempotent outcomes: logging in to a node that already has a session (exit 15,
//! ISCSI_ERR_SESS_EXISTS) is [`LoginOutcome::AlreadyLoggedIn`], logging out of a node without
//! one (exit 21, ISCSI_ERR_NO_OBJS_FOUND) is [`LogoutOutcome::NotLoggedIn`], and "no sessions"
//! (exit 21) is an empty listing, never an error. Everything else is an [`IscsiadmError`] whose
//! [`IscsiadmError::class`] says whether trying again can help.
//!
//! Exit codes: open-iscsi `include/iscsi_err.h` (reference/kernel-facts.md §4.1), as
//! [`IscsiadmStatus`] from the core.

use crate::exit::ExitStatus;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::core::iscsi::{
    parse_session_list, parse_session_tree, ParsedListing, SessionDetail, SessionSummary,
};
pub use crate::core::iscsi::{IscsiadmStatus, NodeId, StatusClass};
use crate::io::process::{Exit, Invocation, Output, RunError, Runner, SystemRunner};

/// What `-m session` / `-m session -P 3` returned.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionListing {
    /// No sessions at all (exit 21, "iscsiadm: No active sessions.").
    NoSessions,
    /// The raw text, for [`crate::core::iscsi`] to parse.
    Text(String),
}

/// A successful login.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoginOutcome {
    /// A new session was established ("Login to [...] successful.").
    LoggedIn,
    /// A session already existed (exit 15); nothing was done.
    AlreadyLoggedIn,
}

/// A successful logout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogoutOutcome {
    /// The session(s) were logged out.
    LoggedOut,
    /// There was no session to log out (exit 21); nothing was done.
    NotLoggedIn,
}

/// A successful node-record change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeOutcome {
    /// The record was created or updated.
    Written,
}

/// Why an iscsiadm operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IscsiadmError {
    /// iscsiadm could not be started.
    #[error(
        "cannot run iscsiadm at {program}: {source}; install open-iscsi or set paths.iscsiadm"
    )]
    NotRunnable {
        /// The configured binary.
        program: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// iscsiadm hung past the deadline and was killed (with its process group).
    #[error("`{command}` hung for {:.1} s and was killed; iscsid may be stuck: check `systemctl status iscsid`", timeout.as_secs_f64())]
    Hung {
        /// The command line.
        command: String,
        /// The deadline.
        timeout: Duration,
    },
    /// iscsiadm exited with a code that means failure for this operation.
    #[error("`{command}` failed with exit code {status}: {message}{}", advice(*status))]
    Failed {
        /// The command line.
        command: String,
        /// The exit code.
        status: IscsiadmStatus,
        /// iscsiadm's own last words (last line of stderr, or stdout).
        message: String,
    },
    /// iscsiadm was killed by a signal that was not ours.
    #[error("`{command}` was killed by signal {signal}")]
    Signaled {
        /// The command line.
        command: String,
        /// The signal number.
        signal: i32,
    },
    /// An argument would be taken as an option (starts with `-`) or is empty: refused before
    /// running anything, since names come from parsed output and config.
    #[error("refusing to pass {what} {value:?} to iscsiadm: it is empty or starts with '-'")]
    BadArgument {
        /// Which argument.
        what: &'static str,
        /// Its value.
        value: String,
    },
    /// A session listing longer than the capture limit: a partial listing would make the
    /// sessions past the cut look gone, so none of it is used.
    #[error(
        "`{command}` printed more than {limit} bytes; the listing was cut and is not used \
         (sessions past the cut would look gone)"
    )]
    Truncated {
        /// The command line.
        command: String,
        /// The capture limit, in bytes.
        limit: usize,
    },
    /// A waiting problem in the runner (should not happen).
    #[error("running iscsiadm failed: {0}")]
    Run(#[source] RunError),
}

/// Bytes of a session listing kept: `-P 3` prints about 2 KiB per session, so this holds
/// thousands of sessions (the runner's default, 256 KiB, would cut at about a hundred).
pub const SESSION_LISTING_LIMIT: usize = 16 * 1024 * 1024;

impl IscsiadmError {
    /// How to react: [`StatusClass::Transient`] (retry with back-off; also for a hang),
    /// [`StatusClass::Permanent`] (an operator must fix something; also when iscsiadm is
    /// missing), [`StatusClass::NotFound`] (no such session or node record),
    /// [`StatusClass::Unclassified`].
    pub fn class(&self) -> StatusClass {
        match self {
            IscsiadmError::Failed { status, .. } => status.classify(),
            IscsiadmError::Hung { .. } | IscsiadmError::Truncated { .. } => StatusClass::Transient,
            IscsiadmError::NotRunnable { .. } | IscsiadmError::BadArgument { .. } => {
                StatusClass::Permanent
            }
            IscsiadmError::Signaled { .. } | IscsiadmError::Run(_) => StatusClass::Unclassified,
        }
    }

    /// The iscsiadm exit status, when it exited.
    pub fn status(&self) -> Option<IscsiadmStatus> {
        match self {
            IscsiadmError::Failed { status, .. } => Some(*status),
            _ => None,
        }
    }

    /// True when iscsiadm found no node record for a login (exit 21): the record must be
    /// restored ([`IscsiAdm::create_node`]) before a login can work.
    pub fn is_no_record(&self) -> bool {
        self.status() == Some(IscsiadmStatus::NoObjsFound)
    }

    /// The documented exit code ([`crate::exit`]) for a command that failed with this.
    pub fn status_for_cli(&self) -> ExitStatus {
        match self {
            IscsiadmError::BadArgument { .. } => ExitStatus::Usage,
            IscsiadmError::NotRunnable { .. } => ExitStatus::Unavailable,
            _ => match self.class() {
                StatusClass::Transient => ExitStatus::TempFail,
                StatusClass::Permanent => ExitStatus::Config,
                StatusClass::NotFound => ExitStatus::NoInput,
                _ => ExitStatus::Finding,
            },
        }
    }
}

fn advice(status: IscsiadmStatus) -> String {
    match status.remedy() {
        "" => String::new(),
        r => format!("; {r}"),
    }
}

/// iscsiadm operations the daemon and the manual commands need. The real one is [`Iscsiadm`];
/// tests and the simulator provide their own.
pub trait IscsiAdm: Send + Sync {
    /// `iscsiadm -m session` (flat), or `-m session -P 3` when `detail`.
    fn sessions(&self, detail: bool) -> Result<SessionListing, IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL [-I IFACE] --login`.
    fn login(&self, node: &NodeId) -> Result<LoginOutcome, IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL [-I IFACE] --logout`.
    fn logout(&self, node: &NodeId) -> Result<LogoutOutcome, IscsiadmError>;
    /// `iscsiadm -m session -r SID --rescan`: rescan the LUNs of one session.
    fn rescan(&self, sid: u32) -> Result<(), IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL -I IFACE -o new`: restore a forgotten node record
    /// (discovery over iSER can fail under load; see reference/lab.md).
    fn create_node(&self, node: &NodeId) -> Result<NodeOutcome, IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL [-I IFACE] -o update -n KEY -v VALUE`.
    fn update_node(
        &self,
        node: &NodeId,
        key: &str,
        value: &str,
    ) -> Result<NodeOutcome, IscsiadmError>;

    /// `-m session -P 3`, parsed ([`parse_session_tree`]); no sessions is an empty list.
    /// Skipped lines are in [`ParsedListing::skipped`] for the caller to log and count.
    fn session_details(&self) -> Result<ParsedListing<SessionDetail>, IscsiadmError> {
        Ok(match self.sessions(true)? {
            SessionListing::NoSessions => ParsedListing::default(),
            SessionListing::Text(t) => parse_session_tree(&t),
        })
    }

    /// `-m session`, parsed ([`parse_session_list`]); no sessions is an empty list.
    fn session_summaries(&self) -> Result<ParsedListing<SessionSummary>, IscsiadmError> {
        Ok(match self.sessions(false)? {
            SessionListing::NoSessions => ParsedListing::default(),
            SessionListing::Text(t) => parse_session_list(&t),
        })
    }
}

/// The real [`IscsiAdm`]: runs the configured binary through a [`Runner`].
#[derive(Clone)]
pub struct Iscsiadm {
    program: PathBuf,
    timeout: Duration,
    runner: Arc<dyn Runner>,
}

impl std::fmt::Debug for Iscsiadm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Iscsiadm")
            .field("program", &self.program)
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

impl Iscsiadm {
    /// `program` with `timeout` per invocation, run by the real [`SystemRunner`].
    pub fn new(program: impl Into<PathBuf>, timeout: Duration) -> Self {
        Self::with_runner(program, timeout, Arc::new(SystemRunner))
    }

    /// As [`Iscsiadm::new`] with another [`Runner`].
    pub fn with_runner(
        program: impl Into<PathBuf>,
        timeout: Duration,
        runner: Arc<dyn Runner>,
    ) -> Self {
        Iscsiadm {
            program: program.into(),
            timeout,
            runner,
        }
    }

    fn exec(&self, args: Vec<OsString>) -> Result<(String, Output), IscsiadmError> {
        self.exec_capped(args, crate::io::process::DEFAULT_CAPTURE_LIMIT)
    }

    fn exec_capped(
        &self,
        args: Vec<OsString>,
        capture_limit: usize,
    ) -> Result<(String, Output), IscsiadmError> {
        let mut inv = Invocation::new(self.program.clone(), args, self.timeout);
        inv.capture_limit = capture_limit;
        let command = inv.display();
        match self.runner.run(&inv) {
            Ok(out) => match out.exit {
                Exit::Signal(signal) => Err(IscsiadmError::Signaled { command, signal }),
                Exit::Code(_) => Ok((command, out)),
            },
            Err(RunError::Spawn { program, source }) => {
                Err(IscsiadmError::NotRunnable { program, source })
            }
            Err(
                RunError::Timeout {
                    command, timeout, ..
                }
                | RunError::Stuck {
                    command, timeout, ..
                },
            ) => Err(IscsiadmError::Hung { command, timeout }),
            Err(e) => Err(IscsiadmError::Run(e)),
        }
    }

    fn node_args(node: &NodeId, extra: &[&str]) -> Result<Vec<OsString>, IscsiadmError> {
        check_arg("target", &node.target)?;
        check_arg("portal", &node.address)?;
        let mut a: Vec<OsString> = vec![
            "-m".into(),
            "node".into(),
            "-T".into(),
            node.target.clone().into(),
            "-p".into(),
            node.portal_arg().into(),
        ];
        if let Some(iface) = &node.iface {
            check_arg("iface", iface)?;
            a.push("-I".into());
            a.push(iface.clone().into());
        }
        a.extend(extra.iter().map(OsString::from));
        Ok(a)
    }
}

fn check_arg(what: &'static str, value: &str) -> Result<(), IscsiadmError> {
    if value.is_empty() || value.starts_with('-') || value.contains(['\n', '\0']) {
        return Err(IscsiadmError::BadArgument {
            what,
            value: value.to_string(),
        });
    }
    Ok(())
}

fn failed(command: String, out: &Output) -> IscsiadmError {
    let code = match out.exit {
        Exit::Code(c) => c,
        Exit::Signal(_) => -1,
    };
    IscsiadmError::Failed {
        command,
        status: IscsiadmStatus::from_code(code),
        message: reported_error(out).unwrap_or_else(|| out.last_words()),
    }
}

/// What a finished `iscsiadm --login` said (also what the simulated host's iscsiadm is read
/// with, so a scenario reads exit codes and output as the daemon does).
pub fn login_answer(command: String, out: &Output) -> Result<LoginOutcome, IscsiadmError> {
    match out.exit {
        Exit::Code(0) => Ok(LoginOutcome::LoggedIn),
        Exit::Code(c) if IscsiadmStatus::from_code(c).is_already_logged_in() => {
            Ok(LoginOutcome::AlreadyLoggedIn)
        }
        _ => Err(failed(command, out)),
    }
}

/// What a finished `iscsiadm --logout` said (see [`login_answer`]).
pub fn logout_answer(command: String, out: &Output) -> Result<LogoutOutcome, IscsiadmError> {
    match out.exit {
        Exit::Code(0) => Ok(LogoutOutcome::LoggedOut),
        Exit::Code(c) if IscsiadmStatus::from_code(c).classify() == StatusClass::NotFound => {
            Ok(LogoutOutcome::NotLoggedIn)
        }
        _ => Err(failed(command, out)),
    }
}

/// iscsiadm's own explanation, `iscsiadm: initiator reported error (24 - …)`, which is more
/// telling than its last line ("Could not log into all portals").
fn reported_error(out: &Output) -> Option<String> {
    out.stderr
        .lines()
        .chain(out.stdout.lines())
        .find(|l| l.contains("reported error ("))
        .map(|l| l.trim().trim_start_matches("iscsiadm: ").to_string())
}

impl IscsiAdm for Iscsiadm {
    fn sessions(&self, detail: bool) -> Result<SessionListing, IscsiadmError> {
        let mut args: Vec<OsString> = vec!["-m".into(), "session".into()];
        if detail {
            args.extend(["-P".into(), "3".into()]);
        }
        let (command, out) = self.exec_capped(args, SESSION_LISTING_LIMIT)?;
        match out.exit {
            Exit::Code(0) if out.truncated => Err(IscsiadmError::Truncated {
                command,
                limit: SESSION_LISTING_LIMIT,
            }),
            Exit::Code(0) => Ok(SessionListing::Text(out.stdout)),
            Exit::Code(c) if IscsiadmStatus::from_code(c).no_objects() => {
                Ok(SessionListing::NoSessions)
            }
            _ => Err(failed(command, &out)),
        }
    }

    fn login(&self, node: &NodeId) -> Result<LoginOutcome, IscsiadmError> {
        let (command, out) = self.exec(Self::node_args(node, &["--login"])?)?;
        login_answer(command, &out)
    }

    fn logout(&self, node: &NodeId) -> Result<LogoutOutcome, IscsiadmError> {
        let (command, out) = self.exec(Self::node_args(node, &["--logout"])?)?;
        logout_answer(command, &out)
    }

    fn rescan(&self, sid: u32) -> Result<(), IscsiadmError> {
        let args: Vec<OsString> = vec![
            "-m".into(),
            "session".into(),
            "-r".into(),
            sid.to_string().into(),
            "--rescan".into(),
        ];
        let (command, out) = self.exec(args)?;
        match out.exit {
            Exit::Code(0) => Ok(()),
            _ => Err(failed(command, &out)),
        }
    }

    fn create_node(&self, node: &NodeId) -> Result<NodeOutcome, IscsiadmError> {
        let (command, out) = self.exec(Self::node_args(node, &["-o", "new"])?)?;
        match out.exit {
            Exit::Code(0) => Ok(NodeOutcome::Written),
            _ => Err(failed(command, &out)),
        }
    }

    fn update_node(
        &self,
        node: &NodeId,
        key: &str,
        value: &str,
    ) -> Result<NodeOutcome, IscsiadmError> {
        check_arg("key", key)?;
        // getopt takes the word after -v as its value even when it starts with '-' (e.g.
        // replacement_timeout = -1), so only line breaks and NULs are refused.
        if value.contains(['\n', '\0']) {
            return Err(IscsiadmError::BadArgument {
                what: "value",
                value: value.to_string(),
            });
        }
        let (command, out) = self.exec(Self::node_args(
            node,
            &["-o", "update", "-n", key, "-v", value],
        )?)?;
        match out.exit {
            Exit::Code(0) => Ok(NodeOutcome::Written),
            _ => Err(failed(command, &out)),
        }
    }
}

/// One call seen by [`ScriptedIscsiAdm`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum IscsiCall {
    /// `sessions(detail)`.
    Sessions(bool),
    /// `login(node)`.
    Login(NodeId),
    /// `logout(node)`.
    Logout(NodeId),
    /// `rescan(sid)`.
    Rescan(u32),
    /// `create_node(node)`.
    CreateNode(NodeId),
    /// `update_node(node, key, value)`.
    UpdateNode(NodeId, String, String),
}

/// A scripted [`IscsiAdm`] for the daemon's tests and the simulator. Records every call; each
/// operation answers from its own queue, where `Err(code)` becomes
/// [`IscsiadmError::Failed`] with that iscsiadm exit code. Empty queues answer success
/// (`NoSessions`, `LoggedIn`, `LoggedOut`, `Ok`, `Written`).
#[derive(Debug, Default)]
pub struct ScriptedIscsiAdm {
    calls: std::sync::Mutex<Vec<IscsiCall>>,
    script: std::sync::Mutex<Script>,
}

#[derive(Debug, Default)]
struct Script {
    sessions: std::collections::VecDeque<Result<SessionListing, i32>>,
    login: std::collections::VecDeque<Result<LoginOutcome, i32>>,
    logout: std::collections::VecDeque<Result<LogoutOutcome, i32>>,
    rescan: std::collections::VecDeque<Result<(), i32>>,
}

impl ScriptedIscsiAdm {
    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.script.lock().unwrap_or_else(|p| p.into_inner())
    }
    /// Queues the next `sessions` answer.
    pub fn push_sessions(&self, a: Result<SessionListing, i32>) {
        self.script().sessions.push_back(a);
    }
    /// Queues the next `login` answer.
    pub fn push_login(&self, a: Result<LoginOutcome, i32>) {
        self.script().login.push_back(a);
    }
    /// Queues the next `logout` answer.
    pub fn push_logout(&self, a: Result<LogoutOutcome, i32>) {
        self.script().logout.push_back(a);
    }
    /// Queues the next `rescan` answer.
    pub fn push_rescan(&self, a: Result<(), i32>) {
        self.script().rescan.push_back(a);
    }
    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<IscsiCall> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    fn record(&self, c: IscsiCall) {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }
}

fn scripted_failure(what: &str, code: i32) -> IscsiadmError {
    let status = IscsiadmStatus::from_code(code);
    IscsiadmError::Failed {
        command: format!("iscsiadm (scripted) {what}"),
        status,
        message: status.message().to_string(),
    }
}

impl IscsiAdm for ScriptedIscsiAdm {
    fn sessions(&self, detail: bool) -> Result<SessionListing, IscsiadmError> {
        self.record(IscsiCall::Sessions(detail));
        let a = self.script().sessions.pop_front();
        a.unwrap_or(Ok(SessionListing::NoSessions))
            .map_err(|c| scripted_failure("sessions", c))
    }
    fn login(&self, node: &NodeId) -> Result<LoginOutcome, IscsiadmError> {
        self.record(IscsiCall::Login(node.clone()));
        let a = self.script().login.pop_front();
        a.unwrap_or(Ok(LoginOutcome::LoggedIn))
            .map_err(|c| scripted_failure("login", c))
    }
    fn logout(&self, node: &NodeId) -> Result<LogoutOutcome, IscsiadmError> {
        self.record(IscsiCall::Logout(node.clone()));
        let a = self.script().logout.pop_front();
        a.unwrap_or(Ok(LogoutOutcome::LoggedOut))
            .map_err(|c| scripted_failure("logout", c))
    }
    fn rescan(&self, sid: u32) -> Result<(), IscsiadmError> {
        self.record(IscsiCall::Rescan(sid));
        let a = self.script().rescan.pop_front();
        a.unwrap_or(Ok(()))
            .map_err(|c| scripted_failure("rescan", c))
    }
    fn create_node(&self, node: &NodeId) -> Result<NodeOutcome, IscsiadmError> {
        self.record(IscsiCall::CreateNode(node.clone()));
        Ok(NodeOutcome::Written)
    }
    fn update_node(
        &self,
        node: &NodeId,
        key: &str,
        value: &str,
    ) -> Result<NodeOutcome, IscsiadmError> {
        self.record(IscsiCall::UpdateNode(
            node.clone(),
            key.into(),
            value.into(),
        ));
        Ok(NodeOutcome::Written)
    }
}
