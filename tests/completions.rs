//! The shell completions the package installs (examples/gen_completions.rs) parse in their
//! shells and complete the subcommands. A shell that is not installed is skipped with a
//! note; scripts/setup.sh installs bash, zsh and fish, so CI checks all three.

#[allow(dead_code)]
#[path = "../examples/gen_completions.rs"]
mod gen_completions;

use std::path::Path;
use std::process::Command;

fn generated() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let files = gen_completions::generate(dir.path()).expect("completions written");
    assert_eq!(files.len(), 3);
    dir
}

fn have(shell: &str) -> bool {
    Command::new(shell)
        .args(["-c", "exit 0"])
        .status()
        .is_ok_and(|s| s.success())
}

/// Runs `shell ARGS…`; `None` when the shell is not installed.
fn run(shell: &str, args: &[&str], dir: &Path) -> Option<(bool, String)> {
    if !have(shell) {
        eprintln!("skip {shell}: not installed (scripts/setup.sh installs it)");
        return None;
    }
    let out = Command::new(shell)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some((out.status.success(), text))
}

fn subcommands() -> Vec<String> {
    use clap::CommandFactory;
    iser_guard::cli::Cli::command()
        .get_subcommands()
        .map(|s| s.get_name().to_string())
        .collect()
}

#[test]
fn bash_completion_parses_and_completes_the_subcommands() {
    let dir = generated();
    let Some((ok, out)) = run("bash", &["-n", "iser-guard.bash"], dir.path()) else {
        return;
    };
    assert!(ok, "bash -n: {out}");
    // What bash-completion does on `iser-guard re<TAB>`.
    let script = "source ./iser-guard.bash; \
                  f=$(complete -p iser-guard | sed 's/.*-F \\([^ ]*\\).*/\\1/'); \
                  COMP_WORDS=(iser-guard re); COMP_CWORD=1; \"$f\" iser-guard re iser-guard; \
                  printf '%s\\n' \"${COMPREPLY[@]}\"";
    let (ok, out) = run("bash", &["-c", script], dir.path()).expect("bash");
    assert!(ok, "{out}");
    let got: Vec<&str> = out.lines().collect();
    for want in ["recover", "reconnect", "reset-device", "resume", "reload"] {
        assert!(
            got.contains(&want),
            "`iser-guard re<TAB>` lacks {want}: {got:?}"
        );
    }
    assert!(!got.contains(&"status"), "{got:?}");
}

#[test]
fn zsh_completion_parses_and_registers_for_iser_guard() {
    let dir = generated();
    let Some((ok, out)) = run("zsh", &["-n", "_iser-guard"], dir.path()) else {
        return;
    };
    assert!(ok, "zsh -n: {out}");
    let script = "fpath=($PWD $fpath); autoload -U compinit; compinit -u -D; \
                  print -r -- ${_comps[iser-guard]}";
    let (ok, out) = run("zsh", &["-f", "-c", script], dir.path()).expect("zsh");
    assert!(ok, "{out}");
    assert_eq!(out.trim(), "_iser-guard", "{out}");
}

#[test]
fn fish_completion_parses_and_completes_every_subcommand() {
    let dir = generated();
    let Some((ok, out)) = run("fish", &["-n", "iser-guard.fish"], dir.path()) else {
        return;
    };
    assert!(ok, "fish -n: {out}");
    let (ok, out) = run(
        "fish",
        &[
            "--no-config",
            "-c",
            "source ./iser-guard.fish; complete -C 'iser-guard '",
        ],
        dir.path(),
    )
    .expect("fish");
    assert!(ok, "{out}");
    let got: Vec<&str> = out
        .lines()
        .map(|l| l.split('\t').next().unwrap_or_default())
        .collect();
    for want in subcommands() {
        assert!(got.contains(&want.as_str()), "fish lacks {want}: {got:?}");
    }
}
