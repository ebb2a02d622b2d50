//! Costs of the executors' fixed overheads: spawning a program under the deadline runner (the
//! price of every iscsiadm/devlink call), reading one device's sysfs facts and planning, and
//! formatting a syslog datagram. Run: `cargo bench --bench executors`.

use std::os::unix::fs::symlink;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use iser_guard::core::reset_plan::{plan, PlanOptions};
use iser_guard::core::severity::Severity;
use iser_guard::io::process::{run, Invocation};
use iser_guard::io::reset::Sysfs;
use iser_guard::io::syslog::{format_datagram, AlertMessage, FACILITY_DAEMON};

fn fake_e810(root: &std::path::Path) {
    let pf = root.join("devices/pci0000:00/0000:02:00.0");
    let aux = pf.join("ice.roce.0");
    let ib = pf.join("infiniband/rocep2s0f0");
    let drv = root.join("bus/auxiliary/drivers/irdma.gen_2");
    for d in [
        &aux,
        &ib.join("ports/1/gid_attrs/ndevs"),
        &drv,
        &root.join("bus/auxiliary/devices"),
        &root.join("bus/pci/drivers/ice"),
        &root.join("class/infiniband"),
        &root.join("module/irdma"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    symlink(root.join("bus/pci"), pf.join("subsystem")).unwrap();
    symlink(root.join("bus/pci/drivers/ice"), pf.join("driver")).unwrap();
    symlink(root.join("bus/auxiliary"), aux.join("subsystem")).unwrap();
    symlink(&drv, aux.join("driver")).unwrap();
    symlink(root.join("module/irdma"), drv.join("module")).unwrap();
    symlink(&aux, root.join("bus/auxiliary/devices/ice.roce.0")).unwrap();
    symlink(&pf, ib.join("device")).unwrap();
    std::fs::write(ib.join("node_type"), "1: CA\n").unwrap();
    std::fs::write(ib.join("ports/1/gid_attrs/ndevs/0"), "ens1f0\n").unwrap();
    symlink(&ib, root.join("class/infiniband/rocep2s0f0")).unwrap();
}

fn benches(c: &mut Criterion) {
    let inv = Invocation::new("/bin/true", Vec::<String>::new(), Duration::from_secs(10));
    c.bench_function("process::run /bin/true", |b| b.iter(|| run(&inv).unwrap()));

    let dir = tempfile::tempdir().unwrap();
    fake_e810(dir.path());
    let sysfs = Sysfs::new(dir.path());
    let opts = PlanOptions {
        allow_module_reload: true,
        devlink_available: true,
        rdma_available: true,
        same_module_devices: vec![],
    };
    c.bench_function("sysfs facts + plan (E810)", |b| {
        b.iter(|| plan(&sysfs.facts("rocep2s0f0").unwrap().unwrap(), &opts))
    });

    let alert = AlertMessage {
        severity: Severity::Alert,
        what: "RDMA device rocep2s0f0 port 1: GSI QP 1 stuck in ERR".into(),
        why: "every ERR->RTS modify fails with EINVAL".into(),
        todo: "waiting for 192.0.2.2:3260 to answer, then re-creating the device".into(),
    };
    c.bench_function("syslog format_datagram", |b| {
        b.iter(|| format_datagram(FACILITY_DAEMON, "iser-guard", 1234, &alert))
    });
}

criterion_group! {
    name = group;
    config = Criterion::default()
        .measurement_time(Duration::from_secs(3))
        .warm_up_time(Duration::from_secs(1));
    targets = benches
}
criterion_main!(group);
