//! RDMA netlink (`NETLINK_RDMA`, client RDMA_NL_NLDEV) codec, pure: no sockets, no I/O.
//!
//! Modelled the way rust-netlink models rtnetlink on netlink-packet-core: kernel constant
//! names kept ([`constants`]), a typed attribute enum with a pass-through variant
//! ([`NldevAttribute`]), context on every parse error, request builders ([`request`]) and
//! typed views for consumers ([`DeviceInfo`], [`PortInfo`], [`QpEntry`], [`SysInfo`],
//! [`MonitorEvent`]), and a streaming reader for big QP dumps ([`QpDump`]). The decoder is
//! canonical: whatever it decodes, [`encode`] turns back into the same bytes.

mod attribute;
pub mod constants;
pub mod datagram;
mod entries;
mod error;
mod message;
mod qp_dump;
pub mod request;
mod state;

pub use attribute::{parse_attributes, Nested, NldevAttribute, SockAddr, MAX_NEST_DEPTH};
pub use entries::{
    CmIdEntry, DeviceInfo, MonitorEvent, PortInfo, QpEntries, QpEntry, QpTypeOrRaw, SysInfo,
};
pub use error::NldevError;
pub use message::{
    decode, dump_interrupted, encode, inner, DatagramMessages, NldevCommand, NldevMessage,
    NldevNetlinkMessage, NLMSG_HDRLEN,
};
pub use qp_dump::QpDump;
pub use state::{
    cm_state_name, path_mig_state_name, port_space_name, IbPortState, MonitorEventType, PhysState,
};

#[cfg(test)]
pub(crate) mod tests;
