//! Can this process open the verbs devices (`/dev/infiniband/uverbs*`, `rdma_cm`)? When it
//! cannot (EPERM, EACCES) the port self-test and the asynchronous event listeners fail for a
//! reason that has nothing to do with the port: under the packaged unit, systemd resolved
//! `DeviceAllow=char-infiniband_verbs` and `/dev/infiniband/rdma_cm` when the service
//! started, and a verbs or rdma_cm device whose module (ib_uverbs, rdma_ucm) loaded later is
//! denied by the device cgroup until the service restarts.
//!
//! [`check`] opens each device read-write and closes it at once (an open with no verbs
//! context holds nothing: no ucontext is allocated before the first command). [`Lockout`]
//! says what it is and what to do, in status, in one alert and in the self-test's verdict;
//! [`LockoutWatch`] is what the self-test and the listeners report into and the daemon
//! reads. [`SandboxAware`] makes a self-test that met the lockout "unavailable" (not a
//! verdict on the port) instead of failed, so the engine never reads it as a broken port.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::errno::Errno;
use nix::fcntl::{open, OFlag};
use nix::sys::stat::Mode;

use super::selftest::PortSelfTest;
use crate::core::selftest::SelfTestResult;

/// The verbs devices this process may not open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lockout {
    /// Each denied device and its errno.
    pub denied: Vec<(PathBuf, Errno)>,
}

impl Lockout {
    /// What it is and how to fix it, in operator words.
    pub fn explain(&self) -> String {
        let list: Vec<String> = self
            .denied
            .iter()
            .map(|(p, e)| format!("{} ({})", p.display(), e.desc()))
            .collect();
        format!(
            "the verbs devices cannot be opened: {}. Under the iser-guard service this is its \
             device sandbox: systemd resolved DeviceAllow= (char-infiniband_verbs, \
             /dev/infiniband/rdma_cm) when the service started, before ib_uverbs or rdma_ucm \
             were loaded, and denies devices that appeared later. It is not the port: the \
             self-test and the asynchronous events cannot run until the service restarts. \
             Fix: `systemctl restart iser-guard` now that the modules are loaded; to keep it \
             from happening, have them loaded before the service (rdma-core's \
             rdma-load-modules@rdma.service, which the unit pulls in and starts after, loads \
             what /etc/rdma/modules/*.conf lists: ib_uverbs and rdma_ucm). Outside the \
             service, EACCES means the device files' permissions (run as root)",
            list.join(", ")
        )
    }
}

/// Opens `path` read-write and closes it: what [`check`] does to each device.
pub fn open_close(path: &Path) -> Result<(), Errno> {
    open(
        path,
        OFlag::O_RDWR | OFlag::O_CLOEXEC | OFlag::O_NONBLOCK,
        Mode::empty(),
    )
    .map(drop)
}

/// How a device is opened (the real one is [`open_close`]; tests pass a double).
pub type Opener = Arc<dyn Fn(&Path) -> Result<(), Errno> + Send + Sync>;

/// Opens every verbs device under `dev_root` (`/dev`): `None` when each one that exists can
/// be opened (or none exists: no module, nothing to say here).
pub fn check(dev_root: &Path) -> Option<Lockout> {
    check_with(dev_root, &open_close)
}

/// [`check`] with `opener` opening each device.
pub fn check_with(dev_root: &Path, opener: &dyn Fn(&Path) -> Result<(), Errno>) -> Option<Lockout> {
    let dir = dev_root.join("infiniband");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("uverbs") || n == "rdma_cm")
                })
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    let denied: Vec<(PathBuf, Errno)> = paths
        .into_iter()
        .filter_map(|p| match opener(&p) {
            Err(e @ (Errno::EPERM | Errno::EACCES)) => Some((p, e)),
            _ => None,
        })
        .collect();
    (!denied.is_empty()).then_some(Lockout { denied })
}

/// Where the self-test and the listeners report a lockout and the daemon reads it.
#[derive(Clone)]
pub struct LockoutWatch {
    dev_root: PathBuf,
    opener: Opener,
    found: Arc<Mutex<Option<Lockout>>>,
}

impl std::fmt::Debug for LockoutWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockoutWatch")
            .field("dev_root", &self.dev_root)
            .finish_non_exhaustive()
    }
}

impl LockoutWatch {
    /// Watches the verbs devices under `dev_root` (`paths.dev-root`).
    pub fn new(dev_root: PathBuf) -> Self {
        LockoutWatch::with_opener(dev_root, Arc::new(open_close))
    }

    /// The same, opening devices with `opener`.
    pub fn with_opener(dev_root: PathBuf, opener: Opener) -> Self {
        LockoutWatch {
            dev_root,
            opener,
            found: Arc::new(Mutex::new(None)),
        }
    }

    /// Checks now (something met an error opening a device, or the daemon starts): the
    /// lockout, if there is one, is also kept for [`LockoutWatch::current`].
    pub fn check(&self) -> Option<Lockout> {
        let l = check_with(&self.dev_root, &*self.opener);
        *self.found.lock().unwrap_or_else(|p| p.into_inner()) = l.clone();
        l
    }

    /// The names in `/dev/infiniband` now (empty when it does not exist): a change means a
    /// device or module came or went.
    pub fn listing(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.dev_root.join("infiniband"))
            .map(|rd| {
                rd.filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }

    /// The lockout last found, if the last check found one.
    pub fn current(&self) -> Option<Lockout> {
        self.found.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// A self-test that, when it does not pass, checks whether the verbs devices are locked out
/// and says so as "unavailable" (with what it is and what to do) instead of failing the port.
pub struct SandboxAware<T> {
    /// The self-test.
    pub inner: T,
    /// Where a lockout is reported.
    pub watch: LockoutWatch,
}

impl<T: PortSelfTest> PortSelfTest for SandboxAware<T> {
    fn run(&self, device: &str, port: u32, timeout: Duration) -> SelfTestResult {
        let r = self.inner.run(device, port, timeout);
        let passed = matches!(&r, SelfTestResult::Ran(rep) if rep.passed());
        if passed {
            return r;
        }
        match self.watch.check() {
            Some(l) => SelfTestResult::Unavailable {
                reason: format!("not a verdict on {device}/{port}: {}", l.explain()),
            },
            None => r,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::selftest::{SelfTestReport, SelfTestStep};

    struct Failing;
    impl PortSelfTest for Failing {
        fn run(&self, device: &str, port: u32, _t: Duration) -> SelfTestResult {
            SelfTestResult::Ran(SelfTestReport {
                device: device.into(),
                port,
                steps: vec![SelfTestStep {
                    name: "cm-id".into(),
                    took: Duration::ZERO,
                    ok: false,
                    detail: "rdma_create_event_channel failed: Operation not permitted".into(),
                }],
            })
        }
    }

    /// A /dev with `infiniband/uverbs0`, `rdma_cm` and `issm0` as plain files.
    fn dev() -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let ib = d.path().join("infiniband");
        std::fs::create_dir(&ib).unwrap();
        for n in ["uverbs0", "rdma_cm", "issm0"] {
            std::fs::write(ib.join(n), "").unwrap();
        }
        d
    }

    /// The device cgroup's answer to a device it does not allow (the files themselves open).
    fn cgroup_denies(p: &Path) -> Result<(), Errno> {
        open_close(p)?;
        Err(Errno::EPERM)
    }

    #[test]
    fn openable_devices_are_no_lockout() {
        let d = dev();
        assert_eq!(check(d.path()), None);
        assert_eq!(check(&d.path().join("nowhere")), None);
    }

    #[test]
    fn denied_devices_are_named_with_the_fix() {
        let d = dev();
        let l = check_with(d.path(), &cgroup_denies).expect("a lockout");
        let names: Vec<String> = l
            .denied
            .iter()
            .map(|(p, _)| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["rdma_cm", "uverbs0"]); // issm0 is not a verbs device
        assert!(l.denied.iter().all(|(_, e)| *e == Errno::EPERM));
        let words = l.explain();
        for needle in [
            "DeviceAllow=",
            "systemctl restart iser-guard",
            "rdma-load-modules@rdma.service",
            "not the port",
        ] {
            assert!(words.contains(needle), "{needle}: {words}");
        }
        // Another error (the device vanished) is not a lockout.
        assert_eq!(check_with(d.path(), &|_| Err(Errno::ENXIO)), None);
    }

    #[test]
    fn a_selftest_that_met_the_lockout_is_unavailable_not_failed() {
        let d = dev();
        let watch = LockoutWatch::with_opener(d.path().to_path_buf(), Arc::new(cgroup_denies));
        let t = SandboxAware {
            inner: Failing,
            watch: watch.clone(),
        };
        match t.run("rxe_ini", 1, Duration::from_secs(1)) {
            SelfTestResult::Unavailable { reason } => {
                assert!(reason.contains("not a verdict on rxe_ini/1"), "{reason}");
                assert!(reason.contains("systemctl restart iser-guard"), "{reason}");
            }
            other => panic!("{other:?}"),
        }
        assert!(watch.current().is_some());
        // Devices that open: the failure stands (it is the port's).
        let t = SandboxAware {
            inner: Failing,
            watch: LockoutWatch::new(d.path().to_path_buf()),
        };
        assert!(matches!(
            t.run("rxe_ini", 1, Duration::from_secs(1)),
            SelfTestResult::Ran(_)
        ));
    }
}
