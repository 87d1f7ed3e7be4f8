//! Shared helpers of the integration tests: one harness per store on a shared manual clock
//! ([`Harness`], a conformance subject), a store that is down ([`DownStore`]), serving an app
//! over HTTP ([`serve`]), and the seeded randomness of the differential tests (`seeded`).
//!
//! `Harness::memory()` and `Harness::redis()` build the same thing — a store, its clock, and a
//! limiter over it — so one test body runs against both.
#![allow(dead_code)]

mod down_store;
#[cfg(feature = "conformance")]
mod harness;
#[cfg(feature = "tower")]
mod http;
#[cfg(feature = "redis")]
pub mod load;
#[cfg(all(feature = "redis", feature = "conformance"))]
pub mod marked;
pub mod remote;
pub mod seeded;

#[allow(unused_imports)]
pub use down_store::DownStore;
#[cfg(feature = "conformance")]
#[allow(unused_imports)]
pub use harness::Harness;
#[cfg(feature = "tower")]
#[allow(unused_imports)]
pub use http::serve;
#[cfg(feature = "conformance")]
#[allow(unused_imports)]
pub use sluice::conformance::{S, call, key, step};

use std::sync::Arc;
use std::time::Duration;

#[cfg(feature = "redis")]
use sluice::ManualClock;
#[cfg(feature = "redis")]
use sluice_test_support::RedisServer;

/// The `reason` of a decision answered by a node's denial cache (what callers and the service's
/// JSON see).
pub const CACHED: &str = "denied by the denial cache: the store denied this request and it cannot \
pass yet; limits other than the denying one were not consulted";

/// The `command` calls Redis answered without an error (a script's first call may find it not
/// loaded yet: `NOSCRIPT`, then the same call again), since it started or since `CONFIG RESETSTAT`.
#[cfg(feature = "redis")]
pub fn answered(server: &RedisServer, command: &str) -> u64 {
    answered_in(&server.cli(&["INFO", "commandstats"]), command)
}

/// [`answered`], read from the text of `INFO commandstats`.
pub fn answered_in(stats: &str, command: &str) -> u64 {
    let line = stats
        .lines()
        .find_map(|l| l.strip_prefix(&format!("cmdstat_{command}:")))
        .unwrap_or("calls=0,failed_calls=0");
    let field = |name: &str| -> u64 {
        line.split(',')
            .find_map(|f| f.strip_prefix(name))
            .map_or(0, |n| n.parse().expect("a count"))
    };
    field("calls=") - field("failed_calls=")
}

/// A Redis store on `server` with an optional client clock. With a manual clock, keys live at
/// least an hour of real time, so Redis never expires a key the manual clock still needs.
#[cfg(feature = "redis")]
pub async fn redis_store(
    server: &RedisServer,
    clock: Option<ManualClock>,
) -> sluice::store::redis::RedisStore {
    url_store(&server.url(), clock, "sluice").await
}

/// Redis' own clock, from `TIME`.
#[cfg(feature = "redis")]
pub fn redis_now(server: &RedisServer) -> sluice::Micros {
    let time = server.cli(&["TIME"]);
    let mut parts = time.lines().map(|p| p.trim().parse::<u64>().expect("TIME"));
    let (secs, micros) = (parts.next().expect("seconds"), parts.next().expect("µs"));
    sluice::Micros::from_secs(secs) + sluice::Micros::new(micros)
}

/// A key prefix no other test of this process uses (tests sharing a cluster keep apart).
pub fn unique_prefix() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "t{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A Redis store on any Redis URL, with `prefix` and an optional client clock (see
/// [`redis_store`]).
#[cfg(feature = "redis")]
pub async fn url_store(
    url: &str,
    clock: Option<ManualClock>,
    prefix: &str,
) -> sluice::store::redis::RedisStore {
    use sluice::store::redis::{RedisOptions, RedisStore};
    let min_ttl = if clock.is_some() {
        Duration::from_secs(3600)
    } else {
        Duration::ZERO
    };
    let store = RedisStore::connect(
        url,
        RedisOptions {
            prefix: prefix.to_string(),
            clock: clock.map(|c| Arc::new(c) as Arc<dyn sluice::Clock>),
            min_ttl,
            ..RedisOptions::default()
        },
    )
    .await
    .expect("a valid URL connects");
    // Tests count Redis' commands: the start-up's own must be done before they start counting.
    store.started().await;
    store
}
