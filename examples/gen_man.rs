//! Writes the man pages of `iser-guard` from the clap definition, so they never drift from
//! `--help`: `iser-guard.8` and one page per subcommand (`iser-guard-check-config.8`, …),
//! all in section 8 (administration commands run as root), plus `iser-guard.toml.5`, the
//! configuration file, made from the annotated default file `config/iser-guard.toml`.
//!
//! clap_mangen renders NAME, SYNOPSIS, DESCRIPTION, OPTIONS and the subcommand list; this file
//! adds what a Debian man page is expected to have besides: EXIT STATUS, FILES, ENVIRONMENT,
//! EXAMPLES and SEE ALSO, per page. tests/man_pages.rs renders every page with
//! `man --warnings -l` and fails on any groff warning or a missing section.
//!
//! Usage: `cargo run --example gen_man -- OUT_DIR` (scripts/build-deb.sh does this).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;
use iser_guard::exit::ExitStatus;

const SHIPPED_CONFIG: &str = include_str!("../config/iser-guard.toml");

/// The sections every generated page has, in order.
pub const SECTIONS: &[&str] = &[
    "NAME",
    "SYNOPSIS",
    "DESCRIPTION",
    "OPTIONS",
    "EXIT STATUS",
    "FILES",
    "ENVIRONMENT",
    "EXAMPLES",
    "SEE ALSO",
];

#[allow(dead_code)]
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

/// Writes every page into `out`; returns how many.
pub fn generate(out: &Path) -> std::io::Result<usize> {
    std::fs::create_dir_all(out)?;
    let mut cmd = iser_guard::cli::Cli::command().disable_help_subcommand(true);
    cmd.build();
    let mut n = page(&cmd, None, out)?;
    n += config_page(out)?;
    Ok(n)
}

/// Escapes text for roff: backslashes, and hyphens that are meant as minus signs.
fn roff(s: &str) -> String {
    s.replace('\\', "\\e").replace('-', "\\-")
}

/// Escapes a line for roff inside a no-fill block.
fn roff_line(line: &str) -> String {
    let s = roff(line);
    // A leading dot or apostrophe would be read as a request.
    if s.starts_with('.') || s.starts_with('\'') {
        format!("\\&{s}")
    } else {
        s
    }
}

/// The exit codes of every command (sysexits.h values) with their meanings: the one table,
/// [`ExitStatus`].
fn all_exit_codes() -> Vec<(String, &'static str)> {
    ExitStatus::ALL
        .iter()
        .map(|s| (s.code().to_string(), s.meaning()))
        .collect()
}

/// What one page says beyond clap's sections.
struct Extra {
    /// `(code, meaning)`; the main page has them all.
    exit: Vec<(String, &'static str)>,
    /// `(command line, what it does)`.
    examples: &'static [(&'static str, &'static str)],
}

/// The codes `list` of one command: its own words from `notes`, else the general meaning.
fn codes(list: &[&str], notes: &[(&'static str, &'static str)]) -> Vec<(String, &'static str)> {
    let all = all_exit_codes();
    list.iter()
        .filter_map(|c| {
            notes
                .iter()
                .map(|(k, v)| (k.to_string(), *v))
                .chain(all.iter().cloned())
                .find(|(k, _)| k == c)
        })
        .collect()
}

fn extra(sub: Option<&str>) -> Extra {
    match sub {
        None => Extra {
            exit: all_exit_codes(),
            examples: &[
                ("iser-guard status", "Devices, ports, QP counts and any stuck port."),
                (
                    "iser-guard explain --file /var/log/kern.log",
                    "Decode a kernel log and say what recovers each failure.",
                ),
                ("iser-guard check-config", "Validate /etc/iser-guard/config.toml."),
                (
                    "systemctl reload iser-guard",
                    "Apply an edited configuration; fails, and keeps the old one, if the daemon \
                     refuses the new file.",
                ),
                (
                    "iser-guard recover rocep2s0f0/1 --yes",
                    "Check the target, re-create the device, reconnect and verify.",
                ),
            ],
        },
        Some("explain") => Extra {
            exit: codes(&["0", "1", "2", "65", "66", "74"], &[
                ("0", "Nothing wrong was found."),
                ("1", "A forbidden QP transition or a stuck GSI QP was found."),
            ]),
            examples: &[
                ("iser-guard explain --file /var/log/kern.log", "A whole log."),
                ("dmesg | iser-guard explain --json", "Machine-readable findings."),
                (
                    "iser-guard explain --transition ERR:RTS --type GSI --mask STATE,CUR_STATE",
                    "Why the MAD layer's ERR to RTS request fails.",
                ),
            ],
        },
        Some("watch") => Extra {
            exit: codes(&["0", "2", "66", "74", "77"], &[
                ("66", "The kernel log (or --file) does not exist."),
                ("77", "The kernel log may not be read (dmesg_restrict=1: run as root)."),
            ]),
            examples: &[
                ("iser-guard watch", "Follow /dev/kmsg and print classified events."),
                ("iser-guard watch --file kmsg.txt --json", "Classify a saved log."),
            ],
        },
        Some("check-config") => Extra {
            exit: codes(&["0", "2", "78"], &[
                ("0", "The configuration is valid; the effective settings are printed."),
                (
                    "78",
                    "Invalid, unreadable, missing (when named), not a regular file, or writable \
                     by someone other than root; every problem is printed with its key.",
                ),
            ]),
            examples: &[
                ("iser-guard check-config", "The file the daemon would use."),
                ("iser-guard check-config --json /tmp/new.toml", "For scripts."),
            ],
        },
        Some("status") => Extra {
            exit: codes(&["0", "1", "65", "69", "71", "75", "77"], &[
                ("1", "A stuck port was found."),
                (
                    "69",
                    "RDMA netlink is unavailable and sysfs shows no device.",
                ),
            ]),
            examples: &[
                ("iser-guard status", "The table of devices and ports."),
                ("iser-guard status --json", "The same, machine-readable."),
            ],
        },
        Some("qps") => Extra {
            exit: codes(&["0", "69", "75", "77"], &[
                ("0", "The QP table was read (even empty)."),
                ("69", "RDMA netlink is unavailable."),
            ]),
            examples: &[(
                "iser-guard qps --type GSI --state ERR",
                "Exactly the stuck ports' QPs.",
            )],
        },
        Some("simulate") => Extra {
            exit: codes(&["0", "1", "2"], &[
                ("0", "The scenario ran and every expectation held."),
                ("1", "An expectation of the scenario failed."),
            ]),
            examples: &[
                ("iser-guard simulate --list", "Every scenario."),
                ("iser-guard simulate zombie-session", "One scenario's timeline."),
            ],
        },
        Some("daemon") => Extra {
            exit: codes(&["0", "64", "66", "74", "77", "78"], &[
                ("0", "Stopped by SIGTERM or SIGINT."),
                ("64", "The control socket is unusable (another daemon listens on it)."),
                ("66", "The kernel log does not exist."),
                ("74", "The kernel log cannot be read."),
                ("77", "The kernel log may not be read."),
                (
                    "78",
                    "Bad configuration, found before READY=1; systemd does not restart the \
                     service (RestartPreventExitStatus=78).",
                ),
            ]),
            examples: &[
                ("systemctl start iser-guard", "How it is normally run."),
                (
                    "iser-guard daemon --dry-run",
                    "Decide, log and alert, change nothing.",
                ),
            ],
        },
        Some("reload") => Extra {
            exit: codes(&["0", "69", "75", "77", "78"], &[
                ("0", "The daemon reloaded the configuration."),
                ("69", "No daemon is running."),
                ("75", "The daemon did not answer in time."),
                ("77", "Not root: the control socket is for root only."),
                (
                    "78",
                    "The daemon refused the new configuration and keeps the one in force; \
                     every problem is printed.",
                ),
            ]),
            examples: &[
                (
                    "systemctl reload iser-guard",
                    "What the service's ExecReload runs; fails when the file is refused.",
                ),
                ("iser-guard reload", "The same, directly."),
            ],
        },
        Some(cmd) => Extra {
            exit: codes(&["0", "1", "64", "66", "69", "75", "77", "78"], &[
                (
                    "0",
                    "Done: every port concerned is healthy (or the dry run, pause or resume was \
                     done).",
                ),
                (
                    "1",
                    "Not confirmed at the prompt; or the recovery ended with a port quarantined.",
                ),
                ("64", "Bad arguments; a destructive command without a terminal and without --yes."),
                ("66", "Unknown device; no iSCSI session matches --target or --portal."),
                (
                    "69",
                    "pause or resume with no daemon running; no re-creation method for the device.",
                ),
                (
                    "75",
                    "Another recovery holds the lock; the daemon stopped before the command \
                     finished.",
                ),
                (
                    "77",
                    "Not root (the configuration or the control socket cannot be opened); the \
                     device re-creation was refused.",
                ),
            ]),
            examples: match cmd {
                "recover" => &[
                    ("iser-guard recover rocep2s0f0/1 --dry-run", "The plan, changing nothing."),
                    ("iser-guard recover rocep2s0f0/1 --yes", "The whole recovery."),
                ],
                "reset-device" => &[("iser-guard reset-device rxe_ini --yes", "Re-create now.")],
                "reconnect" => &[(
                    "iser-guard reconnect --portal 192.0.2.2:3260 --yes",
                    "Log that portal's sessions out and in.",
                )],
                "pause" => &[("iser-guard pause", "Before maintenance on the fabric.")],
                _ => &[("iser-guard resume", "After the maintenance.")],
            },
        },
    }
}

const FILES: &[(&str, &str)] = &[
    (
        "/etc/iser-guard/config.toml",
        "The configuration, see iser-guard.toml(5).",
    ),
    (
        "/var/lib/iser-guard/engine-journal.json",
        "The recovery engine's journal, written before every destructive step.",
    ),
    (
        "/var/lib/iser-guard/kmsg.cursor",
        "Where the daemon stopped reading the kernel log.",
    ),
    (
        "/var/lib/iser-guard/recovery.lock",
        "Held while a device is re-created.",
    ),
    (
        "/run/iser-guard/control.sock",
        "The daemon's control socket (root only).",
    ),
    ("/dev/kmsg", "The kernel log."),
    (
        "/usr/lib/systemd/system/iser-guard.service",
        "The systemd service.",
    ),
];

const ENVIRONMENT: &[(&str, &str)] = &[
    (
        "ISER_GUARD_LOG",
        "Log filter for diagnostics on stderr, as --log (e.g. info, debug, iser_guard=trace).",
    ),
    (
        "NOTIFY_SOCKET",
        "Set by systemd: the daemon reports READY=1, RELOADING=1, STOPPING=1 and STATUS= to it.",
    ),
    (
        "WATCHDOG_USEC, WATCHDOG_PID",
        "Set by systemd: the daemon sends WATCHDOG=1 at half the interval.",
    ),
];

fn see_also(sub: Option<&str>) -> String {
    let mut refs = vec![];
    if sub.is_some() {
        refs.push("iser-guard(8)".to_string());
    }
    refs.extend(
        [
            "iser-guard.toml(5)",
            "iscsiadm(8)",
            "rdma(8)",
            "devlink(8)",
            "systemctl(1)",
            "journalctl(1)",
        ]
        .map(String::from),
    );
    refs.iter()
        .map(|r| {
            let (name, sec) = r.split_once('(').unwrap_or((r, ""));
            format!("\\fB{}\\fR({}", roff(name), sec)
        })
        .collect::<Vec<_>>()
        .join(",\n")
}

/// `.TP` items.
fn items(f: &mut dyn Write, list: &[(&str, &str)], bold: bool) -> std::io::Result<()> {
    for (k, v) in list {
        let k = if bold {
            format!("\\fB{}\\fR", roff(k))
        } else {
            roff(k)
        };
        writeln!(f, ".TP\n{k}\n{}", roff(v))?;
    }
    Ok(())
}

/// One page for `cmd` and, recursively, one for each visible subcommand.
fn page(cmd: &clap::Command, sub: Option<&str>, out: &Path) -> std::io::Result<usize> {
    let mut n = 0;
    for s in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        n += page(s, Some(s.get_name()), out)?;
    }
    let man = clap_mangen::Man::new(cmd.clone())
        .section("8")
        .manual("iser-guard")
        .source(format!("iser-guard {}", env!("CARGO_PKG_VERSION")));
    let mut f = std::fs::File::create(out.join(man.get_filename()))?;
    man.render_title(&mut f)?;
    // Left-aligned: help texts carry long words (paths, JSON) that justified lines cannot fit.
    writeln!(f, ".ad l")?;
    man.render_name_section(&mut f)?;
    man.render_synopsis_section(&mut f)?;
    man.render_description_section(&mut f)?;
    man.render_options_section(&mut f)?;
    if cmd.has_subcommands() {
        man.render_subcommands_section(&mut f)?;
    }
    let extra = extra(sub);
    writeln!(f, ".SH \"EXIT STATUS\"")?;
    let exit: Vec<(&str, &str)> = extra.exit.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    items(&mut f, &exit, true)?;
    writeln!(f, ".SH FILES")?;
    items(&mut f, FILES, false)?;
    writeln!(f, ".SH ENVIRONMENT")?;
    items(&mut f, ENVIRONMENT, true)?;
    writeln!(f, ".SH EXAMPLES")?;
    for (line, what) in extra.examples {
        writeln!(
            f,
            ".PP\n{}\n.RS 4\n.nf\n{}\n.fi\n.RE",
            roff(what),
            roff_line(line)
        )?;
    }
    writeln!(f, ".SH \"SEE ALSO\"\n{}", see_also(sub))?;
    man.render_version_section(&mut f)?;
    Ok(n + 1)
}

fn config_page(out: &Path) -> std::io::Result<usize> {
    let mut f = std::fs::File::create(out.join("iser-guard.toml.5"))?;
    writeln!(
        f,
        ".TH ISER-GUARD.TOML 5 \"\" \"iser-guard {}\" \"iser-guard\"\n.ad l",
        env!("CARGO_PKG_VERSION")
    )?;
    writeln!(
        f,
        ".SH NAME\niser\\-guard.toml \\- iser\\-guard configuration file"
    )?;
    writeln!(f, ".SH SYNOPSIS\n/etc/iser\\-guard/config.toml")?;
    writeln!(
        f,
        ".SH DESCRIPTION\nThe TOML configuration of \\fBiser\\-guard\\fR(8). Without the file, \
         the built\\-in defaults apply; they are exactly the values below. Unknown keys are \
         errors. A file, or a directory on the way to it, that someone other than root can \
         write or replace is refused. \\fBiser\\-guard check\\-config\\fR reports every problem \
         with its key path, line and column, and exits 78 if there is any; the daemon runs the \
         same checks before it reports ready, and \\fBsystemctl reload iser\\-guard\\fR fails \
         and keeps the old configuration if the new one is invalid.\n.PP\nDurations are \
         numbers of seconds (integer or fractional). With an empty \\fBdevices.allow\\fR, stuck \
         ports are detected and alerted, never acted on."
    )?;
    writeln!(
        f,
        ".SH OPTIONS\nEvery key, its meaning, unit, range and default, as the shipped file \
         gives them:"
    )?;
    writeln!(f, ".PP\n.nf\n.ft CR")?;
    for line in SHIPPED_CONFIG.lines() {
        writeln!(f, "{}", roff_line(line))?;
    }
    writeln!(f, ".ft\n.fi")?;
    writeln!(f, ".SH \"EXIT STATUS\"\nA file has no exit status; \\fBiser\\-guard check\\-config\\fR exits 0 when the file is valid and 78 when it is not.")?;
    writeln!(f, ".SH FILES")?;
    items(&mut f, &FILES[..1], false)?;
    writeln!(f, ".SH ENVIRONMENT\nNone: every setting is in the file.")?;
    writeln!(
        f,
        ".SH EXAMPLES\nLet the daemon re-create one device, then apply the change:\n.PP\n.RS 4\n\
         .nf\n[devices]\nallow = [\"rocep2s0f0\"]\n.fi\n.RE\n.PP\n.RS 4\n.nf\n\
         iser\\-guard check\\-config && systemctl reload iser\\-guard\n.fi\n.RE"
    )?;
    writeln!(
        f,
        ".SH \"SEE ALSO\"\n\\fBiser\\-guard\\fR(8),\n\\fBiser\\-guard\\-check\\-config\\fR(8),\n\
         \\fBiser\\-guard\\-reload\\fR(8),\n\\fBiscsiadm\\fR(8)"
    )?;
    Ok(1)
}
