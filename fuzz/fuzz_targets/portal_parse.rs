//! Portal parsing (iscsiadm's `ip:port,tpgt`, `[v6]:port`, `ip,port` forms) must never panic,
//! and whatever parses must print back to something that parses to the same address.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(addr) = iser_guard::io::probe::parse_portal(s, 3260) {
            let again = iser_guard::io::probe::parse_portal(&addr.to_string(), 3260)
                .expect("a parsed portal must re-parse");
            assert_eq!(addr, again);
        }
    }
});
