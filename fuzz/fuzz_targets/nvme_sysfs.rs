//! The text of an NVMe controller's sysfs files (`address`, the numbers, `ctrl_loss_tmo`'s
//! `off`, namespace entries) must never panic the parser, whatever the files hold: the
//! input is split on NUL into an `address`, a `queue_count`, a `ctrl_loss_tmo` and a
//! namespace entry name.
#![no_main]

use iser_guard::core::nvme_fabrics::{
    connect_args, namespace_block, parse_fabrics_address, read_ctrl_files, NvmeCtrlFiles,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_fabrics_address(s);
    let mut parts = s.split('\0');
    let mut files = NvmeCtrlFiles {
        name: "nvme0".into(),
        ..Default::default()
    };
    for (k, v) in [
        ("transport", Some("rdma")),
        ("subsysnqn", Some("nqn.fuzz")),
        ("state", Some("live")),
        ("address", parts.next()),
        ("queue_count", parts.next()),
        ("ctrl_loss_tmo", parts.next()),
    ] {
        if let Some(v) = v {
            files.attrs.insert(k.into(), v.into());
        }
    }
    if let Some(ns) = parts.next() {
        let _ = namespace_block(ns);
        files.namespaces.push((ns.into(), parts.next().map(str::to_string)));
    }
    if let Ok(Some(c)) = read_ctrl_files(&files) {
        let _ = connect_args(&c);
    }
});
