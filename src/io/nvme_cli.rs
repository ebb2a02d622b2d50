//! Bringing NVMe over RDMA controllers back after a device re-creation: `nvme connect` with
//! the parameters remembered before it ([`crate::core::nvme_fabrics::connect_args`]), then
//! the verification: the controller live again with every remembered namespace
//! ([`crate::core::nvme_fabrics::check_back`], read from sysfs until a deadline), and a
//! direct-I/O read of each namespace ([`crate::io::direct_read`], as `doctor --active` reads
//! iSCSI disks).
//!
//! Two small traits, so tests and the simulated host pass doubles: [`NvmeConnector`] runs
//! nvme-cli (the real one with a timeout through [`crate::io::process`], on the executor
//! pool, never the daemon's loop), [`NvmeRestore`] is the whole reconnect-and-verify the
//! executor calls. Without nvme-cli (or with `recovery.nvme-reconnect = false`) every
//! controller is reported not brought back, with why.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant as WallInstant};

use crate::core::nvme_fabrics::{
    check_back, connect_args, NvmeBackResult, NvmeRdmaController, NvmeReconnectReport,
};
use crate::io::process::{run, Invocation};

/// How often sysfs is read again while a controller is not back yet.
const POLL: Duration = Duration::from_millis(200);

/// The pause before a failed `nvme connect` is tried again.
const CONNECT_RETRY: Duration = Duration::from_secs(1);

/// Runs nvme-cli.
pub trait NvmeConnector: Send + Sync {
    /// nvme-cli is installed (its binary is executable).
    fn available(&self) -> bool;
    /// `nvme ARGS…` (`connect …`), within `timeout`; `Err` carries nvme-cli's last words or
    /// why it could not run.
    fn run(&self, args: &[String], timeout: Duration) -> Result<(), String>;
}

/// The real nvme-cli at a configured path (`paths.nvme`).
#[derive(Debug, Clone)]
pub struct NvmeCliProgram {
    /// Its path.
    pub program: PathBuf,
}

impl NvmeConnector for NvmeCliProgram {
    fn available(&self) -> bool {
        crate::io::process::is_executable(&self.program)
    }

    fn run(&self, args: &[String], timeout: Duration) -> Result<(), String> {
        let inv = Invocation::new(&self.program, args, timeout);
        match run(&inv) {
            Ok(out) if out.success() => Ok(()),
            Ok(out) => Err(format!("{:?}: {}", out.exit, out.last_words())),
            Err(e) => Err(e.to_string()),
        }
    }
}

/// Reconnects and verifies remembered controllers.
pub trait NvmeRestore: Send + Sync {
    /// One report per controller, in order; blocks up to `timeout` per controller.
    fn restore(
        &self,
        controllers: &[NvmeRdmaController],
        timeout: Duration,
    ) -> Vec<NvmeReconnectReport>;
}

/// A direct-I/O read of one block device.
pub type BlockRead = fn(&Path) -> std::io::Result<()>;

/// The real restore: nvme-cli, sysfs, direct reads.
pub struct NvmeCliRestore {
    /// nvme-cli.
    pub connector: Arc<dyn NvmeConnector>,
    /// `paths.sysfs-root`.
    pub sysfs_root: PathBuf,
    /// `paths.dev-root`.
    pub dev_root: PathBuf,
    /// `recovery.nvme-reconnect`.
    pub enabled: bool,
    /// The read each namespace gets ([`crate::io::direct_read::read_direct`]).
    pub read: BlockRead,
}

impl std::fmt::Debug for NvmeCliRestore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NvmeCliRestore")
            .field("sysfs_root", &self.sysfs_root)
            .field("enabled", &self.enabled)
            .finish_non_exhaustive()
    }
}

impl NvmeCliRestore {
    /// The real one: nvme-cli at `program`.
    pub fn new(program: PathBuf, sysfs_root: PathBuf, dev_root: PathBuf, enabled: bool) -> Self {
        NvmeCliRestore {
            connector: Arc::new(NvmeCliProgram { program }),
            sysfs_root,
            dev_root,
            enabled,
            read: crate::io::direct_read::read_direct,
        }
    }

    fn verify(&self, c: &NvmeRdmaController) -> Result<NvmeBackResult, NvmeBackResult> {
        let (now, skipped) = crate::io::sysfs::nvme::rdma_controllers(&self.sysfs_root);
        for s in skipped {
            tracing::debug!(skipped = %s, "NVMe controller not read");
        }
        let (back, blocks) = check_back(c, &now)?;
        for b in blocks {
            (self.read)(&self.dev_root.join(&b)).map_err(|e| NvmeBackResult::ReadFailed {
                now: back.name.clone(),
                namespace: b.clone(),
                reason: e.to_string(),
            })?;
        }
        Ok(NvmeBackResult::Back {
            now: back.name.clone(),
        })
    }

    fn one(&self, c: &NvmeRdmaController, timeout: Duration) -> NvmeBackResult {
        if !self.enabled {
            return NvmeBackResult::Disabled;
        }
        if !self.connector.available() {
            return NvmeBackResult::NoNvmeCli;
        }
        // Already back (someone else connected it): nothing to connect, only to verify.
        if let Ok(back) = self.verify(c) {
            return back;
        }
        let deadline = WallInstant::now() + timeout;
        // A port just re-created may not carry a connection yet (link training, the GID
        // table filling): a failed connect is tried again until the deadline.
        loop {
            let left = deadline.saturating_duration_since(WallInstant::now());
            let Err(reason) = self.connector.run(&connect_args(c), left.max(POLL)) else {
                break;
            };
            // nvme-cli refuses a duplicate connect (EALREADY): what sysfs shows decides.
            if let Ok(back) = self.verify(c) {
                return back;
            }
            if WallInstant::now() + CONNECT_RETRY >= deadline {
                return NvmeBackResult::ConnectFailed { reason };
            }
            std::thread::sleep(CONNECT_RETRY);
        }
        loop {
            let last = match self.verify(c) {
                Ok(back) => return back,
                Err(e) => e,
            };
            if WallInstant::now() >= deadline || matches!(last, NvmeBackResult::ReadFailed { .. }) {
                return last;
            }
            std::thread::sleep(POLL);
        }
    }
}

impl NvmeRestore for NvmeCliRestore {
    fn restore(
        &self,
        controllers: &[NvmeRdmaController],
        timeout: Duration,
    ) -> Vec<NvmeReconnectReport> {
        controllers
            .iter()
            .map(|c| NvmeReconnectReport {
                controller: c.clone(),
                result: self.one(c, timeout),
            })
            .collect()
    }
}

/// What a test runs on each scripted nvme-cli call.
type CallHook = Box<dyn FnMut(&[String]) + Send>;

/// A scripted nvme-cli: records its calls, answers from a queue (`Ok` when empty), and runs
/// a hook on each call (a test writes the new controller's sysfs files there).
#[derive(Default)]
pub struct ScriptedNvmeCli {
    /// Installed.
    pub missing: bool,
    answers: Mutex<std::collections::VecDeque<Result<(), String>>>,
    calls: Mutex<Vec<Vec<String>>>,
    hook: Mutex<Option<CallHook>>,
}

impl std::fmt::Debug for ScriptedNvmeCli {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedNvmeCli")
            .field("missing", &self.missing)
            .finish_non_exhaustive()
    }
}

impl ScriptedNvmeCli {
    /// Queues an answer.
    pub fn answer(&self, a: Result<(), String>) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(a);
    }

    /// Runs `f` on every call, before answering.
    pub fn on_call(&self, f: impl FnMut(&[String]) + Send + 'static) {
        *self.hook.lock().unwrap_or_else(|p| p.into_inner()) = Some(Box::new(f));
    }

    /// Every call's arguments.
    pub fn calls(&self) -> Vec<Vec<String>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl NvmeConnector for ScriptedNvmeCli {
    fn available(&self) -> bool {
        !self.missing
    }

    fn run(&self, args: &[String], _timeout: Duration) -> Result<(), String> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(args.to_vec());
        if let Some(h) = self.hook.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
            h(args);
        }
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()
            .unwrap_or(Ok(()))
    }
}

#[cfg(test)]
mod tests;

/// A scripted restore for the daemon's loop tests: answers queued reports' results in
/// order, else reports every controller back under its own name; records the calls.
#[derive(Debug, Default)]
pub struct ScriptedNvmeRestore {
    answers: Mutex<std::collections::VecDeque<NvmeBackResult>>,
    calls: Mutex<Vec<Vec<NvmeRdmaController>>>,
}

impl ScriptedNvmeRestore {
    /// Queues the result of the next controller.
    pub fn answer(&self, r: NvmeBackResult) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(r);
    }

    /// The controllers of every call.
    pub fn calls(&self) -> Vec<Vec<NvmeRdmaController>> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl NvmeRestore for ScriptedNvmeRestore {
    fn restore(
        &self,
        controllers: &[NvmeRdmaController],
        _timeout: Duration,
    ) -> Vec<NvmeReconnectReport> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(controllers.to_vec());
        controllers
            .iter()
            .map(|c| NvmeReconnectReport {
                controller: c.clone(),
                result: self
                    .answers
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop_front()
                    .unwrap_or_else(|| NvmeBackResult::Back {
                        now: c.name.clone(),
                    }),
            })
            .collect()
    }
}
