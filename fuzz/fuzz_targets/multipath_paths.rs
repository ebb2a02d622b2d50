//! multipathd's answer to `show paths raw format` must never panic the parser, whatever it
//! holds; a parsed answer must never panic placement, the last-path policy or the matching
//! after a re-creation. The input is split on NUL into the answer before and after.
#![no_main]

use iser_guard::core::multipath::{judge, last_paths_on, on_device, parse_paths, place, BlockCarrier};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let mut parts = s.split('\0');
    let before = parse_paths(parts.next().unwrap_or_default()).paths;
    let after = parse_paths(parts.next().unwrap_or_default()).paths;
    // Every block device on one device, so the policy and matching see every path.
    let carriers: Vec<BlockCarrier> = before
        .iter()
        .chain(&after)
        .map(|p| BlockCarrier {
            block: p.dev.clone(),
            device: "mlx5_0".into(),
            port: 1,
            link: p.map.clone(),
        })
        .collect();
    let placed = place(&before, &carriers);
    let _ = last_paths_on("mlx5_0", &placed);
    let remembered = on_device("mlx5_0", &placed);
    let _ = judge(&remembered, &after, &carriers);
});
