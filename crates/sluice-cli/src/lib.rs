//! The `sluice` command: the decision service (`serve`), rule file checks (`validate`),
//! one-off decisions (`check`), run-time limits and usage on a running service (`limits`,
//! `usage`), the load tool
//! (`bench`), the simulator (`simulate`), and imports of other rate limiters' configurations
//! (`import`).
//!
//! Exit codes: 0 success (valid file, allowed request), 1 a negative answer (invalid file,
//! denied request), 2 an error (unreadable file, store unreachable, port in use), 3 a decision
//! the fail policy made because the store did not answer (`check`).
//!
//! An error is reported once: `serve` logs it (its logs may be JSON read by a collector), the
//! one-shot commands print it on standard error.
//!
//! # Layout
//! - [`cli`]: the command line (clap);
//! - [`logging`]: `tracing` output, text or JSON;
//! - [`validate`], [`check`]: the one-shot commands; [`limits`]: run-time limits on a running
//!   service; [`usage`]: an identity's usage on one; [`service`]: asking a running service;
//!   [`bench`](mod@bench): the load tool;
//! - [`import`](mod@import): envoyproxy/ratelimit and Limitador configurations → rule files;
//! - [`completions`], [`manual`], [`version`]: shell completions, manual pages and the version
//!   line, generated from the command line's definition and the build; `schema` prints the rule
//!   file's JSON Schema ([`sluice_server::config::schema`]).
//!
//! `serve` hands over to [`sluice_server`] (the service, its gateways and rule files), and
//! `simulate` to [`sluice_simulate`].
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod bench;
pub mod check;
pub mod cli;
pub mod completions;
pub mod import;
pub mod limits;
pub mod logging;
pub mod manual;
pub mod service;
pub mod stdout;
pub mod usage;
pub mod validate;
pub mod version;

use std::process::ExitCode;

use cli::{Cli, Command};

/// Exit code of a failed command (as opposed to a negative answer, 1).
pub const EXIT_ERROR: u8 = 2;

/// Most ready sockets a `serve` worker takes from one poll of the I/O driver (tokio's default is
/// 1024). The worker that polls queues every socket it takes on itself; when the OS preempts it,
/// which a busy machine does every few milliseconds, those requests wait for it while the other
/// workers may be idle. Taking a few at a time leaves the rest to the next worker that polls. On
/// two cores shared with `wrk -t2 -c50` (10k identities, then one), at the same throughput, p99
/// read 2.2–2.7 ms in three runs each where tokio's default read 2.4–4.1 ms.
const SERVE_IO_EVENTS_PER_TICK: usize = 16;

/// Runs a parsed command line to completion.
pub fn run(cli: Cli) -> ExitCode {
    // Generated text for the terminal or a file: no logging, no runtime.
    match &cli.command {
        Command::Completions(args) => {
            return finish(completions::run(args, &mut stdout::Stdout).map_err(Into::into));
        }
        Command::Man(args) => return finish(manual::run(args, &mut stdout::Stdout)),
        Command::Import(args) => return import::run(args),
        Command::Schema => {
            return finish(
                std::io::Write::write_all(
                    &mut stdout::Stdout,
                    sluice_server::config::schema_json().as_bytes(),
                )
                .map_err(Into::into),
            );
        }
        _ => {}
    }
    if let Err(error) = logging::init(&cli.log) {
        eprintln!("error: {error:#}");
        return ExitCode::from(EXIT_ERROR);
    }
    let mut runtime = tokio::runtime::Builder::new_multi_thread();
    if let Command::Serve(_) = &cli.command {
        runtime.max_io_events_per_tick(SERVE_IO_EVENTS_PER_TICK);
    }
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
    let serving = matches!(cli.command, Command::Serve(_));
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Serve(args) => sluice_server::run(args.into())
                .await
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from),
            Command::Validate(args) => Ok(validate::run(&args)?),
            Command::Check(args) => check::run(args).await,
            Command::Bench(args) => bench::run(args).await.map(|()| ExitCode::SUCCESS),
            Command::Limits(args) => limits::run(args).await,
            Command::Usage(args) => usage::run(args).await,
            Command::Simulate(args) => sluice_simulate::run(*args, &mut stdout::Stdout)
                .await
                .map(|()| ExitCode::SUCCESS)
                .map_err(anyhow::Error::from),
            Command::Completions(_) | Command::Man(_) | Command::Import(_) | Command::Schema => {
                Ok(ExitCode::SUCCESS)
            }
        }
    });
    match result {
        Ok(code) => code,
        Err(error) => {
            if serving {
                tracing::error!("{error:#}");
            } else {
                eprintln!("error: {error:#}");
            }
            ExitCode::from(EXIT_ERROR)
        }
    }
}

/// Exit 0, or 2 with the error on standard error.
fn finish(result: anyhow::Result<()>) -> ExitCode {
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(EXIT_ERROR)
        }
    }
}
