//! Decoding a 100 000-QP RES_QP_GET dump and extracting the `QpEntry` views.
//!
//! How the bytes are built (realistic, as the kernel sends them): 4 RDMA devices with
//! 25 000 QPs each (per device: the GSI QP 1 owned by `ib_core`, then RC QPs, half of them
//! kernel QPs owned by `rdma_cm` as iSER's are, half user QPs with a PID and PD number). For
//! every device the dump is cut into messages the way `res_get_common_dumpit` does it: each
//! message repeats DEV_INDEX and DEV_NAME, opens RES_QP and adds RES_QP_ENTRY nests until the
//! next one would not fit in the dump buffer (32 KiB: netlink_recvmsg caps max_recvmsg_len at
//! SKB_WITH_OVERHEAD(32768), and nldev_dump.py and iproute2 receive with large buffers), then
//! the next message continues. About 400 QPs per message, 250 messages; each message is a
//! separate buffer, as one recv() returns one message.

use std::hint::black_box;

use criterion::{criterion_group, Criterion, Throughput};
use iser_guard_core::nldev::{
    decode, encode, inner, request, QpDump, QpEntries, QpEntry, QpTypeOrRaw,
};
use iser_guard_core::qp::{QpState, QpType};
use netlink_packet_core::{Emitable, NLM_F_MULTIPART};

const DEVICES: u32 = 4;
const QPS_PER_DEVICE: u32 = 25_000;
/// Room for one dump message (see the module comment).
const DUMP_BUFFER: usize = 32_768 - 320;

fn qp(dev_index: u32, dev_name: &str, i: u32) -> QpEntry {
    let gsi = i == 0;
    let kernel = gsi || i % 2 == 1;
    QpEntry {
        dev_index,
        dev_name: dev_name.to_string(),
        port: Some(1),
        lqpn: if gsi { 1 } else { 16 + i },
        rqpn: (!gsi).then_some(1_000_000 + i),
        qp_type: QpTypeOrRaw::Known(if gsi { QpType::Gsi } else { QpType::Rc }),
        state: QpState::Rts,
        pid: (!kernel).then_some(4000 + i % 97),
        kern_name: kernel.then(|| if gsi { "ib_core" } else { "rdma_cm" }.to_string()),
        sq_psn: Some(i.wrapping_mul(7919) & 0xff_ffff),
        rq_psn: (!gsi).then_some(i.wrapping_mul(104_729) & 0xff_ffff),
        path_mig_state: (!gsi).then_some(0),
        pdn: (!kernel).then_some(3),
    }
}

/// The dump messages of all devices, one byte buffer per message.
fn dump() -> Vec<Vec<u8>> {
    let mut messages = Vec::new();
    for dev_index in 0..DEVICES {
        let seq = 1000 + dev_index;
        let dev_name = format!("rocep{dev_index}s0f0");
        let header_len = QpEntry::dump_message(dev_index, &dev_name, &[])
            .attributes
            .iter()
            .map(Emitable::buffer_len)
            .sum::<usize>()
            + 16;
        let mut chunk: Vec<QpEntry> = Vec::new();
        let mut len = header_len;
        for i in 0..QPS_PER_DEVICE {
            let q = qp(dev_index, &dev_name, i);
            let entry = 4 + q
                .to_attributes()
                .iter()
                .map(Emitable::buffer_len)
                .sum::<usize>();
            if len + entry > DUMP_BUFFER {
                messages.push(message(dev_index, &dev_name, &chunk, seq));
                chunk.clear();
                len = header_len;
            }
            len += entry;
            chunk.push(q);
        }
        messages.push(message(dev_index, &dev_name, &chunk, seq));
    }
    messages
}

fn message(dev_index: u32, dev_name: &str, qps: &[QpEntry], seq: u32) -> Vec<u8> {
    let m = QpEntry::dump_message(dev_index, dev_name, qps);
    let nl = request::request(m.command, m.attributes, NLM_F_MULTIPART, seq);
    encode(&nl).expect("dump message fits")
}

/// What the poller does: each message read straight into `QpEntry` views.
fn stream_extract(messages: &[Vec<u8>]) -> Vec<QpEntry> {
    let mut out = Vec::with_capacity(100_000);
    for bytes in messages {
        let dump = QpDump::decode(bytes).expect("valid dump");
        out.extend(dump.entries.into_iter().map(|e| e.expect("valid entry")));
    }
    out
}

/// The general path: the whole attribute tree, then the views.
fn decode_and_extract(messages: &[Vec<u8>]) -> Vec<QpEntry> {
    let mut out = Vec::with_capacity(100_000);
    for bytes in messages {
        let m = decode(bytes).expect("valid dump");
        let entries = QpEntries::new(inner(&m).expect("nldev message")).expect("qp dump");
        out.extend(entries.map(|e| e.expect("valid entry")));
    }
    out
}

fn bench(c: &mut Criterion) {
    let messages = dump();
    let total: usize = messages.iter().map(Vec::len).sum();
    let qps = stream_extract(&messages);
    assert_eq!(qps, decode_and_extract(&messages));
    assert_eq!(qps.len(), (DEVICES * QPS_PER_DEVICE) as usize);
    assert_eq!(qps.iter().filter(|q| q.is_gsi()).count(), DEVICES as usize);
    eprintln!(
        "nldev_decode: {} QPs in {} messages, {} bytes ({} bytes/message on average)",
        qps.len(),
        messages.len(),
        total,
        total / messages.len()
    );
    let mut group = c.benchmark_group("nldev");
    group.throughput(Throughput::Elements(u64::from(DEVICES * QPS_PER_DEVICE)));
    group.sample_size(20);
    group.bench_function("qp_dump_stream_100k_to_qp_entries", |b| {
        b.iter(|| black_box(stream_extract(black_box(&messages))))
    });
    group.bench_function("decode_tree_100k_then_qp_entries", |b| {
        b.iter(|| black_box(decode_and_extract(black_box(&messages))))
    });
    group.bench_function("decode_tree_100k_messages_only", |b| {
        b.iter(|| {
            for bytes in black_box(&messages) {
                black_box(decode(bytes).expect("valid dump"));
            }
        })
    });
    group.finish();
}

criterion_group!(benches, bench);

/// On-CPU time of this thread (excludes time spent waiting for a CPU on a loaded machine).
fn thread_cpu_time() -> std::time::Duration {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec into the valid, exclusively borrowed `ts`.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(rc, 0, "clock_gettime(CLOCK_THREAD_CPUTIME_ID)");
    std::time::Duration::new(
        u64::try_from(ts.tv_sec).unwrap_or(0),
        u32::try_from(ts.tv_nsec).unwrap_or(0),
    )
}

/// `NLDEV_CPU_ITERS=N cargo bench --bench nldev_decode`: instead of criterion's wall-clock
/// figures, run each path N times and print the mean on-CPU time per 100k-QP dump. On a
/// machine shared with other builds wall-clock time mostly measures the wait for a CPU.
fn cpu_time_report(iterations: u32) {
    let messages = dump();
    type Path = fn(&[Vec<u8>]) -> Vec<QpEntry>;
    let paths: [(&str, Path); 2] = [
        ("qp_dump_stream_100k_to_qp_entries", stream_extract),
        ("decode_tree_100k_then_qp_entries", decode_and_extract),
    ];
    for (name, path) in paths {
        black_box(path(&messages)); // warm-up
        let start = thread_cpu_time();
        for _ in 0..iterations {
            black_box(path(black_box(&messages)));
        }
        let per = (thread_cpu_time() - start) / iterations.max(1);
        println!(
            "{name}: {:.2} ms CPU per 100k-QP dump ({iterations} runs)",
            per.as_secs_f64() * 1e3
        );
    }
}

fn main() {
    if let Some(n) = std::env::var("NLDEV_CPU_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        cpu_time_report(n);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
