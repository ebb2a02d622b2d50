//! `iser-guard daemon`.

use std::process::ExitCode;

use super::Globals;
use crate::error::Error;

/// Arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Runs the subcommand.
pub fn run(_args: Args, _globals: &Globals) -> Result<ExitCode, Error> {
    Err(Error::Usage(
        "`daemon` is not available in this build yet".into(),
    ))
}
