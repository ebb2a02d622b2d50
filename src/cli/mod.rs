//! Subcommands. Thin: each parses its arguments and calls core, io, the daemon or its control
//! socket. One file per subcommand (or family of subcommands).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::error::Error;

pub mod check_config;
pub mod consumers_view;
pub mod daemon;
pub mod daemon_view;
pub mod doctor;
pub mod doctor_active;
pub mod events;
pub mod explain;
mod explain_subsystem;
pub mod history;
pub mod manual;
pub mod qps;
pub mod reload;
pub mod selftest;
pub mod simulate;
pub mod status;
pub mod term;
pub mod watch;
pub mod when;

/// Keeps iSER storage alive: detects RDMA ports whose GSI QP is stuck in ERR, re-creates the
/// affected RDMA device and reconnects the iSCSI sessions, without a reboot.
#[derive(Debug, Parser)]
#[command(name = "iser-guard", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Configuration file [default: /etc/iser-guard/config.toml].
    #[arg(long, global = true, value_name = "PATH")]
    pub config: Option<PathBuf>,

    /// Diagnostics on stderr at this level or filter (`info`, `debug`, `iser_guard=trace`).
    /// The daemon logs at `info` without it; every other command prints only its own output
    /// unless this is given.
    #[arg(long, global = true, value_name = "FILTER", env = "ISER_GUARD_LOG")]
    pub log: Option<String>,

    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Decode kernel log lines or a QP transition against the IB spec and say what recovers it.
    Explain(explain::Args),
    /// Follow the kernel log and print classified events as they come.
    Watch(watch::Args),
    /// Validate a configuration file and report every problem with its key.
    CheckConfig(check_config::Args),
    /// Show RDMA devices, ports, QP counts and any stuck port.
    Status(status::Args),
    /// Show the QP table.
    Qps(qps::Args),
    /// Show the daemon's recent decisions and transitions (`--follow` streams them).
    Events(events::Args),
    /// Show past incidents from the journal: detection, first action, recovery, outcome.
    History(history::Args),
    /// Run a scenario on the simulated host and print the timeline.
    Simulate(simulate::Args),
    /// Run the recovery daemon (what the systemd service starts).
    Daemon(daemon::Args),
    /// Check the target, re-create the device, reconnect and verify: the whole recovery.
    Recover(manual::RecoverArgs),
    /// Re-create one RDMA device (forces its QPs, QP 1 included, through Reset).
    ResetDevice(manual::ResetDeviceArgs),
    /// Log iSCSI sessions out and in again.
    Reconnect(manual::ReconnectArgs),
    /// Stop automatic actions (maintenance); detection and alerts continue.
    Pause(manual::PauseArgs),
    /// Resume automatic actions after `pause`.
    Resume(manual::PauseArgs),
    /// Ask the running daemon to read its configuration again; fails if it refuses the file.
    Reload(reload::Args),
    /// Prove that new RDMA connections work on a port: rdma_cm connect, QP walk, reset and rewalk.
    Selftest(selftest::Args),
    /// Audit this host: can iser-guard protect it, and what is in the way (`--active`: prove it).
    Doctor(doctor::Args),
}

/// Options every subcommand may use.
#[derive(Debug, Clone)]
pub struct Globals {
    /// `--config`, if given.
    pub config: Option<PathBuf>,
}

/// Entry point of the binary.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(&cli.command, cli.log.as_deref());
    let globals = Globals {
        config: cli.config.clone(),
    };
    match run(cli.command, &globals) {
        Ok(code) => code,
        Err(e) => {
            crate::logging::print_error(&e.to_string());
            e.into()
        }
    }
}

/// Runs one subcommand. `--config` naming a file that does not exist is refused first, the
/// same way in every command (78), also in those that would otherwise go on without it.
pub fn run(command: Command, globals: &Globals) -> Result<ExitCode, Error> {
    if let Some(path) = globals.config.as_deref() {
        crate::config::check_named(path)?;
    }
    match command {
        Command::Explain(a) => explain::run(a, globals),
        Command::Watch(a) => watch::run(a, globals),
        Command::CheckConfig(a) => check_config::run(a, globals),
        Command::Status(a) => status::run(a, globals),
        Command::Qps(a) => qps::run(a, globals),
        Command::Events(a) => events::run(a, globals),
        Command::History(a) => history::run(a, globals),
        Command::Simulate(a) => simulate::run(a, globals),
        Command::Daemon(a) => daemon::run(a, globals),
        Command::Recover(a) => manual::recover(a, globals),
        Command::ResetDevice(a) => manual::reset_device(a, globals),
        Command::Reconnect(a) => manual::reconnect(a, globals),
        Command::Pause(a) => manual::pause(a, globals, true),
        Command::Resume(a) => manual::pause(a, globals, false),
        Command::Reload(a) => reload::run(a, globals),
        Command::Selftest(a) => selftest::run(a, globals),
        Command::Doctor(a) => doctor::run(a, globals),
    }
}

/// The diagnostic log: the daemon's always (at `info` unless `--log` says otherwise), a
/// command's only when `--log` asks for it. A command prints its own output; the lines of
/// the code it shares with the daemon (the one-shot loop of a standalone `recover`, the
/// kernel-log reader of `watch`) are the daemon's log, not the command's words.
fn init_logging(command: &Command, filter: Option<&str>) {
    let filter = match (command, filter) {
        (_, Some(f)) => f,
        (Command::Daemon(_), None) => "info",
        (_, None) => return,
    };
    // Journal-friendly (`<N>` priorities, no colour, no second timestamp) unless stderr is
    // a terminal; see crate::logging.
    crate::logging::init(Some(filter), crate::logging::LogStyle::detect());
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    #[test]
    fn cli_definition_is_consistent() {
        super::Cli::command().debug_assert();
    }
}
