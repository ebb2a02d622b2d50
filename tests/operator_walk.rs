//! The operator's walk as a test: every subcommand, run as an operator would on the fake
//! host (tests/support/fake_host.rs), once without a daemon and once with `iser-guard
//! daemon` running on that host. No normal output may carry a diagnostic log line, a Rust
//! `Debug` dump or stray whitespace (tests/support/plain_text.rs), whatever the exit code:
//! a refusal or an error is output an operator reads too.
//!
//! The daemon reads its kernel log from a FIFO the test holds open (no root, no real
//! /dev/kmsg needed); its syslog socket is a datagram socket the test binds. The walk waits
//! for the daemon's READY=1 on NOTIFY_SOCKET, never for a fixed time.

#[path = "support/fake_host.rs"]
mod fake_host;
#[path = "support/plain_text.rs"]
mod plain_text;

use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_host::FakeHost;

const BIN: &str = env!("CARGO_BIN_EXE_iser-guard");
const WAIT: Duration = Duration::from_secs(30);

/// A kernel log a test can keep alive: a FIFO, held open for reading and writing so that
/// the daemon's reader never sees its end.
struct KmsgFifo {
    path: PathBuf,
    /// Held open for reading and writing; the test writes kernel records into it.
    _held: std::fs::File,
}

impl KmsgFifo {
    fn new(h: &FakeHost) -> KmsgFifo {
        let path = h.path("kmsg");
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .expect("mkfifo");
        let held = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .expect("open the FIFO");
        KmsgFifo { path, _held: held }
    }
}

/// The fake host's configuration with the FIFO as its kernel log.
fn config(h: &FakeHost, kmsg: &KmsgFifo) -> PathBuf {
    let p = h.config("");
    let text = std::fs::read_to_string(&p).expect("config");
    let text = text.replace(
        "kmsg = \"/dev/kmsg\"",
        &format!("kmsg = {:?}", kmsg.path.display().to_string()),
    );
    assert!(text.contains(&kmsg.path.display().to_string()));
    std::fs::write(&p, text).expect("write config");
    p
}

/// One step of the walk: the arguments, and whether its normal output is prose (held to
/// single spaces between words) or a table/timeline (whose columns are aligned with runs of
/// spaces).
struct Step {
    args: Vec<String>,
    prose: bool,
}

fn step(args: &[&str], prose: bool) -> Step {
    Step {
        args: args.iter().map(|a| a.to_string()).collect(),
        prose,
    }
}

/// Every subcommand, as the README and `--help` describe them.
fn every_subcommand() -> Vec<Step> {
    let log = format!(
        "{}/crates/iser-guard-core/tests/fixtures/kmsg/field-incident.kmsg",
        env!("CARGO_MANIFEST_DIR")
    );
    vec![
        step(&["check-config"], false),
        step(&["status"], false),
        step(&["status", "--json"], false),
        step(&["qps"], false),
        step(&["events"], false),
        step(&["history"], false),
        step(&["simulate", "--list"], false),
        step(&["simulate", "field-incident"], false),
        step(
            &["explain", "--transition", "ERR:RTS", "--type", "GSI"],
            true,
        ),
        step(&["explain", "--file", &log], false),
        step(&["watch", "--file", &log], false),
        step(&["recover", "rocep2s0f0/1", "--dry-run"], true),
        step(&["recover", "rocep2s0f0/9", "--dry-run"], true),
        step(&["reset-device", "rocep2s0f0", "--dry-run"], true),
        step(&["reconnect", "--dry-run"], true),
        step(&["pause"], true),
        step(&["resume"], true),
        step(&["reload"], true),
        step(&["selftest", "rocep2s0f0/1", "--timeout", "0"], true),
        step(&["selftest", "rocep2s0f0/1"], true),
        step(&["doctor"], false),
    ]
}

/// Runs every step with `cfg` and returns every problem found, named by its command.
fn walk(cfg: &Path, daemon: &str) -> Vec<String> {
    let mut found = Vec::new();
    for s in every_subcommand() {
        let o = Command::new(BIN)
            .arg("--config")
            .arg(cfg)
            .args(&s.args)
            .env_remove("ISER_GUARD_LOG")
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .output()
            .expect("run iser-guard");
        let stdout = String::from_utf8_lossy(&o.stdout);
        let stderr = String::from_utf8_lossy(&o.stderr);
        let code = o.status.code();
        eprintln!(
            "== {daemon}: iser-guard {} -> {code:?}\n{stdout}{stderr}",
            s.args.join(" ")
        );
        let name = format!("{daemon}: `{}`", s.args.join(" "));
        // Every command ends with an exit code of its own, never a panic (101) or a signal.
        if code.is_none() || code == Some(101) {
            found.push(format!("{name}: exit {code:?}"));
        }
        if stdout.trim().is_empty() && stderr.trim().is_empty() {
            found.push(format!("{name}: said nothing"));
        }
        for p in plain_text::problems(&stdout, s.prose) {
            found.push(format!("{name} stdout: {p}"));
        }
        for p in plain_text::problems(&stderr, true) {
            found.push(format!("{name} stderr: {p}"));
        }
    }
    found
}

#[test]
fn every_subcommand_without_a_daemon_prints_plain_words() {
    let h = FakeHost::new();
    let kmsg = KmsgFifo::new(&h);
    let cfg = config(&h, &kmsg);
    let found = walk(&cfg, "without a daemon");
    assert!(found.is_empty(), "{found:#?}");
}

/// `iser-guard daemon` on the fake host; stopped (SIGTERM) and reaped on drop.
struct Daemon {
    child: Child,
}

impl Daemon {
    fn start(h: &FakeHost, cfg: &Path) -> Daemon {
        let notify_path = h.path("notify.sock");
        let notify = UnixDatagram::bind(&notify_path).expect("bind notify");
        let child = Command::new(BIN)
            .arg("--config")
            .arg(cfg)
            .arg("daemon")
            .env("NOTIFY_SOCKET", &notify_path)
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the daemon");
        let mut d = Daemon { child };
        notify
            .set_read_timeout(Some(Duration::from_millis(200)))
            .expect("timeout");
        let end = Instant::now() + WAIT;
        let mut buf = [0u8; 4096];
        loop {
            if let Ok(n) = notify.recv(&mut buf) {
                if String::from_utf8_lossy(&buf[..n])
                    .lines()
                    .any(|l| l == "READY=1")
                {
                    return d;
                }
            }
            if let Ok(Some(status)) = d.child.try_wait() {
                panic!("the daemon exited before it was ready: {status}");
            }
            assert!(Instant::now() < end, "the daemon never sent READY=1");
        }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let _ = self.child.wait();
    }
}

/// `events` output with `cfg`.
fn events(cfg: &Path) -> String {
    let o = Command::new(BIN)
        .arg("--config")
        .arg(cfg)
        .arg("events")
        .output()
        .expect("run events");
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn every_subcommand_with_a_daemon_running_prints_plain_words() {
    let h = FakeHost::new();
    let mut kmsg = KmsgFifo::new(&h);
    let cfg = config(&h, &kmsg);
    let _syslog = UnixDatagram::bind(h.path("syslog.sock")).expect("bind syslog");
    let mut d = Daemon::start(&h, &cfg);
    // Mid-incident, so that status, events and history have something to say: the
    // session failed, the target is away, and the kernel (facility 0, as /dev/kmsg gives
    // it) reports the stuck GSI QP.
    h.set_session("FAILED");
    {
        use std::io::Write;
        kmsg._held
            .write_all(
                b"3,1,5133479260,-;ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for \
                  qp_id=1, old_state=0x6, new_state=0x3\n SUBSYSTEM=pci\n \
                  DEVICE=+pci:0000:02:00.0\n",
            )
            .expect("write the record");
    }
    fake_host::wait_for("the stuck-GSI alert in events", WAIT, || {
        events(&cfg).contains("GSI QP 1 is stuck in ERR")
    });
    let found = walk(&cfg, "with a daemon");
    // The daemon lived through the walk (pause, resume, reload, manual dry runs).
    assert!(
        d.child.try_wait().expect("wait").is_none(),
        "the daemon stopped during the walk"
    );
    assert!(found.is_empty(), "{found:#?}");
}
