//! The driver-stack reader (`io::sysfs::stack`) on the fake host's sysfs tree: an irdma
//! module tainted `O` is recognised as out-of-tree, an ice function whose netdev is in a bond
//! and has no RDMA device as bonded without RDMA, and an in-tree host as nothing special.

#[path = "support/fake_host.rs"]
mod fake_host;

use std::fs;
use std::os::unix::fs::symlink;

use fake_host::FakeHost;
use iser_guard::core::driver_stack::{detect, StackCondition};
use iser_guard::io::sysfs::{scan, stack};

#[test]
fn an_in_tree_host_shows_nothing() {
    let h = FakeHost::new();
    fs::write(h.sys().join("module/irdma/taint"), "\n").unwrap();
    let s = scan(&h.sys()).unwrap();
    assert_eq!(detect(&stack::read(&h.sys(), None, &s)), vec![]);
}

#[test]
fn a_module_tainted_o_is_out_of_tree() {
    let h = FakeHost::new();
    fs::write(h.sys().join("module/irdma/taint"), "O\n").unwrap();
    let s = scan(&h.sys()).unwrap();
    let facts = stack::read(&h.sys(), None, &s);
    assert_eq!(
        facts.modules[0].aux,
        vec![("ice.roce.0".into(), "irdma".into())]
    );
    assert_eq!(
        detect(&facts),
        vec![StackCondition::OutOfTree {
            module: "irdma".into(),
            devices: vec!["rocep2s0f0".into()],
            evidence: "/sys/module/irdma/taint has O".into(),
        }]
    );
}

#[test]
fn a_bonded_ice_function_without_an_rdma_device_is_named() {
    let h = FakeHost::new();
    let sys = h.sys();
    // A second E810 function, 0000:02:00.1, whose netdev ens1f1 is in bond0 and which
    // carries no RDMA device (ice_lag.c).
    let pf1 = sys.join("devices/pci0000:00/0000:02:00.1");
    fs::create_dir_all(pf1.join("net/ens1f1")).unwrap();
    fs::create_dir_all(sys.join("bus/pci/devices")).unwrap();
    symlink(&pf1, sys.join("bus/pci/devices/0000:02:00.1")).unwrap();
    symlink(&pf1, sys.join("bus/pci/drivers/ice/0000:02:00.1")).unwrap();
    let bond = sys.join("devices/virtual/net/bond0");
    fs::create_dir_all(&bond).unwrap();
    fs::create_dir_all(sys.join("class/net")).unwrap();
    symlink(pf1.join("net/ens1f1"), sys.join("class/net/ens1f1")).unwrap();
    symlink(&bond, pf1.join("net/ens1f1/master")).unwrap();
    let s = scan(&sys).unwrap();
    assert_eq!(
        detect(&stack::read(&sys, None, &s)),
        vec![StackCondition::BondedWithoutRdma {
            pci: "0000:02:00.1".into(),
            netdev: "ens1f1".into(),
            bond: "bond0".into(),
        }]
    );
}
