//! The consumer model on the derived NVMe-over-RDMA dumps (a real capture with nvme_rdma
//! entries added, see nldev/tests/derived.rs) and on hand-made user-space rows.

use super::*;
use crate::nldev::tests::derived::{nvme_cm_ids, nvme_qps};

fn kinds(p: &PortConsumers) -> Vec<ConsumerKind> {
    p.consumers.iter().map(|c| c.kind).collect()
}

#[test]
fn iser_and_a_healthy_nvme_controller_share_the_port_and_nvme_holds() {
    let ports = per_port(&nvme_cm_ids(), &nvme_qps());
    assert_eq!(ports.len(), 1);
    let p = &ports[0];
    assert_eq!((p.device.as_str(), p.port), ("rxe_ini", 1));
    assert_eq!(kinds(p), [ConsumerKind::Iser, ConsumerKind::NvmeRdma]);
    let nvme = &p.consumers[1];
    assert_eq!((nvme.connections, nvme.live_connections), (2, 2));
    assert!(nvme.live());
    assert_eq!(
        nvme.evidence,
        ["cm-idn 3 CONNECT qp 19 RTS", "cm-idn 4 CONNECT qp 20 RTS"]
    );
    assert_eq!(nvme.describe(), "nvme_rdma (2 connections, live)");
    // QP 1 (ib_core) and the CM ids' rdma_cm QPs are not consumers of their own.
    assert!(p.consumers.iter().all(|c| c.qps == 0));
    let held = in_the_way("rxe_ini", &ports, &ConsumerPolicy::default());
    assert_eq!(
        held,
        [ConsumerRef {
            port: 1,
            kind: ConsumerKind::NvmeRdma,
            owner: "nvme_rdma".into(),
            live: true
        }]
    );
    assert_eq!(list(&held), "nvme_rdma on port 1 (live)");
    // Another device's re-creation is not held by it.
    assert!(in_the_way("rxe_tgt", &ports, &ConsumerPolicy::default()).is_empty());
}

#[test]
fn nvme_queues_whose_qps_are_in_err_are_broken_and_hold_nothing() {
    let mut qps = nvme_qps();
    for q in qps.iter_mut().filter(|q| q.lqpn >= 19) {
        q.state = QpState::Err;
    }
    let ports = per_port(&nvme_cm_ids(), &qps);
    let nvme = &ports[0].consumers[1];
    assert_eq!((nvme.connections, nvme.live_connections), (2, 0));
    assert!(!nvme.live());
    assert_eq!(nvme.describe(), "nvme_rdma (2 connections, broken)");
    assert!(in_the_way("rxe_ini", &ports, &ConsumerPolicy::default()).is_empty());
    assert_eq!(
        list(&affected("rxe_ini", &ports).collect::<Vec<_>>()),
        "nvme_rdma on port 1 (broken)"
    );
}

#[test]
fn a_cm_id_in_disconnect_or_still_resolving_has_no_connection_to_lose() {
    for state in [6u8, 9, 10, 1, 4] {
        let mut ids = nvme_cm_ids();
        for id in ids.iter_mut().skip(1) {
            id.state = state;
        }
        let ports = per_port(&ids, &[]);
        assert!(!ports[0].consumers[1].live(), "{}", cm_state_name(state));
    }
    // CONNECT without a QP table: nothing says it is broken, so it is live.
    let ports = per_port(&nvme_cm_ids(), &[]);
    assert!(ports[0].consumers[1].live());
}

#[test]
fn the_policy_lets_a_kind_proceed_and_never_holds_for_iser() {
    let ports = per_port(&nvme_cm_ids(), &nvme_qps());
    let mut policy = ConsumerPolicy::default();
    policy
        .kinds
        .insert(ConsumerKind::NvmeRdma, ConsumerAction::Proceed);
    assert!(in_the_way("rxe_ini", &ports, &policy).is_empty());
    assert!(affected("rxe_ini", &ports).all(|r| r.kind != ConsumerKind::Iser));
}

/// A librdmacm process: a listener on the port's address, and a verbs-only QP.
fn user_space(qp_state: QpState) -> (Vec<CmIdEntry>, Vec<QpEntry>) {
    let mut ids = nvme_cm_ids();
    ids.truncate(1);
    let mut listener = ids[0].clone();
    listener.kern_name = None;
    listener.pid = Some(4242);
    listener.state = CM_LISTEN;
    listener.lqpn = None;
    listener.cm_idn = Some(9);
    ids.push(listener);
    let mut qps = nvme_qps();
    qps.truncate(2);
    let mut q = qps[0].clone();
    q.lqpn = 33;
    q.kern_name = None;
    q.pid = Some(4243);
    q.state = qp_state;
    qps.push(q);
    (ids, qps)
}

#[test]
fn user_space_consumers_come_from_cm_ids_and_qp_owners_with_their_comm() {
    let (ids, qps) = user_space(QpState::Rts);
    let mut ports = per_port(&ids, &qps);
    name_processes(&mut ports, |pid| {
        (pid == 4242).then(|| "spdk_tgt".to_string())
    });
    let p = &ports[0];
    assert_eq!(
        kinds(p),
        [
            ConsumerKind::Iser,
            ConsumerKind::UserSpace,
            ConsumerKind::UserSpace
        ]
    );
    assert_eq!(
        p.consumers[1].describe(),
        "pid 4242 (spdk_tgt) (1 listener, live)"
    );
    assert_eq!(p.consumers[2].describe(), "pid 4243 (1 QP, live)");
    let held = in_the_way("rxe_ini", &ports, &ConsumerPolicy::default());
    assert_eq!(held.len(), 2);
    let (ids, qps) = user_space(QpState::Err);
    let ports = per_port(&ids, &qps);
    assert_eq!(ports[0].consumers[2].describe(), "pid 4243 (1 QP, broken)");
}

#[test]
fn kinds_follow_the_kernel_module_names_and_keys_round_trip() {
    for (module, kind) in [
        ("ib_iser", ConsumerKind::Iser),
        ("nvme_rdma", ConsumerKind::NvmeRdma),
        ("rpcrdma", ConsumerKind::Rpcrdma),
        ("ib_srp", ConsumerKind::Srp),
        ("rds_rdma", ConsumerKind::Rds),
        ("smc", ConsumerKind::Smc),
        ("ib_isert", ConsumerKind::OtherKernel),
    ] {
        assert_eq!(ConsumerKind::of_module(module), kind);
    }
    for k in ConsumerKind::ALL {
        assert_eq!(ConsumerKind::from_key(k.key()), Some(k));
    }
    assert_eq!(ConsumerKind::from_key("nvme"), None);
}

#[test]
fn entries_without_a_port_are_left_out() {
    let mut ids = nvme_cm_ids();
    for id in &mut ids {
        id.port = None;
    }
    assert!(per_port(&ids, &[]).is_empty());
}

/// The derived dump with its nvme_rdma rows owned by rpcrdma instead (an NFS client's
/// transport), and `listeners` rpcrdma listeners on 20049 at each of the given addresses.
fn rpcrdma(listeners: &[&str]) -> Vec<CmIdEntry> {
    let mut ids = nvme_cm_ids();
    for id in ids.iter_mut().skip(1) {
        id.kern_name = Some("rpcrdma".into());
    }
    for (n, a) in listeners.iter().enumerate() {
        let mut l = ids[1].clone();
        l.state = CM_LISTEN;
        l.lqpn = None;
        l.qp_type = None;
        l.cm_idn = Some(90 + u32::try_from(n).unwrap());
        l.src_addr = Some(crate::nldev::SockAddr::from_socket_addr(
            (a.parse::<std::net::IpAddr>().unwrap(), 20049).into(),
        ));
        l.dst_addr = None;
        ids.push(l);
    }
    ids
}

#[test]
fn live_rpcrdma_client_connections_do_not_hold_the_kernel_reconnects_them() {
    let ports = per_port(&rpcrdma(&[]), &nvme_qps());
    let c = &ports[0].consumers[1];
    assert_eq!(c.kind, ConsumerKind::Rpcrdma);
    assert!(c.live());
    assert!(c.kernel_brings_back());
    assert!(in_the_way("rxe_ini", &ports, &ConsumerPolicy::default()).is_empty());
    // Still named in what a re-creation takes down (its plan, alert and record).
    assert_eq!(
        list(&affected("rxe_ini", &ports).collect::<Vec<_>>()),
        "rpcrdma on port 1 (live)"
    );
}

#[test]
fn an_svcrdma_listener_holds_when_bound_to_an_address_not_when_a_wildcard() {
    // A wildcard listener (`rdma 20049` in /proc/fs/nfsd/portlist): rdma_cm re-creates its
    // per-device id on the new device.
    let ports = per_port(&rpcrdma(&["0.0.0.0", "::"]), &nvme_qps());
    let c = &ports[0].consumers[1];
    assert_eq!((c.listeners, c.bound_listeners), (2, 0));
    assert!(in_the_way("rxe_ini", &ports, &ConsumerPolicy::default()).is_empty());
    // One bound to the port's address does not come back: it holds, unless proceed.
    let ports = per_port(&rpcrdma(&["0.0.0.0", "192.0.2.1"]), &nvme_qps());
    let c = &ports[0].consumers[1];
    assert_eq!((c.listeners, c.bound_listeners), (2, 1));
    assert!(!c.kernel_brings_back());
    let held = in_the_way("rxe_ini", &ports, &ConsumerPolicy::default());
    assert_eq!(list(&held), "rpcrdma on port 1 (live)");
    let mut policy = ConsumerPolicy::default();
    policy
        .kinds
        .insert(ConsumerKind::Rpcrdma, ConsumerAction::Proceed);
    assert!(in_the_way("rxe_ini", &ports, &policy).is_empty());
}
