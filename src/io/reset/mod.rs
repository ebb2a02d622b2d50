//! Re-creates one RDMA device, so that its ports get a fresh GSI QP (QP 1).
//!
//! Owns executing a [`crate::core::reset_plan`] plan on the real host: the devlink, rdma and
//! modprobe invocations, the sysfs `unbind`/`bind` writes, and verifying that the device really
//! went away and came back (found again by parent PCI function and netdev, since it returns
//! with a new ib index and possibly a temporary name until udev's `rdma_rename` renames it).
//!
//! Guarantees:
//! - one device per call; whether that device may be touched at all (`devices.allow`, the
//!   operator's command, dry-run, pause) is decided by the core's driver
//!   ([`crate::core::driver`]) before the call is made, never here;
//! - a per-call dry run (`recreate(device, true)`, or [`DeviceResetter::plan`]) returns the
//!   plan and touches nothing (the operator's `--dry-run` preview and the daemon's rendering
//!   of a driver plan use it);
//! - methods are tried least disruptive first; a method that fails *before changing anything*
//!   (tool missing, parameter off, command refused while the device stayed) falls through to the
//!   next; once a device has gone away, no other method is tried: the outcome is reported.
//!
//! Why the iproute2 `devlink` binary rather than generic-netlink devlink: the devlink family
//! needs a genetlink resolver, the DEVLINK_ATTR_PARAM_* nest encoding and per-type value
//! attributes (a flag for booleans), none of which the crate carries; iproute2 is installed
//! wherever devlink parameters exist, its JSON output is stable, and it is used twice per
//! recovery, so a process spawn costs nothing that matters. The same goes for `rdma link`
//! (RDMA netlink NEWLINK/DELLINK in our nldev codec is the future path for rxe/siw).
//!
//! A step blocked in the kernel: removing an RDMA device (`enable_roce false`, an aux
//! `unbind`, `rdma link delete`) ends in `ib_unregister_device`, which waits, uninterruptibly,
//! for every user of the device to let go. A command that outlives its deadline and does not
//! die when killed ([`RunError::Stuck`]), or a sysfs write that has not returned after the
//! same time (watched from a second thread), is reported through the caller's `on_blocked`
//! ([`DeviceResetter::recreate_watched`]) with the task's state and kernel stack; the
//! resetter then waits for it on this thread (nothing else can end it), never starts another
//! method on the device meanwhile, and finishes the method once it returns.
//!
//! Blocking code: the daemon runs it on an executor thread, which a blocked step holds for
//! as long as the kernel does.

pub mod sysfs;

use crate::exit::ExitStatus;
use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::core::recovery::{BlockedStep, TaskId};
use crate::core::reset_plan::{
    self, DeviceFacts, DeviceIdentity, DevlinkParam, PlanOptions, RecreateFrom, ResetMethod,
};
use crate::io::process::{
    is_executable, Exit, Invocation, RunError, Runner, SystemRunner, KILL_GRACE,
};
use crate::io::task::{TaskRef, TaskSnapshot};

pub use sysfs::Sysfs;

/// How a re-creation is verified.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyPolicy {
    /// How long the device may take to disappear after the "down" step.
    pub gone_timeout: Duration,
    /// How long it may take to come back after the "up" step (irdma probe takes seconds).
    pub back_timeout: Duration,
    /// After it is back under another name, how long to wait for udev to rename it back.
    pub rename_grace: Duration,
    /// Sysfs poll interval.
    pub poll_interval: Duration,
}

impl Default for VerifyPolicy {
    fn default() -> Self {
        VerifyPolicy {
            gone_timeout: Duration::from_secs(15),
            back_timeout: Duration::from_secs(60),
            rename_grace: Duration::from_secs(5),
            poll_interval: Duration::from_millis(100),
        }
    }
}

/// Everything the resetter needs from the configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetConfig {
    /// `paths.sysfs-root`.
    pub sysfs_root: PathBuf,
    /// The iproute2 `devlink` binary.
    pub devlink: PathBuf,
    /// The iproute2 `rdma` binary.
    pub rdma: PathBuf,
    /// The `modprobe` binary.
    pub modprobe: PathBuf,
    /// `recovery.allow-module-reload`.
    pub allow_module_reload: bool,
    /// Deadline of one devlink/rdma/modprobe invocation; a sysfs `unbind`/`bind` write that
    /// has not returned after it and the kill grace is reported blocked too.
    pub command_timeout: Duration,
    /// Verification timing.
    pub verify: VerifyPolicy,
    /// Where `/proc` is: a blocked step's task state and kernel stack are read there.
    pub proc_root: PathBuf,
}

impl ResetConfig {
    /// The tools at these paths, under this sysfs, with the default timeouts.
    pub fn new(
        sysfs_root: PathBuf,
        devlink: PathBuf,
        rdma: PathBuf,
        modprobe: PathBuf,
        allow_module_reload: bool,
    ) -> Self {
        ResetConfig {
            sysfs_root,
            devlink,
            rdma,
            modprobe,
            allow_module_reload,
            command_timeout: Duration::from_secs(30),
            verify: VerifyPolicy::default(),
            proc_root: PathBuf::from("/proc"),
        }
    }
}

/// One method of a plan with the concrete steps it would take.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlannedMethod {
    /// The method.
    pub method: ResetMethod,
    /// Its steps, as they would run (command lines and sysfs writes).
    pub steps: Vec<String>,
}

/// What would be done to one device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetPlan {
    /// The device.
    pub device: String,
    /// What sysfs said about it, or, when it is gone, what was remembered.
    pub facts: DeviceFacts,
    /// The device is gone from sysfs: each method only brings it back (its "up" step).
    pub absent: bool,
    /// Methods in the order they would be tried.
    pub methods: Vec<PlannedMethod>,
    /// Methods left out and why.
    pub skipped: Vec<String>,
}

/// A successful re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Recreated {
    /// The method that worked.
    pub method: ResetMethod,
    /// Name before.
    pub old_name: String,
    /// Name after (normally the same, once udev has renamed it back).
    pub new_name: String,
    /// From the first step to the device being back, in milliseconds.
    pub took_ms: u64,
    /// Methods tried before that failed without changing anything.
    pub failed_before: Vec<ResetMethodFailure>,
    /// The device was gone: only the method's "up" step ran, from what was remembered.
    #[serde(default)]
    pub brought_back: bool,
    /// After a devlink toggle the RDMA mode was found wrong (the driver re-plugged the
    /// device as iWARP, or `enable_roce` was off) and was restored: what was found and
    /// what the restore did.
    #[serde(default)]
    pub mode_restored: Option<String>,
}

/// One timed step of a re-creation (`doctor --active` reports them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct StepTiming {
    /// What ran: the command or sysfs write, or the wait (`gone`, `back as NAME`).
    pub step: String,
    /// How long it took, milliseconds.
    pub took_ms: u64,
    /// It did what it should.
    pub ok: bool,
}

/// A re-creation by one method, with each step's time ([`DeviceResetter::recreate_by`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TimedRecreation {
    /// The outcome, as [`DeviceResetter::recreate`] gives it.
    pub recreated: Recreated,
    /// Its steps in order.
    pub steps: Vec<StepTiming>,
}

/// The result of [`DeviceResetter::recreate`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ResetOutcome {
    /// Dry-run: nothing was done; this is what would have been.
    DryRun(ResetPlan),
    /// The device went away and came back.
    Recreated(Recreated),
}

/// A method that failed without taking the device down. The engine's outcome carries it
/// in words ([`crate::core::recovery::MethodFailure`], from [`ResetMethodFailure::in_words`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResetMethodFailure {
    /// The method.
    pub method: ResetMethod,
    /// What went wrong.
    pub error: String,
}

impl ResetMethodFailure {
    /// The failure as the engine and the operator see it.
    pub fn in_words(&self) -> crate::core::recovery::MethodFailure {
        crate::core::recovery::MethodFailure {
            method: self.method.to_string(),
            error: self.error.clone(),
        }
    }
}

/// Why one step failed.
#[derive(Debug, thiserror::Error)]
pub enum StepError {
    /// The tool could not be run or hung.
    #[error(transparent)]
    Run(#[from] RunError),
    /// The tool ran and refused.
    #[error("`{command}` exited with {exit}: {message}")]
    Exit {
        /// The command line.
        command: String,
        /// Exit status.
        exit: String,
        /// Its last words on stderr.
        message: String,
    },
    /// A sysfs write failed.
    #[error("writing {value:?} to {path} failed: {source}")]
    Write {
        /// The sysfs file.
        path: PathBuf,
        /// What was written.
        value: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The step was blocked in the kernel and has since returned (a command that was
    /// killed while blocked dies of that signal as it returns: what it did in the kernel
    /// is done; the device's state tells).
    #[error("`{step}` was blocked in the kernel for {:.0} s before it returned ({outcome})", blocked.as_secs_f64())]
    ReturnedAfterBlock {
        /// The step as typed.
        step: String,
        /// How long it had run when it returned.
        blocked: Duration,
        /// How it ended.
        outcome: String,
    },
    /// The devlink parameter is not on, so toggling it would not re-create anything.
    #[error("devlink parameter {param} of {handle} is {state}, not true: RDMA on this function is off or in the other mode")]
    ParamNotOn {
        /// devlink handle.
        handle: String,
        /// The parameter.
        param: String,
        /// What was read.
        state: String,
    },
}

impl StepError {
    /// The step was blocked in the kernel before it returned: whatever it did is done, so
    /// no other method may follow it.
    pub fn was_blocked(&self) -> bool {
        matches!(self, StepError::ReturnedAfterBlock { .. })
    }
}

/// Why a device could not be re-created.
#[derive(Debug, thiserror::Error)]
pub enum ResetError {
    /// No such RDMA device under the sysfs root, and nothing remembered about it (never seen
    /// while it existed): there is nothing to re-create it from.
    #[error(
        "no RDMA device {device} under {}/class/infiniband, and nothing is remembered about \
         it to re-create it from (iser-guard never saw it while it existed); check `rdma dev`, \
         then {}",
        root.display(),
        reset_plan::manual_recreate_hint(device)
    )]
    NoSuchDevice {
        /// The device.
        device: String,
        /// The sysfs root.
        root: PathBuf,
    },
    /// The device is gone and so is the parent function it was remembered on.
    #[error(
        "{device} is gone and so is its parent {parent} (not under {}/bus/pci/devices): \
         nothing left to re-create it from; check `lspci` and `dmesg`",
        root.display()
    )]
    ParentGone {
        /// The device.
        device: String,
        /// The remembered parent (`0000:02:00.0`).
        parent: String,
        /// The sysfs root.
        root: PathBuf,
    },
    /// After a devlink toggle the RDMA mode was wrong (iWARP, or `enable_roce` off) and one
    /// more toggle did not restore RoCE.
    #[error(
        "{device} came back in the wrong RDMA mode ({found}) and RoCE could not be restored: \
         {error}; check `devlink dev param show` and `ls /sys/bus/auxiliary/devices`, then set \
         enable_roce true by hand (and enable_iwarp false)"
    )]
    ModeNotRestored {
        /// The device.
        device: String,
        /// What was wrong.
        found: String,
        /// Why the restore failed.
        error: String,
    },
    /// The device was absent, the method's "up" step ran, and it did not appear.
    #[error("{method} ran for the absent {device}, but it did not appear within {:.1} s; check `dmesg` and `rdma dev`", waited.as_secs_f64())]
    NotBroughtBack {
        /// The device.
        device: String,
        /// The method.
        method: ResetMethod,
        /// How long we waited.
        waited: Duration,
    },
    /// Sysfs could not be read.
    #[error("reading sysfs under {}: {source}", root.display())]
    Sysfs {
        /// The sysfs root.
        root: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// No method applies to this device.
    #[error("no way to re-create {device}: {}", reasons.join("; "))]
    NoMethod {
        /// The device.
        device: String,
        /// Why each method was left out.
        reasons: Vec<String>,
    },
    /// Every method failed before changing anything; the device is as it was.
    #[error("every method failed for {device}, the device is unchanged: {}", failures.iter().map(|f| format!("{}: {}", f.method, f.error)).collect::<Vec<_>>().join("; "))]
    AllMethodsFailed {
        /// The device.
        device: String,
        /// Each method's failure.
        failures: Vec<ResetMethodFailure>,
    },
    /// The "down" step ran but the device never went away (its "up" step was still run to
    /// restore the intended setting); the port is still stuck.
    #[error("{method} ran but {device} did not disappear within {:.1} s; the port is still stuck", waited.as_secs_f64())]
    DidNotDisappear {
        /// The device.
        device: String,
        /// The method.
        method: ResetMethod,
        /// How long we waited.
        waited: Duration,
    },
    /// The device went away and its "up" step failed: it is gone now.
    #[error("{device} was removed by {method} but bringing it back failed: {error}. The device is GONE: run the step by hand or reload the driver")]
    UpStepFailed {
        /// The device.
        device: String,
        /// The method.
        method: ResetMethod,
        /// The step's error.
        error: String,
    },
    /// A read-only check of a method was blocked in the kernel: the device's driver is busy
    /// with something that does not return, so no method was run on it.
    #[error(
        "{method}: its check was blocked in the kernel, so nothing was run on {device}: {error}"
    )]
    CheckBlocked {
        /// The device.
        device: String,
        /// The method.
        method: ResetMethod,
        /// The check's error.
        error: String,
    },
    /// The device went away and did not come back in time.
    #[error("{device} was removed by {method} and did not come back within {:.1} s; check `dmesg` and `rdma dev`", waited.as_secs_f64())]
    DidNotReturn {
        /// The device.
        device: String,
        /// The method.
        method: ResetMethod,
        /// How long we waited.
        waited: Duration,
    },
}

impl ResetError {
    /// The documented exit code ([`crate::exit`]) for a command that failed with this.
    pub fn status(&self) -> ExitStatus {
        match self {
            ResetError::NoSuchDevice { .. } | ResetError::ParentGone { .. } => ExitStatus::NoInput,
            ResetError::NotBroughtBack { .. } => ExitStatus::OsErr,
            ResetError::Sysfs { source, .. } => crate::exit::io_status(source),
            ResetError::NoMethod { .. } | ResetError::AllMethodsFailed { .. } => {
                ExitStatus::Unavailable
            }
            ResetError::DidNotDisappear { .. } | ResetError::CheckBlocked { .. } => {
                ExitStatus::TempFail
            }
            ResetError::UpStepFailed { .. }
            | ResetError::DidNotReturn { .. }
            | ResetError::ModeNotRestored { .. } => ExitStatus::OsErr,
        }
    }

    /// True when the device may now be missing (the operator must look).
    pub fn device_may_be_gone(&self) -> bool {
        matches!(
            self,
            ResetError::UpStepFailed { .. }
                | ResetError::DidNotReturn { .. }
                | ResetError::NotBroughtBack { .. }
                | ResetError::ModeNotRestored { .. }
        )
    }

    /// True when no attempt can help until an operator acts (nothing to re-create the
    /// device from): the engine quarantines at once instead of retrying.
    pub fn is_unsupported(&self) -> bool {
        matches!(
            self,
            ResetError::NoMethod { .. }
                | ResetError::NoSuchDevice { .. }
                | ResetError::ParentGone { .. }
        )
    }
}

/// Told, from the resetter's thread or its watchdog, that a step is blocked in the kernel.
pub type OnBlocked<'a> = &'a (dyn Fn(BlockedStep) + Sync);

/// Re-creates RDMA devices. The real one is [`SysfsResetter`]; [`ScriptedResetter`] is the
/// double for the daemon's tests and the simulator.
pub trait DeviceResetter: Send + Sync {
    /// What [`DeviceResetter::recreate_from`] would do, without doing it. `remembered`: what
    /// was learned about the device while it existed (the engine's memory); used when the
    /// device is gone from sysfs.
    fn plan_from(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
    ) -> Result<ResetPlan, ResetError>;
    /// Re-creates `device` (see the module doc), or, when it is gone, brings it back from
    /// `remembered`; with `dry_run` returns [`ResetOutcome::DryRun`] and does nothing.
    fn recreate_from(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
        dry_run: bool,
    ) -> Result<ResetOutcome, ResetError>;
    /// [`DeviceResetter::recreate_from`] (never a dry run), calling `on_blocked` when a step
    /// is blocked in the kernel (see the module doc); the call returns once the step has
    /// returned and the re-creation is finished. A resetter whose steps cannot block does
    /// not call it.
    fn recreate_watched(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
        on_blocked: OnBlocked<'_>,
    ) -> Result<ResetOutcome, ResetError> {
        let _ = on_blocked;
        self.recreate_from(device, remembered, false)
    }
    /// Re-creates the present `device` by `method` alone, timing each step: the same steps
    /// and verification as [`DeviceResetter::recreate`], with no fall-through to another
    /// method (`doctor --active` proves each method on its own). A method that fails before
    /// changing anything is [`ResetError::AllMethodsFailed`] with that one failure; a method
    /// the device's plan does not offer is [`ResetError::NoMethod`].
    fn recreate_by(
        &self,
        device: &str,
        method: &ResetMethod,
        steps: &mut Vec<StepTiming>,
    ) -> Result<Recreated, ResetError>;
    /// [`DeviceResetter::plan_from`] with nothing remembered (a present device).
    fn plan(&self, device: &str) -> Result<ResetPlan, ResetError> {
        self.plan_from(device, None)
    }
    /// [`DeviceResetter::recreate_from`] with nothing remembered (a present device).
    fn recreate(&self, device: &str, dry_run: bool) -> Result<ResetOutcome, ResetError> {
        self.recreate_from(device, None, dry_run)
    }
}

/// One concrete step.
#[derive(Debug, Clone)]
enum Step {
    Run(Invocation),
    Write { path: PathBuf, value: String },
}

impl Step {
    fn describe(&self) -> String {
        match self {
            Step::Run(inv) => inv.display(),
            Step::Write { path, value } => format!("echo {value} > {}", path.display()),
        }
    }
}

/// A method's steps: an optional precondition check, then down, then up.
struct RunnableSteps {
    check: Option<Invocation>,
    down: Step,
    up: Step,
}

enum MethodError {
    /// Nothing changed: try the next method.
    Skip(StepError),
    /// Something changed: stop and report.
    Fatal(ResetError),
}

/// The real resetter: sysfs, devlink, rdma, modprobe.
pub struct SysfsResetter {
    cfg: ResetConfig,
    sysfs: Sysfs,
    runner: Arc<dyn Runner>,
}

impl std::fmt::Debug for SysfsResetter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SysfsResetter")
            .field("cfg", &self.cfg)
            .finish_non_exhaustive()
    }
}

impl SysfsResetter {
    /// A resetter with the real process runner.
    pub fn new(cfg: ResetConfig) -> Self {
        Self::with_runner(cfg, Arc::new(SystemRunner))
    }

    /// A resetter with another [`Runner`].
    pub fn with_runner(cfg: ResetConfig, runner: Arc<dyn Runner>) -> Self {
        SysfsResetter {
            sysfs: Sysfs::new(cfg.sysfs_root.clone()),
            cfg,
            runner,
        }
    }

    fn sysfs_err(&self, source: std::io::Error) -> ResetError {
        ResetError::Sysfs {
            root: self.cfg.sysfs_root.clone(),
            source,
        }
    }

    fn build_plan(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
    ) -> Result<ResetPlan, ResetError> {
        let present = self.sysfs.facts(device).map_err(|e| self.sysfs_err(e))?;
        let absent = present.is_none();
        let (facts, current_aux) = match (present, remembered) {
            (Some(facts), _) => (facts, None),
            (None, None) => {
                return Err(ResetError::NoSuchDevice {
                    device: device.to_string(),
                    root: self.cfg.sysfs_root.clone(),
                })
            }
            (None, Some(r)) => (r.facts(device), self.current_aux(device, r)?),
        };
        let same_module_devices = self.same_module_devices(&facts)?;
        let opts = PlanOptions {
            allow_module_reload: self.cfg.allow_module_reload,
            devlink_available: is_executable(&self.cfg.devlink),
            rdma_available: is_executable(&self.cfg.rdma),
            same_module_devices,
        };
        let plan = match remembered.filter(|_| absent) {
            Some(r) => reset_plan::plan_gone(device, r, current_aux.as_ref(), &opts),
            None => reset_plan::plan(&facts, &opts),
        };
        if plan.methods.is_empty() {
            return Err(ResetError::NoMethod {
                device: device.to_string(),
                reasons: plan.skipped,
            });
        }
        let methods = plan
            .methods
            .into_iter()
            .map(|m| {
                let s = self.steps(&m);
                let mut steps = Vec::new();
                if !absent {
                    steps.extend(s.check.iter().map(Invocation::display));
                    steps.push(s.down.describe());
                    steps.push("wait until the device is gone".into());
                }
                steps.push(s.up.describe());
                steps.push("wait until it is back (followed by parent and netdev)".into());
                PlannedMethod { method: m, steps }
            })
            .collect();
        Ok(ResetPlan {
            device: device.to_string(),
            facts,
            absent,
            methods,
            skipped: plan.skipped,
        })
    }

    /// For a gone hardware device: the RDMA auxiliary device under its remembered parent
    /// function now (the function outlives the ib_device). A parent that is gone too is an
    /// error: nothing is left to re-create the device from.
    fn current_aux(
        &self,
        device: &str,
        remembered: &RecreateFrom,
    ) -> Result<Option<reset_plan::AuxFacts>, ResetError> {
        let RecreateFrom::Parent { parent, .. } = remembered else {
            return Ok(None);
        };
        if parent.bus != "pci" {
            return Ok(None);
        }
        match self.sysfs.pci_rdma_aux(&parent.name) {
            Ok(aux) => Ok(aux),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ResetError::ParentGone {
                device: device.to_string(),
                parent: parent.name.clone(),
                root: self.cfg.sysfs_root.clone(),
            }),
            Err(e) => Err(self.sysfs_err(e)),
        }
    }

    fn same_module_devices(&self, facts: &DeviceFacts) -> Result<Vec<String>, ResetError> {
        let module = |f: &DeviceFacts| f.aux.as_ref().and_then(|a| a.module.clone());
        let Some(m) = module(facts) else {
            return Ok(Vec::new());
        };
        let all = self.sysfs.all_facts().map_err(|e| self.sysfs_err(e))?;
        Ok(all
            .iter()
            .filter(|f| module(f).as_deref() == Some(m.as_str()))
            .map(|f| f.name.clone())
            .collect())
    }

    fn inv<I, S>(&self, program: &std::path::Path, args: I) -> Invocation
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        Invocation::new(program, args, self.cfg.command_timeout)
    }

    fn steps(&self, m: &ResetMethod) -> RunnableSteps {
        match m {
            ResetMethod::DevlinkToggle { handle, param } => {
                let set = |v: &str| {
                    Step::Run(self.inv(
                        &self.cfg.devlink,
                        [
                            "dev",
                            "param",
                            "set",
                            handle,
                            "name",
                            param.name(),
                            "value",
                            v,
                            "cmode",
                            "runtime",
                        ],
                    ))
                };
                RunnableSteps {
                    check: Some(self.inv(
                        &self.cfg.devlink,
                        ["dev", "param", "show", handle, "name", param.name(), "-j"],
                    )),
                    down: set("false"),
                    up: set("true"),
                }
            }
            ResetMethod::AuxRebind { device, driver } => {
                let dir = self.sysfs.aux_driver_dir(driver);
                RunnableSteps {
                    check: None,
                    down: Step::Write {
                        path: dir.join("unbind"),
                        value: device.clone(),
                    },
                    up: Step::Write {
                        path: dir.join("bind"),
                        value: device.clone(),
                    },
                }
            }
            ResetMethod::RdmaLinkReadd { name, kind, netdev } => RunnableSteps {
                check: None,
                down: Step::Run(self.inv(&self.cfg.rdma, ["link", "delete", name])),
                up: Step::Run(self.inv(
                    &self.cfg.rdma,
                    ["link", "add", name, "type", kind.name(), "netdev", netdev],
                )),
            },
            ResetMethod::ModuleReload { module, .. } => RunnableSteps {
                check: None,
                down: Step::Run(self.inv(&self.cfg.modprobe, ["-r", module])),
                up: Step::Run(self.inv(&self.cfg.modprobe, [module])),
            },
        }
    }

    /// Runs `inv`; a command blocked in the kernel is reported through `on_blocked`, then
    /// waited for here (as long as the kernel holds it), never given up on by starting
    /// another.
    fn run_inv(&self, inv: &Invocation, on_blocked: OnBlocked<'_>) -> Result<String, StepError> {
        let out = match self.runner.run(inv) {
            Err(RunError::Stuck {
                command,
                timeout,
                child,
                ..
            }) => {
                let task = TaskRef::process(child.pid, &self.cfg.proc_root);
                let ran = timeout + inv.kill_grace;
                on_blocked(blocked_step(
                    &command,
                    ran,
                    &task.snapshot(&self.cfg.proc_root),
                ));
                let started = Instant::now();
                let exit = child.wait_ended(None);
                return Err(StepError::ReturnedAfterBlock {
                    step: command,
                    blocked: ran + started.elapsed(),
                    outcome: match exit {
                        Some(Exit::Code(c)) => format!("exit code {c}"),
                        Some(Exit::Signal(s)) => format!("ended by signal {s}"),
                        None => "its end is unknown".into(),
                    },
                });
            }
            other => other?,
        };
        if out.success() {
            return Ok(out.stdout);
        }
        Err(StepError::Exit {
            command: inv.display(),
            exit: match out.exit {
                Exit::Code(c) => format!("code {c}"),
                Exit::Signal(s) => format!("signal {s}"),
            },
            message: out.last_words(),
        })
    }

    fn do_step(&self, step: &Step, on_blocked: OnBlocked<'_>) -> Result<(), StepError> {
        match step {
            Step::Run(inv) => self.run_inv(inv, on_blocked).map(drop),
            Step::Write { path, value } => self.write_watched(step, path, value, on_blocked),
        }
    }

    /// A sysfs write has no timeout (an `unbind` waits in the kernel for as long as the
    /// device's removal does): a watchdog thread reports it blocked after the commands'
    /// deadline and kill grace, with this thread's state and kernel stack.
    fn write_watched(
        &self,
        step: &Step,
        path: &std::path::Path,
        value: &str,
        on_blocked: OnBlocked<'_>,
    ) -> Result<(), StepError> {
        let proc_root = &self.cfg.proc_root;
        let me = TaskRef::current_thread(proc_root);
        let limit = self.cfg.command_timeout + KILL_GRACE;
        let started = Instant::now();
        let blocked = std::sync::atomic::AtomicBool::new(false);
        let flag = &blocked;
        let (done, wait) = std::sync::mpsc::channel::<()>();
        let written = std::thread::scope(|s| {
            let watchdog = std::thread::Builder::new()
                .name("reset-watch".into())
                .spawn_scoped(s, move || {
                    if wait.recv_timeout(limit) == Err(std::sync::mpsc::RecvTimeoutError::Timeout) {
                        flag.store(true, std::sync::atomic::Ordering::SeqCst);
                        on_blocked(blocked_step(
                            &step.describe(),
                            started.elapsed(),
                            &me.snapshot(proc_root),
                        ));
                    }
                });
            if let Err(e) = watchdog {
                // Written unwatched: a block is then only seen as the re-creation's own
                // deadline passing.
                tracing::warn!("no watchdog thread for `{}`: {e}", step.describe());
            }
            let r = write_sysfs(path, value);
            drop(done);
            r
        });
        if blocked.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(StepError::ReturnedAfterBlock {
                step: step.describe(),
                blocked: started.elapsed(),
                outcome: match &written {
                    Ok(()) => "written".into(),
                    Err(e) => e.to_string(),
                },
            });
        }
        written
    }

    /// The device matching `id`, if present now.
    fn find(&self, id: &DeviceIdentity) -> Result<Option<DeviceFacts>, ResetError> {
        // The old name first: the common case, and one read instead of a scan.
        if let Some(f) = self.sysfs.facts(&id.name).map_err(|e| self.sysfs_err(e))? {
            if id.matches(&f) {
                return Ok(Some(f));
            }
        }
        let all = self.sysfs.all_facts().map_err(|e| self.sysfs_err(e))?;
        Ok(all.into_iter().find(|f| id.matches(f)))
    }

    /// Polls until `done(found)` or the deadline; returns the last observation and whether
    /// the condition was met.
    fn poll_until(
        &self,
        id: &DeviceIdentity,
        timeout: Duration,
        done: impl Fn(&Option<DeviceFacts>) -> bool,
    ) -> Result<(Option<DeviceFacts>, bool), ResetError> {
        let deadline = Instant::now() + timeout;
        loop {
            let found = self.find(id)?;
            if done(&found) {
                return Ok((found, true));
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok((found, false));
            }
            std::thread::sleep(self.cfg.verify.poll_interval.min(deadline - now));
        }
    }

    /// Brings back an absent device: the method's "up" step alone (`rdma link add`, `bind`,
    /// `enable_roce` true, `modprobe`). A refused step changed nothing (the device is still
    /// gone): the next method is tried.
    /// A step that was blocked in the kernel did what it did: the device's return decides.
    fn bring_back(
        &self,
        m: &ResetMethod,
        id: &DeviceIdentity,
        on_blocked: OnBlocked<'_>,
    ) -> Result<String, MethodError> {
        let fatal = MethodError::Fatal;
        let steps = self.steps(m);
        if let Err(e) = self.do_step(&steps.up, on_blocked) {
            if !e.was_blocked() && self.find(id).map_err(fatal)?.is_none() {
                return Err(MethodError::Skip(e));
            }
        }
        let back_timeout = self.cfg.verify.back_timeout;
        let (found, back) = self
            .poll_until(id, back_timeout, |f| f.is_some())
            .map_err(fatal)?;
        match (found, back) {
            (Some(found), true) => Ok(self.settle_name(id, found)?),
            _ => Err(fatal(ResetError::NotBroughtBack {
                device: id.name.clone(),
                method: m.clone(),
                waited: back_timeout,
            })),
        }
    }

    /// Back under a kernel name (e.g. irdma1): give udev's rdma_rename a moment.
    fn settle_name(&self, id: &DeviceIdentity, found: DeviceFacts) -> Result<String, MethodError> {
        if found.name == id.name {
            return Ok(found.name);
        }
        let want = id.name.clone();
        let (renamed, _) = self
            .poll_until(id, self.cfg.verify.rename_grace, |f| {
                f.as_ref().is_some_and(|f| f.name == want)
            })
            .map_err(MethodError::Fatal)?;
        Ok(renamed.map(|f| f.name).unwrap_or(found.name))
    }

    /// A step that was blocked in the kernel and returned is never followed by another
    /// method: what it did is done, and the device's state decides.
    fn run_method(
        &self,
        m: &ResetMethod,
        id: &DeviceIdentity,
        on_blocked: OnBlocked<'_>,
        t: &mut Vec<StepTiming>,
    ) -> Result<String, MethodError> {
        let fatal = MethodError::Fatal;
        let steps = self.steps(m);
        if let (Some(check), ResetMethod::DevlinkToggle { handle, param }) = (&steps.check, m) {
            let started = Instant::now();
            let json = self.run_inv(check, on_blocked);
            timed(t, check.display(), started, json.is_ok());
            let json = json.map_err(|e| {
                if e.was_blocked() {
                    fatal(ResetError::CheckBlocked {
                        device: id.name.clone(),
                        method: m.clone(),
                        error: e.to_string(),
                    })
                } else {
                    MethodError::Skip(e)
                }
            })?;
            match reset_plan::parse_devlink_param(&json, param.name()) {
                Ok(true) => {}
                Ok(false) => {
                    return Err(MethodError::Skip(StepError::ParamNotOn {
                        handle: handle.clone(),
                        param: param.name().into(),
                        state: "false".into(),
                    }))
                }
                Err(detail) => {
                    return Err(MethodError::Skip(StepError::ParamNotOn {
                        handle: handle.clone(),
                        param: param.name().into(),
                        state: format!("unreadable ({detail})"),
                    }))
                }
            }
        }
        let started = Instant::now();
        let down = self.do_step(&steps.down, on_blocked);
        timed(t, steps.down.describe(), started, down.is_ok());
        if let Err(e) = down {
            // A refused step normally changed nothing; but if the device is gone anyway, the
            // step took effect and the method must be finished. A step that was blocked took
            // effect whatever its exit says.
            if !e.was_blocked() && self.find(id).map_err(fatal)?.is_some() {
                return Err(MethodError::Skip(e));
            }
        }
        let gone_timeout = self.cfg.verify.gone_timeout;
        let started = Instant::now();
        let (_, gone) = self
            .poll_until(id, gone_timeout, |f| f.is_none())
            .map_err(fatal)?;
        timed(t, "wait until the device is gone", started, gone);
        if !gone {
            // Restore the intended setting (e.g. enable_roce true) before reporting.
            let _ = self.do_step(&steps.up, on_blocked);
            return Err(fatal(ResetError::DidNotDisappear {
                device: id.name.clone(),
                method: m.clone(),
                waited: gone_timeout,
            }));
        }
        let started = Instant::now();
        let up = self.do_step(&steps.up, on_blocked);
        timed(t, steps.up.describe(), started, up.is_ok());
        match up {
            // Blocked, then returned: whether it brought the device back, the wait below tells.
            Err(e) if !e.was_blocked() => {
                return Err(fatal(ResetError::UpStepFailed {
                    device: id.name.clone(),
                    method: m.clone(),
                    error: e.to_string(),
                }));
            }
            _ => {}
        }
        let back_timeout = self.cfg.verify.back_timeout;
        let started = Instant::now();
        let (found, back) = self
            .poll_until(id, back_timeout, |f| f.is_some())
            .map_err(fatal)?;
        timed(
            t,
            match &found {
                Some(f) if back => format!("wait until it is back (as {})", f.name),
                _ => "wait until it is back".to_string(),
            },
            started,
            back,
        );
        let (Some(found), true) = (found, back) else {
            return Err(fatal(ResetError::DidNotReturn {
                device: id.name.clone(),
                method: m.clone(),
                waited: back_timeout,
            }));
        };
        if found.name == id.name {
            return Ok(found.name);
        }
        let started = Instant::now();
        let name = self.settle_name(id, found)?;
        timed(
            t,
            format!("wait for udev to rename it (now {name})"),
            started,
            name == id.name,
        );
        Ok(name)
    }
}

impl SysfsResetter {
    /// After an `enable_roce` toggle: is the parameter on, and is the function's RDMA
    /// auxiliary device named `roce`? ice names the device it plugs from its mode bit
    /// (ice_idc.c), so a reset of the function while `enable_roce` was off (between the two
    /// devlink calls) re-plugs it as `ice.iwarp.N`, over which iSER/RoCE never connects.
    /// A wrong mode is restored with one more toggle (which unplugs whatever is plugged and
    /// plugs it as RoCE) and checked again; still wrong is an error.
    fn check_mode(
        &self,
        m: &ResetMethod,
        id: &DeviceIdentity,
        name: String,
        on_blocked: OnBlocked<'_>,
    ) -> Result<(String, Option<String>), ResetError> {
        let ResetMethod::DevlinkToggle {
            handle,
            param: DevlinkParam::EnableRoce,
        } = m
        else {
            return Ok((name, None));
        };
        let Some(found) = self.wrong_mode(m, id, on_blocked)? else {
            return Ok((name, None));
        };
        tracing::warn!("after the devlink toggle of {handle}: {found}; restoring RoCE");
        let name = match self.run_method(m, id, on_blocked, &mut Vec::new()) {
            Ok(n) => n,
            Err(MethodError::Fatal(e)) => return Err(e),
            Err(MethodError::Skip(e)) => {
                return Err(ResetError::ModeNotRestored {
                    device: id.name.clone(),
                    found,
                    error: e.to_string(),
                })
            }
        };
        match self.wrong_mode(m, id, on_blocked)? {
            None => Ok((
                name,
                Some(format!(
                    "{found}; restored by toggling enable_roce once more (the RDMA device is \
                     back as RoCE)"
                )),
            )),
            Some(still) => Err(ResetError::ModeNotRestored {
                device: id.name.clone(),
                found,
                error: format!("after one more toggle: {still}"),
            }),
        }
    }

    /// What is wrong with the function's RDMA mode, if anything.
    fn wrong_mode(
        &self,
        m: &ResetMethod,
        id: &DeviceIdentity,
        on_blocked: OnBlocked<'_>,
    ) -> Result<Option<String>, ResetError> {
        let steps = self.steps(m);
        let mut wrong = Vec::new();
        if let Some(check) = &steps.check {
            match self.run_inv(check, on_blocked) {
                Ok(json) => match reset_plan::parse_devlink_param(&json, "enable_roce") {
                    Ok(true) => {}
                    Ok(false) => wrong.push("enable_roce is false".to_string()),
                    Err(detail) => wrong.push(format!("enable_roce is unreadable ({detail})")),
                },
                Err(e) => wrong.push(format!("`{}` failed: {e}", check.display())),
            }
        }
        // The device as it is back: its parent function's RDMA auxiliary device.
        match self.find(id)?.and_then(|f| f.aux) {
            Some(aux) if !aux.name.contains(".roce.") => wrong.push(format!(
                "its RDMA auxiliary device is {} (not roce)",
                aux.name
            )),
            _ => {}
        }
        Ok((!wrong.is_empty()).then(|| wrong.join(", ")))
    }
}

/// Writes `value` to an existing sysfs file (never creates one: a missing file means a
/// wrong driver folder, not a file to make).
fn write_sysfs(path: &std::path::Path, value: &str) -> Result<(), StepError> {
    let werr = |source| StepError::Write {
        path: path.to_path_buf(),
        value: value.to_string(),
        source,
    };
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open(path)
        .map_err(werr)?;
    f.write_all(value.as_bytes()).map_err(werr)
}

/// What `on_blocked` is told: the step, how long it has run, the task as `/proc` shows it.
fn blocked_step(step: &str, ran: Duration, snap: &TaskSnapshot) -> BlockedStep {
    BlockedStep {
        step: step.to_string(),
        blocked_ms: u64::try_from(ran.as_millis()).unwrap_or(u64::MAX),
        task: snap.summary(),
        uninterruptible: snap.uninterruptible(),
        stack: snap.stack_lines(),
        id: TaskId {
            pid: snap.task.pid,
            tid: snap.task.tid,
            start_time: snap.task.start_time,
        },
    }
}

/// Records one step's time.
fn timed(t: &mut Vec<StepTiming>, step: impl Into<String>, started: Instant, ok: bool) {
    t.push(StepTiming {
        step: step.into(),
        took_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
        ok,
    });
}

impl DeviceResetter for SysfsResetter {
    fn plan_from(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
    ) -> Result<ResetPlan, ResetError> {
        self.build_plan(device, remembered)
    }

    fn recreate_from(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
        dry_run: bool,
    ) -> Result<ResetOutcome, ResetError> {
        if dry_run {
            return self.plan_from(device, remembered).map(ResetOutcome::DryRun);
        }
        // Nobody to tell: the step is still waited for, and no other method follows it.
        self.recreate_watched(device, remembered, &|step| {
            tracing::warn!(
                "`{}` is blocked in the kernel ({}); waiting for it",
                step.step,
                step.task
            );
        })
    }

    fn recreate_watched(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
        on_blocked: OnBlocked<'_>,
    ) -> Result<ResetOutcome, ResetError> {
        let plan = self.plan_from(device, remembered)?;
        let id = DeviceIdentity::of(&plan.facts);
        let start = Instant::now();
        let mut failures = Vec::new();
        for pm in plan.methods {
            let run = if plan.absent {
                self.bring_back(&pm.method, &id, on_blocked)
            } else {
                self.run_method(&pm.method, &id, on_blocked, &mut Vec::new())
            };
            match run {
                Ok(new_name) => {
                    let (new_name, mode_restored) =
                        self.check_mode(&pm.method, &id, new_name, on_blocked)?;
                    return Ok(ResetOutcome::Recreated(Recreated {
                        method: pm.method,
                        old_name: device.to_string(),
                        new_name,
                        took_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                        failed_before: failures,
                        brought_back: plan.absent,
                        mode_restored,
                    }));
                }
                Err(MethodError::Skip(e)) => failures.push(ResetMethodFailure {
                    method: pm.method,
                    error: e.to_string(),
                }),
                Err(MethodError::Fatal(e)) => return Err(e),
            }
        }
        Err(ResetError::AllMethodsFailed {
            device: device.to_string(),
            failures,
        })
    }

    fn recreate_by(
        &self,
        device: &str,
        method: &ResetMethod,
        steps: &mut Vec<StepTiming>,
    ) -> Result<Recreated, ResetError> {
        let plan = self.plan_from(device, None)?;
        if !plan.methods.iter().any(|pm| &pm.method == method) {
            return Err(ResetError::NoMethod {
                device: device.to_string(),
                reasons: vec![format!("{method}: not among this device's methods now")],
            });
        }
        let id = DeviceIdentity::of(&plan.facts);
        let start = Instant::now();
        let on_blocked = |step: BlockedStep| {
            tracing::warn!(
                "`{}` is blocked in the kernel ({}); waiting for it",
                step.step,
                step.task
            );
        };
        match self.run_method(method, &id, &on_blocked, steps) {
            Ok(new_name) => Ok(Recreated {
                method: method.clone(),
                old_name: device.to_string(),
                new_name,
                took_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
                failed_before: Vec::new(),
                brought_back: false,
                mode_restored: None,
            }),
            Err(MethodError::Skip(e)) => Err(ResetError::AllMethodsFailed {
                device: device.to_string(),
                failures: vec![ResetMethodFailure {
                    method: method.clone(),
                    error: e.to_string(),
                }],
            }),
            Err(MethodError::Fatal(e)) => Err(e),
        }
    }
}

/// A scripted [`DeviceResetter`] for the daemon's tests and the simulator: records every
/// call and answers from a queue (or "recreated by aux-rebind in 0 ms" when the queue is empty).
#[derive(Debug, Default)]
pub struct ScriptedResetter {
    calls: Mutex<Vec<(String, bool)>>,
    answers: Mutex<std::collections::VecDeque<Result<ResetOutcome, String>>>,
    blocks: Mutex<std::collections::VecDeque<(BlockedStep, std::sync::mpsc::Receiver<()>)>>,
}

impl ScriptedResetter {
    /// Queues the next answer; `Err(text)` becomes [`ResetError::NoMethod`] with that reason.
    pub fn push(&self, answer: Result<ResetOutcome, String>) {
        self.answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back(answer);
    }

    /// The next watched re-creation reports `step` blocked, then waits until the returned
    /// sender sends (or is dropped) before it answers: a step the kernel holds.
    pub fn block_next(&self, step: BlockedStep) -> std::sync::mpsc::Sender<()> {
        let (release, wait) = std::sync::mpsc::channel();
        self.blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push_back((step, wait));
        release
    }

    /// Every `(device, dry_run)` passed to `recreate`, in order.
    pub fn calls(&self) -> Vec<(String, bool)> {
        self.calls.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

impl DeviceResetter for ScriptedResetter {
    fn recreate_watched(
        &self,
        device: &str,
        remembered: Option<&RecreateFrom>,
        on_blocked: OnBlocked<'_>,
    ) -> Result<ResetOutcome, ResetError> {
        let block = self
            .blocks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        if let Some((step, wait)) = block {
            on_blocked(step);
            let _ = wait.recv();
        }
        self.recreate_from(device, remembered, false)
    }

    fn plan_from(&self, device: &str, _: Option<&RecreateFrom>) -> Result<ResetPlan, ResetError> {
        Err(ResetError::NoMethod {
            device: device.to_string(),
            reasons: vec!["scripted resetter has no plans".into()],
        })
    }

    fn recreate_from(
        &self,
        device: &str,
        _: Option<&RecreateFrom>,
        dry_run: bool,
    ) -> Result<ResetOutcome, ResetError> {
        self.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((device.to_string(), dry_run));
        let next = self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front();
        match next {
            Some(Ok(o)) => Ok(o),
            Some(Err(reason)) => Err(ResetError::NoMethod {
                device: device.to_string(),
                reasons: vec![reason],
            }),
            None => Ok(ResetOutcome::Recreated(Recreated {
                method: ResetMethod::AuxRebind {
                    device: format!("{device}.aux"),
                    driver: "scripted".into(),
                },
                old_name: device.to_string(),
                new_name: device.to_string(),
                took_ms: 0,
                failed_before: Vec::new(),
                brought_back: false,
                mode_restored: None,
            })),
        }
    }

    /// Answers from the same queue as `recreate` (a dry-run answer counts as refused); with
    /// the queue empty, `method` worked in 0 ms. Each call is recorded as `(device, false)`
    /// and gets one step named after the method.
    fn recreate_by(
        &self,
        device: &str,
        method: &ResetMethod,
        steps: &mut Vec<StepTiming>,
    ) -> Result<Recreated, ResetError> {
        let queued = !self
            .answers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_empty();
        let r = match self.recreate_from(device, None, false)? {
            ResetOutcome::Recreated(r) if queued => r,
            ResetOutcome::Recreated(r) => Recreated {
                method: method.clone(),
                ..r
            },
            ResetOutcome::DryRun(_) => {
                return Err(ResetError::NoMethod {
                    device: device.to_string(),
                    reasons: vec!["scripted: dry run".into()],
                })
            }
        };
        steps.push(StepTiming {
            step: format!("scripted {}", method.kind()),
            took_ms: r.took_ms,
            ok: true,
        });
        Ok(r)
    }
}
