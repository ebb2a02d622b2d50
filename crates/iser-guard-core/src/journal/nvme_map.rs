//! The NVMe over RDMA controllers of a re-creation's record to and from their journal form
//! (`v2::JournalNvmeCtrl`: the remembered parameters, and the result once reported).

use super::v2::{JournalNvmeCtrl, JournalNvmeResult};
use super::JournalFormatError;
use crate::nvme_fabrics::{
    FabricsAddress, NvmeBackResult, NvmeNsRef, NvmeRdmaController, NvmeReconnectReport,
};

/// The journal form of `remembered`, each with its result in `back` if there is one.
pub(super) fn out(
    remembered: &[NvmeRdmaController],
    back: &[NvmeReconnectReport],
) -> Vec<JournalNvmeCtrl> {
    remembered
        .iter()
        .map(|c| JournalNvmeCtrl {
            name: c.name.clone(),
            traddr: c.address.traddr.clone(),
            trsvcid: c.address.trsvcid.clone(),
            host_traddr: c.address.host_traddr.clone(),
            host_iface: c.address.host_iface.clone(),
            subsysnqn: c.subsysnqn.clone(),
            hostnqn: c.hostnqn.clone(),
            hostid: c.hostid.clone(),
            state: c.state.clone(),
            io_queues: c.io_queues,
            queue_size: c.queue_size,
            ctrl_loss_tmo: c.ctrl_loss_tmo,
            reconnect_delay: c.reconnect_delay,
            kato: c.kato,
            namespaces: c
                .namespaces
                .iter()
                .map(|n| (n.block.clone(), n.nsid))
                .collect(),
            placed: c.placed.clone(),
            result: back
                .iter()
                .find(|r| r.controller == *c)
                .map(|r| result_out(&r.result)),
        })
        .collect()
}

fn result_out(r: &NvmeBackResult) -> JournalNvmeResult {
    let mut j = JournalNvmeResult {
        result: r.label().to_string(),
        now: None,
        state: None,
        missing: Vec::new(),
        namespace: None,
        reason: None,
    };
    match r {
        NvmeBackResult::Back { now } => j.now = Some(now.clone()),
        NvmeBackResult::NoNvmeCli | NvmeBackResult::Disabled | NvmeBackResult::NotFound => {}
        NvmeBackResult::ConnectFailed { reason } => j.reason = Some(reason.clone()),
        NvmeBackResult::NotLive { now, state } => {
            j.now = Some(now.clone());
            j.state = Some(state.clone());
        }
        NvmeBackResult::NamespacesMissing { now, missing } => {
            j.now = Some(now.clone());
            j.missing = missing.clone();
        }
        NvmeBackResult::ReadFailed {
            now,
            namespace,
            reason,
        } => {
            j.now = Some(now.clone());
            j.namespace = Some(namespace.clone());
            j.reason = Some(reason.clone());
        }
    }
    j
}

/// The remembered controller of a journal entry.
pub(super) fn controller_in(j: &JournalNvmeCtrl) -> NvmeRdmaController {
    NvmeRdmaController {
        name: j.name.clone(),
        address: FabricsAddress {
            traddr: j.traddr.clone(),
            trsvcid: j.trsvcid.clone(),
            host_traddr: j.host_traddr.clone(),
            host_iface: j.host_iface.clone(),
        },
        subsysnqn: j.subsysnqn.clone(),
        hostnqn: j.hostnqn.clone(),
        hostid: j.hostid.clone(),
        state: j.state.clone(),
        io_queues: j.io_queues,
        queue_size: j.queue_size,
        ctrl_loss_tmo: j.ctrl_loss_tmo,
        reconnect_delay: j.reconnect_delay,
        kato: j.kato,
        namespaces: j
            .namespaces
            .iter()
            .map(|(block, nsid)| NvmeNsRef {
                block: block.clone(),
                nsid: *nsid,
            })
            .collect(),
        placed: j.placed.clone(),
    }
}

/// The results of the entries that have one.
pub(super) fn reports_in(
    js: &[JournalNvmeCtrl],
) -> Result<Vec<NvmeReconnectReport>, JournalFormatError> {
    js.iter()
        .filter_map(|j| j.result.as_ref().map(|r| (j, r)))
        .map(|(j, r)| {
            Ok(NvmeReconnectReport {
                controller: controller_in(j),
                result: result_in(r)?,
            })
        })
        .collect()
}

fn result_in(r: &JournalNvmeResult) -> Result<NvmeBackResult, JournalFormatError> {
    let now = || r.now.clone().unwrap_or_default();
    Ok(match r.result.as_str() {
        "back" => NvmeBackResult::Back { now: now() },
        "no-nvme-cli" => NvmeBackResult::NoNvmeCli,
        "disabled" => NvmeBackResult::Disabled,
        "connect-failed" => NvmeBackResult::ConnectFailed {
            reason: r.reason.clone().unwrap_or_default(),
        },
        "not-found" => NvmeBackResult::NotFound,
        "not-live" => NvmeBackResult::NotLive {
            now: now(),
            state: r.state.clone().unwrap_or_default(),
        },
        "namespaces-missing" => NvmeBackResult::NamespacesMissing {
            now: now(),
            missing: r.missing.clone(),
        },
        "read-failed" => NvmeBackResult::ReadFailed {
            now: now(),
            namespace: r.namespace.clone().unwrap_or_default(),
            reason: r.reason.clone().unwrap_or_default(),
        },
        other => {
            return Err(JournalFormatError::Value {
                field: "nvme controller result",
                reason: format!("{other:?} is not an NVMe reconnect result"),
            })
        }
    })
}
