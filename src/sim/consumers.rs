//! RDMA consumers other than iSER on the simulated host (an NVMe-over-RDMA controller, a
//! librdmacm process): the rows they put in the CM id and QP tables, which the agent reads
//! through the core's own model (`core::consumers::per_port`), as the daemon does.
//!
//! What the kernel does to them, and nothing more: their connections carry traffic until
//! their target stops answering, which leaves the QPs in ERR for good (the consumer's own
//! reconnects need a CM exchange, which the stuck QP 1 of the field incident fails); a
//! device removal destroys them, as nvme_rdma's remove_one deletes its controllers and a
//! process loses its context. Nothing on this host brings them back
//! (NVMe reconnect is not simulated yet).

use crate::core::nldev::{CmIdEntry, QpEntry, QpTypeOrRaw, SockAddr};
use crate::core::qp::QpState;
use crate::core::recovery::Portal;

/// RDMA_CM_CONNECT and RDMA_CM_LISTEN (`enum rdma_cm_state`).
const CM_CONNECT: u8 = 5;
const CM_LISTEN: u8 = 8;
/// RDMA_PS_TCP.
const PS_TCP: u32 = 0x0106;
/// First QP number of these consumers (the iSER connections' QPs are below).
const FIRST_QPN: u32 = 200;

/// Who the consumer is, as the kernel names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimOwner {
    /// A kernel module (`nvme_rdma`).
    Module(String),
    /// A process: pid and `comm`.
    Process(u32, String),
}

/// One consumer on one port.
#[derive(Debug, Clone)]
pub struct SimConsumer {
    /// RDMA device.
    pub device: String,
    /// Port.
    pub port: u32,
    /// Who.
    pub owner: SimOwner,
    /// Connections (one CM id and one RC QP each).
    pub connections: u32,
    /// A listener on the port's address.
    pub listener: bool,
    /// The target its connections go to: they break while it does not answer. `None`: a
    /// peer that never goes away.
    pub target: Option<Portal>,
    /// Its target stopped answering: its QPs are in ERR from then on.
    pub broken: bool,
    /// Destroyed by a removal of its device; nothing brings it back.
    pub gone: bool,
}

impl SimConsumer {
    /// nvme_rdma's controller on `device`/`port` with an admin and one I/O queue to
    /// `target` (its NVMe portal on the same target host).
    pub fn nvme(device: &str, port: u32, target: Option<Portal>) -> Self {
        SimConsumer {
            device: device.into(),
            port,
            owner: SimOwner::Module("nvme_rdma".into()),
            connections: 2,
            listener: false,
            target,
            broken: false,
            gone: false,
        }
    }

    /// A librdmacm process listening on `device`/`port` (an SPDK target, say).
    pub fn process(device: &str, port: u32, pid: u32, comm: &str) -> Self {
        SimConsumer {
            device: device.into(),
            port,
            owner: SimOwner::Process(pid, comm.into()),
            connections: 0,
            listener: true,
            target: None,
            broken: false,
            gone: false,
        }
    }

    fn kern_name(&self) -> Option<String> {
        match &self.owner {
            SimOwner::Module(m) => Some(m.clone()),
            SimOwner::Process(..) => None,
        }
    }

    fn pid(&self) -> Option<u32> {
        match &self.owner {
            SimOwner::Module(_) => None,
            SimOwner::Process(pid, _) => Some(*pid),
        }
    }

    /// Its `comm`, for a process.
    pub fn comm(&self, pid: u32) -> Option<String> {
        match &self.owner {
            SimOwner::Process(p, c) if *p == pid => Some(c.clone()),
            _ => None,
        }
    }
}

/// The CM id and QP rows of `consumers` on a device of index `dev_index`, whose port has
/// address `local`.
pub fn rows(
    consumers: &[SimConsumer],
    dev_index: u32,
    local: std::net::IpAddr,
) -> (Vec<CmIdEntry>, Vec<QpEntry>) {
    let (mut ids, mut qps) = (Vec::new(), Vec::new());
    let mut qpn = FIRST_QPN;
    for (i, c) in consumers.iter().enumerate().filter(|(_, c)| !c.gone) {
        let base = u32::try_from(i).unwrap_or(0) * 10 + 500;
        let sport = |n: u32| u16::try_from(40000 + base + n).unwrap_or(40000);
        if c.listener {
            ids.push(CmIdEntry {
                dev_index,
                dev_name: c.device.clone(),
                port: Some(c.port),
                lqpn: None,
                qp_type: None,
                ps: Some(PS_TCP),
                state: CM_LISTEN,
                src_addr: Some(SockAddr::from_socket_addr((local, 4420).into())),
                dst_addr: Some(SockAddr::from_socket_addr(([0, 0, 0, 0], 0).into())),
                cm_idn: Some(base),
                pid: c.pid(),
                kern_name: c.kern_name(),
            });
        }
        let live = !c.broken;
        for n in 0..c.connections {
            let dst = c.target.as_ref().map_or_else(
                || ([192, 0, 2, 99], 4420).into(),
                |t| std::net::SocketAddr::new(t.ip(), 4420),
            );
            ids.push(CmIdEntry {
                dev_index,
                dev_name: c.device.clone(),
                port: Some(c.port),
                lqpn: Some(qpn),
                qp_type: Some(QpTypeOrRaw::from(2u8)),
                ps: Some(PS_TCP),
                state: CM_CONNECT,
                src_addr: Some(SockAddr::from_socket_addr((local, sport(n)).into())),
                dst_addr: Some(SockAddr::from_socket_addr(dst)),
                cm_idn: Some(base + 1 + n),
                pid: c.pid(),
                kern_name: c.kern_name(),
            });
            qps.push(QpEntry {
                dev_index,
                dev_name: c.device.clone(),
                port: Some(c.port),
                lqpn: qpn,
                rqpn: Some(qpn),
                qp_type: QpTypeOrRaw::from(2u8),
                state: if live { QpState::Rts } else { QpState::Err },
                // Kernel QPs of a CM id are created by rdma_cm; a process's carry its pid.
                pid: c.pid(),
                kern_name: c.kern_name().map(|_| "rdma_cm".to_string()),
                sq_psn: None,
                rq_psn: None,
                path_mig_state: None,
                pdn: None,
            });
            qpn += 1;
        }
    }
    (ids, qps)
}
