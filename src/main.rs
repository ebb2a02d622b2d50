//! The `iser-guard` binary: parse the command line, run, map errors to exit codes.

use std::process::ExitCode;

fn main() -> ExitCode {
    iser_guard::cli::main()
}
