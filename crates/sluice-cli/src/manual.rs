//! `sluice man`: manual pages in roff, generated from the command line's own definition (its
//! help texts, flags and environment variables), so the page says what `--help` says.

use std::io::Write;

use anyhow::Context;
use clap::CommandFactory;

use crate::cli::{Cli, ManArgs};

/// Prints `sluice.1` to `out`, or writes `sluice.1` and one page per command into `args.dir`.
pub fn run(args: &ManArgs, out: &mut impl Write) -> anyhow::Result<()> {
    let command = Cli::command();
    match &args.dir {
        None => {
            clap_mangen::Man::new(command)
                .render(out)
                .context("cannot write the manual page")?;
            out.flush().context("cannot write the manual page")
        }
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("cannot write the manual pages into {}", dir.display()))
        }
    }
}
