//! `QpDump::decode` (streaming) against `decode` + `QpEntries` (tree): same acceptance, same
//! entries, same malformed-message errors.

use netlink_packet_core::NetlinkHeader;

use crate::nldev::*;

type Slow = (NetlinkHeader, u32, String, Vec<Result<QpEntry, NldevError>>);

fn slow(bytes: &[u8]) -> Result<Slow, NldevError> {
    let m = decode(bytes)?;
    let msg = inner(&m).ok_or(NldevError::UnexpectedMessage {
        expected: "an RDMA_NLDEV_CMD_RES_QP_GET reply",
        got: "a control message".into(),
    })?;
    let entries = QpEntries::new(msg)?;
    let (i, n) = (entries.dev_index(), entries.dev_name().to_string());
    Ok((m.header, i, n, entries.collect()))
}

/// Panics unless both readers agree on `bytes`.
pub fn assert_equivalent(bytes: &[u8]) {
    match (QpDump::decode(bytes), slow(bytes)) {
        (Ok(f), Ok(s)) => assert_eq!((f.header, f.dev_index, f.dev_name, f.entries), s),
        (Err(f), Err(s)) => match s {
            NldevError::Malformed { .. } | NldevError::MissingAttribute { .. } => assert_eq!(f, s),
            _ => {}
        },
        (f, s) => panic!("readers disagree: streaming {f:?}, tree {s:?}"),
    }
}

#[test]
fn captured_messages() {
    for kernel in ["k61", "k612"] {
        for c in super::fixture::all_captures(kernel) {
            assert_equivalent(&c.request);
            for r in &c.replies {
                assert_equivalent(r);
            }
        }
    }
    for e in super::fixture::monitor_events() {
        assert_equivalent(&e);
    }
}

#[test]
fn malformed_tables() {
    let head = "08000100 00000000 0c000200 7278655f696e6900";
    let mut outcomes = Vec::new();
    for table in [
        "10001300 0c001400 06001500 0100 0000", // LQPN of 2 bytes in an entry
        "0c001300 08001500 0100 0000",          // a bad u32 directly in RES_QP
        "10001300 0c001400 08001500 01000000",  // entry without TYPE/STATE
        "0c001380 08001480 05001b00 06000000",  // flagged nests, STATE only
        "0c001340 08001400 05001b00 06000000",  // NET_BYTEORDER RES_QP: raw
        "08001300 04001400 08001300 04001400",  // two tables: the first counts
        "08001300 05001400",                    // entry cut short
        "0c001300 08001400 05001b00 06010000",  // non-zero padding in an entry
        "14001300 10001400 0a001600 010000000000 0000", // RQPN of 6 bytes
        "14001300 10001400 0b001d00 69625f636f726500", // KERN_NAME without its NUL
        "20001300 1c001400 08001580 01000000 05001a00 01000000 05001b00 06000000", // flagged LQPN
        "20001300 1c001400 08001500 01000000 06001500 0100 0000 05001a00 01000000", // bad 2nd LQPN
        "28001300 24001400 08001500 01000000 08001500 02000000 05001a00 01000000 05001b00 05000000",
    ] {
        let body = super::fixture::unhex(&format!("{head} {table}"));
        let len = u32::try_from(16 + body.len()).unwrap();
        let mut m = len.to_le_bytes().to_vec();
        m.extend_from_slice(&[0x0a, 0x14, 0x02, 0x00, 1, 0, 0, 0, 2, 0, 0, 0]);
        m.extend_from_slice(&body);
        assert_equivalent(&m);
        outcomes.push(QpDump::decode(&m).map(|d| d.entries));
    }
    // The cases reach the decoders they are meant for, not just the framing checks.
    let reason = |i: usize| match &outcomes[i] {
        Err(NldevError::Malformed { reason, .. }) => reason.clone(),
        other => panic!("case {i}: {other:?}"),
    };
    assert!(reason(0).contains("invalid RDMA_NLDEV_ATTR_RES_LQPN value"));
    assert!(reason(8).contains("invalid RDMA_NLDEV_ATTR_RES_RQPN value"));
    assert!(reason(9).contains("not NUL-terminated"));
    assert!(reason(11).contains("invalid RDMA_NLDEV_ATTR_RES_LQPN value"));
    let entries = outcomes[12].as_ref().unwrap();
    assert_eq!(entries[0].as_ref().unwrap().lqpn, 1, "first LQPN wins");
    assert_eq!(entries[0].as_ref().unwrap().state, crate::qp::QpState::Sqe);
    // A flagged LQPN is not an LQPN: the entry lacks one.
    assert!(matches!(
        &outcomes[10].as_ref().unwrap()[0],
        Err(NldevError::MissingAttribute {
            attribute: "RDMA_NLDEV_ATTR_RES_LQPN",
            ..
        })
    ));
}
