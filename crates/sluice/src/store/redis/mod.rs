//! The Redis store: every decision is one atomic script call, one round trip.
//!
//! # Layout
//! Public: [`RedisStore`] (this file) and what a user gives or gets from it: [`RedisOptions`]
//! (`options`), [`TlsOptions`] (`tls`), [`RedisUrl`], [`Topology`] and [`UrlError`] (`url`),
//! [`RedisChannel`] (`channel`), [`KeyNames`] (`key_names`), [`LIST_BUDGET`] (`admin`),
//! [`RISKY_EVICTION_POLICIES`] (`eviction`), [`KEY_FORMAT`] (`format`). Everything else is the
//! store's own plumbing:
//! - `mod.rs` (this file): [`RedisStore`], its connection and the [`Store`] operations;
//! - deciding: `decision` (one decision on one server or slot, and the command that makes it,
//!   [`RedisStore::command_for`]); `shared_call` (concurrent decisions of one spec in one call)
//!   with `shared_script` (the script run once per decision of such a call); `cross_slot` (a
//!   request whose limits fall in different Cluster slots, and `lua/give_back.lua`); `function`
//!   (the general decision as a Redis function, `FCALL`, or a script where functions are refused);
//!   `quota` (a quota alone, `lua/quota.lua`, in the period that holds Redis' time);
//! - the scripts: `constants` (every constant Rust and the Lua share, which each script
//!   declares as it names them); `source` (each algorithm's one Lua source, split into its
//!   forms, and what every script is put together from: the prelude, `lua/now.lua`, the
//!   constants a script names before its code); `script` (every script a store loads, and
//!   which one decides a request); `one_script` (the one-limit scripts, made per limit, its numbers written in);
//!   `many_script` (the rule scripts, made per rule of several limits); `spec_scripts` (those
//!   made so far, bounded);
//! - the wire: `codec` (each decision's arguments out, and every reply back, one layout per
//!   kind, decoded once into outcomes; `codec::marked`: fixed windows counted in marked windows,
//!   whose values and PTTLs tell the outcomes and Redis' time);
//! - keys: `keys` (names, state formats, which keys a limit keeps, parsing block keys back),
//!   `key_names` (their public view), `slot` (Cluster hash slots);
//! - the other operations: `admin` (reset, block, unblock, block listings), `lease` (releasing
//!   and renewing concurrency leases), `reservation` (reserving and settling), `runtime`
//!   (run-time numbers of settable limits and their listing), `anchors` (the billing days
//!   identities were last seen with, a first guess for the next decision), `channel` (the
//!   invalidation channel on pub/sub), `eviction` (the start-up check of the eviction policy),
//!   `format` (the key format's version, `{prefix}:format`, written and checked at start-up);
//! - the connection: `connection` (one type behind one server, Cluster and Sentinel),
//!   `failover` (following a Sentinel-managed primary), `url`, `tls`, `options`;
//! - `lua/`: one source per algorithm (`<name>.lua`, sections `general`, `one`, `many`,
//!   `many_marked`, referred to as `<name>.lua#<section>`), the frames they run in
//!   (`one_head.lua`, `many_head.lua`, `many_violations.lua`, `now.lua`, `marker_answer.lua`,
//!   `shared_call.lua`), the general decision (`idiv.lua`, `prelude.lua`, `blocked.lua`,
//!   `decide.lua`), and the other operations' scripts (`block.lua`, `unblock.lua`,
//!   `lease.lua`, `settle.lua`, `give_back.lua`, `runtime_set.lua`, `runtime_change.lua`); `give_back` (what a batch of a hot key did not
//!   spend, through `give_back.lua`).
//!
//! # Which script decides a request
//! | request spec | script | reply (see `codec`) | fallback |
//! | --- | --- | --- | --- |
//! | one limit, applied, its algorithm has a `one` section | the one-limit script: the limit's numbers, `now.lua`, `one_head.lua`, `<algorithm>.lua#one` (`EVALSHA`) | outcomes (the time, 4 values; 6 with a block or penalty); a fixed window in its marked window: packed (one integer) or marked keys; a block in force: blocked text, or a marked block's text | declined (`{}`: a block marker it does not answer, another algorithm's state, a sliding log's denial, a guarded limit's denial) → the general decision |
//! | 2 to 8 limits, applied, each with a `many` section, none `count_denied` | the rule script: `now.lua`, `many_head.lua`, each limit's `<algorithm>.lua#many` look, then the records (`EVALSHA`); all fixed windows counted in marked windows: `fixed_window.lua#many_marked` first | outcomes (4 or 6 values per limit); marked keys | declined (a block marker, a sliding log's denial, a guarded limit's denial) → the general decision |
//! | the above under load, on one server or Sentinel | the shared script (`shared_call.lua` around the one-limit or rule script): one call for up to 64 decisions | an array of each decision's reply, as above | each declined decision → the general decision, alone |
//! | anything else: a peek, `count_denied` among several limits, leaky bucket, concurrency, more than 8 limits, more than 1,024 specs | the general decision: `blocked.lua`, `decide.lua` (`FCALL` of the library; the same as a script where functions are refused) | outcomes (8 values per limit); a one-limit request's block in force answered first | none: it decides every request |
//! | limits in different Cluster slots | each slot's calls as above, in slot order; `give_back.lua` for what earlier slots consumed when a later one denies | as above | — |
//!
//! # One decision, one script call, at the floor
//! Each decision is one call, or a part of one shared with others of its limit (a script reloaded
//! on `NOSCRIPT`, a function reloaded when missing), chosen by the request's spec
//! (`script::Scripts::script_for`):
//! - one limit — the common case — runs `lua/<algorithm>.lua#one` (after `lua/one_head.lua`),
//!   written for that algorithm alone so that Redis does what the algorithm needs and no more:
//!   `TIME`, one read and one write of one key (the fixed window: one `DECRBY`, and instead of
//!   `TIME` the key's `PTTL` while its window lasts, since its expiry marks the window's end:
//!   `lua/fixed_window.lua#one`), with the limit's numbers written into the script so that a call
//!   carries only the time and the cost. It answers only the case it expects; for anything else (a block marker, another algorithm's state, a
//!   sliding log denial, whose retry time needs a search) it writes nothing and answers `{}`,
//!   and the store sends the general decision. A limit with a block or a penalty adds a read of
//!   its state key for a block marker (a block in force is answered from it) and, with a
//!   penalty, a look for recent violations; its denials go to the general decision, which
//!   imposes the block and counts the violation.
//! - several limits without `count_denied` run a script made for the rule (`many_script`): each
//!   limit's one-limit script split into a look and a record, the records made once every
//!   enforcing limit passes, so two limits cost Redis two reads and two writes under one `TIME`;
//!   a limit with a block or a penalty is taken as one limit's script takes it, but a block in
//!   force too goes to the general decision;
//! - under load, decisions of one spec (one limit, or one rule's limits) that wait while a call
//!   of that spec is in flight share the next call (`shared_call`): its script runs once per
//!   decision, in order, in one call, which spares Redis and the store most of what a call costs
//!   beyond its Lua (on one server or Sentinel; a Cluster spreads identities over nodes);
//! - anything else runs `lua/decide.lua` after the prelude (`lua/idiv.lua`, `lua/prelude.lua`)
//!   and one file per algorithm, as the function of a library loaded once (`FCALL`, see
//!   `function`), which restates [`crate::algorithm::decide`]: block check, each algorithm's
//!   look (one read), the all-or-nothing records (one write each, only once every enforcing
//!   limit passes), violations and penalty, block/ban. Only limits with a penalty read a
//!   violations key; no decision reads a block key (see Keys).
//!
//! The arithmetic is the Rust arithmetic: integer microseconds, the same `f64` formulas in the
//! same order for the bucket algorithms, the same rounding, and floats stored with `%.17g` so they
//! round-trip. One conformance suite and a randomized differential test (on a client clock and on
//! Redis `TIME`) run the memory store and this store side by side (`tests/`). [`Mode::Peek`]
//! writes nothing.
//!
//! Time comes from Redis `TIME` (µs), so app nodes with skewed clocks agree (a fixed window's
//! admission in its marked window knows Redis' time from the key's expiry, to the ms); with
//! [`RedisOptions::clock`] set, the client's clock is sent instead (tests use a
//! [`ManualClock`](crate::ManualClock) and never sleep). Every state records its own times, and
//! a key expires only once its state stops mattering (on `TIME`, at an absolute instant: see
//! `keys`), so expiry only frees memory.
//!
//! # Keys
//! The state of a limit for an identity is one short key, `{prefix}:{limit hash}{{identity}}`;
//! blocks and violations keep readable names that admin listings scan. A block moves the state
//! aside and leaves a marker in the state key, so decisions see it with the read they make
//! anyway. The identity is a Redis Cluster hash tag: every key of one identity shares a slot.
//! Names, state formats, expiries and memory per key: `keys` ([`KeyNames`] names them).
//!
//! # Deployments: one server, Sentinel, Cluster
//! [`RedisStore::connect`] takes `redis://`, `redis+sentinel://` and `redis+cluster://` URLs
//! (`rediss…` for TLS; see [`RedisUrl`] and [`TlsOptions`]); `connection` holds the one connection type
//! behind all three. On one server or a Sentinel-managed primary (`failover`), all the limits
//! of a request are decided in one script call, whatever their identities, so all-or-nothing
//! holds across limits. On a Cluster the keys of one limit and identity share a slot (`slot`),
//! and limits counted by the same identity share one too: such a request is still one script
//! call on one node. A request whose limits fall in different slots is decided by the
//! `cross_slot` protocol, which never admits more than any limit allows and may briefly
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
//! # Failures
//! One multiplexed connection per server ([`redis::aio::ConnectionManager`]) carries every call,
//! pipelining concurrent ones; each reply has a deadline ([`RedisOptions::response_timeout`]); a
//! dropped connection is re-established in the background by the next call.
//! [`RedisStore::connect`] does not wait for Redis: it returns at once and connects in the
//! background, so a server can start while Redis is down and degrade per its fail policy until
//! Redis answers. Connection errors and timeouts are transient [`StoreError`]s (the limiter's
//! fail policy and breaker take over); script or type errors are permanent, and the limiter
//! answers them for their request alone (they never open the breaker).
//!
//! A call abandoned at the limiter's deadline may still reach Redis and run later (a paused or
//! overloaded server runs its queue when it resumes): the caller got the fail policy's answer, yet
//! the unit may be counted. Redis offers no way to cancel a sent command, and the script cannot
//! tell a late call from a timely one without a clock shared with the client, so this errs on
//! the side of counting: limits stay safe, a client may lose a unit per timed-out call.

mod admin;
mod anchors;
mod channel;
mod codec;
mod connection;
mod constants;
mod cross_slot;
mod decision;
mod eviction;
mod failover;
mod format;
mod function;
mod give_back;
mod key_names;
mod keys;
mod lease;
mod many_script;
mod one_script;
mod options;
mod quota;
mod reservation;
mod runtime;
mod script;
mod shared_call;
mod shared_script;
mod slot;
mod source;
mod spec_scripts;
mod tls;
mod url;

pub use admin::LIST_BUDGET;
pub use channel::RedisChannel;
pub use eviction::RISKY_EVICTION_POLICIES;
pub use format::KEY_FORMAT;
pub use key_names::KeyNames;
pub use options::RedisOptions;
pub use tls::TlsOptions;
use url::redact;
pub use url::{RedisUrl, Topology, UrlError};

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::time::Duration;

use redis::{RedisError, RetryMethod};

use super::{
    BlocksCursor, BlocksPage, GiveBackCall, LeaseCall, LimitCall, LimitKey, ReserveCall,
    RuntimeEntry, SettleCall, Store, StoreError, StoreReply,
};
use crate::algorithm::{Mode, RuntimeNumbers};
use crate::clock::{Clock, SystemClock};
use crate::model::{Micros, Period};
use connection::RedisConnection;
use failover::Dial;
use keys::Part;
use script::Scripts;

const NAME: &str = "redis";

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
    min_ttl_us: Micros,
    list_budget: Duration,
    scripts: Scripts,
    /// The billing days identities were last seen with (see `anchors`).
    anchors: anchors::Anchors,
    /// The server refused functions: the general decision runs as a script (see `function`).
    no_functions: AtomicBool,
    /// The latest time Redis reported to the µs (see `RedisStore::saw_time`).
    latest_us: AtomicU64,
    /// Where the invalidation channel subscribes (see `channel`), and how to dial it.
    subscribe_to: Vec<redis::ConnectionInfo>,
    dial: Dial,
    /// Turns true once the start-up work (scripts, eviction policy, key format) has run.
    started: tokio::sync::watch::Receiver<bool>,
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
    /// Opens a store on `url` (see [`RedisUrl`] for the shapes). Returns promptly even when Redis is
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
        let (start_done, started) = tokio::sync::watch::channel(false);
        let store = RedisStore {
            inner: Arc::new(Inner {
                conn,
                prefix: options.prefix,
                clock: options.clock,
                min_ttl_us: options.min_ttl.into(),
                list_budget: options.list_budget,
                scripts: Scripts::new(options.min_ttl.into()),
                anchors: anchors::Anchors::default(),
                no_functions: AtomicBool::new(false),
                latest_us: AtomicU64::new(0),
                subscribe_to,
                dial,
                started,
            }),
        };
        // Connect and load the scripts in the background; the first decisions need not wait.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let warm = store.clone();
            runtime.spawn(async move {
                match warm.load_scripts().await {
                    Ok(()) => {
                        warm.warn_of_eviction().await;
                        warm.check_key_format().await;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "Redis not reachable yet; decisions degrade until it is");
                    }
                }
                start_done.send_replace(true);
            });
        } else {
            start_done.send_replace(true);
        }
        Ok(store)
    }

    /// Resolves once the work `connect` starts in the background (loading the scripts, checking
    /// the eviction policy and the key format) has run, whatever came of it. Decisions never
    /// wait for it; a caller that counts Redis' commands, or wants the scripts loaded before its
    /// first decision, does.
    pub async fn started(&self) {
        let mut started = self.inner.started.clone();
        // An error means the start-up task was dropped with its runtime: nothing is left to wait for.
        let _ = started.wait_for(|done| *done).await;
    }

    /// Loads every script and the function library (also done on demand after `NOSCRIPT` or a
    /// missing function).
    pub async fn load_scripts(&self) -> Result<(), StoreError> {
        self.load_library().await?;
        let mut conn = self.inner.conn.clone();
        let s = &self.inner.scripts;
        for script in s.all() {
            script
                .prepare_invoke()
                .load_async(&mut conn)
                .await
                .map_err(store_error)?;
        }
        Ok(())
    }

    /// The Redis key of one part of a limit key's state.
    fn key(&self, key: &LimitKey, part: Part) -> String {
        keys::key(&self.inner.prefix, key, part)
    }

    fn client_now(&self) -> Option<Micros> {
        self.inner.clock.as_ref().map(|c| c.now_us())
    }

    /// The time a quota's period is chosen by before the store is asked: the client clock if
    /// configured, else this node's (a script whose period does not hold Redis' time says so).
    fn period_clock(&self) -> Micros {
        self.client_now().unwrap_or_else(|| SystemClock.now_us())
    }

    /// The client clock as a script argument: `''` tells the script to read Redis `TIME`.
    fn client_now_arg(&self) -> String {
        codec::now_arg(self.client_now())
    }

    /// The decision time: the client clock if configured, else Redis `TIME`.
    async fn now_us(&self) -> Result<Micros, StoreError> {
        if let Some(now) = self.client_now() {
            return Ok(now);
        }
        let mut conn = self.inner.conn.clone();
        let (secs, micros): (u64, u64) = redis::cmd("TIME")
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(Micros::from_secs(secs) + Micros::new(micros))
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
        self.reset_keys(keys).await
    }

    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        self.block_key(key, duration).await
    }

    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        self.unblock_key(key).await
    }

    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        self.blocks_page(rule, cursor).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner
            .conn
            .writable()
            .await
            .map_err(|message| StoreError::transient(NAME, message))
    }

    async fn release(&self, leases: &[LeaseCall]) -> Result<Vec<bool>, StoreError> {
        self.release_leases(leases).await
    }

    async fn renew(&self, leases: &[LeaseCall]) -> Result<Vec<Option<Micros>>, StoreError> {
        self.renew_leases(leases).await
    }

    async fn reserve(&self, reservations: &[ReserveCall]) -> Result<(), StoreError> {
        self.reserve_all(reservations).await
    }

    async fn settle(&self, settlements: &[SettleCall]) -> Result<Vec<bool>, StoreError> {
        self.settle_all(settlements).await
    }

    async fn give_back(&self, calls: &[GiveBackCall]) -> Result<(), StoreError> {
        self.give_back_all(calls).await
    }

    async fn set_runtime(
        &self,
        key: &LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static Period>,
    ) -> Result<bool, StoreError> {
        self.set_runtime_key(key, numbers, max_entries, period)
            .await
    }

    async fn runtime(&self, key: &LimitKey) -> Result<Option<RuntimeNumbers>, StoreError> {
        self.runtime_of(key).await
    }

    async fn runtime_entries(
        &self,
        rule: &str,
        limit_id: &str,
    ) -> Result<Vec<RuntimeEntry>, StoreError> {
        self.runtime_list(rule, limit_id).await
    }

    async fn remove_runtime(
        &self,
        key: &LimitKey,
        period: Option<&'static Period>,
    ) -> Result<bool, StoreError> {
        self.remove_runtime_key(key, period).await
    }
}
