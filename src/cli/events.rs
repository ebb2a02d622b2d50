//! `iser-guard events [--follow] [--since DURATION|TIME] [--json]`: the daemon's recent
//! decisions and transitions with their reasons, from its bounded ring over the control
//! socket (`--follow` streams new ones until interrupted), preceded by the milestones of
//! older incidents from the journal (start, cause found, first action, quarantine, recovery)
//! that the ring no longer holds. Without a daemon, the journal's milestones alone; the
//! daemon's full log is in `journalctl -u iser-guard`.
//!
//! `--json` prints one document; with `--follow`, one JSON object per line.

use crate::exit::ExitStatus;
use std::io::Write as _;
use std::process::ExitCode;

use serde::Serialize;

use super::term::{Colour, Style};
use super::when::{duration_ms, parse_since, utc};
use super::Globals;
use crate::core::observe::{Event, EventKind, Incident, Stamp};
use crate::daemon::observe::unix_ms_now;
use crate::error::Error;
use crate::io::control::{request_lines, ControlError, Reply, Request};

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Keep the connection and print new events as they happen (until interrupted).
    #[arg(long, short = 'f')]
    pub follow: bool,
    /// Only events since then: a duration back (`90s`, `5m`, `1h30m`, `2d`) or a UTC time
    /// (`2026-12-01 21:04`, `2026-12-01T21:04:05Z`, `21:04`, `@UNIX_SECONDS`).
    #[arg(long, value_name = "DURATION|TIME")]
    pub since: Option<String>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// A moment of an older incident, from the journal.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Milestone {
    /// When.
    pub at: Stamp,
    /// The port.
    pub port: String,
    /// The incident.
    pub incident: u64,
    /// What, in words.
    pub message: String,
}

/// The milestones of `incidents` at or after `since` and before `before` (wall clock),
/// oldest first.
pub fn milestones(incidents: &[Incident], since: u64, before: Option<u64>) -> Vec<Milestone> {
    let mut out = Vec::new();
    for i in incidents {
        let mut add = |at: Stamp, message: String| {
            if at.unix_ms >= since && before.is_none_or(|b| at.unix_ms < b) {
                out.push(Milestone {
                    at,
                    port: i.port.clone(),
                    incident: i.id,
                    message,
                });
            }
        };
        add(
            i.started,
            format!("incident #{} started: {}", i.id, i.first_sign),
        );
        if i.detected != i.started {
            add(
                i.detected,
                format!("incident #{}: cause found: {}", i.id, i.cause),
            );
        }
        if let Some(a) = &i.first_action {
            add(
                a.at,
                format!(
                    "incident #{}: first action: {}{}",
                    i.id,
                    a.what,
                    if a.run { "" } else { " (planned only)" }
                ),
            );
        }
        if let Some(q) = i.quarantined {
            add(q, format!("incident #{}: quarantined", i.id));
        }
        if let (Some(r), Some(ms)) = (i.recovered, i.time_to_recover_ms()) {
            add(
                r,
                format!(
                    "incident #{}: recovered, {} after it started",
                    i.id,
                    duration_ms(ms)
                ),
            );
        }
    }
    out.sort_by_key(|m| m.at.unix_ms);
    out
}

fn stamp_text(unix_ms: u64) -> String {
    let u = utc(unix_ms);
    format!("{}.{:03}Z", u.trim_end_matches('Z'), unix_ms % 1000)
}

/// One event as a text line (plus its reason on the next).
pub fn event_line(e: &Event, style: Style) -> String {
    let colour = match &e.kind {
        EventKind::Transition { to, .. } if to == "Healthy" => Some(Colour::Green),
        EventKind::Transition { to, .. } if to == "Quarantined" => Some(Colour::Red),
        EventKind::Transition { .. } | EventKind::Alert { .. } | EventKind::NotRun { .. } => {
            Some(Colour::Yellow)
        }
        _ => None,
    };
    let word = e.kind.word();
    let word = match colour {
        Some(c) => style.paint(c, &format!("{word:<10}")),
        None => format!("{word:<10}"),
    };
    let extra = match &e.kind {
        EventKind::Decided { allowed_by } => format!(" [allowed by {allowed_by}]"),
        EventKind::NotRun { refusal } => format!(" [not run: {refusal}]"),
        EventKind::Alert { severity } => format!(" [{severity}]"),
        _ => String::new(),
    };
    let mut line = format!(
        "{}  {:<14}  {word}  {}{extra}",
        stamp_text(e.at.unix_ms),
        e.port.as_deref().unwrap_or("-"),
        e.message
    );
    if let Some(r) = &e.reason {
        line.push_str("\n      why: ");
        line.push_str(r);
    }
    line
}

fn milestone_line(m: &Milestone, style: Style) -> String {
    format!(
        "{}  {:<14}  {}  {}",
        stamp_text(m.at.unix_ms),
        m.port,
        style.paint(Colour::Dim, &format!("{:<10}", "journal")),
        m.message
    )
}

/// `events --json` (without `--follow`).
#[derive(Debug, Serialize)]
struct EventsReport {
    /// Whether a daemon answered.
    daemon: &'static str,
    /// Milestones of older incidents, from the journal.
    journal: Vec<Milestone>,
    /// The ring's events.
    events: Vec<Event>,
    /// What the daemon said about its ring (kept, dropped, capacity).
    ring: Option<serde_json::Value>,
}

/// What one non-following `events` request gave.
struct EventsBatch {
    events: Vec<Event>,
    detail: Option<serde_json::Value>,
}

/// One `events` request; `Ok(None)` when no daemon runs. With `follow`, each event is
/// handed to `on_event` as it comes and the returned events are empty.
fn ask(
    socket: &std::path::Path,
    req: &Request,
    follow: bool,
    mut on_event: impl FnMut(Event),
) -> Result<Option<(EventsBatch, bool, String)>, Error> {
    let timeout = (!follow).then_some(super::daemon_view::STATUS_TIMEOUT);
    let mut events = Vec::new();
    let answer = request_lines(socket, req, timeout, |r| {
        if let Reply::Event { event } = r {
            if follow {
                on_event(*event);
            } else {
                events.push(*event);
            }
        }
    });
    match answer {
        Ok(Reply::Done {
            ok,
            message,
            detail,
            ..
        }) => Ok(Some((EventsBatch { events, detail }, ok, message))),
        Ok(other) => Err(Error::Data(format!(
            "unexpected answer from the daemon: {other:?}"
        ))),
        Err(ControlError::NotRunning { .. }) => Ok(None),
        Err(e @ ControlError::PermissionDenied { .. }) => Err(Error::Usage(e.to_string())),
        Err(e) => Err(Error::Data(format!(
            "the daemon's events could not be read: {e}"
        ))),
    }
}

fn detail_u64(detail: Option<&serde_json::Value>, key: &str) -> Option<u64> {
    detail?.get(key)?.as_u64()
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let cfg = crate::config::load_or_default(globals.config.as_deref())?.0;
    let socket = cfg.paths.control_socket.clone();
    let now = unix_ms_now();
    let since = args
        .since
        .as_deref()
        .map(|s| parse_since(s, now))
        .transpose()
        .map_err(Error::Usage)?;
    let style = if args.json {
        Style::plain()
    } else {
        Style::stdout()
    };
    // The journal is read whatever the daemon says; a problem with it is only a note.
    let incidents = match super::history::read(&cfg.paths.state_dir) {
        Ok((_, i)) => i.unwrap_or_default(),
        Err(e) => {
            eprintln!("iser-guard: the journal's incidents are not shown: {e}");
            Vec::new()
        }
    };
    let mut stdout = std::io::stdout();
    // What the ring already holds (all of it, or since --since), with the journal's older
    // moments before it; `events -f` alone starts from the daemon's last few events.
    let mut after_seq = None;
    if !(args.follow && since.is_none()) {
        let req = Request::Events {
            since_unix_ms: since,
            after_seq: None,
            follow: false,
        };
        let Some((answer, _, _)) = ask(&socket, &req, false, |_| {})? else {
            let journal = milestones(&incidents, since.unwrap_or(0), None);
            if args.json && !args.follow {
                let r = EventsReport {
                    daemon: "not-running",
                    journal,
                    events: Vec::new(),
                    ring: None,
                };
                println!("{}", super::status::to_json(&r)?);
            } else {
                eprintln!(
                    "iser-guard: no daemon is running (nothing listens on {}): only the journal's \
                     incidents are shown; the daemon's full log is in `journalctl -u iser-guard`",
                    socket.display()
                );
                for m in &journal {
                    print_json_or(&mut stdout, args.json, m, || milestone_line(m, style));
                }
            }
            return Ok(ExitCode::from(if args.follow {
                ExitStatus::Unavailable.code()
            } else {
                0
            }));
        };
        let complete_since = detail_u64(answer.detail.as_ref(), "complete_since_unix_ms");
        let journal = milestones(&incidents, since.unwrap_or(0), complete_since.or(Some(now)));
        after_seq = Some(detail_u64(answer.detail.as_ref(), "last_seq").unwrap_or(0));
        if args.json && !args.follow {
            let r = EventsReport {
                daemon: "running",
                journal,
                events: answer.events,
                ring: answer.detail,
            };
            println!("{}", super::status::to_json(&r)?);
            return Ok(ExitCode::SUCCESS);
        }
        for m in &journal {
            print_json_or(&mut stdout, args.json, m, || milestone_line(m, style));
        }
        for e in &answer.events {
            print_json_or(&mut stdout, args.json, e, || event_line(e, style));
        }
        if !args.follow {
            let dropped = detail_u64(answer.detail.as_ref(), "dropped").unwrap_or(0);
            if dropped > 0 {
                println!(
                    "({dropped} older event(s) were dropped from the daemon's ring;                      `journalctl -u iser-guard` has them)"
                );
            }
            if journal.is_empty() && answer.events.is_empty() {
                println!(
                    "No events{}.",
                    if since.is_some() { " since then" } else { "" }
                );
            }
            return Ok(ExitCode::SUCCESS);
        }
    }
    let req = Request::Events {
        since_unix_ms: None,
        after_seq,
        follow: true,
    };
    let answer = ask(&socket, &req, true, |e| {
        print_json_or(&mut stdout, args.json, &e, || event_line(&e, style));
    })?;
    match answer {
        None => {
            eprintln!(
                "iser-guard: no daemon is running (nothing listens on {}): nothing to follow",
                socket.display()
            );
            Ok(ExitCode::from(ExitStatus::Unavailable.code()))
        }
        Some((_, ok, message)) => {
            eprintln!("iser-guard: {message}");
            Ok(ExitCode::from(if ok {
                0
            } else {
                ExitStatus::TempFail.code()
            }))
        }
    }
}

fn print_json_or<T: Serialize>(
    out: &mut std::io::Stdout,
    json: bool,
    v: &T,
    text: impl FnOnce() -> String,
) {
    let line = if json {
        serde_json::to_string(v).unwrap_or_default()
    } else {
        text()
    };
    let mut lock = out.lock();
    let _ = writeln!(lock, "{line}");
    let _ = lock.flush();
}
