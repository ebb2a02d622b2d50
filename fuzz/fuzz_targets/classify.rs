//! Fuzzes the kernel-message classifier: any bytes as the record text and `DEVICE=` value.
//! It must never panic; a record the prefilter rejects must not classify; every signature
//! must explain without panicking and survive a JSON round trip unchanged.
#![no_main]

use iser_guard::core::signatures::{classify_bytes, explain, prefilter, Signature};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte splits the input into text and dictionary value (0 = no dictionary).
    let (split, rest) = match data.split_first() {
        Some((s, r)) => (usize::from(*s), r),
        None => return,
    };
    let (text, dict) = if split == 0 || split > rest.len() {
        (rest, None)
    } else {
        let (t, d) = rest.split_at(split);
        (t, Some(d))
    };
    let sig = classify_bytes(text, dict);
    if !prefilter(text) {
        assert!(sig.is_none(), "prefilter rejected a classified record");
    }
    if let Some(sig) = sig {
        let e = explain(&sig);
        assert!(!e.title.is_empty());
        let json = serde_json::to_string(&sig).expect("serialises");
        let back: Signature = serde_json::from_str(&json).expect("deserialises");
        assert_eq!(back, sig);
    }
});
