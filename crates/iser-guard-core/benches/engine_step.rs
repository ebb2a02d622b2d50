//! One engine step on a large host: 64 RDMA devices, 1024 iSCSI sessions (16 per device).
//! Target: under 10 µs per event. Figures go in docs/history/engine.md.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion};
use iser_guard_core::recovery::{
    ActionKind, DiskInfo, Engine, IoErrorKind, Observation, Policy, PortId, Portal, SessionInfo,
    SessionKey, SessionState, StuckEvidence, Trust,
};
use iser_guard_core::time::Instant;

const DEVICES: usize = 64;
const SESSIONS_PER_DEVICE: usize = 16;

fn sessions(failed_device: Option<usize>) -> Vec<SessionInfo> {
    let mut v = Vec::with_capacity(DEVICES * SESSIONS_PER_DEVICE);
    for d in 0..DEVICES {
        for s in 0..SESSIONS_PER_DEVICE {
            let i = d * SESSIONS_PER_DEVICE + s;
            let state = if Some(d) == failed_device {
                SessionState::Failed
            } else {
                SessionState::LoggedIn
            };
            v.push(SessionInfo {
                sid: u32::try_from(i + 1).unwrap_or(0),
                key: SessionKey {
                    target: format!("iqn.2003-01.org.example:t{i}"),
                    portal: Portal::parse(&format!("10.0.{}.{}", d, s + 1), 3260).unwrap(),
                    iface: "iser".into(),
                },
                transport: "iser".into(),
                netdev: None,
                local_ip: None,
                rdma: Some(PortId::new(format!("rocep{d}s0f0"), 1)),
                placed_by: None,
                state,
                disks: vec![DiskInfo::new(format!("sd{i}"), "running")],
            });
        }
    }
    v
}

fn engine() -> Engine {
    let mut p = Policy::default();
    for d in 0..DEVICES {
        p.allow.insert(format!("rocep{d}s0f0"));
    }
    let mut e = Engine::new(p, 1);
    e.handle_sessions(sessions(None), Instant(1));
    // Device 0 is faulted (stuck QP, sessions failed, waiting for its targets).
    e.handle_sessions(sessions(Some(0)), Instant(2));
    e.handle_observation(
        Observation::GsiQpStuck {
            device: "rocep0s0f0".into(),
            port: None,
            evidence: StuckEvidence::ModifyQpInvalid,
        },
        Trust::Trusted,
        Instant(3),
    );
    drain(&mut e);
    e
}

fn drain(e: &mut Engine) -> usize {
    let mut n = 0;
    while let Some(a) = e.poll_action() {
        if !matches!(a.kind, ActionKind::PersistState { .. }) {
            n += 1;
        }
    }
    while e.poll_transition().is_some() {}
    n
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine_step_64_devices_1024_sessions");

    let mut e = engine();
    let mut t = 10u64;
    g.bench_function("stuck-qp line on a faulted port (storm)", |b| {
        b.iter(|| {
            t += 1;
            e.handle_observation(
                black_box(Observation::GsiQpStuck {
                    device: "rocep0s0f0".into(),
                    port: None,
                    evidence: StuckEvidence::MadRtsFailed,
                }),
                Trust::Trusted,
                Instant(t),
            );
            black_box(drain(&mut e))
        })
    });

    let mut e = engine();
    g.bench_function("I/O error on a healthy session", |b| {
        let mut i = 0usize;
        b.iter(|| {
            t += 1;
            i = (i + 1) % (DEVICES * SESSIONS_PER_DEVICE);
            // Spread over sessions of healthy devices so none reaches the zombie threshold.
            let disk = format!(
                "sd{}",
                SESSIONS_PER_DEVICE + i % (DEVICES * SESSIONS_PER_DEVICE - SESSIONS_PER_DEVICE)
            );
            e.handle_observation(
                black_box(Observation::IoError {
                    disk,
                    kind: IoErrorKind::IoError,
                }),
                Trust::Trusted,
                Instant(t * 100_000),
            );
            black_box(drain(&mut e))
        })
    });

    let mut e = engine();
    g.bench_function("forged (userspace) record", |b| {
        b.iter(|| {
            t += 1;
            e.handle_observation(
                black_box(Observation::GsiQpStuck {
                    device: "rocep5s0f0".into(),
                    port: Some(1),
                    evidence: StuckEvidence::ModifyQpInvalid,
                }),
                Trust::Untrusted,
                Instant(t),
            );
            black_box(drain(&mut e))
        })
    });

    let mut e = engine();
    g.bench_function("timer check (handle_timeout + next_timeout)", |b| {
        b.iter(|| {
            t += 1;
            e.handle_timeout(Instant(t));
            black_box(e.next_timeout());
            black_box(drain(&mut e))
        })
    });

    let mut e = engine();
    let snapshot = sessions(Some(0));
    g.bench_function("full iscsiadm snapshot (1024 sessions, one input)", |b| {
        b.iter(|| {
            t += 1;
            e.handle_sessions(black_box(snapshot.clone()), Instant(t));
            black_box(drain(&mut e))
        })
    });

    // Issue 12's distinct-device storm: every record names a device no topology showed.
    // Before, each one made a port and the journal check copied every port per input, so
    // the cost grew with the storm (about 100 records/s in the daemon after a few
    // thousand); now no port is made and the cost stays flat however many came before.
    for before in [0u64, 10_000, 60_000] {
        let mut e = engine();
        for i in 0..before {
            e.handle_observation(
                Observation::GsiQpStuck {
                    device: format!("flood{i}"),
                    port: None,
                    evidence: StuckEvidence::ModifyQpInvalid,
                },
                Trust::Trusted,
                Instant(10 + i / 6),
            );
            drain(&mut e);
        }
        let mut i = before;
        g.bench_function(
            format!("stuck-qp record naming an unknown device, after {before} such records"),
            |b| {
                b.iter(|| {
                    i += 1;
                    e.handle_observation(
                        black_box(Observation::GsiQpStuck {
                            device: format!("flood{i}"),
                            port: None,
                            evidence: StuckEvidence::ModifyQpInvalid,
                        }),
                        Trust::Trusted,
                        Instant(10 + i / 6),
                    );
                    black_box(drain(&mut e))
                })
            },
        );
    }

    let e = engine();
    g.bench_function("journal snapshot (serialize to JSON)", |b| {
        b.iter(|| {
            black_box(
                serde_json::to_vec(&e.snapshot())
                    .map(|v| v.len())
                    .unwrap_or(0),
            )
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
