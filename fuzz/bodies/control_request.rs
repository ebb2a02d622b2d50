//! Body of the `control_request` fuzz target, shared with `tests/fuzz_bodies.rs`: the control
//! protocol's request parser never panics, refuses oversized lines, and whatever it accepts
//! encodes back to a line that parses to the same request.

use iser_guard::io::control::{parse_request, Request, MAX_REQUEST_BYTES};

/// Checks one input.
pub fn body(data: &[u8]) {
    match parse_request(data) {
        Ok(req) => {
            assert!(data.len() <= MAX_REQUEST_BYTES);
            let mut line = serde_json::to_vec(&req).expect("a request encodes");
            line.push(b'\n');
            let again: Request = parse_request(&line).expect("an encoded request parses");
            assert_eq!(again, req);
        }
        Err(e) => {
            // Every refusal is a message for the client, never empty.
            assert!(!e.to_string().is_empty());
        }
    }
}
