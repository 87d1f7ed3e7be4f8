//! The `sluice` binary: see [`sluice_cli`] for the commands.

use clap::Parser;

// The service allocates per request (parsing, the response); mimalloc's thread-local free lists
// cost less per request than glibc's malloc under the service's load.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    sluice_cli::run(sluice_cli::cli::Cli::parse())
}
