//! RDMA consumers per port: who would lose a connection if a device were re-created, and
//! whether each is still working or already broken by the port's fault. Built from the RDMA
//! CM id table (RES_CM_ID_GET: kernel consumers by module, user space by pid) and the QP
//! table's owners (RES_QP_GET: `kern-owner` or pid); `comm` names come from the caller (the
//! daemon reads `/proc/PID/comm`, which this module may not).
//!
//! The policy half ([`ConsumerPolicy`], [`in_the_way`]) says which consumers hold an
//! automatic re-creation: a consumer the daemon brings back (ib_iser) never does (its
//! sessions are `recovery.other-sessions`' business), a broken one never does, one the
//! kernel brings back by itself never does ([`Consumer::kernel_brings_back`]: rpcrdma
//! without an address-bound listener; the daemon checks its NFS mounts after the
//! re-creation, `crate::nfs_rdma`), a live one does unless `[recovery.consumers]` says
//! `proceed` for its kind.
//!
//! "Live" is read from the tables alone, so it is evidence the kernel gives, not a guess:
//! - a listener (CM id in LISTEN) is live: a service the re-creation would end;
//! - a connection (CM id with a QP) is live when its state is CONNECT and its QP, if the QP
//!   table shows it, is in RTS or SQD; an id in DISCONNECT, DEVICE_REMOVAL or DESTROYING,
//!   still resolving (no connection to lose), or whose QP is in ERR, is not;
//! - a QP the CM id table does not explain (verbs without rdma_cm) is live in RTS or SQD.
//!
//! A consumer with nothing live on the port is broken: QP 1 stuck in ERR fails every CM
//! exchange on the port, so its connections are down already and the re-creation takes
//! nothing from it. Kernel lines (nvme_rdma's reconnect messages) are not used yet.
//!
//! Pure: tables in, a model out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::nldev::{cm_state_name, CmIdEntry, QpEntry, QpTypeOrRaw};
use crate::qp::{QpState, QpType};

/// What kind of consumer holds CM ids or QPs on a port. The kernel names its consumers by
/// module (RDMA_NLDEV_ATTR_RES_KERN_NAME, `KBUILD_MODNAME` of the caller); user space
/// shows a pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConsumerKind {
    /// `ib_iser`: the iSCSI initiator over RDMA; iser-guard reconnects its sessions.
    Iser,
    /// `nvme_rdma`: NVMe over RDMA host; its controllers are deleted with the device.
    NvmeRdma,
    /// `rpcrdma`: NFS over RDMA (client and server).
    Rpcrdma,
    /// `ib_srp`: the SCSI RDMA Protocol initiator.
    Srp,
    /// `rds_rdma`: Reliable Datagram Sockets over RDMA.
    Rds,
    /// `smc`: SMC-R sockets.
    Smc,
    /// Any other kernel module (`ib_isert`, `nvmet_rdma`, `ksmbd`, …).
    OtherKernel,
    /// A process (librdmacm or verbs users: SPDK, Ceph, MPI).
    UserSpace,
    /// The kernel named no owner.
    Unknown,
}

impl ConsumerKind {
    /// Every kind, in the order status and metrics list them.
    pub const ALL: [ConsumerKind; 9] = [
        ConsumerKind::Iser,
        ConsumerKind::NvmeRdma,
        ConsumerKind::Rpcrdma,
        ConsumerKind::Srp,
        ConsumerKind::Rds,
        ConsumerKind::Smc,
        ConsumerKind::OtherKernel,
        ConsumerKind::UserSpace,
        ConsumerKind::Unknown,
    ];

    /// The kind of a kernel module's consumer.
    pub(crate) fn of_module(module: &str) -> Self {
        match module {
            "ib_iser" => ConsumerKind::Iser,
            "nvme_rdma" => ConsumerKind::NvmeRdma,
            "rpcrdma" => ConsumerKind::Rpcrdma,
            "ib_srp" => ConsumerKind::Srp,
            "rds_rdma" | "rds" => ConsumerKind::Rds,
            "smc" => ConsumerKind::Smc,
            _ => ConsumerKind::OtherKernel,
        }
    }

    /// The key of `[recovery.consumers]` and of the metrics' `kind` label.
    pub fn key(self) -> &'static str {
        match self {
            ConsumerKind::Iser => "iser",
            ConsumerKind::NvmeRdma => "nvme-rdma",
            ConsumerKind::Rpcrdma => "rpcrdma",
            ConsumerKind::Srp => "srp",
            ConsumerKind::Rds => "rds",
            ConsumerKind::Smc => "smc",
            ConsumerKind::OtherKernel => "other-kernel",
            ConsumerKind::UserSpace => "user-space",
            ConsumerKind::Unknown => "unknown",
        }
    }

    /// The kind whose key this is.
    pub(crate) fn from_key(key: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.key() == key)
    }

    /// iser-guard brings this kind back after a re-creation (reconnects and verifies it).
    pub fn brought_back(self) -> bool {
        self == ConsumerKind::Iser
    }
}

impl fmt::Display for ConsumerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

/// Who holds an RDMA CM id or QP.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Owner {
    /// A kernel module (`ib_iser`, `nvme_rdma`, `rpcrdma`, `ib_isert`, …).
    Kernel {
        /// Its name.
        module: String,
    },
    /// A process (librdmacm users: SPDK, Ceph, MPI, a self-test).
    Process {
        /// Its pid.
        pid: u32,
        /// Its `comm`, when it could be read.
        comm: Option<String>,
    },
    /// The kernel named no owner.
    Unknown,
}

impl Owner {
    /// The owner a CM id or QP entry names: its module, else its pid (`comm` unknown until
    /// [`name_processes`]).
    pub fn of(kern_name: Option<&str>, pid: Option<u32>) -> Self {
        match (kern_name, pid) {
            (Some(k), _) if !k.is_empty() => Owner::Kernel {
                module: k.to_string(),
            },
            (_, Some(pid)) => Owner::Process { pid, comm: None },
            _ => Owner::Unknown,
        }
    }

    /// How an operator reads it: `ib_iser`, `pid 4242 (spdk_tgt)`.
    pub fn describe(&self) -> String {
        match self {
            Owner::Kernel { module } => module.clone(),
            Owner::Process { pid, comm } => match comm {
                Some(c) => format!("pid {pid} ({c})"),
                None => format!("pid {pid}"),
            },
            Owner::Unknown => "an unnamed owner".into(),
        }
    }

    /// Its kind.
    pub fn kind(&self) -> ConsumerKind {
        match self {
            Owner::Kernel { module } => ConsumerKind::of_module(module),
            Owner::Process { .. } => ConsumerKind::UserSpace,
            Owner::Unknown => ConsumerKind::Unknown,
        }
    }

    /// The iSER initiator, whose sessions iser-guard brings back.
    pub fn is_iser_initiator(&self) -> bool {
        self.kind() == ConsumerKind::Iser
    }
}

/// One consumer on one port, with what it holds there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Consumer {
    /// Its kind (the policy's key).
    pub kind: ConsumerKind,
    /// Who it is.
    pub owner: Owner,
    /// CM ids with a connection (not listeners).
    pub connections: u32,
    /// Of those, the live ones (CONNECT with its QP in RTS/SQD).
    pub live_connections: u32,
    /// CM ids listening on an address of this port.
    pub listeners: u32,
    /// Of those, the ones bound to one address (not a wildcard). rdma_cm re-creates a
    /// wildcard listener's per-device id on a new device by itself (`cma_add_one` →
    /// `cma_listen_on_dev`); one bound to an address gets DEVICE_REMOVAL and its owner
    /// decides (svcrdma's listen handler ignores it: the listener does not come back).
    #[serde(default)]
    pub bound_listeners: u32,
    /// QPs it owns that no CM id explains.
    pub qps: u32,
    /// Of those, the live ones (RTS/SQD).
    pub live_qps: u32,
    /// Rows of the tables that decided its health, as `rdma resource show` names them.
    pub evidence: Vec<String>,
}

impl Consumer {
    /// Something on the port still works for it: a re-creation would take it away.
    pub fn live(&self) -> bool {
        self.live_connections > 0 || self.listeners > 0 || self.live_qps > 0
    }

    /// The kernel brings back, by itself, everything live it holds here: rpcrdma's client
    /// transports (xprtrdma) let go of a removed device and connect again on the next RPC;
    /// the connections svcrdma accepted are re-made by their clients; a wildcard listener is
    /// re-created on the new device by rdma_cm. An address-bound svcrdma listener is not
    /// (`svc_rdma_listen_handler` ignores DEVICE_REMOVAL; "There is never a DEVICE_REMOVAL
    /// event for INADDR_ANY listeners"), so an rpcrdma consumer with one is not.
    pub fn kernel_brings_back(&self) -> bool {
        self.kind == ConsumerKind::Rpcrdma && self.bound_listeners == 0
    }

    /// `nvme_rdma (2 connections, live)`, `pid 4242 (spdk_tgt) (1 listener, live)`.
    pub fn describe(&self) -> String {
        let mut what = Vec::new();
        if self.connections > 0 {
            what.push(plural(self.connections, "connection"));
        }
        if self.listeners > 0 {
            what.push(plural(self.listeners, "listener"));
        }
        if self.qps > 0 {
            what.push(plural(self.qps, "QP"));
        }
        what.push(if self.live() { "live" } else { "broken" }.to_string());
        format!("{} ({})", self.owner.describe(), what.join(", "))
    }
}

fn plural(n: u32, what: &str) -> String {
    if n == 1 {
        format!("1 {what}")
    } else {
        format!("{n} {what}s")
    }
}

/// The consumers of one port.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PortConsumers {
    /// RDMA device.
    pub device: String,
    /// Port, from 1.
    pub port: u32,
    /// Its consumers, by owner.
    pub consumers: Vec<Consumer>,
}

/// A QP state in which a connection carries traffic.
fn qp_live(state: QpState) -> bool {
    matches!(state, QpState::Rts | QpState::Sqd)
}

/// Kernel QP owners that are not consumers of their own: `ib_core` (QP 0/1, the MAD layer,
/// re-created with the device), `rdma_cm` (QPs created for a CM id, attributed through the
/// CM id table) and `ib_ipoib` (re-attached by ipoib's add_one on the new device).
const INFRASTRUCTURE: [&str; 3] = ["ib_core", "rdma_cm", "ib_ipoib"];

/// RDMA_CM_CONNECT and RDMA_CM_LISTEN (`enum rdma_cm_state`).
const CM_CONNECT: u8 = 5;
const CM_LISTEN: u8 = 8;

/// The consumers of every port named by the tables. `cm_ids` and `qps` may span devices.
/// Entries without a port are left out (a CM id not yet bound to a port holds nothing
/// there). Sorted by device, port, then owner.
pub fn per_port(cm_ids: &[CmIdEntry], qps: &[QpEntry]) -> Vec<PortConsumers> {
    type Key = (String, u32);
    let mut by: BTreeMap<Key, BTreeMap<Owner, Consumer>> = BTreeMap::new();
    // Indexed once: a QP table can hold 100 000 QPs.
    let states: BTreeMap<(&str, u32), QpState> = qps
        .iter()
        .map(|q| ((q.dev_name.as_str(), q.lqpn), q.state))
        .collect();
    let qp_of = |dev: &str, lqpn: u32| states.get(&(dev, lqpn)).copied();
    let mut explained: BTreeSet<(&str, u32)> = BTreeSet::new();
    for id in cm_ids {
        let Some(port) = id.port else { continue };
        let owner = Owner::of(id.kern_name.as_deref(), id.pid);
        let c = by
            .entry((id.dev_name.clone(), port))
            .or_default()
            .entry(owner.clone())
            .or_insert_with(|| empty(owner));
        let state = cm_state_name(id.state);
        if id.state == CM_LISTEN {
            c.listeners += 1;
            if id
                .src_addr
                .as_ref()
                .and_then(|a| a.socket_addr())
                .is_some_and(|a| !a.ip().is_unspecified())
            {
                c.bound_listeners += 1;
            }
            c.evidence.push(format!("cm-idn {} {state}", idn(id)));
            continue;
        }
        c.connections += 1;
        let qp = id.lqpn.map(|n| (n, qp_of(&id.dev_name, n)));
        if let Some(n) = id.lqpn {
            explained.insert((id.dev_name.as_str(), n));
        }
        let live = id.state == CM_CONNECT && qp.is_none_or(|(_, s)| s.is_none_or(qp_live));
        if live {
            c.live_connections += 1;
        }
        let qp_text = match qp {
            Some((n, Some(s))) => format!(" qp {n} {}", s.name()),
            Some((n, None)) => format!(" qp {n}"),
            None => String::new(),
        };
        c.evidence
            .push(format!("cm-idn {} {state}{qp_text}", idn(id)));
    }
    for q in qps {
        let Some(port) = q.port else { continue };
        if matches!(q.qp_type, QpTypeOrRaw::Known(QpType::Smi | QpType::Gsi))
            || explained.contains(&(q.dev_name.as_str(), q.lqpn))
            || q.kern_name
                .as_deref()
                .is_some_and(|k| INFRASTRUCTURE.contains(&k))
        {
            continue;
        }
        let owner = Owner::of(q.kern_name.as_deref(), q.pid);
        let c = by
            .entry((q.dev_name.clone(), port))
            .or_default()
            .entry(owner.clone())
            .or_insert_with(|| empty(owner));
        c.qps += 1;
        if qp_live(q.state) {
            c.live_qps += 1;
        }
        c.evidence.push(format!("qp {} {}", q.lqpn, q.state.name()));
    }
    by.into_iter()
        .map(|((device, port), owners)| PortConsumers {
            device,
            port,
            consumers: owners.into_values().collect(),
        })
        .collect()
}

/// The consumers of every device of `topology` (its QP tables) with `cm_ids`, device by
/// device, so a big QP table is read in place, not copied.
pub fn of_topology(
    topology: &crate::topology::Topology,
    cm_ids: &[CmIdEntry],
) -> Vec<PortConsumers> {
    let mut out = Vec::new();
    for d in topology.devices() {
        let ids: Vec<CmIdEntry> = cm_ids
            .iter()
            .filter(|c| c.dev_name == d.info.name)
            .cloned()
            .collect();
        out.extend(per_port(&ids, d.qps.as_deref().unwrap_or_default()));
    }
    out
}

/// Names every process owner that has no `comm` yet by `comm` (the daemon reads
/// `/proc/PID/comm`; a process gone meanwhile stays a pid).
pub fn name_processes(ports: &mut [PortConsumers], comm: impl Fn(u32) -> Option<String>) {
    for c in ports.iter_mut().flat_map(|p| p.consumers.iter_mut()) {
        if let Owner::Process { pid, comm: slot } = &mut c.owner {
            if slot.is_none() {
                *slot = comm(*pid);
            }
        }
    }
}

fn idn(id: &CmIdEntry) -> String {
    id.cm_idn.map_or_else(|| "?".into(), |n| n.to_string())
}

fn empty(owner: Owner) -> Consumer {
    Consumer {
        kind: owner.kind(),
        owner,
        connections: 0,
        live_connections: 0,
        listeners: 0,
        bound_listeners: 0,
        qps: 0,
        live_qps: 0,
        evidence: Vec::new(),
    }
}

/// `[recovery.consumers]`: what a live consumer of a kind does to an automatic
/// re-creation of its device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ConsumerAction {
    /// Hold the re-creation and alert, naming the consumer (default).
    Wait,
    /// Re-create anyway: the operator accepts that the consumer loses its connections.
    Proceed,
}

/// The per-kind table of `[recovery.consumers]`. A kind not named waits. iSER is not in it:
/// its sessions are `recovery.other-sessions`' business.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerPolicy {
    /// Kinds with an action other than the default.
    pub kinds: BTreeMap<ConsumerKind, ConsumerAction>,
}

impl ConsumerPolicy {
    /// What a live consumer of `kind` does to an automatic re-creation.
    pub fn action(&self, kind: ConsumerKind) -> ConsumerAction {
        self.kinds
            .get(&kind)
            .copied()
            .unwrap_or(ConsumerAction::Wait)
    }
}

/// A consumer named in a decision (a hold, a re-creation's plan, the journal).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsumerRef {
    /// Port of the device it is on.
    pub port: u32,
    /// Its kind.
    pub kind: ConsumerKind,
    /// Who it is, in operator words.
    pub owner: String,
    /// It had something live on the port when the decision was made.
    pub live: bool,
}

impl ConsumerRef {
    /// The reference to `c` on `port`.
    pub fn of(port: u32, c: &Consumer) -> Self {
        ConsumerRef {
            port,
            kind: c.kind,
            owner: c.owner.describe(),
            live: c.live(),
        }
    }
}

impl fmt::Display for ConsumerRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} on port {} ({})",
            self.owner,
            self.port,
            if self.live { "live" } else { "broken" }
        )
    }
}

/// The consumers of a device (its ports' entries in `ports`) that hold an automatic
/// re-creation under `policy`: live, brought back neither by iser-guard nor by the kernel
/// ([`Consumer::kernel_brings_back`]), and of a kind that waits.
pub(crate) fn in_the_way(
    device: &str,
    ports: &[PortConsumers],
    policy: &ConsumerPolicy,
) -> Vec<ConsumerRef> {
    ports
        .iter()
        .filter(|p| p.device == device)
        .flat_map(|p| {
            p.consumers
                .iter()
                .filter(|c| {
                    c.live()
                        && !c.kind.brought_back()
                        && !c.kernel_brings_back()
                        && policy.action(c.kind) == ConsumerAction::Wait
                })
                .map(|c| ConsumerRef::of(p.port, c))
        })
        .collect()
}

/// Every consumer of `device` other than the ones iser-guard brings back: what a
/// re-creation's plan and alert name.
pub fn affected<'a>(
    device: &'a str,
    ports: &'a [PortConsumers],
) -> impl Iterator<Item = ConsumerRef> + 'a {
    ports
        .iter()
        .filter(move |p| p.device == device)
        .flat_map(|p| p.consumers.iter().map(|c| ConsumerRef::of(p.port, c)))
        .filter(|r| !r.kind.brought_back())
}

/// `nvme_rdma on port 1 (live), pid 4242 (spdk_tgt) on port 1 (broken)`, or `none`.
pub fn list(refs: &[ConsumerRef]) -> String {
    if refs.is_empty() {
        return "none".into();
    }
    refs.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
