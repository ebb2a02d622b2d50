//! `devlink dev param show -j` output parsing must never panic, whatever devlink prints.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        let _ = iser_guard::core::reset_plan::parse_devlink_param(s, "enable_roce");
    }
});
