//! Manual recovery commands: `recover`, `reset-device`, `reconnect`, `pause`, `resume`.

use std::process::ExitCode;

use super::Globals;
use crate::error::Error;

/// `recover` arguments.
#[derive(Debug, clap::Args)]
pub struct RecoverArgs {}
/// `reset-device` arguments.
#[derive(Debug, clap::Args)]
pub struct ResetDeviceArgs {}
/// `reconnect` arguments.
#[derive(Debug, clap::Args)]
pub struct ReconnectArgs {}
/// `pause` / `resume` arguments.
#[derive(Debug, clap::Args)]
pub struct PauseArgs {}

fn unavailable(what: &str) -> Error {
    Error::Usage(format!("`{what}` is not available in this build yet"))
}

/// `iser-guard recover`.
pub fn recover(_a: RecoverArgs, _g: &Globals) -> Result<ExitCode, Error> {
    Err(unavailable("recover"))
}
/// `iser-guard reset-device`.
pub fn reset_device(_a: ResetDeviceArgs, _g: &Globals) -> Result<ExitCode, Error> {
    Err(unavailable("reset-device"))
}
/// `iser-guard reconnect`.
pub fn reconnect(_a: ReconnectArgs, _g: &Globals) -> Result<ExitCode, Error> {
    Err(unavailable("reconnect"))
}
/// `iser-guard pause` / `resume`.
pub fn pause(_a: PauseArgs, _g: &Globals, _pause: bool) -> Result<ExitCode, Error> {
    Err(unavailable("pause/resume"))
}
