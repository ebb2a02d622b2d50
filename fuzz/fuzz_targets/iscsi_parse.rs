//! Fuzzes every iscsiadm output parser: none may panic, and their results must be
//! self-consistent (skipped line numbers inside the input, every tree session has a target).
#![no_main]

use iser_guard::core::iscsi::{
    parse_discovery, parse_login_output, parse_records, parse_session_list, parse_session_tree,
    IscsiadmStatus, ListedPortal,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let lines = text.lines().count();

    let flat = parse_session_list(&text);
    assert!(flat.items.len() + flat.skipped.len() <= lines);
    for s in &flat.items {
        // what was parsed prints back to something that parses to the same portal
        assert_eq!(ListedPortal::parse(&s.portal.to_string()).as_ref(), Ok(&s.portal));
    }

    let tree = parse_session_tree(&text);
    for s in &tree.items {
        assert!(!s.target.is_empty());
    }
    for k in tree.skipped.iter().chain(flat.skipped.iter()) {
        assert!(k.line_no >= 1 && k.line_no <= lines);
        assert!(k.line.len() <= 200);
    }

    let _ = parse_discovery(&text);
    let _ = parse_login_output(&text);
    let _ = parse_records(&text);

    if let Some(&b) = data.first() {
        let code = i32::from(b) - 64;
        assert_eq!(IscsiadmStatus::from_code(code).code(), code);
    }
});
