//! The core crate is pure, and Cargo is what enforces it: its normal dependency tree holds
//! no async runtime, no libc/nix bindings and no netlink socket crate, and its code names no
//! OS facility (files, processes, sockets, the clock). Tests inside the core may read
//! fixture files; production code may not.

use std::path::{Path, PathBuf};
use std::process::Command;

const FORBIDDEN_CRATES: &[&str] = &["tokio", "nix", "libc", "netlink-sys", "mio", "socket2"];

#[test]
fn core_dependency_tree_has_no_os_crates() {
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "iser-guard-core",
            "-e",
            "normal",
            "--prefix",
            "none",
            "--format",
            "{p}",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo tree runs");
    assert!(
        out.status.success(),
        "cargo tree failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8(out.stdout).expect("utf-8");
    let names: Vec<&str> = tree
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert!(
        names.contains(&"iser-guard-core"),
        "unexpected tree: {tree}"
    );
    for bad in FORBIDDEN_CRATES {
        assert!(
            !names.contains(bad),
            "iser-guard-core depends on {bad}:\n{tree}"
        );
    }
}

/// Production sources of the core, without its in-crate test modules.
fn core_sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("core source dir") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            if path.file_name().is_some_and(|n| n == "tests") {
                continue;
            }
            core_sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn core_code_names_no_os_facility() {
    const FORBIDDEN: &[&str] = &[
        "std::fs",
        "std::process",
        "std::thread",
        "std::net::TcpStream",
        "std::net::UdpSocket",
        "std::os::",
        "SystemTime::now",
        "Instant::now",
        "std::env::var",
    ];
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/iser-guard-core/src");
    let mut files = Vec::new();
    core_sources(&root, &mut files);
    assert!(files.len() > 20, "found only {} core files", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read core source");
        // In-file unit tests (`#[cfg(test)] mod tests`) may use fixtures; cut them off.
        let production = text.split("#[cfg(test)]").next().unwrap_or("");
        for bad in FORBIDDEN {
            assert!(
                !production.contains(bad),
                "{} names {bad} outside its tests",
                file.display()
            );
        }
    }
}
