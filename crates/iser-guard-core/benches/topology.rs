//! How long folding one poll's dump into the topology model takes: 2 devices with 50 000 QPs
//! each (1 % in ERR), against a model that already holds the previous poll (the daemon's
//! steady state, every `poll.netlink` seconds).

use criterion::{criterion_group, criterion_main, BatchSize, Criterion};
use iser_guard_core::nldev::{DeviceInfo, IbPortState, PhysState, PortInfo, QpEntry, QpTypeOrRaw};
use iser_guard_core::qp::{QpState, QpType};
use iser_guard_core::time::Instant;
use iser_guard_core::topology::{DeviceObservation, Snapshot, Topology};

fn device(index: u32, name: &str, qps: u32) -> DeviceObservation {
    let info = DeviceInfo {
        index,
        name: name.into(),
        port_count: 1,
        cap_flags: None,
        fw_version: None,
        node_guid: None,
        sys_image_guid: None,
        node_type: Some(1),
        protocol: Some("roce".into()),
        dim: None,
        name_assign_type: None,
        dev_type: None,
        parent_name: None,
    };
    let port = PortInfo {
        dev_index: index,
        dev_name: name.into(),
        port: 1,
        state: IbPortState::Active,
        phys_state: PhysState::LinkUp,
        netdev_index: Some(index + 10),
        netdev_name: Some(format!("eth{index}")),
        cap_flags: None,
        subnet_prefix: None,
        lid: None,
        sm_lid: None,
        lmc: None,
    };
    let qps = (1..=qps)
        .map(|lqpn| QpEntry {
            dev_index: index,
            dev_name: name.into(),
            port: Some(1),
            lqpn,
            rqpn: (lqpn > 1).then_some(lqpn),
            qp_type: QpTypeOrRaw::Known(if lqpn == 1 { QpType::Gsi } else { QpType::Rc }),
            state: if lqpn % 100 == 0 {
                QpState::Err
            } else {
                QpState::Rts
            },
            pid: None,
            kern_name: Some("rdma_cm".into()),
            sq_psn: Some(lqpn),
            rq_psn: Some(lqpn),
            path_mig_state: Some(0),
            pdn: None,
        })
        .collect();
    DeviceObservation {
        info,
        parent: Some(format!("pci:0000:0{index}:00.0")),
        ports: vec![port],
        qps: Ok(qps),
    }
}

fn bench(c: &mut Criterion) {
    let snapshot = Snapshot {
        devices: vec![
            device(0, "rocep2s0f0", 50_000),
            device(1, "rocep3s0f0", 50_000),
        ],
    };
    let mut warm = Topology::new();
    warm.apply_snapshot(snapshot.clone(), Instant(0));
    c.bench_function("topology_fold_100k_qps", |b| {
        b.iter_batched(
            || (warm.clone(), snapshot.clone()),
            |(mut t, s)| t.apply_snapshot(s, Instant(5_000)),
            BatchSize::LargeInput,
        )
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
