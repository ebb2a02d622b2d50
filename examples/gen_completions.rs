//! Writes the shell completions of `iser-guard` from the clap definition (so they never drift
//! from `--help`), named and meant for where each shell looks on Debian and Ubuntu:
//!
//! | file | installed as |
//! |---|---|
//! | `iser-guard.bash` | `/usr/share/bash-completion/completions/iser-guard` (bash-completion loads it on first use) |
//! | `_iser-guard` | `/usr/share/zsh/vendor-completions/_iser-guard` (in zsh's `fpath` on Debian and Ubuntu) |
//! | `iser-guard.fish` | `/usr/share/fish/vendor_completions.d/iser-guard.fish` |
//!
//! Usage: `cargo run --example gen_completions -- OUT_DIR` (scripts/build-deb.sh does this).
//! tests/completions.rs checks each file parses in its shell (`bash -n`, `zsh -n`, `fish -n`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;
use clap_complete::Shell;

/// `(shell, file name)` of each completion written.
pub const FILES: &[(Shell, &str)] = &[
    (Shell::Bash, "iser-guard.bash"),
    (Shell::Zsh, "_iser-guard"),
    (Shell::Fish, "iser-guard.fish"),
];

#[allow(dead_code)]
fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gen_completions OUT_DIR");
        return ExitCode::from(64);
    };
    match generate(&out) {
        Ok(files) => {
            eprintln!(
                "gen_completions: wrote {} to {}",
                files.join(", "),
                out.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen_completions: cannot write to {}: {e}", out.display());
            ExitCode::from(74)
        }
    }
}

/// Writes every completion into `out`; returns the file names.
pub fn generate(out: &Path) -> std::io::Result<Vec<&'static str>> {
    std::fs::create_dir_all(out)?;
    let mut written = Vec::new();
    for (shell, name) in FILES {
        let mut cmd = iser_guard::cli::Cli::command();
        let mut f = std::fs::File::create(out.join(name))?;
        clap_complete::generate(*shell, &mut cmd, "iser-guard", &mut f);
        written.push(*name);
    }
    Ok(written)
}
