//! Shared helpers of the integration tests: one harness per store on a shared manual clock, a
//! store that is down ([`DownStore`]), and serving an app over HTTP ([`serve`]).
//!
//! `Harness::memory()` and `Harness::redis()` build the same thing — a store, its clock, and a
//! limiter over it — so one test body runs against both.
#![allow(dead_code)]

mod down_store;
#[cfg(feature = "tower")]
mod http;
#[cfg(feature = "redis")]
pub mod load;

#[allow(unused_imports)]
pub use down_store::DownStore;
#[cfg(feature = "tower")]
#[allow(unused_imports)]
pub use http::serve;

use std::sync::Arc;
use std::time::Duration;

use sluice::algorithm::{LimitOutcome, LimitStep, Mode, Params};
use sluice::model::Algorithm;
use sluice::store::{LimitCall, LimitKey, StoreReply};
use sluice::{DynStore, Limiter, ManualClock, MemoryStore, Options, Rule};
#[cfg(feature = "redis")]
use sluice_test_support::RedisServer;

/// Microseconds per second.
pub const S: u64 = 1_000_000;

/// A store under test with its clock (and its Redis server, if any).
pub struct Harness {
    /// The clock every decision reads.
    pub clock: ManualClock,
    /// The store.
    pub store: Arc<dyn DynStore>,
    /// The Redis server behind the store, if it is the Redis store.
    #[cfg(feature = "redis")]
    pub server: Option<RedisServer>,
}

impl Harness {
    /// The memory store on a manual clock.
    pub fn memory() -> Harness {
        let clock = ManualClock::at_2026();
        Harness {
            store: Arc::new(MemoryStore::with_clock(Arc::new(clock.clone()))),
            clock,
            #[cfg(feature = "redis")]
            server: None,
        }
    }

    /// The Redis store on its own server and a manual clock.
    #[cfg(feature = "redis")]
    pub async fn redis() -> Harness {
        let server = RedisServer::start();
        let clock = ManualClock::at_2026();
        let store = redis_store(&server, Some(clock.clone())).await;
        Harness {
            store: Arc::new(store),
            clock,
            server: Some(server),
        }
    }

    /// The Redis store on the shared Redis Cluster of this test binary (its own key prefix).
    #[cfg(feature = "redis")]
    pub async fn cluster() -> Harness {
        let url = sluice_test_support::RedisCluster::shared().url();
        Harness::on_url(&url).await
    }

    /// The Redis store on the shared Sentinel set-up of this test binary (its own key prefix).
    #[cfg(feature = "redis")]
    pub async fn sentinel() -> Harness {
        let url = sluice_test_support::RedisSentinel::shared().url();
        Harness::on_url(&url).await
    }

    #[cfg(feature = "redis")]
    async fn on_url(url: &str) -> Harness {
        let clock = ManualClock::at_2026();
        let store = url_store(url, Some(clock.clone()), &unique_prefix()).await;
        Harness {
            store: Arc::new(store),
            clock,
            server: None,
        }
    }

    /// The Redis server (Redis harnesses only).
    #[cfg(feature = "redis")]
    pub fn server(&self) -> &RedisServer {
        self.server.as_ref().expect("a Redis harness has a server")
    }

    /// A limiter over the store with a generous timeout (decisions must not degrade here).
    pub fn limiter(&self, rules: Vec<(&str, Rule)>) -> Limiter {
        self.limiter_with(
            rules,
            Options {
                timeout: Duration::from_secs(5),
                max_attribute_len: 16 * 1024,
                ..Options::default()
            },
        )
    }

    /// A limiter over the store with these options.
    pub fn limiter_with(&self, rules: Vec<(&str, Rule)>, options: Options) -> Limiter {
        Limiter::builder(self.store.clone())
            .rules(rules.into_iter().map(|(n, r)| (n.to_string(), r)))
            .clock(Arc::new(self.clock.clone()))
            .options(options)
            .build()
            .expect("test rules are valid")
    }

    /// Moves the clock forward by `us` microseconds.
    pub fn advance_us(&self, us: u64) {
        self.clock.advance(Duration::from_micros(us));
    }

    /// The clock's time.
    pub fn now_us(&self) -> u64 {
        sluice::Clock::now_us(&self.clock)
    }

    /// Decides through the store directly.
    pub async fn decide(&self, calls: &[LimitCall], mode: Mode) -> StoreReply {
        self.store
            .decide(calls, mode)
            .await
            .expect("the store answers")
    }

    /// Decides one call through the store directly and returns its outcome.
    pub async fn one(&self, call: &LimitCall) -> LimitOutcome {
        self.decide(std::slice::from_ref(call), Mode::Apply)
            .await
            .outcomes[0]
    }
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
    RedisStore::connect(
        url,
        RedisOptions {
            prefix: prefix.to_string(),
            clock: clock.map(|c| Arc::new(c) as Arc<dyn sluice::Clock>),
            min_ttl,
            ..RedisOptions::default()
        },
    )
    .await
    .expect("a valid URL connects")
}

/// A key for direct store calls.
pub fn key(limit: &str, identity: &str) -> LimitKey {
    LimitKey {
        rule: "r".into(),
        limit_id: limit.into(),
        identity: identity.into(),
    }
}

/// A plain step: `limit` per `window_us`, capacity `limit`, cost 1, not shadow.
pub fn step(algorithm: Algorithm, limit: u64, window_us: u64) -> LimitStep {
    LimitStep {
        algorithm,
        params: Params::new(limit, window_us, limit),
        cost: 1,
        block_us: None,
        penalty: None,
        shadow: false,
    }
}

/// A call on `key(limit_id, "ip=1")`.
pub fn call(limit_id: &str, step: LimitStep) -> LimitCall {
    LimitCall {
        key: key(limit_id, "ip=1"),
        step,
    }
}
