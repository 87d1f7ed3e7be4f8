//! The `sluice` binary: see [`sluice_cli`] for the commands.

use clap::Parser;

fn main() -> std::process::ExitCode {
    sluice_cli::run(sluice_cli::cli::Cli::parse())
}

// The service allocates a little for every request (request parts, bodies, the Redis client's
// buffers); jemalloc's thread caches make that cheaper than glibc's malloc, and it keeps the peak
// memory of refusing a hostile rule file within what SECURITY.md promises (mimalloc did not).
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;
