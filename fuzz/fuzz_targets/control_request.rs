//! See fuzz/bodies/control_request.rs (shared with tests/fuzz_bodies.rs, which runs it over a few
//! thousand pseudo-random inputs as a plain test).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../bodies/control_request.rs"]
mod body;

fuzz_target!(|data: &[u8]| body::body(data));
