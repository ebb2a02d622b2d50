//! Fuzzes the subsystem layer's line recognition (crates/iser-guard-core/src/signatures/
//! subsystem/) and the saved-log wrappers before it (`dmesg -x`, talosctl, syslog, dmesg
//! -T/-H): any bytes as a record's text, level and `DEVICE=` value. It must never panic;
//! the cheap pretest must never reject a line `recognise` takes (explain skips the lines it
//! rejects); every event must explain and survive a JSON round trip unchanged.
#![no_main]

use iser_guard::cli::explain::recognise_saved_line;
use iser_guard::core::signatures::subsystem::{
    could_recognise, explain_event, recognise, SubsystemEvent,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte: the record's level (8 and above: none) and whether a dictionary follows.
    let Some((&head, rest)) = data.split_first() else {
        return;
    };
    let level = (head & 0x0f < 8).then_some(head & 0x07);
    let text = String::from_utf8_lossy(rest);
    let (text, dict) = match (head & 0x10 != 0, text.split_once('\u{0}')) {
        (true, Some((t, d))) => (t, Some(d)),
        _ => (text.as_ref(), None),
    };
    if let Some(ev) = recognise(text, level, dict) {
        assert!(could_recognise(text), "pretest rejected a recognised line: {text:?}");
        let x = explain_event(&ev);
        assert!(!x.title.is_empty());
        let json = serde_json::to_string(&ev).expect("serialises");
        let back: SubsystemEvent = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(back, ev);
    }
    let _ = recognise_saved_line(text);
});
