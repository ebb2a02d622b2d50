//! Fuzzes the kernel-log parsers: a /dev/kmsg record as one read() returns it, and a whole
//! saved log. Neither may panic; a record that parses must survive an owned round trip
//! through the /dev/kmsg syntax unchanged.
#![no_main]

use iser_guard::core::kmsg::{parse_record, Record, SavedLog};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = parse_record(data) {
        let _ = r.unescaped_text();
        let owned = r.to_record().expect("a parsed /dev/kmsg record is complete");
        let again = Record::parse(owned.to_kmsg().as_bytes()).expect("own output parses");
        assert_eq!(again, owned);
    }
    for e in SavedLog::from_bytes(data).flatten() {
        let _ = e.record.unescaped_text();
        for (k, v) in e.record.dict {
            let _ = (k, iser_guard::core::kmsg::unescape(v));
        }
        if let Some(owned) = e.record.to_record() {
            let again = Record::parse(owned.to_kmsg().as_bytes()).expect("own output parses");
            assert_eq!(again, owned);
        }
    }
});
