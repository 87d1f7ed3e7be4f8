//! [`Harness`]: the conformance [`Subject`] of one store, plus the Redis server behind it (if
//! any) for tests that look into Redis or stop it.

use std::ops::Deref;
use std::sync::Arc;

use sluice::conformance::Subject;
use sluice::{ManualClock, MemoryStore};
#[cfg(feature = "redis")]
use sluice_test_support::RedisServer;

/// A store under test with its clock (and its Redis server, if any).
pub struct Harness {
    /// The store and its clock.
    pub subject: Subject,
    /// The Redis server behind the store, if it is the Redis store on its own server.
    #[cfg(feature = "redis")]
    pub server: Option<RedisServer>,
}

impl Deref for Harness {
    type Target = Subject;
    fn deref(&self) -> &Subject {
        &self.subject
    }
}

impl AsRef<Subject> for Harness {
    fn as_ref(&self) -> &Subject {
        &self.subject
    }
}

impl Harness {
    fn of(subject: Subject) -> Harness {
        Harness {
            subject,
            #[cfg(feature = "redis")]
            server: None,
        }
    }

    /// The memory store on a manual clock.
    pub fn memory() -> Harness {
        let clock = ManualClock::at_2026();
        let store = MemoryStore::with_clock(Arc::new(clock.clone()));
        Harness::of(Subject::new(Arc::new(store), clock))
    }

    /// The Redis store on its own server and a manual clock.
    #[cfg(feature = "redis")]
    pub async fn redis() -> Harness {
        Harness::on_server(RedisServer::start()).await
    }

    /// The Redis store on its own `valkey-server`.
    #[cfg(feature = "redis")]
    pub async fn valkey() -> Harness {
        Harness::on_server(RedisServer::start_valkey()).await
    }

    #[cfg(feature = "redis")]
    async fn on_server(server: RedisServer) -> Harness {
        let clock = ManualClock::at_2026();
        let store = super::redis_store(&server, Some(clock.clone())).await;
        Harness {
            subject: Subject::new(Arc::new(store), clock),
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
        let store = super::url_store(url, Some(clock.clone()), &super::unique_prefix()).await;
        Harness::of(Subject::new(Arc::new(store), clock))
    }

    /// The Redis server (Redis harnesses only).
    #[cfg(feature = "redis")]
    pub fn server(&self) -> &RedisServer {
        self.server.as_ref().expect("a Redis harness has a server")
    }
}
