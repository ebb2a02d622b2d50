//! The streaming reader for the one big reply: a RES_QP_GET dump message read straight into
//! [`QpEntry`] views, without building the attribute tree first.
//!
//! A host with many connections has tens of thousands of QPs, and the poller reads the whole
//! table every few seconds. [`QpDump::decode`] walks the message once, with the same framing
//! walker and the same per-attribute decoder as [`decode`](super::decode): it accepts exactly
//! the messages `decode` accepts (and fails with the same error kinds), and yields the entries
//! [`QpEntries`](super::QpEntries) would yield from the decoded message. Tests and the fuzz
//! target check that equivalence.

use netlink_packet_core::{ErrorContext, NetlinkBuffer, NetlinkHeader, Parseable};

use super::attribute::{parse_attribute, split_attribute, walk_attributes, NldevAttribute};
use super::constants::*;
use super::entries::{QpEntry, QpEntryBuilder};
use super::error::NldevError;
use super::message::{NldevCommand, NldevMessage};

/// The QPs of one RES_QP_GET reply message (one device; a big dump spans many messages).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QpDump {
    /// The netlink header (flags: `NLM_F_MULTI`, maybe `NLM_F_DUMP_INTR`; sequence number).
    pub header: NetlinkHeader,
    /// RDMA_NLDEV_ATTR_DEV_INDEX.
    pub dev_index: u32,
    /// RDMA_NLDEV_ATTR_DEV_NAME.
    pub dev_name: String,
    /// One result per RES_QP_ENTRY of the first RES_QP table, in wire order; an entry that
    /// lacks a required attribute is an `Err` the caller can skip and count.
    pub entries: Vec<Result<QpEntry, NldevError>>,
}

fn framing(e: impl std::fmt::Display) -> NldevError {
    NldevError::Framing {
        reason: e.to_string(),
    }
}

impl QpDump {
    /// Reads one netlink message that must be an RDMA_NLDEV_CMD_RES_QP_GET message (check
    /// the type first, or fall back to [`decode`](super::decode) for NLMSG_DONE/ERROR: those
    /// give [`NldevError::UnexpectedMessage`] here).
    pub fn decode(bytes: &[u8]) -> Result<QpDump, NldevError> {
        const WHAT: &str = "RDMA_NLDEV_CMD_RES_QP_GET reply";
        let buffer = NetlinkBuffer::new_checked(bytes).map_err(framing)?;
        let header = NetlinkHeader::parse(&buffer).map_err(framing)?;
        let length = usize::try_from(header.length).map_err(framing)?;
        if length != bytes.len() {
            return Err(framing(format!(
                "nlmsg_len is {length} but the buffer holds {} bytes (one message expected)",
                bytes.len()
            )));
        }
        let unexpected = |got: String| NldevError::UnexpectedMessage {
            expected: "an RDMA_NLDEV_CMD_RES_QP_GET reply",
            got,
        };
        if header.message_type < 0x10 {
            return Err(unexpected(format!(
                "netlink control message {}",
                header.message_type
            )));
        }
        let client = rdma_nl_get_client(header.message_type);
        if client != RDMA_NL_NLDEV {
            return Err(NldevError::NotNldev {
                message_type: header.message_type,
                client,
            });
        }
        let command = NldevCommand::from(rdma_nl_get_op(header.message_type));
        let malformed = |e: netlink_packet_core::DecodeError| NldevError::Malformed {
            command,
            reason: e.to_string(),
        };
        let body = buffer.payload();
        if command != NldevCommand::ResQpGet {
            // Same acceptance as `decode`, then the same view error as `QpEntries::new`.
            NldevMessage::parse(command, body)?;
            return Err(unexpected(format!("a {command} message")));
        }

        let mut dev_index = None;
        let mut dev_name = None;
        let mut table_seen = false;
        let mut entries: Vec<Result<QpEntry, NldevError>> = Vec::new();
        walk_attributes(body, |whole| {
            let (kind, payload, typed_nest) = split_attribute(whole);
            if kind == RDMA_NLDEV_ATTR_RES_QP && typed_nest && !table_seen {
                table_seen = true;
                return read_table(payload, &mut entries)
                    .context("invalid RDMA_NLDEV_ATTR_RES_QP value");
            }
            match parse_attribute(whole, 0)? {
                NldevAttribute::DevIndex(i) => {
                    dev_index.get_or_insert(i);
                }
                NldevAttribute::DevName(n) if dev_name.is_none() => dev_name = Some(n),
                _ => {}
            }
            Ok(())
        })
        .map_err(malformed)?;

        let dev_index = dev_index.ok_or(NldevError::MissingAttribute {
            what: WHAT,
            attribute: "RDMA_NLDEV_ATTR_DEV_INDEX",
        })?;
        let dev_name = dev_name.ok_or(NldevError::MissingAttribute {
            what: WHAT,
            attribute: "RDMA_NLDEV_ATTR_DEV_NAME",
        })?;
        for qp in entries.iter_mut().flatten() {
            qp.dev_index = dev_index;
            qp.dev_name.clone_from(&dev_name);
        }
        Ok(QpDump {
            header,
            dev_index,
            dev_name,
            entries,
        })
    }
}

/// The payload of the RES_QP table (nesting level 1); entries' attributes are level 2, as in
/// `parse_attributes`.
fn read_table(
    table: &[u8],
    entries: &mut Vec<Result<QpEntry, NldevError>>,
) -> Result<(), netlink_packet_core::DecodeError> {
    walk_attributes(table, |child| {
        let (kind, payload, typed_nest) = split_attribute(child);
        if kind == RDMA_NLDEV_ATTR_RES_QP_ENTRY && typed_nest {
            let mut builder = QpEntryBuilder::default();
            walk_attributes(payload, |attr| builder.add_wire(attr, 2))
                .context("invalid RDMA_NLDEV_ATTR_RES_QP_ENTRY value")?;
            entries.push(builder.finish(0, ""));
        } else {
            // Not a QP: decoded only to accept exactly what `decode` accepts.
            parse_attribute(child, 1)?;
        }
        Ok(())
    })
}
