//! The typed error of the RDMA netlink codec.
//!
//! Byte-level problems are described by netlink-packet-core's [`DecodeError`] chain ("invalid
//! RDMA_NLDEV_ATTR_RES_LQPN value … caused by …"); this enum wraps that text in a kind the
//! caller can `match` on: skip a malformed message, ignore another client's message, report a
//! reply that lacks what the kernel always sends.
//!
//! [`DecodeError`]: netlink_packet_core::DecodeError

use super::message::NldevCommand;

/// What went wrong while decoding, encoding or interpreting an RDMA netlink message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NldevError {
    /// The bytes are not one well-formed netlink message (too short, a length field that
    /// disagrees with the buffer, a control message with a broken body).
    #[error("malformed netlink message: {reason}; the message was not used")]
    Framing {
        /// Why, with the decoder's context chain.
        reason: String,
    },
    /// The netlink header is fine but the message belongs to another RDMA netlink client
    /// (iWARP port mapper, local services), not to RDMA_NL_NLDEV.
    #[error(
        "netlink message type {message_type:#06x} belongs to RDMA netlink client {client}, \
         not RDMA_NL_NLDEV (5); it is not for this decoder"
    )]
    NotNldev {
        /// The `nlmsg_type` received.
        message_type: u16,
        /// `RDMA_NL_GET_CLIENT(message_type)`.
        client: u16,
    },
    /// An RDMA_NL_NLDEV message whose attributes cannot be decoded, or are not in the form the
    /// kernel emits (so they could not be re-encoded to the same bytes).
    #[error("malformed {command} message: {reason}; the message was not used")]
    Malformed {
        /// The command of the message.
        command: NldevCommand,
        /// Why, with the decoder's context chain naming the attribute.
        reason: String,
    },
    /// A typed view was asked of a message of another command or kind.
    #[error("expected {expected}, got {got}")]
    UnexpectedMessage {
        /// What the view needs, e.g. "an RDMA_NLDEV_CMD_RES_QP_GET reply".
        expected: &'static str,
        /// What it was given.
        got: String,
    },
    /// A message lacks an attribute the kernel always sends for it.
    #[error("{what} lacks {attribute}, which the kernel always sends; the entry was not used")]
    MissingAttribute {
        /// The message or entry, e.g. "RDMA_NLDEV_ATTR_RES_QP_ENTRY".
        what: &'static str,
        /// The kernel name of the missing attribute.
        attribute: &'static str,
    },
    /// A message too large for netlink's 16-bit attribute or 32-bit message length fields.
    #[error("cannot encode: {reason}")]
    TooLarge {
        /// Which length overflowed.
        reason: String,
    },
}
