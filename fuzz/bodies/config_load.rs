//! Body of the `config_load` fuzz target, shared with `tests/fuzz_bodies.rs`: the
//! configuration loader's text stage (syntax, schema, semantics) never panics on any input,
//! every problem says where or which key, and an accepted configuration written back out
//! loads to the same value.

use iser_guard::config::{parse_str, Config};

/// Checks one input.
pub fn body(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse_str(text) {
        Ok(config) => {
            assert!(config.validate().is_empty());
            let out = toml::to_string(&config).expect("a configuration serializes");
            let again: Config = parse_str(&out).expect("a written configuration loads");
            assert_eq!(again, config);
        }
        Err(problems) => {
            assert!(!problems.is_empty());
            for p in problems {
                assert!(p.line.is_some() || !p.key.is_empty(), "{p:?}");
            }
        }
    }
}
