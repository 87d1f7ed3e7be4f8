//! `sluice completions <shell>`: the completion script of a shell, generated from the command
//! line's own definition, so it never lags behind a new flag.

use std::io::Write;

use clap::CommandFactory;

use crate::cli::{Cli, CompletionsArgs};

/// Writes the script for `args.shell` to `out`.
pub fn run(args: &CompletionsArgs, out: &mut impl Write) -> std::io::Result<()> {
    let mut command = Cli::command();
    clap_complete::generate(args.shell, &mut command, "sluice", out);
    out.flush()
}
