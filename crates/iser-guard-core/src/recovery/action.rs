//! What the engine asks the daemon (or the simulator) to do. Actions are data: the engine
//! never performs them, and each carries an id so its outcome can be reported back.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::input::{PortId, Portal, SessionKey};

/// Correlates an action with its outcome. Unique for the life of the journal.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct ActionId(pub u64);

impl fmt::Display for ActionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}", self.0)
    }
}

/// Who asked for an action.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Origin {
    /// The engine decided on its own (subject to allow-list, dry-run and pause).
    Automatic,
    /// An operator command asked for it.
    Operator,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Origin::Automatic => "automatic",
            Origin::Operator => "operator",
        })
    }
}

/// The class of an alert: which `alerts.severity-*` key gives it its syslog severity
/// ([`crate::severity::AlertSeverities`]). It is never shown as a severity itself (it has no
/// `Display`): what `simulate`, `events`, the daemon's log and syslog show is the configured
/// severity. Serialized with the configuration's words (`fault`, `action`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum AlertClass {
    /// Storage is back, no action was needed (`alerts.severity-recovered`).
    #[serde(rename = "recovered", alias = "Info")]
    Info,
    /// Something is wrong and being handled (`alerts.severity-action`).
    #[serde(rename = "action", alias = "Warning")]
    Warning,
    /// Storage is down and the engine is acting or waiting (`alerts.severity-fault`).
    #[serde(rename = "fault", alias = "Error")]
    Error,
    /// Automatic recovery stopped: an operator must act (`alerts.severity-operator`).
    #[serde(rename = "operator", alias = "Critical")]
    Critical,
}

/// An alert for the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alert {
    /// Its class, which the configuration maps to a syslog severity.
    #[serde(rename = "class", alias = "severity")]
    pub severity: AlertClass,
    /// One line.
    pub summary: String,
    /// What happened and why, in operator words.
    pub detail: String,
    /// What the operator can run, if anything: one command line, runnable as it stands (no
    /// prose, no placeholder); advice in words belongs in `detail`.
    pub remedy: Option<String>,
    /// How many identical occurrences this alert stands for (storm deduplication).
    pub count: u64,
    /// Identical alerts share this key.
    pub key: String,
}

/// What an alert is about, for the fields of its log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AlertSubject {
    /// One port (`fault:rocep2s0f0/1:gsi`).
    Port(super::PortId),
    /// One device (`recreate:rocep2s0f0:2`, `blocked:rocep2s0f0`, `renamed:old:new` names
    /// the new one).
    Device(String),
    /// The host, a session or a kernel status (`paused`, `reconnect:[…]`, `cm-addr-error:…`).
    Host,
}

impl Alert {
    /// What the alert is about, read from its key (the key's kinds name their subject the
    /// same way: `kind:subject[:more]`).
    pub fn subject(&self) -> AlertSubject {
        let mut parts = self.key.splitn(3, ':');
        let kind = parts.next().unwrap_or_default();
        let subject = super::alerts::subject_of(&self.key);
        let port = |s: &str| {
            let (d, n) = s.rsplit_once('/')?;
            let n: u32 = n.parse().ok().filter(|n| *n > 0)?;
            (!d.is_empty()).then(|| super::PortId::new(d, n))
        };
        match kind {
            "fault" | "hold" | "listener" | "quarantine" | "quarantine-down" | "failed"
            | "healthy" => port(subject).map_or(AlertSubject::Host, AlertSubject::Port),
            "recreate" | "blocked" | "unblocked" | "driver-reset" | "mode" => {
                AlertSubject::Device(subject.to_string())
            }
            "renamed" => match parts.nth(1) {
                Some(to) => AlertSubject::Device(to.to_string()),
                None => AlertSubject::Host,
            },
            "unknown-device" => port(subject).map_or_else(
                || AlertSubject::Device(subject.to_string()),
                AlertSubject::Port,
            ),
            _ => AlertSubject::Host,
        }
    }
}

/// A hint for the executor on how to re-create the device; it still picks the least
/// disruptive method that works for what sysfs shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RecreateMethod {
    /// Let the executor choose (devlink `enable_roce` toggle, aux unbind/bind, link re-add).
    Auto,
    /// The device is gone: bring it back through its parent (PCI function / netdev).
    FromParent,
}

/// The iSCSI node an iscsiadm action addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IscsiNode {
    /// Target, portal and iface.
    pub key: SessionKey,
    /// iface transport (`iser`).
    pub transport: String,
}

/// What to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActionKind {
    /// TCP-connect to a portal and report [`ProbeResult`](super::ProbeResult). Harmless.
    ProbePortal {
        /// The portal.
        portal: Portal,
        /// Give up after this long.
        timeout: Duration,
    },
    /// Re-create the RDMA device (all its ports): destructive. Always preceded by a
    /// [`ActionKind::PersistState`] in the same batch (write-ahead).
    RecreateDevice {
        /// The device.
        device: String,
        /// Its parent (PCI function), if known: find it again by this after re-creation.
        parent: Option<String>,
        /// Its driver, if known.
        driver: Option<String>,
        /// Method hint.
        method: RecreateMethod,
        /// Which attempt this is (from 1).
        attempt: u32,
        /// What re-creating it needs, remembered while it existed (link type and netdev of a
        /// software device, parent function of a hardware one); what the executor plans
        /// from when the device is gone. `None`: never seen while it existed.
        #[serde(default)]
        remembered: Option<crate::reset_plan::RecreateFrom>,
    },
    /// `iscsiadm -m node -T target -p portal -I iface --login`.
    IscsiLogin {
        /// The node.
        node: IscsiNode,
        /// Kill iscsiadm after this long and report a timeout.
        timeout: Duration,
    },
    /// `iscsiadm -m session -r SID --logout`.
    IscsiLogout {
        /// The session id to log out.
        sid: u32,
        /// The node (for the message).
        node: IscsiNode,
        /// Kill iscsiadm after this long.
        timeout: Duration,
    },
    /// `iscsiadm -m session -r SID --rescan`.
    IscsiRescan {
        /// The session id.
        sid: u32,
        /// The node.
        node: IscsiNode,
        /// Kill iscsiadm after this long.
        timeout: Duration,
    },
    /// After a re-creation of `device`: `nvme connect` each controller remembered on it
    /// before, with its remembered parameters, then verify it (live, its namespaces present,
    /// a direct-I/O read of each) and report
    /// [`Outcome::NvmeReconnect`](super::Outcome::NvmeReconnect). Changes the host.
    NvmeReconnect {
        /// The re-created device.
        device: String,
        /// The controllers remembered on it.
        controllers: Vec<crate::nvme_fabrics::NvmeRdmaController>,
        /// Give up on a controller that is not back after this long.
        timeout: Duration,
    },
    /// After a re-creation of `device`: a bounded `stat` of each NFS over RDMA mount point
    /// remembered on it before (xprtrdma reconnects on the next RPC), retried within
    /// `window`, on a worker that never waits for a hung stat; report
    /// [`Outcome::NfsCheck`](super::Outcome::NfsCheck). Harmless: it reads metadata.
    NfsCheck {
        /// The re-created device.
        device: String,
        /// The mounts remembered on it.
        mounts: Vec<crate::nfs_rdma::NfsRdmaMount>,
        /// Give up on a mount that has not answered after this long.
        window: Duration,
    },
    /// After a re-creation of `device` and its sessions' verification: wait (up to
    /// `timeout`) for the dm-multipath paths remembered on it to be active in their maps
    /// again, `multipathd reinstate path` any that is back and running but still failed,
    /// and report [`Outcome::MultipathReinstate`](super::Outcome::MultipathReinstate).
    /// Changes the host (a reinstate).
    MultipathReinstate {
        /// The re-created device.
        device: String,
        /// The paths remembered on it.
        paths: Vec<crate::multipath::MultipathPathRef>,
        /// The block devices the device's sessions and controllers carry now, to find a
        /// path that came back under a new name.
        carriers: Vec<crate::multipath::BlockCarrier>,
        /// The bounded wait before reinstating, and for the reinstate to show.
        timeout: Duration,
    },
    /// Self-test one RDMA port (rdma_cm connect and a send over it, a QP walk; blocking up
    /// to `timeout`, run on a worker) and report
    /// [`Outcome::SelfTest`](super::Outcome::SelfTest). Harmless: it creates and destroys
    /// its own QPs and touches no session, so it runs in dry-run too.
    SelfTestPort {
        /// The device.
        device: String,
        /// The port (from 1).
        port: u32,
        /// Give up after this long (the self-test reports a failed step).
        timeout: Duration,
    },
    /// Run `iscsiadm -m session -P 3` now and feed the result to `handle_sessions`.
    /// No outcome is expected.
    RefreshSessions,
    /// Dump the RDMA devices, ports and QP table now and feed the facts to
    /// `handle_observation`. No outcome is expected.
    RefreshTopology,
    /// Tell the operator (syslog, log, metrics). No outcome is expected.
    Alert(Alert),
    /// Write `Engine::snapshot()` to the journal (atomic write + fsync) before executing the
    /// next action. Reports [`Outcome::PersistFailed`](super::Outcome::PersistFailed) only on
    /// failure.
    PersistState {
        /// Why (e.g. "about to re-create rocep2s0f0, attempt 1").
        reason: String,
    },
}

impl ActionKind {
    /// Changes the host (device re-creation, login, logout, rescan): subject to dry-run,
    /// pause and the allow-list.
    pub fn is_destructive(&self) -> bool {
        matches!(
            self,
            ActionKind::RecreateDevice { .. }
                | ActionKind::IscsiLogin { .. }
                | ActionKind::IscsiLogout { .. }
                | ActionKind::IscsiRescan { .. }
                | ActionKind::NvmeReconnect { .. }
                | ActionKind::MultipathReinstate { .. }
        )
    }

    /// The executor reports an outcome for this action.
    pub fn expects_outcome(&self) -> bool {
        matches!(
            self,
            ActionKind::ProbePortal { .. }
                | ActionKind::SelfTestPort { .. }
                | ActionKind::RecreateDevice { .. }
                | ActionKind::IscsiLogin { .. }
                | ActionKind::IscsiLogout { .. }
                | ActionKind::IscsiRescan { .. }
                | ActionKind::NvmeReconnect { .. }
                | ActionKind::NfsCheck { .. }
                | ActionKind::MultipathReinstate { .. }
        )
    }
}

/// One action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Action {
    /// Correlation id for the outcome.
    pub id: ActionId,
    /// The port this is for, if any.
    pub port: Option<PortId>,
    /// The device it touches, if any (destructive actions always name one).
    pub device: Option<String>,
    /// Who asked.
    pub origin: Origin,
    /// Why, in operator words.
    pub reason: String,
    /// What.
    pub kind: ActionKind,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            ActionKind::ProbePortal { portal, .. } => write!(f, "probe portal {portal}"),
            ActionKind::RecreateDevice {
                device, attempt, ..
            } => write!(f, "re-create RDMA device {device} (attempt {attempt})"),
            ActionKind::IscsiLogin { node, .. } => {
                write!(f, "iscsiadm --login {}", node.key)
            }
            ActionKind::IscsiLogout { sid, node, .. } => {
                write!(f, "iscsiadm --logout [sid: {sid}] {}", node.key)
            }
            ActionKind::IscsiRescan { sid, .. } => write!(f, "iscsiadm --rescan [sid: {sid}]"),
            ActionKind::NvmeReconnect {
                device,
                controllers,
                ..
            } => write!(
                f,
                "nvme connect {} controller(s) remembered on {device}",
                controllers.len()
            ),
            ActionKind::NfsCheck { device, mounts, .. } => write!(
                f,
                "stat {} NFS over RDMA mount(s) remembered on {device}",
                mounts.len()
            ),
            ActionKind::MultipathReinstate { device, paths, .. } => write!(
                f,
                "multipath paths of {device}: {} remembered, reinstate the failed",
                paths.len()
            ),
            ActionKind::SelfTestPort { device, port, .. } => {
                write!(f, "self-test of RDMA port {device}/{port}")
            }
            ActionKind::RefreshSessions => f.write_str("refresh iscsiadm session list"),
            ActionKind::RefreshTopology => f.write_str("refresh RDMA devices and QP table"),
            ActionKind::Alert(a) => write!(f, "alert: {}", a.summary),
            ActionKind::PersistState { reason } => write!(f, "journal state: {reason}"),
        }
    }
}
