//! RDMA consumers other than iSER on the simulated host (an NVMe-over-RDMA controller, a
//! librdmacm process): the rows they put in the CM id and QP tables, which the agent reads
//! through the core's own model (`core::consumers::per_port`), as the daemon does.
//!
//! What the kernel does to them, and nothing more: their connections carry traffic until
//! their target stops answering, which leaves the QPs in ERR for good (the consumer's own
//! reconnects need a CM exchange, which the stuck QP 1 of the field incident fails); a
//! device removal destroys them, as nvme_rdma's remove_one deletes its controllers and a
//! process loses its context. An NVMe controller with a sysfs view ([`SimConsumer::sysfs`])
//! is also rendered as `/sys/class/nvme/nvmeN` shows it ([`nvme_files`]), and `nvme connect`
//! ([`connect`], the host's nvme-cli when it has one) creates it again, renumbered. An NFS
//! client's transport ([`SimConsumer::nfs_client`], module rpcrdma, to port 20049) is what
//! the kernel brings back by itself: the host's stat of a mount ([`SimNfsMount`], shown in
//! mountinfo by [`mountinfo`]) is an RPC, and xprtrdma connects again for it once the device
//! is back and the server answers.

use crate::core::nldev::{CmIdEntry, QpEntry, QpTypeOrRaw, SockAddr};
use crate::core::nvme_fabrics::NvmeCtrlFiles;
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
    /// Destroyed by a removal of its device; nothing brings it back but `nvme connect`.
    pub gone: bool,
    /// An NVMe controller shown in sysfs as `nvme<N>` (`None`: only its table rows, as
    /// before NVMe controllers were read).
    pub sysfs: Option<u32>,
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
            sysfs: None,
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
            sysfs: None,
        }
    }

    /// An NFS client's RPC-over-RDMA transport (rpcrdma) on `device`/`port` to the server
    /// on `server`'s host (port 20049), one connection. `None`: a server that never goes
    /// away, at 192.0.2.99.
    pub fn nfs_client(device: &str, port: u32, server: Option<Portal>) -> Self {
        SimConsumer {
            device: device.into(),
            port,
            owner: SimOwner::Module("rpcrdma".into()),
            connections: 1,
            listener: false,
            target: server,
            broken: false,
            gone: false,
            sysfs: None,
        }
    }

    /// Its module is rpcrdma: the kernel reconnects it by itself.
    pub fn is_rpcrdma(&self) -> bool {
        self.owner == SimOwner::Module("rpcrdma".into())
    }

    /// The port its connections go to and its listener listens on: NFS over RDMA's 20049
    /// for rpcrdma, NVMe over Fabrics' 4420 otherwise.
    fn service_port(&self) -> u16 {
        if self.is_rpcrdma() {
            crate::core::nfs_rdma::NFS_RDMA_PORT
        } else {
            4420
        }
    }

    /// nvme_rdma's controller `nvme<instance>`, also shown in sysfs.
    pub fn nvme_controller(device: &str, port: u32, target: Option<Portal>, instance: u32) -> Self {
        SimConsumer {
            sysfs: Some(instance),
            ..SimConsumer::nvme(device, port, target)
        }
    }

    /// The address its connections go to (an NVMe target's, an NFS server's).
    pub fn nvme_traddr(&self) -> std::net::IpAddr {
        self.target
            .as_ref()
            .map_or_else(|| [192, 0, 2, 99].into(), |t| t.ip())
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
                src_addr: Some(SockAddr::from_socket_addr((local, c.service_port()).into())),
                dst_addr: Some(SockAddr::from_socket_addr(([0, 0, 0, 0], 0).into())),
                cm_idn: Some(base),
                pid: c.pid(),
                kern_name: c.kern_name(),
            });
        }
        let live = !c.broken;
        for n in 0..c.connections {
            let dst = std::net::SocketAddr::new(c.nvme_traddr(), c.service_port());
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

/// The subsystem NQN of the simulated NVMe target.
const SIM_SUBSYSNQN: &str = "nqn.2026-12.test.target:nvme-lab";

/// `/sys/class/nvme/nvmeN` of each NVMe controller with a sysfs view that exists, as the
/// kernel writes the files: `live` while its connections carry traffic, `connecting` while
/// nvme_rdma's reconnects fail (its QPs in ERR).
pub fn nvme_files(consumers: &[SimConsumer]) -> Vec<NvmeCtrlFiles> {
    consumers
        .iter()
        .filter(|c| !c.gone)
        .filter_map(|c| {
            let n = c.sysfs?;
            let mut attrs = std::collections::BTreeMap::new();
            for (k, v) in [
                ("transport", "rdma".to_string()),
                (
                    "address",
                    format!("traddr={},trsvcid=4420", c.nvme_traddr()),
                ),
                ("subsysnqn", SIM_SUBSYSNQN.to_string()),
                (
                    "hostnqn",
                    "nqn.2014-08.org.nvmexpress:uuid:5e1d2c3b-0000-4000-8000-000000000001".into(),
                ),
                ("hostid", "5e1d2c3b-0000-4000-8000-000000000001".into()),
                ("state", if c.broken { "connecting" } else { "live" }.into()),
                ("queue_count", "3".into()),
                ("sqsize", "127".into()),
                ("ctrl_loss_tmo", "600".into()),
                ("reconnect_delay", "10".into()),
                ("kato", "5".into()),
                ("cntrltype", "io".into()),
            ] {
                attrs.insert(k.to_string(), format!("{v}\n"));
            }
            Some(NvmeCtrlFiles {
                name: format!("nvme{n}"),
                attrs,
                namespaces: vec![(format!("nvme{n}c{n}n1"), Some("1\n".into()))],
            })
        })
        .collect()
}

/// `nvme connect ARGS` on this host: a deleted controller whose target answers (`reachable`
/// says which do) on a present device is created again as a new instance; otherwise
/// nvme-cli's answer when the kernel's connect fails.
pub fn connect(
    consumers: &mut [SimConsumer],
    args: &[String],
    reachable: impl Fn(&SimConsumer) -> bool,
    next_instance: u32,
) -> Result<(), String> {
    let traddr = args
        .iter()
        .find_map(|a| a.strip_prefix("--traddr="))
        .ok_or_else(|| "nvme connect: no --traddr".to_string())?;
    let Some(c) = consumers
        .iter_mut()
        .find(|c| c.gone && c.sysfs.is_some() && c.nvme_traddr().to_string() == traddr)
    else {
        return Err("Failed to write to /dev/nvme-fabrics: Operation already in progress".into());
    };
    if !reachable(c) {
        return Err("Failed to write to /dev/nvme-fabrics: Connection refused".into());
    }
    c.gone = false;
    c.broken = false;
    c.sysfs = Some(next_instance);
    Ok(())
}

/// An NFS mount over RDMA on the simulated host.
#[derive(Debug, Clone)]
pub struct SimNfsMount {
    /// Where it is mounted.
    pub mount_point: String,
    /// The server's address (its rpcrdma transport is a [`SimConsumer::nfs_client`] to it).
    pub server: std::net::IpAddr,
    /// The export.
    pub export: String,
    /// The client's address, shown as `clientaddr=`.
    pub client: std::net::IpAddr,
    /// The server never answers this mount's RPCs again (its export is wedged): every stat
    /// hangs.
    pub stat_hangs: bool,
}

impl SimNfsMount {
    /// An NFSv4.2 mount of `server:/export` at `mount_point`.
    pub fn new(mount_point: &str, server: std::net::IpAddr, client: std::net::IpAddr) -> Self {
        SimNfsMount {
            mount_point: mount_point.into(),
            server,
            export: "/export".into(),
            client,
            stat_hangs: false,
        }
    }
}

/// `/proc/self/mountinfo` of a host with a root file system, `/proc` and `mounts`, as
/// `show_mountinfo` writes it (mount points escaped) with NFS's super options in
/// `nfs_show_mount_options`' order.
pub fn mountinfo(mounts: &[SimNfsMount]) -> String {
    let mut out = String::from(
        "22 1 259:2 / / rw,relatime shared:1 - ext4 /dev/nvme0n1p2 rw,errors=remount-ro\n\
         25 22 0:23 / /proc rw,nosuid,nodev,noexec,relatime shared:12 - proc proc rw\n",
    );
    for (i, m) in mounts.iter().enumerate() {
        let id = 80 + i;
        let escaped = m.mount_point.replace('\\', "\\134").replace(' ', "\\040");
        let server = match m.server {
            std::net::IpAddr::V6(a) => format!("[{a}]"),
            std::net::IpAddr::V4(a) => a.to_string(),
        };
        let proto = if m.server.is_ipv6() { "rdma6" } else { "rdma" };
        out.push_str(&format!(
            "{id} 22 0:{} / {escaped} rw,relatime shared:{id} - nfs4 {server}:{} \
             rw,vers=4.2,rsize=1048576,wsize=1048576,namlen=255,hard,proto={proto},port=20049,\
             timeo=600,retrans=2,sec=sys,clientaddr={},local_lock=none,addr={}\n",
            40 + i,
            m.export,
            m.client,
            m.server
        ));
    }
    out
}
