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
//! # Multi-limit rules and Redis Cluster
//! This store talks to one Redis (a standalone server, or the primary of a replicated one) through
//! `redis://` or `rediss://` URLs; all the limits of a request are decided in one script call,
//! whatever their identities, so all-or-nothing holds across limits. Cluster URLs are refused by
//! [`RedisStore::connect`] with a clear error. The key layout is ready for Cluster: the keys of
//! one limit and identity share a slot; limits of one rule share a slot when they count by the
//! same identity.
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
//! One multiplexed connection ([`ConnectionManager`]) carries every call, pipelining concurrent
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
pub mod keys;
pub mod script;

use std::sync::Arc;
use std::time::Duration;

use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{RedisError, RetryMethod};

use super::{BlockEntry, BoxFuture, LimitCall, LimitKey, Store, StoreError, StoreReply};
use crate::algorithm::Mode;
use crate::clock::Clock;
use keys::Part;
use script::Scripts;

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
}

impl Default for RedisOptions {
    fn default() -> Self {
        RedisOptions {
            prefix: "sluice".into(),
            clock: None,
            connect_timeout: Duration::from_secs(1),
            response_timeout: Duration::from_secs(1),
            min_ttl: Duration::ZERO,
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
    conn: ConnectionManager,
    prefix: String,
    clock: Option<Arc<dyn Clock>>,
    min_ttl_us: u64,
    scripts: Scripts,
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
    /// Opens a store on `url` (`redis://host:port/db`, `rediss://...`). Returns promptly even when
    /// Redis is down: decisions then degrade per the fail policy until it answers.
    ///
    /// An unparsable URL, or a Redis Cluster URL (not supported, see the module docs), is a
    /// permanent error.
    pub async fn connect(url: &str, options: RedisOptions) -> Result<RedisStore, StoreError> {
        let scheme = url.split_once("://").map_or("", |(s, _)| s);
        if scheme.contains("cluster") {
            return Err(StoreError::permanent(
                NAME,
                format!(
                    "`{url}`: Redis Cluster is not supported by this store; use a redis:// or \
                     rediss:// URL"
                ),
            ));
        }
        let client = redis::Client::open(url)
            .map_err(|e| StoreError::permanent(NAME, format!("invalid Redis URL: {e}")))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.response_timeout))
            // Few, short reconnection attempts per call: the limiter's breaker spaces out the
            // calls while Redis is down, and each call starts a fresh attempt.
            .set_number_of_retries(1)
            .set_min_delay(Duration::from_millis(20))
            .set_max_delay(Duration::from_millis(200));
        let conn = ConnectionManager::new_lazy_with_config(client, config)
            .map_err(|e| StoreError::permanent(NAME, format!("Redis client: {e}")))?;
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn,
                prefix: options.prefix,
                clock: options.clock,
                min_ttl_us: options.min_ttl.as_micros() as u64,
                scripts: Scripts::default(),
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
        for script in [&s.decide, &s.block, &s.unblock] {
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

    async fn blocks_of(&self, rule: &str) -> Result<Vec<BlockEntry>, StoreError> {
        let pattern = keys::block_pattern(&self.inner.prefix, rule);
        let mut conn = self.inner.conn.clone();
        let mut found = Vec::new();
        let mut cursor: u64 = 0;
        loop {
            let (next, batch): (u64, Vec<String>) = redis::cmd("SCAN")
                .arg(cursor)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000)
                .query_async(&mut conn)
                .await
                .map_err(store_error)?;
            found.extend(batch);
            if next == 0 {
                break;
            }
            cursor = next;
        }
        found.sort();
        found.dedup();
        let now = self.now_us().await?;
        let mut out = Vec::new();
        for chunk in found.chunks(500) {
            let mut pipe = redis::pipe();
            for key in chunk {
                pipe.get(key);
            }
            let values: Vec<Option<u64>> =
                pipe.query_async(&mut conn).await.map_err(store_error)?;
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

    fn decide<'a>(
        &'a self,
        calls: &'a [LimitCall],
        mode: Mode,
    ) -> BoxFuture<'a, Result<StoreReply, StoreError>> {
        Box::pin(self.decide_calls(calls, mode))
    }

    fn reset<'a>(&'a self, keys: &'a [LimitKey]) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            if keys.is_empty() {
                return Ok(());
            }
            let names: Vec<String> = keys
                .iter()
                .flat_map(|k| keys::triple(&self.inner.prefix, k))
                .collect();
            let mut conn = self.inner.conn.clone();
            // One DEL per identity: its three keys share a slot.
            let mut pipe = redis::pipe();
            for triple in names.chunks(3) {
                pipe.del(triple).ignore();
            }
            pipe.query_async::<()>(&mut conn).await.map_err(store_error)
        })
    }

    fn block<'a>(
        &'a self,
        key: &'a LimitKey,
        duration_us: u64,
    ) -> BoxFuture<'a, Result<u64, StoreError>> {
        Box::pin(async move {
            let mut conn = self.inner.conn.clone();
            self.inner
                .scripts
                .block
                .key(self.key(key, Part::Block))
                .arg(
                    self.client_now()
                        .map_or_else(String::new, |n| n.to_string()),
                )
                .arg(duration_us)
                .arg(self.inner.min_ttl_us)
                .invoke_async(&mut conn)
                .await
                .map_err(store_error)
        })
    }

    fn unblock<'a>(&'a self, key: &'a LimitKey) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(async move {
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
        })
    }

    fn blocks<'a>(&'a self, rule: &'a str) -> BoxFuture<'a, Result<Vec<BlockEntry>, StoreError>> {
        Box::pin(self.blocks_of(rule))
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = self.inner.conn.clone();
            let pong: String = redis::cmd("PING")
                .query_async(&mut conn)
                .await
                .map_err(store_error)?;
            if pong == "PONG" {
                Ok(())
            } else {
                Err(StoreError::permanent(NAME, format!("PING answered {pong}")))
            }
        })
    }
}
