//! `status`, `events` and `history` on the real binary against a running daemon: the
//! daemon's loop runs in this test process on doubles (kernel log fed by the test, one RDMA
//! port, scripted iscsiadm, prober and resetter) with its real control socket, the fake host
//! of tests/support/fake_host.rs gives the CLI's kernel view a sysfs tree, and the CLI is
//! the `iser-guard` binary. Nothing here touches /dev/kmsg or the host's RDMA devices.
//!
//! Also: no daemon (socket absent) and a daemon whose answers are malformed or oversized are
//! stated plainly, and never change `status`'s exit code.

#[path = "support/fake_host.rs"]
mod fake_host;

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_host::FakeHost;
use iser_guard::config::Config;
use iser_guard::core::kmsg::Record;
use iser_guard::io::control::ControlServer;
use iser_guard::io::kmsg::KmsgEvent;

#[path = "support/daemon_loop.rs"]
mod daemon_loop;
use daemon_loop::{Daemon, LoopTest};

/// The loop on doubles with its control socket, the portal answering.
fn start(cfg: &Config) -> Daemon {
    LoopTest::new(cfg.clone()).portal_reachable(200).start()
}

fn cli(config: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(config)
        .args(args)
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
    out
}

async fn cli_async(config: &Path, args: &[&str]) -> Output {
    let config = config.to_path_buf();
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    tokio::task::spawn_blocking(move || {
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&config, &a)
    })
    .await
    .unwrap()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&o.stdout)))
}

fn port_of(status: &serde_json::Value) -> Option<serde_json::Value> {
    status["daemon"]["snapshot"]["ports"]
        .as_array()?
        .iter()
        .find(|p| p["port"] == "rocep2s0f0/1")
        .cloned()
}

/// Polls `status --json` until `cond` holds on it.
async fn status_until(
    config: &Path,
    what: &str,
    cond: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let end = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let st = json(&cli_async(config, &["status", "--json"]).await);
        if cond(&st) {
            return st;
        }
        assert!(std::time::Instant::now() < end, "never {what}: {st:#}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Polls `cond` (every 20 ms, at most 30 s: a liveness bound for a loaded machine) until it
/// holds; what a test asserts next is what it waited for, never a fixed delay.
async fn wait_until(what: &str, cond: impl Fn() -> bool) {
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while !cond() {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn setup() -> (FakeHost, PathBuf, Config) {
    let h = FakeHost::new();
    let config = h.config("");
    let cfg = iser_guard::config::load_or_default(Some(&config))
        .unwrap()
        .0;
    (h, config, cfg)
}

const FIELD: &str =
    "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_events_and_history_against_a_running_daemon() {
    let (_h, config, cfg) = setup();
    // No daemon yet: said plainly, and the exit code is the kernel view's.
    let alone = cli_async(&config, &["status"]).await;
    let text = String::from_utf8_lossy(&alone.stdout).to_string();
    assert!(text.contains("Daemon: not running"), "{text}");
    let kernel_only_code = alone.status.code();
    assert!(matches!(kernel_only_code, Some(0 | 1)), "{alone:?}");
    let st = json(&cli_async(&config, &["status", "--json"]).await);
    assert_eq!(st["daemon"]["state"], "not-running", "{st:#}");
    assert!(
        st["devices"].is_array(),
        "the kernel view is still there: {st:#}"
    );

    let d = start(&cfg);
    let st = status_until(&config, "healthy with its session", |st| {
        port_of(st).is_some_and(|p| p["phase"] == "Healthy" && p["sessions"][0]["healthy"] == true)
    })
    .await;
    let snap = &st["daemon"]["snapshot"];
    assert_eq!(snap["format"], 1);
    assert_eq!(snap["daemon"]["version"], env!("CARGO_PKG_VERSION"));
    let p = port_of(&st).unwrap();
    assert!(
        p["sessions"][0]["placed_by"]
            .as_str()
            .is_some_and(|s| !s.is_empty()),
        "the evidence that placed the session: {p:#}"
    );
    let sources = snap["daemon"]["sources"].as_array().unwrap();
    let source = |n: &str| sources.iter().find(|s| s["name"] == n).unwrap().clone();
    assert_eq!(source("iscsiadm")["state"], "ok", "{sources:?}");
    assert!(source("iscsiadm")["last_ok"]["unix_ms"].as_u64().is_some());
    assert_eq!(source("rdma-netlink")["state"], "failing", "{sources:?}");

    // Text, piped: the engine's view next to the kernel's, no escape codes.
    let out = cli_async(&config, &["status"]).await;
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("Daemon (engine view)"), "{text}");
    assert!(
        text.contains("rocep2s0f0/1") && text.contains("Healthy"),
        "{text}"
    );
    assert!(text.contains("placed by"), "{text}");
    assert!(!text.contains('\x1b'), "no colour in a pipe: {text:?}");
    assert_eq!(
        out.status.code(),
        kernel_only_code,
        "the daemon changes no exit code"
    );

    // An operator pause and resume put two events in the daemon's ring: a follower gets the
    // ring's last few events first, so it shows it has subscribed by printing them.
    for cmd in ["pause", "resume"] {
        let out = cli_async(&config, &[cmd]).await;
        assert_eq!(out.status.code(), Some(0), "{out:?}");
    }

    // A follower from before the incident.
    let mut follower = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(&config)
        .args(["events", "--follow", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let followed: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let reader = {
        let followed = followed.clone();
        let stdout = follower.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let v: serde_json::Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("follow line not JSON ({e}): {line}"));
                followed.lock().unwrap().push(v);
            }
        })
    };
    // Subscribed once it has printed the daemon's last few events (the backlog a follower
    // gets first): from then on it is sent every new event.
    wait_until("the follower to print its backlog", || {
        followed
            .lock()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "operator" && e["message"].as_str().unwrap().contains("resume"))
    })
    .await;

    // The incident: the session fails and the kernel says QP 1 is stuck.
    d.host.set("FAILED");
    let rec = Record::parse(format!("3,10,100,-;{FIELD}").as_bytes()).unwrap();
    d.log.send(KmsgEvent::Record(rec)).unwrap();
    let st = status_until(&config, "out of Healthy", |st| {
        port_of(st).is_some_and(|p| p["phase"] != "Healthy")
    })
    .await;
    let p = port_of(&st).unwrap();
    assert!(p["why"].as_str().is_some_and(|s| !s.is_empty()), "{p:#}");
    assert!(
        p["fault"].as_str().is_some_and(|f| f.contains("GSI QP 1")),
        "{p:#}"
    );
    // The device is re-created; iscsid (the double) logs the session in again.
    wait_until("the re-creation", || !d.doubles.resetter.calls().is_empty()).await;
    d.host.set("LOGGED_IN");
    status_until(&config, "healthy again", |st| {
        port_of(st).is_some_and(|p| p["phase"] == "Healthy")
    })
    .await;

    // events: the transitions and the decision, with their reasons.
    let ev = json(&cli_async(&config, &["events", "--json"]).await);
    assert_eq!(ev["daemon"], "running");
    let events = ev["events"].as_array().unwrap();
    let left_healthy = events
        .iter()
        .find(|e| e["kind"] == "transition" && e["from"] == "Healthy")
        .unwrap_or_else(|| panic!("{ev:#}"));
    assert_eq!(left_healthy["port"], "rocep2s0f0/1");
    assert!(left_healthy["reason"]
        .as_str()
        .is_some_and(|r| !r.is_empty()));
    let decided = events
        .iter()
        .find(|e| e["kind"] == "decided" && e["message"].as_str().unwrap().contains("re-create"))
        .unwrap_or_else(|| panic!("{ev:#}"));
    assert!(
        decided["allowed_by"]
            .as_str()
            .unwrap()
            .contains("rocep2s0f0"),
        "{decided:#}"
    );
    assert!(events
        .iter()
        .any(|e| e["kind"] == "transition" && e["to"] == "Healthy"));
    assert_eq!(ev["ring"]["dropped"], 0);
    let text = String::from_utf8_lossy(&cli_async(&config, &["events"]).await.stdout).to_string();
    assert!(text.contains("Healthy -> Faulted"), "{text}");
    assert!(text.contains("why: "), "{text}");
    // The ring holds everything since the daemon started: nothing from the journal twice.
    assert!(!text.contains("journal "), "{text}");
    assert!(ev["journal"].as_array().unwrap().is_empty(), "{ev:#}");
    // --since: a minute back has them all (and any the live daemon entered in between: the
    // two listings are not one moment, 25 against 23 on a loaded machine); a time to come
    // has none.
    let recent = json(&cli_async(&config, &["events", "--since", "1m", "--json"]).await);
    let recent_seqs: Vec<u64> = recent["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    for e in events {
        let seq = e["seq"].as_u64().unwrap();
        assert!(
            recent_seqs.contains(&seq),
            "{seq} missing from --since 1m: {recent:#}"
        );
    }
    let bad = cli_async(&config, &["events", "--since", "soon"]).await;
    assert_eq!(bad.status.code(), Some(64));

    // Following with --since: what the ring holds since then, then new ones, each once.
    let mut late = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(&config)
        .args(["events", "--follow", "--since", "5m", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let late_out = late.stdout.take().unwrap();
    let late_seen: Arc<Mutex<Vec<serde_json::Value>>> = Arc::default();
    let late_reader = {
        let late_seen = late_seen.clone();
        std::thread::spawn(move || {
            for l in BufReader::new(late_out).lines().map_while(Result::ok) {
                let v = serde_json::from_str::<serde_json::Value>(&l).unwrap();
                late_seen.lock().unwrap().push(v);
            }
        })
    };
    // It has printed what the ring held since then (at least the events above) before it
    // follows: wait for those, then make a new event.
    wait_until("the late follower to print the ring since 5m", || {
        late_seen.lock().unwrap().len() >= events.len()
    })
    .await;
    // A new event while it follows (an operator request is entered in the ring): newer than
    // every event listed above (an earlier pause is among those).
    let last_listed = events
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .max()
        .unwrap();
    let new_pause = move |e: &serde_json::Value| {
        e["kind"] == "operator"
            && e["message"].as_str().unwrap().contains("pause")
            && e["seq"].as_u64() > Some(last_listed)
    };
    let _ = cli_async(&config, &["pause"]).await;
    wait_until("the late follower to print the new pause", || {
        late_seen.lock().unwrap().iter().any(new_pause)
    })
    .await;
    late.kill().unwrap();
    let _ = late.wait();
    late_reader.join().unwrap();
    let late_lines = late_seen.lock().unwrap().clone();
    let seqs: Vec<u64> = late_lines
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert!(seqs.len() >= events.len(), "{late_lines:#?}");
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "each once, in order: {seqs:?}"
    );
    assert!(late_lines.iter().any(new_pause), "{late_lines:#?}");
    let _ = cli_async(&config, &["resume"]).await;

    // The follower saw the same transitions as they happened.
    wait_until("the follower to see the recovery", || {
        followed
            .lock()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "transition" && e["to"] == "Healthy")
    })
    .await;

    // Stop the daemon: the follower is told and ends by itself.
    assert_eq!(d.stop().await, 0);
    let status = tokio::task::spawn_blocking(move || follower.wait().unwrap())
        .await
        .unwrap();
    assert!(status.success(), "{status:?}");
    reader.join().unwrap();

    // history, from the journal the daemon wrote.
    let hist = json(&cli_async(&config, &["history", "--json"]).await);
    let incidents = hist["incidents"].as_array().unwrap();
    assert_eq!(incidents.len(), 1, "{hist:#}");
    let i = &incidents[0];
    assert_eq!(i["port"], "rocep2s0f0/1");
    assert_eq!(i["outcome"], "recovered", "{i:#}");
    assert!(i["first_action"]["what"]
        .as_str()
        .unwrap()
        .contains("re-create"));
    assert_eq!(i["first_action"]["run"], true);
    assert!(i["time_to_recover_ms"].as_u64().is_some(), "{i:#}");
    assert!(i["time_to_detect_ms"].as_u64().is_some(), "{i:#}");
    let text = String::from_utf8_lossy(&cli_async(&config, &["history"]).await.stdout).to_string();
    assert!(
        text.contains("#1 rocep2s0f0/1") && text.contains("time to recover"),
        "{text}"
    );

    // events without a daemon: the journal's milestones, said as such.
    let out = cli_async(&config, &["events"]).await;
    assert_eq!(out.status.code(), Some(0));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no daemon is running"),
        "{out:?}"
    );
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("incident #1 started"), "{text}");
    assert!(text.contains("incident #1: recovered"), "{text}");
}

/// A fake daemon that answers every connection with `answer` (raw bytes).
fn fake_daemon(path: &Path, answer: Vec<u8>) -> std::thread::JoinHandle<()> {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let l = UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut line = String::new();
            let _ = BufReader::new(&s).read_line(&mut line);
            let _ = s.write_all(&answer);
        }
    })
}

#[test]
fn malformed_and_oversized_answers_are_stated_and_never_fail_status() {
    let answers: Vec<(&str, Vec<u8>)> = vec![
        ("garbage", b"this is not json\n".to_vec()),
        (
            "oversized",
            [vec![b'{'; 5 * 1024 * 1024], b"\n".to_vec()].concat(),
        ),
        (
            "newer format",
            br#"{"type":"done","ok":true,"message":"x","exit_code":0,"detail":{"format":99}}
"#
            .to_vec(),
        ),
        (
            "no detail",
            br#"{"type":"done","ok":true,"message":"rocep2s0f0/1 Healthy","exit_code":0}
"#
            .to_vec(),
        ),
        ("closed early", Vec::new()),
    ];
    let (_h, config, cfg) = setup();
    let baseline = cli(&config, &["status"]).status.code();
    for (what, answer) in answers {
        let _ = std::fs::remove_file(&cfg.paths.control_socket);
        let server = fake_daemon(&cfg.paths.control_socket, answer);
        let out = cli(&config, &["status", "--json"]);
        assert_eq!(out.status.code(), baseline, "{what}");
        let st = json(&out);
        assert_eq!(st["daemon"]["state"], "unreadable", "{what}: {st:#}");
        assert!(st["daemon"]["why"].as_str().is_some_and(|w| !w.is_empty()));
        let out = cli(&config, &["status"]);
        assert_eq!(out.status.code(), baseline, "{what}");
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(
            text.contains("its state could not be read"),
            "{what}: {text}"
        );
        drop(server);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_stops_reading_is_told_it_fell_behind_and_dropped() {
    use iser_guard::core::observe::EventKind;
    use iser_guard::core::time::Instant;
    use iser_guard::daemon::observe::{clocks, Observer, FOLLOWER_QUEUE};
    use iser_guard::io::control::{Reply, Request};

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("control.sock");
    let server = ControlServer::bind(&path).unwrap();
    let p = path.clone();
    // Connects, asks to follow, then reads nothing until the daemon has moved on.
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let client = tokio::task::spawn_blocking(move || {
        let mut s = std::os::unix::net::UnixStream::connect(&p).unwrap();
        let req = serde_json::to_string(&Request::Events {
            since_unix_ms: None,
            after_seq: None,
            follow: true,
        })
        .unwrap();
        s.write_all(format!("{req}\n").as_bytes()).unwrap();
        go_rx.recv().unwrap();
        let mut lines = Vec::new();
        for line in BufReader::new(&s).lines() {
            lines.push(line.unwrap());
        }
        lines
    });
    let (conn, req) = server.accept().await.unwrap();
    let mut obs = Observer::new(Instant::ZERO, Vec::new(), true);
    let Request::Events {
        since_unix_ms,
        after_seq,
        follow,
    } = req
    else {
        panic!("{req:?}")
    };
    obs.serve_events(
        conn,
        since_unix_ms,
        after_seq,
        follow,
        clocks(Instant::ZERO),
    );
    // Far more than the queue and the socket's buffer hold.
    for n in 0..20_000u64 {
        obs.note(
            EventKind::Daemon,
            format!("event {n} {}", "x".repeat(200)),
            clocks(Instant(n)),
        );
        if n % 1000 == 0 {
            tokio::task::yield_now().await;
        }
    }
    // The ring stayed bounded meanwhile.
    assert_eq!(obs.ring().len(), 1024);
    assert_eq!(obs.ring().dropped(), 20_000 - 1024);
    go_tx.send(()).unwrap();
    let lines = tokio::time::timeout(Duration::from_secs(20), client)
        .await
        .unwrap()
        .unwrap();
    let last: Reply = serde_json::from_str(lines.last().unwrap()).unwrap();
    match last {
        Reply::Done { ok, message, .. } => {
            assert!(!ok && message.contains("fell behind"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    // What it got before is bounded by the queue plus what the socket held.
    assert!(lines.len() < 20_000, "{}", lines.len());
    assert!(lines.len() > FOLLOWER_QUEUE / 2, "{}", lines.len());
}

#[test]
fn a_stuck_port_is_coloured_only_when_the_style_says_terminal() {
    use iser_guard::cli::status::{
        DeviceStatus, LinkStatus, NetlinkStatus, QpRow, StatusReport, StuckStatus, SysfsStatus,
    };
    use iser_guard::cli::term::Style;
    let qp = QpRow {
        ifindex: 3,
        ifname: "rocep2s0f0".into(),
        port: Some(1),
        lqpn: 1,
        rqpn: None,
        qp_type: "GSI".into(),
        state: "ERR".into(),
        rq_psn: None,
        sq_psn: None,
        path_mig_state: None,
        pdn: None,
        pid: None,
        comm: Some("ib_core".into()),
    };
    let r = StatusReport {
        netlink: NetlinkStatus {
            available: true,
            error: None,
            skipped: Vec::new(),
        },
        sysfs: SysfsStatus {
            root: "/sys".into(),
            class_present: true,
            error: None,
            skipped: Vec::new(),
        },
        devices: vec![DeviceStatus {
            ifindex: Some(3),
            ifname: "rocep2s0f0".into(),
            node_type: None,
            fw: None,
            driver: None,
            pci: None,
            aux_device: None,
            seen_by: "netlink",
            qp_error: None,
            links: vec![LinkStatus {
                ifindex: Some(3),
                ifname: "rocep2s0f0".into(),
                port: 1,
                state: Some("ACTIVE".into()),
                physical_state: Some("LINK_UP".into()),
                netdev: Some("ens1f0".into()),
                netdev_index: None,
                link_layer: None,
                qps: None,
                stuck: true,
            }],
        }],
        stuck_ports: vec![StuckStatus {
            ifindex: 3,
            ifname: "rocep2s0f0".into(),
            port: 1,
            netdev: Some("ens1f0".into()),
            qp,
            explanation: "stuck".into(),
        }],
        consumers: None,
        capabilities: None,
    };
    let plain = r.render_text();
    assert!(
        plain.contains("STUCK PORT rocep2s0f0/1") && !plain.contains('\x1b'),
        "{plain}"
    );
    assert_eq!(r.render_styled(Style::plain()), plain);
    let coloured = r.render_styled(Style::coloured());
    assert!(coloured.contains("\x1b[1;31mSTUCK\x1b[0m"), "{coloured:?}");
    assert!(
        coloured.contains("\x1b[1;31mSTUCK PORT\x1b[0m"),
        "{coloured:?}"
    );
    // The columns before the marker are where they were.
    let col = |s: &str| {
        let row = s.lines().find(|l| l.starts_with("rocep2s0f0 ")).unwrap();
        row.find("ens1f0").unwrap()
    };
    assert_eq!(col(&plain), col(&coloured));
}

/// A target away for hours is probed every `poll.probe`: two records a second. Only the
/// first answer and each change are entered in the ring (and logged at info), so the fault,
/// the alert and the transitions stay in `events` however long the outage lasts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_outage_s_probes_do_not_push_the_fault_out_of_the_ring() {
    let (_h, config, cfg) = setup();
    // The portal never answers (nothing scripted: every probe is "no answer").
    let d = LoopTest::new(cfg.clone()).start();
    status_until(&config, "healthy", |st| {
        port_of(st).is_some_and(|p| p["phase"] == "Healthy")
    })
    .await;
    d.host.set("FAILED");
    let rec = Record::parse(format!("3,10,100,-;{FIELD}").as_bytes()).unwrap();
    d.log.send(KmsgEvent::Record(rec)).unwrap();
    // Thirty unanswered probes (the test's poll.probe is 0.1 s).
    wait_until("30 probes", || d.doubles.prober.calls().len() >= 30).await;
    let ev = json(&cli_async(&config, &["events", "--json"]).await);
    let events = ev["events"].as_array().unwrap();
    let probes: Vec<&serde_json::Value> = events
        .iter()
        .filter(|e| e["message"].as_str().unwrap_or("").contains("probe portal"))
        .collect();
    assert_eq!(
        probes.len(),
        1,
        "one entry: the first answer (none of the others changed): {probes:#?}"
    );
    assert!(
        probes[0]["message"].as_str().unwrap().contains("no answer"),
        "{probes:#?}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "transition" && e["from"] == "Healthy"),
        "the fault is still in the ring: {ev:#}"
    );
    // The target answers: the change is news.
    d.doubles.prober.push(
        "192.0.2.2:3260".parse().unwrap(),
        std::iter::repeat_n(
            iser_guard::io::probe::TcpAnswer::Reachable {
                rtt: Duration::from_millis(1),
            },
            100,
        ),
    );
    wait_until("the re-creation", || !d.doubles.resetter.calls().is_empty()).await;
    let ev = json(&cli_async(&config, &["events", "--json"]).await);
    let answers: Vec<String> = ev["events"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["message"].as_str())
        .filter(|m| m.contains("probe portal"))
        .map(String::from)
        .collect();
    assert_eq!(answers.len(), 2, "{answers:#?}");
    assert!(answers[1].contains("reachable"), "{answers:#?}");
    d.host.set("LOGGED_IN");
    d.stop().await;
}
