//! The manual commands on the real binary, without a daemon (standalone mode), against the
//! fake host of tests/support/fake_host.rs: a fake sysfs with an E810 `rocep2s0f0`, stub
//! devlink/rdma and a stateful stub iscsiadm, a loopback listener as the target portal.

#[path = "support/fake_host.rs"]
mod fake_host;
#[path = "support/plain_text.rs"]
mod plain_text;

use std::process::{Command, Output, Stdio};
use std::time::Duration;

use fake_host::{FakeHost, TARGET};

fn run(h: &FakeHost, config: &std::path::Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(config)
        .args(args)
        .env("ISER_GUARD_LOG", "info")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprintln!(
        "$ iser-guard {}\n--- stdout\n{}--- stderr\n{}--- exit {:?}",
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        out.status.code()
    );
    let _ = h;
    out
}

/// As an operator runs it: no `ISER_GUARD_LOG` in the environment, `extra` before the
/// subcommand (`--log info`).
fn run_as_operator(config: &std::path::Path, extra: &[&str], args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(config)
        .args(extra)
        .args(args)
        .env_remove("ISER_GUARD_LOG")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprintln!(
        "$ iser-guard {} {}\n--- stdout\n{}--- stderr\n{}--- exit {:?}",
        extra.join(" "),
        args.join(" "),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        out.status.code()
    );
    out
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn dry_runs_print_the_plan_and_write_nothing() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let before = h.sys_snapshot();
    for args in [
        &["reset-device", "rocep2s0f0", "--dry-run"][..],
        &["recover", "rocep2s0f0/1", "--dry-run"][..],
        &["reconnect", "--target", TARGET, "--dry-run"][..],
    ] {
        let o = run(&h, &cfg, args);
        assert_eq!(o.status.code(), Some(0), "{args:?}");
        assert!(stdout(&o).contains("nothing was changed"), "{args:?}");
    }
    let o = run(&h, &cfg, &["reset-device", "rocep2s0f0", "--dry-run"]);
    assert!(
        stdout(&o).contains("dry run: would re-create RDMA device rocep2s0f0"),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("enable_roce"), "{}", stdout(&o));
    let o = run(&h, &cfg, &["reconnect", "--dry-run"]);
    assert!(stdout(&o).contains(&h.portal()), "{}", stdout(&o));
    // Only read-only iscsiadm listings ran; no devlink set, no login, no sysfs write, and
    // nothing in the state directory.
    assert!(h.devlink_sets().is_empty(), "{:?}", h.argv());
    assert!(
        h.argv().iter().all(|l| l == "-m session -P 3"),
        "{:?}",
        h.argv()
    );
    assert_eq!(before, h.sys_snapshot());
    assert_eq!(std::fs::read_dir(h.state_dir()).unwrap().count(), 0);
}

#[test]
fn destructive_commands_without_a_terminal_need_yes() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let before = h.sys_snapshot();
    for args in [
        &["recover", "rocep2s0f0"][..],
        &["reset-device", "rocep2s0f0"][..],
        &["reconnect"][..],
    ] {
        let o = run(&h, &cfg, args);
        assert_eq!(o.status.code(), Some(64), "{args:?}");
        assert!(stdout(&o).contains("iser-guard will:"), "{args:?}");
        assert!(stderr(&o).contains("pass --yes"), "{args:?}");
    }
    assert!(h.devlink_sets().is_empty());
    assert!(h.logins().is_empty());
    assert_eq!(before, h.sys_snapshot());
}

#[test]
fn recover_runs_the_whole_sequence_standalone() {
    let h = FakeHost::new();
    let cfg = h.config("");
    h.set_session("FAILED");
    let _target = h.start_target();
    let o = run(&h, &cfg, &["recover", "rocep2s0f0/1", "--yes"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("no iser-guard daemon is running"), "{out}");
    // The plan names the wait for the target. Whether a probe's answer is printed depends on
    // whether the loop's first probes ran before the command was taken (then the target
    // already counts as back and the re-creation starts at once: seen on a loaded machine);
    // the re-creation below is the evidence that the target answered (reset-when = target-back).
    assert!(out.contains("wait for the target portal"), "{out}");
    assert!(out.contains("re-create RDMA device rocep2s0f0"), "{out}");
    assert!(out.contains("every port is healthy"), "{out}");
    assert_eq!(
        h.devlink_sets(),
        [
            "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime",
            "devlink dev param set pci/0000:02:00.0 name enable_roce value true cmode runtime"
        ]
    );
    let logins = h.logins();
    assert_eq!(logins.len(), 1, "{:?}", h.argv());
    assert!(logins[0].contains(TARGET) && logins[0].contains(&h.portal()));
    assert_eq!(h.session(), "LOGGED_IN");
    // The device is back in the fake sysfs.
    assert!(h.sys().join("class/infiniband/rocep2s0f0").exists());
    // The journal records the completed re-creation (so a later daemon never repeats it).
    let snap = iser_guard::io::journal::Journal::new(h.state_dir())
        .load()
        .unwrap()
        .expect("journal written");
    assert!(snap
        .devices
        .iter()
        .any(|d| d.name == "rocep2s0f0" && d.completed_recreations > 0));
}

#[test]
fn reconnect_logs_the_matching_session_out_and_in() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let _target = h.start_target();
    let o = run(
        &h,
        &cfg,
        &[
            "reconnect",
            "--target",
            TARGET,
            "--portal",
            &h.portal(),
            "--yes",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let argv = h.argv();
    assert!(argv.iter().any(|l| l.ends_with("--logout")), "{argv:?}");
    assert!(argv.iter().any(|l| l.ends_with("--login")), "{argv:?}");
    assert!(h.devlink_sets().is_empty(), "reconnect must not re-create");
    // No session matches another target: refused with 66.
    let o = run(
        &h,
        &cfg,
        &["reconnect", "--target", "iqn.2000-01.none:x", "--yes"],
    );
    assert_eq!(o.status.code(), Some(66), "{}", stderr(&o));
}

#[test]
fn standalone_reconnect_waits_for_its_logout_and_login() {
    // The lab (6.12, standalone `reconnect --yes`): the command said "done" 40 ms after it
    // started the logout, and shutdown killed the iscsiadm child: the session was never
    // logged in again. A logout that takes a while must be waited for, then the login.
    let h = FakeHost::new();
    // A second RDMA device (the lab's rxe_tgt): with no CM id table and no route lookups
    // the session is then placed on no port, the lab's first scan.
    let ib = h.sys().join("devices/virtual/infiniband/rxe_tgt");
    std::fs::create_dir_all(ib.join("ports/1/gid_attrs/ndevs")).unwrap();
    std::fs::write(ib.join("ports/1/gid_attrs/ndevs/0"), "tgt0\n").unwrap();
    std::fs::write(ib.join("ports/1/state"), "4: ACTIVE\n").unwrap();
    std::fs::write(ib.join("node_type"), "1: CA\n").unwrap();
    std::os::unix::fs::symlink(&ib, h.sys().join("class/infiniband/rxe_tgt")).unwrap();
    let cfg = h.config("");
    let _target = h.start_target();
    std::fs::write(h.bin().join("logout-delay"), "1\n").unwrap();
    let o = run(&h, &cfg, &["reconnect", "--yes"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let argv = h.argv();
    assert!(argv.iter().any(|l| l.ends_with("--logout")), "{argv:?}");
    assert!(argv.iter().any(|l| l.ends_with("--login")), "{argv:?}");
    assert_eq!(h.session(), "LOGGED_IN");
    assert!(
        !stderr(&o).contains("cannot write the journal"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn a_held_lock_refuses_with_75_naming_the_holder() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let _held =
        iser_guard::io::lock::RecoveryLock::try_acquire(&h.state_dir(), "test holder").unwrap();
    let o = run(&h, &cfg, &["reset-device", "rocep2s0f0", "--yes"]);
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(
        stderr(&o).contains(&format!("pid {}", std::process::id())),
        "{}",
        stderr(&o)
    );
    assert!(h.devlink_sets().is_empty());
}

#[test]
fn pause_and_resume_without_a_daemon_say_so() {
    let h = FakeHost::new();
    let cfg = h.config("");
    for cmd in ["pause", "resume"] {
        let o = run(&h, &cfg, &[cmd]);
        assert_eq!(o.status.code(), Some(69));
        assert!(
            stderr(&o).contains("the daemon is not running"),
            "{}",
            stderr(&o)
        );
    }
}

#[test]
fn bad_arguments_are_usage_errors() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let o = run(&h, &cfg, &["recover", "rocep2s0f0/x", "--yes"]);
    assert_eq!(o.status.code(), Some(64));
    let o = run(
        &h,
        &cfg,
        &["reconnect", "--portal", "not-an-address", "--yes"],
    );
    assert_eq!(o.status.code(), Some(64));
    let o = run(&h, &cfg, &["reset-device", "nosuchdev", "--yes"]);
    assert_eq!(o.status.code(), Some(66), "{}", stderr(&o));
    let _ = Duration::ZERO;
}

/// Issue item: a port that does not exist was accepted (`recover DEV/9` re-created the
/// device for it). Refused now, with the ports that exist, before anything runs.
#[test]
fn a_port_or_device_that_does_not_exist_is_refused_with_those_that_exist() {
    let h = FakeHost::new();
    let cfg = h.config("");
    for args in [
        &["recover", "rocep2s0f0/9", "--dry-run"][..],
        &["recover", "rocep2s0f0/9", "--yes"][..],
    ] {
        let o = run(&h, &cfg, args);
        assert_eq!(o.status.code(), Some(66), "{args:?}: {}", stderr(&o));
        let all = format!("{}{}", stdout(&o), stderr(&o));
        assert!(all.contains("has no port 9"), "{all}");
        assert!(all.contains("rocep2s0f0/1"), "{all}");
        assert!(!all.contains("rdma link add"), "{all}");
    }
    let o = run(&h, &cfg, &["recover", "nosuch0", "--dry-run"]);
    assert_eq!(o.status.code(), Some(66), "{}", stderr(&o));
    let all = format!("{}{}", stdout(&o), stderr(&o));
    assert!(all.contains("no RDMA device named nosuch0"), "{all}");
    assert!(all.contains("rocep2s0f0"), "{all}");
    assert!(!all.contains("rdma link add"), "{all}");
    assert!(h.devlink_sets().is_empty(), "{:?}", h.argv());
}

/// Issue item: the plan an operator confirms must say everything that will happen,
/// retries and back-off included.
#[test]
fn the_plan_says_the_retries_the_back_off_and_the_quarantine() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let o = run(&h, &cfg, &["reset-device", "rocep2s0f0", "--dry-run"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("up to 2 more attempts, pausing"), "{out}");
    assert!(out.contains("in all, ±20 %"), "{out}");
    assert!(
        out.contains("after 3 failed attempts the port is quarantined"),
        "{out}"
    );
    assert!(out.contains("log out and in"), "{out}");
    assert!(out.contains("verify"), "{out}");
}

/// Issue item (unsafe): the daemon started while a manual recovery held the recovery lock
/// and took over its journal. It refuses now, with 75 and who holds the lock.
#[test]
fn the_daemon_does_not_start_while_a_manual_recovery_holds_the_lock() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let _held = iser_guard::io::lock::RecoveryLock::try_acquire(
        &h.state_dir(),
        "iser-guard reset-device rocep2s0f0",
    )
    .unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(&cfg)
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if std::time::Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon started beside a manual recovery holding the lock");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(status.code(), Some(75), "{err}");
    assert!(err.contains("a manual recovery is running"), "{err}");
    assert!(err.contains("reset-device rocep2s0f0"), "{err}");
    assert!(!h.state_dir().join("engine-journal.json").exists());
}

/// Issue item (unsafe): a manual command ran standalone beside a daemon that was running
/// but not answering. It refuses now, with 75.
#[test]
fn a_manual_command_does_not_run_beside_a_daemon_that_does_not_answer() {
    let h = FakeHost::new();
    let cfg = h.config("");
    std::fs::create_dir_all(h.state_dir()).unwrap();
    let _daemon = iser_guard::io::lock::DaemonLock::acquire(&h.state_dir()).unwrap();
    let o = run(&h, &cfg, &["reset-device", "rocep2s0f0", "--yes"]);
    assert_eq!(o.status.code(), Some(75), "{}", stderr(&o));
    assert!(stderr(&o).contains("does not answer"), "{}", stderr(&o));
    assert!(h.devlink_sets().is_empty(), "{:?}", h.argv());
}

/// Issue item: an invalid edit made `reload` ask the default socket, print "has 1
/// problem(s):" without the problems and say the daemon was not running (exit 69). It
/// prints every problem now and exits 78; the daemon keeps the configuration in force.
#[test]
fn reload_of_an_invalid_file_prints_every_problem_and_exits_78() {
    let h = FakeHost::new();
    let cfg = h.config("[kmsg]\ntrust-userspace-records = \"yes\"\n[metrics]\ninterval = 0\n");
    let o = run(&h, &cfg, &["reload"]);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(78), "{err}");
    assert!(err.contains("kmsg.trust-userspace-records"), "{err}");
    assert!(err.contains("metrics.interval"), "{err}");
    assert!(!err.contains("not running"), "{err}");
}

/// Lab sd-observe (2026-12-02): a refused `systemctl reload` reached the journal only as
/// systemd's "Reload failed"; the command's own lines (which say why) were info-level, so
/// `journalctl -p err` did not find them. Run as systemd runs `ExecReload=` (stderr a stream
/// that `JOURNAL_STREAM` names), every line of the refusal carries `<3>`; on a plain pipe it
/// carries none.
#[test]
fn a_refused_reload_under_systemd_is_an_error_in_the_journal() {
    use std::os::unix::fs::MetadataExt;
    let h = FakeHost::new();
    let cfg = h.config("[metrics]\ninterval = 0\n");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("journal-stream");
    let file = std::fs::File::create(&path).unwrap();
    let meta = file.metadata().unwrap();
    let status = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(&cfg)
        .arg("reload")
        .env_remove("ISER_GUARD_LOG")
        .env("JOURNAL_STREAM", format!("{}:{}", meta.dev(), meta.ino()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(file)
        .status()
        .unwrap();
    let err = std::fs::read_to_string(&path).unwrap();
    assert_eq!(status.code(), Some(78), "{err}");
    assert!(err.contains("metrics.interval"), "{err}");
    assert!(err.contains("keeps the configuration in force"), "{err}");
    for line in err.lines() {
        assert!(line.starts_with("<3>"), "{line:?} in\n{err}");
    }
    let o = run_as_operator(&cfg, &[], &["reload"]);
    assert_eq!(o.status.code(), Some(78));
    assert!(!stderr(&o).contains("<3>"), "{}", stderr(&o));
    assert!(stderr(&o).starts_with("iser-guard: "), "{}", stderr(&o));
}

/// Issue item: `events` without a daemon printed a sentence with runs of 22 spaces.
#[test]
fn events_without_a_daemon_says_so_in_one_plain_sentence() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let o = run(&h, &cfg, &["events"]);
    let err = stderr(&o);
    let line = err
        .lines()
        .find(|l| l.contains("no daemon is running"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(!line.contains("  "), "{line:?}");
}

/// Issue item: a standalone `reset-device` interleaved about 40 daemon log lines with its
/// own output, with Rust Debug dumps (`outcome=Recreate(Recreated { … })`). A command prints
/// its own output; the log appears with `--log`, in plain words.
#[test]
fn manual_commands_print_their_own_output_and_log_only_when_asked() {
    let h = FakeHost::new();
    let cfg = h.config("");
    h.set_session("FAILED");
    let _target = h.start_target();
    for args in [
        &["recover", "rocep2s0f0/1", "--dry-run"][..],
        &["recover", "nosuch0", "--dry-run"][..],
        &["reconnect", "--dry-run"][..],
        &["reset-device", "rocep2s0f0", "--yes"][..],
    ] {
        let o = run_as_operator(&cfg, &[], args);
        assert!(
            matches!(o.status.code(), Some(0 | 66)),
            "{args:?}: {}",
            stderr(&o)
        );
        let found: Vec<String> = plain_text::problems(&stdout(&o), true)
            .into_iter()
            .chain(plain_text::problems(&stderr(&o), true))
            .collect();
        assert!(found.is_empty(), "{args:?}:\n{}", found.join("\n"));
    }
    // Asked for, the log is there, and in plain words.
    let o = run_as_operator(
        &cfg,
        &["--log", "info"],
        &["reset-device", "rocep2s0f0", "--yes"],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.lines().any(plain_text::is_log_line), "{err}");
    assert!(err.contains("outcome=re-created"), "{err}");
    let dumps = plain_text::log_debug_dumps(&err);
    assert!(dumps.is_empty(), "{}", dumps.join("\n"));
}

/// A re-creation whose first methods fail before one works tells the operator what failed,
/// its error, and the method that worked: in the command's output, in `history` (text and
/// JSON) and in the journal. Here devlink refuses the toggle (as the kernel does for an
/// unsupported value), the aux driver folder has no unbind file, and the allowed module
/// reload re-creates the device.
#[test]
fn a_recreation_after_failed_methods_names_them_and_the_one_that_worked() {
    let h = FakeHost::new();
    let cfg = h.config("");
    let text = std::fs::read_to_string(&cfg).unwrap();
    std::fs::write(
        &cfg,
        text.replace("[recovery]\n", "[recovery]\nallow-module-reload = true\n"),
    )
    .unwrap();
    std::fs::write(h.bin().join("scenario"), "refuse\n").unwrap();
    std::fs::remove_file(h.sys().join("bus/auxiliary/drivers/irdma/unbind")).unwrap();
    std::fs::write(
        h.bin().join("modprobe.devices"),
        format!(
            "{}\n",
            h.sys()
                .join("devices/pci0000:00/0000:02:00.0/infiniband/rocep2s0f0")
                .display()
        ),
    )
    .unwrap();
    let _target = h.start_target();

    let o = run_as_operator(&cfg, &[], &["reset-device", "rocep2s0f0", "--yes"]);
    let out = stdout(&o);
    assert_eq!(o.status.code(), Some(0), "{out}{}", stderr(&o));
    let line = out
        .lines()
        .find(|l| l.contains("re-created by reload module irdma"))
        .unwrap_or_else(|| panic!("no re-creation line:\n{out}"));
    assert!(
        line.contains("toggle devlink parameter enable_roce of pci/0000:02:00.0 failed")
            && line.contains("Operation not supported"),
        "{line}"
    );
    assert!(
        line.contains("unbind/bind auxiliary device ice.roce.0 (driver irdma) failed"),
        "{line}"
    );
    assert!(
        h.argv().iter().any(|l| l == "modprobe irdma"),
        "{:?}",
        h.argv()
    );

    // history names them too, in text and JSON.
    let o = run_as_operator(&cfg, &[], &["history"]);
    let out = stdout(&o);
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("re-created"))
        .unwrap_or_else(|| panic!("no re-created line:\n{out}"));
    assert!(
        line.contains("by reload module irdma")
            && line.contains("toggle devlink parameter enable_roce of pci/0000:02:00.0 failed")
            && line.contains("Operation not supported"),
        "{line}"
    );
    let o = run_as_operator(&cfg, &[], &["history", "--json"]);
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let how = v["incidents"][0]["recreation"].as_str().unwrap_or_default();
    assert!(
        how.contains("by reload module irdma") && how.contains("Operation not supported"),
        "{v}"
    );
}
