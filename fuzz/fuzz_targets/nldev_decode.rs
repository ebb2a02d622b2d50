//! Fuzz the RDMA netlink decoder: it never panics, and whatever it decodes re-encodes to the
//! very same bytes (the codec is canonical). The input is also read as a datagram of several
//! messages, every decoded message is run through the typed views, and the streaming QP
//! reader (`QpDump::decode`) must agree with `decode` + `QpEntries`.
#![no_main]

use iser_guard::core::nldev::{
    decode, encode, inner, CmIdEntry, DatagramMessages, DeviceInfo, MonitorEvent, NldevError,
    PortInfo, QpDump, QpEntries, SysInfo,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let tree = decode(data);
    if let Ok(m) = &tree {
        let again = encode(m).expect("a decoded message encodes");
        assert_eq!(again, data, "decode → encode changed the bytes");
        views(m);
    }
    streaming_agrees(data, tree);
    for m in DatagramMessages::new(data).flatten() {
        let bytes = encode(&m).expect("a decoded message encodes");
        assert_eq!(decode(&bytes).as_ref(), Ok(&m));
    }
});

/// The views may fail, never panic.
fn views(m: &iser_guard::core::nldev::NldevNetlinkMessage) {
    let Some(msg) = inner(m) else { return };
    let _ = DeviceInfo::try_from(msg);
    let _ = PortInfo::try_from(msg);
    let _ = SysInfo::try_from(msg);
    let _ = MonitorEvent::try_from(msg);
    let _ = CmIdEntry::all(msg);
    if let Ok(entries) = QpEntries::new(msg) {
        for e in entries {
            let _ = e;
        }
    }
}

/// `QpDump::decode` accepts what `decode` + `QpEntries::new` accept, with the same entries;
/// for malformed nldev messages it fails with the same error.
fn streaming_agrees(
    data: &[u8],
    tree: Result<iser_guard::core::nldev::NldevNetlinkMessage, NldevError>,
) {
    let fast = QpDump::decode(data);
    let slow = tree.and_then(|m| {
        let msg = inner(&m).cloned().ok_or(NldevError::UnexpectedMessage {
            expected: "an RDMA_NLDEV_CMD_RES_QP_GET reply",
            got: "a control message".into(),
        })?;
        let entries = QpEntries::new(&msg)?;
        let (i, n) = (entries.dev_index(), entries.dev_name().to_string());
        Ok((m.header, i, n, entries.collect::<Vec<_>>()))
    });
    match (fast, slow) {
        (Ok(f), Ok(s)) => assert_eq!((f.header, f.dev_index, f.dev_name, f.entries), s),
        (Err(f), Err(s @ (NldevError::Malformed { .. } | NldevError::MissingAttribute { .. }))) => {
            assert_eq!(f, s)
        }
        (Err(_), Err(_)) => {}
        (f, s) => panic!("readers disagree: streaming {f:?}, tree {s:?}"),
    }
}
