//! The bodies of the `control_request` and `config_load` fuzz targets, run over a few
//! thousand pseudo-random inputs each as a plain test: mutations (byte flips, inserts,
//! deletions, splices) of valid seeds, from a fixed-seed generator so a failure repeats.

#[path = "../fuzz/bodies/control_request.rs"]
mod control_request;

#[path = "../fuzz/bodies/config_load.rs"]
mod config_load;

/// xorshift64*: deterministic and good enough to spread mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        usize::try_from(self.next() % n.max(1) as u64).unwrap_or(0)
    }
}

/// Bytes that matter to JSON and TOML, to make mutations reach the parsers' corners.
const INTERESTING: &[u8] = b"{}[]\":,=.#\n\\ -+0123456789eEtruefalsnl'\t\x00\xff";

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seeds[rng.below(seeds.len())].clone();
    for _ in 0..=rng.below(8) {
        let at = rng.below(v.len() + 1);
        match rng.below(5) {
            0 if at < v.len() => v[at] ^= 1 << rng.below(8),
            1 => v.insert(at, INTERESTING[rng.below(INTERESTING.len())]),
            2 if at < v.len() => {
                v.remove(at);
            }
            3 => {
                let other = &seeds[rng.below(seeds.len())];
                let from = rng.below(other.len());
                let len = rng.below(other.len() - from + 1);
                v.splice(at..at, other[from..from + len].iter().copied());
            }
            _ => v.truncate(at),
        }
    }
    v
}

#[test]
fn control_request_body_over_pseudo_random_inputs() {
    let seeds: Vec<Vec<u8>> = [
        r#"{"cmd":"status"}"#,
        r#"{"cmd":"pause"}"#,
        r#"{"cmd":"resume"}"#,
        r#"{"cmd":"recover","device":"rocep2s0f0","port":1,"dry_run":true}"#,
        r#"{"cmd":"reset-device","device":"mlx5_0","dry_run":false}"#,
        r#"{"cmd":"reconnect","target":"iqn.2003-01.org.example:t","portal":"192.0.2.2:3260","dry_run":false}"#,
    ]
    .iter()
    .map(|s| format!("{s}\n").into_bytes())
    .collect();
    for s in &seeds {
        control_request::body(s);
    }
    let mut rng = Rng(0x1234_5678_9abc_def1);
    for _ in 0..5000 {
        control_request::body(&mutate(&mut rng, &seeds));
    }
    // Oversized and non-UTF-8 lines.
    control_request::body(&vec![b'x'; iser_guard::io::control::MAX_REQUEST_BYTES + 1]);
    control_request::body(b"{\"cmd\":\"status\xff\"}\n");
}

#[test]
fn config_load_body_over_pseudo_random_inputs() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/config");
    let mut seeds: Vec<Vec<u8>> = std::fs::read_dir(dir)
        .expect("fixtures")
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "toml"))
        .map(|e| std::fs::read(e.path()).expect("read"))
        .collect();
    seeds.push(
        std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/config/iser-guard.toml"
        ))
        .expect("shipped config"),
    );
    assert!(seeds.len() >= 5);
    for s in &seeds {
        config_load::body(s);
    }
    let mut rng = Rng(0x0fed_cba9_8765_4321);
    for _ in 0..3000 {
        config_load::body(&mutate(&mut rng, &seeds));
    }
}

/// The config_load campaign's one crash (2026-12-02, 10-minute run): deeply nested input
/// made the TOML parser stop with "recursion limit", an error without a position, and the
/// body's "every problem says where" check failed. It is placed at the end of the text now.
#[test]
fn config_load_crash_recursion_limit_has_a_place() {
    let input = format!("{}0#=\x0b\0\0\0\0[\0[.)", ".".repeat(92));
    config_load::body(input.as_bytes());
    let problems = iser_guard::config::parse_str(&input).unwrap_err();
    assert!(problems.iter().all(|p| p.line.is_some()), "{problems:?}");
}
