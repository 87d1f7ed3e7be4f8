//! Log output: `tracing` events to standard error, filtered by `--log-level` / `RUST_LOG`, as
//! text or one JSON object per line.
//!
//! Standard output is kept for command results (`check`'s JSON, `validate`'s summary), so logs
//! never mix into something a script parses.

use std::io::IsTerminal;

use anyhow::Context;
use tracing_subscriber::EnvFilter;

use crate::cli::{LogArgs, LogFormat};

/// Installs the global subscriber.
pub fn init(args: &LogArgs) -> anyhow::Result<()> {
    let filter = EnvFilter::try_new(&args.log_level)
        .with_context(|| format!("--log-level `{}` is not a level or filter", args.log_level))?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let installed = match args.log_format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
    installed.map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}
