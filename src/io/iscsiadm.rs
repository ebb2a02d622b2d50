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
//! [`Retry`] says whether trying again can help.
//!
//! Exit codes: open-iscsi `include/iscsi_err.h` (reference/kernel-facts.md §4.1).

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::io::process::{Exit, Invocation, Output, RunError, Runner, SystemRunner};

/// A node record: target IQN, portal, and optionally the iface (`iser`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct NodeRef {
    /// Target name, e.g. `iqn.2003-01.org.example.lab:tgt0`.
    pub target: String,
    /// Portal as iscsiadm takes it: `192.0.2.2:3260` or `[fe80::1]:3260`.
    pub portal: String,
    /// The iface record (`-I`), e.g. `iser`; `None` lets iscsiadm use every bound iface.
    pub iface: Option<String>,
}

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

/// Whether repeating the operation can help.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retry {
    /// Transient (timeouts, connection failures, busy): back off and retry.
    Yes,
    /// Repeating it will fail the same way (bad credentials, non-retryable login failure,
    /// invalid request): do not retry; alert.
    No,
    /// The host is not set up to do it (iscsid not running, transport module missing, not
    /// root): an operator must fix something first.
    Operator,
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
    #[error("`{command}` failed with exit code {code} ({}): {message}{}", exit_name(*code), advice(*code))]
    Failed {
        /// The command line.
        command: String,
        /// The exit code.
        code: i32,
        /// Whether retrying can help.
        retry: Retry,
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
    /// A waiting problem in the runner (should not happen).
    #[error("running iscsiadm failed: {0}")]
    Run(#[source] RunError),
}

impl IscsiadmError {
    /// Whether retrying can help ([`Retry::Yes`] for hangs; [`Retry::Operator`] when iscsiadm
    /// is missing).
    pub fn retry(&self) -> Retry {
        match self {
            IscsiadmError::Failed { retry, .. } => *retry,
            IscsiadmError::Hung { .. } | IscsiadmError::Signaled { .. } => Retry::Yes,
            IscsiadmError::NotRunnable { .. } | IscsiadmError::Run(_) => Retry::Operator,
            IscsiadmError::BadArgument { .. } => Retry::No,
        }
    }

    /// The documented exit code ([`crate::error`]) for a command that failed with this.
    pub fn exit_code_for_cli(&self) -> u8 {
        use crate::error::*;
        match self {
            IscsiadmError::BadArgument { .. } => EXIT_USAGE,
            IscsiadmError::Run(_) => EXIT_SOFTWARE,
            _ => match self.retry() {
                Retry::Yes => EXIT_TEMPFAIL,
                Retry::No => EXIT_CONFIG,
                Retry::Operator => EXIT_UNAVAILABLE,
            },
        }
    }

    /// True when iscsiadm found no node record for a login (exit 21): the record must be
    /// restored ([`IscsiAdm::create_node`]) before a login can work.
    pub fn is_no_record(&self) -> bool {
        self.exit_code() == Some(code::NO_OBJS_FOUND)
    }

    /// The iscsiadm exit code, when it exited.
    pub fn exit_code(&self) -> Option<i32> {
        match self {
            IscsiadmError::Failed { code, .. } => Some(*code),
            _ => None,
        }
    }
}

/// open-iscsi exit codes (`include/iscsi_err.h`) that change what we do.
pub mod code {
    /// ISCSI_SUCCESS
    pub const SUCCESS: i32 = 0;
    /// ISCSI_ERR_SESS_NOT_FOUND
    pub const SESS_NOT_FOUND: i32 = 2;
    /// ISCSI_ERR_TRANS: "encountered connection failure"
    pub const TRANS: i32 = 4;
    /// ISCSI_ERR_LOGIN: "encountered iSCSI login failure"
    pub const LOGIN: i32 = 5;
    /// ISCSI_ERR_INVAL
    pub const INVAL: i32 = 7;
    /// ISCSI_ERR_TRANS_TIMEOUT
    pub const TRANS_TIMEOUT: i32 = 8;
    /// ISCSI_ERR_PDU_TIMEOUT
    pub const PDU_TIMEOUT: i32 = 11;
    /// ISCSI_ERR_TRANS_NOT_FOUND (transport module, e.g. ib_iser, not loaded)
    pub const TRANS_NOT_FOUND: i32 = 12;
    /// ISCSI_ERR_ACCESS
    pub const ACCESS: i32 = 13;
    /// ISCSI_ERR_SESS_EXISTS
    pub const SESS_EXISTS: i32 = 15;
    /// ISCSI_ERR_ISCSID_COMM_ERR
    pub const ISCSID_COMM_ERR: i32 = 18;
    /// ISCSI_ERR_FATAL_LOGIN (non-retryable)
    pub const FATAL_LOGIN: i32 = 19;
    /// ISCSI_ERR_ISCSID_NOTCONN
    pub const ISCSID_NOTCONN: i32 = 20;
    /// ISCSI_ERR_NO_OBJS_FOUND
    pub const NO_OBJS_FOUND: i32 = 21;
    /// ISCSI_ERR_LOGIN_AUTH_FAILED
    pub const LOGIN_AUTH_FAILED: i32 = 24;
    /// ISCSI_ERR_BUSY
    pub const BUSY: i32 = 28;
    /// ISCSI_ERR_AGAIN
    pub const AGAIN: i32 = 29;
    /// ISCSI_ERR_SESSION_NOT_CONNECTED
    pub const SESSION_NOT_CONNECTED: i32 = 32;
    /// ISCSI_ERR_REQ_TIMEDOUT
    pub const REQ_TIMEDOUT: i32 = 33;
}

/// The open-iscsi name of an exit code.
pub fn exit_name(c: i32) -> &'static str {
    match c {
        0 => "ISCSI_SUCCESS",
        1 => "ISCSI_ERR",
        2 => "ISCSI_ERR_SESS_NOT_FOUND",
        3 => "ISCSI_ERR_NOMEM",
        4 => "ISCSI_ERR_TRANS",
        5 => "ISCSI_ERR_LOGIN",
        6 => "ISCSI_ERR_IDBM",
        7 => "ISCSI_ERR_INVAL",
        8 => "ISCSI_ERR_TRANS_TIMEOUT",
        9 => "ISCSI_ERR_INTERNAL",
        10 => "ISCSI_ERR_LOGOUT",
        11 => "ISCSI_ERR_PDU_TIMEOUT",
        12 => "ISCSI_ERR_TRANS_NOT_FOUND",
        13 => "ISCSI_ERR_ACCESS",
        14 => "ISCSI_ERR_TRANS_CAPS",
        15 => "ISCSI_ERR_SESS_EXISTS",
        16 => "ISCSI_ERR_INVALID_MGMT_REQ",
        17 => "ISCSI_ERR_ISNS_UNAVAILABLE",
        18 => "ISCSI_ERR_ISCSID_COMM_ERR",
        19 => "ISCSI_ERR_FATAL_LOGIN",
        20 => "ISCSI_ERR_ISCSID_NOTCONN",
        21 => "ISCSI_ERR_NO_OBJS_FOUND",
        22 => "ISCSI_ERR_SYSFS_LOOKUP",
        23 => "ISCSI_ERR_HOST_NOT_FOUND",
        24 => "ISCSI_ERR_LOGIN_AUTH_FAILED",
        25 => "ISCSI_ERR_ISNS_QUERY",
        26 => "ISCSI_ERR_ISNS_REG_FAILED",
        27 => "ISCSI_ERR_OP_NOT_SUPP",
        28 => "ISCSI_ERR_BUSY",
        29 => "ISCSI_ERR_AGAIN",
        30 => "ISCSI_ERR_UNKNOWN_DISCOVERY_TYPE",
        31 => "ISCSI_ERR_CHILD_TERMINATED",
        32 => "ISCSI_ERR_SESSION_NOT_CONNECTED",
        33 => "ISCSI_ERR_REQ_TIMEDOUT",
        _ => "unknown code",
    }
}

/// Whether a failure with exit code `c` is worth retrying.
pub fn retry_for(c: i32) -> Retry {
    use code::*;
    match c {
        TRANS
        | LOGIN
        | TRANS_TIMEOUT
        | PDU_TIMEOUT
        | BUSY
        | AGAIN
        | REQ_TIMEDOUT
        | SESSION_NOT_CONNECTED
        | 1
        | 9
        | 10
        | 31 => Retry::Yes,
        LOGIN_AUTH_FAILED | FATAL_LOGIN | INVAL | NO_OBJS_FOUND | 16 | 27 => Retry::No,
        TRANS_NOT_FOUND | ACCESS | ISCSID_COMM_ERR | ISCSID_NOTCONN | 3 | 6 | 14 | 22 | 23 => {
            Retry::Operator
        }
        _ => Retry::Yes,
    }
}

fn advice(c: i32) -> &'static str {
    use code::*;
    match c {
        LOGIN_AUTH_FAILED => "; the target rejected the CHAP credentials: fix node.session.auth.* (retrying will not help)",
        FATAL_LOGIN => "; the target refused the login for good: check its ACLs and the initiator name",
        ISCSID_COMM_ERR | ISCSID_NOTCONN => "; iscsid is not reachable: start it (`systemctl start iscsid`)",
        TRANS_NOT_FOUND => "; the transport is not available: load ib_iser (`modprobe ib_iser`)",
        ACCESS => "; iscsiadm needs root",
        TRANS_TIMEOUT | REQ_TIMEDOUT | PDU_TIMEOUT => "; timed out: is the target reachable over the RDMA port?",
        NO_OBJS_FOUND => "; no such node record: it may need to be re-created (discovery or -o new)",
        _ => "",
    }
}

/// iscsiadm operations the daemon and the manual commands need. The real one is [`Iscsiadm`];
/// tests and the simulator provide their own.
pub trait IscsiAdm: Send + Sync {
    /// `iscsiadm -m session` (flat), or `-m session -P 3` when `detail`.
    fn sessions(&self, detail: bool) -> Result<SessionListing, IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL [-I IFACE] --login`.
    fn login(&self, node: &NodeRef) -> Result<LoginOutcome, IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL [-I IFACE] --logout`.
    fn logout(&self, node: &NodeRef) -> Result<LogoutOutcome, IscsiadmError>;
    /// `iscsiadm -m session -r SID --rescan`: rescan the LUNs of one session.
    fn rescan(&self, sid: u32) -> Result<(), IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL -I IFACE -o new`: restore a forgotten node record
    /// (discovery over iSER can fail under load; see reference/lab.md).
    fn create_node(&self, node: &NodeRef) -> Result<NodeOutcome, IscsiadmError>;
    /// `iscsiadm -m node -T IQN -p PORTAL [-I IFACE] -o update -n KEY -v VALUE`.
    fn update_node(
        &self,
        node: &NodeRef,
        key: &str,
        value: &str,
    ) -> Result<NodeOutcome, IscsiadmError>;
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

    /// From `paths.iscsiadm` and `recovery.iscsiadm-timeout`.
    pub fn from_config(cfg: &crate::config::Config) -> Self {
        Self::new(cfg.paths.iscsiadm.clone(), cfg.recovery.iscsiadm_timeout)
    }

    fn exec(&self, args: Vec<OsString>) -> Result<(String, Output), IscsiadmError> {
        let inv = Invocation::new(self.program.clone(), args, self.timeout);
        let command = inv.display();
        match self.runner.run(&inv) {
            Ok(out) => match out.exit {
                Exit::Signal(signal) => Err(IscsiadmError::Signaled { command, signal }),
                Exit::Code(_) => Ok((command, out)),
            },
            Err(RunError::Spawn { program, source }) => {
                Err(IscsiadmError::NotRunnable { program, source })
            }
            Err(RunError::Timeout {
                command, timeout, ..
            }) => Err(IscsiadmError::Hung { command, timeout }),
            Err(e) => Err(IscsiadmError::Run(e)),
        }
    }

    fn node_args(node: &NodeRef, extra: &[&str]) -> Result<Vec<OsString>, IscsiadmError> {
        check_arg("target", &node.target)?;
        check_arg("portal", &node.portal)?;
        let mut a: Vec<OsString> = vec![
            "-m".into(),
            "node".into(),
            "-T".into(),
            node.target.clone().into(),
            "-p".into(),
            node.portal.clone().into(),
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
        code,
        retry: retry_for(code),
        message: out.last_words(),
    }
}

impl IscsiAdm for Iscsiadm {
    fn sessions(&self, detail: bool) -> Result<SessionListing, IscsiadmError> {
        let mut args: Vec<OsString> = vec!["-m".into(), "session".into()];
        if detail {
            args.extend(["-P".into(), "3".into()]);
        }
        let (command, out) = self.exec(args)?;
        match out.exit {
            Exit::Code(code::SUCCESS) => Ok(SessionListing::Text(out.stdout)),
            Exit::Code(code::NO_OBJS_FOUND) => Ok(SessionListing::NoSessions),
            _ => Err(failed(command, &out)),
        }
    }

    fn login(&self, node: &NodeRef) -> Result<LoginOutcome, IscsiadmError> {
        let (command, out) = self.exec(Self::node_args(node, &["--login"])?)?;
        match out.exit {
            Exit::Code(code::SUCCESS) => Ok(LoginOutcome::LoggedIn),
            Exit::Code(code::SESS_EXISTS) => Ok(LoginOutcome::AlreadyLoggedIn),
            _ => Err(failed(command, &out)),
        }
    }

    fn logout(&self, node: &NodeRef) -> Result<LogoutOutcome, IscsiadmError> {
        let (command, out) = self.exec(Self::node_args(node, &["--logout"])?)?;
        match out.exit {
            Exit::Code(code::SUCCESS) => Ok(LogoutOutcome::LoggedOut),
            Exit::Code(code::NO_OBJS_FOUND) | Exit::Code(code::SESS_NOT_FOUND) => {
                Ok(LogoutOutcome::NotLoggedIn)
            }
            _ => Err(failed(command, &out)),
        }
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
            Exit::Code(code::SUCCESS) => Ok(()),
            _ => Err(failed(command, &out)),
        }
    }

    fn create_node(&self, node: &NodeRef) -> Result<NodeOutcome, IscsiadmError> {
        let (command, out) = self.exec(Self::node_args(node, &["-o", "new"])?)?;
        match out.exit {
            Exit::Code(code::SUCCESS) => Ok(NodeOutcome::Written),
            _ => Err(failed(command, &out)),
        }
    }

    fn update_node(
        &self,
        node: &NodeRef,
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
            Exit::Code(code::SUCCESS) => Ok(NodeOutcome::Written),
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
    Login(NodeRef),
    /// `logout(node)`.
    Logout(NodeRef),
    /// `rescan(sid)`.
    Rescan(u32),
    /// `create_node(node)`.
    CreateNode(NodeRef),
    /// `update_node(node, key, value)`.
    UpdateNode(NodeRef, String, String),
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
    IscsiadmError::Failed {
        command: format!("iscsiadm (scripted) {what}"),
        code,
        retry: retry_for(code),
        message: exit_name(code).to_string(),
    }
}

impl IscsiAdm for ScriptedIscsiAdm {
    fn sessions(&self, detail: bool) -> Result<SessionListing, IscsiadmError> {
        self.record(IscsiCall::Sessions(detail));
        let a = self.script().sessions.pop_front();
        a.unwrap_or(Ok(SessionListing::NoSessions))
            .map_err(|c| scripted_failure("sessions", c))
    }
    fn login(&self, node: &NodeRef) -> Result<LoginOutcome, IscsiadmError> {
        self.record(IscsiCall::Login(node.clone()));
        let a = self.script().login.pop_front();
        a.unwrap_or(Ok(LoginOutcome::LoggedIn))
            .map_err(|c| scripted_failure("login", c))
    }
    fn logout(&self, node: &NodeRef) -> Result<LogoutOutcome, IscsiadmError> {
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
    fn create_node(&self, node: &NodeRef) -> Result<NodeOutcome, IscsiadmError> {
        self.record(IscsiCall::CreateNode(node.clone()));
        Ok(NodeOutcome::Written)
    }
    fn update_node(
        &self,
        node: &NodeRef,
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
