//! The `sluice` command: the decision service (`serve`), rule file checks (`validate`),
//! one-off decisions (`check`), the load tool (`bench`), and the simulator (`simulate`).
//!
//! Exit codes: 0 success (valid file, allowed request), 1 a negative answer (invalid file,
//! denied request), 2 an error (unreadable file, store unreachable, port in use).
//!
//! # Layout
//! - [`cli`]: the command line (clap);
//! - [`logging`]: `tracing` output, text or JSON;
//! - [`store_url`]: a store from its URL;
//! - [`validate`], [`check`]: the one-shot commands; [`bench`]: the load tool;
//! - [`simulate`]: traffic replayed on a simulated clock, with an accuracy report and plots;
//! - [`server`]: the HTTP service, its admin endpoints, hot reload and metrics;
//! - [`gateway`]: Envoy's rate-limit service (gRPC) and the forward-auth endpoint.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod bench;
pub mod check;
pub mod cli;
pub mod gateway;
pub mod logging;
pub mod server;
pub mod simulate;
pub mod store_url;
pub mod validate;

use std::process::ExitCode;

use cli::{Cli, Command};

/// Exit code of a failed command (as opposed to a negative answer, 1).
pub const EXIT_ERROR: u8 = 2;

/// Runs a parsed command line to completion.
pub fn run(cli: Cli) -> ExitCode {
    if let Err(error) = logging::init(&cli.log) {
        eprintln!("error: {error:#}");
        return ExitCode::from(EXIT_ERROR);
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Command::Bench(crate::bench::BenchArgs {
        threads: Some(threads),
        ..
    }) = &cli.command
    {
        runtime.worker_threads((*threads).max(1));
    }
    let runtime = match runtime.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("error: cannot start the async runtime: {error}");
            return ExitCode::from(EXIT_ERROR);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => server::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Validate(args) => Ok(validate::run(&args)),
            Command::Check(args) => check::run(args).await,
            Command::Bench(args) => bench::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Simulate(args) => simulate::run(*args).await.map(|()| ExitCode::SUCCESS),
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            tracing::error!("{error:#}");
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
