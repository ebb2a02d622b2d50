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

/// A self-test that blocks as a real one does (a CM connect) until the test releases it,
/// then passes with a step that took `took`; it records the thread it ran on. Blocking on
/// the test's word (not for a fixed time) lets the test see it in flight however slow the
/// machine is.
struct SlowPass {
    took: Duration,
    threads: Mutex<Vec<String>>,
    release: Mutex<std::sync::mpsc::Receiver<()>>,
}
impl PortSelfTest for SlowPass {
    fn run(&self, device: &str, port: u32, timeout: Duration) -> SelfTestResult {
        let name = std::thread::current().name().unwrap_or("?").to_string();
        self.threads.lock().unwrap().push(name);
        // Bounded like a real connect: a test that never releases it sees a failed step.
        let released = self.release.lock().unwrap().recv_timeout(timeout).is_ok();
        SelfTestResult::Ran(SelfTestReport {
            device: device.to_string(),
            port,
            steps: vec![SelfTestStep {
                name: "cm-connect".into(),
                took: self.took,
                ok: released,
                detail: if released {
                    "ESTABLISHED".into()
                } else {
                    "the test never released the connect".into()
                },
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

/// A liveness bound for what the test waits for on a loaded machine (never a speed figure).
const WAIT: Duration = Duration::from_secs(30);

async fn status(cfg: &Config) -> serde_json::Value {
    let path = cfg.paths.control_socket.clone();
    let r = tokio::task::spawn_blocking(move || {
        request(&path, &Request::Status, Duration::from_secs(5), |_| {})
    })
    .await
    .unwrap();
    match r {
        Ok(Reply::Done { detail, .. }) => detail.unwrap_or_default(),
        other => panic!("no status: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_self_test_runs_on_a_worker_and_its_result_shows_in_status() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path());
    let (release, released) = std::sync::mpsc::channel();
    let slow = Arc::new(SlowPass {
        took: Duration::from_millis(1500),
        threads: Mutex::new(Vec::new()),
        release: Mutex::new(released),
    });
    let d = LoopTest::new(cfg.clone())
        .portal_reachable(200)
        .selftest(slow.clone())
        .start();
    let end = Instant::now() + WAIT;
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
    let end = Instant::now() + WAIT;
    while d.doubles.resetter.calls().is_empty() {
        assert!(Instant::now() < end, "no re-creation");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    d.host.set("LOGGED_IN");
    // The loop answers status while the self-test blocks its worker: the self-test is
    // shown in flight (it cannot end before the test releases it).
    let end = Instant::now() + WAIT;
    loop {
        let st = status(&cfg).await;
        let port = &st["ports"][0];
        if port["in_flight"]
            .to_string()
            .contains("self-test of rocep2s0f0/1")
        {
            break;
        }
        assert!(port.get("last_selftest").is_none(), "ended early: {st:#}");
        assert!(Instant::now() < end, "never shown in flight: {st:#}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    release.send(()).unwrap();
    let end = Instant::now() + WAIT;
    let port = loop {
        let st = status(&cfg).await;
        let port = st["ports"][0].clone();
        if port["phase"] == "Healthy" && port.get("last_selftest").is_some() {
            break port;
        }
        assert!(
            Instant::now() < end,
            "never healthy with a self-test: {st:#}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
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
