//! What exporting metrics costs on a large host: two RDMA devices with 1 000 RC QPs each (plus
//! their GSI QP in ERR and one RC QP in SQE). Three figures: folding one netlink dump into the
//! gauges (the census, once per `poll.netlink`), encoding the exposition (once per
//! `metrics.interval` and per `/metrics` request), and the atomic textfile write.

use criterion::{criterion_group, criterion_main, Criterion};
use iser_guard::core::nldev::{DeviceInfo, IbPortState, PhysState, PortInfo, QpEntry, QpTypeOrRaw};
use iser_guard::core::qp::{QpState, QpType};
use iser_guard::core::time::Instant;
use iser_guard::core::topology::{DeviceObservation, Snapshot, Topology};
use iser_guard::metrics::Metrics;

fn qp(index: u32, name: &str, lqpn: u32, t: QpType, state: QpState) -> QpEntry {
    QpEntry {
        dev_index: index,
        dev_name: name.into(),
        port: Some(1),
        lqpn,
        rqpn: None,
        qp_type: QpTypeOrRaw::Known(t),
        state,
        pid: None,
        kern_name: Some("ib_core".into()),
        sq_psn: None,
        rq_psn: None,
        path_mig_state: None,
        pdn: None,
    }
}

fn device(index: u32, name: &str, function: u32) -> DeviceObservation {
    let mut qps = vec![
        qp(index, name, 1, QpType::Gsi, QpState::Err),
        qp(index, name, 17, QpType::Rc, QpState::Sqe),
    ];
    qps.extend((0..1000).map(|n| qp(index, name, 100 + n, QpType::Rc, QpState::Rts)));
    DeviceObservation {
        info: DeviceInfo {
            index,
            name: name.into(),
            port_count: 1,
            cap_flags: None,
            fw_version: None,
            node_guid: None,
            sys_image_guid: None,
            node_type: None,
            protocol: None,
            dim: None,
            name_assign_type: None,
            dev_type: None,
            parent_name: None,
        },
        parent: Some(format!("pci:0000:02:00.{function}")),
        ports: vec![PortInfo {
            dev_index: index,
            dev_name: name.into(),
            port: 1,
            state: IbPortState::Active,
            phys_state: PhysState::LinkUp,
            netdev_index: Some(index + 1),
            netdev_name: Some(format!("ens1f{function}")),
            cap_flags: None,
            subnet_prefix: None,
            lid: None,
            sm_lid: None,
            lmc: None,
        }],
        qps: Ok(qps),
    }
}

fn bench(c: &mut Criterion) {
    let snapshot = Snapshot {
        devices: vec![device(3, "rocep2s0f0", 0), device(4, "rocep2s0f1", 1)],
    };
    let mut topology = Topology::new();
    topology.apply_snapshot(snapshot, Instant(1_000));
    let m = Metrics::new();
    m.netlink_dump(None, &topology, Default::default());
    c.bench_function("metrics_census_2x1000_qps", |b| {
        b.iter(|| m.netlink_dump(None, &topology, Default::default()))
    });
    c.bench_function("metrics_encode", |b| b.iter(|| m.encode()));
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("iser-guard.prom");
    c.bench_function("metrics_textfile_write", |b| {
        b.iter(|| iser_guard::metrics::export::write_textfile(&path, &m).expect("textfile"))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
