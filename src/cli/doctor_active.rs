//! `iser-guard doctor --active DEVICE`.

use std::process::ExitCode;

use super::Globals;
use crate::error::Error;

/// Runs `doctor --active`.
pub fn run(
    _device: &str,
    _args: &super::doctor::Args,
    _globals: &Globals,
) -> Result<ExitCode, Error> {
    Err(Error::Usage("not yet".into()))
}
