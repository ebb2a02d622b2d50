//! `iser-guard explain` on the real binary: kernel lines as arguments, saved logs in each
//! format (/dev/kmsg, `dmesg -r`, plain `dmesg`) by `--file` and on stdin, `--transition`,
//! JSON, unrecognised input and exit codes.

use std::io::Write;
use std::process::{Command, Output, Stdio};

const IRDMA: &str =
    "ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3";
const MAD: &str = "infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22";

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_iser-guard"));
    c.env_remove("ISER_GUARD_LOG");
    c
}

fn fixture(name: &str) -> String {
    format!(
        "{}/crates/iser-guard-core/tests/fixtures/kmsg/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

fn run(args: &[&str]) -> Output {
    bin().arg("explain").args(args).output().expect("runs")
}

fn run_stdin(args: &[&str], input: &[u8]) -> Output {
    let mut child = bin()
        .arg("explain")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawns");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input)
        .expect("writes");
    child.wait_with_output().expect("runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

/// What the issue demands of the two field lines.
fn assert_field_verdict(text: &str) {
    assert!(text.contains("ERR -> RTS"), "{text}");
    assert!(text.contains("QP 1 (GSI)"), "{text}");
    assert!(text.contains("rocep2s0f0"), "{text}");
    assert!(text.contains("forbidden by the IB spec"), "{text}");
    assert!(text.contains("must be re-created"), "{text}");
    assert!(
        text.contains(
            "devlink dev param set pci/0000:02:00.0 name enable_roce value false cmode runtime"
        ),
        "{text}"
    );
    assert!(
        text.contains("iser-guard reset-device rocep2s0f0"),
        "{text}"
    );
}

#[test]
fn the_two_field_lines() {
    let o = run(&[IRDMA, MAD]);
    assert_eq!(o.status.code(), Some(1), "a stuck GSI QP is a finding");
    let text = stdout(&o);
    assert_field_verdict(&text);
    assert!(text.starts_with("arguments: 2 lines, 2 recognised, 2 distinct events"));
    // The MAD line alone names no PCI function; the irdma line of the same device does,
    // and the recovery command of both groups uses it.
    assert_eq!(
        text.matches("name enable_roce value true").count(),
        2,
        "{text}"
    );
}

#[test]
fn each_field_line_alone_is_a_finding() {
    for line in [IRDMA, MAD] {
        let o = run(&[line]);
        assert_eq!(o.status.code(), Some(1), "{line}");
        let t = stdout(&o);
        assert!(
            t.contains("ERR -> RTS") && t.contains("must be re-created"),
            "{t}"
        );
    }
}

#[test]
fn file_in_each_format_gives_the_same_summary() {
    for f in [
        "field-incident.dmesg",
        "field-incident-raw.dmesg",
        "field-incident.kmsg",
    ] {
        let o = run(&["--file", &fixture(f)]);
        assert_eq!(o.status.code(), Some(1), "{f}");
        let t = stdout(&o);
        assert_field_verdict(&t);
        // Repeats are summarised, not printed 12 times.
        assert_eq!(t.matches("seen:     12 times").count(), 2, "{f}: {t}");
        assert_eq!(t.matches("\n[").count(), 2, "{f}: {t}");
    }
}

#[test]
fn file_counts_lines_and_timestamps() {
    let o = run(&["--file", &fixture("field-incident.kmsg"), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["lines"], 72);
    assert_eq!(v["recognised"], 24);
    assert_eq!(v["finding"], true);
    let ev = v["events"].as_array().expect("events");
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[0]["count"], 12);
    assert_eq!(ev[0]["first_line"], 1);
    assert_eq!(ev[0]["last_line"], 67);
    assert_eq!(ev[0]["first_usec"], 5_123_456_789u64);
    assert_eq!(ev[0]["format"], "kmsg");
    assert_eq!(ev[0]["untrusted"], 0);
    assert_eq!(ev[0]["signature"]["kind"]["kind"], "stuck_qp_transition");
    assert_eq!(ev[0]["signature"]["kind"]["qp"], 1);
    assert_eq!(ev[0]["signature"]["kind"]["from"], "ERR");
    assert_eq!(ev[0]["signature"]["kind"]["to"], "RTS");
    assert_eq!(ev[0]["signature"]["device"]["pci"], "0000:02:00.0");
    assert_eq!(ev[0]["explanation"]["finding"], true);
    assert_eq!(ev[0]["explanation"]["stuck_gsi"], true);
    assert_eq!(ev[0]["explanation"]["transition"]["allowed"], false);
    assert_eq!(ev[0]["explanation"]["transition"]["qp_type"], "GSI");
    assert_eq!(ev[1]["signature"]["kind"]["kind"], "mad_rts_failed");
    assert_eq!(ev[1]["signature"]["kind"]["errno"], -22);
    assert_eq!(ev[1]["signature"]["device"]["rdma_dev"], "rocep2s0f0");
}

#[test]
fn stdin_with_dash_and_with_file_dash() {
    let log = std::fs::read(fixture("field-incident-raw.dmesg")).expect("fixture");
    for args in [&["-"][..], &["--file", "-"][..]] {
        let o = run_stdin(args, &log);
        assert_eq!(o.status.code(), Some(1), "{args:?}");
        let t = stdout(&o);
        assert!(t.starts_with("stdin: 24 lines, 24 recognised"), "{t}");
        assert_field_verdict(&t);
    }
}

#[test]
fn real_capture_without_stuck_port_exits_zero() {
    let o = run(&["--file", &fixture("blackhole1.dmesg")]);
    assert_eq!(o.status.code(), Some(0));
    let t = stdout(&o);
    assert!(
        t.contains("431 lines, 9 recognised, 7 distinct events"),
        "{t}"
    );
    assert!(t.contains("error 1022 ISCSI_ERR_NOP_TIMEDOUT"), "{t}");
    assert!(t.contains("recovery timed out after 120 s"), "{t}");
    assert!(
        t.contains("no forbidden QP transition and no stuck GSI QP"),
        "{t}"
    );
}

#[test]
fn rxe_qp_storm_is_folded() {
    let o = run(&["--file", &fixture("rxeflap-dyndbg.dmesg"), "--json"]);
    assert_eq!(o.status.code(), Some(0));
    let v = json(&o);
    assert_eq!(v["recognised"], 344);
    let ev = v["events"].as_array().expect("events");
    // 249 rxe QP state lines fold into one group per state (plus QP 1's own groups).
    assert!(ev.len() < 20, "{} groups", ev.len());
    let err = ev
        .iter()
        .find(|e| e["line"] == "rdma_rxe: qp#17 state -> ERR")
        .expect("ERR group");
    assert_eq!(err["qps"].as_array().map(Vec::len), Some(32));
}

#[test]
fn unrecognised_lines_are_listed_and_exit_zero() {
    let o = run(&["hello world", "usb 1-6: Manufacturer: Realtek"]);
    assert_eq!(o.status.code(), Some(0));
    let t = stdout(&o);
    assert!(t.contains("line 1: not recognised: hello world"), "{t}");
    assert!(
        t.contains("line 2: not recognised: usb 1-6: Manufacturer: Realtek"),
        "{t}"
    );
    assert!(t.contains("0 recognised"), "{t}");
    let o = run(&["hello world", "--json"]);
    let v = json(&o);
    assert_eq!(v["unrecognised"][0]["text"], "hello world");
    assert_eq!(v["finding"], false);
}

#[test]
fn userspace_written_records_are_flagged_untrusted() {
    let o = run_stdin(
        &["-"],
        format!("12,5,100,-;{IRDMA}\n SUBSYSTEM=pci\n DEVICE=+pci:0000:02:00.0\n").as_bytes(),
    );
    assert_eq!(o.status.code(), Some(1));
    let t = stdout(&o);
    assert!(t.contains("written by userspace"), "{t}");
}

#[test]
fn transition_from_arguments() {
    let o = run(&[
        "--transition",
        "ERR:RTS",
        "--type",
        "GSI",
        "--mask",
        "STATE,CUR_STATE",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let t = stdout(&o);
    assert!(t.contains("ERR -> RTS"), "{t}");
    assert!(t.contains("forbidden by the IB spec"), "{t}");
    assert!(t.contains("RESET, ERR"), "{t}");

    // Missing and forbidden attributes are listed.
    let o = run(&[
        "--transition",
        "INIT:RTR",
        "--type",
        "RC",
        "--mask",
        "STATE,CUR_STATE",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["allowed"], false);
    let missing = v["missing"].as_str().expect("missing");
    for a in [
        "AV",
        "PATH_MTU",
        "DEST_QPN",
        "RQ_PSN",
        "MAX_DEST_RD_ATOMIC",
        "MIN_RNR_TIMER",
    ] {
        assert!(missing.contains(a), "{missing}");
    }
    assert_eq!(v["not_allowed"], "CUR_STATE");

    // SQE -> RTS with CUR_STATE is allowed for UD (what the MAD layer asks).
    let o = run(&[
        "--transition",
        "SQE:RTS",
        "--type",
        "UD",
        "--mask",
        "STATE|CUR_STATE",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("allowed by the IB spec"));

    // Kernel numbers work too (0x6 = ERR, 0x0 = RESET).
    let o = run(&["--transition", "0x6:0x0", "--qpn", "1", "--type", "GSI"]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
}

#[test]
fn usage_errors_and_missing_files() {
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--file"));
    let o = run(&["--transition", "FOO:RTS"]);
    assert_eq!(o.status.code(), Some(64));
    assert!(String::from_utf8_lossy(&o.stderr).contains("unknown QP state"));
    let o = run(&["--transition", "ERR"]);
    assert_eq!(o.status.code(), Some(64));
    let o = run(&["--transition", "ERR:RTS", "--mask", "BOGUS"]);
    assert_eq!(o.status.code(), Some(64));
    let o = run(&["--file", "/nonexistent/kern.log"]);
    assert_eq!(o.status.code(), Some(66));
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent/kern.log"));
    // clap: lines and --file together.
    let o = run(&[IRDMA, "--file", "x"]);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn malformed_and_binary_input_is_skipped_not_fatal() {
    let mut log = b"6,1,2,x;infiniband rxe_ini: set down\n".to_vec(); // bad flags
    log.extend_from_slice(b"\xff\xfe\x00 binary junk\n");
    log.extend_from_slice(format!("[   12.000001] {MAD}\n").as_bytes());
    let o = run_stdin(&["-", "--json"], &log);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["lines"], 3);
    assert_eq!(v["unparsable"], 1);
    assert!(v["first_parse_error"]
        .as_str()
        .is_some_and(|s| s.starts_with("line 1:")));
    assert_eq!(v["events"][0]["first_line"], 3);
}

/// A line without a newline no longer grows memory: lines are cut at 64 KiB, the rest is
/// counted and skipped with a warning, and what follows is still explained. (A bounded
/// stand-in for an endless line: 32 MiB of one letter. `/dev/zero` itself is not text and is
/// refused at its first bytes.)
#[test]
fn an_endless_line_is_cut_and_the_log_still_explained() {
    let mut input = vec![b'x'; 32 << 20];
    input.extend_from_slice(format!("\n[ 5.000000] {MAD}\n").as_bytes());
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("zeros.log");
    std::fs::write(&p, &input).expect("write");
    let o = run(&["--file", p.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{}{err}", stdout(&o));
    assert!(stdout(&o).contains("rocep2s0f0"), "{}", stdout(&o));
    assert!(err.contains("longer than 65536 bytes"), "{err}");
    // The same through `watch --file`.
    let o = bin()
        .args(["watch", "--file", p.to_str().expect("utf-8")])
        .output()
        .expect("runs");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{err}");
    assert!(stdout(&o).contains("line 2 "), "{}", stdout(&o));
    assert!(stdout(&o).contains("mad_rts_failed"), "{}", stdout(&o));
    assert!(err.contains("longer than 65536 bytes"), "{err}");
}

/// Lines of the RDMA storage stack that match no signature are explained by the subsystem
/// layer (never a finding: the exit code stays 0), a whole WARN report in RDMA code is one
/// entry, and a line of another subsystem stays unrecognised. The lines are real published
/// ones (eval/kernel-lines/dev.tsv) and the kernel's WARN/frame formats.
#[test]
fn subsystem_events_and_reports_are_explained_and_never_a_finding() {
    let log = "\
[    5.502207] mlx5_core 0000:01:00.0: handle_hca_cap failed
[ 5743.296728] nvme nvme9: failed to connect queue: 0 ret=6
[  855.971272]  connection1:0: detected conn error (1020)
[  856.000001] ------------[ cut here ]------------
[  856.000002] WARNING: CPU: 1 PID: 2873 at drivers/infiniband/core/cq.c:345 ib_free_cq+0x10a/0x150 [ib_core]
[  856.000003] Call Trace:
[  856.000004]  iser_free_ib_conn_res+0x65/0x1a0 [ib_iser]
[  856.000005] ---[ end trace 0000000000000000 ]---
[  857.000000] usb 1-6: Manufacturer: Realtek
[  858.000000] mlx5_core 0000:08:00.0: poll_health:800:(pid 0): Fatal error 1 detected
";
    let o = run_stdin(&["-"], log.as_bytes());
    assert_eq!(o.status.code(), Some(0), "{o:?}");
    let t = stdout(&o);
    assert!(t.contains("Subsystem events"), "{t}");
    assert!(t.contains("[nic]"), "{t}");
    assert!(t.contains("[nvme]"), "{t}");
    assert!(t.contains("FATAL DEVICE ERROR"), "{t}");
    assert!(t.contains("health recovery"), "{t}");
    assert!(t.contains("kernel warning in rdma-core"), "{t}");
    assert!(!t.contains("Realtek ("), "{t}");
    let o = run_stdin(&["-", "--json"], log.as_bytes());
    let v = json(&o);
    assert_eq!(v["finding"], false);
    let sub = &v["subsystem"];
    let subsystems: Vec<&str> = sub["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"]["subsystem"].as_str().unwrap())
        .collect();
    assert!(
        subsystems.contains(&"nic") && subsystems.contains(&"nvme"),
        "{sub:#}"
    );
    assert!(
        !subsystems.contains(&"iscsi"),
        "a signature line is not repeated: {sub:#}"
    );
    let traces = sub["traces"].as_array().unwrap();
    assert_eq!(traces.len(), 1, "{sub:#}");
    assert_eq!(traces[0]["line"], 4);
    assert_eq!(traces[0]["modules"][0], "ib_core");
    let fatal = sub["events"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["event"]["fatal_device_error"] == true)
        .expect("fatal device error");
    assert_eq!(fatal["event"]["device"]["pci"], "0000:08:00.0");
    assert_eq!(fatal["first_line"], 10);
}

/// Issue item: on a gzip-compressed rotated kernel log of the field incident
/// (kern.log.2.gz) explain said "no forbidden QP transition … in this input", exit 0. A
/// rotated log is read as it is, gzip or zstd, and gives the verdict the plain log gives.
#[test]
fn a_rotated_gzip_or_zstd_log_is_read_as_it_is() {
    let plain = std::fs::read(fixture("field-incident.dmesg")).expect("fixture");
    let want = run(&["--file", &fixture("field-incident.dmesg")]);
    assert_eq!(want.status.code(), Some(1), "{}", stdout(&want));
    assert_field_verdict(&stdout(&want));
    let dir = tempfile::tempdir().expect("tempdir");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gz.write_all(&plain).expect("gzip");
    let gz = gz.finish().expect("gzip");
    // As logrotate's `compresscmd zstd` leaves it (scripts/setup.sh installs zstd).
    let zst = Command::new("zstd")
        .args(["-q", "-c", &fixture("field-incident.dmesg")])
        .output()
        .expect("zstd(1) runs")
        .stdout;
    assert!(
        zst.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]),
        "not zstd output"
    );
    for (name, bytes) in [("kern.log.2.gz", &gz), ("kern.log.3.zst", &zst)] {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).expect("write");
        let o = run(&["--file", p.to_str().expect("utf-8")]);
        assert_eq!(o.status.code(), Some(1), "{name}: {}", stdout(&o));
        assert_field_verdict(&stdout(&o));
        // The same input on stdin (`cat kern.log.2.gz | iser-guard explain -`).
        let o = run_stdin(&["-"], bytes);
        assert_eq!(o.status.code(), Some(1), "{name} on stdin: {}", stdout(&o));
        assert_field_verdict(&stdout(&o));
    }
    // A cut .gz (a rotation caught mid-write) is named damaged, exit 65, not an all-clear.
    let p = dir.path().join("kern.log.1.gz");
    std::fs::write(&p, &gz[..gz.len() / 2]).expect("write");
    let o = run(&["--file", p.to_str().expect("utf-8")]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(65), "{}{err}", stdout(&o));
    assert!(err.contains("a damaged gzip file"), "{err}");
    assert!(!stdout(&o).contains("no forbidden"), "{}", stdout(&o));
}

/// Issue item: on random bytes explain gave the same all-clear, exit 0. Input that is not
/// text is said to be so, with a distinct exit code (65) and what to run instead.
#[test]
fn binary_input_is_not_text_with_its_own_exit_code() {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let random: Vec<u8> = (0..65536)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 32).to_le_bytes()[0]
        })
        .collect();
    let dir = tempfile::tempdir().expect("tempdir");
    let p = dir.path().join("system.journal");
    std::fs::write(&p, &random).expect("write");
    for o in [
        run(&["--file", p.to_str().expect("utf-8")]),
        run_stdin(&["-"], &random),
        run(&["--file", "/dev/zero"]),
    ] {
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(65), "{}{err}", stdout(&o));
        assert!(err.contains("is not text"), "{err}");
        assert!(err.contains("journalctl -k --file"), "{err}");
        assert!(stdout(&o).is_empty(), "{}", stdout(&o));
    }
}
