//! NVMe over RDMA controllers as the kernel shows them, and what bringing one back after a
//! device re-creation means. nvme_rdma deletes every controller of a removed device and
//! never reconnects (`nvme_rdma_remove_one` → `nvme_delete_ctrl`), so the daemon remembers
//! them before it re-creates the device and runs `nvme connect` with the same parameters
//! afterwards.
//!
//! Owns, all pure:
//! - the text of `/sys/class/nvme/nvmeN/*` ([`NvmeCtrlFiles`] → [`NvmeRdmaController`]):
//!   `transport` (`rdma`), `address` (`traddr=…,trsvcid=…[,host_traddr=…][,host_iface=…]`,
//!   `nvmf_get_address` in drivers/nvme/host/fabrics.c), `subsysnqn`, `hostnqn`, `hostid`,
//!   `state`, `queue_count` (admin queue included), `sqsize` (queue size − 1),
//!   `ctrl_loss_tmo` (seconds or `off`), `reconnect_delay`, `kato`, `cntrltype`, and the
//!   namespaces under it (`nvmeNnY`, or `nvmeScNnY` paths of a multipath head `nvmeSnY`);
//! - placing a controller on an RDMA port: by nvme_rdma's rows of the CM id table (their
//!   destination is the controller's `traddr:trsvcid`, their source its `host_traddr` when
//!   one was given), the kernel's own word; sysfs names no RDMA device;
//! - the `nvme connect` arguments that re-create it (nvme-cli's long option names, only the
//!   parameters the kernel showed);
//! - whether it is back: the same subsystem at the same address, `live`, every remembered
//!   namespace (by NSID) present again.
//!
//! Reading the files, running nvme-cli and the direct-I/O reads are the io layer's.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

use crate::nldev::CmIdEntry;

/// The `address` attribute of a fabrics controller.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FabricsAddress {
    /// `traddr`: the target's address.
    pub traddr: String,
    /// `trsvcid`: the target's service (port), `4420` by default.
    pub trsvcid: Option<String>,
    /// `host_traddr`: the local address the connection was made from, when the connect named
    /// one.
    pub host_traddr: Option<String>,
    /// `host_iface`: the local interface, when the connect named one (TCP only today).
    pub host_iface: Option<String>,
}

/// Why a controller's files could not be read into a model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NvmeSysfsError {
    /// A file every fabrics controller has is missing.
    Missing {
        /// Controller (`nvme0`).
        ctrl: String,
        /// Attribute.
        attr: &'static str,
    },
    /// A file's text is not what the kernel writes there.
    Malformed {
        /// Controller.
        ctrl: String,
        /// Attribute.
        attr: &'static str,
        /// What was wrong, with the text.
        reason: String,
    },
}

impl fmt::Display for NvmeSysfsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NvmeSysfsError::Missing { ctrl, attr } => {
                write!(f, "/sys/class/nvme/{ctrl}/{attr} is missing")
            }
            NvmeSysfsError::Malformed { ctrl, attr, reason } => {
                write!(f, "/sys/class/nvme/{ctrl}/{attr}: {reason}")
            }
        }
    }
}

impl std::error::Error for NvmeSysfsError {}

/// Reads an `address` attribute. Keys the kernel may add later are ignored; a text without
/// `traddr=` is refused.
pub fn parse_fabrics_address(text: &str) -> Result<FabricsAddress, String> {
    let mut fields: BTreeMap<&str, &str> = BTreeMap::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("{part:?} is not key=value"))?;
        fields.insert(k.trim(), v.trim());
    }
    let traddr = fields
        .get("traddr")
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("no traddr in {:?}", text.trim()))?;
    let opt = |k: &str| {
        fields
            .get(k)
            .filter(|v| !v.is_empty())
            .map(|v| (*v).to_string())
    };
    Ok(FabricsAddress {
        traddr: (*traddr).to_string(),
        trsvcid: opt("trsvcid"),
        host_traddr: opt("host_traddr"),
        host_iface: opt("host_iface"),
    })
}

/// The NVMe over Fabrics port a controller connects to when `trsvcid` is not given (the
/// IANA port of NVMe/RDMA and NVMe/TCP).
pub const NVME_RDMA_PORT: u16 = 4420;

/// The raw text of one controller's directory, as the io layer read it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NvmeCtrlFiles {
    /// The directory's name (`nvme0`).
    pub name: String,
    /// Attribute name → file text (unread or absent files are not in it).
    pub attrs: BTreeMap<String, String>,
    /// Namespace entries under it: (`nvme0n1` or `nvme0c0n1`, the text of its `nsid` file).
    pub namespaces: Vec<(String, Option<String>)>,
}

/// A namespace of a controller.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct NvmeNsRef {
    /// The block device (`nvme0n1`; for a multipath path `nvme0c1n1`, its head `nvme0n1`).
    pub block: String,
    /// Its NSID, when the kernel showed it: what identifies it again after a reconnect
    /// (block device names may change).
    pub nsid: Option<u32>,
}

/// An NVMe over RDMA controller, as remembered before a re-creation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmeRdmaController {
    /// Its name when seen (`nvme0`).
    pub name: String,
    /// Where it connects.
    pub address: FabricsAddress,
    /// The subsystem's NQN.
    pub subsysnqn: String,
    /// The host NQN it connected with.
    pub hostnqn: Option<String>,
    /// The host ID it connected with.
    pub hostid: Option<String>,
    /// `state`: `live`, `connecting`, `resetting`, `deleting`, …
    pub state: String,
    /// I/O queues (`queue_count` − 1: the admin queue is counted there).
    pub io_queues: Option<u32>,
    /// Queue size (`sqsize` + 1).
    pub queue_size: Option<u32>,
    /// `ctrl_loss_tmo` in seconds; `Some(-1)` for `off` (reconnect forever).
    pub ctrl_loss_tmo: Option<i64>,
    /// `reconnect_delay` in seconds.
    pub reconnect_delay: Option<u32>,
    /// `kato`: keep-alive timeout in seconds.
    pub kato: Option<u32>,
    /// Its namespaces.
    pub namespaces: Vec<NvmeNsRef>,
    /// The RDMA device and port its connections run on, when placed.
    pub placed: Option<(String, u32)>,
}

impl NvmeRdmaController {
    /// `nvme0 (nqn.… at 192.0.2.10:4420)`.
    pub fn describe(&self) -> String {
        format!(
            "{} ({} at {})",
            self.name,
            self.subsysnqn,
            self.target_text()
        )
    }

    fn target_text(&self) -> String {
        match &self.address.trsvcid {
            Some(s) => format!("{}:{s}", self.address.traddr),
            None => self.address.traddr.clone(),
        }
    }

    /// The same controller, as another view shows it: same subsystem, same target address.
    pub fn same_connection(&self, other: &NvmeRdmaController) -> bool {
        self.subsysnqn == other.subsysnqn
            && self.address.traddr == other.address.traddr
            && self.address.trsvcid.as_deref().unwrap_or("4420")
                == other.address.trsvcid.as_deref().unwrap_or("4420")
    }
}

/// Reads one controller's files. `Ok(None)` for a controller of another transport (`tcp`,
/// `pcie`, `loop`, `fc`) or a discovery controller (nothing to bring back: nvme-cli opens
/// those for a moment).
pub fn read_ctrl_files(
    files: &NvmeCtrlFiles,
) -> Result<Option<NvmeRdmaController>, NvmeSysfsError> {
    let ctrl = &files.name;
    let get = |attr: &str| files.attrs.get(attr).map(|t| t.trim());
    let Some(transport) = get("transport") else {
        return Err(NvmeSysfsError::Missing {
            ctrl: ctrl.clone(),
            attr: "transport",
        });
    };
    if transport != "rdma" || get("cntrltype") == Some("discovery") {
        return Ok(None);
    }
    let need = |attr: &'static str| {
        get(attr)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| NvmeSysfsError::Missing {
                ctrl: ctrl.clone(),
                attr,
            })
    };
    let bad = |attr: &'static str, reason: String| NvmeSysfsError::Malformed {
        ctrl: ctrl.clone(),
        attr,
        reason,
    };
    let number = |attr: &'static str| -> Result<Option<u32>, NvmeSysfsError> {
        get(attr)
            .map(|t| {
                t.parse::<u32>()
                    .map_err(|_| bad(attr, format!("{t:?} is not a number")))
            })
            .transpose()
    };
    let address = parse_fabrics_address(need("address")?).map_err(|r| bad("address", r))?;
    let subsysnqn = need("subsysnqn")?.to_string();
    let state = need("state")?.to_string();
    let ctrl_loss_tmo = get("ctrl_loss_tmo")
        .map(|t| match t {
            "off" => Ok(-1),
            t => t
                .parse::<i64>()
                .map_err(|_| bad("ctrl_loss_tmo", format!("{t:?} is neither seconds nor off"))),
        })
        .transpose()?;
    let text = |attr: &str| get(attr).filter(|t| !t.is_empty()).map(str::to_string);
    let mut namespaces = Vec::new();
    for (entry, nsid) in &files.namespaces {
        let Some(block) = namespace_block(entry) else {
            continue;
        };
        let nsid = nsid.as_deref().and_then(|t| t.trim().parse::<u32>().ok());
        namespaces.push(NvmeNsRef { block, nsid });
    }
    namespaces.sort();
    namespaces.dedup();
    Ok(Some(NvmeRdmaController {
        name: ctrl.clone(),
        address,
        subsysnqn,
        hostnqn: text("hostnqn"),
        hostid: text("hostid"),
        state,
        io_queues: number("queue_count")?.map(|n| n.saturating_sub(1)),
        queue_size: number("sqsize")?.map(|n| n.saturating_add(1)),
        ctrl_loss_tmo,
        reconnect_delay: number("reconnect_delay")?,
        kato: number("kato")?,
        namespaces,
        placed: None,
    }))
}

/// The block device of a namespace entry under a controller: `nvme0n1` itself, or the head
/// `nvme0n1` of the multipath path `nvme0c1n1` (`nvme%dc%dn%d`: subsystem, controller,
/// namespace head). `None` for a name of neither form.
pub fn namespace_block(entry: &str) -> Option<String> {
    let rest = entry.strip_prefix("nvme")?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let (subsys, tail) = rest.split_once('n')?;
    if digits(subsys) && digits(tail) {
        return Some(entry.to_string());
    }
    let (subsys, tail) = rest.split_once('c')?;
    let (ctrl, ns) = tail.split_once('n')?;
    (digits(subsys) && digits(ctrl) && digits(ns)).then(|| format!("nvme{subsys}n{ns}"))
}

/// Places each controller on the RDMA port of nvme_rdma's connections to its target (the
/// CM id table's rows owned by `nvme_rdma` whose destination is `traddr:trsvcid`, and whose
/// source is `host_traddr` when the controller has one). A controller with no such row
/// (between two reconnect attempts) keeps the placement it had in `before`, matched by
/// [`NvmeRdmaController::same_connection`].
pub fn place_controllers(
    ctrls: &mut [NvmeRdmaController],
    cm_ids: &[CmIdEntry],
    before: &[NvmeRdmaController],
) {
    for c in ctrls.iter_mut() {
        let port = c
            .address
            .trsvcid
            .as_deref()
            .unwrap_or("4420")
            .parse::<u16>()
            .ok();
        let traddr = c.address.traddr.parse::<std::net::IpAddr>().ok();
        let host = c
            .address
            .host_traddr
            .as_deref()
            .and_then(|h| h.parse::<std::net::IpAddr>().ok());
        let found = cm_ids.iter().find(|id| {
            id.kern_name.as_deref() == Some("nvme_rdma")
                && id.port.is_some()
                && id
                    .dst_addr
                    .as_ref()
                    .and_then(|a| a.socket_addr())
                    .is_some_and(|d| Some(d.ip()) == traddr && Some(d.port()) == port)
                && host.is_none_or(|h| {
                    id.src_addr
                        .as_ref()
                        .and_then(|a| a.socket_addr())
                        .is_some_and(|s| s.ip() == h)
                })
        });
        c.placed = match found {
            Some(id) => Some((id.dev_name.clone(), id.port.unwrap_or(1))),
            None => before
                .iter()
                .find(|b| b.same_connection(c))
                .and_then(|b| b.placed.clone()),
        };
    }
}

/// The controllers placed on `device`.
pub fn on_device<'a>(
    ctrls: &'a [NvmeRdmaController],
    device: &'a str,
) -> impl Iterator<Item = &'a NvmeRdmaController> + 'a {
    ctrls
        .iter()
        .filter(move |c| c.placed.as_ref().is_some_and(|(d, _)| d == device))
}

/// The arguments of `nvme connect` that re-create `c` (nvme-cli's long options; only what
/// the kernel showed, so nvme-cli's defaults fill in the rest, as they did the first time).
pub fn connect_args(c: &NvmeRdmaController) -> Vec<String> {
    let mut a = vec![
        "connect".to_string(),
        "--transport=rdma".to_string(),
        format!("--traddr={}", c.address.traddr),
    ];
    let mut opt = |k: &str, v: Option<String>| {
        if let Some(v) = v {
            a.push(format!("--{k}={v}"));
        }
    };
    opt("trsvcid", c.address.trsvcid.clone());
    opt("host-traddr", c.address.host_traddr.clone());
    opt("host-iface", c.address.host_iface.clone());
    opt("nqn", Some(c.subsysnqn.clone()));
    opt("hostnqn", c.hostnqn.clone());
    opt("hostid", c.hostid.clone());
    opt(
        "nr-io-queues",
        c.io_queues.filter(|n| *n > 0).map(|n| n.to_string()),
    );
    opt("queue-size", c.queue_size.map(|n| n.to_string()));
    opt("ctrl-loss-tmo", c.ctrl_loss_tmo.map(|n| n.to_string()));
    opt("reconnect-delay", c.reconnect_delay.map(|n| n.to_string()));
    opt(
        "keep-alive-tmo",
        c.kato.filter(|n| *n > 0).map(|n| n.to_string()),
    );
    a
}

/// Why a remembered controller is not back (yet).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "result", rename_all = "kebab-case")]
pub enum NvmeBackResult {
    /// Live, every namespace present, a direct read of each succeeded.
    Back {
        /// Its name now (may differ from the remembered one).
        now: String,
    },
    /// nvme-cli is not installed: nothing reconnects it.
    NoNvmeCli,
    /// `recovery.nvme-reconnect = false`.
    Disabled,
    /// `nvme connect` failed.
    ConnectFailed {
        /// nvme-cli's words or the exit.
        reason: String,
    },
    /// No controller of that subsystem and address after the connect.
    NotFound,
    /// It came back but did not reach `live` in time.
    NotLive {
        /// Its name now.
        now: String,
        /// Its last state.
        state: String,
    },
    /// Live, but remembered namespaces are missing.
    NamespacesMissing {
        /// Its name now.
        now: String,
        /// The remembered block devices not found again.
        missing: Vec<String>,
    },
    /// A direct-I/O read of a namespace failed.
    ReadFailed {
        /// Its name now.
        now: String,
        /// The block device.
        namespace: String,
        /// The error.
        reason: String,
    },
}

impl NvmeBackResult {
    /// The metrics label (`nvme_reconnects_total{result}`).
    pub fn label(&self) -> &'static str {
        match self {
            NvmeBackResult::Back { .. } => "back",
            NvmeBackResult::NoNvmeCli => "no-nvme-cli",
            NvmeBackResult::Disabled => "disabled",
            NvmeBackResult::ConnectFailed { .. } => "connect-failed",
            NvmeBackResult::NotFound => "not-found",
            NvmeBackResult::NotLive { .. } => "not-live",
            NvmeBackResult::NamespacesMissing { .. } => "namespaces-missing",
            NvmeBackResult::ReadFailed { .. } => "read-failed",
        }
    }

    /// Every label, in the order metrics list them.
    pub const LABELS: [&'static str; 8] = [
        "back",
        "no-nvme-cli",
        "disabled",
        "connect-failed",
        "not-found",
        "not-live",
        "namespaces-missing",
        "read-failed",
    ];

    /// It is back and verified.
    pub fn is_back(&self) -> bool {
        matches!(self, NvmeBackResult::Back { .. })
    }
}

impl fmt::Display for NvmeBackResult {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NvmeBackResult::Back { now } => {
                write!(
                    f,
                    "back as {now}: live, namespaces present, direct reads succeed"
                )
            }
            NvmeBackResult::NoNvmeCli => f.write_str("not reconnected: nvme-cli is not installed"),
            NvmeBackResult::Disabled => {
                f.write_str("not reconnected: recovery.nvme-reconnect = false")
            }
            NvmeBackResult::ConnectFailed { reason } => write!(f, "nvme connect failed: {reason}"),
            NvmeBackResult::NotFound => f.write_str(
                "nvme connect returned, but no controller of that subsystem and address appeared",
            ),
            NvmeBackResult::NotLive { now, state } => {
                write!(f, "back as {now} but {state}, not live")
            }
            NvmeBackResult::NamespacesMissing { now, missing } => {
                write!(
                    f,
                    "back as {now} without namespace(s) {}",
                    missing.join(", ")
                )
            }
            NvmeBackResult::ReadFailed {
                now,
                namespace,
                reason,
            } => write!(
                f,
                "back as {now}, but a direct read of {namespace} failed: {reason}"
            ),
        }
    }
}

/// One remembered controller and what became of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NvmeReconnectReport {
    /// As remembered before the re-creation.
    pub controller: NvmeRdmaController,
    /// What became of it.
    pub result: NvmeBackResult,
}

impl fmt::Display for NvmeReconnectReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.controller.describe(), self.result)
    }
}

/// Whether `remembered` is back among `now` (what sysfs shows after the connect): the same
/// connection, `live`, every remembered namespace present (by NSID when both sides know it,
/// else by count). `Ok` gives the controller now and the block devices to read.
pub fn check_back<'a>(
    remembered: &NvmeRdmaController,
    now: &'a [NvmeRdmaController],
) -> Result<(&'a NvmeRdmaController, Vec<String>), NvmeBackResult> {
    let Some(c) = now
        .iter()
        .filter(|c| c.same_connection(remembered))
        // A re-created controller next to a dying one (`deleting`): the live one counts.
        .max_by_key(|c| c.state == "live")
    else {
        return Err(NvmeBackResult::NotFound);
    };
    if c.state != "live" {
        return Err(NvmeBackResult::NotLive {
            now: c.name.clone(),
            state: c.state.clone(),
        });
    }
    let mut missing = Vec::new();
    let mut read = Vec::new();
    for ns in &remembered.namespaces {
        let found = match ns.nsid {
            Some(id) => c.namespaces.iter().find(|n| n.nsid == Some(id)),
            None => c.namespaces.iter().find(|n| n.block == ns.block),
        };
        match found {
            Some(n) => read.push(n.block.clone()),
            None => missing.push(ns.block.clone()),
        }
    }
    if !missing.is_empty() {
        return Err(NvmeBackResult::NamespacesMissing {
            now: c.name.clone(),
            missing,
        });
    }
    read.sort();
    read.dedup();
    Ok((c, read))
}

/// `nvme0 (nqn… at 192.0.2.10:4420), nvme1 (…)`, or `none`.
pub fn list_controllers(ctrls: &[NvmeRdmaController]) -> String {
    if ctrls.is_empty() {
        return "none".into();
    }
    ctrls
        .iter()
        .map(NvmeRdmaController::describe)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
