//! The daemon's loop driven in-process through its injected dependencies (the builder of
//! tests/support/daemon_loop.rs): a forged record ignored and the kernel's own recovered,
//! a dry-run daemon that only plans, a kernel oops as an operator alert and a hold, reload
//! over the control socket, and safe mode on a corrupt or newer journal.

#[path = "support/daemon_loop.rs"]
mod daemon_loop;

use iser_guard::exit::ExitStatus;
use std::path::PathBuf;
use std::time::Duration;

use daemon_loop::{config, config_text, record, wait_for, LoopTest, STUCK_GSI};

use iser_guard::io::control::{Reply, Request};
use iser_guard::io::journal::Journal;
use iser_guard::io::syslog::{AlertMessage, RecordingSink};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stuck_gsi_record_recreates_the_device_and_the_session_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let d = LoopTest::new(config(dir.path(), false))
        .portal_reachable(50)
        .without_control()
        .start();
    // A forged (userspace) record first: ignored with the default config.
    d.feed(record(1, STUCK_GSI));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(d.doubles.resetter.calls().is_empty());
    // The kernel's own record: the target is away, then back.
    d.host.set("FAILED");
    d.feed(record(0, STUCK_GSI));
    wait_for(20, "no re-creation", || {
        !d.doubles.resetter.calls().is_empty()
    })
    .await;
    assert_eq!(
        d.doubles.resetter.calls(),
        vec![("rocep2s0f0".to_string(), false)]
    );
    // iscsid logs the FAILED session back in by itself once QP 1 is fresh (as on the
    // real kernel); the engine never logs out a session iscsid still holds.
    d.host.set("LOGGED_IN");
    wait_for(20, "storage never back", || {
        d.doubles
            .alerts
            .alerts()
            .iter()
            .any(|a| a.what.contains("storage is back"))
    })
    .await;
    assert!(
        d.host.logins.lock().unwrap().is_empty(),
        "logged a held session in"
    );
    let probes = d.doubles.prober.calls();
    assert!(probes.len() >= 2);
    // Probes leave from the session's iface address (placed on ens1f0 → rocep2s0f0/1).
    assert!(probes
        .iter()
        .all(|(_, src)| src.local_ip == Some("192.0.2.1".parse().unwrap())));
    let alerts = d.doubles.alerts.alerts();
    assert!(
        alerts
            .iter()
            .any(|a| a.what.contains("re-creating RDMA device rocep2s0f0")),
        "{alerts:#?}"
    );
    // The journal was written ahead of the re-creation and names the device.
    let journal = std::fs::read_to_string(Journal::new(dir.path()).path()).unwrap();
    assert!(journal.contains("rocep2s0f0"));
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dry_run_daemon_plans_the_recreation_through_the_driver_and_never_calls_the_resetter() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), false);
    cfg.recovery.dry_run = true;
    let d = LoopTest::new(cfg)
        .session("FAILED")
        .portal_reachable(50)
        .without_control()
        .start();
    d.feed(record(0, STUCK_GSI));
    wait_for(20, "no dry-run plan alert", || {
        d.doubles.alerts.alerts().iter().any(|a| {
            a.what
                .contains("dry-run: would re-create RDMA device rocep2s0f0")
        })
    })
    .await;
    // Planned, not run: no executor touched the device or the sessions.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(d.doubles.resetter.calls().is_empty());
    assert!(d.host.logins.lock().unwrap().is_empty());
    assert!(!d
        .doubles
        .alerts
        .alerts()
        .iter()
        .any(|a| a.what.contains("not re-created") || a.what.contains("quarantined")));
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}

/// A kernel oops in ib_iser read from the kernel log reaches the operator through the
/// alert path at `alerts.severity-operator` (not only the daemon's log), and status
/// shows the re-creation hold; a forged copy raises nothing of the kind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_oops_is_an_operator_alert_and_a_hold_in_status() {
    let dir = tempfile::tempdir().unwrap();
    let d = LoopTest::new(config(dir.path(), false)).start();
    let cfg = d.cfg.clone();
    d.status().await;
    let oops = "RIP: 0010:iser_conn_terminate+0x1c/0x90 [ib_iser]";
    // Facility 1 (user): written into /dev/kmsg by a process.
    let forged =
        iser_guard::core::kmsg::Record::parse(format!("12,9,90,-;{oops}").as_bytes()).unwrap();
    d.feed(forged);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        !d.doubles
            .alerts
            .alerts()
            .iter()
            .any(|a| a.what.starts_with("kernel bug:")),
        "{:#?}",
        d.doubles.alerts.alerts()
    );
    // Facility 0, level 4: the kernel's own register dump line.
    let rec =
        iser_guard::core::kmsg::Record::parse(format!("4,10,100,-;{oops}").as_bytes()).unwrap();
    d.feed(rec);
    let alerts = alerts_once(&d.doubles.alerts, |a| a.what.starts_with("kernel bug:")).await;
    let a = alerts
        .iter()
        .find(|a| a.what.starts_with("kernel bug:"))
        .unwrap_or_else(|| panic!("{alerts:#?}"));
    assert_eq!(a.severity, cfg.alerts.severity_operator);
    assert!(a.what.contains("ib_iser"), "{a:?}");
    assert!(a.what.contains("iser_conn_terminate"), "{a:?}");
    let st = d.status().await;
    let bugs = st["detail"]["daemon"]["kernel_bugs"].to_string();
    assert!(bugs.contains("kernel oops in ib_iser"), "{st:#}");
    let holds = st["detail"]["ports"][0]["holds"].to_string();
    assert!(holds.contains("kernel-bug"), "{st:#}");
    d.stop().await;
}

/// `iser-guard reload` (what the unit's ExecReload runs) gets the daemon's verdict: a
/// refused file is an error with its problem and exit 78, and the old file stays in force.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_over_the_control_socket_reports_a_refused_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config_text(dir.path(), false, "")).unwrap();
    let d = LoopTest::new(config(dir.path(), false))
        .reload_from(file.clone())
        .start();
    d.status().await;
    let reload = |path: PathBuf| {
        tokio::task::spawn_blocking(move || {
            iser_guard::io::control::request(
                &path,
                &Request::Reload,
                Duration::from_secs(5),
                |_| {},
            )
        })
    };
    let sock = d.cfg.paths.control_socket.clone();
    match reload(sock.clone()).await.unwrap() {
        Ok(Reply::Done {
            ok: true,
            exit_code: 0,
            message,
            ..
        }) => {
            assert!(message.contains("reloaded"), "{message}")
        }
        other => panic!("a valid file was not reloaded: {other:?}"),
    }
    let bad = config_text(dir.path(), false, "")
        .replace("[recovery]\n", "[recovery]\nmax-attempts = 0\n");
    std::fs::write(&file, &bad).unwrap();
    match reload(sock.clone()).await.unwrap() {
        Ok(Reply::Done {
            ok: false,
            exit_code,
            message,
            ..
        }) => {
            assert_eq!(exit_code, ExitStatus::Config.code());
            assert!(message.contains("max-attempts"), "{message}");
            assert!(message.contains("kept"), "{message}");
        }
        other => panic!("a refused file was reported as {other:?}"),
    }
    // Still serving, on the configuration it had.
    d.status().await;
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}

/// The alerts sent so far, once one matches `wanted` (or after 5 s): the alert thread
/// sends them after the loop decided, so they may arrive after a status answer.
async fn alerts_once(
    sink: &RecordingSink,
    wanted: impl Fn(&AlertMessage) -> bool,
) -> Vec<AlertMessage> {
    let end = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let alerts = sink.alerts();
        if alerts.iter().any(&wanted) || std::time::Instant::now() >= end {
            return alerts;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn kept_files(dir: &std::path::Path, what: &str) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("engine-journal.json.{what}-")))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_journal_is_kept_aside_and_the_daemon_runs_in_safe_mode() {
    let dir = tempfile::tempdir().unwrap();
    let corrupt = b"{\"version\": 1, \"ports\": [tru".to_vec();
    std::fs::write(Journal::new(dir.path()).path(), &corrupt).unwrap();
    let d = LoopTest::new(config(dir.path(), false)).start();
    let cfg = d.cfg.clone();
    let st = d.status().await;
    // Running, and it says so.
    let message = st["message"].as_str().unwrap();
    assert!(message.contains("safe mode"), "{st:#}");
    let safe = &st["detail"]["safe_mode"];
    let kept = PathBuf::from(safe["journal_kept"].as_str().unwrap());
    assert!(
        safe["problem"].as_str().unwrap().contains("corrupt"),
        "{st:#}"
    );
    // The file is kept, byte for byte, under a UTC-stamped name.
    assert_eq!(kept_files(dir.path(), "corrupt"), vec![kept.clone()]);
    assert_eq!(std::fs::read(&kept).unwrap(), corrupt);
    // One operator-severity alert names the kept file.
    let alerts = alerts_once(&d.doubles.alerts, |a| a.what.contains("safe mode")).await;
    let a = alerts
        .iter()
        .find(|a| a.what.contains("safe mode"))
        .unwrap_or_else(|| panic!("{alerts:#?}"));
    assert_eq!(a.severity, cfg.alerts.severity_operator);
    assert!(a.message().contains(&kept.display().to_string()), "{a:?}");
    // Issue item: a corrupt journal was called "a newer release's journal".
    assert!(!a.message().contains("newer release"), "{}", a.message());
    assert!(a.todo.contains("a damaged journal"), "{}", a.todo);
    // The first scan (one port, one session from iscsiadm) lifts the hold.
    let end = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let st = d.status().await;
        if st["detail"]["safe_mode"]["held_until_first_scan"] == false {
            break;
        }
        assert!(std::time::Instant::now() < end, "hold never lifted: {st:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Issue item: `status` kept showing SAFE MODE after the daemon logged that it ended.
    let socket = cfg.paths.control_socket.clone();
    let view = tokio::task::spawn_blocking(move || {
        let side = iser_guard::cli::daemon_view::query(&socket);
        iser_guard::cli::daemon_view::render(&side, iser_guard::cli::term::Style::plain())
    })
    .await
    .unwrap();
    assert!(!view.contains("SAFE MODE"), "{view}");
    assert!(
        view.contains("safe mode ended at the first complete scan"),
        "{view}"
    );
    assert!(view.contains(&kept.display().to_string()), "{view}");
    let st = d.status().await;
    assert!(
        !st["message"].as_str().unwrap().contains("held until"),
        "{st:#}"
    );
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
    // A fresh journal was written at shutdown; the kept one is untouched.
    assert!(Journal::new(dir.path()).load().unwrap().is_some());
    assert_eq!(std::fs::read(&kept).unwrap(), corrupt);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_journal_is_kept_aside_and_its_version_named() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        Journal::new(dir.path()).path(),
        br#"{"version": 999, "ports": []}"#,
    )
    .unwrap();
    let d = LoopTest::new(config(dir.path(), false)).start();
    let st = d.status().await;
    let problem = st["detail"]["safe_mode"]["problem"].as_str().unwrap();
    assert!(problem.contains("format version 999"), "{st:#}");
    assert_eq!(kept_files(dir.path(), "v999").len(), 1);
    let alerts = alerts_once(&d.doubles.alerts, |a| {
        a.message().contains("format version 999")
    })
    .await;
    assert!(
        alerts
            .iter()
            .any(|a| a.message().contains("format version 999")
                && a.message().contains("engine-journal.json.v999-")
                && a.todo.contains("a newer release's journal")),
        "{alerts:#?}"
    );
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}

/// A setting the running daemon can take over only when it starts (its control socket) is
/// refused by reload with that reason; the daemon keeps answering on the socket it has.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_refuses_a_new_control_socket_with_the_reason() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("config.toml");
    std::fs::write(&file, config_text(dir.path(), false, "")).unwrap();
    let d = LoopTest::new(config(dir.path(), false))
        .reload_from(file.clone())
        .start();
    d.status().await;
    let moved = config_text(dir.path(), false, "").replace(
        &format!(
            "{:?}",
            dir.path().join("control.sock").display().to_string()
        ),
        &format!("{:?}", dir.path().join("other.sock").display().to_string()),
    );
    assert!(moved.contains("other.sock"));
    std::fs::write(&file, &moved).unwrap();
    let sock = d.cfg.paths.control_socket.clone();
    let r = tokio::task::spawn_blocking(move || {
        iser_guard::io::control::request(&sock, &Request::Reload, Duration::from_secs(5), |_| {})
    })
    .await
    .unwrap();
    match r {
        Ok(Reply::Done {
            ok: false,
            exit_code,
            message,
            ..
        }) => {
            assert_eq!(exit_code, ExitStatus::Config.code());
            assert!(message.contains("paths.control-socket"), "{message}");
            assert!(message.contains("restart"), "{message}");
        }
        other => panic!("a new control socket was reported as {other:?}"),
    }
    // Still on the socket it had.
    d.status().await;
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
}

/// A re-creation step blocked in the kernel (issue 22): the executor reports it at once and
/// its thread keeps waiting; the daemon answers status meanwhile, shows the port in
/// RecreationBlocked, alerts with the task and its stack, refuses an operator re-creation of
/// the device, and resumes verification when the step returns, with no second writer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreation_blocked_in_the_kernel_leaves_the_daemon_answering_and_resumes_when_it_returns(
) {
    use iser_guard::core::recovery::{BlockedStep, TaskId};
    let dir = tempfile::tempdir().unwrap();
    let d = LoopTest::new(config(dir.path(), false))
        .portal_reachable(50)
        .start();
    let release = d.doubles.resetter.block_next(BlockedStep {
        step: "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime"
            .into(),
        blocked_ms: 32_000,
        task: "devlink (pid 4242) in D (uninterruptible sleep), waiting in ib_uverbs_remove_one"
            .into(),
        uninterruptible: true,
        stack: vec![
            "ib_uverbs_remove_one+0x9c/0x1c0 [ib_uverbs]".into(),
            "__ib_unregister_device+0x5c/0x110 [ib_core]".into(),
        ],
        id: TaskId {
            pid: 4242,
            tid: None,
            start_time: Some(1),
        },
    });
    d.host.set("FAILED");
    d.feed(record(0, STUCK_GSI));
    // Blocked: the status shows it while the executor thread still waits.
    let end = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let st = d.status().await;
        if st["detail"]["ports"][0]["phase"] == "RecreationBlocked" {
            let text = st.to_string();
            assert!(
                text.contains("has been blocked in the kernel for"),
                "{st:#}"
            );
            assert_eq!(
                st["detail"]["devices"][0]["last_recreation"]
                    .as_str()
                    .map(|s| s.starts_with("attempt 1 blocked in the kernel")),
                Some(true),
                "{st:#}"
            );
            break;
        }
        assert!(std::time::Instant::now() < end, "never blocked: {st:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let alerts = alerts_once(&d.doubles.alerts, |a| {
        a.what
            .contains("re-creation of rocep2s0f0 has been blocked in the kernel for")
    })
    .await;
    let a = alerts
        .iter()
        .find(|a| a.what.contains("has been blocked in the kernel"))
        .unwrap();
    assert!(a.why.contains("ib_uverbs_remove_one"), "{a:?}");
    assert!(a.why.contains("uninterruptible sleep"), "{a:?}");
    // A second writer is refused while it is blocked (exit 75: try again later).
    let path = d.cfg.paths.control_socket.clone();
    let done = tokio::task::spawn_blocking(move || {
        iser_guard::io::control::request(
            &path,
            &Request::Run {
                command: iser_guard::core::recovery::OperatorCommand::Recover {
                    device: "rocep2s0f0".into(),
                    port: None,
                },
            },
            Duration::from_secs(10),
            |_| {},
        )
    })
    .await
    .unwrap()
    .unwrap();
    let Reply::Done {
        exit_code, message, ..
    } = &done
    else {
        panic!("{done:?}")
    };
    assert_eq!(*exit_code, 75, "{done:?}");
    assert!(message.contains("blocked in the kernel"), "{done:?}");
    // (The scripted resetter records a call when it answers: none has yet.)
    assert_eq!(d.doubles.resetter.calls(), vec![]);
    // The kernel lets go: the re-creation finishes and verification resumes.
    release.send(()).unwrap();
    d.host.set("LOGGED_IN");
    alerts_once(&d.doubles.alerts, |a| a.what.contains("storage is back")).await;
    let unblocked = d.doubles.alerts.alerts();
    assert!(
        unblocked
            .iter()
            .any(|a| a.what.contains("is no longer blocked")),
        "{unblocked:#?}"
    );
    assert_eq!(
        d.doubles.resetter.calls(),
        vec![("rocep2s0f0".to_string(), false)]
    );
    d.stop().await;
}

/// The verbs devices locked out by the service's sandbox (systemd resolved DeviceAllow=
/// before ib_uverbs loaded: the device cgroup answers EPERM): said in one alert and in
/// status's sources, with what it is and the restart that fixes it; never a port fault.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sandbox_lockout_of_the_verbs_devices_is_named_with_its_fix() {
    use iser_guard::io::verbs_access::{open_close, LockoutWatch};
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::create_dir_all(dev.join("infiniband")).unwrap();
    for n in ["uverbs0", "rdma_cm"] {
        std::fs::write(dev.join("infiniband").join(n), "").unwrap();
    }
    // The device cgroup's answer: the files exist, the open is denied.
    let denied = std::sync::Arc::new(|p: &std::path::Path| {
        open_close(p)?;
        Err(nix::errno::Errno::EPERM)
    });
    let d = LoopTest::new(config(dir.path(), false))
        .verbs_access(LockoutWatch::with_opener(dev, denied))
        .start();
    let alerts = alerts_once(&d.doubles.alerts, |a| a.what.contains("locked out")).await;
    let lock: Vec<&AlertMessage> = alerts
        .iter()
        .filter(|a| a.what.contains("locked out"))
        .collect();
    assert_eq!(lock.len(), 1, "{alerts:#?}");
    assert!(lock[0].what.contains("not a port fault"), "{:?}", lock[0]);
    for needle in ["DeviceAllow=", "uverbs0", "Operation not permitted"] {
        assert!(lock[0].why.contains(needle), "{needle}: {:?}", lock[0]);
    }
    assert!(
        lock[0].todo.contains("systemctl restart iser-guard"),
        "{:?}",
        lock[0]
    );
    let st = d.status().await;
    let sources = st["detail"]["daemon"]["sources"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let verbs = sources
        .iter()
        .find(|s| s["name"] == "verbs-devices")
        .unwrap_or_else(|| panic!("{st:#}"));
    assert_eq!(verbs["state"], "failing", "{st:#}");
    assert!(
        verbs["last_error"]
            .as_str()
            .is_some_and(|e| e.contains("systemctl restart iser-guard")),
        "{st:#}"
    );
    // Not a port fault: the port stays healthy.
    assert_eq!(st["detail"]["ports"][0]["phase"], "Healthy", "{st:#}");
    d.stop().await;
}

/// The modules loaded after the daemon started: `/dev/infiniband` gains `uverbs0` and
/// `rdma_cm`, which the device cgroup denies. Seen at the next session poll, said once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbs_devices_that_appear_locked_out_after_the_start_are_said_once() {
    use iser_guard::io::verbs_access::{open_close, LockoutWatch};
    let dir = tempfile::tempdir().unwrap();
    let dev = dir.path().join("dev");
    std::fs::create_dir_all(dev.join("infiniband")).unwrap();
    let denied = std::sync::Arc::new(|p: &std::path::Path| {
        open_close(p)?;
        Err(nix::errno::Errno::EPERM)
    });
    let d = LoopTest::new(config(dir.path(), false))
        .verbs_access(LockoutWatch::with_opener(dev.clone(), denied))
        .start();
    let st = d.status().await;
    let ok = |st: &serde_json::Value, state: &str| {
        st["detail"]["daemon"]["sources"]
            .as_array()
            .is_some_and(|a| {
                a.iter()
                    .any(|s| s["name"] == "verbs-devices" && s["state"] == state)
            })
    };
    assert!(ok(&st, "ok"), "{st:#}");
    for n in ["uverbs0", "rdma_cm"] {
        std::fs::write(dev.join("infiniband").join(n), "").unwrap();
    }
    let alerts = alerts_once(&d.doubles.alerts, |a| a.what.contains("locked out")).await;
    assert!(
        alerts.iter().any(|a| a.what.contains("locked out")),
        "{alerts:#?}"
    );
    let st = d.status().await;
    assert!(ok(&st, "failing"), "{st:#}");
    // Another device node appears (a second port's uverbs1): checked again, still locked
    // out, not said again.
    std::fs::write(dev.join("infiniband").join("uverbs1"), "").unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let st = d.status().await;
        if st["detail"]["daemon"]["sources"]
            .to_string()
            .contains("uverbs1")
        {
            break;
        }
        assert!(std::time::Instant::now() < end, "{st:#}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let n = d
        .doubles
        .alerts
        .alerts()
        .iter()
        .filter(|a| a.what.contains("locked out"))
        .count();
    assert_eq!(n, 1);
    d.stop().await;
}

/// A re-creation whose devlink step failed before another method worked: the daemon's alert
/// names the failed step, its error and the method that worked, and so does the journal's
/// incident (what `history` shows).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recreation_after_a_failed_devlink_step_names_it_in_the_alert_and_the_journal() {
    use iser_guard::core::reset_plan::{DevlinkParam, ResetMethod};
    use iser_guard::io::reset::{Recreated, ResetMethodFailure, ResetOutcome};
    let dir = tempfile::tempdir().unwrap();
    let d = LoopTest::new(config(dir.path(), false))
        .portal_reachable(50)
        .without_control()
        .start();
    let refused = "`devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode \
                   runtime` exited with code 1: Error: devlink: Operation not supported";
    d.doubles
        .resetter
        .push(Ok(ResetOutcome::Recreated(Recreated {
            method: ResetMethod::AuxRebind {
                device: "ice.roce.0".into(),
                driver: "irdma".into(),
            },
            old_name: "rocep2s0f0".into(),
            new_name: "rocep2s0f0".into(),
            took_ms: 900,
            failed_before: vec![ResetMethodFailure {
                method: ResetMethod::DevlinkToggle {
                    handle: "pci/0000:02:00.0".into(),
                    param: DevlinkParam::EnableRoce,
                },
                error: refused.into(),
            }],
            brought_back: false,
            mode_restored: None,
        })));
    d.host.set("FAILED");
    d.feed(record(0, STUCK_GSI));
    let wanted = |a: &AlertMessage| a.what.contains("was re-created by");
    let alerts = alerts_once(&d.doubles.alerts, wanted).await;
    let alert = alerts
        .iter()
        .find(|a| wanted(a))
        .unwrap_or_else(|| panic!("no fallback alert: {alerts:#?}"));
    assert_eq!(
        alert.what,
        "rocep2s0f0 was re-created by unbind/bind auxiliary device ice.roce.0 (driver irdma) \
         after toggle devlink parameter enable_roce of pci/0000:02:00.0 failed"
    );
    assert!(alert.why.contains(refused), "{alert:#?}");
    d.host.set("LOGGED_IN");
    wait_for(20, "storage never back", || {
        d.doubles
            .alerts
            .alerts()
            .iter()
            .any(|a| a.what.contains("storage is back"))
    })
    .await;
    assert_eq!(d.stop().await, ExitStatus::Ok.code());
    let (_, incidents) = Journal::new(dir.path())
        .load_with_incidents()
        .unwrap()
        .expect("journal written");
    let how = incidents[0].recreation.as_deref().unwrap_or_default();
    assert!(
        how.contains("by unbind/bind auxiliary device ice.roce.0 (driver irdma)")
            && how.contains(refused),
        "{incidents:#?}"
    );
}
