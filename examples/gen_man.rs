//! Writes the man pages of `iser-guard` from the clap definition, so they never drift from
//! `--help`: `iser-guard.8` and one page per subcommand (`iser-guard-check-config.8`, …),
//! all in section 8 (administration commands run as root), plus `iser-guard.toml.5`, the
//! configuration file, made from the annotated default file `config/iser-guard.toml`.
//!
//! Usage: `cargo run --example gen_man -- OUT_DIR` (scripts/build-deb.sh does this).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;

const SHIPPED_CONFIG: &str = include_str!("../config/iser-guard.toml");

fn main() -> ExitCode {
    let Some(out) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: gen_man OUT_DIR");
        return ExitCode::from(64);
    };
    match generate(&out) {
        Ok(n) => {
            eprintln!("gen_man: wrote {n} man pages to {}", out.display());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("gen_man: cannot write man pages to {}: {e}", out.display());
            ExitCode::from(74)
        }
    }
}

fn generate(out: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(out)?;
    let mut cmd = iser_guard::cli::Cli::command()
        .after_long_help(
            "Configuration: /etc/iser-guard/config.toml, see iser-guard.toml(5) and \
             `iser-guard check-config`. Exit codes: 0 success; 1 the command found a problem; \
             2 usage; 64-78 as in sysexits.h (66 missing input, 75 try again, 77 permission \
             denied, 78 configuration error). Alerts go to syslog (facility daemon); the daemon \
             runs as the systemd service iser-guard.service.",
        )
        .disable_help_subcommand(true);
    cmd.build();
    let mut n = page(&cmd, out)?;
    n += config_page(out)?;
    Ok(n)
}

/// One page for `cmd` and, recursively, one for each visible subcommand.
fn page(cmd: &clap::Command, out: &Path) -> std::io::Result<usize> {
    let mut n = 0;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        n += page(sub, out)?;
    }
    clap_mangen::Man::new(cmd.clone())
        .section("8")
        .manual("iser-guard")
        .source(format!("iser-guard {}", env!("CARGO_PKG_VERSION")))
        .generate_to(out)?;
    Ok(n + 1)
}

/// Escapes a line for roff inside a no-fill block.
fn roff_line(line: &str) -> String {
    let s = line.replace('\\', "\\e");
    // A leading dot or apostrophe would be read as a request.
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

fn config_page(out: &Path) -> std::io::Result<usize> {
    let mut f = std::fs::File::create(out.join("iser-guard.toml.5"))?;
    writeln!(
        f,
        ".TH ISER-GUARD.TOML 5 \"\" \"iser-guard {}\" \"iser-guard\"",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(
        f,
        ".SH NAME\niser-guard.toml \\- iser-guard configuration file"
    )?;
    writeln!(f, ".SH SYNOPSIS\n/etc/iser-guard/config.toml")?;
    writeln!(
        f,
        ".SH DESCRIPTION\nThe TOML configuration of \\fBiser-guard\\fR(8). Without the file, \
         the built-in defaults apply; they are exactly the values below. Unknown keys are \
         errors. A world-writable file is refused. \\fBiser-guard check-config\\fR reports \
         every problem with its key path, line and column, and exits 78 if there is any; \
         the service runs it before starting, and \\fBsystemctl reload iser-guard\\fR keeps \
         the old configuration if the new one is invalid.\n.PP\nDurations are numbers of \
         seconds (integer or fractional). With an empty \\fBdevices.allow\\fR, stuck ports \
         are detected and alerted, never acted on."
    )?;
    writeln!(
        f,
        ".SH \"DEFAULT FILE\"\nEvery key, its meaning, unit, range and default:"
    )?;
    writeln!(f, ".PP\n.nf\n.ft CR")?;
    for line in SHIPPED_CONFIG.lines() {
        writeln!(f, "{}", roff_line(line))?;
    }
    writeln!(f, ".ft\n.fi")?;
    writeln!(
        f,
        ".SH FILES\n/etc/iser-guard/config.toml\n.SH \"SEE ALSO\"\n\\fBiser-guard\\fR(8), \
         \\fBiser-guard-check-config\\fR(8), \\fBiscsiadm\\fR(8)"
    )?;
    Ok(1)
}
