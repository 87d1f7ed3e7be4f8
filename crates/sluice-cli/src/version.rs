//! What `sluice --version` prints: the package version and the commit it was built from
//! (recorded by the build script; "unknown" for a build with neither git nor a packaging record).

/// `0.1.0 (commit 0123456789ab)`.
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("SLUICE_COMMIT"),
    ")"
);
