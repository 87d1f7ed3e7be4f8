//! The `sluice` binary: see [`sluice_cli`] for the commands.

use clap::Parser;

fn main() -> std::process::ExitCode {
    sluice_cli::run(sluice_cli::cli::Cli::parse())
}
