//! Named scenarios: a host, a policy and a script of what goes wrong when. Used by
//! `iser-guard simulate` and by the scenario tests.

use std::time::Duration;

use super::consumers::{SimConsumer, SimNfsMount, SimOwner};
use super::harness::{Harness, SimError};
use super::host::{HostEvent, RecreateBehaviour, SimDriver, SimHost};
use super::kernel;
use super::multipath::{SimMap, SimMapPath, SimMultipath, SimPathVia};
use crate::config::{OtherSessions, ResetWhen};
use crate::core::recovery::{OperatorCommand, Policy, PortId, Portal};
use crate::core::time::Instant;

/// The field incident's device.
pub const FIELD_DEVICE: &str = "rocep2s0f0";
/// Its PCI function.
pub const FIELD_PCI: &str = "0000:02:00.0";
/// The target of the simulated host.
pub const TARGET_IQN: &str = "iqn.2003-01.org.example:storage";
/// A second target.
pub const TARGET_B_IQN: &str = "iqn.2003-01.org.example:backup";

/// The main portal.
pub fn portal_a() -> Portal {
    Portal::new([10, 0, 0, 5], 3260)
}

/// The second portal.
pub fn portal_b() -> Portal {
    Portal::new([10, 0, 0, 6], 3260)
}

/// The field port.
pub fn field_port() -> PortId {
    PortId::new(FIELD_DEVICE, 1)
}

fn at(secs: u64) -> Instant {
    Instant(secs * 1000)
}

/// A named scenario.
#[derive(Debug, Clone)]
pub struct Scenario {
    /// Name (`iser-guard simulate NAME`).
    pub name: &'static str,
    /// One line.
    pub about: &'static str,
    /// How long to run.
    pub duration: Duration,
    /// The host, with its script scheduled, and the policy.
    pub build: fn() -> (SimHost, Policy),
}

impl Scenario {
    /// A harness ready to run this scenario.
    pub fn harness(&self, seed: u64) -> Harness {
        let (host, policy) = (self.build)();
        Harness::new(host, policy, seed)
    }

    /// Runs the scenario to its end, at most `max_steps` steps.
    pub fn run(&self, seed: u64, max_steps: usize) -> Result<Harness, SimError> {
        let mut h = self.harness(seed);
        h.run_until(Instant::ZERO.plus(self.duration), max_steps)?;
        Ok(h)
    }
}

/// The default policy of the scenarios: the shipped defaults, with the field device allowed.
pub fn base_policy() -> Policy {
    let mut p = Policy::default();
    p.allow.insert(FIELD_DEVICE.to_string());
    p
}

/// One E810 (irdma) device with one session to the target.
pub fn field_host() -> SimHost {
    let mut h = SimHost::new();
    h.add_device(FIELD_DEVICE, FIELD_PCI, SimDriver::Irdma, 1);
    h.add_target(TARGET_IQN, portal_a());
    h.add_session(TARGET_IQN, &portal_a(), field_port(), &["sda"]);
    h
}

fn power(h: &mut SimHost, secs: u64, on: bool) {
    h.schedule(
        at(secs),
        HostEvent::TargetPower {
            portal: portal_a(),
            on,
        },
    );
}

fn field_incident() -> (SimHost, Policy) {
    let mut h = field_host();
    power(&mut h, 60, false);
    power(&mut h, 240, true);
    (h, base_policy())
}

fn rxe_host() -> SimHost {
    let mut h = SimHost::new();
    h.add_device("rxe_ini", "ini0", SimDriver::Rxe, 1);
    h.add_target(TARGET_IQN, portal_a());
    h.add_session(TARGET_IQN, &portal_a(), PortId::new("rxe_ini", 1), &["sda"]);
    h
}

fn rxe_policy() -> Policy {
    let mut p = Policy::default();
    p.allow.insert("rxe_ini".to_string());
    p
}

fn zombie() -> (SimHost, Policy) {
    let mut h = rxe_host();
    h.schedule(
        at(60),
        HostEvent::TargetLink {
            portal: portal_a(),
            up: false,
        },
    );
    h.schedule(
        at(100),
        HostEvent::TargetLink {
            portal: portal_a(),
            up: true,
        },
    );
    (h, rxe_policy())
}

fn device_vanishes() -> (SimHost, Policy) {
    let mut h = rxe_host();
    let dev = "rxe_ini".to_string();
    h.schedule(
        at(60),
        HostEvent::InitiatorDevice {
            device: dev.clone(),
            present: false,
        },
    );
    h.schedule(
        at(80),
        HostEvent::InitiatorDevice {
            device: dev,
            present: true,
        },
    );
    (h, rxe_policy())
}

fn device_stays_gone() -> (SimHost, Policy) {
    let mut h = rxe_host();
    h.schedule(
        at(60),
        HostEvent::InitiatorDevice {
            device: "rxe_ini".into(),
            present: false,
        },
    );
    (h, rxe_policy())
}

fn dead_listener() -> (SimHost, Policy) {
    let mut h = rxe_host();
    h.schedule(
        at(60),
        HostEvent::TargetListener {
            portal: portal_a(),
            up: false,
        },
    );
    h.schedule(
        at(400),
        HostEvent::TargetListener {
            portal: portal_a(),
            up: true,
        },
    );
    (h, rxe_policy())
}

/// The 6.1 lab with dynamic debug on for rdma_cm: the kernel logs `RDMA CM: REJECTED`.
fn dead_listener_dyndbg() -> (SimHost, Policy) {
    let (mut h, p) = dead_listener();
    h.cm_debug = true;
    (h, p)
}

/// The lab's layout: rxe_ini (initiator, ini0) and rxe_tgt (target, tgt0), default iser
/// iface: only the CM id table and the route tie the session to rxe_ini. Target off 40 s.
fn lab_two_devices() -> (SimHost, Policy) {
    let mut h = rxe_host();
    h.schedule(
        at(60),
        HostEvent::TargetPower {
            portal: portal_a(),
            on: false,
        },
    );
    h.schedule(
        at(100),
        HostEvent::TargetPower {
            portal: portal_a(),
            on: true,
        },
    );
    (h, rxe_policy())
}

/// The lab's in-kernel field incident (scripts/lab field-incident-kernel): Soft-RoCE whose
/// rxe_ini has irdma's QP 1 (the lab's rdma_rxe), rdma_cm's dynamic debug on as in the lab.
/// The target is powered off at 60 s; the kernel notices 21 s later and QP 1 goes to ERR with
/// the field's pair of lines (no line is injected); the target is back at 100 s, and every
/// iscsid attempt from then on prints the pair until the device is re-created.
fn lab_field_incident() -> (SimHost, Policy) {
    let mut h = rxe_host();
    h.cm_debug = true;
    if let Some(d) = h.devices.get_mut("rxe_ini") {
        d.irdma_gsi = true;
    }
    power(&mut h, 60, false);
    power(&mut h, 100, true);
    (h, rxe_policy())
}

/// A dual-port E810 (two irdma devices, one per PCI function, each on its own netdev), one
/// session on each; only the target behind port 0 goes away.
fn dual_port_nic() -> (SimHost, Policy) {
    let mut h = field_host();
    h.add_device("rocep2s0f1", "0000:02:00.1", SimDriver::Irdma, 1);
    h.add_target(TARGET_B_IQN, portal_b());
    h.add_session(
        TARGET_B_IQN,
        &portal_b(),
        PortId::new("rocep2s0f1", 1),
        &["sdb"],
    );
    power(&mut h, 60, false);
    power(&mut h, 240, true);
    let mut p = base_policy();
    p.allow.insert("rocep2s0f1".into());
    (h, p)
}

/// Two RDMA ports and no evidence: the agent runs on sysfs alone (no CM id table) and the
/// route lookup answers nothing; the target goes away for 40 s and iscsid recovers.
fn no_placement_evidence() -> (SimHost, Policy) {
    let (mut h, p) = lab_two_devices();
    h.cm_id_table = false;
    h.routes.clear();
    (h, p)
}

/// The field incident on a host where nothing places the session (no CM id table, no
/// route answer, two RDMA ports): the stuck QP is seen, but no portal is known for the port.
fn field_incident_unplaced() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.cm_id_table = false;
    h.routes.clear();
    (h, p)
}

/// The field incident on a 6.8-like kernel (Ubuntu 24.04): no RDMA netlink device events,
/// the same QP and CM id dumps; the re-created device is seen at the next dump.
fn field_incident_6_8() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.device_events = false;
    (h, p)
}

/// The initiator's device deleted at 62 s and back at 83 s on a 6.8-like kernel: both only
/// in the dumps (every 5 s from 0 s: at 65 s and 85 s).
fn device_vanishes_6_8() -> (SimHost, Policy) {
    let mut h = rxe_host();
    h.device_events = false;
    for (secs, present) in [(62, false), (83, true)] {
        h.schedule(
            at(secs),
            HostEvent::InitiatorDevice {
                device: "rxe_ini".into(),
                present,
            },
        );
    }
    (h, rxe_policy())
}

fn target_blip() -> (SimHost, Policy) {
    let mut h = field_host();
    power(&mut h, 60, false);
    power(&mut h, 65, true);
    (h, base_policy())
}

fn target_never_returns() -> (SimHost, Policy) {
    let mut h = field_host();
    power(&mut h, 60, false);
    let mut p = base_policy();
    p.target_wait_max = Duration::from_secs(600);
    (h, p)
}

fn flapping() -> (SimHost, Policy) {
    let mut h = field_host();
    power(&mut h, 60, false);
    // For a minute the target answers 0.4 s out of every 2 s (the lab's flap), then stays
    // up from 300 s: it is back only after answering probe-successes probes poll.probe
    // apart (3 × 0.25 s: 0.5 s), so no flap (0.4 s up) is a return.
    for flap in 0..30u64 {
        let up = 200_000 + flap * 2_000;
        for (ms, on) in [(up, true), (up + 400, false)] {
            h.schedule(
                Instant(ms),
                HostEvent::TargetPower {
                    portal: portal_a(),
                    on,
                },
            );
        }
    }
    power(&mut h, 300, true);
    (h, base_policy())
}

fn recreate_fails_once() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        d.plans.push_back(RecreateBehaviour::Fail(
            "devlink: enable_roce: Device or resource busy".into(),
        ));
    }
    (h, p)
}

fn iscsiadm_hangs() -> (SimHost, Policy) {
    let (mut h, p) = zombie();
    h.iscsiadm.hang_next = 1;
    (h, p)
}

fn iscsid_recovers() -> (SimHost, Policy) {
    let mut h = rxe_host();
    h.schedule(
        at(60),
        HostEvent::TargetPower {
            portal: portal_a(),
            on: false,
        },
    );
    h.schedule(
        at(100),
        HostEvent::TargetPower {
            portal: portal_a(),
            on: true,
        },
    );
    (h, rxe_policy())
}

fn two_ports() -> (SimHost, Policy) {
    let mut h = SimHost::new();
    h.add_device("ibp65s0", "0000:41:00.0", SimDriver::Irdma, 2);
    h.add_target(TARGET_IQN, portal_a());
    h.add_session(TARGET_IQN, &portal_a(), PortId::new("ibp65s0", 1), &["sda"]);
    let key_b = portal_b();
    h.add_target(TARGET_IQN, key_b.clone());
    h.add_session(TARGET_IQN, &key_b, PortId::new("ibp65s0", 2), &["sdb"]);
    for (s, on) in [(60, false), (240, true)] {
        for portal in [portal_a(), portal_b()] {
            h.schedule(at(s), HostEvent::TargetPower { portal, on });
        }
    }
    let mut p = Policy::default();
    p.allow.insert("ibp65s0".into());
    (h, p)
}

fn two_devices() -> (SimHost, Policy) {
    let mut h = field_host();
    h.add_device("rocep2s0f1", "0000:02:00.1", SimDriver::Irdma, 1);
    h.add_target(TARGET_B_IQN, portal_b());
    h.add_session(
        TARGET_B_IQN,
        &portal_b(),
        PortId::new("rocep2s0f1", 1),
        &["sdb"],
    );
    for (s, on) in [(60, false), (240, true)] {
        for portal in [portal_a(), portal_b()] {
            h.schedule(at(s), HostEvent::TargetPower { portal, on });
        }
    }
    let mut p = base_policy();
    p.allow.insert("rocep2s0f1".into());
    (h, p)
}

fn dry_run() -> (SimHost, Policy) {
    let (h, mut p) = field_incident();
    p.dry_run = true;
    (h, p)
}

fn storm() -> (SimHost, Policy) {
    let mut h = field_host();
    h.schedule(
        at(60),
        HostEvent::Lines {
            facility: 0,
            lines: vec![kernel::cm(kernel::CM_ADDR_ERROR); 10_000],
        },
    );
    (h, base_policy())
}

fn forged() -> (SimHost, Policy) {
    let mut h = field_host();
    let mut lines = Vec::new();
    for _ in 0..50 {
        lines.push(kernel::modify_qp_invalid(FIELD_PCI, FIELD_DEVICE));
        lines.push(kernel::mad_send_error(FIELD_DEVICE));
    }
    h.schedule(at(60), HostEvent::Lines { facility: 1, lines });
    (h, base_policy())
}

fn not_allowed() -> (SimHost, Policy) {
    let (h, _) = field_incident();
    (h, Policy::default())
}

fn shared_device_host() -> SimHost {
    let mut h = field_host();
    h.add_target(TARGET_B_IQN, portal_b());
    h.add_session(TARGET_B_IQN, &portal_b(), field_port(), &["sdb"]);
    power(&mut h, 60, false);
    power(&mut h, 240, true);
    h
}

fn other_sessions_wait() -> (SimHost, Policy) {
    let mut h = shared_device_host();
    h.schedule(
        at(400),
        HostEvent::Command(OperatorCommand::Recover {
            device: FIELD_DEVICE.into(),
            port: Some(1),
        }),
    );
    (h, base_policy())
}

fn other_sessions_proceed() -> (SimHost, Policy) {
    let h = shared_device_host();
    let mut p = base_policy();
    p.other_sessions = OtherSessions::Proceed;
    (h, p)
}

/// The field incident on a device that also carries an NVMe-over-RDMA controller whose
/// target stays up: the controller is live, so the re-creation waits for the operator.
fn healthy_nvme_holds() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.rdma_consumers
        .push(SimConsumer::nvme(FIELD_DEVICE, 1, None));
    h.schedule(
        at(400),
        HostEvent::Command(OperatorCommand::Recover {
            device: FIELD_DEVICE.into(),
            port: Some(1),
        }),
    );
    (h, p)
}

/// The field incident with a user-space RDMA consumer (a librdmacm listener) on the device:
/// it holds the re-creation until the operator's word.
fn user_space_consumer() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.rdma_consumers
        .push(SimConsumer::process(FIELD_DEVICE, 1, 4242, "spdk_tgt"));
    h.schedule(
        at(400),
        HostEvent::Command(OperatorCommand::Recover {
            device: FIELD_DEVICE.into(),
            port: Some(1),
        }),
    );
    (h, p)
}

/// The field incident with an NVMe-over-RDMA controller to the same target: the target's
/// loss breaks it too (its QPs in ERR), so nothing live is in the way and the re-creation
/// runs when the target is back.
fn consumers_broken() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.rdma_consumers
        .push(SimConsumer::nvme(FIELD_DEVICE, 1, Some(portal_a())));
    (h, p)
}

/// The field incident on a device that carries iSER, NVMe over RDMA and NFS over RDMA to
/// the same target host (nvme-cli installed): the target's loss breaks all three, the
/// re-creation runs when the target is back, iscsiadm brings the sessions back, `nvme
/// connect` the controller (renumbered), and xprtrdma the NFS mount on the check's stat.
fn mixed_consumers() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.nvme_cli = true;
    h.rdma_consumers.push(SimConsumer::nvme_controller(
        FIELD_DEVICE,
        1,
        Some(portal_a()),
        0,
    ));
    add_nfs_mount(&mut h, "/mnt/nfs data", Some(portal_a()));
    (h, p)
}

/// An NFSv4.2 mount at `mount_point` over RDMA from `server`'s host (`None`: a server that
/// never goes away) on the field port: its rpcrdma transport and its mountinfo line.
fn add_nfs_mount(h: &mut SimHost, mount_point: &str, server: Option<Portal>) {
    let c = SimConsumer::nfs_client(FIELD_DEVICE, 1, server);
    h.nfs_mounts.push(SimNfsMount::new(
        mount_point,
        c.nvme_traddr(),
        std::net::IpAddr::from([192, 168, 1, 1]),
    ));
    h.rdma_consumers.push(c);
}

/// The field incident with an NFS over RDMA mount whose server wedged meanwhile: after the
/// re-creation iSER recovers as usual, the mount's stat does not answer within the window,
/// and one critical alert names it.
fn nfs_mount_silent() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    add_nfs_mount(&mut h, "/mnt/scratch", Some(portal_a()));
    h.nfs_mounts[0].stat_hangs = true;
    (h, p)
}

/// A stuck port whose device also carries a live NFS over RDMA mount (its server elsewhere,
/// answering): the kernel reconnects it, so it does not hold the automatic re-creation, and
/// the check after it finds it answering.
fn healthy_nfs_does_not_hold() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    add_nfs_mount(&mut h, "/srv/home", None);
    (h, p)
}

/// The NVMe target's host of `nvme_target_later`: its own address, NVMe over RDMA only
/// (4420, no TCP listener, as nvmet-rdma).
fn nvme_portal() -> Portal {
    Portal::new([10, 0, 0, 7], crate::core::nvme_fabrics::NVME_RDMA_PORT)
}

/// iSER and NVMe over RDMA on one device to two target hosts that both go away; the NVMe
/// target comes back a minute after the iSCSI one. The daemon probes the NVMe portal too
/// (4420, found by ARP since nothing listens on TCP) and re-creates only when both answer:
/// re-creating earlier would leave the controller deleted, its reconnect refused.
fn nvme_target_later() -> (SimHost, Policy) {
    let (mut h, p) = mixed_consumers();
    h.add_target("nqn.2014-08.org.example:nvme-only", nvme_portal());
    if let Some(t) = h.targets.get_mut(&nvme_portal()) {
        t.tcp_listener = false;
    }
    for c in h.rdma_consumers.iter_mut() {
        if matches!(&c.owner, SimOwner::Module(m) if m == "nvme_rdma") {
            c.target = Some(nvme_portal());
        }
    }
    for (secs, on) in [(60, false), (300, true)] {
        h.schedule(
            at(secs),
            HostEvent::TargetPower {
                portal: nvme_portal(),
                on,
            },
        );
    }
    (h, p)
}

/// The same on a host without nvme-cli: the controller is deleted with the device and
/// reported not brought back; the iSCSI sessions recover as usual.
fn mixed_consumers_no_nvme_cli() -> (SimHost, Policy) {
    let (mut h, p) = mixed_consumers();
    h.nvme_cli = false;
    (h, p)
}

/// A healthy NVMe controller (its target elsewhere, still answering) with nvme-cli on the
/// host: it still holds the automatic re-creation (its block devices would go with the
/// device), and when the operator recovers the port, `nvme connect` brings it back.
fn healthy_nvme_holds_then_reconnected() -> (SimHost, Policy) {
    let (mut h, p) = healthy_nvme_holds();
    h.nvme_cli = true;
    h.rdma_consumers.clear();
    h.rdma_consumers
        .push(SimConsumer::nvme_controller(FIELD_DEVICE, 1, None, 0));
    (h, p)
}

fn iser_node(iqn: &str, portal: Portal) -> crate::core::recovery::SessionKey {
    crate::core::recovery::SessionKey {
        target: iqn.to_string(),
        portal,
        iface: "iser".to_string(),
    }
}

/// The field incident on a device that also carries a healthy session to a second target,
/// whose LUN is a path of dm-multipath map mpathb; the map's other path (sdz, FC, not over
/// RDMA) is failed. recovery.other-sessions = proceed lets the healthy session drop, but the
/// re-creation would leave mpathb with no path at all: it holds, naming the map and path,
/// until the FC path comes back at 400 s; then it runs, and the session's path is active
/// in mpathb again after it.
fn last_multipath_path() -> (SimHost, Policy) {
    let mut h = shared_device_host();
    h.multipath = Some(SimMultipath {
        maps: vec![SimMap {
            name: "mpathb".into(),
            paths: vec![
                SimMapPath {
                    via: SimPathVia::Session {
                        node: iser_node(TARGET_B_IQN, portal_b()),
                        lun: 0,
                    },
                    failed: false,
                },
                SimMapPath {
                    via: SimPathVia::Other {
                        dev: "sdz".into(),
                        host: 2,
                    },
                    failed: true,
                },
            ],
        }],
        checker_reinstates: true,
        reinstated: Vec::new(),
    });
    h.schedule(
        at(400),
        HostEvent::MultipathOther {
            dev: "sdz".into(),
            failed: false,
        },
    );
    let mut p = base_policy();
    p.other_sessions = OtherSessions::Proceed;
    (h, p)
}

/// The field incident where the stuck device's session carries one path of map mpatha and
/// a session on a second device the other: the map keeps a usable path, so the re-creation
/// runs; after it multipathd's checker does not take the path back by itself (as with
/// delay_wait_checks), so iser-guard reinstates it and the map has both paths again.
fn multipath_paths_reinstated() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.add_device("rocep2s0f1", "0000:02:00.1", SimDriver::Irdma, 1);
    h.add_target(TARGET_B_IQN, portal_b());
    h.add_session(
        TARGET_B_IQN,
        &portal_b(),
        PortId::new("rocep2s0f1", 1),
        &["sdb"],
    );
    h.multipath = Some(SimMultipath {
        maps: vec![SimMap {
            name: "mpatha".into(),
            paths: vec![
                SimMapPath {
                    via: SimPathVia::Session {
                        node: iser_node(TARGET_IQN, portal_a()),
                        lun: 0,
                    },
                    failed: false,
                },
                SimMapPath {
                    via: SimPathVia::Session {
                        node: iser_node(TARGET_B_IQN, portal_b()),
                        lun: 0,
                    },
                    failed: false,
                },
            ],
        }],
        checker_reinstates: false,
        reinstated: Vec::new(),
    });
    (h, p)
}

fn pause_resume() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.schedule(at(30), HostEvent::Command(OperatorCommand::Pause));
    h.schedule(at(400), HostEvent::Command(OperatorCommand::Resume));
    (h, p)
}

fn reset_immediately() -> (SimHost, Policy) {
    let mut h = field_host();
    power(&mut h, 60, false);
    power(&mut h, 100, true);
    let mut p = base_policy();
    p.reset_when = ResetWhen::Immediately;
    (h, p)
}

fn outcome_lost() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        d.plans.push_back(RecreateBehaviour::LoseOutcome);
    }
    (h, p)
}

fn quarantine_then_operator() -> (SimHost, Policy) {
    let (mut h, p) = target_never_returns();
    power(&mut h, 800, true);
    h.schedule(
        at(850),
        HostEvent::Command(OperatorCommand::Recover {
            device: FIELD_DEVICE.into(),
            port: Some(1),
        }),
    );
    (h, p)
}

fn auth_failed() -> (SimHost, Policy) {
    let (mut h, p) = zombie();
    h.iscsiadm.auth_fail = true;
    (h, p)
}

fn iscsid_dropped() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.schedule(at(200), HostEvent::DropSession { sid: 1 });
    (h, p)
}

fn unsupported() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        d.plans.push_back(RecreateBehaviour::Unsupported(
            "driver irdma.gen_1 has neither enable_roce nor an auxiliary device; module reload \
             is not allowed (recovery.allow-module-reload = false)"
                .into(),
        ));
    }
    (h, p)
}

fn recreate_fails_always() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        for _ in 0..5 {
            d.plans.push_back(RecreateBehaviour::Fail(
                "devlink: Operation not supported".into(),
            ));
        }
    }
    (h, p)
}

/// The field incident, and iscsid drops the session: it is logged in again, so the port
/// goes through Verifying, where the re-created port's self-test passes.
fn selftest_passes() -> (SimHost, Policy) {
    iscsid_dropped()
}

/// The field incident on a device whose re-created ports cannot make a connection: QP 1 is
/// in RTS after each re-creation (the QP table shows it), yet every connect times out with
/// nothing in the log (iscsid's and the self-test's alike).
fn selftest_fails() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        d.cm_silent_registrations = 5;
    }
    (h, p)
}

/// The field incident with no verbs self-test (the daemon's NoSelfTest).
fn selftest_unavailable() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.selftest_available = false;
    (h, p)
}

/// The driver declares the device dead (DEVICE_FATAL on its async event channel) while the
/// target is fine.
fn device_fatal() -> (SimHost, Policy) {
    let mut h = field_host();
    h.async_events = true;
    h.schedule(
        at(60),
        HostEvent::DeviceFatal {
            device: FIELD_DEVICE.into(),
        },
    );
    (h, base_policy())
}

/// The same on a device outside devices.allow.
fn device_fatal_not_allowed() -> (SimHost, Policy) {
    let (h, _) = device_fatal();
    (h, Policy::default())
}

/// The field incident, and the re-creation's first step (`devlink ... enable_roce false`)
/// blocks in the kernel for 7 minutes: unregistering the device waits for a user that does
/// not let go (a verbs context or a CM id on the device). An operator asks for `recover`
/// meanwhile.
fn recreate_hang() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        d.plans
            .push_back(RecreateBehaviour::Blocked(Duration::from_secs(420)));
    }
    h.schedule(
        at(420),
        HostEvent::Command(OperatorCommand::Recover {
            device: FIELD_DEVICE.into(),
            port: Some(1),
        }),
    );
    (h, p)
}

/// irdma's control QP times out while the target is away; irdma asks ice for a reset, ice
/// unplugs the device and plugs it back in 3 minutes later (after the target is back).
fn driver_reset() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    h.schedule(
        at(120),
        HostEvent::Lines {
            facility: 0,
            lines: vec![
                // irdma utils.c irdma_handle_cqp_op, then main.c irdma_request_reset.
                kernel::KernelRecord::ibdev_err(
                    FIELD_DEVICE,
                    format!(
                        "ice 0000:02:00.0 {FIELD_DEVICE}: [Modify QP Cmd Error][op_code=6] \
                         status=-110 waiting=1 completion_err=0 maj=0x0 min=0x0"
                    ),
                ),
                kernel::KernelRecord::ibdev_err(
                    FIELD_DEVICE,
                    format!("ice 0000:02:00.0 {FIELD_DEVICE}: Requesting a reset"),
                ),
            ],
        },
    );
    h.schedule(
        at(121),
        HostEvent::InitiatorDevice {
            device: FIELD_DEVICE.into(),
            present: false,
        },
    );
    h.schedule(
        at(300),
        HostEvent::InitiatorDevice {
            device: FIELD_DEVICE.into(),
            present: true,
        },
    );
    (h, p)
}

/// The field incident, and the re-creation's devlink toggle is overtaken by a reset of the
/// function: ice re-plugs the device as iWARP; the executor restores RoCE.
fn iwarp_flip() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        d.plans.push_back(RecreateBehaviour::IwarpFlip);
    }
    (h, p)
}

/// The field incident on an iSER-only portal: the target has no TCP listener (TCP to its
/// portal is refused), its host answers ARP/ND. The default `auto` probe switches that
/// portal to the neighbour probe and recovers; TCP alone would wait forever.
fn iser_only_portal() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(t) = h.targets.get_mut(&portal_a()) {
        t.tcp_listener = false;
    }
    (h, p)
}

/// The field incident on Intel's out-of-tree ice/irdma: the RDMA auxiliary device is bound
/// to `irdma.gen_2` on a 6.8 kernel, the module is tainted `O`, and the function's devlink
/// has no `enable_roce`: the toggle fails before changing anything, the aux unbind/bind into
/// `irdma.gen_2` re-creates the device, and the operator is told both.
fn out_of_tree_irdma() -> (SimHost, Policy) {
    let (mut h, p) = field_incident();
    if let Some(d) = h.devices.get_mut(FIELD_DEVICE) {
        d.aux_folder = "irdma.gen_2".into();
        d.module_taint = "O".into();
        d.devlink_roce = false;
    }
    (h, p)
}

/// The field port's netdev joins a bond: ice (6.8, ice_lag.c) unplugs the function's RDMA
/// device, and there is nothing to re-create: the port is held with the reason, said once.
fn bonded_no_rdma() -> (SimHost, Policy) {
    let mut h = field_host();
    h.schedule(
        at(60),
        HostEvent::Bonded {
            device: FIELD_DEVICE.into(),
            bond: "bond0".into(),
        },
    );
    (h, base_policy())
}

/// ice loses its DDP package in a reset of the function and comes back in safe mode: no RDMA
/// device, and the kernel says why once. Nothing is re-created; the port is held with the
/// reason.
fn nic_safe_mode() -> (SimHost, Policy) {
    let mut h = field_host();
    h.schedule(
        at(60),
        HostEvent::Lines {
            facility: 0,
            // ice_main.c ice_request_fw: dev_err on the PCI function.
            lines: vec![kernel::KernelRecord::device(
                kernel::ERR,
                "pci",
                FIELD_PCI,
                format!(
                    "ice {FIELD_PCI}: The DDP package file was not found or could not be read. \
                     Entering Safe Mode"
                ),
            )],
        },
    );
    h.schedule(
        at(61),
        HostEvent::InitiatorDevice {
            device: FIELD_DEVICE.into(),
            present: false,
        },
    );
    (h, base_policy())
}

/// Every scenario, the default first.
pub fn all() -> Vec<Scenario> {
    let s = |name, about, secs, build| Scenario {
        name,
        about,
        duration: Duration::from_secs(secs),
        build,
    };
    vec![
        s(
            "field-incident",
            "E810 rocep2s0f0: target powered off for 3 minutes, then back; QP 1 stuck in ERR",
            600,
            field_incident,
        ),
        s(
            "zombie-session",
            "target link down 40 s: session stays LOGGED_IN but every I/O fails",
            300,
            zombie,
        ),
        s(
            "device-vanishes",
            "the initiator's RDMA device is deleted and comes back 20 s later",
            300,
            device_vanishes,
        ),
        s(
            "device-stays-gone",
            "the initiator's RDMA device is deleted and does not come back",
            400,
            device_stays_gone,
        ),
        s(
            "dead-listener",
            "the target's iSER listener dies; its portal still answers TCP",
            600,
            dead_listener,
        ),
        s(
            "dead-listener-dyndbg",
            "the target's iSER listener dies; dynamic debug shows `RDMA CM: REJECTED`",
            600,
            dead_listener_dyndbg,
        ),
        s(
            "lab-two-devices",
            "rxe_ini + rxe_tgt, default iser iface: target off 40 s, iscsid recovers",
            300,
            lab_two_devices,
        ),
        s(
            "dual-port-nic",
            "dual-port E810 (two irdma devices), one session each; one target goes away",
            600,
            dual_port_nic,
        ),
        s(
            "no-placement-evidence",
            "two RDMA ports, no CM id table, no route: warn once, never guess",
            300,
            no_placement_evidence,
        ),
        s(
            "field-incident-unplaced",
            "field incident, but nothing places the session (no CM ids, no route)",
            600,
            field_incident_unplaced,
        ),
        s(
            "field-incident-6.8",
            "field incident on a 6.8-like kernel: no device events, the daemon polls",
            600,
            field_incident_6_8,
        ),
        s(
            "device-vanishes-6.8",
            "device deleted at 62 s, back at 83 s on a 6.8-like kernel: seen at the dumps only",
            300,
            device_vanishes_6_8,
        ),
        s(
            "target-blip",
            "target off for 5 s: back before anything broke",
            300,
            target_blip,
        ),
        s(
            "target-never-returns",
            "target powered off for good: quarantine, operator alert",
            900,
            target_never_returns,
        ),
        s(
            "flapping-target",
            "the target answers 0.4 s in every 2 s for a minute before it stays up",
            700,
            flapping,
        ),
        s(
            "recreate-fails-once",
            "the first device re-creation fails, the second works",
            700,
            recreate_fails_once,
        ),
        s(
            "recreate-fails-always",
            "every device re-creation fails: quarantine",
            1500,
            recreate_fails_always,
        ),
        s(
            "recreate-unsupported",
            "no re-creation method applies: quarantine at once",
            600,
            unsupported,
        ),
        s(
            "iser-only-portal",
            "the field incident on an iSER-only portal (no TCP listener): probed by ARP/ND \
             once TCP is refused while the host answers",
            600,
            iser_only_portal,
        ),
        s(
            "recreate-hang",
            "the re-creation's first step blocks in the kernel for 7 minutes; nothing else is \
             tried on the device, verification resumes when it returns",
            1200,
            recreate_hang,
        ),
        s(
            "driver-reset",
            "irdma asks ice for a reset while the target is away; the device is back 3 minutes \
             later: no re-creation of our own meanwhile, verified afterwards",
            700,
            driver_reset,
        ),
        s(
            "iwarp-flip",
            "a reset of the function between the two devlink calls re-plugs the device as \
             iWARP: the mode is checked, RoCE restored, the operator told",
            700,
            iwarp_flip,
        ),
        s(
            "out-of-tree-irdma",
            "the field incident on Intel's out-of-tree irdma (irdma.gen_2, no enable_roce in \
             devlink): named once, the failed devlink step reported, re-created by aux \
             unbind/bind",
            700,
            out_of_tree_irdma,
        ),
        s(
            "bonded-no-rdma",
            "the E810 port's netdev joins a bond and its RDMA device goes (ice_lag.c): named \
             once, nothing re-created, the port held with the reason",
            700,
            bonded_no_rdma,
        ),
        s(
            "nic-safe-mode",
            "ice comes back in safe mode (no DDP package) without its RDMA device: named \
             once, nothing re-created, the port held with the reason",
            700,
            nic_safe_mode,
        ),
        s(
            "recreate-outcome-lost",
            "the re-creation works but its outcome is lost: verified, not repeated",
            700,
            outcome_lost,
        ),
        s(
            "iscsiadm-hangs",
            "zombie session, and the first iscsiadm hangs until killed",
            400,
            iscsiadm_hangs,
        ),
        s(
            "auth-failed",
            "zombie session, and the target refuses the login (CHAP)",
            400,
            auth_failed,
        ),
        s(
            "iscsid-recovers",
            "rxe: target off 40 s; iscsid reconnects by itself",
            300,
            iscsid_recovers,
        ),
        s(
            "iscsid-dropped-session",
            "field incident, and iscsid drops the failing session",
            600,
            iscsid_dropped,
        ),
        s(
            "two-ports-one-device",
            "a dual-port device: both ports stuck, one re-creation",
            600,
            two_ports,
        ),
        s(
            "two-devices",
            "two devices stuck at once: re-created one at a time",
            700,
            two_devices,
        ),
        s(
            "dry-run",
            "field incident in dry-run: decide and alert, never act",
            600,
            dry_run,
        ),
        s(
            "kmsg-storm",
            "10 000 identical RDMA CM lines in one burst",
            200,
            storm,
        ),
        s(
            "forged-records",
            "userspace writes the field lines into /dev/kmsg",
            200,
            forged,
        ),
        s(
            "not-allowed",
            "field incident on a device outside devices.allow",
            600,
            not_allowed,
        ),
        s(
            "other-sessions-wait",
            "another target's session is healthy on the device: wait for the operator",
            700,
            other_sessions_wait,
        ),
        s(
            "other-sessions-proceed",
            "same, with recovery.other-sessions = proceed",
            600,
            other_sessions_proceed,
        ),
        s(
            "healthy-nvme-holds",
            "field incident on a device with a healthy NVMe-over-RDMA controller: wait for the \
             operator",
            700,
            healthy_nvme_holds,
        ),
        s(
            "user-space-consumer",
            "field incident on a device a user-space RDMA process listens on: wait for the \
             operator",
            700,
            user_space_consumer,
        ),
        s(
            "consumers-broken",
            "field incident on a device whose NVMe-over-RDMA controller the same target loss \
             broke: re-create at once when the target is back",
            600,
            consumers_broken,
        ),
        s(
            "mixed-consumers",
            "field incident on a device carrying iSER, NVMe over RDMA and NFS over RDMA to the \
             same target host: all back and verified after one re-creation",
            600,
            mixed_consumers,
        ),
        s(
            "nfs-mount-silent",
            "field incident with an NFS over RDMA mount whose server wedged: iSER recovers, the \
             mount's check after the re-creation finds no answer and a critical alert names it",
            600,
            nfs_mount_silent,
        ),
        s(
            "healthy-nfs-does-not-hold",
            "field incident on a device that also carries a live NFS over RDMA mount: the \
             kernel reconnects it, so it does not hold the re-creation; the check finds it \
             answering",
            600,
            healthy_nfs_does_not_hold,
        ),
        s(
            "healthy-nvme-holds-then-reconnected",
            "a healthy NVMe controller holds the re-creation even with nvme-cli; the operator's \
             recover re-creates the device and nvme connect brings the controller back",
            700,
            healthy_nvme_holds_then_reconnected,
        ),
        s(
            "nvme-target-later",
            "iSER and NVMe over RDMA to two targets; the NVMe target returns a minute after the \
             iSCSI one: its portal (4420) is probed too and the re-creation waits for it",
            700,
            nvme_target_later,
        ),
        s(
            "last-multipath-path",
            "field incident on a device carrying the last usable path of a dm-multipath map: \
             the re-creation holds until the map's other path is back, then runs and the path \
             is active again",
            700,
            last_multipath_path,
        ),
        s(
            "multipath-paths-reinstated",
            "field incident on a device carrying one of two paths of a dm-multipath map: \
             re-created, and the path reinstated in the map after the sessions' verification",
            600,
            multipath_paths_reinstated,
        ),
        s(
            "mixed-consumers-no-nvme-cli",
            "the same on a host without nvme-cli: iSER back, the NVMe controller reported NOT \
             back",
            600,
            mixed_consumers_no_nvme_cli,
        ),
        s(
            "pause-resume",
            "field incident during maintenance (pause), resumed later",
            700,
            pause_resume,
        ),
        s(
            "reset-immediately",
            "field incident with recovery.reset-when = immediately",
            700,
            reset_immediately,
        ),
        s(
            "selftest-passes",
            "field incident, iscsid drops the session: the re-created port's self-test passes",
            600,
            selftest_passes,
        ),
        s(
            "selftest-fails",
            "every re-created port fails its self-test (connects time out): quarantine",
            1500,
            selftest_fails,
        ),
        s(
            "selftest-unavailable",
            "field incident without a verbs self-test: recovery as before",
            600,
            selftest_unavailable,
        ),
        s(
            "device-fatal",
            "the driver declares the device dead (DEVICE_FATAL): recovery",
            600,
            device_fatal,
        ),
        s(
            "device-fatal-not-allowed",
            "DEVICE_FATAL on a device outside devices.allow: alert only",
            600,
            device_fatal_not_allowed,
        ),
        s(
            "lab-field-incident",
            "the lab's in-kernel incident: rxe with irdma's QP 1, target away 40 s",
            300,
            lab_field_incident,
        ),
        s(
            "quarantine-then-operator",
            "target gone for good, then back: the operator runs recover",
            1100,
            quarantine_then_operator,
        ),
    ]
}

/// The scenario with this name.
pub fn find(name: &str) -> Option<Scenario> {
    all().into_iter().find(|s| s.name == name)
}
