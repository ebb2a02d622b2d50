//! `promtool` (Debian's `prometheus` package; scripts/setup.sh installs it) for the metrics
//! and monitoring tests. Missing promtool fails the test when `CI=true` (CI must run these
//! checks) and is reported, not hidden, elsewhere.

#![allow(dead_code)]

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The promtool binary, or `None` (with a note on stderr) on a developer machine without it.
/// Panics under `CI=true` when it is missing.
pub fn find() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join("promtool"))
            .find(|p| p.is_file())
    });
    if found.is_none() {
        let ci = std::env::var("CI").is_ok_and(|v| v == "true");
        assert!(
            !ci,
            "promtool is not installed but CI=true: scripts/setup.sh installs Debian's \
             `prometheus` package, which ships it; run scripts/setup.sh"
        );
        eprintln!(
            "NOTE: promtool not found (apt-get install prometheus, or scripts/setup.sh): the \
             promtool check was NOT run"
        );
    }
    found
}

/// `promtool check metrics` on `text` (stdin); panics with its output if it complains.
pub fn check_metrics(text: &str) {
    let Some(promtool) = find() else { return };
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // promtool exits 0 when it only has lint remarks? No: any problem is exit 1 (3 for a
    // parse error); print them either way.
    assert!(
        out.status.success() && said.trim().is_empty(),
        "promtool check metrics: {}\n{said}\n--- input ---\n{text}",
        out.status
    );
}

/// `promtool <args>` in `dir`; panics with its output unless it succeeds. Returns stdout.
pub fn run(dir: &Path, args: &[&str]) -> Option<String> {
    let promtool = find()?;
    let out = Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run promtool");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool {args:?}: {}\n{said}",
        out.status
    );
    Some(said)
}
