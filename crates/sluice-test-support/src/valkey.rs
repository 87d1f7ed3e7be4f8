//! Where the Valkey binaries are: Valkey, the Linux Foundation's fork of Redis 7.2, speaks the
//! same protocol, scripts and functions, and the store is tested on it beside Redis.
//!
//! The server is `SLUICE_VALKEY_SERVER` when set, else `../shared/stores/valkey-server` from the
//! repository's root (Valkey 8.0, built for the test machines; Debian 12 ships no package). The
//! client is `valkey-cli` beside it. A missing binary fails the test with the path it looked at,
//! never a silent skip.

use std::path::PathBuf;

/// The variable naming the `valkey-server` binary to test with.
pub const SERVER_VAR: &str = "SLUICE_VALKEY_SERVER";

/// The `valkey-server` binary.
///
/// # Panics
/// If it is not an existing file: the Valkey tests cannot run without it.
pub fn server() -> PathBuf {
    let path = std::env::var_os(SERVER_VAR).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/stores/valkey-server"),
        PathBuf::from,
    );
    assert!(
        path.is_file(),
        "valkey-server is not at {}: the Valkey tests need it. Set {SERVER_VAR} to a \
         valkey-server binary (Valkey 7.2 or later), or put one at ../shared/stores/ beside the \
         repository.",
        path.display()
    );
    path
}

/// The `valkey-cli` binary beside [`server`].
///
/// # Panics
/// As [`server`], or if `valkey-cli` is not beside it.
pub fn cli() -> PathBuf {
    let server = server();
    let cli = server.with_file_name("valkey-cli");
    assert!(
        cli.is_file(),
        "valkey-cli is not beside {}: tests that inspect keys need it",
        server.display()
    );
    cli
}
