//! Typed views of decoded RDMA_NLDEV messages for the rest of iser-guard: devices, ports,
//! QPs, CM ids, system settings and monitor events.
//!
//! Each view takes what the kernel always sends as required (a missing one is a
//! [`NldevError::MissingAttribute`], never a panic or a default) and what depends on the
//! device, kernel version or namespace as `Option`. Views copy out of the message; the
//! message itself stays the lossless record.

use std::net::SocketAddr;

use crate::qp::{QpState, QpType};

use netlink_packet_core::DecodeError;

use super::attribute::{parse_attribute, strv, u32v, u8v, NldevAttribute, SockAddr};
use super::constants::*;
use super::error::NldevError;
use super::message::{NldevCommand, NldevMessage};
use super::state::{IbPortState, MonitorEventType, PhysState};

/// First attribute for which `pick` returns `Some`.
fn find<'a, T>(
    attributes: &'a [NldevAttribute],
    pick: impl Fn(&'a NldevAttribute) -> Option<T>,
) -> Option<T> {
    attributes.iter().find_map(pick)
}

fn require<T>(
    value: Option<T>,
    what: &'static str,
    attribute: &'static str,
) -> Result<T, NldevError> {
    value.ok_or(NldevError::MissingAttribute { what, attribute })
}

fn expect_command(
    message: &NldevMessage,
    command: NldevCommand,
    expected: &'static str,
) -> Result<(), NldevError> {
    if message.command == command {
        Ok(())
    } else {
        Err(NldevError::UnexpectedMessage {
            expected,
            got: format!("a {} message", message.command),
        })
    }
}

macro_rules! pick {
    ($attrs:expr, $variant:ident) => {
        find($attrs, |a| match a {
            NldevAttribute::$variant(v) => Some(v.clone()),
            _ => None,
        })
    };
}

/// An RDMA device, from a GET reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceInfo {
    /// RDMA_NLDEV_ATTR_DEV_INDEX. Changes when the device is re-created.
    pub index: u32,
    /// RDMA_NLDEV_ATTR_DEV_NAME.
    pub name: String,
    /// RDMA_NLDEV_ATTR_PORT_INDEX, which GET replies use for the number of ports.
    pub port_count: u32,
    /// RDMA_NLDEV_ATTR_CAP_FLAGS.
    pub cap_flags: Option<u64>,
    /// RDMA_NLDEV_ATTR_FW_VERSION (absent when the driver reports none, as rxe).
    pub fw_version: Option<String>,
    /// RDMA_NLDEV_ATTR_NODE_GUID.
    pub node_guid: Option<u64>,
    /// RDMA_NLDEV_ATTR_SYS_IMAGE_GUID.
    pub sys_image_guid: Option<u64>,
    /// RDMA_NLDEV_ATTR_DEV_NODE_TYPE (1 = CA).
    pub node_type: Option<u8>,
    /// RDMA_NLDEV_ATTR_DEV_PROTOCOL ("roce", "iw", "ib", …).
    pub protocol: Option<String>,
    /// RDMA_NLDEV_ATTR_DEV_DIM.
    pub dim: Option<u8>,
    /// RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE (kernel >= 6.12; 1 = named by user space).
    pub name_assign_type: Option<u8>,
    /// RDMA_NLDEV_ATTR_DEV_TYPE (1 = SMI sub-device).
    pub dev_type: Option<u8>,
    /// RDMA_NLDEV_ATTR_PARENT_NAME (the parent device of an SMI sub-device).
    pub parent_name: Option<String>,
}

impl TryFrom<&NldevMessage> for DeviceInfo {
    type Error = NldevError;

    fn try_from(message: &NldevMessage) -> Result<Self, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_CMD_GET reply";
        expect_command(message, NldevCommand::Get, "an RDMA_NLDEV_CMD_GET reply")?;
        let a = &message.attributes;
        Ok(DeviceInfo {
            index: require(pick!(a, DevIndex), WHAT, "RDMA_NLDEV_ATTR_DEV_INDEX")?,
            name: require(pick!(a, DevName), WHAT, "RDMA_NLDEV_ATTR_DEV_NAME")?,
            port_count: require(pick!(a, PortIndex), WHAT, "RDMA_NLDEV_ATTR_PORT_INDEX")?,
            cap_flags: pick!(a, CapFlags),
            fw_version: pick!(a, FwVersion),
            node_guid: pick!(a, NodeGuid),
            sys_image_guid: pick!(a, SysImageGuid),
            node_type: pick!(a, DevNodeType),
            protocol: pick!(a, DevProtocol),
            dim: pick!(a, DevDim),
            name_assign_type: pick!(a, NameAssignType),
            dev_type: pick!(a, DevType),
            parent_name: pick!(a, ParentName),
        })
    }
}

/// One port of an RDMA device, from a PORT_GET reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// RDMA_NLDEV_ATTR_DEV_INDEX.
    pub dev_index: u32,
    /// RDMA_NLDEV_ATTR_DEV_NAME.
    pub dev_name: String,
    /// RDMA_NLDEV_ATTR_PORT_INDEX (from 1).
    pub port: u32,
    /// RDMA_NLDEV_ATTR_PORT_STATE.
    pub state: IbPortState,
    /// RDMA_NLDEV_ATTR_PORT_PHYS_STATE.
    pub phys_state: PhysState,
    /// RDMA_NLDEV_ATTR_NDEV_INDEX (RoCE/iWARP, when the netdev is in the caller's namespace).
    pub netdev_index: Option<u32>,
    /// RDMA_NLDEV_ATTR_NDEV_NAME.
    pub netdev_name: Option<String>,
    /// RDMA_NLDEV_ATTR_CAP_FLAGS (InfiniBand ports only).
    pub cap_flags: Option<u64>,
    /// RDMA_NLDEV_ATTR_SUBNET_PREFIX (InfiniBand ports only).
    pub subnet_prefix: Option<u64>,
    /// RDMA_NLDEV_ATTR_LID (InfiniBand ports only).
    pub lid: Option<u32>,
    /// RDMA_NLDEV_ATTR_SM_LID (InfiniBand ports only).
    pub sm_lid: Option<u32>,
    /// RDMA_NLDEV_ATTR_LMC (InfiniBand ports only).
    pub lmc: Option<u8>,
}

impl TryFrom<&NldevMessage> for PortInfo {
    type Error = NldevError;

    fn try_from(message: &NldevMessage) -> Result<Self, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_CMD_PORT_GET reply";
        expect_command(
            message,
            NldevCommand::PortGet,
            "an RDMA_NLDEV_CMD_PORT_GET reply",
        )?;
        let a = &message.attributes;
        Ok(PortInfo {
            dev_index: require(pick!(a, DevIndex), WHAT, "RDMA_NLDEV_ATTR_DEV_INDEX")?,
            dev_name: require(pick!(a, DevName), WHAT, "RDMA_NLDEV_ATTR_DEV_NAME")?,
            port: require(pick!(a, PortIndex), WHAT, "RDMA_NLDEV_ATTR_PORT_INDEX")?,
            state: require(pick!(a, PortState), WHAT, "RDMA_NLDEV_ATTR_PORT_STATE")?,
            phys_state: require(
                pick!(a, PortPhysState),
                WHAT,
                "RDMA_NLDEV_ATTR_PORT_PHYS_STATE",
            )?,
            netdev_index: pick!(a, NdevIndex),
            netdev_name: pick!(a, NdevName),
            cap_flags: pick!(a, CapFlags),
            subnet_prefix: pick!(a, SubnetPrefix),
            lid: pick!(a, Lid),
            sm_lid: pick!(a, SmLid),
            lmc: pick!(a, Lmc),
        })
    }
}

/// A QP type as the kernel reported it: a known [`QpType`], or the raw number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QpTypeOrRaw {
    /// A type of `enum ib_qp_type` this version knows.
    Known(QpType),
    /// Any other number.
    Raw(u8),
}

impl From<u8> for QpTypeOrRaw {
    fn from(v: u8) -> Self {
        QpType::from_kernel(u32::from(v)).map_or(QpTypeOrRaw::Raw(v), QpTypeOrRaw::Known)
    }
}

impl QpTypeOrRaw {
    /// The known type, if any.
    pub fn known(self) -> Option<QpType> {
        match self {
            QpTypeOrRaw::Known(t) => Some(t),
            QpTypeOrRaw::Raw(_) => None,
        }
    }

    /// The name iproute2 prints (`GSI`, `RC`, …), `UNKNOWN` for raw numbers.
    pub fn name(self) -> &'static str {
        match self {
            QpTypeOrRaw::Known(t) => t.name(),
            QpTypeOrRaw::Raw(_) => "UNKNOWN",
        }
    }
}

/// One QP of a RES_QP_GET dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpEntry {
    /// RDMA_NLDEV_ATTR_DEV_INDEX of the message.
    pub dev_index: u32,
    /// RDMA_NLDEV_ATTR_DEV_NAME of the message.
    pub dev_name: String,
    /// RDMA_NLDEV_ATTR_PORT_INDEX; absent while the QP has no port yet (RESET).
    pub port: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_LQPN: the QP number (1 = GSI).
    pub lqpn: u32,
    /// RDMA_NLDEV_ATTR_RES_RQPN (RC/UC).
    pub rqpn: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_TYPE.
    pub qp_type: QpTypeOrRaw,
    /// RDMA_NLDEV_ATTR_RES_STATE, live from the driver (`ib_query_qp`). Numbers outside
    /// `enum ib_qp_state` map to [`QpState::Unknown`], as iproute2 prints them.
    pub state: QpState,
    /// RDMA_NLDEV_ATTR_RES_PID: owner process of a user QP.
    pub pid: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_KERN_NAME: owner module of a kernel QP (`ib_core` for QP 1,
    /// `rdma_cm` for iSER connections).
    pub kern_name: Option<String>,
    /// RDMA_NLDEV_ATTR_RES_SQ_PSN.
    pub sq_psn: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_RQ_PSN (RC/UC).
    pub rq_psn: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE (RC/UC/XRC; see `state::path_mig_state_name`).
    pub path_mig_state: Option<u8>,
    /// RDMA_NLDEV_ATTR_RES_PDN (user QPs).
    pub pdn: Option<u32>,
}

impl QpEntry {
    /// Reads one RES_QP_ENTRY nest of device `dev_index`/`dev_name`.
    pub fn from_entry(
        dev_index: u32,
        dev_name: &str,
        entry: &[NldevAttribute],
    ) -> Result<Self, NldevError> {
        let mut builder = QpEntryBuilder::default();
        for attr in entry {
            builder.add(attr);
        }
        builder.finish(dev_index, dev_name)
    }

    /// The kernel's GSI QP (QP 1 of type GSI): the one whose ERR state means a stuck port.
    pub fn is_gsi(&self) -> bool {
        self.lqpn == 1 && self.qp_type == QpTypeOrRaw::Known(QpType::Gsi)
    }
}

/// Collects one RES_QP_ENTRY's attributes into a [`QpEntry`]; the first occurrence of an
/// attribute wins. Shared by [`QpEntry::from_entry`] and the streaming `QpDump` reader so
/// both read entries the same way.
#[derive(Debug, Default)]
pub(crate) struct QpEntryBuilder {
    port: Option<u32>,
    lqpn: Option<u32>,
    rqpn: Option<u32>,
    qp_type: Option<u8>,
    state: Option<u8>,
    pid: Option<u32>,
    kern_name: Option<String>,
    sq_psn: Option<u32>,
    rq_psn: Option<u32>,
    path_mig_state: Option<u8>,
    pdn: Option<u32>,
}

impl QpEntryBuilder {
    /// Takes note of `attr` (attributes a QP entry does not use are ignored).
    #[inline]
    pub(crate) fn add(&mut self, attr: &NldevAttribute) {
        match attr {
            NldevAttribute::PortIndex(v) => {
                self.port.get_or_insert(*v);
            }
            NldevAttribute::ResLqpn(v) => {
                self.lqpn.get_or_insert(*v);
            }
            NldevAttribute::ResRqpn(v) => {
                self.rqpn.get_or_insert(*v);
            }
            NldevAttribute::ResType(v) => {
                self.qp_type.get_or_insert(*v);
            }
            NldevAttribute::ResState(v) => {
                self.state.get_or_insert(*v);
            }
            NldevAttribute::ResPid(v) => {
                self.pid.get_or_insert(*v);
            }
            NldevAttribute::ResKernName(v) if self.kern_name.is_none() => {
                self.kern_name = Some(v.clone());
            }
            NldevAttribute::ResSqPsn(v) => {
                self.sq_psn.get_or_insert(*v);
            }
            NldevAttribute::ResRqPsn(v) => {
                self.rq_psn.get_or_insert(*v);
            }
            NldevAttribute::ResPathMigState(v) => {
                self.path_mig_state.get_or_insert(*v);
            }
            NldevAttribute::ResPdn(v) => {
                self.pdn.get_or_insert(*v);
            }
            _ => {}
        }
    }

    /// Like [`add`](Self::add), moving the owner name instead of copying it.
    #[inline]
    pub(crate) fn add_owned(&mut self, attr: NldevAttribute) {
        match attr {
            NldevAttribute::ResKernName(v) if self.kern_name.is_none() => self.kern_name = Some(v),
            other => self.add(&other),
        }
    }

    /// Takes note of one attribute straight from the wire (`whole` = header + payload, as
    /// handed out by `walk_attributes`). The QP fields are decoded here, without building an
    /// [`NldevAttribute`], by the same value decoders `parse_attributes` uses, and only when
    /// the type carries no flag; everything else goes through the full attribute decoder.
    /// So this accepts and rejects exactly what `parse_attributes` does, with the same
    /// errors.
    #[inline]
    pub(crate) fn add_wire(&mut self, whole: &[u8], depth: usize) -> Result<(), DecodeError> {
        let raw_kind = u16::from_ne_bytes([
            whole.get(2).copied().unwrap_or_default(),
            whole.get(3).copied().unwrap_or_default(),
        ]);
        let p = whole.get(4..).unwrap_or_default();
        match raw_kind {
            RDMA_NLDEV_ATTR_PORT_INDEX => {
                let v = u32v(p, "RDMA_NLDEV_ATTR_PORT_INDEX")?;
                self.port.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_LQPN => {
                let v = u32v(p, "RDMA_NLDEV_ATTR_RES_LQPN")?;
                self.lqpn.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_RQPN => {
                let v = u32v(p, "RDMA_NLDEV_ATTR_RES_RQPN")?;
                self.rqpn.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_RQ_PSN => {
                let v = u32v(p, "RDMA_NLDEV_ATTR_RES_RQ_PSN")?;
                self.rq_psn.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_SQ_PSN => {
                let v = u32v(p, "RDMA_NLDEV_ATTR_RES_SQ_PSN")?;
                self.sq_psn.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE => {
                let v = u8v(p, "RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE")?;
                self.path_mig_state.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_TYPE => {
                let v = u8v(p, "RDMA_NLDEV_ATTR_RES_TYPE")?;
                self.qp_type.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_STATE => {
                let v = u8v(p, "RDMA_NLDEV_ATTR_RES_STATE")?;
                self.state.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_PID => {
                let v = u32v(p, "RDMA_NLDEV_ATTR_RES_PID")?;
                self.pid.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_PDN => {
                let v = u32v(p, "RDMA_NLDEV_ATTR_RES_PDN")?;
                self.pdn.get_or_insert(v);
            }
            RDMA_NLDEV_ATTR_RES_KERN_NAME => {
                let v = strv(p, "RDMA_NLDEV_ATTR_RES_KERN_NAME")?;
                if self.kern_name.is_none() {
                    self.kern_name = Some(v);
                }
            }
            _ => self.add_owned(parse_attribute(whole, depth)?),
        }
        Ok(())
    }

    /// The entry, or the first required attribute it lacks.
    pub(crate) fn finish(self, dev_index: u32, dev_name: &str) -> Result<QpEntry, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_ATTR_RES_QP_ENTRY";
        let lqpn = require(self.lqpn, WHAT, "RDMA_NLDEV_ATTR_RES_LQPN")?;
        let qp_type = require(self.qp_type, WHAT, "RDMA_NLDEV_ATTR_RES_TYPE")?;
        let state = require(self.state, WHAT, "RDMA_NLDEV_ATTR_RES_STATE")?;
        Ok(QpEntry {
            dev_index,
            dev_name: dev_name.to_string(),
            port: self.port,
            lqpn,
            rqpn: self.rqpn,
            qp_type: QpTypeOrRaw::from(qp_type),
            state: QpState::from_kernel(u32::from(state)).unwrap_or(QpState::Unknown),
            pid: self.pid,
            kern_name: self.kern_name,
            sq_psn: self.sq_psn,
            rq_psn: self.rq_psn,
            path_mig_state: self.path_mig_state,
            pdn: self.pdn,
        })
    }
}

/// Device index and name of a per-device dump message.
fn device_of<'a>(
    message: &'a NldevMessage,
    what: &'static str,
) -> Result<(u32, &'a str), NldevError> {
    let a = &message.attributes;
    let index = require(pick!(a, DevIndex), what, "RDMA_NLDEV_ATTR_DEV_INDEX")?;
    let name = require(
        find(a, |x| match x {
            NldevAttribute::DevName(n) => Some(n.as_str()),
            _ => None,
        }),
        what,
        "RDMA_NLDEV_ATTR_DEV_NAME",
    )?;
    Ok((index, name))
}

/// The entries of a RES_QP_GET reply message, one `Result` per RES_QP_ENTRY so that a broken
/// entry can be skipped and counted while the others are used.
#[derive(Debug, Clone)]
pub struct QpEntries<'a> {
    dev_index: u32,
    dev_name: &'a str,
    entries: std::slice::Iter<'a, NldevAttribute>,
}

impl<'a> QpEntries<'a> {
    /// The QP entries of `message`, which must be a RES_QP_GET reply carrying its device.
    pub fn new(message: &'a NldevMessage) -> Result<Self, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_CMD_RES_QP_GET reply";
        expect_command(
            message,
            NldevCommand::ResQpGet,
            "an RDMA_NLDEV_CMD_RES_QP_GET reply",
        )?;
        let (dev_index, dev_name) = device_of(message, WHAT)?;
        let table = find(&message.attributes, |a| match a {
            NldevAttribute::ResQp(n) => Some(n.attributes.as_slice()),
            _ => None,
        });
        Ok(QpEntries {
            dev_index,
            dev_name,
            entries: table.unwrap_or_default().iter(),
        })
    }

    /// RDMA_NLDEV_ATTR_DEV_INDEX of the message.
    pub fn dev_index(&self) -> u32 {
        self.dev_index
    }

    /// RDMA_NLDEV_ATTR_DEV_NAME of the message.
    pub fn dev_name(&self) -> &'a str {
        self.dev_name
    }
}

impl Iterator for QpEntries<'_> {
    type Item = Result<QpEntry, NldevError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Attributes other than RES_QP_ENTRY inside RES_QP are not QPs; skip them.
        self.entries.by_ref().find_map(|a| match a {
            NldevAttribute::ResQpEntry(n) => Some(QpEntry::from_entry(
                self.dev_index,
                self.dev_name,
                &n.attributes,
            )),
            _ => None,
        })
    }
}

/// One rdma_cm id of a RES_CM_ID_GET dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CmIdEntry {
    /// RDMA_NLDEV_ATTR_DEV_INDEX of the message.
    pub dev_index: u32,
    /// RDMA_NLDEV_ATTR_DEV_NAME of the message.
    pub dev_name: String,
    /// RDMA_NLDEV_ATTR_PORT_INDEX.
    pub port: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_LQPN (absent for a listener).
    pub lqpn: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_TYPE (absent for a listener).
    pub qp_type: Option<QpTypeOrRaw>,
    /// RDMA_NLDEV_ATTR_RES_PS (see `state::port_space_name`).
    pub ps: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_STATE: `enum rdma_cm_state` (see `state::cm_state_name`).
    pub state: u8,
    /// RDMA_NLDEV_ATTR_RES_SRC_ADDR.
    pub src_addr: Option<SockAddr>,
    /// RDMA_NLDEV_ATTR_RES_DST_ADDR.
    pub dst_addr: Option<SockAddr>,
    /// RDMA_NLDEV_ATTR_RES_CM_IDN.
    pub cm_idn: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_PID.
    pub pid: Option<u32>,
    /// RDMA_NLDEV_ATTR_RES_KERN_NAME (`ib_iser`, `ib_isert`, …).
    pub kern_name: Option<String>,
}

impl CmIdEntry {
    /// Reads one RES_CM_ID_ENTRY nest.
    pub fn from_entry(
        dev_index: u32,
        dev_name: &str,
        entry: &[NldevAttribute],
    ) -> Result<Self, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY";
        Ok(CmIdEntry {
            dev_index,
            dev_name: dev_name.to_string(),
            port: pick!(entry, PortIndex),
            lqpn: pick!(entry, ResLqpn),
            qp_type: pick!(entry, ResType).map(QpTypeOrRaw::from),
            ps: pick!(entry, ResPs),
            state: require(pick!(entry, ResState), WHAT, "RDMA_NLDEV_ATTR_RES_STATE")?,
            src_addr: pick!(entry, ResSrcAddr),
            dst_addr: pick!(entry, ResDstAddr),
            cm_idn: pick!(entry, ResCmIdn),
            pid: pick!(entry, ResPid),
            kern_name: pick!(entry, ResKernName),
        })
    }

    /// The source address and port, when AF_INET/AF_INET6.
    pub fn src(&self) -> Option<SocketAddr> {
        self.src_addr.as_ref().and_then(SockAddr::socket_addr)
    }

    /// The destination address and port, when AF_INET/AF_INET6.
    pub fn dst(&self) -> Option<SocketAddr> {
        self.dst_addr.as_ref().and_then(SockAddr::socket_addr)
    }

    /// The entries of a RES_CM_ID_GET reply message, one `Result` per entry.
    pub fn all(message: &NldevMessage) -> Result<Vec<Result<CmIdEntry, NldevError>>, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_CMD_RES_CM_ID_GET reply";
        expect_command(
            message,
            NldevCommand::ResCmIdGet,
            "an RDMA_NLDEV_CMD_RES_CM_ID_GET reply",
        )?;
        let (dev_index, dev_name) = device_of(message, WHAT)?;
        let table = find(&message.attributes, |a| match a {
            NldevAttribute::ResCmId(n) => Some(n.attributes.as_slice()),
            _ => None,
        });
        Ok(table
            .unwrap_or_default()
            .iter()
            .filter_map(|a| match a {
                NldevAttribute::ResCmIdEntry(n) => {
                    Some(CmIdEntry::from_entry(dev_index, dev_name, &n.attributes))
                }
                _ => None,
            })
            .collect())
    }
}

/// System-wide RDMA settings, from a SYS_GET reply. Every field is optional: older kernels
/// send fewer of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SysInfo {
    /// RDMA_NLDEV_SYS_ATTR_NETNS_MODE: 1 = shared, 0 = exclusive.
    pub netns_mode: Option<u8>,
    /// RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE (kernel >= 6.5).
    pub privileged_qkey_mode: Option<u8>,
    /// RDMA_NLDEV_SYS_ATTR_MONITOR_MODE (kernel >= 6.12): 1 when monitor events are sent.
    pub monitor_mode: Option<u8>,
    /// RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK.
    pub copy_on_fork: Option<u8>,
}

impl SysInfo {
    /// Whether the kernel sends device events on RDMA_NL_GROUP_NOTIFY (iproute2's
    /// `mon_is_supported`: MONITOR_MODE present and non-zero).
    pub fn supports_monitor(&self) -> bool {
        self.monitor_mode.is_some_and(|m| m != 0)
    }

    /// `Some(true)` for shared network-namespace mode, `Some(false)` for exclusive.
    pub fn netns_shared(&self) -> Option<bool> {
        self.netns_mode.map(|m| m != 0)
    }
}

impl TryFrom<&NldevMessage> for SysInfo {
    type Error = NldevError;

    fn try_from(message: &NldevMessage) -> Result<Self, NldevError> {
        expect_command(
            message,
            NldevCommand::SysGet,
            "an RDMA_NLDEV_CMD_SYS_GET reply",
        )?;
        let a = &message.attributes;
        Ok(SysInfo {
            netns_mode: pick!(a, SysAttrNetnsMode),
            privileged_qkey_mode: pick!(a, SysAttrPrivilegedQkeyMode),
            monitor_mode: pick!(a, SysAttrMonitorMode),
            copy_on_fork: pick!(a, SysAttrCopyOnFork),
        })
    }
}

/// A device event of group RDMA_NL_GROUP_NOTIFY (RDMA_NLDEV_CMD_MONITOR, kernel >= 6.12).
///
/// What the kernel puts in (`rdma_nl_notify_event`): REGISTER, UNREGISTER and RENAME carry
/// the device index and (new) name, which are required here; NETDEV_ATTACH/DETACH carry
/// device, port and, if the netdev is in the listener's namespace, its index and name;
/// NETDEV_RENAME carries only the netdev's index and new name (nothing at all if the netdev
/// is in another namespace).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonitorEvent {
    /// RDMA_NLDEV_ATTR_EVENT_TYPE.
    pub event: MonitorEventType,
    /// RDMA_NLDEV_ATTR_DEV_INDEX.
    pub dev_index: Option<u32>,
    /// RDMA_NLDEV_ATTR_DEV_NAME (the new name for RENAME).
    pub dev_name: Option<String>,
    /// RDMA_NLDEV_ATTR_PORT_INDEX.
    pub port: Option<u32>,
    /// RDMA_NLDEV_ATTR_NDEV_INDEX.
    pub netdev_index: Option<u32>,
    /// RDMA_NLDEV_ATTR_NDEV_NAME.
    pub netdev_name: Option<String>,
}

impl TryFrom<&NldevMessage> for MonitorEvent {
    type Error = NldevError;

    fn try_from(message: &NldevMessage) -> Result<Self, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_CMD_MONITOR event";
        expect_command(
            message,
            NldevCommand::Monitor,
            "an RDMA_NLDEV_CMD_MONITOR event",
        )?;
        let a = &message.attributes;
        let event = MonitorEventType::from(require(
            pick!(a, EventType),
            WHAT,
            "RDMA_NLDEV_ATTR_EVENT_TYPE",
        )?);
        let ev = MonitorEvent {
            event,
            dev_index: pick!(a, DevIndex),
            dev_name: pick!(a, DevName),
            port: pick!(a, PortIndex),
            netdev_index: pick!(a, NdevIndex),
            netdev_name: pick!(a, NdevName),
        };
        if matches!(
            event,
            MonitorEventType::Register | MonitorEventType::Unregister | MonitorEventType::Rename
        ) {
            require(ev.dev_index, WHAT, "RDMA_NLDEV_ATTR_DEV_INDEX")?;
            require(ev.dev_name.as_ref(), WHAT, "RDMA_NLDEV_ATTR_DEV_NAME")?;
        }
        Ok(ev)
    }
}

// Encoding the views back into messages, attribute by attribute in the order the kernel's
// fill functions emit them (nldev.c: fill_dev_info, fill_port_info, fill_res_qp_entry,
// nldev_sys_get_doit, rdma_nl_notify_event), so that a fake kernel or a benchmark built from
// views sends what a real kernel would.

impl DeviceInfo {
    /// The GET reply for this device (`fill_dev_info` order).
    pub fn to_message(&self) -> NldevMessage {
        use NldevAttribute as A;
        let mut a = vec![
            A::DevIndex(self.index),
            A::DevName(self.name.clone()),
            A::PortIndex(self.port_count),
        ];
        a.extend(self.cap_flags.map(A::CapFlags));
        a.extend(self.fw_version.clone().map(A::FwVersion));
        a.extend(self.node_guid.map(A::NodeGuid));
        a.extend(self.sys_image_guid.map(A::SysImageGuid));
        a.extend(self.node_type.map(A::DevNodeType));
        a.extend(self.dim.map(A::DevDim));
        a.extend(self.dev_type.map(A::DevType));
        a.extend(self.parent_name.clone().map(A::ParentName));
        a.extend(self.name_assign_type.map(A::NameAssignType));
        a.extend(self.protocol.clone().map(A::DevProtocol));
        NldevMessage::new(NldevCommand::Get, a)
    }
}

impl PortInfo {
    /// The PORT_GET reply for this port (`fill_port_info` order).
    pub fn to_message(&self) -> NldevMessage {
        use NldevAttribute as A;
        let mut a = vec![
            A::DevIndex(self.dev_index),
            A::DevName(self.dev_name.clone()),
            A::PortIndex(self.port),
        ];
        a.extend(self.cap_flags.map(A::CapFlags));
        a.extend(self.subnet_prefix.map(A::SubnetPrefix));
        a.extend(self.lid.map(A::Lid));
        a.extend(self.sm_lid.map(A::SmLid));
        a.extend(self.lmc.map(A::Lmc));
        a.push(A::PortState(self.state));
        a.push(A::PortPhysState(self.phys_state));
        a.extend(self.netdev_index.map(A::NdevIndex));
        a.extend(self.netdev_name.clone().map(A::NdevName));
        NldevMessage::new(NldevCommand::PortGet, a)
    }
}

impl QpEntry {
    /// The attributes of this QP's RES_QP_ENTRY nest (`fill_res_qp_entry` order: port,
    /// lqpn, pdn, owner, then the queried rqpn, rq_psn, sq_psn, path_mig_state, type,
    /// state). `dev_index`/`dev_name` belong to the message, not the entry.
    pub fn to_attributes(&self) -> Vec<NldevAttribute> {
        use NldevAttribute as A;
        let mut a = Vec::with_capacity(10);
        a.extend(self.port.map(A::PortIndex));
        a.push(A::ResLqpn(self.lqpn));
        a.extend(self.pdn.map(A::ResPdn));
        a.extend(self.pid.map(A::ResPid));
        a.extend(self.kern_name.clone().map(A::ResKernName));
        a.extend(self.rqpn.map(A::ResRqpn));
        a.extend(self.rq_psn.map(A::ResRqPsn));
        a.extend(self.sq_psn.map(A::ResSqPsn));
        a.extend(self.path_mig_state.map(A::ResPathMigState));
        a.push(A::ResType(match self.qp_type {
            QpTypeOrRaw::Known(t) => t as u8,
            QpTypeOrRaw::Raw(v) => v,
        }));
        a.push(A::ResState(self.state as u8));
        a
    }

    /// One RES_QP_GET dump message of device `dev_index`/`dev_name` holding `qps`, as
    /// `res_get_common_dumpit` builds it: DEV_INDEX, DEV_NAME, then RES_QP with one
    /// RES_QP_ENTRY per QP. (The kernel starts a new message when its buffer is full.)
    pub fn dump_message(dev_index: u32, dev_name: &str, qps: &[QpEntry]) -> NldevMessage {
        use NldevAttribute as A;
        let entries = qps
            .iter()
            .map(|q| A::ResQpEntry(super::attribute::Nested::new(q.to_attributes())))
            .collect();
        NldevMessage::new(
            NldevCommand::ResQpGet,
            vec![
                A::DevIndex(dev_index),
                A::DevName(dev_name.to_string()),
                A::ResQp(super::attribute::Nested::new(entries)),
            ],
        )
    }
}

impl SysInfo {
    /// The SYS_GET reply (`nldev_sys_get_doit` order: netns mode, privileged qkey mode,
    /// monitor mode, copy-on-fork).
    pub fn to_message(&self) -> NldevMessage {
        use NldevAttribute as A;
        let mut a = Vec::new();
        a.extend(self.netns_mode.map(A::SysAttrNetnsMode));
        a.extend(self.privileged_qkey_mode.map(A::SysAttrPrivilegedQkeyMode));
        a.extend(self.monitor_mode.map(A::SysAttrMonitorMode));
        a.extend(self.copy_on_fork.map(A::SysAttrCopyOnFork));
        NldevMessage::new(NldevCommand::SysGet, a)
    }
}

impl MonitorEvent {
    /// The RDMA_NLDEV_CMD_MONITOR message of this event (`rdma_nl_notify_event` order:
    /// device, port, netdev, then EVENT_TYPE last).
    pub fn to_message(&self) -> NldevMessage {
        use NldevAttribute as A;
        let mut a = Vec::new();
        a.extend(self.dev_index.map(A::DevIndex));
        a.extend(self.dev_name.clone().map(A::DevName));
        a.extend(self.port.map(A::PortIndex));
        a.extend(self.netdev_index.map(A::NdevIndex));
        a.extend(self.netdev_name.clone().map(A::NdevName));
        a.push(A::EventType(u8::from(self.event)));
        NldevMessage::new(NldevCommand::Monitor, a)
    }
}
