//! The Redis store: every decision is one atomic script call, one round trip.
//!
//! # Layout
//! - `mod.rs` (this file): [`RedisStore`], its connection and the [`Store`] operations;
//! - [`keys`]: key names and parsing them back;
//! - [`script`]: the Lua scripts (`lua/*.lua`, concatenated at compile time) and their wire format.
//!
//! # One decision, one script call
//! The decision script (`lua/decide.lua` after `lua/prelude.lua` and one file per algorithm)
//! restates [`crate::algorithm::step`] and the algorithm modules: block/ban check, the algorithms
//! (looking only), the all-or-nothing commit, violation counting and penalty, block/ban, and a
//! reply with every outcome field — for all the limits of a request in one `EVALSHA` (reloaded on
//! `NOSCRIPT`). The arithmetic is the Rust arithmetic: integer microseconds, the same `f64`
//! formulas in the same order for the bucket algorithms, the same rounding, and floats stored with
//! `%.17g` so they round-trip. One conformance suite and a randomized differential test run the
//! memory store and this store side by side (`tests/`). [`Mode::Peek`] writes nothing.
//!
//! Time comes from Redis `TIME` (µs), so app nodes with skewed clocks agree; with
//! [`RedisOptions::clock`] set, the client's clock is sent instead (tests use a
//! [`ManualClock`](crate::ManualClock) and never sleep). Every state records its own times, so a
//! decision never depends on when Redis expires a key; expiry only frees memory.
//!
//! # Keys
//! `{prefix}:{rule}:{limit id}:{identity}:{c|b|v}`, e.g.
//! `sluice:login:ip-gcra-1m:{ip=1.2.3.4}:c` (the algorithm's state), `…:b` (block end, µs) and
//! `…:v` (violation count and when it is forgotten). The identity, already escaped by
//! [`crate::limiter::keys`] (values with `{`, `}`, `:` or longer than 64 bytes are hashed), is a
//! Redis Cluster hash tag, so the three keys of one identity share a slot.
//!
//! | algorithm | state key | type |
//! | --- | --- | --- |
//! | `sliding_log` | one member per admitted unit, score = time, members unique per µs | ZSET |
//! | `sliding_window` | field = bucket index, value = units; stale buckets deleted by the script (Redis 7.0 has no `HEXPIRE`) | HASH |
//! | `fixed_window` | `f<window start>:<count>` | string |
//! | `token_bucket` | `t<used level>:<last>` | string |
//! | `gcra` | `g<tat>` | string |
//! | `leaky_bucket` | `l<queue level>:<last>` | string |
//!
//! Every key is written with a whole-millisecond expiry (`PEXPIRE`/`SET PX`, rounded up) equal to
//! the time after which it can no longer affect a decision: the newest unit leaving the window,
//! the end of the window, the bucket being back to full, the block's end, the violations' memory.
//! A state that is already equivalent to no state is deleted instead.
//!
//! # Deployments: one server, Sentinel, Cluster
//! [`RedisStore::connect`] takes `redis://`, `redis+sentinel://` and `redis+cluster://` URLs
//! (`rediss…` for TLS; see [`url`] and [`tls`]); [`connection`] holds the one connection type
//! behind all three. On one server or a Sentinel-managed primary ([`failover`]), all the limits
//! of a request are decided in one script call, whatever their identities, so all-or-nothing
//! holds across limits. On a Cluster the keys of one limit and identity share a slot ([`slot`]),
//! and limits counted by the same identity share one too: such a request is still one script
//! call on one node. A request whose limits fall in different slots is decided by the
//! [`cross_slot`] protocol, which never admits more than any limit allows and may briefly
//! under-admit. A global limit (`by: []`) is one key, so one slot on one primary: every decision
//! of that limit goes to that primary, whose single core bounds it (see BENCHMARKS.md).
//!
//! Failover: a demoted or loading server (`READONLY`, `LOADING`, `MASTERDOWN`) is left for a
//! fresh connection, behind sentinels for the primary they name; the Cluster client follows
//! `MOVED`/`ASK` and refreshes its slot map. Meanwhile calls fail as transient errors and the
//! limiter's fail policy answers. [`Store::ping`] (readiness) succeeds only when writes would:
//! `ROLE` is `master`, and on a Cluster every slot is served and every primary answers.
//!
//! Redis replicates asynchronously: units counted on a primary in the last moments before it dies
//! and not yet copied to its replica are lost with it, so right after a failover a limit may admit
//! up to those units again. Sluice cannot see them; `WAIT` after every decision would close the
//! gap at the cost of a replica round trip per decision, and is not done.
//!
//! # Memory per key
//! Measured with `MEMORY USAGE <key> SAMPLES 0` on Redis 7.0.15 (Debian's `redis-server`, 64-bit,
//! jemalloc), key names of the shape `sluice:login:ip-<algorithm>-1m:{ip=203.0.113.9}:c`, by the
//! ignored test `memory_usage_per_algorithm`
//! (`cargo test -p sluice --features redis --test redis_memory -- --ignored --nocapture`); the
//! figures include the key name and Redis's per-key overhead:
//!
//! | state | bytes |
//! | --- | --- |
//! | `sliding_log`, 1 / 11 / 100 / 1,000 units in the window | 152 / 488 / 3,688 / 118,864 |
//! | `sliding_window`, 1 bucket / 11 buckets (the most it keeps) | 120 / 200 |
//! | `fixed_window`, `token_bucket`, `gcra`, `leaky_bucket` | 136 each |
//! | block (`:b`) / violations (`:v`) | 88 / 136 |
//!
//! A sliding log costs about 35 bytes per unit while it is a listpack (up to 128 members) and about
//! 120 bytes per unit as a skiplist beyond; prefer `gcra` or `sliding_window` for large limits.
//!
//! # Failures
//! One multiplexed connection per server ([`redis::aio::ConnectionManager`]) carries every call, pipelining concurrent
//! ones; each reply has a deadline ([`RedisOptions::response_timeout`]); a dropped connection is
//! re-established in the background by the next call. [`RedisStore::connect`] does not wait for
//! Redis: it returns at once and connects in the background, so a server can start while Redis is
//! down and degrade per its fail policy until Redis answers. Connection errors and timeouts are
//! transient [`StoreError`]s (the limiter's fail policy and breaker take over); script or type
//! errors are permanent.
//!
//! A call abandoned at the limiter's deadline may still reach Redis and run later (a paused or
//! overloaded server runs its queue when it resumes): the caller got the fail policy's answer, yet
//! the unit may be counted. Redis offers no way to cancel a sent command, and the script cannot
//! tell a late call from a timely one without a clock shared with the client, so this errs on
//! the side of counting: limits stay safe, a client may lose a unit per timed-out call.

pub mod channel;
pub mod connection;
pub mod cross_slot;
pub mod failover;
pub mod keys;
pub mod script;
pub mod slot;
pub mod tls;
pub mod url;

use std::sync::Arc;
use std::time::Duration;

use redis::{RedisError, RetryMethod, Script};

use super::{BlockEntry, LimitCall, LimitKey, Store, StoreError, StoreReply};
use crate::algorithm::Mode;
use crate::clock::{Clock, micros};
use connection::RedisConnection;
use failover::Dial;
use keys::Part;
use script::Scripts;
pub use tls::TlsOptions;
pub use url::{RedisUrl, Topology, redact};

const NAME: &str = "redis";

/// Settings of a [`RedisStore`].
#[derive(Debug, Clone)]
pub struct RedisOptions {
    /// First part of every key.
    pub prefix: String,
    /// `None`: time from Redis `TIME`; `Some`: this clock (client time).
    pub clock: Option<Arc<dyn Clock>>,
    /// Deadline for establishing a connection.
    pub connect_timeout: Duration,
    /// Deadline for one reply. The limiter's own timeout is usually shorter; this one bounds calls
    /// made outside it (admin operations) and lets the connection notice a silent server.
    pub response_timeout: Duration,
    /// The shortest expiry written to Redis. Keep it zero (every key then lives exactly as long
    /// as it can affect a decision). Only a client [`clock`](Self::clock) that runs slower than
    /// real time — a test's manual clock — needs it: Redis expires keys in real time, so without
    /// it a key could vanish while the slow clock says it still matters.
    pub min_ttl: Duration,
    /// Certificates for `rediss…` URLs.
    pub tls: TlsOptions,
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
        }
    }
}

/// Limit state in Redis. Cheap to clone (clones share the connection).
#[derive(Debug, Clone)]
pub struct RedisStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    conn: RedisConnection,
    prefix: String,
    clock: Option<Arc<dyn Clock>>,
    min_ttl_us: u64,
    scripts: Scripts,
    give_back: Script,
    /// Where the invalidation channel subscribes (see [`channel`]), and how to dial it.
    subscribe_to: Vec<redis::ConnectionInfo>,
    dial: Dial,
}

/// Maps a client error: whatever may pass by retrying later is transient.
fn store_error(e: RedisError) -> StoreError {
    let transient = e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || !matches!(e.retry_method(), RetryMethod::NoRetry);
    StoreError {
        store: NAME,
        message: e.to_string(),
        transient,
    }
}

impl RedisStore {
    /// Opens a store on `url` (see [`url`] for the shapes). Returns promptly even when Redis is
    /// down: decisions then degrade per the fail policy until it answers.
    ///
    /// An invalid URL or unreadable certificate file is a permanent error; no error message
    /// contains the URL's password.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<RedisStore, StoreError> {
        let parsed =
            RedisUrl::parse(url).map_err(|e| StoreError::permanent(NAME, e.to_string()))?;
        let dial = Dial {
            certificates: if parsed.tls {
                options.tls.certificates()?
            } else {
                None
            },
            connect_timeout: options.connect_timeout,
            response_timeout: options.response_timeout,
        };
        let subscribe_to = channel::subscription_nodes(&parsed).map_err(|e| {
            StoreError::permanent(NAME, format!("Redis client for {}: {e}", redact(url)))
        })?;
        let conn = RedisConnection::open(&parsed, dial.clone()).map_err(|e| {
            StoreError::permanent(NAME, format!("Redis client for {}: {e}", redact(url)))
        })?;
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn,
                prefix: options.prefix,
                clock: options.clock,
                min_ttl_us: micros(options.min_ttl),
                scripts: Scripts::default(),
                give_back: cross_slot::script(),
                subscribe_to,
                dial,
            }),
        };
        // Connect and load the scripts in the background; the first decisions need not wait.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let warm = store.clone();
            runtime.spawn(async move {
                if let Err(error) = warm.load_scripts().await {
                    tracing::warn!(%error, "Redis not reachable yet; decisions degrade until it is");
                }
            });
        }
        Ok(store)
    }

    /// Loads every script (also done on demand after `NOSCRIPT`).
    pub async fn load_scripts(&self) -> Result<(), StoreError> {
        let mut conn = self.inner.conn.clone();
        let s = &self.inner.scripts;
        for script in [&s.decide, &s.block, &s.unblock, &self.inner.give_back] {
            script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .map_err(store_error)?;
        }
        Ok(())
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// The Redis key of one part of a limit key's state (for inspection and tests).
    pub fn key(&self, key: &LimitKey, part: Part) -> String {
        keys::key(&self.inner.prefix, key, part)
    }

    fn client_now(&self) -> Option<u64> {
        self.inner.clock.as_ref().map(|c| c.now_us())
    }

    /// The decision time: the client clock if configured, else Redis `TIME`.
    async fn now_us(&self) -> Result<u64, StoreError> {
        if let Some(now) = self.client_now() {
            return Ok(now);
        }
        let mut conn = self.inner.conn.clone();
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(secs * 1_000_000 + micros)
    }

    /// The `EVALSHA` command, name first, that decides `calls` as [`Store::decide`] sends it. For
    /// running the decision script on its own (the load tool feeds it to `redis-benchmark` to
    /// measure Redis' ceiling for Sluice's script) and for debugging.
    pub fn decide_command(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> Result<Vec<String>, StoreError> {
        let args = script::decide_args(calls, mode, self.client_now(), self.inner.min_ttl_us)?;
        let mut command = vec![
            "EVALSHA".to_string(),
            self.inner.scripts.decide.get_hash().to_string(),
            (calls.len() * 3).to_string(),
        ];
        for call in calls {
            command.extend(keys::triple(&self.inner.prefix, &call.key));
        }
        command.extend(args);
        Ok(command)
    }

    async fn decide_calls(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> Result<StoreReply, StoreError> {
        let args = script::decide_args(calls, mode, self.client_now(), self.inner.min_ttl_us)?;
        let mut invocation = self.inner.scripts.decide.prepare_invoke();
        for call in calls {
            for key in keys::triple(&self.inner.prefix, &call.key) {
                invocation.key(key);
            }
        }
        for arg in args {
            invocation.arg(arg);
        }
        let mut conn = self.inner.conn.clone();
        let reply: Vec<i64> = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)?;
        let (now_us, outcomes) = script::parse_reply(&reply, calls.len())?;
        Ok(StoreReply { now_us, outcomes })
    }

    /// Every key matching `pattern`: one `SCAN` over the server, or over each Cluster primary.
    async fn scan(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let conn = &self.inner.conn;
        let nodes = conn.cluster_primaries().await.map_err(store_error)?;
        let targets: Vec<Option<(String, u16)>> = if conn.is_cluster() {
            nodes.into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        let mut found = Vec::new();
        for target in targets {
            let mut cursor: u64 = 0;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let reply = match &target {
                    Some((host, port)) => conn.on_node(cmd, host, *port).await,
                    None => cmd.query_async(&mut conn.clone()).await,
                };
                let (next, batch): (u64, Vec<String>) = reply
                    .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
                    .map_err(store_error)?;
                found.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(found)
    }

    async fn blocks_of(&self, rule: &str) -> Result<Vec<BlockEntry>, StoreError> {
        let pattern = keys::block_pattern(&self.inner.prefix, rule);
        let mut conn = self.inner.conn.clone();
        let mut found = self.scan(&pattern).await?;
        found.sort();
        found.dedup();
        let now = self.now_us().await?;
        let mut out = Vec::new();
        for chunk in found.chunks(500) {
            let values: Vec<Option<u64>> = if conn.is_cluster() {
                let gets = chunk.iter().map(|key| {
                    let mut conn = conn.clone();
                    async move { redis::cmd("GET").arg(key).query_async(&mut conn).await }
                });
                futures::future::join_all(gets)
                    .await
                    .into_iter()
                    .collect::<Result<_, _>>()
                    .map_err(store_error)?
            } else {
                let mut pipe = redis::pipe();
                for key in chunk {
                    pipe.get(key);
                }
                pipe.query_async(&mut conn).await.map_err(store_error)?
            };
            for (key, until) in chunk.iter().zip(values) {
                let (Some(until), Some(k)) =
                    (until, keys::parse_block_key(&self.inner.prefix, rule, key))
                else {
                    continue;
                };
                if until > now {
                    out.push(BlockEntry {
                        key: k,
                        until_us: until,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}

impl Store for RedisStore {
    fn name(&self) -> &'static str {
        NAME
    }

    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        if self.inner.conn.is_cluster() {
            let groups = cross_slot::groups(&self.inner.prefix, calls);
            if groups.len() > 1 {
                return self.decide_across_slots(calls, &groups, mode).await;
            }
        }
        self.decide_calls(calls, mode).await
    }

    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let names: Vec<String> = keys
            .iter()
            .flat_map(|k| keys::triple(&self.inner.prefix, k))
            .collect();
        let mut conn = self.inner.conn.clone();
        if conn.is_cluster() {
            // One DEL per identity (its three keys share a slot), each routed to its node.
            let deletes = names.chunks(3).map(|triple| {
                let mut conn = conn.clone();
                async move {
                    redis::cmd("DEL")
                        .arg(triple)
                        .query_async::<()>(&mut conn)
                        .await
                }
            });
            for result in futures::future::join_all(deletes).await {
                result.map_err(store_error)?;
            }
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for triple in names.chunks(3) {
            pipe.del(triple).ignore();
        }
        pipe.query_async::<()>(&mut conn).await.map_err(store_error)
    }

    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<u64, StoreError> {
        let mut conn = self.inner.conn.clone();
        self.inner
            .scripts
            .block
            .key(self.key(key, Part::Block))
            .arg(
                self.client_now()
                    .map_or_else(String::new, |n| n.to_string()),
            )
            .arg(micros(duration))
            .arg(self.inner.min_ttl_us)
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)
    }

    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        let mut conn = self.inner.conn.clone();
        let was: i64 = self
            .inner
            .scripts
            .unblock
            .key(self.key(key, Part::Block))
            .key(self.key(key, Part::Violations))
            .arg(
                self.client_now()
                    .map_or_else(String::new, |n| n.to_string()),
            )
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(was == 1)
    }

    async fn blocks(&self, rule: &str) -> Result<Vec<BlockEntry>, StoreError> {
        self.blocks_of(rule).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner
            .conn
            .writable()
            .await
            .map_err(|message| StoreError::transient(NAME, message))
    }
}
