//! The control socket under hostile clients, through the real `ControlServer` in-process: a
//! consumer task stands in for the daemon's loop (it answers each command as the daemon
//! does, after the same `client_gone` check). Idle, slow and departed clients must never
//! delay another's command, and a departed client's command is not run.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use iser_guard::io::control::{request, ControlError, ControlServer, Limits, Reply, Request};

/// What the stand-in daemon ran, in order.
type Ran = Arc<Mutex<Vec<Request>>>;

/// Serves `server` like the daemon's loop: a command whose client is gone is skipped; the
/// others are recorded and answered at once.
fn daemon(server: ControlServer, ran: Ran) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            // Refused, busy and malformed clients come out as errors: the daemon logs them.
            if let Ok((mut conn, req)) = server.accept().await {
                if conn.client_gone() {
                    continue;
                }
                ran.lock().unwrap().push(req.clone());
                let _ = conn.done(true, &format!("{req:?} done"), 0, None).await;
            }
        }
    })
}

fn socket() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run/control.sock");
    (dir, path)
}

/// `pause` through the CLI's client, which gives up after `within`.
fn pause(path: &Path, within: Duration) -> Result<Reply, ControlError> {
    request(path, &Request::Pause, within, |_| {})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pause_answers_before_any_idle_clients_deadline_while_1000_are_held() {
    let (_d, path) = socket();
    // Each idle client would hold its slot for a minute: a server that served clients in
    // turn would make `pause` wait at least that long. The client gives up after 30 s, so
    // an answer proves no idle client was waited for, on a machine however loaded.
    let idle_deadline = Duration::from_secs(60);
    let limits = Limits {
        request_deadline: idle_deadline,
        ..Limits::default()
    };
    let server = ControlServer::bind_with(&path, limits).unwrap();
    let ran: Ran = Arc::default();
    let _daemon = daemon(server, ran.clone());
    let p = path.clone();
    let (idle, reply) = tokio::task::spawn_blocking(move || {
        // Connected and silent.
        let idle: Vec<UnixStream> = (0..1000)
            .map(|_| UnixStream::connect(&p).unwrap())
            .collect();
        let t = std::time::Instant::now();
        let reply = pause(&p, idle_deadline / 2);
        // A figure for the docs, not an assertion.
        eprintln!(
            "pause answered in {:?} with 1000 idle clients held",
            t.elapsed()
        );
        (idle, reply)
    })
    .await
    .unwrap();
    match reply {
        Ok(Reply::Done { ok: true, .. }) => {}
        other => panic!("pause waited for idle clients (1000 held): {other:?}"),
    }
    assert_eq!(*ran.lock().unwrap(), vec![Request::Pause]);
    drop(idle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_client_delays_nobody_and_gets_its_own_deadline() {
    let (_d, path) = socket();
    let limits = Limits {
        request_deadline: Duration::from_millis(300),
        ..Limits::default()
    };
    let server = ControlServer::bind_with(&path, limits).unwrap();
    let ran: Ran = Arc::default();
    let _daemon = daemon(server, ran.clone());
    let p = path.clone();
    let (slow_reply, status) = tokio::task::spawn_blocking(move || {
        // Half a request, then silence.
        let mut slow = UnixStream::connect(&p).unwrap();
        slow.write_all(b"{\"cmd\":").unwrap();
        let status = request(&p, &Request::Status, Duration::from_secs(5), |_| {});
        let mut line = String::new();
        slow.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        BufReader::new(&slow).read_line(&mut line).unwrap();
        (line, status)
    })
    .await
    .unwrap();
    assert!(
        matches!(status, Ok(Reply::Done { ok: true, .. })),
        "{status:?}"
    );
    let reply: Reply = serde_json::from_str(&slow_reply).unwrap();
    match reply {
        Reply::Done {
            ok: false, message, ..
        } => assert!(message.contains("no request within 0.3 s"), "{message}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(*ran.lock().unwrap(), vec![Request::Status]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cap_answers_busy_when_every_slot_runs_a_command() {
    let (_d, path) = socket();
    let limits = Limits {
        max_connections: 2,
        ..Limits::default()
    };
    let server = ControlServer::bind_with(&path, limits).unwrap();
    // A daemon that takes commands and never answers: both slots stay busy.
    let held = Arc::new(Mutex::new(Vec::new()));
    let h = held.clone();
    tokio::spawn(async move {
        while let Ok((conn, req)) = server.accept().await {
            h.lock().unwrap().push((conn, req));
        }
    });
    let p = path.clone();
    let third = tokio::task::spawn_blocking(move || {
        let mut a = UnixStream::connect(&p).unwrap();
        a.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        let mut b = UnixStream::connect(&p).unwrap();
        b.write_all(b"{\"cmd\":\"status\"}\n").unwrap();
        // Both slots are taken once the stand-in daemon holds both commands (a liveness
        // bound for a loaded machine, not a speed figure).
        let end = std::time::Instant::now() + Duration::from_secs(30);
        while held.lock().unwrap().len() < 2 {
            assert!(
                std::time::Instant::now() < end,
                "the server never took both"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let r = request(&p, &Request::Status, Duration::from_secs(5), |_| {});
        (r, a, b)
    })
    .await
    .unwrap();
    match third.0 {
        Ok(Reply::Done {
            ok: false,
            message,
            exit_code: 75,
            ..
        }) => assert!(message.starts_with("busy"), "{message}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_command_whose_client_is_gone_is_not_run() {
    let (_d, path) = socket();
    let server = ControlServer::bind(&path).unwrap();
    let p = path.clone();
    // The client sends `pause` and gives up (closes) before the daemon takes it.
    tokio::task::spawn_blocking(move || {
        let mut s = UnixStream::connect(&p).unwrap();
        s.write_all(b"{\"cmd\":\"pause\"}\n").unwrap();
    })
    .await
    .unwrap();
    let ran: Ran = Arc::default();
    let _daemon = daemon(server, ran.clone());
    // A later command goes through, and is the only one run.
    let p = path.clone();
    let r = tokio::task::spawn_blocking(move || {
        request(&p, &Request::Resume, Duration::from_secs(5), |_| {})
    })
    .await
    .unwrap();
    assert!(matches!(r, Ok(Reply::Done { ok: true, .. })), "{r:?}");
    assert_eq!(*ran.lock().unwrap(), vec![Request::Resume]);
}

#[tokio::test(flavor = "current_thread")]
async fn bind_never_replaces_anything_but_a_socket() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("precious");
    std::fs::write(&file, "data").unwrap();
    let e = ControlServer::bind(&file).unwrap_err();
    assert!(
        e.to_string().contains("is a regular file, not a socket"),
        "{e}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "data");
    // A symlink at the path is not followed or removed either.
    let link = dir.path().join("link.sock");
    std::os::unix::fs::symlink(&file, &link).unwrap();
    assert!(ControlServer::bind(&link).is_err());
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    // Dropping a server leaves alone a file put at its path after it bound.
    let sock = dir.path().join("c.sock");
    let server = ControlServer::bind(&sock).unwrap();
    std::fs::remove_file(&sock).unwrap();
    std::fs::write(&sock, "new").unwrap();
    drop(server);
    assert_eq!(std::fs::read_to_string(&sock).unwrap(), "new");
}
