//! The daemon's metrics after a simulated field incident: the daemon loop (`daemon::run`)
//! driven through its injected dependencies (a kernel log fed by the test, one E810 port, a
//! stateful iscsiadm double, the scripted prober and resetter), with `metrics.enabled`, the
//! textfile in a temporary directory and the loopback endpoint on. The exposition is read
//! back over HTTP during the run and from the textfile after the stop, parsed, and checked
//! sample by sample; `promtool check metrics` then checks the format.

#[path = "support/promtool.rs"]
mod promtool;

use std::collections::BTreeMap;
use std::time::Duration;

use iser_guard::config::Config;
use iser_guard::core::kmsg::Record;
use iser_guard::io::kmsg::KmsgEvent;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

#[path = "support/daemon_loop.rs"]
mod daemon_loop;
use daemon_loop::LoopTest;

/// A free loopback port (bound, then released for the daemon to bind).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn config(dir: &std::path::Path, port: u16) -> Config {
    let text = format!(
        "[paths]\nstate-dir = {:?}\ncontrol-socket = {:?}\n[poll]\niscsi = 0.2\nprobe = 0.1\n\
         [devices]\nallow = [\"rocep2s0f0\"]\n[recovery]\nprobe-successes = 2\n\
         probe-timeout = 0.1\niscsid-grace = 0.2\n\
         [metrics]\nenabled = true\ntextfile = {:?}\ninterval = 1\nlisten = \"127.0.0.1:{port}\"\n",
        dir.display().to_string(),
        dir.join("control.sock").display().to_string(),
        dir.join("textfile/iser-guard.prom").display().to_string(),
    );
    iser_guard::config::parse_str(&text).unwrap()
}

/// `GET path` on the endpoint: the status line, the headers and the body.
async fn get(port: u16, path: &str) -> std::io::Result<(String, String, String)> {
    let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port)).await?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await?;
    let mut all = String::new();
    s.read_to_string(&mut all).await?;
    let (head, body) = all.split_once("\r\n\r\n").unwrap_or((&all, ""));
    let (status, headers) = head.split_once("\r\n").unwrap_or((head, ""));
    Ok((status.to_string(), headers.to_string(), body.to_string()))
}

/// Samples of a text exposition: `name{labels}` (labels sorted) → value.
fn samples(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect(line);
        let key = match series.split_once('{') {
            None => series.to_string(),
            Some((name, labels)) => {
                let mut l: Vec<&str> = labels.trim_end_matches('}').split(',').collect();
                l.sort_unstable();
                format!("{name}{{{}}}", l.join(","))
            }
        };
        let v = match value {
            "+Inf" => f64::INFINITY,
            v => v.parse().expect(line),
        };
        out.insert(key, v);
    }
    out
}

fn value(s: &BTreeMap<String, f64>, key: &str) -> f64 {
    *s.get(key).unwrap_or_else(|| {
        panic!(
            "no sample {key}; have:\n{}",
            s.keys().cloned().collect::<Vec<_>>().join("\n")
        )
    })
}

/// Polls `cond` (every 20 ms, at most 30 s: a liveness bound for a loaded machine) until it
/// holds; what the test asserts next is what it waited for, never a fixed delay.
async fn wait_until<F: std::future::Future<Output = bool>>(what: &str, cond: impl Fn() -> F) {
    let end = std::time::Instant::now() + Duration::from_secs(30);
    while !cond().await {
        assert!(
            std::time::Instant::now() < end,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_simulated_incident_moves_the_counters_and_observes_the_recovery_time() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let cfg = config(dir.path(), port);
    let textfile = cfg.metrics.textfile.clone();
    let d = LoopTest::new(cfg.clone())
        .portal_reachable(50)
        .without_control()
        .start();

    // The endpoint answers on loopback from the start.
    wait_until("the endpoint", || async {
        get(port, "/metrics").await.is_ok()
    })
    .await;
    let (status, headers, body) = get(port, "/metrics").await.unwrap();
    assert_eq!(status, "HTTP/1.1 200 OK");
    assert!(
        headers.contains("Content-Type: text/plain; version=0.0.4"),
        "{headers}"
    );
    assert!(body.contains("iser_guard_build_info{version=\""), "{body}");
    let (status, _, _) = get(port, "/").await.unwrap();
    assert_eq!(status, "HTTP/1.1 404 Not Found");

    // The incident: a forged record (ignored), then the kernel's own stuck-GSI record while
    // the session is FAILED; the target answers, the device is re-created, iscsid logs the
    // session back in.
    let line =
        "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";
    let rec = |facility: u32| {
        Record::parse(format!("{},10,100,-;{line}", facility * 8 + 3).as_bytes()).unwrap()
    };
    d.log.send(KmsgEvent::Record(rec(1))).unwrap();
    d.log
        .send(KmsgEvent::Record(
            Record::parse(b"6,11,101,-;e1000e: eth0 NIC Link is Up").unwrap(),
        ))
        .unwrap();
    // Both read before the session fails (the endpoint counts each record as it is read).
    wait_until("the first two records to be counted", || async {
        get(port, "/metrics").await.is_ok_and(|(_, _, body)| {
            samples(&body)
                .get("iser_guard_kmsg_records_read_total")
                .is_some_and(|v| *v >= 2.0)
        })
    })
    .await;
    d.host.set("FAILED");
    d.log.send(KmsgEvent::Record(rec(0))).unwrap();
    d.log
        .send(KmsgEvent::Lost {
            count: Some(7),
            next_seq: 20,
            overrun: true,
        })
        .unwrap();
    wait_until("the re-creation", || async {
        !d.doubles.resetter.calls().is_empty()
    })
    .await;
    d.host.set("LOGGED_IN");
    wait_until("the 'storage is back' alert", || async {
        d.doubles
            .alerts
            .alerts()
            .iter()
            .any(|a| a.what.contains("storage is back"))
    })
    .await;
    // A fatal device error of another adapter, in mlx5's health format (health.c,
    // mlx5_core_err with its "func:line:(pid N): "), twice: one alert naming the device and
    // what mlx5_core does about it; both counted; nothing is re-created for it.
    let fatal = "mlx5_core 0000:08:00.0: poll_health:800:(pid 0): Fatal error 1 detected";
    for seq in [30, 31] {
        d.log
            .send(KmsgEvent::Record(
                Record::parse(format!("2,{seq},3000,-;{fatal}").as_bytes()).unwrap(),
            ))
            .unwrap();
    }
    wait_until("the fatal device error alert", || async {
        d.doubles
            .alerts
            .alerts()
            .iter()
            .any(|a| a.what.contains("fatal device error on 0000:08:00.0"))
    })
    .await;
    // The alert comes with the first of the two records; the second is counted when it is
    // read, which may be after the alert (the final textfile below asserts both).
    wait_until("both fatal records to be counted", || async {
        get(port, "/metrics").await.is_ok_and(|(_, _, body)| {
            samples(&body)
                .get("iser_guard_kernel_events_total{device=\"0000:08:00.0\",level=\"crit\",subsystem=\"nic\"}")
                .is_some_and(|v| *v >= 2.0)
        })
    })
    .await;
    // The textfile is rewritten every second while the daemon runs: the recovery shows up
    // in it without a stop.
    wait_until("the recovery in the running textfile", || async {
        std::fs::read_to_string(&textfile)
            .is_ok_and(|t| t.contains("iser_guard_recoveries_started_total"))
    })
    .await;
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&textfile).unwrap().permissions(),
    ) & 0o777;
    assert_eq!(mode, 0o644, "node_exporter must be able to read it");

    let fatal_alerts: Vec<_> = d
        .doubles
        .alerts
        .alerts()
        .into_iter()
        .filter(|a| a.what.contains("fatal device error"))
        .collect();
    assert_eq!(fatal_alerts.len(), 1, "{fatal_alerts:#?}");
    assert!(
        fatal_alerts[0].todo.contains("health recovery"),
        "{fatal_alerts:#?}"
    );
    assert_eq!(d.doubles.resetter.calls().len(), 1);
    assert_eq!(d.stop().await, 0);

    // The final textfile, written at shutdown.
    let text = std::fs::read_to_string(&textfile).unwrap();
    let s = samples(&text);
    assert!(value(&s, "iser_guard_kmsg_records_read_total") >= 3.0);
    assert_eq!(
        value(
            &s,
            "iser_guard_kmsg_records_recognised_total{kind=\"stuck_qp_transition\"}"
        ),
        2.0
    );
    assert_eq!(value(&s, "iser_guard_kmsg_records_untrusted_total"), 1.0);
    // The subsystem layer counts every record of the RDMA storage stack, by subsystem,
    // device and level: the field line (ice's prefix, forged and real) and the fatal one.
    assert_eq!(
        value(
            &s,
            "iser_guard_kernel_events_total{device=\"rocep2s0f0\",level=\"err\",subsystem=\"nic\"}"
        ),
        2.0
    );
    assert_eq!(
        value(
            &s,
            "iser_guard_kernel_events_total{device=\"0000:08:00.0\",level=\"crit\",subsystem=\"nic\"}"
        ),
        2.0
    );
    assert!(
        text.contains("iser_guard_alerts_total{kind=\"device-fatal\""),
        "{text}"
    );
    assert_eq!(value(&s, "iser_guard_kmsg_records_lost_total"), 7.0);
    assert_eq!(value(&s, "iser_guard_kmsg_loss_events_total"), 1.0);
    assert_eq!(
        value(
            &s,
            "iser_guard_recoveries_started_total{action=\"recreate_device\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "iser_guard_recoveries_succeeded_total{action=\"recreate_device\",method=\"aux-rebind\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "iser_guard_actions_started_total{action=\"recreate_device\"}"
        ),
        1.0
    );
    // One episode, from the stuck-GSI fault to Healthy: observed once, a few seconds long.
    assert_eq!(
        value(
            &s,
            "iser_guard_fault_to_recovery_seconds_count{fault=\"gsi_stuck\"}"
        ),
        1.0
    );
    let took = value(
        &s,
        "iser_guard_fault_to_recovery_seconds_sum{fault=\"gsi_stuck\"}",
    );
    assert!(took > 0.0 && took < 30.0, "{took}");
    assert_eq!(
        value(
            &s,
            "iser_guard_fault_to_recovery_seconds_bucket{fault=\"gsi_stuck\",le=\"+Inf\"}"
        ),
        1.0
    );
    assert!(
        value(
            &s,
            "iser_guard_alerts_total{kind=\"recreate\",severity=\"warning\"}"
        ) >= 1.0,
        "{text}"
    );
    assert_eq!(
        value(
            &s,
            "iser_guard_port_phase{device=\"rocep2s0f0\",phase=\"Healthy\",port=\"1\"}"
        ),
        1.0
    );
    assert_eq!(
        value(
            &s,
            "iser_guard_port_phase{device=\"rocep2s0f0\",phase=\"Quarantined\",port=\"1\"}"
        ),
        0.0
    );
    assert_eq!(value(&s, "iser_guard_sessions{state=\"LOGGED_IN\"}"), 1.0);
    assert!(value(&s, "iser_guard_iscsiadm_listings_total{result=\"ok\"}") >= 2.0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64();
    for source in ["iscsiadm", "kmsg"] {
        let t = value(
            &s,
            &format!("iser_guard_last_success_timestamp_seconds{{source=\"{source}\"}}"),
        );
        assert!((now - t).abs() < 60.0, "{source}: {t} vs {now}");
    }
    assert_eq!(value(&s, "iser_guard_source_up{source=\"netlink\"}"), 0.0);
    assert_eq!(value(&s, "iser_guard_source_up{source=\"kmsg\"}"), 1.0);
    assert_eq!(value(&s, "iser_guard_paused"), 0.0);

    // The format, as Prometheus's own tool reads it.
    promtool::check_metrics(&text);
    // Kept for the dashboard and rule tests (tests/monitoring.rs reads the same names).
    assert!(text.contains("# TYPE iser_guard_fault_to_recovery_seconds histogram"));
}

#[tokio::test]
async fn the_endpoint_refuses_a_non_loopback_bind() {
    let e = iser_guard::metrics::http::bind("0.0.0.0:0".parse().unwrap())
        .await
        .unwrap_err();
    assert!(e.to_string().contains("not a loopback address"), "{e}");
    // And the configuration says so with its key.
    let problems =
        iser_guard::config::parse_str("[metrics]\nenabled = true\nlisten = \"192.0.2.1:9464\"\n")
            .unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p.key == "metrics.listen" && p.message.contains("loopback")),
        "{problems:?}"
    );
}
