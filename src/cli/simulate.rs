//! `iser-guard simulate [SCENARIO] [--list] [--json]`: runs a named scenario on the simulated
//! host (virtual time, nothing on this machine is touched) and prints the timeline: what the
//! kernel said, what the agent decided and why, what it did, and when storage was back.
//! The scenario brings its own host and recovery policy; `--config`, when given, must load
//! (as for every command) and gives the alerts their configured severities. Without it the
//! built-in defaults are used, so that a scenario's timeline is the same on every machine.

use std::process::ExitCode;

use super::Globals;
use crate::error::Error;
use crate::sim::scenarios;

/// Steps allowed for one scenario; more means a livelock.
const MAX_STEPS: usize = 200_000;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario to run (default: the field incident). `--list` shows them all.
    #[arg(value_name = "SCENARIO")]
    pub scenario: Option<String>,
    /// List the scenarios and exit.
    #[arg(long)]
    pub list: bool,
    /// Print the timeline as JSON (one object per entry) instead of text.
    #[arg(long)]
    pub json: bool,
    /// Restart the agent after every step, resuming from its journal each time.
    #[arg(long)]
    pub restart_every_step: bool,
    /// Seed for the back-off jitter.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

/// Runs the subcommand.
pub fn run(args: Args, globals: &Globals) -> Result<ExitCode, Error> {
    let severities = match globals.config.as_deref() {
        Some(path) => crate::config::load(path)?.alerts.severities(),
        None => crate::core::severity::AlertSeverities::default(),
    };
    if args.list {
        for s in scenarios::all() {
            println!("{:<26} {}", s.name, s.about);
        }
        return Ok(ExitCode::SUCCESS);
    }
    let name = args.scenario.as_deref().unwrap_or("field-incident");
    let Some(scenario) = scenarios::find(name) else {
        return Err(Error::Usage(format!(
            "no scenario named {name:?}; `iser-guard simulate --list` shows them"
        )));
    };
    let mut h = scenario.harness(args.seed);
    h.restart_every_step = args.restart_every_step;
    h.severities = severities;
    let end = crate::core::time::Instant::ZERO.plus(scenario.duration);
    h.run_until(end, MAX_STEPS)
        .map_err(|e| Error::Data(format!("scenario {name}: {e}")))?;
    if args.json {
        for e in &h.timeline {
            let line = serde_json::to_string(e)
                .map_err(|e| Error::Data(format!("cannot encode the timeline: {e}")))?;
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    println!("scenario {}: {}", scenario.name, scenario.about);
    println!("(virtual time; nothing on this machine is touched)\n");
    print!("{}", h.render());
    println!();
    let recreations = h.recreations().len();
    let ok = h.host.storage_ok();
    match h.storage_back_at() {
        Some(t) if ok => println!(
            "result: storage back at {t}, without a reboot; {recreations} device re-creation(s), \
             {} journal write(s)",
            h.journal_writes
        ),
        _ if ok => println!("result: storage never went down; no re-creation"),
        _ => println!(
            "result: storage NOT back at the end ({} re-creation(s)); see the alerts above",
            recreations
        ),
    }
    for p in h.engine().ports() {
        println!("port {}: {} ({})", p.id, p.phase(), p.reason);
    }
    Ok(ExitCode::SUCCESS)
}
