//! Throughput of the kernel-log parsers: one /dev/kmsg record as the live reader gets it, and
//! the zero-copy saved-log iterator over a log built from the real captures (/dev/kmsg dump,
//! plain dmesg, serial console), which is what `explain --file` scans first.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use iser_guard_core::kmsg::{parse_record, Record, SavedLog};

const K61: &str = include_str!("../tests/fixtures/kmsg/raw/nldevcap-k61.kmsg");
const K612: &str = include_str!("../tests/fixtures/kmsg/raw/nldevcap-k612.kmsg");
const DMESG: &str = include_str!("../tests/fixtures/kmsg/raw/nldevcap-k61.dmesg");
const CONSOLE: &str = include_str!("../tests/fixtures/kmsg/raw/nldevcap-k61.console");

fn bench(c: &mut Criterion) {
    let record = b"3,1234,5678901,-;ice 0000:02:00.0 rocep2s0f0: modify_qp invalid for qp_id=1, \
old_state=0x6, new_state=0x3\n SUBSYSTEM=pci\n DEVICE=+pci:0000:02:00.0\n";
    let mut g = c.benchmark_group("kmsg_record");
    g.throughput(Throughput::Elements(1));
    g.bench_function("parse_record (borrowed)", |b| {
        b.iter(|| parse_record(std::hint::black_box(record)).map(|r| r.seq))
    });
    g.bench_function("Record::parse (owned)", |b| {
        b.iter(|| Record::parse(std::hint::black_box(record)).map(|r| r.seq))
    });
    g.finish();

    // About 100k lines of mixed real formats.
    let one = [K61, K612, DMESG, CONSOLE].concat();
    let log = one.repeat(40);
    let lines = log.lines().count() as u64;
    let mut g = c.benchmark_group("saved_log");
    g.throughput(Throughput::Elements(lines));
    g.bench_function("SavedLog::from_bytes, mixed captures (per line)", |b| {
        b.iter(|| {
            SavedLog::from_bytes(std::hint::black_box(log.as_bytes()))
                .filter_map(Result::ok)
                .map(|e| e.record.text.len())
                .sum::<usize>()
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
