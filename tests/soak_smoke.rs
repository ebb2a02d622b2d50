//! A one-minute smoke of the soak test (scripts/soak.sh, docs/history/trust.md): the daemon's loop
//! against misbehaving fakes, SIGKILLs and kernel-log storms, invariants checked.
//!
//! Off unless `ISER_GUARD_SOAK=1` (and root): it writes to the one real kernel ring, which
//! other tests read, and takes a minute. `ISER_GUARD_SOAK_MINUTES` changes the length.

use std::process::Command;

#[test]
fn soak_smoke_has_no_violation() {
    if std::env::var("ISER_GUARD_SOAK").as_deref() != Ok("1") {
        eprintln!("skipped: set ISER_GUARD_SOAK=1 (as root) to run the soak smoke");
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the soak writes to /dev/kmsg and needs root");
        return;
    }
    let minutes = std::env::var("ISER_GUARD_SOAK_MINUTES").unwrap_or_else(|_| "1".into());
    let out = Command::new(concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/soak.sh"))
        .arg(&minutes)
        .env("PROFILE", "debug")
        .output()
        .expect("run scripts/soak.sh");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("violations: 0"), "{text}");
    assert!(text.contains("SIGKILLs survived"), "{text}");
}
