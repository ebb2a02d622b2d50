//! `iser-guard history [--json]`: past incidents from the engine journal (the daemon's
//! bounded incident list, see [`crate::core::observe::incidents`]): when each began, when its
//! cause was known, its first action, its recovery and outcome, with the time to detect and
//! the time to recover. Read from the journal file, so it works with or without a daemon
//! (the daemon writes the file on every change of state).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::Serialize;

use super::term::{Colour, Style};
use super::when::{duration_ms, utc};
use super::Globals;
use crate::core::observe::{Incident, IncidentOutcome, Stamp};
use crate::error::Error;
use crate::io::journal::Journal;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// One incident with its derived times, as `--json` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct IncidentRow {
    /// The incident.
    #[serde(flatten)]
    pub incident: Incident,
    /// From the first sign to detection.
    pub time_to_detect_ms: u64,
    /// From the first sign to recovery (absent until recovered).
    pub time_to_recover_ms: Option<u64>,
}

/// `history --json`.
#[derive(Debug, Clone, Serialize)]
pub struct HistoryReport {
    /// The journal read.
    pub journal: String,
    /// Oldest first.
    pub incidents: Vec<IncidentRow>,
}

/// The incidents of the journal in `state_dir`; `Ok(None)` when there is no journal yet.
pub fn read(state_dir: &Path) -> Result<(PathBuf, Option<Vec<Incident>>), Error> {
    let journal = Journal::new(state_dir);
    let loaded = journal.load_with_incidents()?;
    Ok((journal.path(), loaded.map(|(_, i)| i)))
}

/// The report for `incidents`.
pub fn report(journal: &Path, incidents: Vec<Incident>) -> HistoryReport {
    HistoryReport {
        journal: journal.display().to_string(),
        incidents: incidents
            .into_iter()
            .map(|i| IncidentRow {
                time_to_detect_ms: i.time_to_detect_ms(),
                time_to_recover_ms: i.time_to_recover_ms(),
                incident: i,
            })
            .collect(),
    }
}

fn at(s: Stamp) -> String {
    utc(s.unix_ms)
}

fn after(start: Stamp, s: Stamp) -> String {
    format!("+{}", duration_ms(s.mono.0.saturating_sub(start.mono.0)))
}

/// The text form.
pub fn render(r: &HistoryReport, style: Style) -> String {
    let mut out = String::new();
    if r.incidents.is_empty() {
        let _ = writeln!(out, "No incident recorded in {}.", r.journal);
        return out;
    }
    let _ = writeln!(
        out,
        "{} incident(s) in {} (times UTC; the journal keeps the last {}):",
        r.incidents.len(),
        r.journal,
        crate::core::observe::INCIDENTS_KEPT
    );
    for row in &r.incidents {
        let i = &row.incident;
        let colour = match i.outcome {
            IncidentOutcome::Recovered => Colour::Green,
            IncidentOutcome::Ongoing => Colour::Yellow,
            IncidentOutcome::Quarantined => Colour::Red,
        };
        let outcome = match (i.outcome, i.quarantined) {
            (IncidentOutcome::Recovered, Some(_)) => "recovered (after a quarantine)".to_string(),
            (o, _) => o.word().to_string(),
        };
        let _ = writeln!(
            out,
            "\n#{} {} {}: {}",
            i.id,
            i.port,
            at(i.started),
            style.paint(colour, &outcome)
        );
        let line = |out: &mut String, label: &str, text: String| {
            let _ = writeln!(out, "  {label:<13}{text}");
        };
        line(
            &mut out,
            "started",
            format!("{}  {}", at(i.started), i.first_sign),
        );
        let cause = match (i.local, i.detected == i.started) {
            (true, true) => "the first sign is the cause".to_string(),
            (true, false) => i.cause.clone(),
            (false, _) => format!("{} (no local cause found)", i.cause),
        };
        line(
            &mut out,
            "detected",
            format!(
                "{}  {cause}  [time to detect {}]",
                after(i.started, i.detected),
                duration_ms(row.time_to_detect_ms)
            ),
        );
        let first = match &i.first_action {
            Some(a) => format!(
                "{}  {}{}",
                after(i.started, a.at),
                a.what,
                if a.run { "" } else { " [planned only]" }
            ),
            None => "-  none (nothing destructive was decided)".to_string(),
        };
        line(&mut out, "first action", first);
        if let Some(how) = &i.recreation {
            line(&mut out, "re-created", how.clone());
        }
        if let Some(q) = i.quarantined {
            line(&mut out, "quarantined", after(i.started, q));
        }
        let recovered = match (i.recovered, row.time_to_recover_ms) {
            (Some(r), Some(ms)) => format!(
                "{}  [time to recover {}]",
                after(i.started, r),
                duration_ms(ms)
            ),
            _ => "-  not yet".to_string(),
        };
        line(&mut out, "recovered", recovered);
        line(
            &mut out,
            "attempts",
            format!("{}; last: {}", i.attempts, i.last_reason),
        );
    }
    out
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let cfg = crate::config::load_or_default(globals.config.as_deref())?.0;
    let (path, incidents) = read(&cfg.paths.state_dir)?;
    let r = report(&path, incidents.unwrap_or_default());
    if args.json {
        println!("{}", super::status::to_json(&r)?);
    } else {
        print!("{}", render(&r, Style::stdout()));
    }
    Ok(ExitCode::SUCCESS)
}
