//! [`RedisOptions`]: how a [`RedisStore`](super::RedisStore) names its keys, tells the time,
//! waits for Redis, and bounds its admin listings.

use std::sync::Arc;
use std::time::Duration;

use super::TlsOptions;
use super::admin;
use crate::clock::Clock;

/// Settings of a [`RedisStore`](super::RedisStore).
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// First part of every key.
    pub prefix: String,
    /// `None`: time from Redis `TIME`; `Some`: this clock (client time).
    pub clock: Option<Arc<dyn Clock>>,
    /// Deadline for establishing a connection.
    pub connect_timeout: Duration,
    /// Deadline for one reply. It bounds calls made outside the limiter's own timeout (admin
    /// operations) and lets the connection notice a silent server. Keep it at least the
    /// limiter's [`timeout`](crate::Options::timeout): a shorter one cuts every decision to it.
    pub response_timeout: Duration,
    /// The shortest expiry written to Redis. Keep it zero (every key then lives exactly as long
    /// as it can affect a decision). Only a client [`clock`](Self::clock) that runs slower than
    /// real time — a test's manual clock — needs it: Redis expires keys in real time, so without
    /// it a key could vanish while the slow clock says it still matters.
    pub min_ttl: Duration,
    /// Certificates for `rediss…` URLs.
    pub tls: TlsOptions,
    /// How long one page of a block listing ([`Store::blocks`](crate::Store::blocks)) scans before it returns what it
    /// found with a cursor, however few entries that is: an admin call never holds Redis (or the
    /// caller) for long, whatever the number of keys.
    pub list_budget: Duration,
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "sluice".into(),
            clock: None,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            min_ttl: Duration::ZERO,
            tls: TlsOptions::default(),
            list_budget: admin::LIST_BUDGET,
        }
    }
}
