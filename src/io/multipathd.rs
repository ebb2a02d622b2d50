//! multipathd, the dm-multipath daemon: reading the maps' paths
//! (`multipathd show paths raw format "<PATHS_FORMAT>"`, parsed by
//! [`crate::core::multipath`], whose header says why this source) and, after a device
//! re-creation, seeing the remembered paths active in their maps again: multipathd's checker
//! usually reinstates them itself; one still failed after the bounded wait while its
//! device is back and running is reinstated here (`multipathd reinstate path sdX`).
//!
//! Every call runs the multipathd client through [`crate::io::process`] with a timeout, on
//! the caller's thread: the reader's own thread, or the executor pool (never the daemon's
//! loop). Without multipathd installed there is nothing to read (no map is known, nothing
//! holds); a multipathd that does not answer is an error the caller reports (doctor,
//! the daemon's log) and nothing holds either.
//!
//! Two small traits, so tests and the simulated host pass doubles: [`MultipathdClient`]
//! runs one multipathd command, [`MultipathRestore`] is the reader and the whole
//! wait-and-reinstate the daemon uses.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant as WallInstant};

use crate::core::multipath::{
    judge, parse_paths, reports, BlockCarrier, MultipathPath, MultipathPathRef, PathBackReport,
    PathBackResult, PathNow, PATHS_FORMAT,
};
use crate::io::process::{run, Invocation};

/// How long one multipathd command may take (its client waits up to its own `uxsock_timeout`,
/// 4 s by default, for the daemon).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(5);

/// How often the paths are read again while a remembered path is not active yet.
const POLL: Duration = Duration::from_secs(1);

/// How long a reinstated path has to show active.
const REINSTATE_SHOW: Duration = Duration::from_secs(5);

/// Why multipathd's paths could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MultipathdError {
    /// The multipathd client is not installed.
    #[error("multipathd is not installed ({0})")]
    NotInstalled(String),
    /// The client ran and the daemon did not answer (not running, socket refused, timeout).
    #[error("multipathd did not answer: {0}")]
    NotAnswering(String),
    /// The daemon refused the command (`fail`).
    #[error("multipathd refused `{command}`: {answer}")]
    Refused {
        /// The command.
        command: String,
        /// Its answer.
        answer: String,
    },
}

/// Runs one multipathd command.
pub trait MultipathdClient: Send + Sync {
    /// The client is installed.
    fn available(&self) -> bool;
    /// `multipathd ARGS…` within `timeout`: its answer (stdout).
    fn command(&self, args: &[String], timeout: Duration) -> Result<String, MultipathdError>;
}

/// The real multipathd client at a configured path (`paths.multipathd`).
#[derive(Debug, Clone)]
pub struct MultipathdProgram {
    /// Its path.
    pub program: PathBuf,
}

impl MultipathdClient for MultipathdProgram {
    fn available(&self) -> bool {
        crate::io::process::is_executable(&self.program)
    }

    fn command(&self, args: &[String], timeout: Duration) -> Result<String, MultipathdError> {
        let inv = Invocation::new(&self.program, args, timeout);
        match run(&inv) {
            Ok(out) if out.success() => Ok(out.stdout),
            Ok(out) => Err(MultipathdError::NotAnswering(format!(
                "{:?}: {}",
                out.exit,
                out.last_words()
            ))),
            Err(e) => Err(MultipathdError::NotAnswering(e.to_string())),
        }
    }
}

/// The arguments of the paths' listing.
pub fn show_paths_args() -> Vec<String> {
    ["show", "paths", "raw", "format", PATHS_FORMAT]
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// multipathd's word for a command it did not carry out (`fail`, `timeout`, or the
/// client's `error …` when the socket closed mid-answer); anything else is the answer.
fn refused(answer: &str) -> Option<&str> {
    let t = answer.trim();
    (t == "fail" || t == "timeout" || t.starts_with("error ")).then_some(t)
}

/// Reads the paths of every map: `Ok(None)` without multipathd installed. Lines out of the
/// format are logged and left out.
pub fn read_paths(
    client: &dyn MultipathdClient,
    timeout: Duration,
) -> Result<Option<Vec<MultipathPath>>, MultipathdError> {
    if !client.available() {
        return Ok(None);
    }
    let args = show_paths_args();
    let answer = client.command(&args, timeout)?;
    if let Some(word) = refused(&answer) {
        return Err(MultipathdError::Refused {
            command: args.join(" "),
            answer: word.to_string(),
        });
    }
    let parsed = parse_paths(&answer);
    for s in &parsed.skipped {
        tracing::warn!(line_no = s.line_no, line = %s.line, reason = %s.reason, "multipathd path line skipped");
    }
    Ok(Some(parsed.paths))
}

/// `multipathd reinstate path DEV`: `Err` with multipathd's word.
pub fn reinstate(
    client: &dyn MultipathdClient,
    dev: &str,
    timeout: Duration,
) -> Result<(), String> {
    let args: Vec<String> = ["reinstate", "path", dev]
        .iter()
        .map(ToString::to_string)
        .collect();
    match client.command(&args, timeout) {
        Ok(a) => match refused(&a) {
            Some(word) => Err(word.to_string()),
            None => Ok(()),
        },
        Err(e) => Err(e.to_string()),
    }
}

/// Reads the maps' paths, and brings remembered paths back after a re-creation.
pub trait MultipathRestore: Send + Sync {
    /// The paths of every map now: `None` without multipathd installed.
    fn read(&self) -> Result<Option<Vec<MultipathPath>>, MultipathdError>;
    /// One report per remembered path, in order; blocks up to about `timeout` plus the
    /// reinstate's own wait.
    fn restore(
        &self,
        paths: &[MultipathPathRef],
        carriers: &[BlockCarrier],
        timeout: Duration,
    ) -> Vec<PathBackReport>;
}

/// The real one: multipathd through a client, waiting on the wall clock.
pub struct MultipathdRestore {
    /// The client.
    pub client: std::sync::Arc<dyn MultipathdClient>,
    /// How often the paths are read while waiting.
    pub poll: Duration,
    /// How long a reinstated path has to show active.
    pub reinstate_wait: Duration,
}

impl std::fmt::Debug for MultipathdRestore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MultipathdRestore")
            .field("poll", &self.poll)
            .finish_non_exhaustive()
    }
}

impl MultipathdRestore {
    /// multipathd at `program`.
    pub fn new(program: PathBuf) -> Self {
        MultipathdRestore {
            client: std::sync::Arc::new(MultipathdProgram { program }),
            poll: POLL,
            reinstate_wait: REINSTATE_SHOW,
        }
    }

    /// Every remembered path, reported the same way (`why` none could be checked).
    fn all_failed(paths: &[MultipathPathRef], why: &str) -> Vec<PathBackReport> {
        paths
            .iter()
            .map(|p| PathBackReport {
                path: p.clone(),
                result: PathBackResult::Failed {
                    dev: p.dev.clone(),
                    reason: why.to_string(),
                },
            })
            .collect()
    }

    /// Reads until every path is active or `until` passes; the last answer read.
    fn wait(
        &self,
        until: WallInstant,
        mut all_active: impl FnMut(&[MultipathPath]) -> bool,
    ) -> Result<Vec<MultipathPath>, String> {
        loop {
            let now = match read_paths(self.client.as_ref(), COMMAND_TIMEOUT) {
                Ok(Some(p)) => p,
                Ok(None) => return Err("multipathd is not installed".into()),
                Err(e) => return Err(e.to_string()),
            };
            if all_active(&now) || WallInstant::now() >= until {
                return Ok(now);
            }
            std::thread::sleep(self.poll);
        }
    }
}

impl MultipathRestore for MultipathdRestore {
    fn read(&self) -> Result<Option<Vec<MultipathPath>>, MultipathdError> {
        read_paths(self.client.as_ref(), COMMAND_TIMEOUT)
    }

    fn restore(
        &self,
        paths: &[MultipathPathRef],
        carriers: &[BlockCarrier],
        timeout: Duration,
    ) -> Vec<PathBackReport> {
        let active =
            |now: &[MultipathPath]| judge(paths, now, carriers).iter().all(PathNow::is_active);
        // The bounded wait: multipathd's checker reinstates a path whose device is back at
        // its next pass.
        let now = match self.wait(WallInstant::now() + timeout, active) {
            Ok(n) => n,
            Err(why) => return Self::all_failed(paths, &why),
        };
        let mut asked: BTreeMap<String, Result<(), String>> = BTreeMap::new();
        for n in judge(paths, &now, carriers) {
            if let PathNow::Reinstatable(p) = n {
                let r = reinstate(self.client.as_ref(), &p.dev, COMMAND_TIMEOUT);
                tracing::info!(dev = %p.dev, map = %p.map, result = ?r, "multipathd reinstate path");
                asked.insert(p.dev.clone(), r);
            }
        }
        if !asked.values().any(Result::is_ok) {
            return reports(paths, &judge(paths, &now, carriers), &asked);
        }
        match self.wait(WallInstant::now() + self.reinstate_wait, active) {
            Ok(again) => reports(paths, &judge(paths, &again, carriers), &asked),
            Err(why) => Self::all_failed(paths, &why),
        }
    }
}

/// The dm-multipath maps sysfs shows: the dm name of every `block/dm-N` whose
/// `dm/uuid` starts with `mpath-` (what multipath-tools sets on the maps it creates).
/// Unreadable entries are left out.
pub fn sysfs_maps(sysfs_root: &std::path::Path) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(sysfs_root.join("block")) else {
        return Vec::new();
    };
    let mut out: Vec<String> = dir
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("dm-"))
        .filter_map(|e| {
            let dm = e.path().join("dm");
            let uuid = std::fs::read_to_string(dm.join("uuid")).ok()?;
            if !uuid.trim().starts_with("mpath-") {
                return None;
            }
            Some(
                std::fs::read_to_string(dm.join("name"))
                    .ok()?
                    .trim()
                    .to_string(),
            )
        })
        .collect();
    out.sort();
    out
}

/// What a test runs on each scripted multipathd call.
type MultipathdHook = Box<dyn FnMut(&[String]) -> Option<Result<String, MultipathdError>> + Send>;

/// A scripted multipathd client: records its calls; a hook answers each call (`None`: the
/// queue's next answer, else an empty answer).
#[derive(Default)]
pub struct ScriptedMultipathd {
    /// Not installed.
    pub missing: bool,
    answers: Mutex<std::collections::VecDeque<Result<String, MultipathdError>>>,
    calls: Mutex<Vec<Vec<String>>>,
    hook: Mutex<Option<MultipathdHook>>,
}

impl std::fmt::Debug for ScriptedMultipathd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedMultipathd")
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

impl ScriptedMultipathd {
    /// Queues an answer.
    pub fn answer(&self, a: Result<String, MultipathdError>) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(a);
    }

    /// Answers every call with `f` first.
    pub fn on_call(
        &self,
        f: impl FnMut(&[String]) -> Option<Result<String, MultipathdError>> + Send + 'static,
    ) {
        *self.hook.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(f));
    }

    /// Every call's arguments.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl MultipathdClient for ScriptedMultipathd {
    fn available(&self) -> bool {
        !self.missing
    }

    fn command(&self, args: &[String], _timeout: Duration) -> Result<String, MultipathdError> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(args.to_vec());
        if let Some(h) = self.hook.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            if let Some(a) = h(args) {
                return a;
            }
        }
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
            .unwrap_or_else(|| Ok(String::new()))
    }
}

/// A scripted restore for the daemon's loop tests: no maps unless paths are set, every
/// remembered path active under its own name; records the calls.
#[derive(Debug, Default)]
pub struct ScriptedMultipathRestore {
    /// The paths `read` answers (`None`: not installed).
    pub paths: Mutex<Option<Vec<MultipathPath>>>,
    calls: Mutex<Vec<Vec<MultipathPathRef>>>,
}

impl ScriptedMultipathRestore {
    /// The remembered paths of every restore.
    pub fn calls(&self) -> Vec<Vec<MultipathPathRef>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl MultipathRestore for ScriptedMultipathRestore {
    fn read(&self) -> Result<Option<Vec<MultipathPath>>, MultipathdError> {
        Ok(self.paths.lock().unwrap_or_else(|p| p.into_inner()).clone())
    }

    fn restore(
        &self,
        paths: &[MultipathPathRef],
        _carriers: &[BlockCarrier],
        _timeout: Duration,
    ) -> Vec<PathBackReport> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(paths.to_vec());
        paths
            .iter()
            .map(|p| PathBackReport {
                path: p.clone(),
                result: PathBackResult::Active { dev: p.dev.clone() },
            })
            .collect()
    }
}

#[cfg(test)]
mod tests;
