//! Request builders, in the form iproute2's `rdma` tool sends them (`rd_prepare_msg`:
//! `NLM_F_REQUEST | NLM_F_ACK`, plus `NLM_F_DUMP` for dumps), with a caller-chosen sequence
//! number and port id 0 (the kernel).
//!
//! What the kernel answers: a dump gets one message per object then NLMSG_DONE (no ACK
//! after it; a missing DEV_INDEX gets NLMSG_DONE carrying -EINVAL); a doit gets its reply and
//! then an ACK (NLMSG_ERROR 0).

use netlink_packet_core::{NetlinkHeader, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST};

use super::attribute::NldevAttribute;
use super::message::{NldevCommand, NldevMessage, NldevNetlinkMessage};

/// Flags of a dump request: `NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP` (0x305).
pub const DUMP_FLAGS: u16 = NLM_F_REQUEST | NLM_F_ACK | NLM_F_DUMP;
/// Flags of a single-object request: `NLM_F_REQUEST | NLM_F_ACK` (0x5).
pub(crate) const DOIT_FLAGS: u16 = NLM_F_REQUEST | NLM_F_ACK;

/// A finalized request (length and type filled in) of `command` with `attributes`.
pub fn request(
    command: NldevCommand,
    attributes: Vec<NldevAttribute>,
    flags: u16,
    seq: u32,
) -> NldevNetlinkMessage {
    let mut header = NetlinkHeader::default();
    header.flags = flags;
    header.sequence_number = seq;
    header.port_number = 0;
    let mut message = NldevNetlinkMessage::new(
        header,
        netlink_packet_core::NetlinkPayload::InnerMessage(NldevMessage::new(command, attributes)),
    );
    message.finalize();
    message
}

/// GET dump: every RDMA device (`rdma dev`).
pub fn get_dump(seq: u32) -> NldevNetlinkMessage {
    request(NldevCommand::Get, vec![], DUMP_FLAGS, seq)
}

/// GET of one device by index.
pub fn get_device(seq: u32, dev_index: u32) -> NldevNetlinkMessage {
    request(
        NldevCommand::Get,
        vec![NldevAttribute::DevIndex(dev_index)],
        DOIT_FLAGS,
        seq,
    )
}

/// PORT_GET dump: every port of one device (`rdma link show <dev>`).
pub fn port_get_dump(seq: u32, dev_index: u32) -> NldevNetlinkMessage {
    request(
        NldevCommand::PortGet,
        vec![NldevAttribute::DevIndex(dev_index)],
        DUMP_FLAGS,
        seq,
    )
}

/// PORT_GET of one port.
pub fn port_get(seq: u32, dev_index: u32, port: u32) -> NldevNetlinkMessage {
    let attributes = vec![
        NldevAttribute::DevIndex(dev_index),
        NldevAttribute::PortIndex(port),
    ];
    request(NldevCommand::PortGet, attributes, DOIT_FLAGS, seq)
}

/// SYS_GET: network-namespace mode, monitor support, … (`rdma system`).
pub fn sys_get(seq: u32) -> NldevNetlinkMessage {
    request(NldevCommand::SysGet, vec![], DOIT_FLAGS, seq)
}

/// RES_GET dump: resource counts of every device (`rdma resource`).
pub fn res_get_dump(seq: u32) -> NldevNetlinkMessage {
    request(NldevCommand::ResGet, vec![], DUMP_FLAGS, seq)
}

/// RES_QP_GET dump of one device, optionally of one port. The kernel has no all-device QP
/// dump: enumerate devices with [`get_dump`] first.
pub fn res_qp_get_dump(seq: u32, dev_index: u32, port: Option<u32>) -> NldevNetlinkMessage {
    let mut attributes = vec![NldevAttribute::DevIndex(dev_index)];
    attributes.extend(port.map(NldevAttribute::PortIndex));
    request(NldevCommand::ResQpGet, attributes, DUMP_FLAGS, seq)
}

/// RES_CM_ID_GET dump of one device.
pub fn res_cm_id_get_dump(seq: u32, dev_index: u32) -> NldevNetlinkMessage {
    request(
        NldevCommand::ResCmIdGet,
        vec![NldevAttribute::DevIndex(dev_index)],
        DUMP_FLAGS,
        seq,
    )
}

/// NEWLINK: create a software RDMA device (`rdma link add <name> type <rxe|siw> netdev
/// <netdev>`; attribute order as iproute2's `link_add_netdev`). Needs CAP_NET_ADMIN.
pub fn new_link(seq: u32, name: &str, link_type: &str, netdev: &str) -> NldevNetlinkMessage {
    let attributes = vec![
        NldevAttribute::DevName(name.to_string()),
        NldevAttribute::LinkType(link_type.to_string()),
        NldevAttribute::NdevName(netdev.to_string()),
    ];
    request(NldevCommand::NewLink, attributes, DOIT_FLAGS, seq)
}

/// DELLINK: delete a software RDMA device by index (`rdma link delete <name>`). The kernel
/// refuses devices without IBK_ALLOW_USER_UNREG (only rxe and siw have it). Needs
/// CAP_NET_ADMIN.
pub fn del_link(seq: u32, dev_index: u32) -> NldevNetlinkMessage {
    request(
        NldevCommand::DelLink,
        vec![NldevAttribute::DevIndex(dev_index)],
        DOIT_FLAGS,
        seq,
    )
}
