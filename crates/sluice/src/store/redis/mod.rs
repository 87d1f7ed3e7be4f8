//! The Redis store: every decision one atomic script call.

use std::sync::Arc;
use std::time::Duration;

use super::{BlockEntry, BoxFuture, LimitCall, LimitKey, Store, StoreError, StoreReply};
use crate::algorithm::Mode;
use crate::clock::Clock;

/// Settings of a [`RedisStore`].
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// First part of every key.
    pub prefix: String,
    /// `None`: time from Redis `TIME`; `Some`: this clock (client time).
    pub clock: Option<Arc<dyn Clock>>,
    /// Deadline for establishing a connection.
    pub connect_timeout: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "sluice".into(),
            clock: None,
            connect_timeout: Duration::from_secs(1),
        }
    }
}

/// Limit state in Redis.
#[derive(Debug, Clone)]
pub struct RedisStore {}

impl RedisStore {
    /// Opens a store on `url` (`redis://host:port/db`, `rediss://...`). Returns promptly even when
    /// Redis is down: decisions then degrade per the fail policy until it answers.
    pub async fn connect(_url: &str, _options: RedisOptions) -> Result<RedisStore, StoreError> {
        Err(StoreError::permanent(
            "redis",
            "the Redis store is being built",
        ))
    }
}

impl Store for RedisStore {
    fn name(&self) -> &'static str {
        "redis"
    }
    fn decide<'a>(
        &'a self,
        _calls: &'a [LimitCall],
        _mode: Mode,
    ) -> BoxFuture<'a, Result<StoreReply, StoreError>> {
        unimplemented!()
    }
    fn reset<'a>(&'a self, _keys: &'a [LimitKey]) -> BoxFuture<'a, Result<(), StoreError>> {
        unimplemented!()
    }
    fn block<'a>(&'a self, _key: &'a LimitKey, _d: u64) -> BoxFuture<'a, Result<u64, StoreError>> {
        unimplemented!()
    }
    fn unblock<'a>(&'a self, _key: &'a LimitKey) -> BoxFuture<'a, Result<bool, StoreError>> {
        unimplemented!()
    }
    fn blocks<'a>(&'a self, _rule: &'a str) -> BoxFuture<'a, Result<Vec<BlockEntry>, StoreError>> {
        unimplemented!()
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        unimplemented!()
    }
}
