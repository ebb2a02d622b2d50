//! `iser-guard watch` on the REAL /dev/kmsg: records injected as root (one write() per record,
//! the device reopened for each because of the `printk_devkmsg=ratelimit` burst limit per
//! open file) must come out classified and flagged untrusted (userspace writes get facility
//! 1: `<3>` becomes prio 11); the cursor makes a restart resume; SIGTERM/SIGINT end it.
//!
//! Needs root and a writable /dev/kmsg (CI runs as root). Otherwise each test says why and
//! returns. Other processes may write to the kernel log at the same time, so every test finds
//! its own records by a unique marker and never assumes it is alone.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

use serde_json::Value;

const FIELD_IRDMA: &str =
    "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";
const FIELD_MAD: &str = "infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22";

/// Generous bound for output to show up on a loaded machine (liveness, not speed).
const OUTPUT_WAIT: Duration = Duration::from_secs(20);
/// A bound on SIGTERM → exit that holds on a machine loaded by a build and CPU hogs (the
/// stress run saw 1 s exceeded there); `watch` exits at once on an idle machine, and each
/// stop prints its MEASURED time.
const SHUTDOWN_BOUND: Duration = Duration::from_secs(10);

/// Why the real device cannot be used here, if it cannot.
fn unavailable() -> Option<String> {
    if !nix::unistd::geteuid().is_root() {
        return Some("not running as root".into());
    }
    match std::fs::OpenOptions::new().write(true).open("/dev/kmsg") {
        Ok(_) => None,
        Err(e) => Some(format!("/dev/kmsg is not writable: {e}")),
    }
}

/// The tests of this file run one at a time: the flood of one would wrap the kernel's ring
/// past the records another is waiting for.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

#[path = "support/kmsg_lock.rs"]
mod kmsg_lock;

macro_rules! require_kmsg {
    () => {
        let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        // And one test process at a time on the host (see tests/support/kmsg_lock.rs).
        let _host = kmsg_lock::acquire();
        if let Some(why) = unavailable() {
            eprintln!("skipping: {why} (this test injects records into the real /dev/kmsg)");
            return;
        }
    };
}

/// Writes one record: one open, one write() (a split write would make several records).
fn inject(prio: u8, text: &str) {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/kmsg")
        .unwrap();
    let line = format!("<{prio}>{text}\n");
    let n = f.write(line.as_bytes()).unwrap();
    assert_eq!(n, line.len(), "short write to /dev/kmsg");
}

fn unique(tag: &str) -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!("iser-guard-kmsg-live {tag} {}-{nanos}", std::process::id())
}

struct Setup {
    _dir: tempfile::TempDir,
    config: PathBuf,
    state: PathBuf,
    boot_id: PathBuf,
}

/// A config whose state dir (and, if `fake_boot`, boot id file) live in a temp dir.
fn setup(fake_boot: Option<&str>) -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let boot_id = match fake_boot {
        Some(id) => {
            let p = dir.path().join("boot_id");
            std::fs::write(&p, format!("{id}\n")).unwrap();
            p
        }
        None => PathBuf::from("/proc/sys/kernel/random/boot_id"),
    };
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "[paths]\nkmsg = \"/dev/kmsg\"\nstate-dir = {:?}\nboot-id = {:?}\n",
            state.display().to_string(),
            boot_id.display().to_string()
        ),
    )
    .unwrap();
    Setup {
        _dir: dir,
        config,
        state,
        boot_id,
    }
}

/// A running `iser-guard watch`, killed on drop if still alive.
struct Watch {
    child: Child,
    out: Receiver<String>,
    err: Receiver<String>,
    stderr_seen: Vec<String>,
}

impl Watch {
    fn start(config: &Path, extra: &[&str]) -> Watch {
        let mut child = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
            .arg("--config")
            .arg(config)
            .args(["--log", "info", "watch", "--json"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let out = lines(child.stdout.take().unwrap());
        let err = lines(child.stderr.take().unwrap());
        let mut w = Watch {
            child,
            out,
            err,
            stderr_seen: Vec::new(),
        };
        // The device is open and positioned once this is logged.
        w.wait_stderr("following the kernel log");
        w
    }

    fn wait_stderr(&mut self, needle: &str) {
        let deadline = Instant::now() + OUTPUT_WAIT;
        while Instant::now() < deadline {
            match self.err.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let found = l.contains(needle);
                    self.stderr_seen.push(l);
                    if found {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        panic!(
            "watch never logged {needle:?}; stderr:\n{}",
            self.stderr_seen.join("\n")
        );
    }

    /// Collects JSON output lines until one has `text == last`; returns all collected.
    fn read_until_text(&mut self, last: &str) -> Vec<Value> {
        let deadline = Instant::now() + OUTPUT_WAIT;
        let mut got = Vec::new();
        while Instant::now() < deadline {
            match self.out.recv_timeout(Duration::from_millis(100)) {
                Ok(l) => {
                    let v: Value =
                        serde_json::from_str(&l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
                    let done = v["text"] == last;
                    got.push(v);
                    if done {
                        return got;
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let err: Vec<String> = self.err.try_iter().collect();
        panic!(
            "{last:?} never came out; got {got:#?}\nstderr:\n{}\n{}",
            self.stderr_seen.join("\n"),
            err.join("\n")
        );
    }

    /// Sends `sig` and waits for the exit, at most `bound`.
    fn stop(&mut self, sig: nix::sys::signal::Signal, bound: Duration) -> ExitStatus {
        let pid = nix::unistd::Pid::from_raw(i32::try_from(self.child.id()).unwrap());
        nix::sys::signal::kill(pid, sig).unwrap();
        let sent = Instant::now();
        let deadline = sent + bound;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                eprintln!("MEASURED: {sig} -> exit: {} ms", sent.elapsed().as_millis());
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "watch still running {bound:?} after {sig}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn lines(r: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(r).lines() {
            let Ok(l) = l else { break };
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

fn texts(v: &[Value]) -> Vec<&str> {
    v.iter().filter_map(|x| x["text"].as_str()).collect()
}

#[test]
fn watch_classifies_injected_field_lines_and_flags_them_untrusted() {
    require_kmsg!();
    let s = setup(None);
    let mut w = Watch::start(&s.config, &["--all"]);
    let begin = unique("begin");
    let end = unique("end");
    inject(6, &begin);
    inject(3, FIELD_IRDMA);
    inject(3, FIELD_MAD);
    inject(6, &end);
    let got = w.read_until_text(&end);
    let start = got
        .iter()
        .position(|v| v["text"] == begin.as_str())
        .unwrap();
    let ours = &got[start..];
    for (field, name) in [
        (FIELD_IRDMA, "stuck_qp_transition"),
        (FIELD_MAD, "mad_rts_failed"),
    ] {
        let v = ours
            .iter()
            .find(|v| v["text"] == field)
            .unwrap_or_else(|| panic!("{field:?} not among {:?}", texts(ours)));
        // Written by userspace: `<3>` became prio 11, facility 1.
        assert_eq!(v["facility"], 1, "{v}");
        assert_eq!(v["level"], 3, "{v}");
        assert_eq!(v["trusted"], false, "{v}");
        assert_eq!(v["note"], "untrusted: written by userspace, facility 1");
        assert!(v["seq"].as_u64().is_some() && v["usec"].as_u64().is_some());
        assert_eq!(v["format"], "kmsg");
        // Classified: the stuck GSI QP of rocep2s0f0.
        assert_eq!(v["event"]["name"], name, "{v}");
        assert_eq!(v["event"]["stuck_gsi"], true, "{v}");
        assert_eq!(v["event"]["device"]["rdma_dev"], "rocep2s0f0", "{v}");
    }
    let irdma = ours.iter().find(|v| v["text"] == FIELD_IRDMA).unwrap();
    assert_eq!(irdma["event"]["kind"]["qp"], 1);
    assert_eq!(irdma["event"]["kind"]["from"], "ERR");
    assert_eq!(irdma["event"]["kind"]["to"], "RTS");
    assert_eq!(irdma["event"]["device"]["pci"], "0000:02:00.0");
    let mad = ours.iter().find(|v| v["text"] == FIELD_MAD).unwrap();
    assert_eq!(mad["event"]["kind"]["errno"], -22);
    // The markers match no signature.
    assert!(ours[0]["event"].is_null());
    // Sequence numbers grow in injection order.
    let seq = |t: &str| ours.iter().find(|v| v["text"] == t).unwrap()["seq"].as_u64();
    assert!(seq(FIELD_IRDMA) < seq(FIELD_MAD));
    assert!(seq(&begin) < seq(FIELD_IRDMA) && seq(FIELD_MAD) < seq(&end));
    let status = w.stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND);
    assert!(status.success(), "{status}");
}

#[test]
fn watch_without_all_prints_only_recognised_records() {
    require_kmsg!();
    let s = setup(None);
    let mut w = Watch::start(&s.config, &[]);
    let marker = unique("unrecognised");
    // A recognised line that names a session number nobody else uses ends the wait.
    let session = std::process::id() + 100_000;
    let sentinel = format!(" connection{session}:0: detected conn error (1011)");
    inject(6, &marker);
    inject(3, FIELD_IRDMA);
    inject(3, FIELD_MAD);
    inject(3, &sentinel);
    let got = w.read_until_text(&sentinel);
    assert!(!texts(&got).contains(&marker.as_str()), "{got:#?}");
    // Printed: what a signature or the subsystem layer recognised (other processes' kernel
    // lines may be among them), and whole oops/WARN reports.
    assert!(
        got.iter().all(|v| !v["event"].is_null()
            || v.get("subsystem").is_some()
            || v.get("trace").is_some()),
        "{got:#?}"
    );
    let t = texts(&got);
    assert!(t.contains(&FIELD_IRDMA) && t.contains(&FIELD_MAD), "{t:?}");
    let last = got.last().unwrap();
    assert_eq!(last["event"]["name"], "iscsi_conn_error");
    assert_eq!(last["event"]["device"]["iscsi_session"], session);
    assert_eq!(last["trusted"], false);
    assert!(w
        .stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND)
        .success());
}

#[test]
fn watch_resumes_after_restart_from_its_cursor() {
    require_kmsg!();
    let s = setup(None);
    let first = unique("first-run");
    let mut w = Watch::start(&s.config, &["--all"]);
    inject(6, &first);
    let got = w.read_until_text(&first);
    let first_seq = got.last().unwrap()["seq"].as_u64().unwrap();
    let status = w.stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND);
    assert!(status.success(), "{status}");
    drop(w);
    // The cursor holds the boot and at least the last record shown.
    let cursor: Value = serde_json::from_slice(
        &std::fs::read(s.state.join("watch-kmsg.cursor")).expect("cursor saved on SIGTERM"),
    )
    .unwrap();
    let boot = std::fs::read_to_string(&s.boot_id).unwrap();
    assert_eq!(cursor["boot_id"], boot.trim());
    assert!(cursor["seq"].as_u64().unwrap() >= first_seq);

    // Logged while nothing watched: a restart must still show it (a first start would not).
    let while_down = unique("while-down");
    inject(6, &while_down);
    let mut w = Watch::start(&s.config, &["--all"]);
    let got = w.read_until_text(&while_down);
    assert!(
        !texts(&got).contains(&first.as_str()),
        "the record shown before the restart came out again"
    );
    assert!(got.iter().all(|v| v["seq"].as_u64() > Some(first_seq)));
    assert!(w
        .stop(nix::sys::signal::Signal::SIGINT, SHUTDOWN_BOUND)
        .success());
}

#[test]
fn watch_after_a_reboot_starts_at_the_oldest_retained_record() {
    require_kmsg!();
    let s = setup(Some("boot-one"));
    let before = unique("before-reboot");
    let mut w = Watch::start(&s.config, &["--all"]);
    inject(6, &before);
    w.read_until_text(&before);
    assert!(w
        .stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND)
        .success());
    drop(w);
    // Same kernel log, but the boot id says this is another boot: the whole retained log is
    // new to the reader, so the record from "the previous run" shows up again.
    std::fs::write(&s.boot_id, "boot-two\n").unwrap();
    let mut w = Watch::start(&s.config, &["--all"]);
    let got = w.read_until_text(&before);
    assert!(got.len() > 1, "reading started before {before:?}");
    assert!(w
        .stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND)
        .success());
}

#[test]
fn watch_reports_records_lost_to_a_ring_buffer_overrun() {
    require_kmsg!();
    // SYSLOG_ACTION_SIZE_BUFFER: the ring's size in bytes.
    // SAFETY: action 10 only returns a number; the buffer argument is ignored.
    let size = unsafe { libc::klogctl(10, std::ptr::null_mut(), 0) };
    let Ok(size) = usize::try_from(size) else {
        eprintln!("skipping: klogctl(SYSLOG_ACTION_SIZE_BUFFER) failed");
        return;
    };
    // Every record takes well over 8 bytes of the ring, so this many surely wrap it.
    let flood = size / 8;
    if flood > 300_000 {
        eprintln!("skipping: the {size}-byte kernel ring is too large to overrun quickly");
        return;
    }
    let s = setup(None);
    let mut w = Watch::start(&s.config, &["--all"]);
    // A record read first tells the reader where it is, so the gap can be counted.
    let before = unique("before-flood");
    inject(6, &before);
    w.read_until_text(&before);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(w.child.id()).unwrap());
    // Frozen, the watcher cannot read while the ring wraps past its position.
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
    let tag = unique("flood");
    for i in 0..flood {
        inject(7, &format!("{tag} {i}"));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT).unwrap();
    let session = std::process::id() + 200_000;
    let sentinel = format!(" connection{session}:0: detected conn error (1011)");
    inject(3, &sentinel);
    let got = w.read_until_text(&sentinel);
    let lost: Vec<&Value> = got.iter().filter(|v| v.get("lost").is_some()).collect();
    assert!(!lost.is_empty(), "no loss reported: {got:#?}");
    let first = lost[0];
    assert_eq!(first["overrun"], true, "{first}");
    assert!(first["lost"].as_u64().unwrap() > 0);
    assert!(first["next_seq"].as_u64().is_some());
    assert!(w
        .stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND)
        .success());
    // The loss is in the counters logged at exit too: read stderr to its end (the reader
    // thread forwards the last lines after the process has exited, and ends at EOF).
    let err: Vec<String> = w.err.iter().collect();
    let stats = err
        .iter()
        .find(|l| l.contains("stopping on SIGTERM"))
        .expect("stats logged");
    assert!(
        stats.contains(" lost=") && stats.contains(" overruns="),
        "{stats}"
    );
    assert!(
        !stats.contains(" lost=0 ") && !stats.contains(" overruns=0 "),
        "{stats}"
    );
}

#[test]
fn watch_stops_on_sigterm_while_idle_and_during_a_burst() {
    require_kmsg!();
    let s = setup(None);
    let mut w = Watch::start(&s.config, &[]);
    let status = w.stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND);
    assert!(status.success(), "{status}");
    drop(w);

    // During a burst of records (a writer thread keeps injecting).
    let mut w = Watch::start(&s.config, &["--all"]);
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let stop = stop.clone();
        let tag = unique("burst");
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) && i < 20_000 {
                inject(7, &format!("{tag} {i}"));
                i += 1;
            }
        })
    };
    // Let the burst reach the watcher.
    let _ = w
        .out
        .recv_timeout(OUTPUT_WAIT)
        .expect("burst records shown");
    let status = w.stop(nix::sys::signal::Signal::SIGTERM, SHUTDOWN_BOUND);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().unwrap();
    assert!(status.success(), "{status}");
}

/// `watch --file` replays a saved log; no root needed.
fn replay(file: &str) -> (std::process::Output, Vec<Value>) {
    // An empty configuration file (all defaults); the loader refuses /dev/null, which is
    // not a regular file.
    let config = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .arg("--config")
        .arg(config.path())
        .args(["watch", "--json", "--file", file])
        .output()
        .unwrap();
    let lines = String::from_utf8(out.stdout.clone())
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (out, lines)
}

#[test]
fn watch_replays_saved_logs_of_each_format() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/iser-guard-core/tests/fixtures/kmsg/"
    );
    // /dev/kmsg dump: kernel records, trusted, with their dictionary.
    let (out, kmsg) = replay(&format!("{dir}field-incident.kmsg"));
    assert!(out.status.success());
    let first = &kmsg[0];
    assert_eq!(first["event"]["name"], "stuck_qp_transition");
    assert_eq!(first["trusted"], true);
    assert_eq!(first["line"], 1);
    assert!(first["dict"]
        .as_array()
        .unwrap()
        .contains(&serde_json::json!(["DEVICE", "+pci:0000:02:00.0"])));
    assert!(kmsg.iter().any(|v| v["event"]["name"] == "mad_rts_failed"));
    assert!(kmsg.iter().all(|v| !v["event"].is_null()));
    // dmesg -r and plain dmesg: same events; neither proves who wrote a line (a dmesg -r
    // priority below 8 carries no facility: older util-linux printed userspace records that
    // way too), so neither is trusted.
    for (file, format, trusted) in [
        ("field-incident-raw.dmesg", "dmesg-raw", false),
        ("field-incident.dmesg", "dmesg", false),
    ] {
        let (out, got) = replay(&format!("{dir}{file}"));
        assert!(out.status.success(), "{file}");
        let names: Vec<&str> = got
            .iter()
            .filter_map(|v| v["event"]["name"].as_str())
            .collect();
        assert!(names.contains(&"stuck_qp_transition"), "{file}: {names:?}");
        assert!(names.contains(&"mad_rts_failed"), "{file}: {names:?}");
        assert!(got.iter().all(|v| v["format"] == format), "{file}");
        let irdma = got
            .iter()
            .find(|v| v["event"]["name"] == "stuck_qp_transition")
            .unwrap();
        assert_eq!(irdma["trusted"], trusted, "{file}: {irdma}");
    }
    // A missing file is EX_NOINPUT.
    let (out, _) = replay(&format!("{dir}no-such-file"));
    assert_eq!(out.status.code(), Some(66));
}
