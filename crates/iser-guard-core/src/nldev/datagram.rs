//! Netlink datagram framing: a datagram cut into its messages (as `NLMSG_NEXT` walks them),
//! the errno of an NLMSG_ERROR or NLMSG_DONE, the kernel's extended-ack text, and a request's
//! name for messages. Pure: the sockets that carry the datagrams are the shell's.

use netlink_packet_core::{NetlinkBuffer, NetlinkHeader, NLM_F_ACK_TLVS, NLM_F_CAPPED};

use super::NLMSG_HDRLEN;

/// Extended-ack TLV carrying the kernel's message text (`NLMSGERR_ATTR_MSG`).
const NLMSGERR_ATTR_MSG: u16 = 1;

/// One netlink message cut out of a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The header.
    pub header: NetlinkHeader,
    /// The payload (after the 16-byte header, up to `nlmsg_len`).
    pub payload: &'a [u8],
    /// The whole message, header included (`nlmsg_len` bytes).
    pub message: &'a [u8],
}

/// Splits a datagram into netlink messages (aligned to 4 bytes, as `NLMSG_NEXT` does).
///
/// Fails on a header that does not fit or a length that runs past the datagram.
pub fn split_datagram(datagram: &[u8]) -> Result<Vec<Frame<'_>>, String> {
    let mut frames = Vec::new();
    let mut rest = datagram;
    while !rest.is_empty() {
        let buf = NetlinkBuffer::new_checked(rest).map_err(|e| e.to_string())?;
        let len = usize::try_from(buf.length()).map_err(|e| e.to_string())?;
        // The header struct is non_exhaustive: start from Default.
        let mut header = NetlinkHeader::default();
        header.length = buf.length();
        header.message_type = buf.message_type();
        header.flags = buf.flags();
        header.sequence_number = buf.sequence_number();
        header.port_number = buf.port_number();
        let payload = rest.get(NLMSG_HDRLEN..len).ok_or("length out of range")?;
        let message = rest.get(..len).ok_or("length out of range")?;
        frames.push(Frame {
            header,
            payload,
            message,
        });
        let next = len.div_ceil(4) * 4;
        rest = rest.get(next..).unwrap_or_default();
    }
    Ok(frames)
}

/// The negative errno in an NLMSG_ERROR or NLMSG_DONE payload.
pub fn leading_i32(payload: &[u8]) -> Option<i32> {
    let b: [u8; 4] = payload.get(..4)?.try_into().ok()?;
    Some(i32::from_ne_bytes(b))
}

/// The text of the NLMSGERR_ATTR_MSG TLV of an extended ack, if any.
pub fn ext_ack_message(header: &NetlinkHeader, payload: &[u8]) -> Option<String> {
    if header.flags & NLM_F_ACK_TLVS == 0 {
        return None;
    }
    // error (4) + the echoed request: only its header when CAPPED, else all of it.
    let echoed = payload.get(4..)?;
    let echo_len = if header.flags & NLM_F_CAPPED != 0 {
        NLMSG_HDRLEN
    } else {
        let l: [u8; 4] = echoed.get(..4)?.try_into().ok()?;
        usize::try_from(u32::from_ne_bytes(l)).ok()?
    };
    let mut tlvs = echoed.get(echo_len.div_ceil(4) * 4..)?;
    while tlvs.len() >= 4 {
        let len = usize::from(u16::from_ne_bytes(tlvs.get(..2)?.try_into().ok()?));
        let kind = u16::from_ne_bytes(tlvs.get(2..4)?.try_into().ok()?) & 0x3fff;
        if len < 4 {
            return None;
        }
        let value = tlvs.get(4..len)?;
        if kind == NLMSGERR_ATTR_MSG {
            let text = value.split(|b| *b == 0).next().unwrap_or_default();
            return Some(String::from_utf8_lossy(text).into_owned());
        }
        tlvs = tlvs.get(len.div_ceil(4) * 4..).unwrap_or_default();
    }
    None
}

/// Names a request by its message type (`nldev op 10 (0x140a)`).
pub fn describe_type(message_type: u16) -> String {
    let client = (message_type >> 10) & 0x3f;
    let op = message_type & 0x3ff;
    if client == 5 {
        format!("nldev op {op} (0x{message_type:04x})")
    } else {
        format!("message type 0x{message_type:04x}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use netlink_packet_core::NLMSG_DONE;

    #[test]
    fn several_messages_per_datagram_are_split_on_4_byte_boundaries() {
        // A 20-byte DONE and a 17-byte message padded to 20, as NLMSG_NEXT aligns them.
        let mut d = Vec::new();
        d.extend_from_slice(&[
            17, 0, 0, 0, 1, 0x14, 2, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0xaa, 0, 0, 0,
        ]);
        d.extend_from_slice(&[20, 0, 0, 0, 3, 0, 2, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
        let frames = split_datagram(&d).unwrap();
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].header.message_type, 0x1401);
        assert_eq!(frames[0].payload, &[0xaa]);
        assert_eq!(frames[1].header.message_type, NLMSG_DONE);
        assert_eq!(frames[1].payload, &[0, 0, 0, 0]);
    }

    #[test]
    fn truncated_and_short_frames_are_errors_not_panics() {
        assert!(split_datagram(&[1, 2, 3]).is_err());
        // Length field says 40, only 20 bytes present.
        let d = [40, 0, 0, 0, 3, 0, 2, 0, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
        assert!(split_datagram(&d).is_err());
        // Length field below the header size.
        let d = [8, 0, 0, 0, 3, 0, 2, 0, 9, 0, 0, 0, 0, 0, 0, 0];
        assert!(split_datagram(&d).is_err());
    }

    #[test]
    fn extended_ack_text_is_extracted() {
        // captures/nldevcap-k612/nldev-1-loggedin/18-err-get-doit-devindex-2byte-extack.hex:
        // the reply to a GET with a 2-byte DEV_INDEX on an ext-ack socket (error -22,
        // ACK_TLVS, the whole request echoed, then MSG, OFFS and POLICY TLVs).
        let whole = hex(concat!(
            "8000000002000002fa0300008f010000eaffffff1800000001140500fa0300000000000006000100",
            "0100000027000100417474726962757465206661696c656420706f6c6963792076616c6964617469",
            "6f6e00000800020010000000240004800c00040000000000000000000c000500ffffffff00000000",
            "0800010004000000"
        ));
        let frames = split_datagram(&whole).unwrap();
        let (h, msg) = (&frames[0].header, frames[0].payload);
        assert_eq!(h.flags, NLM_F_ACK_TLVS);
        assert_eq!(leading_i32(msg), Some(-22));
        assert_eq!(
            ext_ack_message(h, msg).as_deref(),
            Some("Attribute failed policy validation")
        );
        // Garbage after the echo never panics.
        for cut in 0..msg.len() {
            let _ = ext_ack_message(h, msg.get(..cut).unwrap());
        }
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
