//! Device re-creation against a fake sysfs tree in a temporary directory.
//!
//! The tree mirrors the real layout (kernel-facts §2): PCI functions under `devices/`, their
//! RDMA auxiliary devices (`ice.roce.0`, `mlx5_core.rdma.0`) with `subsystem`/`driver` links,
//! `bus/auxiliary/{devices,drivers}`, ib_devices under `<parent>/infiniband/<name>` with a
//! `device` link, and `class/infiniband/<name>` links. A watcher thread plays the kernel for
//! writes to `unbind`/`bind` (and udev's rename); stub `devlink`/`rdma`/`modprobe` scripts
//! (tests/fixtures/stubs) log their argv and move devices in and out of the tree.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use iser_guard::core::recovery::BlockedStep;
use iser_guard::core::reset_plan::{
    DevlinkParam, ParentFacts, RecreateFrom, ResetMethod, SoftType,
};
use iser_guard::io::process::{Invocation, Output, RunError, Runner, StuckChild, SystemRunner};
use iser_guard::io::reset::{
    DeviceResetter, ResetConfig, ResetError, ResetOutcome, Sysfs, SysfsResetter, VerifyPolicy,
};

fn stubs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stubs")
}

struct Fake {
    t: tempfile::TempDir,
}

impl Fake {
    fn new() -> Fake {
        let t = tempfile::tempdir().unwrap();
        let f = Fake { t };
        for d in [
            "sys/class/infiniband",
            "sys/bus/pci/drivers",
            "sys/bus/auxiliary/devices",
            "sys/bus/auxiliary/drivers",
            "sys/devices/pci0000:00",
            "sys/devices/virtual/infiniband",
            "sys/module",
            "bin",
        ] {
            fs::create_dir_all(f.t.path().join(d)).unwrap();
        }
        for tool in ["devlink", "rdma", "modprobe"] {
            fs::copy(stubs().join(tool), f.bin().join(tool)).unwrap();
        }
        f
    }
    fn sys(&self) -> PathBuf {
        self.t.path().join("sys")
    }
    fn bin(&self) -> PathBuf {
        self.t.path().join("bin")
    }
    fn scenario(&self, s: &str) {
        fs::write(self.bin().join("scenario"), s).unwrap();
    }
    fn argv(&self) -> Vec<String> {
        fs::read_to_string(self.bin().join("argv.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }

    /// A PCI function bound to `driver`.
    fn pci(&self, bdf: &str, driver: &str) -> PathBuf {
        let dir = self.sys().join("devices/pci0000:00").join(bdf);
        fs::create_dir_all(&dir).unwrap();
        fs::create_dir_all(self.sys().join("bus/pci/drivers").join(driver)).unwrap();
        symlink(self.sys().join("bus/pci"), dir.join("subsystem")).unwrap();
        // As real sysfs: every function is listed under bus/pci/devices.
        fs::create_dir_all(self.sys().join("bus/pci/devices")).unwrap();
        symlink(&dir, self.sys().join("bus/pci/devices").join(bdf)).unwrap();
        symlink(
            self.sys().join("bus/pci/drivers").join(driver),
            dir.join("driver"),
        )
        .unwrap();
        dir
    }

    /// An auxiliary device under `pci`, bound to driver folder `driver_dir` of `module`.
    /// `driver_link` false leaves out the device's own `driver` link (detection must then
    /// list the driver folders). `bind_files` false leaves out unbind/bind.
    fn aux(
        &self,
        pci: &Path,
        name: &str,
        driver_dir: &str,
        module: &str,
        driver_link: bool,
        bind_files: bool,
    ) -> PathBuf {
        let dir = pci.join(name);
        fs::create_dir_all(&dir).unwrap();
        symlink(self.sys().join("bus/auxiliary"), dir.join("subsystem")).unwrap();
        symlink(&dir, self.sys().join("bus/auxiliary/devices").join(name)).unwrap();
        let drv = self.sys().join("bus/auxiliary/drivers").join(driver_dir);
        if !drv.exists() {
            fs::create_dir_all(&drv).unwrap();
            fs::create_dir_all(self.sys().join("module").join(module)).unwrap();
            symlink(self.sys().join("module").join(module), drv.join("module")).unwrap();
            if bind_files {
                fs::write(drv.join("bind"), "").unwrap();
                fs::write(drv.join("unbind"), "").unwrap();
            }
        }
        symlink(&dir, drv.join(name)).unwrap();
        if driver_link {
            symlink(&drv, dir.join("driver")).unwrap();
        }
        dir
    }

    /// An ib_device under `parent` (or virtual), with port 1 on `netdev`.
    fn ib(&self, parent: Option<&Path>, name: &str, netdev: &str, node_type: &str, desc: &str) {
        let dir = match parent {
            Some(p) => p.join("infiniband").join(name),
            None => self.sys().join("devices/virtual/infiniband").join(name),
        };
        fs::create_dir_all(dir.join("ports/1/gid_attrs/ndevs")).unwrap();
        fs::write(dir.join("ports/1/gid_attrs/ndevs/0"), format!("{netdev}\n")).unwrap();
        fs::write(dir.join("node_type"), format!("{node_type}\n")).unwrap();
        fs::write(dir.join("node_desc"), format!("{desc}\n")).unwrap();
        match parent {
            Some(p) => symlink(p, dir.join("device")).unwrap(),
            // rxe's own attribute naming its netdev.
            None if desc == "rxe" => fs::write(dir.join("parent"), format!("{netdev}\n")).unwrap(),
            None => {}
        }
        symlink(&dir, self.sys().join("class/infiniband").join(name)).unwrap();
    }

    /// `_allowed`: the devices the test's driver would authorise. The resetter itself no
    /// longer reads an allow-list (the core's driver decides before calling it); the
    /// argument stays so each test still says which device it means to touch.
    fn config(&self, _allowed: &[&str]) -> ResetConfig {
        ResetConfig {
            sysfs_root: self.sys(),
            devlink: self.bin().join("devlink"),
            rdma: self.bin().join("rdma"),
            modprobe: self.bin().join("modprobe"),
            allow_module_reload: false,
            command_timeout: Duration::from_secs(20),
            verify: VerifyPolicy {
                gone_timeout: Duration::from_secs(5),
                back_timeout: Duration::from_secs(5),
                rename_grace: Duration::from_secs(5),
                poll_interval: Duration::from_millis(5),
            },
            proc_root: PathBuf::from("/proc"),
        }
    }

    /// Every path in the tree with its content or link target: to prove nothing changed.
    fn snapshot(&self) -> BTreeMap<PathBuf, String> {
        fn walk(dir: &Path, out: &mut BTreeMap<PathBuf, String>) {
            for e in fs::read_dir(dir).unwrap().flatten() {
                let p = e.path();
                let ft = e.file_type().unwrap();
                if ft.is_symlink() {
                    out.insert(
                        p.clone(),
                        format!("-> {}", fs::read_link(&p).unwrap().display()),
                    );
                } else if ft.is_dir() {
                    out.insert(p.clone(), "dir".into());
                    walk(&p, out);
                } else {
                    out.insert(p.clone(), fs::read_to_string(&p).unwrap());
                }
            }
        }
        let mut m = BTreeMap::new();
        walk(self.t.path(), &mut m);
        m
    }
}

/// Plays the kernel for one aux device: a write of its name to the driver folder's `unbind`
/// removes the ib_devices under its PCI function; a write to `bind` re-creates them, first
/// under `temp_name` (a new ib index), then renamed back after a moment (udev's rdma_rename).
struct Watcher {
    stop: Arc<AtomicBool>,
    handle: Option<thread::JoinHandle<()>>,
}

impl Watcher {
    fn start(
        sys: PathBuf,
        aux: &str,
        driver_dir: &str,
        pci: PathBuf,
        temp_name: Option<&str>,
        never_back: bool,
    ) -> Watcher {
        Self::start_with_rename_delay(sys, aux, driver_dir, pci, temp_name, never_back, 20)
    }

    /// As `start`; udev renames after `rename_ticks` polls of 5 ms (`u32::MAX`: never).
    fn start_with_rename_delay(
        sys: PathBuf,
        aux: &str,
        driver_dir: &str,
        pci: PathBuf,
        temp_name: Option<&str>,
        never_back: bool,
        rename_ticks: u32,
    ) -> Watcher {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let aux = aux.to_string();
        let drv = sys.join("bus/auxiliary/drivers").join(driver_dir);
        let temp = temp_name.map(str::to_owned);
        let stash = sys.parent().unwrap().join("watcher-stash");
        fs::create_dir_all(&stash).unwrap();
        let handle = thread::spawn(move || {
            let class = sys.join("class/infiniband");
            let mut pending_rename: Option<(String, String, u32)> = None;
            while !s.load(Ordering::SeqCst) {
                if fs::read_to_string(drv.join("unbind"))
                    .unwrap_or_default()
                    .trim()
                    == aux
                {
                    fs::write(drv.join("unbind"), "").unwrap();
                    for e in fs::read_dir(pci.join("infiniband")).unwrap().flatten() {
                        let name = e.file_name().to_string_lossy().into_owned();
                        fs::rename(e.path(), stash.join(&name)).unwrap();
                        fs::remove_file(class.join(&name)).unwrap();
                    }
                    let _ = fs::remove_file(pci.join(&aux).join("driver"));
                    let _ = fs::remove_file(drv.join(&aux));
                }
                if fs::read_to_string(drv.join("bind"))
                    .unwrap_or_default()
                    .trim()
                    == aux
                {
                    fs::write(drv.join("bind"), "").unwrap();
                    symlink(&drv, pci.join(&aux).join("driver")).unwrap();
                    symlink(pci.join(&aux), drv.join(&aux)).unwrap();
                    if !never_back {
                        for e in fs::read_dir(&stash).unwrap().flatten() {
                            let name = e.file_name().to_string_lossy().into_owned();
                            let now = temp.clone().unwrap_or_else(|| name.clone());
                            let dir = pci.join("infiniband").join(&now);
                            fs::rename(e.path(), &dir).unwrap();
                            symlink(&dir, class.join(&now)).unwrap();
                            if now != name {
                                pending_rename = Some((now, name, rename_ticks));
                            }
                        }
                    }
                }
                if let Some((from, to, ticks)) = pending_rename.take() {
                    if ticks == u32::MAX {
                        // udev never renames it.
                    } else if ticks == 0 {
                        let old = pci.join("infiniband").join(&from);
                        let new = pci.join("infiniband").join(&to);
                        fs::rename(&old, &new).unwrap();
                        fs::remove_file(class.join(&from)).unwrap();
                        symlink(&new, class.join(&to)).unwrap();
                    } else {
                        pending_rename = Some((from, to, ticks - 1));
                    }
                }
                thread::sleep(Duration::from_millis(5));
            }
        });
        Watcher {
            stop,
            handle: Some(handle),
        }
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Two E810 ports: rocep2s0f0 (the one to reset) and rocep2s0f1 (must stay untouched).
fn e810(f: &Fake, driver_dir: &str) -> (PathBuf, PathBuf) {
    let pf0 = f.pci("0000:02:00.0", "ice");
    f.aux(&pf0, "ice.roce.0", driver_dir, "irdma", true, true);
    f.ib(Some(&pf0), "rocep2s0f0", "ens1f0", "1: CA", "");
    let pf1 = f.pci("0000:02:00.1", "ice");
    f.aux(&pf1, "ice.roce.1", driver_dir, "irdma", true, true);
    f.ib(Some(&pf1), "rocep2s0f1", "ens1f1", "1: CA", "");
    (pf0, pf1)
}

fn recreated(o: ResetOutcome) -> iser_guard::io::reset::Recreated {
    match o {
        ResetOutcome::Recreated(r) => r,
        other => panic!("expected Recreated, got {other:?}"),
    }
}

#[test]
fn ice_uses_devlink_enable_roce_and_touches_only_that_pf() {
    let f = Fake::new();
    let (_, pf1) = e810(&f, "irdma");
    let other_before = fs::read_link(f.sys().join("class/infiniband/rocep2s0f1")).unwrap();
    let r = SysfsResetter::new(f.config(&["rocep2s0f0"]));
    let out = recreated(r.recreate("rocep2s0f0", false).unwrap());
    assert_eq!(
        out.method,
        ResetMethod::DevlinkToggle {
            handle: "pci/0000:02:00.0".into(),
            param: DevlinkParam::EnableRoce
        }
    );
    assert_eq!(
        (out.old_name.as_str(), out.new_name.as_str()),
        ("rocep2s0f0", "rocep2s0f0")
    );
    assert!(out.failed_before.is_empty());
    assert_eq!(
        f.argv(),
        [
            "devlink dev param show pci/0000:02:00.0 name enable_roce -j",
            "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime",
            "devlink dev param set pci/0000:02:00.0 name enable_roce value true cmode runtime",
            // The mode check after the toggle (enable_roce on, aux named roce).
            "devlink dev param show pci/0000:02:00.0 name enable_roce -j",
        ]
    );
    assert!(f
        .sys()
        .join("class/infiniband/rocep2s0f0/node_type")
        .exists());
    assert_eq!(
        fs::read_link(f.sys().join("class/infiniband/rocep2s0f1")).unwrap(),
        other_before
    );
    assert!(pf1.join("infiniband/rocep2s0f1").exists());
}

#[test]
fn ice_with_roce_param_off_falls_back_to_aux_rebind_in_irdma_gen_2() {
    let f = Fake::new();
    let (pf0, _) = e810(&f, "irdma.gen_2");
    fs::write(f.bin().join("devlink.enable_roce"), "false").unwrap();
    let _w = Watcher::start(f.sys(), "ice.roce.0", "irdma.gen_2", pf0, None, false);
    let r = SysfsResetter::new(f.config(&["rocep2s0f0"]));
    let out = recreated(r.recreate("rocep2s0f0", false).unwrap());
    assert_eq!(
        out.method,
        ResetMethod::AuxRebind {
            device: "ice.roce.0".into(),
            driver: "irdma.gen_2".into()
        }
    );
    assert_eq!(out.failed_before.len(), 1);
    assert!(
        out.failed_before[0].error.contains("enable_roce"),
        "{:?}",
        out.failed_before
    );
    // Only the read: nothing was set.
    assert_eq!(
        f.argv(),
        ["devlink dev param show pci/0000:02:00.0 name enable_roce -j"]
    );
}

#[test]
fn irdma_without_devlink_uses_aux_rebind_found_by_listing_driver_folders() {
    // X722: i40e PF, aux i40e.iwarp.0 bound to irdma.gen_1, and no `driver` link on the aux
    // device, so the folder must be found by listing bus/auxiliary/drivers.
    let f = Fake::new();
    let pf = f.pci("0000:3d:00.0", "i40e");
    f.aux(&pf, "i40e.iwarp.0", "irdma.gen_1", "irdma", false, true);
    f.ib(Some(&pf), "iwp61s0f0", "eno1", "4: RNIC", "");
    let _w = Watcher::start(f.sys(), "i40e.iwarp.0", "irdma.gen_1", pf, None, false);
    let mut cfg = f.config(&["iwp61s0f0"]);
    cfg.devlink = f.bin().join("no-devlink-here");
    let out = recreated(
        SysfsResetter::new(cfg)
            .recreate("iwp61s0f0", false)
            .unwrap(),
    );
    assert_eq!(
        out.method,
        ResetMethod::AuxRebind {
            device: "i40e.iwarp.0".into(),
            driver: "irdma.gen_1".into()
        }
    );
    assert!(f.argv().is_empty());
}

#[test]
fn mlx5_rebind_follows_the_renamed_device_back_to_its_name() {
    let f = Fake::new();
    let pf = f.pci("0000:08:00.0", "mlx5_core");
    // The Ethernet aux device of the same function must be ignored.
    f.aux(
        &pf,
        "mlx5_core.eth.0",
        "mlx5_core.eth",
        "mlx5_core",
        true,
        true,
    );
    f.aux(
        &pf,
        "mlx5_core.rdma.0",
        "mlx5_ib.rdma",
        "mlx5_ib",
        true,
        true,
    );
    f.ib(Some(&pf), "mlx5_0", "enp8s0f0np0", "1: CA", "");
    // The device comes back as mlx5_1 (new index) and is renamed to mlx5_0 a moment later.
    let _w = Watcher::start(
        f.sys(),
        "mlx5_core.rdma.0",
        "mlx5_ib.rdma",
        pf,
        Some("mlx5_1"),
        false,
    );
    let out = recreated(
        SysfsResetter::new(f.config(&["mlx5_0"]))
            .recreate("mlx5_0", false)
            .unwrap(),
    );
    assert_eq!(
        out.method,
        ResetMethod::AuxRebind {
            device: "mlx5_core.rdma.0".into(),
            driver: "mlx5_ib.rdma".into()
        }
    );
    assert_eq!(out.new_name, "mlx5_0");
}

#[test]
fn renamed_device_that_udev_never_renames_is_reported_under_its_new_name() {
    let f = Fake::new();
    let pf = f.pci("0000:08:00.0", "mlx5_core");
    f.aux(
        &pf,
        "mlx5_core.rdma.0",
        "mlx5_ib.rdma",
        "mlx5_ib",
        true,
        true,
    );
    f.ib(Some(&pf), "mlx5_0", "enp8s0f0np0", "1: CA", "");
    let _w = Watcher::start_with_rename_delay(
        f.sys(),
        "mlx5_core.rdma.0",
        "mlx5_ib.rdma",
        pf,
        Some("mlx5_7"),
        false,
        u32::MAX,
    );
    let mut cfg = f.config(&["mlx5_0"]);
    cfg.verify.rename_grace = Duration::from_millis(100);
    let out = recreated(SysfsResetter::new(cfg).recreate("mlx5_0", false).unwrap());
    assert_eq!(out.new_name, "mlx5_7");
}

#[test]
fn rxe_deletes_and_readds_the_link_on_the_same_netdev() {
    let f = Fake::new();
    f.ib(None, "rxe_ini", "ini0", "1: CA", "rxe");
    f.ib(None, "rxe_tgt", "tgt0", "1: CA", "rxe");
    let out = recreated(
        SysfsResetter::new(f.config(&["rxe_ini"]))
            .recreate("rxe_ini", false)
            .unwrap(),
    );
    assert_eq!(
        out.method,
        ResetMethod::RdmaLinkReadd {
            name: "rxe_ini".into(),
            kind: SoftType::Rxe,
            netdev: "ini0".into()
        }
    );
    assert_eq!(
        f.argv(),
        [
            "rdma link delete rxe_ini",
            "rdma link add rxe_ini type rxe netdev ini0"
        ]
    );
    assert!(f.sys().join("class/infiniband/rxe_tgt").exists());
}

#[test]
fn dry_run_returns_the_plan_and_writes_nothing() {
    let f = Fake::new();
    let (pf0, _) = e810(&f, "irdma.gen_2");
    // A watcher is running: if anything were written to unbind/bind, the tree would change.
    let _w = Watcher::start(f.sys(), "ice.roce.0", "irdma.gen_2", pf0, None, false);
    let before = f.snapshot();
    let mut cfg = f.config(&["rocep2s0f0"]);
    cfg.allow_module_reload = true;
    let r = SysfsResetter::new(cfg.clone());
    let plan = match r.recreate("rocep2s0f0", true).unwrap() {
        ResetOutcome::DryRun(p) => p,
        other => panic!("{other:?}"),
    };
    let kinds: Vec<_> = plan.methods.iter().map(|m| m.method.kind()).collect();
    assert_eq!(kinds, ["devlink-toggle", "aux-rebind", "module-reload"]);
    assert_eq!(
        plan.methods[1].steps[0],
        format!(
            "echo ice.roce.0 > {}",
            f.sys()
                .join("bus/auxiliary/drivers/irdma.gen_2/unbind")
                .display()
        )
    );
    match &plan.methods[2].method {
        ResetMethod::ModuleReload {
            module,
            also_affects,
        } => {
            assert_eq!(module, "irdma");
            assert_eq!(also_affects, &["rocep2s0f1".to_string()]);
        }
        other => panic!("{other:?}"),
    }
    // `plan` is the same, read-only.
    assert_eq!(r.plan("rocep2s0f0").unwrap(), plan);
    assert!(f.argv().is_empty(), "dry-run ran {:?}", f.argv());
    assert_eq!(before, f.snapshot());
}

#[test]
fn device_that_never_comes_back_is_a_verification_timeout() {
    let f = Fake::new();
    let pf = f.pci("0000:08:00.0", "mlx5_core");
    f.aux(
        &pf,
        "mlx5_core.rdma.0",
        "mlx5_ib.rdma",
        "mlx5_ib",
        true,
        true,
    );
    f.ib(Some(&pf), "mlx5_0", "enp8s0f0np0", "1: CA", "");
    let _w = Watcher::start(f.sys(), "mlx5_core.rdma.0", "mlx5_ib.rdma", pf, None, true);
    let mut cfg = f.config(&["mlx5_0"]);
    cfg.verify.back_timeout = Duration::from_millis(200);
    let err = SysfsResetter::new(cfg)
        .recreate("mlx5_0", false)
        .unwrap_err();
    assert!(matches!(err, ResetError::DidNotReturn { .. }), "{err:?}");
    assert!(err.device_may_be_gone());
}

#[test]
fn devlink_that_changes_nothing_is_did_not_disappear_and_the_param_is_restored() {
    let f = Fake::new();
    e810(&f, "irdma");
    f.scenario("noop");
    let mut cfg = f.config(&["rocep2s0f0"]);
    cfg.verify.gone_timeout = Duration::from_millis(200);
    let err = SysfsResetter::new(cfg)
        .recreate("rocep2s0f0", false)
        .unwrap_err();
    assert!(matches!(err, ResetError::DidNotDisappear { .. }), "{err:?}");
    assert!(!err.device_may_be_gone());
    assert_eq!(
        f.argv().last().map(String::as_str),
        Some("devlink dev param set pci/0000:02:00.0 name enable_roce value true cmode runtime")
    );
}

#[test]
fn refused_devlink_falls_through_then_module_reload_when_allowed() {
    // devlink refuses, the aux driver folder has no unbind/bind files (write fails, device
    // stays), so the last resort, module reload, runs — only because it is allowed.
    let f = Fake::new();
    let pf0 = f.pci("0000:02:00.0", "ice");
    f.aux(&pf0, "ice.roce.0", "irdma", "irdma", true, false);
    f.ib(Some(&pf0), "rocep2s0f0", "ens1f0", "1: CA", "");
    f.scenario("refuse");
    fs::write(
        f.bin().join("modprobe.devices"),
        format!("{}\n", pf0.join("infiniband/rocep2s0f0").display()),
    )
    .unwrap();

    let err = SysfsResetter::new(f.config(&["rocep2s0f0"]))
        .recreate("rocep2s0f0", false)
        .unwrap_err();
    match &err {
        ResetError::AllMethodsFailed { failures, .. } => {
            assert_eq!(failures.len(), 2);
            assert!(
                failures[0].error.contains("Operation not supported"),
                "{failures:?}"
            );
            assert!(failures[1].error.contains("unbind"), "{failures:?}");
        }
        other => panic!("{other:?}"),
    }

    let mut cfg = f.config(&["rocep2s0f0"]);
    cfg.allow_module_reload = true;
    let out = recreated(
        SysfsResetter::new(cfg)
            .recreate("rocep2s0f0", false)
            .unwrap(),
    );
    assert_eq!(
        out.method,
        ResetMethod::ModuleReload {
            module: "irdma".into(),
            also_affects: vec![]
        }
    );
    assert_eq!(out.failed_before.len(), 2);
    let argv = f.argv();
    assert_eq!(
        argv[argv.len() - 2..],
        ["modprobe -r irdma", "modprobe irdma"]
    );
}

#[test]
fn failing_up_step_after_removal_reports_the_device_gone() {
    let f = Fake::new();
    f.ib(None, "rxe_ini", "ini0", "1: CA", "rxe");
    f.scenario("add-fails");
    let err = SysfsResetter::new(f.config(&["rxe_ini"]))
        .recreate("rxe_ini", false)
        .unwrap_err();
    assert!(matches!(err, ResetError::UpStepFailed { .. }), "{err:?}");
    assert!(err.device_may_be_gone());
    assert!(err.to_string().contains("No such device"), "{err}");
}

#[test]
fn unknown_device_and_unknown_driver_are_typed() {
    let f = Fake::new();
    let err = SysfsResetter::new(f.config(&["nope0"]))
        .recreate("nope0", false)
        .unwrap_err();
    assert!(matches!(err, ResetError::NoSuchDevice { .. }), "{err:?}");

    // A PCI-bound device with no auxiliary device: no method (the PCI driver is never
    // reloaded, it is the network driver).
    let pf = f.pci("0000:05:00.0", "qede");
    f.ib(Some(&pf), "qedr0", "ens5", "1: CA", "");
    let mut cfg = f.config(&["qedr0"]);
    cfg.allow_module_reload = true;
    let err = SysfsResetter::new(cfg)
        .recreate("qedr0", false)
        .unwrap_err();
    match err {
        ResetError::NoMethod { reasons, .. } => {
            assert!(
                reasons
                    .iter()
                    .any(|r| r.contains("no RDMA auxiliary device")),
                "{reasons:?}"
            )
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn ib_device_parented_by_its_aux_device_with_relative_links_is_understood() {
    // Some drivers parent the ib_device on the auxiliary device itself, and real sysfs links
    // are relative (`../../../bus/auxiliary`): the facts must come out the same.
    let f = Fake::new();
    let sys = f.sys();
    let pci = sys.join("devices/pci0000:00/0000:41:00.0");
    let aux = pci.join("bnxt_en.rdma.0");
    let ib = aux.join("infiniband/bnxt_re0");
    let drv = sys.join("bus/auxiliary/drivers/bnxt_re.rdma");
    for d in [
        &ib.join("ports/1/gid_attrs/ndevs"),
        &drv,
        &sys.join("module/bnxt_re"),
    ] {
        fs::create_dir_all(d).unwrap();
    }
    fs::create_dir_all(sys.join("bus/pci/drivers/bnxt_en")).unwrap();
    symlink("../../../bus/pci", pci.join("subsystem")).unwrap();
    symlink("../../../bus/pci/drivers/bnxt_en", pci.join("driver")).unwrap();
    symlink("../../../../bus/auxiliary", aux.join("subsystem")).unwrap();
    symlink(
        "../../../../bus/auxiliary/drivers/bnxt_re.rdma",
        aux.join("driver"),
    )
    .unwrap();
    symlink("../../../module/bnxt_re", drv.join("module")).unwrap();
    symlink(
        "../../../devices/pci0000:00/0000:41:00.0/bnxt_en.rdma.0",
        sys.join("bus/auxiliary/devices/bnxt_en.rdma.0"),
    )
    .unwrap();
    symlink("../../../bnxt_en.rdma.0", ib.join("device")).unwrap();
    fs::write(ib.join("node_type"), "1: CA\n").unwrap();
    fs::write(ib.join("ports/1/gid_attrs/ndevs/0"), "ens41f0np0\n").unwrap();
    symlink(
        "../../devices/pci0000:00/0000:41:00.0/bnxt_en.rdma.0/infiniband/bnxt_re0",
        sys.join("class/infiniband/bnxt_re0"),
    )
    .unwrap();

    let facts = iser_guard::io::reset::Sysfs::new(&sys)
        .facts("bnxt_re0")
        .unwrap()
        .unwrap();
    let parent = facts.parent.as_ref().unwrap();
    assert_eq!(
        (parent.bus.as_str(), parent.name.as_str()),
        ("pci", "0000:41:00.0")
    );
    assert_eq!(parent.driver.as_deref(), Some("bnxt_en"));
    let aux_facts = facts.aux.as_ref().unwrap();
    assert_eq!(aux_facts.name, "bnxt_en.rdma.0");
    assert_eq!(aux_facts.driver_dir.as_deref(), Some("bnxt_re.rdma"));
    assert_eq!(aux_facts.module.as_deref(), Some("bnxt_re"));
    assert_eq!(facts.netdevs, ["ens41f0np0"]);

    let mut cfg = f.config(&["bnxt_re0"]);
    cfg.allow_module_reload = true;
    let plan = SysfsResetter::new(cfg).plan("bnxt_re0").unwrap();
    let methods: Vec<_> = plan.methods.iter().map(|m| m.method.clone()).collect();
    assert_eq!(
        methods,
        [
            ResetMethod::AuxRebind {
                device: "bnxt_en.rdma.0".into(),
                driver: "bnxt_re.rdma".into()
            },
            ResetMethod::ModuleReload {
                module: "bnxt_re".into(),
                also_affects: vec![]
            }
        ]
    );
}

// ---------------------------------------------------------------------------------------------
// A device that is gone (issue 9, lab "dev-left-deleted"): brought back from what was
// remembered while it existed.
// ---------------------------------------------------------------------------------------------

/// What the daemon remembered about `name` while it was there (the same reader).
fn remembered(f: &Fake, name: &str) -> RecreateFrom {
    let facts = Sysfs::new(f.sys()).facts(name).unwrap().expect("present");
    RecreateFrom::of(&facts).expect("enough to re-create it")
}

#[test]
fn a_deleted_rxe_device_is_added_back_on_its_remembered_netdev() {
    let f = Fake::new();
    f.ib(None, "rxe_ini", "ini0", "1: CA", "rxe");
    f.ib(None, "rxe_tgt", "tgt0", "1: CA", "rxe");
    let memory = remembered(&f, "rxe_ini");
    assert_eq!(
        memory,
        RecreateFrom::SoftLink {
            kind: SoftType::Rxe,
            netdev: "ini0".into()
        }
    );
    // `rdma link delete rxe_ini`, and left deleted: gone from sysfs.
    fs::remove_file(f.sys().join("class/infiniband/rxe_ini")).unwrap();
    fs::remove_dir_all(f.sys().join("devices/virtual/infiniband/rxe_ini")).unwrap();
    let r = SysfsResetter::new(f.config(&["rxe_ini"]));

    let plan = r.plan_from("rxe_ini", Some(&memory)).unwrap();
    assert!(plan.absent);
    let steps = &plan.methods[0].steps;
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert!(
        steps[0].ends_with("/rdma link add rxe_ini type rxe netdev ini0"),
        "{steps:?}"
    );
    let out = recreated(r.recreate_from("rxe_ini", Some(&memory), false).unwrap());
    assert_eq!(
        out.method,
        ResetMethod::RdmaLinkReadd {
            name: "rxe_ini".into(),
            kind: SoftType::Rxe,
            netdev: "ini0".into()
        }
    );
    assert_eq!(out.new_name, "rxe_ini");
    // Only the add: there was nothing to delete.
    assert_eq!(f.argv(), ["rdma link add rxe_ini type rxe netdev ini0"]);
    assert!(f.sys().join("class/infiniband/rxe_ini").exists());
    assert!(f.sys().join("class/infiniband/rxe_tgt").exists());
}

#[test]
fn a_gone_device_never_seen_is_refused_with_the_command_to_run() {
    let f = Fake::new();
    f.ib(None, "rxe_tgt", "tgt0", "1: CA", "rxe");
    let before = f.snapshot();
    let err = SysfsResetter::new(f.config(&["rxe_ini"]))
        .recreate_from("rxe_ini", None, false)
        .unwrap_err();
    assert!(matches!(err, ResetError::NoSuchDevice { .. }), "{err:?}");
    assert!(err.is_unsupported());
    let text = err.to_string();
    assert!(
        text.contains("never saw it") && text.contains("rdma link add rxe_ini type rxe netdev"),
        "{text}"
    );
    assert!(f.argv().is_empty());
    assert_eq!(f.snapshot(), before);
}

#[test]
fn an_rxe_add_that_fails_leaves_it_gone_and_says_so() {
    let f = Fake::new();
    f.ib(None, "rxe_ini", "ini0", "1: CA", "rxe");
    let memory = remembered(&f, "rxe_ini");
    fs::remove_file(f.sys().join("class/infiniband/rxe_ini")).unwrap();
    fs::remove_dir_all(f.sys().join("devices/virtual/infiniband/rxe_ini")).unwrap();
    f.scenario("add-fails");
    let err = SysfsResetter::new(f.config(&["rxe_ini"]))
        .recreate_from("rxe_ini", Some(&memory), false)
        .unwrap_err();
    assert!(
        matches!(err, ResetError::AllMethodsFailed { .. }),
        "{err:?}"
    );
    assert!(err.to_string().contains("No such device"), "{err}");
}

#[test]
fn a_gone_irdma_device_is_bound_again_under_its_remembered_function() {
    let f = Fake::new();
    let (pf0, _) = e810(&f, "irdma.gen_2");
    let memory = remembered(&f, "rocep2s0f0");
    assert!(
        matches!(&memory, RecreateFrom::Parent { parent, aux: Some(a), .. }
            if parent.name == "0000:02:00.0" && a.name == "ice.roce.0"
                && a.driver_dir.as_deref() == Some("irdma.gen_2")),
        "{memory:?}"
    );
    let _w = Watcher::start(f.sys(), "ice.roce.0", "irdma.gen_2", pf0, None, false);
    // Someone unbinds irdma from the function's aux device and leaves it so.
    let unbind = f.sys().join("bus/auxiliary/drivers/irdma.gen_2/unbind");
    fs::write(&unbind, "ice.roce.0").unwrap();
    let class = f.sys().join("class/infiniband/rocep2s0f0");
    // The watcher (the kernel's stand-in) has taken the unbind: a liveness bound.
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while (class.exists() || !fs::read_to_string(&unbind).unwrap().is_empty())
        && std::time::Instant::now() < end
    {
        thread::sleep(Duration::from_millis(5));
    }
    assert!(!class.exists());
    let out = recreated(
        SysfsResetter::new(f.config(&["rocep2s0f0"]))
            .recreate_from("rocep2s0f0", Some(&memory), false)
            .unwrap(),
    );
    // The aux device is still there, so enable_roce is on: binding is what brings it back.
    assert_eq!(
        out.method,
        ResetMethod::AuxRebind {
            device: "ice.roce.0".into(),
            driver: "irdma.gen_2".into()
        }
    );
    assert!(f.argv().is_empty(), "{:?}", f.argv());
    assert!(class.exists());
    assert!(f.sys().join("class/infiniband/rocep2s0f1").exists());
}

#[test]
fn a_gone_device_whose_parent_function_is_gone_too_is_a_typed_error() {
    let f = Fake::new();
    let memory = RecreateFrom::Parent {
        parent: ParentFacts {
            bus: "pci".into(),
            name: "0000:09:00.0".into(),
            driver: Some("ice".into()),
        },
        aux: None,
        netdevs: vec!["ens9".into()],
    };
    let err = SysfsResetter::new(f.config(&["rocep9s0f0"]))
        .recreate_from("rocep9s0f0", Some(&memory), false)
        .unwrap_err();
    assert!(matches!(err, ResetError::ParentGone { .. }), "{err:?}");
    assert!(err.to_string().contains("0000:09:00.0"), "{err}");
}

/// A runner whose commands containing `blocks` play a task the kernel holds: the child waits
/// until the test creates `release`, then runs the real stub; the call returns at once with
/// [`RunError::Stuck`], as the real runner does once a killed child has not died.
struct BlockingRunner {
    blocks: &'static str,
    release: PathBuf,
}

impl Runner for BlockingRunner {
    fn run(&self, inv: &Invocation) -> Result<Output, RunError> {
        if !inv.display().contains(self.blocks) {
            return SystemRunner.run(inv);
        }
        let child = std::process::Command::new("sh")
            .arg("-c")
            .arg("while [ ! -e \"$0\" ]; do sleep 0.02; done; shift; exec \"$@\"")
            .arg(&self.release)
            .arg("--")
            .arg(&inv.program)
            .args(&inv.args)
            .spawn()
            .unwrap();
        Err(RunError::Stuck {
            command: inv.display(),
            timeout: inv.timeout,
            stdout: String::new(),
            stderr: String::new(),
            child: StuckChild::adopt(child),
        })
    }
}

/// Runs `recreate_watched` on a thread; returns the first blocked step reported and the
/// thread (still running: the step has not returned).
fn recreate_blocked(
    r: SysfsResetter,
    device: &'static str,
) -> (
    BlockedStep,
    thread::JoinHandle<Result<ResetOutcome, ResetError>>,
) {
    let (tx, rx) = std::sync::mpsc::channel();
    let t = thread::spawn(move || {
        r.recreate_watched(device, None, &|step| {
            let _ = tx.send(step);
        })
    });
    let step = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("no step reported blocked");
    (step, t)
}

#[test]
fn a_devlink_step_blocked_in_the_kernel_is_reported_waited_for_and_never_followed_by_another_method(
) {
    let f = Fake::new();
    let (pf0, _) = e810(&f, "irdma");
    // An aux rebind would be the next method: it must never run.
    let _w = Watcher::start(f.sys(), "ice.roce.0", "irdma", pf0, None, false);
    let release = f.t.path().join("release");
    let runner = Arc::new(BlockingRunner {
        blocks: "enable_roce value false",
        release: release.clone(),
    });
    let r = SysfsResetter::with_runner(f.config(&["rocep2s0f0"]), runner);
    let (step, t) = recreate_blocked(r, "rocep2s0f0");
    assert!(
        step.step.ends_with(
            "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime"
        ),
        "{step:?}"
    );
    // The blocked task as /proc shows it (here a shell waiting; in the field devlink in D).
    assert!(
        step.task.contains(&format!("pid {}", step.id.pid)),
        "{step:?}"
    );
    assert!(step.id.start_time.is_some(), "{step:?}");
    assert!(!step.stack.is_empty());
    assert_eq!(
        step.blocked_ms, 22_000,
        "the deadline (20 s) and the kill grace (2 s)"
    );
    // Still waiting for it: no result, and nothing else started.
    assert!(!t.is_finished());
    assert_eq!(
        f.argv(),
        ["devlink dev param show pci/0000:02:00.0 name enable_roce -j"]
    );
    // The kernel lets go: the step completes, the method is finished, nothing else ran.
    fs::write(&release, "").unwrap();
    let out = recreated(t.join().unwrap().unwrap());
    assert_eq!(
        out.method,
        ResetMethod::DevlinkToggle {
            handle: "pci/0000:02:00.0".into(),
            param: DevlinkParam::EnableRoce
        }
    );
    assert!(out.failed_before.is_empty());
    assert_eq!(
        f.argv(),
        [
            "devlink dev param show pci/0000:02:00.0 name enable_roce -j",
            "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime",
            "devlink dev param set pci/0000:02:00.0 name enable_roce value true cmode runtime",
            // The mode check after the toggle (enable_roce on, aux named roce).
            "devlink dev param show pci/0000:02:00.0 name enable_roce -j",
        ]
    );
    assert_eq!(
        fs::read_to_string(f.sys().join("bus/auxiliary/drivers/irdma/unbind")).unwrap(),
        ""
    );
}

#[test]
fn a_blocked_step_that_changed_nothing_is_reported_not_followed_by_the_next_method() {
    let f = Fake::new();
    let (pf0, _) = e810(&f, "irdma");
    let _w = Watcher::start(f.sys(), "ice.roce.0", "irdma", pf0, None, false);
    // When it returns, the set is refused and the device stayed.
    f.scenario("refuse");
    let release = f.t.path().join("release");
    fs::write(&release, "").unwrap();
    let runner = Arc::new(BlockingRunner {
        blocks: "enable_roce value false",
        release,
    });
    let r = SysfsResetter::with_runner(f.config(&["rocep2s0f0"]), runner);
    let (_, t) = recreate_blocked(r, "rocep2s0f0");
    let err = t.join().unwrap().unwrap_err();
    assert!(matches!(err, ResetError::DidNotDisappear { .. }), "{err:?}");
    // No aux unbind followed: the device was never handed to a second writer.
    assert_eq!(
        fs::read_to_string(f.sys().join("bus/auxiliary/drivers/irdma/unbind")).unwrap(),
        ""
    );
    assert!(f.sys().join("class/infiniband/rocep2s0f0").exists());
}

#[test]
fn a_sysfs_unbind_that_does_not_return_is_reported_by_the_watchdog_then_finished() {
    // X722 (no devlink): aux rebind. Its `unbind` is a FIFO here: the write blocks in the
    // kernel until the test reads it, as a real unbind blocks until the device's removal
    // returns.
    let f = Fake::new();
    let pf = f.pci("0000:3d:00.0", "i40e");
    f.aux(&pf, "i40e.iwarp.0", "irdma.gen_1", "irdma", false, true);
    f.ib(Some(&pf), "iwp61s0f0", "eno1", "4: RNIC", "");
    let drv = f.sys().join("bus/auxiliary/drivers/irdma.gen_1");
    fs::remove_file(drv.join("unbind")).unwrap();
    nix::unistd::mkfifo(
        &drv.join("unbind"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    let mut cfg = f.config(&["iwp61s0f0"]);
    cfg.devlink = f.bin().join("no-devlink-here");
    cfg.command_timeout = Duration::from_millis(200);
    let (step, t) = recreate_blocked(SysfsResetter::new(cfg), "iwp61s0f0");
    assert!(
        step.step.starts_with("echo i40e.iwarp.0 > ") && step.step.ends_with("irdma.gen_1/unbind"),
        "{step:?}"
    );
    // The writer is the resetter's own thread: a thread of this process.
    assert_eq!(step.id.pid, std::process::id() as i32);
    assert!(
        step.id.tid.is_some_and(|tid| tid != step.id.pid),
        "{step:?}"
    );
    assert!(step.task.contains("interruptible sleep"), "{step:?}");
    assert!(step.blocked_ms >= 2_200, "{step:?}");
    assert!(!t.is_finished());
    // The kernel lets go: the write completes, the device goes; then bind brings it back.
    let written = fs::read_to_string(drv.join("unbind")).unwrap();
    assert_eq!(written, "i40e.iwarp.0");
    fs::remove_file(drv.join("unbind")).unwrap();
    fs::write(drv.join("unbind"), "").unwrap();
    let stash = f.t.path().join("watcher-stash");
    fs::create_dir_all(&stash).unwrap();
    fs::rename(pf.join("infiniband/iwp61s0f0"), stash.join("iwp61s0f0")).unwrap();
    fs::remove_file(f.sys().join("class/infiniband/iwp61s0f0")).unwrap();
    let _ = fs::remove_file(drv.join("i40e.iwarp.0"));
    let _w = Watcher::start(f.sys(), "i40e.iwarp.0", "irdma.gen_1", pf, None, false);
    let out = recreated(t.join().unwrap().unwrap());
    assert_eq!(
        out.method,
        ResetMethod::AuxRebind {
            device: "i40e.iwarp.0".into(),
            driver: "irdma.gen_1".into()
        }
    );
    assert!(f.sys().join("class/infiniband/iwp61s0f0").exists());
}

#[test]
fn ice_replugged_as_iwarp_during_the_toggle_is_found_and_restored_to_roce() {
    // A reset of the function between the two devlink calls: ice plugs its RDMA aux device
    // named from the mode bit (ice_idc.c), so it comes back as ice.iwarp.0.
    let f = Fake::new();
    let (pf0, _) = e810(&f, "irdma");
    f.scenario("iwarp-flip");
    let r = SysfsResetter::new(f.config(&["rocep2s0f0"]));
    let out = recreated(r.recreate("rocep2s0f0", false).unwrap());
    let restored = out.mode_restored.expect("the wrong mode was not reported");
    assert!(
        restored.contains("its RDMA auxiliary device is ice.iwarp.0 (not roce)"),
        "{restored}"
    );
    let show = "devlink dev param show pci/0000:02:00.0 name enable_roce -j";
    let off = "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime";
    let on = "devlink dev param set pci/0000:02:00.0 name enable_roce value true cmode runtime";
    // Toggle, check (wrong), one more toggle, check (right).
    assert_eq!(f.argv(), [show, off, on, show, show, off, on, show]);
    assert!(pf0.join("ice.roce.0").exists());
    assert!(!pf0.join("ice.iwarp.0").exists());
    assert_eq!(out.new_name, "rocep2s0f0");
}

#[test]
fn ice_that_stays_iwarp_is_a_typed_error_after_one_restore() {
    let f = Fake::new();
    e810(&f, "irdma");
    f.scenario("iwarp-stuck");
    let r = SysfsResetter::new(f.config(&["rocep2s0f0"]));
    let e = r.recreate("rocep2s0f0", false).unwrap_err();
    assert!(matches!(e, ResetError::ModeNotRestored { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("wrong RDMA mode") && text.contains("ice.iwarp.0"),
        "{text}"
    );
    // One restore, never a loop of toggles.
    let sets = f.argv().iter().filter(|a| a.contains(" set ")).count();
    assert_eq!(sets, 4, "{:?}", f.argv());
    assert!(e.device_may_be_gone());
}

#[test]
fn a_toggle_that_leaves_roce_on_and_the_aux_named_roce_reports_no_mode_change() {
    let f = Fake::new();
    e810(&f, "irdma");
    let r = SysfsResetter::new(f.config(&["rocep2s0f0"]));
    let out = recreated(r.recreate("rocep2s0f0", false).unwrap());
    assert_eq!(out.mode_restored, None);
}
