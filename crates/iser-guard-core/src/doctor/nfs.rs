//! The doctor's word on NFS over RDMA: whether the mounts a re-creation drops would be
//! checked after it (xprtrdma reconnects them by itself; the daemon remembers a mount only
//! when it has seen rpcrdma's connection to its server), and whether an svcrdma listener
//! bound to one address would hold an automatic re-creation (it does not come back after a
//! device removal). Judged from facts the shell reads apart from [`super::Facts`]: the
//! mounts of `/proc/self/mountinfo`, placed by the CM id table, and the consumers per port.

use serde::Serialize;

use super::{Check, CheckKind, CheckVerdict};
use crate::consumers::{ConsumerKind, PortConsumers};
use crate::nfs_rdma::NfsRdmaMount;

/// What the NFS check is judged from.
#[derive(Debug, Clone, Serialize)]
pub struct NfsMountFacts {
    /// The NFS over RDMA mounts, placed on their ports where the CM id table says.
    pub mounts: Vec<NfsRdmaMount>,
    /// The consumers per port (`None`: RDMA netlink did not answer).
    pub consumers: Option<Vec<PortConsumers>>,
}

/// One check when the host has NFS over RDMA mounts or an address-bound svcrdma listener;
/// none otherwise.
pub fn nfs_mount_check(f: &NfsMountFacts) -> Option<Check> {
    let bound: Vec<String> = f
        .consumers
        .iter()
        .flatten()
        .flat_map(|p| {
            p.consumers
                .iter()
                .filter(|c| c.kind == ConsumerKind::Rpcrdma && c.bound_listeners > 0)
                .map(move |c| format!("{}/{}: {}", p.device, p.port, c.describe()))
        })
        .collect();
    if f.mounts.is_empty() && bound.is_empty() {
        return None;
    }
    let n = f.mounts.len();
    let unplaced: Vec<&NfsRdmaMount> = f.mounts.iter().filter(|m| m.placed.is_none()).collect();
    let evidence = f.mounts.iter().map(|m| {
        let on = m.placed.as_ref().map_or_else(
            || "port not known".to_string(),
            |(d, p)| format!("on {d}/{p}"),
        );
        format!(
            "{} {on}: server {} over {}",
            m.describe(),
            m.server,
            m.proto
        )
    });
    let mut c = if !bound.is_empty() {
        Check::new(
            CheckKind::CmIds,
            "rpcrdma",
            CheckVerdict::Warning,
            format!(
                "an svcrdma listener bound to one address holds an automatic re-creation of \
                 its device: it does not come back after a device removal ({})",
                bound.join("; ")
            ),
        )
        .action(
            "listen on the wildcard address (`rdma 20049` in /proc/fs/nfsd/portlist, which \
             rdma_cm re-creates on a new device), or set recovery.consumers.rpcrdma = \
             \"proceed\" and restart nfsd after a re-creation",
        )
    } else if f.consumers.is_none() && n > 0 {
        Check::new(
            CheckKind::CmIds,
            "rpcrdma",
            CheckVerdict::Warning,
            format!(
                "{n} NFS over RDMA mount(s), but RDMA netlink did not answer: their ports are \
                 not known, and a re-creation would not check them afterwards"
            ),
        )
    } else if !unplaced.is_empty() {
        Check::new(
            CheckKind::CmIds,
            "rpcrdma",
            CheckVerdict::Warning,
            format!(
                "{} of {n} NFS over RDMA mount(s) have no rpcrdma connection to their server \
                 now (idle: xprtrdma disconnects after 5 minutes without RPCs): until one is \
                 seen, a re-creation does not remember or check them",
                unplaced.len()
            ),
        )
    } else {
        Check::new(
            CheckKind::CmIds,
            "rpcrdma",
            CheckVerdict::Ok,
            format!(
                "{n} NFS over RDMA mount(s): xprtrdma reconnects them after a re-creation by \
                 itself, and iser-guard checks each with a bounded stat; they do not hold an \
                 automatic re-creation"
            ),
        )
    };
    c.evidence.extend(evidence);
    Some(c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consumers::{Consumer, Owner};

    fn mount(placed: bool) -> NfsRdmaMount {
        NfsRdmaMount {
            placed: placed.then(|| ("rxe0".to_string(), 1)),
            ..crate::nfs_rdma::parse_line(
                "83 22 0:47 / /mnt/nfs rw - nfs4 192.0.2.10:/e rw,vers=4.2,proto=rdma,\
                 port=20049,addr=192.0.2.10",
            )
            .unwrap()
            .unwrap()
        }
    }

    fn rpcrdma(bound_listeners: u32) -> Vec<PortConsumers> {
        vec![PortConsumers {
            device: "rxe0".into(),
            port: 1,
            consumers: vec![Consumer {
                kind: ConsumerKind::Rpcrdma,
                owner: Owner::Kernel {
                    module: "rpcrdma".into(),
                },
                connections: 1,
                live_connections: 1,
                listeners: bound_listeners,
                bound_listeners,
                qps: 0,
                live_qps: 0,
                evidence: Vec::new(),
            }],
        }]
    }

    #[test]
    fn mounts_are_said_checked_unless_unplaced_and_a_bound_listener_is_said_to_hold() {
        let f = |mounts, consumers| nfs_mount_check(&NfsMountFacts { mounts, consumers });
        assert!(f(vec![], Some(rpcrdma(0))).is_none());
        let c = f(vec![mount(true)], Some(rpcrdma(0))).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Ok);
        assert!(
            c.finding.starts_with("1 NFS over RDMA mount(s): xprtrdma"),
            "{}",
            c.finding
        );
        assert!(c.evidence[0].contains("/mnt/nfs"), "{:?}", c.evidence);
        let c = f(vec![mount(true), mount(false)], Some(rpcrdma(0))).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning);
        assert!(c
            .finding
            .starts_with("1 of 2 NFS over RDMA mount(s) have no rpcrdma"));
        let c = f(vec![mount(false)], None).unwrap();
        assert!(
            c.finding.contains("RDMA netlink did not answer"),
            "{}",
            c.finding
        );
        let c = f(vec![], Some(rpcrdma(1))).unwrap();
        assert_eq!(c.verdict, CheckVerdict::Warning);
        assert!(
            c.finding.contains("svcrdma listener bound to one address"),
            "{}",
            c.finding
        );
    }
}
