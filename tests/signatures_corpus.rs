//! The signature corpus (crates/iser-guard-core/tests/fixtures/kmsg/corpus): one realistic line per row of the
//! table in docs/dev/signatures.md, in every saved-log format iser-guard reads, and about a
//! hundred lines that must stay unrecognised (unrelated messages, NVMe-oF, neighbouring
//! RDMA consumers and drivers, kernel bugs in modules this job does not depend on).
//!
//! Also: what the engine hears from the new signatures, the operator alert of kernel bugs,
//! device attribution that never borrows from a less trusted line, and the trust `explain`
//! gives `dmesg -r` priorities.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use iser_guard::core::kmsg::{parse_saved_line, Record, RecordOrigin, SavedLog, Unproven};
use iser_guard::core::recovery::{read_record, Observation, StuckEvidence, Trust};
use iser_guard::core::signatures::{
    classify, operator_alert, KernelBugKind, Signature, SignatureKind,
};

/// Every format gen.py writes. `kmsg`, `dmesg` and `dmesg-r` are read by the core's saved-log
/// parser; the others (human time stamps, syslog and journal prefixes) by `explain` itself.
const FORMATS: &[&str] = &[
    "kmsg",
    "dmesg",
    "dmesg-r",
    "dmesg-T",
    "dmesg-H",
    "dmesg-iso",
    "syslog",
    "syslog-rfc3339",
    "journal",
    "journal-iso",
    "journal-precise",
    "journal-monotonic",
];

fn corpus(name: &str) -> String {
    format!(
        "{}/crates/iser-guard-core/tests/fixtures/kmsg/corpus/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The rows of lines.tsv: (kind, device label, text).
fn rows() -> Vec<(String, String, String)> {
    let text = std::fs::read_to_string(corpus("lines.tsv")).expect("lines.tsv");
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let mut f = l.splitn(3, '\t');
            let (k, d, t) = (f.next(), f.next(), f.next());
            (
                k.expect("kind").to_string(),
                d.expect("device").to_string(),
                t.unwrap_or_else(|| panic!("no text in {l:?}")).to_string(),
            )
        })
        .collect()
}

fn unrelated() -> Vec<String> {
    std::fs::read_to_string(corpus("unrelated.txt"))
        .expect("unrelated.txt")
        .lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn explain_json(args: &[&str]) -> (Output, serde_json::Value) {
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .env_remove("ISER_GUARD_LOG")
        .arg("explain")
        .args(args)
        .arg("--json")
        .output()
        .expect("runs");
    let v = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)));
    (out, v)
}

fn explain_text(args: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_iser-guard"))
        .env_remove("ISER_GUARD_LOG")
        .arg("explain")
        .args(args)
        .output()
        .expect("runs");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tally<I: IntoIterator<Item = (String, String)>>(it: I) -> BTreeMap<(String, String), u64> {
    let mut m = BTreeMap::new();
    for k in it {
        *m.entry(k).or_default() += 1;
    }
    m
}

#[test]
fn every_row_is_recognised_with_its_device() {
    for (kind, device, text) in rows() {
        let s = classify(&text, None).unwrap_or_else(|| panic!("not classified: {text:?}"));
        assert_eq!(s.kind.name(), kind, "{text:?}");
        assert_eq!(s.device.label(), device, "{text:?}");
        // Escaped the way /dev/kmsg escapes: the same signature.
        let escaped = text.replace('\\', "\\x5c");
        assert_eq!(classify(&escaped, None), Some(s), "{text:?}");
    }
}

#[test]
fn every_row_in_the_core_formats_line_by_line() {
    let want = rows();
    for fmt in ["kmsg", "dmesg", "dmesg-r"] {
        let bytes = std::fs::read(corpus(&format!("lines.{fmt}.log"))).expect("fixture");
        let got: Vec<(String, String)> = SavedLog::from_bytes(&bytes)
            .map(|e| {
                let rec = e.unwrap_or_else(|e| panic!("{fmt}: {e}")).record;
                let text = rec.unescaped_text();
                let s = classify(&text, rec.dict_value("DEVICE"))
                    .unwrap_or_else(|| panic!("{fmt}: not classified: {text:?}"));
                (s.kind.name().to_string(), s.device.label())
            })
            .collect();
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, d, _)| (k.clone(), d.clone()))
            .collect();
        assert_eq!(got, want, "{fmt}");
    }
}

#[test]
fn every_row_in_every_format_through_explain() {
    let want = tally(rows().into_iter().map(|(k, d, _)| (k, d)));
    let n: u64 = want.values().sum();
    for fmt in FORMATS {
        let path = corpus(&format!("lines.{fmt}.log"));
        let (_, v) = explain_json(&["--file", &path]);
        assert_eq!(v["recognised"], n, "{fmt}");
        assert_eq!(v["unparsable"], 0, "{fmt}");
        let mut got = BTreeMap::new();
        for ev in v["events"].as_array().expect("events") {
            let sig: Signature =
                serde_json::from_value(ev["signature"].clone()).expect("a signature");
            *got.entry((sig.kind.name().to_string(), sig.device.label()))
                .or_insert(0u64) += ev["count"].as_u64().expect("count");
        }
        assert_eq!(got, want, "{fmt}");
    }
}

#[test]
fn unrelated_lines_stay_unrecognised_in_every_format() {
    let lines = unrelated();
    assert!(lines.len() >= 100, "{} lines", lines.len());
    for l in &lines {
        assert_eq!(classify(l, None), None, "{l:?}");
    }
    for fmt in FORMATS {
        let path = corpus(&format!("unrelated.{fmt}.log"));
        let (out, v) = explain_json(&["--file", &path]);
        assert_eq!(v["recognised"], 0, "{fmt}: {}", v["events"]);
        assert_eq!(v["finding"], false, "{fmt}");
        assert_eq!(out.status.code(), Some(0), "{fmt}");
    }
}

#[test]
fn the_table_in_the_docs_and_the_corpus_name_the_same_kinds() {
    let doc = std::fs::read_to_string(format!(
        "{}/docs/dev/signatures.md",
        env!("CARGO_MANIFEST_DIR")
    ))
    .expect("docs/dev/signatures.md");
    // Survey rows: `| format | source | versions | kind | meaning | class |`; the kind cell
    // is `` `name` `` or `—` (not recognised).
    let start = doc
        .find("## Survey of the format strings")
        .expect("the survey section");
    let mut table_kinds = std::collections::BTreeSet::new();
    let mut rows_seen = 0;
    for line in doc[start..].lines().skip_while(|l| !l.starts_with('|')) {
        if !line.starts_with('|') {
            break;
        }
        let cells: Vec<&str> = line.split(" | ").collect();
        if cells.len() < 6 || line.starts_with("|---") || line.starts_with("| format") {
            continue;
        }
        rows_seen += 1;
        let kind = cells[3].trim();
        if kind == "—" {
            continue;
        }
        // One kind, or several: `` `a` / `b` ``.
        for k in kind.split(" / ") {
            let k = k.strip_prefix('`').and_then(|k| k.strip_suffix('`'));
            table_kinds.insert(
                k.unwrap_or_else(|| panic!("kind cell {kind:?}: {line}"))
                    .to_string(),
            );
        }
    }
    assert!(rows_seen >= 80, "{rows_seen} survey rows");
    let corpus_kinds: std::collections::BTreeSet<String> =
        rows().into_iter().map(|(k, _, _)| k).collect();
    assert_eq!(table_kinds, corpus_kinds);
}

// ---- what the engine hears -----------------------------------------------------------------

fn record(facility: u8, text: &str, dict: &[(&str, &str)]) -> Record {
    Record {
        facility,
        level: 3,
        seq: 7,
        usec: 1_000_000,
        continuation: false,
        text: text.to_string(),
        dict: dict
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
    }
}

#[test]
fn mad_port_open_failure_tells_the_engine_the_gsi_qp_is_missing() {
    let r = record(0, "infiniband rxe_ini: Couldn't open port 1", &[]);
    let (obs, trust) = read_record(&r)
        .expect("classified")
        .observation
        .expect("an observation");
    assert_eq!(trust, Trust::Trusted);
    assert_eq!(
        obs,
        Observation::GsiQpStuck {
            device: "rxe_ini".into(),
            port: Some(1),
            evidence: StuckEvidence::MadPortOpenFailed,
        }
    );
    // The same words written by a process stay untrusted.
    let forged = read_record(&record(1, "infiniband rxe_ini: Couldn't open port 1", &[]))
        .expect("classified");
    assert_eq!(forged.observation.map(|(_, t)| t), Some(Trust::Untrusted));
}

#[test]
fn scsi_eh_block_and_buffer_errors_are_io_errors_for_the_engine() {
    for (text, disk, offline) in [
        ("sd 2:0:0:0: [sdb] tag#12 Device offlined - not ready after error recovery", "sdb", true),
        ("device offline error, dev sdc, sector 8 op 0x0:(READ) flags 0x0 phys_seg 1 prio class 0", "sdc", true),
        ("recoverable transport error, dev sdb, sector 2048 op 0x1:(WRITE) flags 0x800 phys_seg 1 prio class 0", "sdb", false),
        ("Buffer I/O error on dev sdb1, logical block 262144, lost async page write", "sdb1", false),
        ("sd 2:0:0:0: [sdb] tag#3 timing out command, waited 180s", "sdb", false),
    ] {
        let reading = read_record(&record(0, text, &[])).expect("classified");
        match reading.observation {
            Some((Observation::IoError { disk: d, kind }, Trust::Trusted)) => {
                assert_eq!(d, disk, "{text}");
                assert_eq!(
                    kind == iser_guard::core::recovery::IoErrorKind::Offline,
                    offline,
                    "{text}"
                );
            }
            other => panic!("{text}: {other:?}"),
        }
    }
}

#[test]
/// A kernel bug reaches the engine only as Observation::KernelBug, which alerts and holds
/// automatic re-creation (tests/scenarios/kernel_bug.rs): never as a fault to repair.
fn kernel_bugs_alert_the_operator_and_reach_the_engine_only_as_a_hold() {
    for (kind, _, text) in rows().into_iter().filter(|(k, _, _)| k == "kernel_bug") {
        let reading = read_record(&record(0, &text, &[])).expect("classified");
        let ev = reading.event;
        assert_eq!(ev.signature.kind.name(), kind);
        match reading.observation {
            Some((Observation::KernelBug { .. }, Trust::Trusted)) => {}
            other => panic!("{text}: {other:?}"),
        }
        let alert = operator_alert(&ev.signature).expect("an alert");
        assert!(alert.contains("no automatic repair applies"), "{alert}");
        assert!(alert.contains("not repairable by the agent"), "{alert}");
    }
    let s = classify("RIP: 0010:iser_conn_terminate+0x1c/0x90 [ib_iser]", None).expect("oops");
    assert_eq!(
        s.kind,
        SignatureKind::KernelBug {
            what: KernelBugKind::Oops,
            module: Some("ib_iser".into()),
            function: Some("iser_conn_terminate+0x1c/0x90".into()),
            location: None,
            detail: None,
        }
    );
    let a = operator_alert(&s).expect("alert");
    assert!(a.contains("kernel oops in ib_iser"), "{a}");
    // With a build id in the module bracket, and a WARNING naming only the source file.
    let s = classify(
        "RIP: 0010:rxe_completer+0x9d2/0xd20 [rdma_rxe 3f2a0c1d5e6b7a8f9e0d1c2b3a4f5e6d7c8b9a0f]",
        None,
    )
    .expect("oops with build id");
    assert!(
        matches!(s.kind, SignatureKind::KernelBug { module: Some(ref m), .. } if m == "rdma_rxe")
    );
    // Nothing else raises an operator alert by itself.
    for (_, _, text) in rows().into_iter().filter(|(k, _, _)| k != "kernel_bug") {
        let s = classify(&text, None).expect("classified");
        assert_eq!(operator_alert(&s), None, "{text}");
    }
}

#[test]
fn explain_prints_the_kernel_bug_alert() {
    let out = explain_text(&[
        "RIP: 0010:iser_conn_terminate+0x1c/0x90 [ib_iser]",
        "kernel BUG at drivers/infiniband/sw/rxe/rxe_qp.c:123!",
    ]);
    assert!(
        out.contains("Alert [1]: kernel bug: kernel oops in ib_iser (iser_conn_terminate+0x1c/0x90): not repairable by the agent, no automatic repair applies"),
        "{out}"
    );
    assert!(
        out.contains("Alert [2]: kernel bug: kernel BUG() in rdma_rxe"),
        "{out}"
    );
}

// ---- trust and attribution -----------------------------------------------------------------

#[test]
fn dmesg_r_priorities_prove_no_kernel_origin() {
    let low = parse_saved_line("<3>[ 5123.456789] infiniband rxe_ini: Couldn't open port 1")
        .expect("parses");
    assert_eq!(
        low.origin(),
        RecordOrigin::Unproven(Unproven::PriorityWithoutFacility)
    );
    assert!(!low.is_kernel());
    let user = parse_saved_line("<11>[ 5123.456789] infiniband rxe_ini: Couldn't open port 1")
        .expect("parses");
    assert_eq!(user.origin(), RecordOrigin::Userspace(1));
    let kmsg = parse_saved_line("3,7,5123456789,-;infiniband rxe_ini: Couldn't open port 1")
        .expect("parses");
    assert_eq!(kmsg.origin(), RecordOrigin::Kernel);
    let plain = parse_saved_line("[ 5123.456789] infiniband rxe_ini: Couldn't open port 1")
        .expect("parses");
    assert_eq!(plain.origin(), RecordOrigin::Unproven(Unproven::NoPriority));

    let path = corpus("lines.dmesg-r.log");
    let text = explain_text(&["--file", &path]);
    assert!(
        text.contains("from `dmesg -r` with a priority below 8, which cannot prove kernel origin"),
        "{text}"
    );
    assert!(text.contains("never an action trigger"), "{text}");
    let (_, v) = explain_json(&["--file", &path]);
    let events = v["events"].as_array().expect("events");
    assert!(events
        .iter()
        .all(|e| e["unproven"] == e["count"] && e["untrusted"] == 0));
}

fn event_of<'a>(v: &'a serde_json::Value, kind: &str) -> &'a serde_json::Value {
    v["events"]
        .as_array()
        .expect("events")
        .iter()
        .find(|e| e["signature"]["kind"]["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {v}"))
}

#[test]
fn a_forged_line_lends_its_pci_function_and_driver_to_no_other_line() {
    // A process writes an irdma line naming another PCI function for rocep2s0f0 (facility 1),
    // the kernel writes the MAD line of the same device: the MAD line keeps only what the
    // kernel said.
    let dir = std::env::temp_dir().join(format!("iser-guard-sigs-forged-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let log = dir.join("forged.kmsg");
    std::fs::write(
        &log,
        "12,1,100,-;ice 0000:99:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3\n\
         3,2,200,-;infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22\n",
    )
    .expect("writes");
    let (_, v) = explain_json(&["--file", log.to_str().expect("utf-8")]);
    let mad = event_of(&v, "mad_rts_failed");
    assert_eq!(
        mad["signature"]["device"]["pci"],
        serde_json::Value::Null,
        "{mad}"
    );
    assert_eq!(mad["signature"]["device"]["driver"], "infiniband", "{mad}");
    let recovery = mad["explanation"]["recovery"].to_string();
    assert!(!recovery.contains("0000:99:00.0"), "{recovery}");
    let irdma = event_of(&v, "stuck_qp_transition");
    assert_eq!(irdma["untrusted"], 1);

    // The kernel's own irdma line does lend it.
    std::fs::write(
        &log,
        "4,1,100,-;ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3\n\
         3,2,200,-;infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22\n",
    )
    .expect("writes");
    let (_, v) = explain_json(&["--file", log.to_str().expect("utf-8")]);
    let mad = event_of(&v, "mad_rts_failed");
    assert_eq!(mad["signature"]["device"]["pci"], "0000:02:00.0", "{mad}");
    assert_eq!(mad["signature"]["device"]["driver"], "ice", "{mad}");

    // A `dmesg -r` line (origin unproven) does not lend to a kmsg line the kernel wrote, but
    // lends to lines as unproven as itself (plain dmesg: the documented field-incident case).
    std::fs::write(
        &log,
        "<4>[    0.000100] ice 0000:99:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3\n\
         3,2,200,-;infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22\n",
    )
    .expect("writes");
    let (_, v) = explain_json(&["--file", log.to_str().expect("utf-8")]);
    let mad = event_of(&v, "mad_rts_failed");
    assert_eq!(
        mad["signature"]["device"]["pci"],
        serde_json::Value::Null,
        "{mad}"
    );
    std::fs::write(
        &log,
        "[    0.000100] ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, old_state=0x6, new_state=0x3\n\
         [    0.000200] infiniband rocep2s0f0: ib_mad_send_error - ib_modify_qp to RTS: -22\n",
    )
    .expect("writes");
    let (_, v) = explain_json(&["--file", log.to_str().expect("utf-8")]);
    let mad = event_of(&v, "mad_rts_failed");
    assert_eq!(mad["signature"]["device"]["pci"], "0000:02:00.0", "{mad}");
    let _ = std::fs::remove_dir_all(&dir);
}
