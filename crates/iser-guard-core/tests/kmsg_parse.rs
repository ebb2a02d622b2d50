//! The kernel-log parsers (crates/iser-guard-core/src/kmsg.rs) on real captures (tests/fixtures/kmsg/raw, see its
//! README) and property round trips.

use iser_guard_core::kmsg::{
    parse_record, parse_saved_line, LineFormat, LogEntry, Record, RecordRef, SavedLog,
};
use proptest::prelude::*;

const K61: &str = include_str!("fixtures/kmsg/raw/nldevcap-k61.kmsg");
const K612: &str = include_str!("fixtures/kmsg/raw/nldevcap-k612.kmsg");
const K61_DMESG: &str = include_str!("fixtures/kmsg/raw/nldevcap-k61.dmesg");
const K61_CONSOLE: &str = include_str!("fixtures/kmsg/raw/nldevcap-k61.console");

/// Splits a `cat /dev/kmsg` dump into what each read() returned: a record line and the
/// dictionary lines after it.
fn reads(dump: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in dump.split_inclusive('\n') {
        match out.last_mut() {
            Some(last) if line.starts_with(' ') => last.push_str(line),
            _ => out.push(line.to_string()),
        }
    }
    out
}

fn entries(log: &str) -> Vec<LogEntry<'_>> {
    SavedLog::new(log)
        .collect::<Result<Vec<_>, _>>()
        .expect("every line of a real capture parses")
}

fn check_kmsg_capture(dump: &str) {
    let reads = reads(dump);
    let saved = entries(dump);
    assert_eq!(saved.len(), reads.len());
    assert!(saved.len() > 500);
    let dict_lines = dump.lines().filter(|l| l.starts_with(' ')).count();
    assert!(dict_lines > 100, "the capture has SUBSYSTEM/DEVICE lines");
    let mut dict_seen = 0;
    for (i, (read, entry)) in reads.iter().zip(&saved).enumerate() {
        // The capture is complete from the first record: sequence numbers are contiguous.
        assert_eq!(entry.record.seq, Some(i as u64));
        assert_eq!(entry.record.format, LineFormat::Kmsg);
        // One read() parses to the same record as the line-by-line saved-log reader.
        let live = parse_record(read.as_bytes()).unwrap();
        assert_eq!(live, entry.record);
        dict_seen += live.dict.iter().count();
        // Writing the record back gives the kernel's bytes exactly (same escaping).
        let owned = live.to_record().unwrap();
        assert_eq!(&owned.to_kmsg(), read);
        assert_eq!(Record::parse(read.as_bytes()).unwrap(), owned);
    }
    assert_eq!(dict_seen, dict_lines);
    // Every record of a cat /dev/kmsg dump as root comes from the kernel itself.
    assert!(saved.iter().all(|e| e.record.is_kernel()));
}

#[test]
fn kmsg_capture_6_1_parses_completely() {
    check_kmsg_capture(K61);
}

#[test]
fn kmsg_capture_6_12_parses_completely() {
    check_kmsg_capture(K612);
}

#[test]
fn kmsg_capture_records_have_their_dictionary() {
    let saved = entries(K612);
    let active = saved
        .iter()
        .find(|e| e.record.text == "infiniband rxe_ini: set active")
        .unwrap();
    assert_eq!(active.record.seq, Some(401));
    assert_eq!(active.record.usec, Some(10_063_342));
    assert_eq!(
        (active.record.facility, active.record.level),
        (Some(0), Some(6))
    );
    assert_eq!(active.record.dict_value("SUBSYSTEM"), Some("infiniband"));
    assert_eq!(
        active.record.dict_value("DEVICE"),
        Some("+infiniband:rxe_ini")
    );
    // A record without a dictionary does not steal the next record's.
    let loaded = saved
        .iter()
        .find(|e| e.record.text == "rdma_rxe: loaded")
        .unwrap();
    assert!(loaded.record.dict.is_empty());

    // Escapes: a multi-line record and a backslash.
    let k61 = entries(K61);
    let unstable = k61.iter().find(|e| e.record.seq == Some(368)).unwrap();
    assert!(unstable.record.text.contains("\\x0a"));
    assert_eq!(
        unstable.record.unescaped_text().lines().nth(1),
        Some("If you want to keep using the local clock, then add:")
    );
    let lnkc = k61.iter().find(|e| e.record.seq == Some(382)).unwrap();
    assert_eq!(
        lnkc.record.unescaped_text(),
        "ACPI: \\_SB_.LNKC: Enabled at IRQ 11"
    );
}

#[test]
fn dmesg_of_the_same_run_matches_the_kmsg_records() {
    let kmsg = entries(K61);
    let dmesg = entries(K61_DMESG);
    let mut stamped = 0;
    for e in &dmesg {
        let r = &e.record;
        match r.format {
            LineFormat::Dmesg => {
                stamped += 1;
                let usec = r.usec.unwrap();
                let same = kmsg
                    .iter()
                    .filter(|k| k.record.usec == Some(usec))
                    .any(|k| k.record.unescaped_text().lines().next() == Some(r.text));
                assert!(same, "line {}: no kmsg record {usec} {:?}", e.line, r.text);
            }
            // The later lines of multi-line records, indented by dmesg.
            LineFormat::Bare => assert!(
                kmsg.iter().any(|k| k
                    .record
                    .unescaped_text()
                    .lines()
                    .skip(1)
                    .any(|l| l.trim_start() == r.text)),
                "line {}: {:?}",
                e.line,
                r.text
            ),
            other => panic!("line {}: unexpected format {other:?}", e.line),
        }
    }
    assert!(stamped > 500);
    // dmesg -r of the same records: `<prio>[%5lu.%06lu] text`.
    for k in kmsg.iter().take(200) {
        let r = &k.record;
        let usec = r.usec.unwrap();
        let line = format!(
            "<{}>[{:5}.{:06}] {}",
            u32::from(r.facility.unwrap()) << 3 | u32::from(r.level.unwrap()),
            usec / 1_000_000,
            usec % 1_000_000,
            r.unescaped_text().lines().next().unwrap_or_default()
        );
        let d = parse_saved_line(&line).unwrap();
        assert_eq!(d.format, LineFormat::DmesgRaw);
        assert_eq!((d.facility, d.level, d.usec), (r.facility, r.level, r.usec));
        assert!(!d.is_kernel() || r.is_kernel());
    }
}

#[test]
fn serial_console_mixes_kernel_and_userspace_lines() {
    let console = entries(K61_CONSOLE);
    let kernel = console
        .iter()
        .filter(|e| e.record.format == LineFormat::Dmesg)
        .count();
    let bare: Vec<&str> = console
        .iter()
        .filter(|e| e.record.format == LineFormat::Bare)
        .map(|e| e.record.text)
        .collect();
    assert!(kernel > 500);
    assert!(bare.contains(&"Loading, please wait..."));
    // A kernel line printed in the middle of a userspace line stays one bare line.
    assert!(bare
        .iter()
        .any(|t| t.starts_with("Begin: Loading essential drivers ... [    5.038129] input:")));
}

/// `skip_to(offset)` then `next()` gives the entry whose lines contain `offset`, with the
/// same line number as reading every line.
fn check_skip_to(log: &str, offsets: impl Iterator<Item = usize>) {
    let mut spans = Vec::new();
    let mut all = SavedLog::new(log);
    loop {
        let start = all.position();
        let Some(item) = all.next() else { break };
        spans.push((start, all.position(), item));
    }
    for off in offsets.filter(|&o| o < log.len()) {
        let mut s = SavedLog::new(log);
        s.skip_to(off);
        let got = s.next();
        let want = spans
            .iter()
            .find(|(a, b, _)| (*a..*b).contains(&off))
            .map(|(_, _, item)| item.clone());
        assert_eq!(got, want, "offset {off}");
    }
}

#[test]
fn skip_to_any_offset_of_real_logs_matches_a_full_scan() {
    for log in [K612, K61_DMESG, K61_CONSOLE] {
        check_skip_to(log, (0..log.len()).step_by(101));
    }
}

fn arb_record() -> impl Strategy<Value = Record> {
    (
        any::<u8>(),
        0u8..8,
        any::<u64>(),
        any::<u64>(),
        any::<bool>(),
        any::<String>(),
        prop::collection::vec(("[A-Z_][A-Z0-9_]{0,11}", any::<String>()), 0..4),
    )
        .prop_map(
            |(facility, level, seq, usec, continuation, text, dict)| Record {
                facility,
                level,
                seq,
                usec,
                continuation,
                text,
                dict,
            },
        )
}

proptest! {
    #[test]
    fn kmsg_syntax_round_trips(r in arb_record()) {
        let wire = r.to_kmsg();
        // The kernel's escaping keeps a record on one line of printable ASCII.
        prop_assert!(wire.bytes().all(|b| b == b'\n' || (b' '..0x7f).contains(&b)));
        prop_assert_eq!(wire.lines().count(), 1 + r.dict.len());
        let back = Record::parse(wire.as_bytes()).unwrap();
        prop_assert_eq!(&back, &r);
    }

    #[test]
    fn saved_log_of_many_records_round_trips(rs in prop::collection::vec(arb_record(), 0..8)) {
        let log: String = rs.iter().map(Record::to_kmsg).collect();
        let back: Vec<Record> = SavedLog::new(&log)
            .map(|e| e.unwrap().record.to_record().unwrap())
            .collect();
        prop_assert_eq!(back, rs);
    }

    #[test]
    fn skip_to_matches_a_full_scan(
        rs in prop::collection::vec(arb_record(), 1..6),
        noise in prop::collection::vec("[ \\[<0-9a-z,;=\\]>.\n]{0,30}", 0..4),
        picks in prop::collection::vec(any::<prop::sample::Index>(), 1..8),
    ) {
        let mut log: String = rs.iter().map(Record::to_kmsg).collect();
        for n in &noise {
            log.push_str(n);
            log.push('\n');
        }
        check_skip_to(&log, picks.iter().map(|i| i.index(log.len())));
    }

    #[test]
    fn saved_log_never_panics_on_bytes(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        for e in SavedLog::from_bytes(&bytes).flatten() {
            let r: RecordRef<'_> = e.record;
            let _ = r.unescaped_text();
            let _ = r.to_record();
        }
        let _ = parse_record(&bytes);
    }
}
