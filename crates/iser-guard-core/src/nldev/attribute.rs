//! RDMA_NLDEV attributes: one flat namespace (`enum rdma_nldev_attr`) shared by every command
//! and every nesting level, as the kernel's single `nldev_policy` table has it.
//!
//! The codec is *canonical*: it accepts exactly the encodings the kernel emits (zeroed
//! padding, NUL-terminated strings without trailing bytes, exact integer sizes, no stray
//! flags on scalar attributes) so that every decoded attribute list re-encodes to the same
//! bytes. Anything it does not know is kept as [`NldevAttribute::Other`] and round-trips
//! unchanged.
//!
//! Layout quirks (checked against captures of 6.1 and 6.12 kernels):
//! - nests in replies carry no `NLA_F_NESTED`; they are recognised by attribute type, and
//!   [`Nested::nla_f_nested`] remembers the form so a flagged nest re-encodes flagged;
//! - u8 attributes are `nla_len` 5 plus 3 bytes of padding; u64 attributes are plain 12-byte
//!   attributes (no PAD attribute in front);
//! - strings include their NUL; RES_SRC_ADDR/RES_DST_ADDR are a 128-byte
//!   `struct __kernel_sockaddr_storage`.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use netlink_packet_core::{
    emit_i32, emit_i64, emit_u32, emit_u64, DecodeError, DefaultNla, Emitable, ErrorContext, Nla,
    NlaBuffer, Parseable, NLA_F_NESTED, NLA_F_NET_BYTEORDER, NLA_HEADER_SIZE, NLA_TYPE_MASK,
};

use super::constants::*;
use super::state::{IbPortState, PhysState};

/// Deepest nesting the decoder follows. The kernel nests at most three levels
/// (RES_QP → RES_QP_ENTRY → DRIVER); the limit keeps hostile input from exhausting the stack.
pub const MAX_NEST_DEPTH: usize = 8;

/// One RDMA_NLDEV attribute.
///
/// Variant names follow the kernel's `RDMA_NLDEV_ATTR_*` / `RDMA_NLDEV_SYS_ATTR_*` names; the
/// value type is the one the uapi header documents. Attributes whose meaning depends on the
/// message (RES_TYPE and RES_STATE are a QP type/state in QP entries but a CM state in CM_ID
/// entries) stay raw here; the typed views in `entries` interpret them.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NldevAttribute {
    /// RDMA_NLDEV_ATTR_DEV_INDEX (u32): the RDMA device's index (not stable across re-creation).
    DevIndex(u32),
    /// RDMA_NLDEV_ATTR_DEV_NAME (string).
    DevName(String),
    /// RDMA_NLDEV_ATTR_PORT_INDEX (u32): a port number, or in GET replies the port count.
    PortIndex(u32),
    /// RDMA_NLDEV_ATTR_CAP_FLAGS (u64).
    CapFlags(u64),
    /// RDMA_NLDEV_ATTR_FW_VERSION (string).
    FwVersion(String),
    /// RDMA_NLDEV_ATTR_NODE_GUID (u64, host byte order).
    NodeGuid(u64),
    /// RDMA_NLDEV_ATTR_SYS_IMAGE_GUID (u64, host byte order).
    SysImageGuid(u64),
    /// RDMA_NLDEV_ATTR_SUBNET_PREFIX (u64).
    SubnetPrefix(u64),
    /// RDMA_NLDEV_ATTR_LID (u32).
    Lid(u32),
    /// RDMA_NLDEV_ATTR_SM_LID (u32).
    SmLid(u32),
    /// RDMA_NLDEV_ATTR_LMC (u8).
    Lmc(u8),
    /// RDMA_NLDEV_ATTR_PORT_STATE (u8, `enum ib_port_state`).
    PortState(IbPortState),
    /// RDMA_NLDEV_ATTR_PORT_PHYS_STATE (u8, `enum ib_port_phys_state`).
    PortPhysState(PhysState),
    /// RDMA_NLDEV_ATTR_DEV_NODE_TYPE (u8, `enum rdma_node_type`: 1 = CA).
    DevNodeType(u8),
    /// RDMA_NLDEV_ATTR_RES_SUMMARY (nest of RES_SUMMARY_ENTRY).
    ResSummary(Nested),
    /// RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY (nest: ENTRY_NAME, ENTRY_CURR).
    ResSummaryEntry(Nested),
    /// RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME (string, e.g. "qp").
    ResSummaryEntryName(String),
    /// RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR (u64).
    ResSummaryEntryCurr(u64),
    /// RDMA_NLDEV_ATTR_RES_QP (nest of RES_QP_ENTRY).
    ResQp(Nested),
    /// RDMA_NLDEV_ATTR_RES_QP_ENTRY (nest: one QP).
    ResQpEntry(Nested),
    /// RDMA_NLDEV_ATTR_RES_LQPN (u32): local QP number.
    ResLqpn(u32),
    /// RDMA_NLDEV_ATTR_RES_RQPN (u32): remote QP number (RC/UC only).
    ResRqpn(u32),
    /// RDMA_NLDEV_ATTR_RES_RQ_PSN (u32).
    ResRqPsn(u32),
    /// RDMA_NLDEV_ATTR_RES_SQ_PSN (u32).
    ResSqPsn(u32),
    /// RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE (u8, `enum ib_mig_state`).
    ResPathMigState(u8),
    /// RDMA_NLDEV_ATTR_RES_TYPE (u8): QP type (`enum ib_qp_type`).
    ResType(u8),
    /// RDMA_NLDEV_ATTR_RES_STATE (u8): QP state in QP entries, CM state in CM_ID entries.
    ResState(u8),
    /// RDMA_NLDEV_ATTR_RES_PID (u32): owner process of a user resource.
    ResPid(u32),
    /// RDMA_NLDEV_ATTR_RES_KERN_NAME (string): owner module of a kernel resource.
    ResKernName(String),
    /// RDMA_NLDEV_ATTR_RES_CM_ID (nest of RES_CM_ID_ENTRY).
    ResCmId(Nested),
    /// RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY (nest: one rdma_cm_id).
    ResCmIdEntry(Nested),
    /// RDMA_NLDEV_ATTR_RES_PS (u32): rdma_cm port space (0x106 = TCP).
    ResPs(u32),
    /// RDMA_NLDEV_ATTR_RES_SRC_ADDR (`__kernel_sockaddr_storage`).
    ResSrcAddr(SockAddr),
    /// RDMA_NLDEV_ATTR_RES_DST_ADDR (`__kernel_sockaddr_storage`).
    ResDstAddr(SockAddr),
    /// RDMA_NLDEV_ATTR_NDEV_INDEX (u32): the netdev's ifindex.
    NdevIndex(u32),
    /// RDMA_NLDEV_ATTR_NDEV_NAME (string): the netdev's name.
    NdevName(String),
    /// RDMA_NLDEV_ATTR_DRIVER (nest of driver-specific attributes).
    Driver(Nested),
    /// RDMA_NLDEV_ATTR_DRIVER_ENTRY (nest).
    DriverEntry(Nested),
    /// RDMA_NLDEV_ATTR_DRIVER_STRING (string): the name of the next driver value.
    DriverString(String),
    /// RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE (u8, `enum rdma_nldev_print_type`).
    DriverPrintType(u8),
    /// RDMA_NLDEV_ATTR_DRIVER_S32 (s32).
    DriverS32(i32),
    /// RDMA_NLDEV_ATTR_DRIVER_U32 (u32).
    DriverU32(u32),
    /// RDMA_NLDEV_ATTR_DRIVER_S64 (s64).
    DriverS64(i64),
    /// RDMA_NLDEV_ATTR_DRIVER_U64 (u64).
    DriverU64(u64),
    /// RDMA_NLDEV_ATTR_RES_PDN (u32).
    ResPdn(u32),
    /// RDMA_NLDEV_ATTR_RES_CQN (u32).
    ResCqn(u32),
    /// RDMA_NLDEV_ATTR_RES_MRN (u32).
    ResMrn(u32),
    /// RDMA_NLDEV_ATTR_RES_CM_IDN (u32).
    ResCmIdn(u32),
    /// RDMA_NLDEV_ATTR_RES_CTXN (u32).
    ResCtxn(u32),
    /// RDMA_NLDEV_ATTR_LINK_TYPE (string): "rxe" or "siw" in NEWLINK.
    LinkType(String),
    /// RDMA_NLDEV_SYS_ATTR_NETNS_MODE (u8): 1 = shared, 0 = exclusive.
    SysAttrNetnsMode(u8),
    /// RDMA_NLDEV_ATTR_DEV_PROTOCOL (string: "ib", "iw", "roce", "opa", "usnic").
    DevProtocol(String),
    /// RDMA_NLDEV_NET_NS_FD (u32).
    NetNsFd(u32),
    /// RDMA_NLDEV_ATTR_DEV_DIM (u8).
    DevDim(u8),
    /// RDMA_NLDEV_ATTR_RES_SRQN (u32).
    ResSrqn(u32),
    /// RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK (u8).
    SysAttrCopyOnFork(u8),
    /// RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE (u8).
    SysAttrPrivilegedQkeyMode(u8),
    /// RDMA_NLDEV_ATTR_DRIVER_DETAILS (u8).
    DriverDetails(u8),
    /// RDMA_NLDEV_ATTR_RES_SUBTYPE (string): driver QP subtype.
    ResSubtype(String),
    /// RDMA_NLDEV_ATTR_DEV_TYPE (u8, `enum rdma_nl_dev_type`).
    DevType(u8),
    /// RDMA_NLDEV_ATTR_PARENT_NAME (string).
    ParentName(String),
    /// RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE (u8, `enum rdma_nl_name_assign_type`).
    NameAssignType(u8),
    /// RDMA_NLDEV_ATTR_EVENT_TYPE (u8, `enum rdma_nl_notify_event_type`).
    EventType(u8),
    /// RDMA_NLDEV_SYS_ATTR_MONITOR_MODE (u8): 1 when the kernel sends monitor events.
    SysAttrMonitorMode(u8),
    /// Any other attribute, kept byte for byte (type flags included).
    Other(DefaultNla),
}

/// The attributes of a nest, and whether the nest header carried `NLA_F_NESTED`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Nested {
    /// The nested attributes, in wire order.
    pub attributes: Vec<NldevAttribute>,
    /// `true` if the nest header had `NLA_F_NESTED` set. Kernel replies leave it clear.
    pub nla_f_nested: bool,
}

impl Nested {
    /// A nest in the kernel's form (no `NLA_F_NESTED`).
    pub fn new(attributes: Vec<NldevAttribute>) -> Self {
        Nested {
            attributes,
            nla_f_nested: false,
        }
    }

    fn value_len(&self) -> usize {
        self.attributes.iter().map(Emitable::buffer_len).sum()
    }
}

/// A `struct __kernel_sockaddr_storage` (128 bytes) as the kernel puts it in
/// RES_SRC_ADDR/RES_DST_ADDR. The raw bytes are kept for a byte-exact round trip;
/// [`SockAddr::socket_addr`] decodes AF_INET and AF_INET6.
#[derive(Clone, PartialEq, Eq)]
pub struct SockAddr {
    raw: Box<[u8; K_SS_MAXSIZE]>,
}

impl SockAddr {
    /// Takes exactly 128 bytes; anything else is not a `__kernel_sockaddr_storage`.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, DecodeError> {
        let raw: [u8; K_SS_MAXSIZE] = bytes.try_into().map_err(|_| {
            DecodeError::from(format!(
                "expected a {K_SS_MAXSIZE}-byte sockaddr_storage, got {} bytes",
                bytes.len()
            ))
        })?;
        Ok(SockAddr { raw: Box::new(raw) })
    }

    /// The kernel layout of `addr` (`struct sockaddr_in` / `sockaddr_in6`, zero-filled).
    pub fn from_socket_addr(addr: SocketAddr) -> Self {
        let mut raw = [0u8; K_SS_MAXSIZE];
        match addr {
            SocketAddr::V4(a) => {
                raw[0..2].copy_from_slice(&AF_INET.to_ne_bytes());
                raw[2..4].copy_from_slice(&a.port().to_be_bytes());
                raw[4..8].copy_from_slice(&a.ip().octets());
            }
            SocketAddr::V6(a) => {
                raw[0..2].copy_from_slice(&AF_INET6.to_ne_bytes());
                raw[2..4].copy_from_slice(&a.port().to_be_bytes());
                raw[4..8].copy_from_slice(&a.flowinfo().to_be_bytes());
                raw[8..24].copy_from_slice(&a.ip().octets());
                raw[24..28].copy_from_slice(&a.scope_id().to_ne_bytes());
            }
        }
        SockAddr { raw: Box::new(raw) }
    }

    /// `ss_family` (host byte order).
    pub fn family(&self) -> u16 {
        u16::from_ne_bytes([self.raw[0], self.raw[1]])
    }

    /// The address and port for AF_INET/AF_INET6, `None` for other families (e.g. AF_IB).
    pub fn socket_addr(&self) -> Option<SocketAddr> {
        let r = &self.raw;
        let port = u16::from_be_bytes([r[2], r[3]]);
        match self.family() {
            AF_INET => {
                let ip = Ipv4Addr::new(r[4], r[5], r[6], r[7]);
                Some(SocketAddr::V4(SocketAddrV4::new(ip, port)))
            }
            AF_INET6 => {
                let flowinfo = u32::from_be_bytes([r[4], r[5], r[6], r[7]]);
                let mut octets = [0u8; 16];
                octets.copy_from_slice(&r[8..24]);
                let scope_id = u32::from_ne_bytes([r[24], r[25], r[26], r[27]]);
                let ip = Ipv6Addr::from(octets);
                Some(SocketAddr::V6(SocketAddrV6::new(
                    ip, port, flowinfo, scope_id,
                )))
            }
            _ => None,
        }
    }

    /// The IP address, if the family is AF_INET or AF_INET6.
    pub fn ip(&self) -> Option<IpAddr> {
        self.socket_addr().map(|a| a.ip())
    }

    /// The 128 raw bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.raw[..]
    }
}

impl fmt::Debug for SockAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.socket_addr() {
            Some(a) => write!(f, "SockAddr({a})"),
            None => write!(f, "SockAddr(family {})", self.family()),
        }
    }
}

/// Emit helpers: the buffer given to `emit_value` is exactly `value_len()` long, so these
/// cannot fail; they are written without unwrap so that a broken length contract
/// degrades to a short write, never to a panic in this module.
fn put_u32(buf: &mut [u8], v: u32) {
    let _ = emit_u32(buf, v);
}
fn put_u64(buf: &mut [u8], v: u64) {
    let _ = emit_u64(buf, v);
}
fn put_bytes(buf: &mut [u8], bytes: &[u8]) {
    for (dst, src) in buf.iter_mut().zip(bytes) {
        *dst = *src;
    }
}
fn put_string(buf: &mut [u8], s: &str) {
    put_bytes(buf, s.as_bytes());
    if let Some(last) = buf.get_mut(s.len()) {
        *last = 0;
    }
}
fn put_nested(buf: &mut [u8], nested: &Nested) {
    let mut offset = 0;
    for attr in &nested.attributes {
        let len = attr.buffer_len();
        if let Some(slot) = buf.get_mut(offset..offset + len) {
            attr.emit(slot);
        }
        offset += len;
    }
}

impl Nla for NldevAttribute {
    fn value_len(&self) -> usize {
        use NldevAttribute::*;
        match self {
            DevIndex(_) | PortIndex(_) | Lid(_) | SmLid(_) | ResLqpn(_) | ResRqpn(_)
            | ResRqPsn(_) | ResSqPsn(_) | ResPid(_) | ResPs(_) | NdevIndex(_) | DriverS32(_)
            | DriverU32(_) | ResPdn(_) | ResCqn(_) | ResMrn(_) | ResCmIdn(_) | ResCtxn(_)
            | NetNsFd(_) | ResSrqn(_) => 4,
            CapFlags(_)
            | NodeGuid(_)
            | SysImageGuid(_)
            | SubnetPrefix(_)
            | ResSummaryEntryCurr(_)
            | DriverS64(_)
            | DriverU64(_) => 8,
            Lmc(_)
            | PortState(_)
            | PortPhysState(_)
            | DevNodeType(_)
            | ResPathMigState(_)
            | ResType(_)
            | ResState(_)
            | DriverPrintType(_)
            | SysAttrNetnsMode(_)
            | DevDim(_)
            | SysAttrCopyOnFork(_)
            | SysAttrPrivilegedQkeyMode(_)
            | DriverDetails(_)
            | DevType(_)
            | NameAssignType(_)
            | EventType(_)
            | SysAttrMonitorMode(_) => 1,
            DevName(s)
            | FwVersion(s)
            | ResSummaryEntryName(s)
            | ResKernName(s)
            | NdevName(s)
            | DriverString(s)
            | LinkType(s)
            | DevProtocol(s)
            | ResSubtype(s)
            | ParentName(s) => s.len() + 1,
            ResSummary(n) | ResSummaryEntry(n) | ResQp(n) | ResQpEntry(n) | ResCmId(n)
            | ResCmIdEntry(n) | Driver(n) | DriverEntry(n) => n.value_len(),
            ResSrcAddr(_) | ResDstAddr(_) => K_SS_MAXSIZE,
            Other(nla) => nla.value_len(),
        }
    }

    fn kind(&self) -> u16 {
        use NldevAttribute::*;
        let nested = |n: &Nested, kind: u16| {
            if n.nla_f_nested {
                kind | NLA_F_NESTED
            } else {
                kind
            }
        };
        match self {
            DevIndex(_) => RDMA_NLDEV_ATTR_DEV_INDEX,
            DevName(_) => RDMA_NLDEV_ATTR_DEV_NAME,
            PortIndex(_) => RDMA_NLDEV_ATTR_PORT_INDEX,
            CapFlags(_) => RDMA_NLDEV_ATTR_CAP_FLAGS,
            FwVersion(_) => RDMA_NLDEV_ATTR_FW_VERSION,
            NodeGuid(_) => RDMA_NLDEV_ATTR_NODE_GUID,
            SysImageGuid(_) => RDMA_NLDEV_ATTR_SYS_IMAGE_GUID,
            SubnetPrefix(_) => RDMA_NLDEV_ATTR_SUBNET_PREFIX,
            Lid(_) => RDMA_NLDEV_ATTR_LID,
            SmLid(_) => RDMA_NLDEV_ATTR_SM_LID,
            Lmc(_) => RDMA_NLDEV_ATTR_LMC,
            PortState(_) => RDMA_NLDEV_ATTR_PORT_STATE,
            PortPhysState(_) => RDMA_NLDEV_ATTR_PORT_PHYS_STATE,
            DevNodeType(_) => RDMA_NLDEV_ATTR_DEV_NODE_TYPE,
            ResSummary(n) => nested(n, RDMA_NLDEV_ATTR_RES_SUMMARY),
            ResSummaryEntry(n) => nested(n, RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY),
            ResSummaryEntryName(_) => RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME,
            ResSummaryEntryCurr(_) => RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR,
            ResQp(n) => nested(n, RDMA_NLDEV_ATTR_RES_QP),
            ResQpEntry(n) => nested(n, RDMA_NLDEV_ATTR_RES_QP_ENTRY),
            ResLqpn(_) => RDMA_NLDEV_ATTR_RES_LQPN,
            ResRqpn(_) => RDMA_NLDEV_ATTR_RES_RQPN,
            ResRqPsn(_) => RDMA_NLDEV_ATTR_RES_RQ_PSN,
            ResSqPsn(_) => RDMA_NLDEV_ATTR_RES_SQ_PSN,
            ResPathMigState(_) => RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE,
            ResType(_) => RDMA_NLDEV_ATTR_RES_TYPE,
            ResState(_) => RDMA_NLDEV_ATTR_RES_STATE,
            ResPid(_) => RDMA_NLDEV_ATTR_RES_PID,
            ResKernName(_) => RDMA_NLDEV_ATTR_RES_KERN_NAME,
            ResCmId(n) => nested(n, RDMA_NLDEV_ATTR_RES_CM_ID),
            ResCmIdEntry(n) => nested(n, RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY),
            ResPs(_) => RDMA_NLDEV_ATTR_RES_PS,
            ResSrcAddr(_) => RDMA_NLDEV_ATTR_RES_SRC_ADDR,
            ResDstAddr(_) => RDMA_NLDEV_ATTR_RES_DST_ADDR,
            NdevIndex(_) => RDMA_NLDEV_ATTR_NDEV_INDEX,
            NdevName(_) => RDMA_NLDEV_ATTR_NDEV_NAME,
            Driver(n) => nested(n, RDMA_NLDEV_ATTR_DRIVER),
            DriverEntry(n) => nested(n, RDMA_NLDEV_ATTR_DRIVER_ENTRY),
            DriverString(_) => RDMA_NLDEV_ATTR_DRIVER_STRING,
            DriverPrintType(_) => RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE,
            DriverS32(_) => RDMA_NLDEV_ATTR_DRIVER_S32,
            DriverU32(_) => RDMA_NLDEV_ATTR_DRIVER_U32,
            DriverS64(_) => RDMA_NLDEV_ATTR_DRIVER_S64,
            DriverU64(_) => RDMA_NLDEV_ATTR_DRIVER_U64,
            ResPdn(_) => RDMA_NLDEV_ATTR_RES_PDN,
            ResCqn(_) => RDMA_NLDEV_ATTR_RES_CQN,
            ResMrn(_) => RDMA_NLDEV_ATTR_RES_MRN,
            ResCmIdn(_) => RDMA_NLDEV_ATTR_RES_CM_IDN,
            ResCtxn(_) => RDMA_NLDEV_ATTR_RES_CTXN,
            LinkType(_) => RDMA_NLDEV_ATTR_LINK_TYPE,
            SysAttrNetnsMode(_) => RDMA_NLDEV_SYS_ATTR_NETNS_MODE,
            DevProtocol(_) => RDMA_NLDEV_ATTR_DEV_PROTOCOL,
            NetNsFd(_) => RDMA_NLDEV_NET_NS_FD,
            DevDim(_) => RDMA_NLDEV_ATTR_DEV_DIM,
            ResSrqn(_) => RDMA_NLDEV_ATTR_RES_SRQN,
            SysAttrCopyOnFork(_) => RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK,
            SysAttrPrivilegedQkeyMode(_) => RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE,
            DriverDetails(_) => RDMA_NLDEV_ATTR_DRIVER_DETAILS,
            ResSubtype(_) => RDMA_NLDEV_ATTR_RES_SUBTYPE,
            DevType(_) => RDMA_NLDEV_ATTR_DEV_TYPE,
            ParentName(_) => RDMA_NLDEV_ATTR_PARENT_NAME,
            NameAssignType(_) => RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE,
            EventType(_) => RDMA_NLDEV_ATTR_EVENT_TYPE,
            SysAttrMonitorMode(_) => RDMA_NLDEV_SYS_ATTR_MONITOR_MODE,
            Other(nla) => nla.kind(),
        }
    }

    fn emit_value(&self, buf: &mut [u8]) {
        use NldevAttribute::*;
        match self {
            DevIndex(v) | PortIndex(v) | Lid(v) | SmLid(v) | ResLqpn(v) | ResRqpn(v)
            | ResRqPsn(v) | ResSqPsn(v) | ResPid(v) | ResPs(v) | NdevIndex(v) | DriverU32(v)
            | ResPdn(v) | ResCqn(v) | ResMrn(v) | ResCmIdn(v) | ResCtxn(v) | NetNsFd(v)
            | ResSrqn(v) => put_u32(buf, *v),
            DriverS32(v) => {
                let _ = emit_i32(buf, *v);
            }
            CapFlags(v)
            | NodeGuid(v)
            | SysImageGuid(v)
            | SubnetPrefix(v)
            | ResSummaryEntryCurr(v)
            | DriverU64(v) => put_u64(buf, *v),
            DriverS64(v) => {
                let _ = emit_i64(buf, *v);
            }
            Lmc(v)
            | DevNodeType(v)
            | ResPathMigState(v)
            | ResType(v)
            | ResState(v)
            | DriverPrintType(v)
            | SysAttrNetnsMode(v)
            | DevDim(v)
            | SysAttrCopyOnFork(v)
            | SysAttrPrivilegedQkeyMode(v)
            | DriverDetails(v)
            | DevType(v)
            | NameAssignType(v)
            | EventType(v)
            | SysAttrMonitorMode(v) => put_bytes(buf, &[*v]),
            PortState(s) => put_bytes(buf, &[u8::from(*s)]),
            PortPhysState(s) => put_bytes(buf, &[u8::from(*s)]),
            DevName(s)
            | FwVersion(s)
            | ResSummaryEntryName(s)
            | ResKernName(s)
            | NdevName(s)
            | DriverString(s)
            | LinkType(s)
            | DevProtocol(s)
            | ResSubtype(s)
            | ParentName(s) => put_string(buf, s),
            ResSummary(n) | ResSummaryEntry(n) | ResQp(n) | ResQpEntry(n) | ResCmId(n)
            | ResCmIdEntry(n) | Driver(n) | DriverEntry(n) => put_nested(buf, n),
            ResSrcAddr(a) | ResDstAddr(a) => put_bytes(buf, a.as_bytes()),
            Other(nla) => nla.emit_value(buf),
        }
    }
}

/// A string attribute in the kernel's form: UTF-8 bytes, one NUL, nothing after it.
fn parse_kernel_string(payload: &[u8]) -> Result<String, DecodeError> {
    let Some((&last, body)) = payload.split_last() else {
        return Err("empty string attribute (the kernel always sends the NUL)".into());
    };
    if last != 0 {
        return Err("string is not NUL-terminated".into());
    }
    if body.contains(&0) {
        return Err("string has bytes after its NUL terminator".into());
    }
    String::from_utf8(body.to_vec()).map_err(DecodeError::from)
}

fn is_nest_kind(kind: u16) -> bool {
    matches!(
        kind,
        RDMA_NLDEV_ATTR_RES_SUMMARY
            | RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY
            | RDMA_NLDEV_ATTR_RES_QP
            | RDMA_NLDEV_ATTR_RES_QP_ENTRY
            | RDMA_NLDEV_ATTR_RES_CM_ID
            | RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY
            | RDMA_NLDEV_ATTR_DRIVER
            | RDMA_NLDEV_ATTR_DRIVER_ENTRY
    )
}

impl NldevAttribute {
    /// Decodes one attribute, following nests down to [`MAX_NEST_DEPTH`] levels below `depth`.
    /// `whole` is the attribute with its header, cut to `nla_len` (>= 4, checked by the caller).
    #[inline]
    fn parse_at_depth(whole: &[u8], depth: usize) -> Result<NldevAttribute, DecodeError> {
        use NldevAttribute::*;
        let raw_kind = u16::from_ne_bytes([
            whole.get(2).copied().unwrap_or_default(),
            whole.get(3).copied().unwrap_or_default(),
        ]);
        let payload = whole.get(NLA_HEADER_SIZE..).unwrap_or_default();
        let kind = raw_kind & NLA_TYPE_MASK;
        let nested_flag = raw_kind & NLA_F_NESTED != 0;
        if nested_flag && raw_kind & NLA_F_NET_BYTEORDER != 0 {
            // netlink-packet-core's emitter drops NLA_F_NET_BYTEORDER when both flags are
            // set, so such an attribute could not be re-encoded; the kernel never sends one.
            return Err(format!(
                "attribute type {kind} has both NLA_F_NESTED and NLA_F_NET_BYTEORDER set"
            )
            .into());
        }
        // A flag the kernel never sets on this attribute: keep it verbatim, uninterpreted.
        if raw_kind & NLA_F_NET_BYTEORDER != 0 || (nested_flag && !is_nest_kind(kind)) {
            return Ok(Other(DefaultNla::parse(&NlaBuffer::new(whole))?));
        }
        let nest = |name: &str| -> Result<Nested, DecodeError> {
            if depth >= MAX_NEST_DEPTH {
                return Err(format!(
                    "invalid {name} value: attributes nested deeper than {MAX_NEST_DEPTH} levels"
                )
                .into());
            }
            let attributes = parse_attributes(payload, depth + 1)
                .with_context(|| format!("invalid {name} value"))?;
            Ok(Nested {
                attributes,
                nla_f_nested: nested_flag,
            })
        };
        Ok(match kind {
            RDMA_NLDEV_ATTR_DEV_INDEX => DevIndex(u32v(payload, "RDMA_NLDEV_ATTR_DEV_INDEX")?),
            RDMA_NLDEV_ATTR_DEV_NAME => DevName(strv(payload, "RDMA_NLDEV_ATTR_DEV_NAME")?),
            RDMA_NLDEV_ATTR_PORT_INDEX => PortIndex(u32v(payload, "RDMA_NLDEV_ATTR_PORT_INDEX")?),
            RDMA_NLDEV_ATTR_CAP_FLAGS => CapFlags(u64v(payload, "RDMA_NLDEV_ATTR_CAP_FLAGS")?),
            RDMA_NLDEV_ATTR_FW_VERSION => FwVersion(strv(payload, "RDMA_NLDEV_ATTR_FW_VERSION")?),
            RDMA_NLDEV_ATTR_NODE_GUID => NodeGuid(u64v(payload, "RDMA_NLDEV_ATTR_NODE_GUID")?),
            RDMA_NLDEV_ATTR_SYS_IMAGE_GUID => {
                SysImageGuid(u64v(payload, "RDMA_NLDEV_ATTR_SYS_IMAGE_GUID")?)
            }
            RDMA_NLDEV_ATTR_SUBNET_PREFIX => {
                SubnetPrefix(u64v(payload, "RDMA_NLDEV_ATTR_SUBNET_PREFIX")?)
            }
            RDMA_NLDEV_ATTR_LID => Lid(u32v(payload, "RDMA_NLDEV_ATTR_LID")?),
            RDMA_NLDEV_ATTR_SM_LID => SmLid(u32v(payload, "RDMA_NLDEV_ATTR_SM_LID")?),
            RDMA_NLDEV_ATTR_LMC => Lmc(u8v(payload, "RDMA_NLDEV_ATTR_LMC")?),
            RDMA_NLDEV_ATTR_PORT_STATE => {
                PortState(u8v(payload, "RDMA_NLDEV_ATTR_PORT_STATE")?.into())
            }
            RDMA_NLDEV_ATTR_PORT_PHYS_STATE => {
                PortPhysState(u8v(payload, "RDMA_NLDEV_ATTR_PORT_PHYS_STATE")?.into())
            }
            RDMA_NLDEV_ATTR_DEV_NODE_TYPE => {
                DevNodeType(u8v(payload, "RDMA_NLDEV_ATTR_DEV_NODE_TYPE")?)
            }
            RDMA_NLDEV_ATTR_RES_SUMMARY => ResSummary(nest("RDMA_NLDEV_ATTR_RES_SUMMARY")?),
            RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY => {
                ResSummaryEntry(nest("RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY")?)
            }
            RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME => {
                ResSummaryEntryName(strv(payload, "RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_NAME")?)
            }
            RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR => {
                ResSummaryEntryCurr(u64v(payload, "RDMA_NLDEV_ATTR_RES_SUMMARY_ENTRY_CURR")?)
            }
            RDMA_NLDEV_ATTR_RES_QP => ResQp(nest("RDMA_NLDEV_ATTR_RES_QP")?),
            RDMA_NLDEV_ATTR_RES_QP_ENTRY => ResQpEntry(nest("RDMA_NLDEV_ATTR_RES_QP_ENTRY")?),
            RDMA_NLDEV_ATTR_RES_LQPN => ResLqpn(u32v(payload, "RDMA_NLDEV_ATTR_RES_LQPN")?),
            RDMA_NLDEV_ATTR_RES_RQPN => ResRqpn(u32v(payload, "RDMA_NLDEV_ATTR_RES_RQPN")?),
            RDMA_NLDEV_ATTR_RES_RQ_PSN => ResRqPsn(u32v(payload, "RDMA_NLDEV_ATTR_RES_RQ_PSN")?),
            RDMA_NLDEV_ATTR_RES_SQ_PSN => ResSqPsn(u32v(payload, "RDMA_NLDEV_ATTR_RES_SQ_PSN")?),
            RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE => {
                ResPathMigState(u8v(payload, "RDMA_NLDEV_ATTR_RES_PATH_MIG_STATE")?)
            }
            RDMA_NLDEV_ATTR_RES_TYPE => ResType(u8v(payload, "RDMA_NLDEV_ATTR_RES_TYPE")?),
            RDMA_NLDEV_ATTR_RES_STATE => ResState(u8v(payload, "RDMA_NLDEV_ATTR_RES_STATE")?),
            RDMA_NLDEV_ATTR_RES_PID => ResPid(u32v(payload, "RDMA_NLDEV_ATTR_RES_PID")?),
            RDMA_NLDEV_ATTR_RES_KERN_NAME => {
                ResKernName(strv(payload, "RDMA_NLDEV_ATTR_RES_KERN_NAME")?)
            }
            RDMA_NLDEV_ATTR_RES_CM_ID => ResCmId(nest("RDMA_NLDEV_ATTR_RES_CM_ID")?),
            RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY => {
                ResCmIdEntry(nest("RDMA_NLDEV_ATTR_RES_CM_ID_ENTRY")?)
            }
            RDMA_NLDEV_ATTR_RES_PS => ResPs(u32v(payload, "RDMA_NLDEV_ATTR_RES_PS")?),
            RDMA_NLDEV_ATTR_RES_SRC_ADDR => {
                ResSrcAddr(addrv(payload, "RDMA_NLDEV_ATTR_RES_SRC_ADDR")?)
            }
            RDMA_NLDEV_ATTR_RES_DST_ADDR => {
                ResDstAddr(addrv(payload, "RDMA_NLDEV_ATTR_RES_DST_ADDR")?)
            }
            RDMA_NLDEV_ATTR_NDEV_INDEX => NdevIndex(u32v(payload, "RDMA_NLDEV_ATTR_NDEV_INDEX")?),
            RDMA_NLDEV_ATTR_NDEV_NAME => NdevName(strv(payload, "RDMA_NLDEV_ATTR_NDEV_NAME")?),
            RDMA_NLDEV_ATTR_DRIVER => Driver(nest("RDMA_NLDEV_ATTR_DRIVER")?),
            RDMA_NLDEV_ATTR_DRIVER_ENTRY => DriverEntry(nest("RDMA_NLDEV_ATTR_DRIVER_ENTRY")?),
            RDMA_NLDEV_ATTR_DRIVER_STRING => {
                DriverString(strv(payload, "RDMA_NLDEV_ATTR_DRIVER_STRING")?)
            }
            RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE => {
                DriverPrintType(u8v(payload, "RDMA_NLDEV_ATTR_DRIVER_PRINT_TYPE")?)
            }
            RDMA_NLDEV_ATTR_DRIVER_S32 => DriverS32(i32v(payload, "RDMA_NLDEV_ATTR_DRIVER_S32")?),
            RDMA_NLDEV_ATTR_DRIVER_U32 => DriverU32(u32v(payload, "RDMA_NLDEV_ATTR_DRIVER_U32")?),
            RDMA_NLDEV_ATTR_DRIVER_S64 => DriverS64(i64v(payload, "RDMA_NLDEV_ATTR_DRIVER_S64")?),
            RDMA_NLDEV_ATTR_DRIVER_U64 => DriverU64(u64v(payload, "RDMA_NLDEV_ATTR_DRIVER_U64")?),
            RDMA_NLDEV_ATTR_RES_PDN => ResPdn(u32v(payload, "RDMA_NLDEV_ATTR_RES_PDN")?),
            RDMA_NLDEV_ATTR_RES_CQN => ResCqn(u32v(payload, "RDMA_NLDEV_ATTR_RES_CQN")?),
            RDMA_NLDEV_ATTR_RES_MRN => ResMrn(u32v(payload, "RDMA_NLDEV_ATTR_RES_MRN")?),
            RDMA_NLDEV_ATTR_RES_CM_IDN => ResCmIdn(u32v(payload, "RDMA_NLDEV_ATTR_RES_CM_IDN")?),
            RDMA_NLDEV_ATTR_RES_CTXN => ResCtxn(u32v(payload, "RDMA_NLDEV_ATTR_RES_CTXN")?),
            RDMA_NLDEV_ATTR_LINK_TYPE => LinkType(strv(payload, "RDMA_NLDEV_ATTR_LINK_TYPE")?),
            RDMA_NLDEV_SYS_ATTR_NETNS_MODE => {
                SysAttrNetnsMode(u8v(payload, "RDMA_NLDEV_SYS_ATTR_NETNS_MODE")?)
            }
            RDMA_NLDEV_ATTR_DEV_PROTOCOL => {
                DevProtocol(strv(payload, "RDMA_NLDEV_ATTR_DEV_PROTOCOL")?)
            }
            RDMA_NLDEV_NET_NS_FD => NetNsFd(u32v(payload, "RDMA_NLDEV_NET_NS_FD")?),
            RDMA_NLDEV_ATTR_DEV_DIM => DevDim(u8v(payload, "RDMA_NLDEV_ATTR_DEV_DIM")?),
            RDMA_NLDEV_ATTR_RES_SRQN => ResSrqn(u32v(payload, "RDMA_NLDEV_ATTR_RES_SRQN")?),
            RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK => {
                SysAttrCopyOnFork(u8v(payload, "RDMA_NLDEV_SYS_ATTR_COPY_ON_FORK")?)
            }
            RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE => {
                SysAttrPrivilegedQkeyMode(u8v(payload, "RDMA_NLDEV_SYS_ATTR_PRIVILEGED_QKEY_MODE")?)
            }
            RDMA_NLDEV_ATTR_DRIVER_DETAILS => {
                DriverDetails(u8v(payload, "RDMA_NLDEV_ATTR_DRIVER_DETAILS")?)
            }
            RDMA_NLDEV_ATTR_RES_SUBTYPE => {
                ResSubtype(strv(payload, "RDMA_NLDEV_ATTR_RES_SUBTYPE")?)
            }
            RDMA_NLDEV_ATTR_DEV_TYPE => DevType(u8v(payload, "RDMA_NLDEV_ATTR_DEV_TYPE")?),
            RDMA_NLDEV_ATTR_PARENT_NAME => {
                ParentName(strv(payload, "RDMA_NLDEV_ATTR_PARENT_NAME")?)
            }
            RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE => {
                NameAssignType(u8v(payload, "RDMA_NLDEV_ATTR_NAME_ASSIGN_TYPE")?)
            }
            RDMA_NLDEV_ATTR_EVENT_TYPE => EventType(u8v(payload, "RDMA_NLDEV_ATTR_EVENT_TYPE")?),
            RDMA_NLDEV_SYS_ATTR_MONITOR_MODE => {
                SysAttrMonitorMode(u8v(payload, "RDMA_NLDEV_SYS_ATTR_MONITOR_MODE")?)
            }
            _ => Other(DefaultNla::parse(&NlaBuffer::new(whole))?),
        })
    }
}

impl<'a, T: AsRef<[u8]> + ?Sized> Parseable<NlaBuffer<&'a T>> for NldevAttribute {
    fn parse(buf: &NlaBuffer<&'a T>) -> Result<Self, DecodeError> {
        let bytes: &[u8] = (*buf).into_inner().as_ref();
        let buf = NlaBuffer::new_checked(bytes)?;
        let len = usize::from(buf.length());
        NldevAttribute::parse_at_depth(bytes.get(..len).unwrap_or_default(), 0)
    }
}

/// `nla_len` of the attribute at the start of `rest`, checked as `NlaBuffer::new_checked`
/// does (header present, 4 <= nla_len <= bytes left).
#[inline]
fn nla_len(rest: &[u8]) -> Result<usize, DecodeError> {
    let (Some(&l0), Some(&l1), Some(_)) = (rest.first(), rest.get(1), rest.get(3)) else {
        return Err(DecodeError::nla_buffer_too_small(
            rest.len(),
            NLA_HEADER_SIZE,
        ));
    };
    let len = usize::from(u16::from_ne_bytes([l0, l1]));
    if len > rest.len() {
        Err(DecodeError::nla_length_mismatch(rest.len(), len))
    } else if len < NLA_HEADER_SIZE {
        Err(DecodeError::nla_invalid_length(rest.len(), len))
    } else {
        Ok(len)
    }
}

/// Decodes an attribute stream (a message body or a nest's payload) in canonical form:
/// every attribute complete, padding present and zero, nothing left over.
///
/// `depth` is the nesting level of `bytes` (0 for a message body).
pub fn parse_attributes(bytes: &[u8], depth: usize) -> Result<Vec<NldevAttribute>, DecodeError> {
    // Count first so the vector is allocated once (this runs for every QP of a dump).
    let mut count = 0;
    let mut offset = 0;
    while let Some(Ok(len)) = bytes.get(offset..).filter(|r| !r.is_empty()).map(nla_len) {
        count += 1;
        offset += len.div_ceil(4) * 4;
    }
    let mut attributes = Vec::with_capacity(count);
    walk_attributes(bytes, |whole| {
        attributes.push(NldevAttribute::parse_at_depth(whole, depth)?);
        Ok(())
    })?;
    Ok(attributes)
}

/// The framing half of [`parse_attributes`]: checks every attribute header and its padding
/// and hands each attribute (header included, cut to `nla_len`) to `each`, in order.
#[inline]
pub(crate) fn walk_attributes<'a>(
    bytes: &'a [u8],
    mut each: impl FnMut(&'a [u8]) -> Result<(), DecodeError>,
) -> Result<(), DecodeError> {
    let mut offset = 0;
    while offset < bytes.len() {
        let rest = bytes.get(offset..).unwrap_or_default();
        let len = match nla_len(rest) {
            Ok(len) => len,
            Err(e) => return Err(at_offset(e, offset)),
        };
        let aligned = len.div_ceil(4) * 4;
        let Some(padding) = rest.get(len..aligned) else {
            return Err(padding_error(rest, offset, len, None));
        };
        if padding.iter().any(|&b| b != 0) {
            return Err(padding_error(rest, offset, len, Some(padding)));
        }
        each(rest.get(..len).unwrap_or_default())?;
        offset += aligned;
    }
    Ok(())
}

/// Type (flags masked) and payload of an attribute handed out by [`walk_attributes`], and
/// whether [`NldevAttribute::parse_at_depth`] would decode it as a typed nest of that type
/// (no NLA_F_NET_BYTEORDER; NLA_F_NESTED allowed).
#[inline]
pub(crate) fn split_attribute(whole: &[u8]) -> (u16, &[u8], bool) {
    let raw_kind = u16::from_ne_bytes([
        whole.get(2).copied().unwrap_or_default(),
        whole.get(3).copied().unwrap_or_default(),
    ]);
    let kind = raw_kind & NLA_TYPE_MASK;
    let typed_nest = raw_kind & NLA_F_NET_BYTEORDER == 0 && is_nest_kind(kind);
    (
        kind,
        whole.get(NLA_HEADER_SIZE..).unwrap_or_default(),
        typed_nest,
    )
}

/// Decodes one attribute (header included) at nesting level `depth`; see
/// [`parse_attributes`].
#[inline]
pub(crate) fn parse_attribute(whole: &[u8], depth: usize) -> Result<NldevAttribute, DecodeError> {
    NldevAttribute::parse_at_depth(whole, depth)
}

#[cold]
fn at_offset(e: DecodeError, offset: usize) -> DecodeError {
    e.context(format!("invalid attribute at offset {offset}"))
}

#[cold]
fn padding_error(rest: &[u8], offset: usize, len: usize, padding: Option<&[u8]>) -> DecodeError {
    let kind = match rest.get(2..4) {
        Some(&[a, b]) => u16::from_ne_bytes([a, b]) & NLA_TYPE_MASK,
        _ => 0,
    };
    match padding {
        None => format!(
            "attribute type {kind} at offset {offset}: its padding runs past the end \
             (nla_len {len}, {} bytes left)",
            rest.len()
        ),
        Some(p) => format!("attribute type {kind} at offset {offset}: non-zero padding {p:?}"),
    }
    .into()
}

/// The error of an attribute value that does not decode, with the attribute's kernel name.
#[cold]
fn invalid_value(name: &str, payload: &[u8], cause: DecodeError) -> DecodeError {
    cause.context(format!("invalid {name} value {payload:?}"))
}

#[inline]
fn fixed<const N: usize>(payload: &[u8], name: &str) -> Result<[u8; N], DecodeError> {
    payload
        .try_into()
        .map_err(|_| invalid_value(name, payload, DecodeError::invalid_number(N, payload.len())))
}

#[inline]
pub(crate) fn u8v(payload: &[u8], name: &str) -> Result<u8, DecodeError> {
    fixed::<1>(payload, name).map(|[b]| b)
}

#[inline]
pub(crate) fn u32v(payload: &[u8], name: &str) -> Result<u32, DecodeError> {
    fixed(payload, name).map(u32::from_ne_bytes)
}

#[inline]
fn i32v(payload: &[u8], name: &str) -> Result<i32, DecodeError> {
    fixed(payload, name).map(i32::from_ne_bytes)
}

#[inline]
fn u64v(payload: &[u8], name: &str) -> Result<u64, DecodeError> {
    fixed(payload, name).map(u64::from_ne_bytes)
}

#[inline]
fn i64v(payload: &[u8], name: &str) -> Result<i64, DecodeError> {
    fixed(payload, name).map(i64::from_ne_bytes)
}

#[inline]
pub(crate) fn strv(payload: &[u8], name: &str) -> Result<String, DecodeError> {
    parse_kernel_string(payload).map_err(|e| invalid_value(name, payload, e))
}

fn addrv(payload: &[u8], name: &str) -> Result<SockAddr, DecodeError> {
    SockAddr::from_bytes(payload).map_err(|e| invalid_value(name, payload, e))
}

/// Bytes of an attribute list; fails if some attribute or nest exceeds netlink's 16-bit
/// `nla_len` (the blanket emitter would silently truncate it).
pub(crate) fn check_lengths(attributes: &[NldevAttribute]) -> Result<usize, String> {
    let mut total = 0usize;
    for attr in attributes {
        let value_len = attr.value_len();
        if value_len + NLA_HEADER_SIZE > usize::from(u16::MAX) {
            return Err(format!(
                "attribute type {} has {value_len} bytes, more than nla_len can express",
                attr.kind() & NLA_TYPE_MASK
            ));
        }
        if let Some(nested) = attr.nested() {
            check_lengths(&nested.attributes)?;
        }
        total += attr.buffer_len();
    }
    Ok(total)
}

impl NldevAttribute {
    /// The nest behind a nest attribute, `None` for scalar attributes.
    pub fn nested(&self) -> Option<&Nested> {
        use NldevAttribute::*;
        match self {
            ResSummary(n) | ResSummaryEntry(n) | ResQp(n) | ResQpEntry(n) | ResCmId(n)
            | ResCmIdEntry(n) | Driver(n) | DriverEntry(n) => Some(n),
            _ => None,
        }
    }
}
