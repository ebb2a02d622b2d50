//! The daemon's loop runs the port self-test on its executor pool, through the
//! `PortSelfTest` it was given, and reports it in status: the loop runs in this process on
//! doubles (kernel log fed by the test through a channel, one RDMA port without netlink,
//! scripted iscsiadm, prober and resetter) with its real control socket. Nothing here
//! touches /dev/kmsg or the host's RDMA devices.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use iser_guard::config::Config;
use iser_guard::core::kmsg::Record;
use iser_guard::core::selftest::{SelfTestReport, SelfTestResult, SelfTestStep};
use iser_guard::io::control::{request, Reply, Request};
use iser_guard::io::kmsg::KmsgEvent;
use iser_guard::io::selftest::PortSelfTest;

#[path = "support/daemon_loop.rs"]
mod daemon_loop;
use daemon_loop::LoopTest;

/// A self-test that blocks as a real one does (a CM connect), then passes; it records the
/// thread it ran on.
struct SlowPass {
    took: Duration,
    threads: Mutex<Vec<String>>,
}
impl PortSelfTest for SlowPass {
    fn run(&self, device: &str, port: u32, _timeout: Duration) -> SelfTestResult {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        self.threads.lock().unwrap().push(name);
        std::thread::sleep(self.took);
        SelfTestResult::Ran(SelfTestReport {
            device: device.to_string(),
            port,
            steps: vec![SelfTestStep {
                name: "cm-connect".into(),
                took: self.took,
                ok: true,
                detail: "ESTABLISHED".into(),
            }],
        })
    }
}

fn config(dir: &std::path::Path) -> Config {
    iser_guard::config::parse_str(&format!(
        "[paths]\nstate-dir = {:?}\ncontrol-socket = {:?}\n[poll]\niscsi = 0.2\nprobe = 0.1\n\
         [devices]\nallow = [\"rocep2s0f0\"]\n[recovery]\nprobe-successes = 2\n\
         probe-timeout = 0.1\niscsid-grace = 0.2\n",
        dir.display().to_string(),
        dir.join("control.sock").display().to_string(),
    ))
    .unwrap()
}

async fn status(cfg: &Config) -> (serde_json::Value, Duration) {
    let path = cfg.paths.control_socket.clone();
    let asked = Instant::now();
    let r = tokio::task::spawn_blocking(move || {
        request(&path, &Request::Status, Duration::from_secs(5), |_| {})
    })
    .await
    .unwrap();
    match r {
        Ok(Reply::Done { detail, .. }) => (detail.unwrap_or_default(), asked.elapsed()),
        other => panic!("no status: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_test_runs_on_a_worker_and_its_result_shows_in_status() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let slow = Arc::new(SlowPass {
        took: Duration::from_millis(1500),
        threads: Mutex::new(Vec::new()),
    });
    let d = LoopTest::new(cfg.clone())
        .portal_reachable(200)
        .selftest(slow.clone())
        .start();
    let end = Instant::now() + Duration::from_secs(10);
    while status_ports(&cfg).await.is_none() {
        assert!(Instant::now() < end, "the daemon never reported its port");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // The field failure, in the kernel's own record (facility 0), with the session down.
    d.host.set("FAILED");
    let line =
        "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";
    d.log
        .send(KmsgEvent::Record(
            Record::parse(format!("3,10,100,-;{line}").as_bytes()).unwrap(),
        ))
        .unwrap();
    // Re-created; iscsid brings the session back; the self-test runs meanwhile.
    let end = Instant::now() + Duration::from_secs(20);
    while d.doubles.resetter.calls().is_empty() {
        assert!(Instant::now() < end, "no re-creation");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    d.host.set("LOGGED_IN");
    let end = Instant::now() + Duration::from_secs(20);
    let mut seen_in_flight = false;
    let port = loop {
        let (st, took) = status(&cfg).await;
        // The loop answers while the self-test blocks its worker.
        assert!(took < Duration::from_millis(1000), "status took {took:?}");
        let port = st["ports"][0].clone();
        seen_in_flight |= port["in_flight"]
            .to_string()
            .contains("self-test of rocep2s0f0/1");
        if port["phase"] == "Healthy" && port.get("last_selftest").is_some() {
            break port;
        }
        assert!(
            Instant::now() < end,
            "never healthy with a self-test: {st:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(seen_in_flight, "the self-test was never shown in flight");
    let t = &port["last_selftest"];
    assert_eq!(t["result"], "passed", "{port:#}");
    assert_eq!(t["passed"], true);
    assert_eq!(t["steps"], 1);
    assert_eq!(t["took_ms"], 1500);
    assert!(
        t["summary"]
            .as_str()
            .unwrap()
            .contains("self-test of rocep2s0f0/1 passed"),
        "{t}"
    );
    let threads = slow.threads.lock().unwrap().clone();
    assert_eq!(threads.len(), 1, "{threads:?}");
    assert!(
        threads[0].starts_with("iser-guard-exec"),
        "ran on {threads:?}, not an executor thread"
    );
    d.stop().await;
}

async fn status_ports(cfg: &Config) -> Option<serde_json::Value> {
    let path = cfg.paths.control_socket.clone();
    let r = tokio::task::spawn_blocking(move || {
        request(&path, &Request::Status, Duration::from_secs(5), |_| {})
    })
    .await
    .ok()?;
    match r {
        Ok(Reply::Done {
            detail: Some(d), ..
        }) if d["ports"].as_array().is_some_and(|p| !p.is_empty()) => Some(d),
        _ => None,
    }
}
