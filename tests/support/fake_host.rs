//! A fake host for the daemon and manual-command tests: an E810 `rocep2s0f0` (PCI function
//! 0000:02:00.0, driver ice, RDMA aux device ice.roce.0 in irdma, port 1 on ens1f0) in a
//! sysfs tree in a temporary directory (layout as in tests/executors_reset.rs), the stub
//! devlink/rdma/modprobe that move the device out and back, and the stateful stub iscsiadm
//! (tests/fixtures/stubs/iscsiadm-host) with one iSER session to a loopback portal.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

pub const TARGET: &str = "iqn.2003-01.org.example.lab:tgt0";

pub fn stubs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stubs")
}

pub struct FakeHost {
    pub t: tempfile::TempDir,
    pub port: u16,
}

impl FakeHost {
    pub fn new() -> FakeHost {
        let t = tempfile::tempdir().unwrap();
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let h = FakeHost { t, port };
        for d in [
            "sys/class/infiniband",
            "sys/bus/pci/drivers/ice",
            "sys/bus/auxiliary/devices",
            "sys/bus/auxiliary/drivers/irdma",
            "sys/module/irdma",
            "sys/devices/pci0000:00/0000:02:00.0",
            "sys/devices/virtual/infiniband",
            "bin",
            "state",
            "run",
        ] {
            fs::create_dir_all(h.path(d)).unwrap();
        }
        for tool in ["devlink", "rdma", "modprobe"] {
            fs::copy(stubs().join(tool), h.bin().join(tool)).unwrap();
        }
        fs::copy(stubs().join("iscsiadm-host"), h.bin().join("iscsiadm")).unwrap();
        symlink(stubs().join("iscsiadm.d"), h.bin().join("fixtures")).unwrap();
        fs::write(h.bin().join("portal"), format!("127.0.0.1:{port}\n")).unwrap();
        h.set_session("LOGGED_IN");
        // PCI function 0000:02:00.0 bound to ice, with its RDMA aux device and ib_device.
        let sys = h.sys();
        let pf = sys.join("devices/pci0000:00/0000:02:00.0");
        symlink(sys.join("bus/pci"), pf.join("subsystem")).unwrap();
        symlink(sys.join("bus/pci/drivers/ice"), pf.join("driver")).unwrap();
        let aux = pf.join("ice.roce.0");
        fs::create_dir_all(&aux).unwrap();
        symlink(sys.join("bus/auxiliary"), aux.join("subsystem")).unwrap();
        symlink(&aux, sys.join("bus/auxiliary/devices/ice.roce.0")).unwrap();
        let drv = sys.join("bus/auxiliary/drivers/irdma");
        symlink(sys.join("module/irdma"), drv.join("module")).unwrap();
        fs::write(drv.join("bind"), "").unwrap();
        fs::write(drv.join("unbind"), "").unwrap();
        symlink(&aux, drv.join("ice.roce.0")).unwrap();
        symlink(&drv, aux.join("driver")).unwrap();
        let ib = pf.join("infiniband/rocep2s0f0");
        fs::create_dir_all(ib.join("ports/1/gid_attrs/ndevs")).unwrap();
        fs::write(ib.join("ports/1/gid_attrs/ndevs/0"), "ens1f0\n").unwrap();
        fs::write(ib.join("ports/1/state"), "4: ACTIVE\n").unwrap();
        fs::write(ib.join("node_type"), "1: CA\n").unwrap();
        fs::write(ib.join("node_desc"), "\n").unwrap();
        symlink(&pf, ib.join("device")).unwrap();
        symlink(&ib, sys.join("class/infiniband/rocep2s0f0")).unwrap();
        h
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.t.path().join(rel)
    }
    pub fn sys(&self) -> PathBuf {
        self.path("sys")
    }
    pub fn bin(&self) -> PathBuf {
        self.path("bin")
    }
    pub fn state_dir(&self) -> PathBuf {
        self.path("state")
    }
    pub fn portal(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// LOGGED_IN, FAILED or NONE.
    pub fn set_session(&self, state: &str) {
        fs::write(self.bin().join("state"), format!("{state}\n")).unwrap();
    }
    pub fn session(&self) -> String {
        fs::read_to_string(self.bin().join("state"))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    /// Every stub invocation (devlink/rdma/modprobe/iscsiadm share T/bin/argv.log).
    pub fn argv(&self) -> Vec<String> {
        fs::read_to_string(self.bin().join("argv.log"))
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect()
    }
    pub fn devlink_sets(&self) -> Vec<String> {
        self.argv()
            .into_iter()
            .filter(|l| l.starts_with("devlink dev param set"))
            .collect()
    }
    pub fn logins(&self) -> Vec<String> {
        self.argv()
            .into_iter()
            .filter(|l| l.ends_with("--login"))
            .collect()
    }

    /// Writes the config; `extra` is appended (TOML).
    pub fn config(&self, extra: &str) -> PathBuf {
        let p = self.path("config.toml");
        let s = |rel: &str| format!("{:?}", self.path(rel).display().to_string());
        let text = format!(
            "[paths]\nkmsg = \"/dev/kmsg\"\nsysfs-root = {}\nstate-dir = {}\niscsiadm = {}\n\
             control-socket = {}\ndevlink = {}\nrdma = {}\nmodprobe = {}\n\n\
             [poll]\nnetlink = 0.2\niscsi = 0.5\nprobe = 0.2\n\n\
             [devices]\nallow = [\"rocep2s0f0\"]\n\n\
             [recovery]\nprobe-successes = 2\nprobe-timeout = 0.2\niscsid-grace = 0.5\n\
             backoff-initial = 1\niscsiadm-timeout = 10\n\n\
             [alerts]\nsyslog-socket = {}\n\n{extra}\n",
            s("sys"),
            s("state"),
            s("bin/iscsiadm"),
            s("run/control.sock"),
            s("bin/devlink"),
            s("bin/rdma"),
            s("bin/modprobe"),
            s("syslog.sock"),
        );
        fs::write(&p, text).unwrap();
        p
    }

    /// Every path under sys/ with its content or link target: to prove nothing changed.
    pub fn sys_snapshot(&self) -> BTreeMap<PathBuf, String> {
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
        walk(&self.sys(), &mut m);
        m
    }

    /// A listener on the portal that accepts and drops connections (the target is back).
    pub fn start_target(&self) -> std::thread::JoinHandle<()> {
        let l = std::net::TcpListener::bind(("127.0.0.1", self.port)).unwrap();
        std::thread::spawn(move || {
            for c in l.incoming() {
                drop(c);
            }
        })
    }
}

/// Polls `cond` every 50 ms until it holds or `deadline` passes.
pub fn wait_for(what: &str, deadline: std::time::Duration, mut cond: impl FnMut() -> bool) {
    let end = std::time::Instant::now() + deadline;
    while std::time::Instant::now() < end {
        if cond() {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    panic!("timed out after {deadline:?} waiting for {what}");
}
