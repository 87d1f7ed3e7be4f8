//! What `sluice --version` prints: the package version and the commit it was built from — the
//! commit `sluice_build_info` carries, recorded once by `sluice-server`'s build script ("unknown"
//! for a build with neither git, a packaging record nor `SLUICE_BUILD_COMMIT`).

use std::sync::OnceLock;

/// `0.1.0 (commit 0123456789ab)`.
pub fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let (version, commit) = sluice_server::metrics::build_info();
        format!("{version} (commit {})", commit.unwrap_or("unknown"))
    })
}
