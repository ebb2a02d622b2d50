//! Any text as `/proc/self/mountinfo` must never panic the NFS over RDMA mount parser (a
//! bad line is a counted skip), its unescaping, or the placement of what it read.
#![no_main]

use iser_guard::core::nfs_rdma::{list_mounts, parse_mountinfo, place_mounts, unescape};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = unescape(&text);
    let mut parsed = parse_mountinfo(&text);
    for s in &parsed.skipped {
        let _ = s.to_string();
    }
    let before = parsed.mounts.clone();
    place_mounts(&mut parsed.mounts, &[], &before);
    let _ = list_mounts(&parsed.mounts);
});
