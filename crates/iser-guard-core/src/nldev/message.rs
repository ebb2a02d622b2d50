//! RDMA_NLDEV messages: `nlmsg_type = RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)` followed directly
//! by attributes (no genetlink or family header), on netlink-packet-core's
//! [`NetlinkMessage`] framing.
//!
//! Requests and replies of one command share a message type (the kernel answers GET with
//! GET); which one a message is follows from the header flags and direction, so a message is
//! modelled as a command plus its attribute list. [`decode`] and [`encode`] are the entry
//! points; [`DatagramMessages`] splits one `recv()` buffer into messages.

use std::fmt;

use netlink_packet_core::{
    Emitable, NetlinkBuffer, NetlinkDeserializable, NetlinkHeader, NetlinkMessage, NetlinkPayload,
    NetlinkSerializable, Parseable, NLMSG_ALIGNTO, NLMSG_DONE, NLMSG_ERROR, NLMSG_NOOP,
    NLMSG_OVERRUN,
};

use super::attribute::{check_lengths, parse_attributes, NldevAttribute};
use super::constants::*;
use super::error::NldevError;

/// A netlink message carrying an RDMA_NLDEV message or a netlink control message
/// (NLMSG_DONE, NLMSG_ERROR, …).
pub type NldevNetlinkMessage = NetlinkMessage<NldevMessage>;

/// Size of `struct nlmsghdr`.
pub const NLMSG_HDRLEN: usize = 16;

/// An RDMA_NLDEV command (`enum rdma_nldev_command`), the low 10 bits of `nlmsg_type`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NldevCommand {
    /// RDMA_NLDEV_CMD_GET (1): device info; dumpable.
    Get,
    /// RDMA_NLDEV_CMD_SET (2).
    Set,
    /// RDMA_NLDEV_CMD_NEWLINK (3): create an rxe/siw device.
    NewLink,
    /// RDMA_NLDEV_CMD_DELLINK (4): delete an rxe/siw device.
    DelLink,
    /// RDMA_NLDEV_CMD_PORT_GET (5): port info; dumpable per device.
    PortGet,
    /// RDMA_NLDEV_CMD_SYS_GET (6): system-wide settings.
    SysGet,
    /// RDMA_NLDEV_CMD_SYS_SET (7).
    SysSet,
    /// RDMA_NLDEV_CMD_RES_GET (9): resource summary; dumpable.
    ResGet,
    /// RDMA_NLDEV_CMD_RES_QP_GET (10): QP table; dumpable per device.
    ResQpGet,
    /// RDMA_NLDEV_CMD_RES_CM_ID_GET (11): rdma_cm ids; dumpable per device.
    ResCmIdGet,
    /// RDMA_NLDEV_CMD_RES_CQ_GET (12).
    ResCqGet,
    /// RDMA_NLDEV_CMD_RES_MR_GET (13).
    ResMrGet,
    /// RDMA_NLDEV_CMD_RES_PD_GET (14).
    ResPdGet,
    /// RDMA_NLDEV_CMD_GET_CHARDEV (15).
    GetChardev,
    /// RDMA_NLDEV_CMD_STAT_SET (16).
    StatSet,
    /// RDMA_NLDEV_CMD_STAT_GET (17).
    StatGet,
    /// RDMA_NLDEV_CMD_STAT_DEL (18).
    StatDel,
    /// RDMA_NLDEV_CMD_RES_QP_GET_RAW (19).
    ResQpGetRaw,
    /// RDMA_NLDEV_CMD_RES_CQ_GET_RAW (20).
    ResCqGetRaw,
    /// RDMA_NLDEV_CMD_RES_MR_GET_RAW (21).
    ResMrGetRaw,
    /// RDMA_NLDEV_CMD_RES_CTX_GET (22).
    ResCtxGet,
    /// RDMA_NLDEV_CMD_RES_SRQ_GET (23).
    ResSrqGet,
    /// RDMA_NLDEV_CMD_STAT_GET_STATUS (24).
    StatGetStatus,
    /// RDMA_NLDEV_CMD_RES_SRQ_GET_RAW (25).
    ResSrqGetRaw,
    /// RDMA_NLDEV_CMD_NEWDEV (26).
    NewDev,
    /// RDMA_NLDEV_CMD_DELDEV (27).
    DelDev,
    /// RDMA_NLDEV_CMD_MONITOR (28): device events on group RDMA_NL_GROUP_NOTIFY.
    Monitor,
    /// Any other op (0 = UNSPEC, 8, or newer than this version). Must be < 1024 and not one
    /// of the ops above, or it will not survive an encode/decode round trip.
    Other(u16),
}

const COMMANDS: [(NldevCommand, u16, &str); 27] = [
    (NldevCommand::Get, RDMA_NLDEV_CMD_GET, "RDMA_NLDEV_CMD_GET"),
    (NldevCommand::Set, RDMA_NLDEV_CMD_SET, "RDMA_NLDEV_CMD_SET"),
    (
        NldevCommand::NewLink,
        RDMA_NLDEV_CMD_NEWLINK,
        "RDMA_NLDEV_CMD_NEWLINK",
    ),
    (
        NldevCommand::DelLink,
        RDMA_NLDEV_CMD_DELLINK,
        "RDMA_NLDEV_CMD_DELLINK",
    ),
    (
        NldevCommand::PortGet,
        RDMA_NLDEV_CMD_PORT_GET,
        "RDMA_NLDEV_CMD_PORT_GET",
    ),
    (
        NldevCommand::SysGet,
        RDMA_NLDEV_CMD_SYS_GET,
        "RDMA_NLDEV_CMD_SYS_GET",
    ),
    (
        NldevCommand::SysSet,
        RDMA_NLDEV_CMD_SYS_SET,
        "RDMA_NLDEV_CMD_SYS_SET",
    ),
    (
        NldevCommand::ResGet,
        RDMA_NLDEV_CMD_RES_GET,
        "RDMA_NLDEV_CMD_RES_GET",
    ),
    (
        NldevCommand::ResQpGet,
        RDMA_NLDEV_CMD_RES_QP_GET,
        "RDMA_NLDEV_CMD_RES_QP_GET",
    ),
    (
        NldevCommand::ResCmIdGet,
        RDMA_NLDEV_CMD_RES_CM_ID_GET,
        "RDMA_NLDEV_CMD_RES_CM_ID_GET",
    ),
    (
        NldevCommand::ResCqGet,
        RDMA_NLDEV_CMD_RES_CQ_GET,
        "RDMA_NLDEV_CMD_RES_CQ_GET",
    ),
    (
        NldevCommand::ResMrGet,
        RDMA_NLDEV_CMD_RES_MR_GET,
        "RDMA_NLDEV_CMD_RES_MR_GET",
    ),
    (
        NldevCommand::ResPdGet,
        RDMA_NLDEV_CMD_RES_PD_GET,
        "RDMA_NLDEV_CMD_RES_PD_GET",
    ),
    (
        NldevCommand::GetChardev,
        RDMA_NLDEV_CMD_GET_CHARDEV,
        "RDMA_NLDEV_CMD_GET_CHARDEV",
    ),
    (
        NldevCommand::StatSet,
        RDMA_NLDEV_CMD_STAT_SET,
        "RDMA_NLDEV_CMD_STAT_SET",
    ),
    (
        NldevCommand::StatGet,
        RDMA_NLDEV_CMD_STAT_GET,
        "RDMA_NLDEV_CMD_STAT_GET",
    ),
    (
        NldevCommand::StatDel,
        RDMA_NLDEV_CMD_STAT_DEL,
        "RDMA_NLDEV_CMD_STAT_DEL",
    ),
    (
        NldevCommand::ResQpGetRaw,
        RDMA_NLDEV_CMD_RES_QP_GET_RAW,
        "RDMA_NLDEV_CMD_RES_QP_GET_RAW",
    ),
    (
        NldevCommand::ResCqGetRaw,
        RDMA_NLDEV_CMD_RES_CQ_GET_RAW,
        "RDMA_NLDEV_CMD_RES_CQ_GET_RAW",
    ),
    (
        NldevCommand::ResMrGetRaw,
        RDMA_NLDEV_CMD_RES_MR_GET_RAW,
        "RDMA_NLDEV_CMD_RES_MR_GET_RAW",
    ),
    (
        NldevCommand::ResCtxGet,
        RDMA_NLDEV_CMD_RES_CTX_GET,
        "RDMA_NLDEV_CMD_RES_CTX_GET",
    ),
    (
        NldevCommand::ResSrqGet,
        RDMA_NLDEV_CMD_RES_SRQ_GET,
        "RDMA_NLDEV_CMD_RES_SRQ_GET",
    ),
    (
        NldevCommand::StatGetStatus,
        RDMA_NLDEV_CMD_STAT_GET_STATUS,
        "RDMA_NLDEV_CMD_STAT_GET_STATUS",
    ),
    (
        NldevCommand::ResSrqGetRaw,
        RDMA_NLDEV_CMD_RES_SRQ_GET_RAW,
        "RDMA_NLDEV_CMD_RES_SRQ_GET_RAW",
    ),
    (
        NldevCommand::NewDev,
        RDMA_NLDEV_CMD_NEWDEV,
        "RDMA_NLDEV_CMD_NEWDEV",
    ),
    (
        NldevCommand::DelDev,
        RDMA_NLDEV_CMD_DELDEV,
        "RDMA_NLDEV_CMD_DELDEV",
    ),
    (
        NldevCommand::Monitor,
        RDMA_NLDEV_CMD_MONITOR,
        "RDMA_NLDEV_CMD_MONITOR",
    ),
];

impl From<u16> for NldevCommand {
    fn from(op: u16) -> Self {
        COMMANDS
            .iter()
            .find(|(_, n, _)| *n == op)
            .map_or(NldevCommand::Other(op), |(c, _, _)| *c)
    }
}

impl From<NldevCommand> for u16 {
    fn from(c: NldevCommand) -> u16 {
        match c {
            NldevCommand::Other(op) => op,
            known => COMMANDS
                .iter()
                .find(|(k, _, _)| *k == known)
                .map_or(0, |(_, n, _)| *n),
        }
    }
}

impl NldevCommand {
    /// The kernel name (`RDMA_NLDEV_CMD_RES_QP_GET`), or `RDMA_NLDEV_CMD_<op>` when unknown.
    pub fn name(self) -> String {
        match self {
            NldevCommand::Other(op) => format!("RDMA_NLDEV_CMD_{op}"),
            known => COMMANDS
                .iter()
                .find(|(k, _, _)| *k == known)
                .map_or_else(String::new, |(_, _, name)| (*name).to_string()),
        }
    }

    /// The `nlmsg_type` of this command: `RDMA_NL_GET_TYPE(RDMA_NL_NLDEV, op)`. The op is
    /// masked to its 10 bits.
    pub fn message_type(self) -> u16 {
        rdma_nl_get_type(RDMA_NL_NLDEV, u16::from(self) & 0x3ff)
    }
}

impl fmt::Display for NldevCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.name())
    }
}

/// One RDMA_NLDEV message: the command and its top-level attributes, in wire order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NldevMessage {
    /// The command (`RDMA_NL_GET_OP(nlmsg_type)`).
    pub command: NldevCommand,
    /// The attributes following the netlink header.
    pub attributes: Vec<NldevAttribute>,
}

impl NldevMessage {
    /// A message of `command` with `attributes`.
    pub fn new(command: NldevCommand, attributes: Vec<NldevAttribute>) -> Self {
        NldevMessage {
            command,
            attributes,
        }
    }

    /// Decodes the attribute part of a message of `command` (canonical form only, see
    /// `attribute`).
    pub fn parse(command: NldevCommand, payload: &[u8]) -> Result<Self, NldevError> {
        let attributes = parse_attributes(payload, 0).map_err(|e| NldevError::Malformed {
            command,
            reason: e.to_string(),
        })?;
        Ok(NldevMessage {
            command,
            attributes,
        })
    }
}

impl NetlinkSerializable for NldevMessage {
    fn message_type(&self) -> u16 {
        self.command.message_type()
    }

    fn buffer_len(&self) -> usize {
        self.attributes.iter().map(Emitable::buffer_len).sum()
    }

    fn serialize(&self, buffer: &mut [u8]) {
        let mut offset = 0;
        for attr in &self.attributes {
            let len = attr.buffer_len();
            if let Some(slot) = buffer.get_mut(offset..offset + len) {
                attr.emit(slot);
            }
            offset += len;
        }
    }
}

impl NetlinkDeserializable for NldevMessage {
    type Error = NldevError;

    fn deserialize(header: &NetlinkHeader, payload: &[u8]) -> Result<Self, Self::Error> {
        let client = rdma_nl_get_client(header.message_type);
        if client != RDMA_NL_NLDEV {
            return Err(NldevError::NotNldev {
                message_type: header.message_type,
                client,
            });
        }
        let command = NldevCommand::from(rdma_nl_get_op(header.message_type));
        NldevMessage::parse(command, payload)
    }
}

fn framing(e: impl fmt::Display) -> NldevError {
    NldevError::Framing {
        reason: e.to_string(),
    }
}

/// Decodes exactly one netlink message (`bytes.len()` must equal `nlmsg_len`).
///
/// The decoder is canonical: it accepts what the kernel emits and rejects other encodings of
/// the same content (non-zero padding, a short final padding, a string without its NUL, a
/// NLMSG_DONE without its error code), so that [`encode`] of any decoded message gives back
/// `bytes` exactly.
pub fn decode(bytes: &[u8]) -> Result<NldevNetlinkMessage, NldevError> {
    let buffer = NetlinkBuffer::new_checked(bytes).map_err(framing)?;
    let header = NetlinkHeader::parse(&buffer).map_err(framing)?;
    let length = usize::try_from(header.length).map_err(framing)?;
    if length != bytes.len() {
        return Err(framing(format!(
            "nlmsg_len is {length} but the buffer holds {} bytes (one message expected)",
            bytes.len()
        )));
    }
    let body = buffer.payload();
    let payload = match header.message_type {
        NLMSG_NOOP if body.is_empty() => NetlinkPayload::Noop,
        NLMSG_NOOP => return Err(framing("NLMSG_NOOP with a body")),
        NLMSG_DONE if body.len() < 4 => {
            return Err(framing(format!(
                "NLMSG_DONE with a {}-byte body; the kernel always sends its 4-byte error code",
                body.len()
            )))
        }
        NLMSG_DONE | NLMSG_ERROR | NLMSG_OVERRUN => {
            let msg = NetlinkMessage::<NldevMessage>::deserialize(bytes).map_err(framing)?;
            msg.payload
        }
        _ => NetlinkPayload::InnerMessage(NldevMessage::deserialize(&header, body)?),
    };
    Ok(NetlinkMessage::new(header, payload))
}

/// Encodes `message`, computing `nlmsg_len` and, for RDMA_NLDEV messages, `nlmsg_type`
/// from the content; the other header fields are taken as they are.
pub fn encode(message: &NldevNetlinkMessage) -> Result<Vec<u8>, NldevError> {
    let too_large = |reason: String| NldevError::TooLarge { reason };
    let (payload_len, message_type) = match &message.payload {
        NetlinkPayload::InnerMessage(m) => (
            check_lengths(&m.attributes).map_err(too_large)?,
            m.message_type(),
        ),
        NetlinkPayload::Done(d) => (d.buffer_len(), NLMSG_DONE),
        NetlinkPayload::Error(e) => (e.buffer_len(), NLMSG_ERROR),
        NetlinkPayload::Noop => (0, NLMSG_NOOP),
        NetlinkPayload::Overrun(b) => (b.len(), NLMSG_OVERRUN),
        _ => {
            return Err(too_large(
                "a netlink payload kind this encoder does not know".into(),
            ))
        }
    };
    let total = NLMSG_HDRLEN + payload_len;
    let mut header = message.header;
    header.length =
        u32::try_from(total).map_err(|_| too_large(format!("{total} bytes exceed nlmsg_len")))?;
    header.message_type = message_type;
    let mut buf = vec![0u8; total];
    let (head, body) = buf.split_at_mut(NLMSG_HDRLEN);
    header.emit(head);
    match &message.payload {
        NetlinkPayload::InnerMessage(m) => m.serialize(body),
        NetlinkPayload::Done(d) => d.emit(body),
        NetlinkPayload::Error(e) => e.emit(body),
        NetlinkPayload::Overrun(b) => body.copy_from_slice(b),
        _ => {}
    }
    Ok(buf)
}

/// Iterator over the messages of one received datagram (several messages may share a
/// datagram, each starting at an `NLMSG_ALIGN`ed offset). A framing error ends the iteration
/// after being yielded once, since the next message's start is then unknown.
#[derive(Debug, Clone)]
pub struct DatagramMessages<'a> {
    bytes: &'a [u8],
    offset: usize,
    failed: bool,
}

impl<'a> DatagramMessages<'a> {
    /// Messages of the datagram `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        DatagramMessages {
            bytes,
            offset: 0,
            failed: false,
        }
    }
}

impl Iterator for DatagramMessages<'_> {
    type Item = Result<NldevNetlinkMessage, NldevError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.offset >= self.bytes.len() {
            return None;
        }
        let rest = self.bytes.get(self.offset..).unwrap_or_default();
        let frame = match NetlinkBuffer::new_checked(rest) {
            Ok(b) => usize::try_from(b.length()).unwrap_or(usize::MAX),
            Err(e) => {
                self.failed = true;
                return Some(Err(framing(e)));
            }
        };
        let Some(one) = rest.get(..frame) else {
            self.failed = true;
            return Some(Err(framing("nlmsg_len beyond the datagram")));
        };
        let align = usize::from(NLMSG_ALIGNTO);
        self.offset += frame.div_ceil(align) * align;
        Some(decode(one))
    }
}

/// Convenience: the RDMA_NLDEV message inside `message`, if it carries one.
pub fn inner(message: &NldevNetlinkMessage) -> Option<&NldevMessage> {
    match &message.payload {
        NetlinkPayload::InnerMessage(m) => Some(m),
        _ => None,
    }
}

/// Whether the kernel flagged this dump message `NLM_F_DUMP_INTR`: the object list changed
/// while the dump ran, so the dump is inconsistent and should be repeated.
pub fn dump_interrupted(message: &NldevNetlinkMessage) -> bool {
    message.header.flags & netlink_packet_core::NLM_F_DUMP_INTR != 0
}
