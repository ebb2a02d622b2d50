//! The man pages the package installs (examples/gen_man.rs): one per command and the
//! configuration file's, each with the sections a Debian man page has, rendered by man-db
//! without a single groff warning (`man --warnings -l`).

#[allow(dead_code)]
#[path = "../examples/gen_man.rs"]
mod gen_man;

use std::process::Command;

fn pages() -> (tempfile::TempDir, Vec<std::path::PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let n = gen_man::generate(dir.path()).expect("pages written");
    let mut files: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    assert_eq!(files.len(), n);
    (dir, files)
}

#[test]
fn a_page_for_every_command_and_the_configuration_file() {
    use clap::CommandFactory;
    let (_dir, files) = pages();
    let names: Vec<String> = files
        .iter()
        .map(|f| f.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(names.contains(&"iser-guard.8".to_string()), "{names:?}");
    assert!(
        names.contains(&"iser-guard.toml.5".to_string()),
        "{names:?}"
    );
    for sub in iser_guard::cli::Cli::command().get_subcommands() {
        let want = format!("iser-guard-{}.8", sub.get_name());
        assert!(names.contains(&want), "no page {want}: {names:?}");
    }
}

#[test]
fn every_page_has_the_debian_sections_in_order() {
    let (_dir, files) = pages();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        let sections: Vec<String> = text
            .lines()
            .filter_map(|l| l.strip_prefix(".SH "))
            .map(|s| s.trim_matches('"').to_string())
            .collect();
        let mut at = 0;
        for want in gen_man::SECTIONS {
            let pos = sections[at..]
                .iter()
                .position(|s| s == want)
                .unwrap_or_else(|| {
                    panic!("{}: no {want} after {:?}", f.display(), &sections[..at])
                });
            at += pos + 1;
        }
    }
}

#[test]
fn man_renders_every_page_without_a_warning() {
    if Command::new("man").arg("--version").output().is_err() {
        eprintln!("skip: man-db is not installed (scripts/setup.sh installs it)");
        return;
    }
    let (_dir, files) = pages();
    for f in &files {
        let out = Command::new("man")
            .args(["--warnings", "-E", "UTF-8", "-l"])
            .arg(f)
            .env("MANWIDTH", "80")
            .output()
            .unwrap();
        let warnings = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && warnings.trim().is_empty(),
            "{}: {warnings}",
            f.display()
        );
        // grotty's overstrike bold (`X\x08X`) reduced to plain text.
        let mut text = String::new();
        for c in String::from_utf8_lossy(&out.stdout).chars() {
            if c == '\u{8}' {
                text.pop();
            } else {
                text.push(c);
            }
        }
        assert!(text.contains("EXIT STATUS"), "{}: {text}", f.display());
    }
}

#[test]
fn the_main_page_documents_every_exit_code_and_the_state_files() {
    let (dir, _) = pages();
    let text = std::fs::read_to_string(dir.path().join("iser-guard.8")).unwrap();
    for code in [
        "0", "1", "2", "64", "65", "66", "69", "70", "71", "74", "75", "77", "78",
    ] {
        assert!(
            text.contains(&format!(".TP\n\\fB{code}\\fR\n")),
            "exit code {code} missing"
        );
    }
    for file in [
        "engine\\-journal.json",
        "control.sock",
        "config.toml",
        "kmsg.cursor",
    ] {
        assert!(text.contains(file), "{file} missing");
    }
    assert!(text.contains("ISER_GUARD_LOG"));
}

/// The operator guide's exit-code table says exactly what the one table ([`ExitStatus`])
/// says, the one the man pages are generated from.
#[test]
fn the_guides_exit_code_table_is_the_exit_status_table() {
    use iser_guard::exit::ExitStatus;
    let doc = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/docs/guide/operate.md"
    ))
    .unwrap();
    let start = doc.find("## Exit codes").expect("an exit code section");
    let rows: Vec<(u8, String)> = doc[start..]
        .lines()
        .skip_while(|l| !l.starts_with("| code"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            let cells: Vec<&str> = l.trim_matches('|').split(" | ").collect();
            (
                cells[0].trim().parse().unwrap(),
                cells[1].trim().to_string(),
            )
        })
        .collect();
    let want: Vec<(u8, String)> = ExitStatus::ALL
        .iter()
        .map(|s| (s.code(), s.meaning().to_string()))
        .collect();
    assert_eq!(rows, want);
}
