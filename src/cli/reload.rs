//! `iser-guard reload`: asks the running daemon, over its control socket, to read its
//! configuration file again, and exits with the daemon's verdict. It is the service's
//! `ExecReload=`, so `systemctl reload iser-guard` fails (and says why) when the daemon
//! refuses the new file; the configuration in force stays in force then. (`kill -HUP`
//! reloads too, but its sender never learns whether the file was taken.)
//!
//! The socket's path comes from the configuration, which may be the very file being
//! refused: a file that does not load is refused here, with every problem, before any daemon
//! is asked (the daemon would refuse it the same way, and the socket it names cannot be
//! trusted). Settings the daemon can take over only when it starts (its sockets, its state
//! and kernel-log paths, metrics, polls) are refused by the daemon with that reason.
//!
//! Exit codes: 0 reloaded; 78 refused (every problem printed); 69 no daemon; 77 not root;
//! 75 no answer in time.

use crate::exit::ExitStatus;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use super::manual::{is_permission_denied, not_root};
use super::Globals;
use crate::error::Error;
use crate::io::control::{request, ControlError, Reply, Request};

/// `reload` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Under systemd's default reload timeout (90 s); the daemon answers from its loop at once.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60);

/// The control socket to ask: the configuration's. A file that does not load is refused
/// with every problem (exit 78); the daemon keeps the configuration in force.
fn socket(g: &Globals) -> Result<Result<PathBuf, ExitCode>, Error> {
    match crate::config::load_or_default(g.config.as_deref()) {
        Ok((cfg, _)) => Ok(Ok(cfg.paths.control_socket)),
        Err(e) if is_permission_denied(&e) => Err(not_root(e)),
        Err(e) => {
            crate::logging::print_error(&e.to_string());
            crate::logging::print_error(
                "not reloaded: the running daemon keeps the configuration in force",
            );
            Ok(Err(ExitCode::from(ExitStatus::Config.code())))
        }
    }
}

/// Runs the subcommand.
pub fn run(_a: Args, g: &Globals) -> Result<ExitCode, Error> {
    let path = match socket(g)? {
        Ok(p) => p,
        Err(code) => return Ok(code),
    };
    match request(&path, &Request::Reload, REPLY_TIMEOUT, |m| println!("{m}")) {
        Ok(Reply::Done {
            ok,
            message,
            exit_code,
            ..
        }) => {
            if ok {
                println!("{message}");
            } else {
                crate::logging::print_error(&message);
            }
            Ok(ExitCode::from(exit_code))
        }
        Ok(Reply::Progress { message }) => Err(Error::Data(format!(
            "the daemon answered a reload with progress only: {message}"
        ))),
        Ok(Reply::Event { .. }) => Err(Error::Data(
            "the daemon answered a reload with an event line, not a result".into(),
        )),
        Err(ControlError::NotRunning { path }) => {
            eprintln!(
                "iser-guard: the daemon is not running (nothing listens on {}): there is no \
                 configuration to reload; it is read when the daemon starts",
                path.display()
            );
            Ok(ExitCode::from(ExitStatus::Unavailable.code()))
        }
        Err(e @ ControlError::PermissionDenied { .. }) => Err(Error::NoPermission(e.to_string())),
        Err(ControlError::Io { source, .. })
            if matches!(
                source.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            eprintln!(
                "iser-guard: the daemon did not answer the reload within {} s",
                REPLY_TIMEOUT.as_secs()
            );
            Ok(ExitCode::from(ExitStatus::TempFail.code()))
        }
        Err(e) => Err(Error::Data(e.to_string())),
    }
}
