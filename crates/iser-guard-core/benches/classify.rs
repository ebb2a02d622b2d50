//! Classification throughput on a mixed corpus built from the real lab captures
//! (tests/fixtures/kmsg): the message texts of every saved log, mostly unrelated kernel lines.
//!
//! - `mixed`: every unrelated line of the captures plus one in 20 of the recognised ones
//!   (about 1 % RDMA/iSCSI lines, as on a production host);
//! - `captures_as_is`: every line as captured (the lab's failure runs: ~16 % recognised);
//! - `prefilter_only`: the anchor test alone on the mixed corpus.
//!
//! Throughput is reported in records (elements) per second.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use iser_guard_core::kmsg::SavedLog;
use iser_guard_core::signatures::{classify, prefilter};

const FIXTURES: &[&str] = &[
    "linkdown40.dmesg",
    "linkdown1.dmesg",
    "blackhole1.dmesg",
    "rxeflap-dyndbg.dmesg",
    "rxeflap2-nptoggle.dmesg",
    "field-incident.kmsg",
    "raw/nldevcap-k61.kmsg",
    "raw/nldevcap-k612.kmsg",
];

/// (text, DEVICE=) of every record of every fixture.
fn records() -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for f in FIXTURES {
        let path = format!("{}/tests/fixtures/kmsg/{f}", env!("CARGO_MANIFEST_DIR"));
        let Ok(bytes) = std::fs::read(&path) else {
            eprintln!("skipping missing fixture {path}");
            continue;
        };
        for e in SavedLog::from_bytes(&bytes).flatten() {
            let r = e.record;
            out.push((
                r.text.to_string(),
                r.dict_value("DEVICE").map(str::to_string),
            ));
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let all = records();
    let (hits, misses): (Vec<_>, Vec<_>) = all
        .iter()
        .cloned()
        .partition(|(t, d)| classify(t, d.as_deref()).is_some());
    let mut mixed = misses.clone();
    // Spread one in 20 recognised lines evenly through the unrelated ones.
    let step = (misses.len() / (hits.len() / 20).max(1)).max(1);
    for (i, h) in hits.iter().step_by(20).enumerate() {
        let at = ((i + 1) * step).min(mixed.len());
        mixed.insert(at, h.clone());
    }
    eprintln!(
        "corpus: {} records as captured ({} recognised); mixed: {} records ({} recognised)",
        all.len(),
        hits.len(),
        mixed.len(),
        hits.len().div_ceil(20)
    );

    // The build machines are shared: criterion's wall-clock figures drop with the load.
    // CPU time of this thread gives the per-core cost regardless of other processes.
    for (name, corpus) in [("mixed", &mixed), ("captures_as_is", &all)] {
        let rounds = 200;
        let t0 = thread_cpu_ns();
        let mut n = 0usize;
        for _ in 0..rounds {
            for (t, d) in corpus.iter() {
                n += usize::from(classify(black_box(t), d.as_deref()).is_some());
            }
        }
        let ns = thread_cpu_ns().saturating_sub(t0).max(1);
        let recs = (rounds * corpus.len()) as u128;
        eprintln!(
            "cpu-time: classify/{name}: {:.1} M records/s per core ({:.1} ns/record, {n} hits)",
            recs as f64 * 1e3 / ns as f64,
            ns as f64 / recs as f64
        );
    }

    let mut g = c.benchmark_group("classify");
    g.throughput(Throughput::Elements(mixed.len() as u64));
    g.bench_function("mixed", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (t, d) in &mixed {
                n += usize::from(classify(black_box(t), d.as_deref()).is_some());
            }
            n
        })
    });
    g.bench_function("prefilter_only", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (t, _) in &mixed {
                n += usize::from(prefilter(black_box(t.as_bytes())));
            }
            n
        })
    });
    g.throughput(Throughput::Elements(all.len() as u64));
    g.bench_function("captures_as_is", |b| {
        b.iter(|| {
            let mut n = 0usize;
            for (t, d) in &all {
                n += usize::from(classify(black_box(t), d.as_deref()).is_some());
            }
            n
        })
    });
    g.finish();
}

/// CPU time consumed by this thread, nanoseconds.
fn thread_cpu_ns() -> u128 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID is always supported
    // on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    u128::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u128::try_from(ts.tv_nsec).unwrap_or(0)
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(std::time::Duration::from_secs(1))
        .measurement_time(std::time::Duration::from_secs(4))
        .sample_size(30);
    targets = bench
}
criterion_main!(benches);
