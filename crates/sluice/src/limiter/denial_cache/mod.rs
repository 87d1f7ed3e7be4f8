//! The denial cache: answers, without asking the store, a request the store has already said
//! cannot pass yet.
//!
//! When a remote store (Redis) denies a limit for an identity, its answer says until when no such
//! request can pass: the denial's retry time, or a block's end. Until then the limiter answers the
//! same request from this per-process cache, so an identity hammering a limit costs the store one
//! call per retry period instead of one per request.
//!
//! # Invariants
//! 1. **It only answers denials.** Nothing is cached about admissions; a miss asks the store.
//! 2. **It never denies what the store would deny no longer**, except within the staleness bound
//!    of (5). An entry is the fact "no request of cost ≥ `cost` on this limit key passes before
//!    `denied_until`, and none of any cost before `blocked_until`". Both are counted from the
//!    local clock reading taken *before* the store call was sent: the store decided later than
//!    that, so the entry ends no later than the store's own retry time (a denial at cost `c` says
//!    nothing about a smaller cost; a block says it about every cost). Float algorithms (token
//!    and leaky bucket) admit within [`LEVEL_EPSILON`] of a unit early: their entries end that
//!    much sooner.
//! 3. **Reported waits are never early.** The `retry_after` of a cached answer counts from the
//!    moment the store's reply *arrived*, so a client that waits it out does not come back before
//!    the store would admit it (for the cached cost; another cost gets the same wait, a lower
//!    bound the store refines when asked again). While a block or ban is in force the answer is
//!    the store's answer to a blocked request — nothing remaining, both waits ending with the
//!    block — not the wait of the denial that imposed it, so a client honouring it comes back
//!    when it would without the cache.
//! 4. **Answering changes nothing the store would have changed.** The limiter only caches limits
//!    whose denials leave no trace and end at a known time (see [`cacheable_limits`]; never a
//!    concurrency limit, which a release frees at any moment): no shadow denier, and no
//!    `count_denied`, `penalty` or `block` on a limit that did not deny. A limit with `block` or
//!    `penalty` (or `count_denied` with either) is cached only while its block or ban lasts: a
//!    block in force answers alone and counts nothing, but after it a denial would start a new
//!    block, count a violation or count itself. So a banned identity costs the store one call
//!    per ban, as a plain denial costs one per retry period. A penalty's violations are repeated
//!    only while they provably outlast the block (see `violations_outlast`): the store forgets
//!    them `memory` after the last one, ban or not.
//!    Peeks and degraded decisions (store down) neither read nor fill the cache. A request of
//!    several parts (`check_all`) is answered only when no other part's limit would leave a
//!    trace of the denial either (see `limiter::check_all_cache`).
//! 5. **Staleness is bounded.** Administrative changes (reset, block, unblock, rule reload) clear
//!    the affected entries of the local cache at once and are published on an
//!    [`InvalidationChannel`](crate::store::invalidation::InvalidationChannel) that every node
//!    applies. The channel confirms, about four times per `max_stale`, that everything published
//!    before a given local time has been applied; an entry is used only while
//!    `now < max(confirmed, started) + max_stale`. So an entry that missed an invalidation (the
//!    subscription is down, slow or broken) is used at most `max_stale` after it, and without a
//!    channel every entry lives at most `max_stale`. Each new subscription clears everything.
//! 6. **A denial that raced an invalidation is dropped**: entries are filled only if no
//!    invalidation was applied since their store call was sent.
//! 7. **Bounded memory.** At most `max_entries` entries (sharded). A full shard first drops
//!    expired entries, then evicts arbitrary ones until 1/16 of it is free; evicting a denial
//!    is always safe (the next request asks the store).
//!
//! # Layout
//! - `mod.rs` (this file): the table, its entries' lifetimes, invalidation;
//! - `requests`: which limits of a rule may be cached, and answering or recording a request.
//!
//! Metrics: `sluice_denial_cache_entries` (gauge), `sluice_denial_cache_evictions_total`,
//! `sluice_denial_cache_invalidations_total{kind}`; the limiter counts
//! `sluice_denial_cache_hits_total{rule}`.

use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use hashbrown::HashTable;
use parking_lot::Mutex;

use crate::algorithm::{LEVEL_EPSILON, LimitOutcome, LimitStep};
use crate::clock::Clock;
use crate::metric_catalog::names;
use crate::model::{Algorithm, Micros};
use crate::store::invalidation::{Invalidation, InvalidationListener};

mod requests;
use crate::store::{KeyRef, LimitKey};
pub(crate) use requests::{cacheable_limits, leaves_no_trace};

/// Settings of the denial cache (the `denial_cache` section of a rule file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DenialCacheOptions {
    /// Whether remote stores get a cache (stores in this process never do: they answer as fast).
    pub enabled: bool,
    /// The most entries kept; each costs about 150 bytes plus the identity.
    pub max_entries: usize,
    /// The staleness bound: how long after an invalidation it missed an entry may still answer,
    /// and how long entries live without a working invalidation channel.
    pub max_stale: Duration,
}

impl Default for DenialCacheOptions {
    fn default() -> Self {
        DenialCacheOptions {
            enabled: true,
            max_entries: 200_000,
            max_stale: Duration::from_secs(1),
        }
    }
}

/// Shards of the table (a power of two): concurrent checks rarely wait on one another.
const SHARDS: usize = 16;

/// Where a cached denial's validity is counted from: taken before the store call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CallStart {
    generation: u64,
    started_us: Micros,
}

#[derive(Debug)]
struct Entry {
    key: LimitKey,
    hash: u64,
    /// The smallest cost `denied_for_us` speaks for.
    cost: u64,
    /// Local time the store call was sent.
    started_us: Micros,
    /// Reply time minus `started_us`: added to reported waits so they are never early.
    lag_us: Micros,
    /// No request of cost ≥ `cost` passes within this (zero: unknown).
    denied_for_us: Micros,
    /// No request passes within this (a block; zero: none).
    blocked_for_us: Micros,
    /// What the store reported.
    retry_after_us: Micros,
    reset_after_us: Micros,
    remaining: u64,
    blocked_until_us: Option<Micros>,
    /// The penalty's violations and warning as reported (a block in force does not change them).
    violations: u64,
    warning: bool,
}

impl Entry {
    fn end_us(&self) -> Micros {
        self.started_us + self.denied_for_us.max(self.blocked_for_us)
    }
}

#[derive(Debug, Default)]
struct Shard {
    table: HashTable<Entry>,
}

/// The cache. Shared by a limiter's clones; see the module docs.
#[derive(Debug)]
pub struct DenialCache {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::FixedState,
    clock: Arc<dyn Clock>,
    per_shard: usize,
    max_stale_us: Micros,
    /// Bumped by every invalidation (invariant 6).
    generation: AtomicU64,
    /// Everything published before this local time has been applied (0: never confirmed).
    confirmed_us: AtomicU64,
    len: AtomicUsize,
}

impl DenialCache {
    /// An empty cache reading `clock`.
    pub(crate) fn new(options: &DenialCacheOptions, clock: Arc<dyn Clock>) -> DenialCache {
        DenialCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            hasher: foldhash::fast::FixedState::with_seed(0x51u64),
            clock,
            per_shard: options.max_entries.div_ceil(SHARDS),
            max_stale_us: options.max_stale.into(),
            generation: AtomicU64::new(0),
            confirmed_us: AtomicU64::new(0),
            len: AtomicUsize::new(0),
        }
    }

    /// The staleness bound.
    pub fn max_stale(&self) -> Duration {
        self.max_stale_us.into()
    }

    /// The latest local time as of which the invalidation channel vouched that every
    /// invalidation published before it was applied; `None` before the first subscription.
    pub fn confirmed_as_of(&self) -> Option<Micros> {
        Some(Micros::new(self.confirmed_us.load(Ordering::SeqCst))).filter(|t| !t.is_zero())
    }

    /// Entries held (expired ones included until they are swept).
    pub fn len(&self) -> usize {
        self.len.load(Ordering::Relaxed)
    }

    /// Whether no entry is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, hash: u64) -> &Mutex<Shard> {
        &self.shards[(hash >> 60) as usize % SHARDS]
    }

    /// Taken just before a store call whose denials may be cached.
    pub(crate) fn call_start(&self) -> CallStart {
        CallStart {
            generation: self.generation.load(Ordering::SeqCst),
            started_us: self.clock.now_us(),
        }
    }

    /// A key's hash, from its parts: a lookup needs no owned key.
    fn hash_of(&self, key: KeyRef<'_>) -> u64 {
        self.hasher.hash_one((key.rule, key.limit_id, key.identity))
    }

    /// The cached answer for `key` at `cost`, if the store already said it cannot pass now.
    pub(crate) fn lookup(&self, key: KeyRef<'_>, cost: u64) -> Option<LimitOutcome> {
        let hash = self.hash_of(key);
        let mut shard = self.shard(hash).lock();
        let entry = shard.table.find(hash, |e| KeyRef::from(&e.key) == key)?;
        let now = self.clock.now_us();
        let fresh_until = Micros::new(self.confirmed_us.load(Ordering::Relaxed))
            .max(entry.started_us)
            .saturating_add(self.max_stale_us);
        let blocked = now < entry.started_us + entry.blocked_for_us;
        let denied = cost >= entry.cost && now < entry.started_us + entry.denied_for_us;
        if now >= fresh_until || !(blocked || denied) {
            if now >= entry.end_us()
                && let Ok(gone) = shard
                    .table
                    .find_entry(hash, |e| KeyRef::from(&e.key) == key)
            {
                gone.remove();
                self.len.fetch_sub(1, Ordering::Relaxed);
            }
            return None;
        }
        let replied = entry.started_us + entry.lag_us;
        // While a block is in force the store answers from it alone (`algorithm::step`): nothing
        // remains and both waits end with the block, whatever the denial that imposed it said
        // (its algorithm's wait may be longer, or shorter). Answering as the denial did would
        // tell a client that honours the wait to come back at another time than the store would.
        let (remaining, reset_until, retry_until) = if blocked {
            let until = replied + entry.blocked_for_us;
            (0, until, until)
        } else {
            (
                entry.remaining,
                replied + entry.reset_after_us,
                replied + entry.retry_after_us,
            )
        };
        Some(LimitOutcome {
            allowed: false,
            remaining,
            reset_after_us: reset_until.saturating_sub(now),
            retry_after_us: Some(retry_until.saturating_sub(now).max(Micros::new(1))),
            delay_us: Micros::ZERO,
            blocked_until_us: entry.blocked_until_us.filter(|_| blocked),
            violations: entry.violations,
            warning: entry.warning,
            runtime: None,
        })
    }

    /// Records the store's denial of `step` for `key` (decided at the store's `store_now_us`),
    /// unless an invalidation was applied since `start` was taken.
    pub(crate) fn insert(
        &self,
        start: CallStart,
        key: &LimitKey,
        step: &LimitStep,
        outcome: &LimitOutcome,
        store_now_us: Micros,
    ) {
        if outcome.allowed || self.per_shard == 0 {
            return;
        }
        let blocked_for_us = outcome
            .blocked_until_us
            .map_or(Micros::ZERO, |until| until.saturating_sub(store_now_us));
        let blocked_for_us = if violations_outlast(step, outcome, blocked_for_us) {
            blocked_for_us
        } else {
            Micros::ZERO
        };
        // A limit with a block lock would start a new block when it denies after this one, one
        // with a penalty would count a violation, one with `count_denied` its denial: only a
        // block (or ban) itself may answer for them.
        let traced = step.block_us.is_some() || step.penalty.is_some() || step.params.count_denied;
        let denied_for_us = match (traced, outcome.retry_after_us) {
            (false, Some(retry)) => retry.saturating_sub(float_margin_us(step)),
            _ => Micros::ZERO,
        };
        if denied_for_us.is_zero() && blocked_for_us.is_zero() {
            return;
        }
        let now = self.clock.now_us();
        let hash = self.hash_of(key.into());
        let entry = Entry {
            key: key.clone(),
            hash,
            cost: step.cost,
            started_us: start.started_us,
            lag_us: now.saturating_sub(start.started_us),
            denied_for_us,
            blocked_for_us,
            retry_after_us: outcome.retry_after_us.unwrap_or(blocked_for_us),
            reset_after_us: outcome.reset_after_us,
            remaining: outcome.remaining,
            blocked_until_us: outcome.blocked_until_us,
            violations: outcome.violations,
            warning: outcome.warning,
        };
        let mut shard = self.shard(hash).lock();
        if self.generation.load(Ordering::SeqCst) != start.generation {
            return;
        }
        match shard.table.find_mut(hash, |e| e.key == *key) {
            Some(old) => *old = entry,
            None => {
                if shard.table.len() >= self.per_shard {
                    self.make_room(&mut shard, now);
                }
                shard.table.insert_unique(hash, entry, |e| e.hash);
                self.len.fetch_add(1, Ordering::Relaxed);
            }
        }
        drop(shard);
        metrics::gauge!(names::DENIAL_CACHE_ENTRIES).set(self.len() as f64);
    }

    /// Drops expired entries, then arbitrary ones until 1/16 of the shard is free.
    fn make_room(&self, shard: &mut Shard, now: Micros) {
        let before = shard.table.len();
        shard.table.retain(|e| now < e.end_us());
        let target = self.per_shard - (self.per_shard / 16).max(1);
        let mut excess = shard.table.len().saturating_sub(target);
        let evicted = excess;
        shard.table.retain(|_| {
            if excess == 0 {
                return true;
            }
            excess -= 1;
            false
        });
        self.len
            .fetch_sub(before - shard.table.len(), Ordering::Relaxed);
        if evicted > 0 {
            metrics::counter!(names::DENIAL_CACHE_EVICTIONS_TOTAL).increment(evicted as u64);
        }
    }

    /// Forgets what `invalidation` names, at once.
    pub(crate) fn invalidate(&self, invalidation: &Invalidation) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        let kind = match invalidation {
            Invalidation::Keys(keys) => {
                for key in keys {
                    let hash = self.hash_of(key.into());
                    let mut shard = self.shard(hash).lock();
                    if let Ok(gone) = shard.table.find_entry(hash, |e| e.key == *key) {
                        gone.remove();
                        self.len.fetch_sub(1, Ordering::Relaxed);
                    }
                }
                "keys"
            }
            Invalidation::Rules(rules) => {
                self.retain(|e| !rules.iter().any(|r| *r == *e.key.rule));
                "rules"
            }
            Invalidation::All => {
                self.retain(|_| false);
                "all"
            }
        };
        metrics::counter!(names::DENIAL_CACHE_INVALIDATIONS_TOTAL, "kind" => kind).increment(1);
        metrics::gauge!(names::DENIAL_CACHE_ENTRIES).set(self.len() as f64);
    }

    fn retain(&self, keep: impl Fn(&Entry) -> bool) {
        for shard in self.shards.iter() {
            let mut shard = shard.lock();
            let before = shard.table.len();
            shard.table.retain(|e| keep(e));
            self.len
                .fetch_sub(before - shard.table.len(), Ordering::Relaxed);
        }
    }
}

impl InvalidationListener for DenialCache {
    fn now_us(&self) -> Micros {
        self.clock.now_us()
    }

    fn apply(&self, invalidation: Invalidation) {
        self.invalidate(&invalidation);
    }

    fn confirmed(&self, as_of_us: Micros) {
        self.confirmed_us
            .fetch_max(as_of_us.get(), Ordering::SeqCst);
    }
}

/// Whether the violations `outcome` reports are known to stay what the store reports for the
/// `blocked_for_us` the block has left: a block answered from the cache repeats them, while the
/// store forgets them `memory` after the last one, even in the middle of a ban.
///
/// When the last violation was counted is not in the reply. But a block the limit imposed itself
/// started at one of its violations, no later than the last, and lasts at most the limit's
/// longest block (`ban` or `block`): when `memory` is at least that long, the violations outlive
/// the block, which may then be answered whole. A block longer than that is not the limit's own
/// (an administrative one) and says nothing about when the violations were counted; a limit that
/// forgets violations sooner than it unblocks may forget them mid-ban. Neither is answered here
/// while violations are remembered: the store is asked (with none remembered, nothing can be
/// forgotten). An administrative block no longer than the limit's own is taken for one.
fn violations_outlast(step: &LimitStep, outcome: &LimitOutcome, blocked_for_us: Micros) -> bool {
    let Some(penalty) = step.penalty.filter(|_| outcome.violations > 0) else {
        return true;
    };
    let longest = penalty.ban_us.max(step.block_us.unwrap_or(Micros::ZERO));
    penalty.memory_us >= longest && blocked_for_us <= longest
}

/// How much earlier than its reported retry time a float algorithm may admit (invariant 2). The
/// match names every algorithm: a new one says whether it computes in floats.
fn float_margin_us(step: &LimitStep) -> Micros {
    match step.algorithm {
        Algorithm::TokenBucket | Algorithm::LeakyBucket => {
            step.params.time_to_drain(LEVEL_EPSILON) + Micros::new(2)
        }
        Algorithm::SlidingLog
        | Algorithm::SlidingWindow
        | Algorithm::FixedWindow
        | Algorithm::Gcra
        | Algorithm::Concurrency => Micros::ZERO,
    }
}

#[cfg(test)]
mod tests;
