//! The service under fire: a long store outage under steady load, and a soak with recurring
//! faults. They bound latencies and watch memory, so they run in a binary of their own, one at a
//! time, rather than beside the other tests' load.
//!
//! Run with `cargo test -p sluice-ratelimit-cli --test fire`; `SLUICE_OUTAGE_SECS` and `SLUICE_SOAK_SECS`
//! lengthen them (see `scripts/reliability` and `scripts/soak`).

#[path = "../it/common/mod.rs"]
mod common;
mod outage;
mod soak;

/// One test at a time: the bounds are on the service's answers, and two loads at once on two
/// cores measure the machine instead.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The service process' resident memory (kB) and open files.
fn resources(pid: u32) -> (u64, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
    (rss, fds)
}
