//! `iser-guard doctor`, the real binary as an operator runs it, on fixture hosts: the fake
//! E810 host of tests/support/fake_host.rs (sysfs tree, stub devlink and iscsiadm) with the
//! /proc, /dev, module and open-iscsi trees of tests/fixtures/doctor and the package's own
//! unit file; and this machine, which has no RDMA. Each check's judgement is tested in the
//! core (crates/iser-guard-core/src/doctor/tests.rs); here, that every reader finds what the
//! files say and that the output, JSON and exit codes are what docs/guide/hardware.md says.

#[path = "support/fake_host.rs"]
mod fake_host;

use std::fs;
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use fake_host::{FakeHost, TARGET};
use serde_json::Value;

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/doctor")
        .join(rel)
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap().flatten() {
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), dest).unwrap();
        }
    }
}

/// The fake E810 host with an Ubuntu 24.04 /proc, /dev, /lib/modules and /etc/iscsi, the
/// package's unit, and the node record of its one session.
struct DoctorHost {
    h: FakeHost,
}

impl DoctorHost {
    fn new() -> DoctorHost {
        let h = FakeHost::new();
        copy_tree(&fixture("ubuntu-e810"), h.t.path());
        // What udev makes the nodes from, and the module the RDMA driver folder links to.
        let sys = h.sys();
        for (class, name, dev) in [
            ("infiniband_verbs", "uverbs0", "231:192"),
            ("misc", "rdma_cm", "10:58"),
        ] {
            let d = sys.join("class").join(class).join(name);
            fs::create_dir_all(&d).unwrap();
            fs::write(d.join("dev"), format!("{dev}\n")).unwrap();
        }
        fs::write(sys.join("module/irdma/taint"), "\n").unwrap();
        fs::write(
            sys.join("module/irdma/srcversion"),
            "8D1C0C1A3E2F4B5A6C7D8E9\n",
        )
        .unwrap();
        let unit_dir = h.path("systemd");
        fs::create_dir_all(unit_dir.join("iser-guard.service.d")).unwrap();
        fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("packaging/debian/iser-guard.service"),
            unit_dir.join("iser-guard.service"),
        )
        .unwrap();
        // The kernel log doctor --active reads: a FIFO nobody writes (nothing is printed).
        // A regular file cannot be paths.kmsg: the configuration would not load.
        nix::unistd::mkfifo(
            &h.path("kmsg"),
            nix::sys::stat::Mode::from_bits_truncate(0o600),
        )
        .unwrap();
        let d = DoctorHost { h };
        d.node_record("<empty>");
        d
    }

    /// The session's node record (the lab's, captured from open-iscsi 2.1.8), with its CHAP
    /// password.
    fn node_record(&self, password: &str) {
        let record = fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("crates/iser-guard-core/tests/fixtures/iscsi/real-node-record.txt"),
        )
        .unwrap()
        .replace("192.0.2.2", "127.0.0.1")
        .replace("= 3260", &format!("= {}", self.h.port))
        .replace(
            "node.session.auth.password = <empty>",
            &format!("node.session.auth.password = {password}"),
        );
        let dir = self
            .h
            .path("etc/iscsi/nodes")
            .join(TARGET)
            .join(format!("127.0.0.1,{},1", self.h.port));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("iser"), record).unwrap();
    }

    fn drop_in(&self, text: &str) {
        fs::write(
            self.h.path("systemd/iser-guard.service.d/50-test.conf"),
            text,
        )
        .unwrap();
    }

    fn config(&self, sysfs: &Path) -> PathBuf {
        let p = self.h.path("config.toml");
        let s = |rel: &str| format!("{:?}", self.h.path(rel).display().to_string());
        let text = format!(
            "[paths]\nkmsg = {}\nsysfs-root = {:?}\nstate-dir = {}\niscsiadm = {}\ncontrol-socket = {}\n\
             devlink = {}\nrdma = {}\nmodprobe = {}\nproc-root = {}\ndev-root = {}\n\
             modules-root = {}\niscsi-dir = {}\nunit-file = {}\nunit-dropins = {}\n\n\
             [devices]\nallow = [\"rocep2s0f0\"]\n\n\
             [recovery]\nverify-timeout = 2\n",
            s("kmsg"),
            sysfs.display().to_string(),
            s("state"),
            s("bin/iscsiadm"),
            s("run/control.sock"),
            s("bin/devlink"),
            s("bin/rdma"),
            s("bin/modprobe"),
            s("proc"),
            s("dev"),
            s("lib/modules"),
            s("etc/iscsi"),
            s("systemd/iser-guard.service"),
            s("systemd/iser-guard.service.d"),
        );
        fs::write(&p, text).unwrap();
        p
    }

    fn doctor(&self, args: &[&str]) -> Output {
        self.doctor_on(&self.h.sys(), args)
    }

    fn doctor_on(&self, sysfs: &Path, args: &[&str]) -> Output {
        let cfg = self.config(sysfs);
        Command::new(env!("CARGO_BIN_EXE_iser-guard"))
            .arg("--config")
            .arg(&cfg)
            .arg("doctor")
            .args(args)
            .env_remove("ISER_GUARD_LOG")
            .env("NO_COLOR", "1")
            .output()
            .unwrap()
    }
}

/// RDMA netlink answers on this machine (then the kernel's own devices mix in).
fn host_has_rdma() -> bool {
    Path::new("/sys/class/infiniband").exists()
}

fn json(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn check<'a>(report: &'a Value, kind: &str, subject: &str) -> &'a Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == kind && c["subject"] == subject)
        .unwrap_or_else(|| panic!("no {kind} check of {subject}: {report:#}"))
}

fn evidence(c: &Value) -> Vec<String> {
    c["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_fake_e810_host_is_read_as_its_files_say() {
    let d = DoctorHost::new();
    let out = d.doctor(&["--json"]);
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = json(&out);
    let code = out.status.code().unwrap();
    assert_eq!(
        u64::from(u8::try_from(code).unwrap()),
        r["exit_code"].as_u64().unwrap()
    );

    let k = check(&r, "kernel", "host");
    assert_eq!(k["verdict"], "ok");
    assert_eq!(k["finding"], "Linux 6.8.0-51-generic");

    let dev = check(&r, "device", "rocep2s0f0");
    assert_eq!(
        dev["finding"],
        "PCI 0000:02:00.0 (ice), aux ice.roce.0 -> irdma, netdev ens1f0, port 1 ACTIVE"
    );
    let ev = evidence(dev);
    assert!(
        ev.iter().any(
            |e| e.starts_with("auxiliary device ice.roce.0: driver folder ")
                && e.ends_with("/bus/auxiliary/drivers/irdma, module irdma")
        ),
        "{ev:#?}"
    );

    for (m, verdict) in [("irdma", "ok"), ("ice", "ok")] {
        let c = check(&r, "driver", m);
        assert_eq!(c["verdict"], verdict, "{c:#}");
    }
    assert!(evidence(check(&r, "driver", "irdma"))
        .contains(&format!(
            "{}/lib/modules/6.8.0-51-generic/modules.dep: kernel/drivers/infiniband/hw/irdma/irdma.ko.zst",
            d.h.t.path().display()
        )));

    let rc = check(&r, "recreate", "rocep2s0f0");
    assert_eq!(rc["verdict"], "ok", "{rc:#}");
    assert_eq!(
        rc["finding"],
        "the daemon would toggle devlink parameter enable_roce of pci/0000:02:00.0"
    );
    let ev = evidence(rc);
    assert!(ev
        .iter()
        .any(|e| e.starts_with("method 2: unbind/bind auxiliary device ice.roce.0")));
    assert!(ev.contains(&"devlink pci/0000:02:00.0 enable_roce: true (runtime)".to_string()));
    // doctor only read the parameter: nothing was set.
    assert!(d.h.devlink_sets().is_empty(), "{:?}", d.h.argv());

    if !host_has_rdma() {
        let g = check(&r, "gsi-qp", "rocep2s0f0/1");
        assert_eq!(g["verdict"], "unknown");
        assert!(evidence(g)[0].starts_with("RDMA netlink: "), "{g:#}");
        assert_eq!(check(&r, "cm-ids", "rocep2s0f0/1")["verdict"], "unknown");
    }

    let sb = check(&r, "sandbox", "service");
    assert_eq!(sb["verdict"], "ok", "{sb:#}");
    let ev = evidence(sb);
    assert!(ev.contains(&"/dev/infiniband/uverbs0: allowed by DeviceAllow=char-infiniband_verbs rw (major 231 in /proc/devices)".to_string()), "{ev:#?}");
    assert!(ev.contains(
        &"/dev/infiniband/rdma_cm: allowed by DeviceAllow=/dev/infiniband/rdma_cm rw".to_string()
    ));

    let m = check(&r, "modules", "host");
    assert_eq!(m["verdict"], "ok", "{m:#}");

    let node = format!("{TARGET} 127.0.0.1:{} iser", d.h.port);
    let n = check(&r, "open-iscsi", &node);
    // The lab's record: open-iscsi's defaults, node.startup manual.
    assert_eq!(n["verdict"], "warning", "{n:#}");
    assert!(
        n["finding"].as_str().unwrap().contains("node.startup"),
        "{n:#}"
    );
    assert!(evidence(n).contains(&"node.session.timeo.replacement_timeout = 120".to_string()));
    assert_eq!(check(&r, "open-iscsi", "iscsid.conf")["verdict"], "ok");

    let p = check(&r, "config", &format!("portal 127.0.0.1:{}", d.h.port));
    assert!(
        evidence(p)[0].starts_with("session 2 LOGGED_IN on rocep2s0f0/1"),
        "{p:#}"
    );
    assert_eq!(check(&r, "config", "devices.allow")["verdict"], "ok");

    // 6.8 with ib_iser: the crash the lab met; irdma before the QP-state fix.
    assert_eq!(
        check(&r, "known-issue", "iser-task-rsp-crash")["verdict"],
        "warning"
    );
    assert_eq!(
        check(&r, "known-issue", "irdma-qp-state-fix")["verdict"],
        "warning"
    );
    assert_eq!(check(&r, "known-issue", "irdma-gsi-stuck")["verdict"], "ok");
    assert_eq!(check(&r, "daemon", "daemon")["verdict"], "warning");

    assert_eq!(r["outcome"], "warnings");
    assert_eq!(code, 2);
}

#[test]
fn the_text_report_has_one_line_per_check_and_no_log_lines() {
    let d = DoctorHost::new();
    let out = d.doctor(&[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(2), "{text}");
    let json = json(&d.doctor(&["--json"]));
    let checks = json["checks"].as_array().unwrap();
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| {
            ["ok ", "warning ", "problem ", "unknown "]
                .iter()
                .any(|v| l.starts_with(v))
        })
        .collect();
    assert_eq!(lines.len(), checks.len(), "{text}");
    for (l, c) in lines.iter().zip(checks) {
        let want = format!(
            "{:<8} {:<12} {}: {}",
            c["verdict"].as_str().unwrap(),
            c["check"].as_str().unwrap(),
            c["subject"].as_str().unwrap(),
            c["finding"].as_str().unwrap()
        );
        assert_eq!(*l, want);
    }
    assert!(text.contains("           do: "), "{text}");
    assert!(text.trim_end().ends_with("(exit 2)"), "{text}");
    assert!(!text.contains('\u{1b}'), "no colour in a pipe");
}

#[test]
fn chap_secrets_never_reach_the_report() {
    let d = DoctorHost::new();
    d.node_record("Sup3rS3cretChap");
    for args in [&["--json"][..], &[][..]] {
        let out = d.doctor(args);
        assert!(!String::from_utf8_lossy(&out.stdout).contains("Sup3rS3cretChap"));
        assert!(!String::from_utf8_lossy(&out.stderr).contains("Sup3rS3cretChap"));
    }
}

#[test]
fn a_drop_in_that_locks_out_the_verbs_devices_is_a_problem() {
    let d = DoctorHost::new();
    d.drop_in("[Service]\nDeviceAllow=\nDeviceAllow=/dev/kmsg r\n");
    let out = d.doctor(&["--json"]);
    assert_eq!(out.status.code(), Some(1));
    let r = json(&out);
    assert_eq!(r["outcome"], "problems");
    let sb = check(&r, "sandbox", "service");
    assert_eq!(sb["verdict"], "problem");
    let ev = evidence(sb);
    assert!(
        ev.iter()
            .any(|e| e.starts_with("drop-in ") && e.ends_with("50-test.conf")),
        "{ev:#?}"
    );
    assert!(
        ev.iter()
            .any(|e| e.starts_with("/dev/infiniband/uverbs0: DENIED")),
        "{ev:#?}"
    );
}

#[test]
fn a_missing_unit_and_a_bonded_e810_port() {
    let d = DoctorHost::new();
    fs::remove_file(d.h.path("systemd/iser-guard.service")).unwrap();
    // A second E810 function whose netdev is in bond0, with no RDMA device (ice_lag.c).
    let sys = d.h.sys();
    let pf = sys.join("devices/pci0000:00/0000:02:00.1");
    fs::create_dir_all(pf.join("net/ens1f1")).unwrap();
    symlink(&pf, sys.join("bus/pci/drivers/ice/0000:02:00.1")).unwrap();
    fs::create_dir_all(sys.join("bus/pci/devices")).unwrap();
    symlink(&pf, sys.join("bus/pci/devices/0000:02:00.1")).unwrap();
    fs::create_dir_all(sys.join("class/net/ens1f1")).unwrap();
    fs::create_dir_all(sys.join("devices/virtual/net/bond0")).unwrap();
    symlink(
        sys.join("devices/virtual/net/bond0"),
        sys.join("class/net/ens1f1/master"),
    )
    .unwrap();
    let r = json(&d.doctor(&["--json"]));
    assert_eq!(check(&r, "sandbox", "service")["verdict"], "unknown");
    let b = check(&r, "known-issue", "bonded-e810-no-rdma");
    assert_eq!(b["verdict"], "warning");
    assert!(evidence(b).contains(
        &"ens1f1 (PCI 0000:02:00.1) is a member of bond0 and has no RDMA device".to_string()
    ));
}

#[test]
fn a_host_without_rdma_says_so_with_exit_69() {
    let d = DoctorHost::new();
    let empty = tempfile::tempdir().unwrap();
    let out = d.doctor_on(empty.path(), &["--json"]);
    if host_has_rdma() {
        eprintln!("skip: this machine has RDMA devices (RDMA netlink lists them)");
        return;
    }
    assert_eq!(out.status.code(), Some(69));
    let r = json(&out);
    assert_eq!(r["outcome"], "no-rdma");
    assert_eq!(r["exit_code"], 69);
    assert_eq!(r["rdma_present"], false);
    let why = r["no_rdma"].as_str().unwrap();
    assert!(why.contains("/class/infiniband does not exist"), "{why}");
    assert!(
        why.contains("iser-guard has nothing to protect here"),
        "{why}"
    );
    // The text says it first.
    let out = d.doctor_on(empty.path(), &[]);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.starts_with("NO RDMA: this host has no RDMA device"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(69));
}

/// This machine as it is (CI has no RDMA): `doctor --json` with the built-in paths.
#[test]
fn this_machine_without_rdma_exits_69_with_its_report() {
    if host_has_rdma() || Path::new("/etc/iser-guard/config.toml").exists() {
        eprintln!("skip: this machine has RDMA or an installed configuration");
        return;
    }
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .args(["doctor", "--json"])
        .env_remove("ISER_GUARD_LOG")
        .output()
        .unwrap();
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(69));
    let r = json(&out);
    assert_eq!(r["outcome"], "no-rdma");
    assert!(r["no_rdma"]
        .as_str()
        .unwrap()
        .starts_with("this host has no RDMA device: /sys/class/infiniband does not exist"));
}

/// The operator guide names every check kind and every known defect and hazard, and its
/// exit codes are the binary's.
#[test]
fn the_hardware_guide_documents_every_check_and_known_issue() {
    use iser_guard::core::doctor::{known::KNOWN, CheckKind};
    let doc =
        fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/guide/hardware.md"))
            .unwrap();
    for k in CheckKind::ALL {
        assert!(
            doc.contains(&format!("| `{}` |", k.name())),
            "{} not documented",
            k.name()
        );
    }
    for k in KNOWN {
        assert!(
            doc.contains(&format!("`{}`", k.id)),
            "{} not documented",
            k.id
        );
    }
    use iser_guard::exit::ExitStatus;
    for (code, what) in [
        (ExitStatus::Ok, "0"),
        (ExitStatus::Finding, "1"),
        (ExitStatus::DOCTOR_WARNINGS, "2"),
        (ExitStatus::Unavailable, "69"),
    ] {
        assert_eq!(code.code().to_string(), what);
        assert!(
            doc.contains(&format!("| {what} |")),
            "exit {what} not in the guide"
        );
    }
}

#[test]
fn active_without_a_terminal_or_yes_changes_nothing() {
    let d = DoctorHost::new();
    let before = d.h.sys_snapshot();
    let out = d.doctor(&["--active", "rocep2s0f0"]);
    assert_eq!(
        out.status.code(),
        Some(64),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("pass --yes"));
    // The plan was printed first, every method named.
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("doctor --active will:"), "{text}");
    assert!(
        text.contains("toggle devlink parameter enable_roce") && text.contains("unbind/bind"),
        "{text}"
    );
    assert!(d.h.devlink_sets().is_empty());
    assert_eq!(d.h.sys_snapshot(), before);
}

#[test]
fn active_on_a_device_that_does_not_exist_names_those_that_do() {
    let d = DoctorHost::new();
    let out = d.doctor(&["--active", "mlx5_7", "--yes"]);
    assert_eq!(out.status.code(), Some(66));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no RDMA device mlx5_7 on this host; it has rocep2s0f0"),
        "{err}"
    );
    assert!(d.h.devlink_sets().is_empty());
    // --yes and --report belong to --active.
    let out = d.doctor(&["--yes"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn active_re_creates_by_the_first_method_and_stops_where_it_fails_with_a_redacted_report() {
    use std::os::unix::fs::PermissionsExt;
    let d = DoctorHost::new();
    d.node_record("Sup3rS3cretChap");
    let report = d.h.path("report.json");
    let out = d.doctor(&[
        "--active",
        "rocep2s0f0",
        "--yes",
        "--report",
        report.to_str().unwrap(),
    ]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    let err = String::from_utf8_lossy(&out.stderr).to_string();
    // The stub devlink took the device out and back: one method ran, by itself.
    assert_eq!(
        d.h.devlink_sets(),
        [
            "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime",
            "devlink dev param set pci/0000:02:00.0 name enable_roce value true cmode runtime"
        ],
        "{text}\n{err}"
    );
    assert!(
        text.contains("method 1 of 2: toggle devlink parameter enable_roce"),
        "{text}"
    );
    assert!(text.contains("report written to"), "{text}");
    let meta = fs::metadata(&report).unwrap();
    assert_eq!(meta.permissions().mode() & 0o777, 0o600);
    let raw = fs::read_to_string(&report).unwrap();
    assert!(
        !raw.contains("Sup3rS3cretChap"),
        "the CHAP secret is redacted"
    );
    let r: Value = serde_json::from_str(&raw).unwrap();
    let m = &r["active"]["methods"][0];
    let steps: Vec<String> = m["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect();
    for want in [
        "dev param show pci/0000:02:00.0 name enable_roce -j",
        "value false cmode runtime",
        "wait until the device is gone",
        "value true cmode runtime",
        "wait until it is back (as rocep2s0f0)",
        "re-create rocep2s0f0: toggle devlink parameter enable_roce of pci/0000:02:00.0",
    ] {
        assert!(
            steps.iter().any(|s| s.contains(want)),
            "{want} not in {steps:#?}"
        );
    }
    assert!(r["node_records"][0][1]
        .as_str()
        .unwrap()
        .contains("node.session.auth.password = ********"));
    assert!(r["doctor"]["checks"].as_array().unwrap().len() > 5);
    assert_eq!(r["active"]["plan"]["sessions"][0]["disk"], "sda");
    if host_has_rdma() {
        return;
    }
    // Without RDMA netlink QP 1 of the new device cannot be read: that step fails, the run
    // stops there, and the second method is never tried.
    assert_eq!(out.status.code(), Some(1), "{text}\n{err}");
    assert_eq!(r["passed"], false);
    assert_eq!(r["active"]["methods"].as_array().unwrap().len(), 1);
    assert!(
        m["outcome"]["why"]
            .as_str()
            .unwrap()
            .contains("QP 1 of the new device is not in RTS"),
        "{m:#}"
    );
    assert!(err.contains("stopped after method 1"), "{err}");
}
