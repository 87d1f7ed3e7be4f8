//! The in-memory store: limit state in this process, for one node or as the `local` fail policy.
//!
//! State lives in [`SHARDS`] shards, each a hash table behind its own lock (on its own cache
//! lines), picked by the key's hash. A request's keys are locked in shard order (no deadlock) and
//! decided in one critical section, so decisions are exact under any number of threads. A key of
//! up to 31 bytes lives inside its entry (see [`KeyRef`]), as does the
//! common small state (one GCRA time, window count or bucket level, without a block or
//! violations): deciding on a known key, or storing a new short one, allocates nothing.
//!
//! **Memory bound.** Every entry carries the time after which its state can no longer affect a
//! decision (`expires_us`: window, block and violation memory); an entry found expired is reused
//! as a fresh one. A shard sweeps its expired entries whenever it has doubled in size since its
//! last sweep, and [`MemoryStore::sweep`] sweeps every shard (the server calls it periodically).
//! An entry is one 64-byte cache line, so a store of many keys costs one line of memory traffic
//! per decision. Beyond that line: a key over 31 bytes; a state with a block or remembered
//! violations, a sliding window or log, or leases (about 80 bytes, plus 8 per entry of a sliding
//! log, at most `limit`, and 16 per sliding-window bucket, at most 11).
//!
//! **Run-time numbers** of settable limits (`runtime`) are read under the key's shard lock, in
//! the decision's critical section, and only for a settable limit.
//!
//! **Key cap.** The store holds at most [`MemoryOptions::max_keys`] keys (default
//! [`DEFAULT_MAX_KEYS`], 64 MB of entries), each shard at most its 1/[`SHARDS`] share, so a
//! flood of identities (IPv6 addresses, random user ids) cannot grow it without bound. When a new
//! key meets a full shard, the eviction order is:
//! 1. every entry whose state has expired: it equals no state, so dropping it changes no decision
//!    (counted in `sluice_memory_evictions_total`);
//! 2. nothing else. Any live entry (a count, a timestamp, a block, remembered violations) could
//!    still deny a request; forgetting it would let its identity start over and admit more than
//!    its limit. The new key is refused instead (`sluice_memory_refused_keys_total`): the request
//!    changes nothing and fails with a transient [`StoreError`], so the rule's fail policy
//!    decides for that identity alone (`open` admits it, `closed` denies it, `local` on a full
//!    local store denies it). Keys already held are decided exactly as before.
//!
//! A full shard sweeps at most once per expiry instant, so refused keys cost no repeated scans.
//! Refusals can start a little before `max_keys` keys in total, once the fullest shard is full.

mod blocks;
mod give_back;
mod leases;
mod packed_state;
mod reservations;
mod runtime;
mod several;
mod shard;
mod stored_key;

use std::sync::Arc;
use std::time::Duration;

use foldhash::fast::RandomState;
use spin::mutex::{SpinMutex, SpinMutexGuard};
use spin::relax::Yield;

use super::{
    BlocksCursor, BlocksPage, GiveBackCall, LeaseCall, LimitCall, LimitKey, ReserveCall,
    RuntimeEntry, SettleCall, Store, StoreError, StoreReply,
};
use crate::algorithm::{KeyState, LimitOutcome, LimitStep, Mode, RuntimeNumbers, step};
use crate::clock::{Clock, SystemClock};
use crate::model::{Micros, Period};
use crate::store::KeyRef;
use packed_state::PackedState;
use shard::{Full, Shard};

/// Number of shards; a power of two well above the core count keeps contention low.
pub const SHARDS: usize = 64;

/// Default [`MemoryOptions::max_keys`]: 64 MB of entries at the cap (the tables' free slots
/// can double it).
pub const DEFAULT_MAX_KEYS: usize = 1_000_000;

/// Settings of a [`MemoryStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryOptions {
    /// Most keys held at once (rounded up to a multiple of [`SHARDS`]; each shard holds its
    /// share). See the module docs for what happens at the cap.
    pub max_keys: usize,
}

impl Default for MemoryOptions {
    fn default() -> MemoryOptions {
        MemoryOptions {
            max_keys: DEFAULT_MAX_KEYS,
        }
    }
}

/// A shard's lock: taken with one locked instruction, released with a plain store. A waiter
/// yields its thread between attempts, so a holder the OS has preempted gets the core back. The
/// critical sections are short (one request's decision, or a sweep of one shard), and a parking
/// mutex's release, a second locked instruction, is a measurable part of a decision on a hot key
/// (BENCHMARKS.md, "Bottlenecks found and fixed").
type ShardLock = SpinMutex<Shard, Yield>;

/// A locked shard.
type ShardGuard<'a> = SpinMutexGuard<'a, Shard>;

/// A shard on its own cache lines, so that two threads working in neighbouring shards do not
/// slow each other down.
#[derive(Debug)]
#[repr(align(128))]
struct Padded(ShardLock);

/// Limit state in this process. Cheap to clone (clones share state).
///
/// ```
/// # tokio_test_block_on(async {
/// use sluice::{Limiter, MemoryStore, Rule, model::{Limit, Algorithm}};
/// let limiter = Limiter::builder(MemoryStore::new())
///     .rule("login", Rule::new(vec![Limit::new(&["ip"], "2/1m".parse().unwrap(), Algorithm::Gcra)]))
///     .build()
///     .unwrap();
/// let attrs = [("ip", "203.0.113.9")];
/// assert!(limiter.check("login", &attrs).await.unwrap().allowed);
/// assert!(limiter.check("login", &attrs).await.unwrap().allowed);
/// assert!(!limiter.check("login", &attrs).await.unwrap().allowed);
/// # });
/// # fn tokio_test_block_on<F: std::future::Future>(f: F) -> F::Output {
/// #     tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(f)
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct MemoryStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    shards: Box<[Padded]>,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
    max_keys: usize,
    reservations: reservations::Reservations,
    runtime: runtime::RuntimeTable,
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new()
    }
}

impl MemoryStore {
    /// A store on the system clock.
    pub fn new() -> MemoryStore {
        MemoryStore::with_clock(Arc::new(SystemClock))
    }

    /// A store on the given clock.
    pub fn with_clock(clock: Arc<dyn Clock>) -> MemoryStore {
        MemoryStore::with_options(clock, MemoryOptions::default())
    }

    /// A store on the given clock with these settings.
    pub fn with_options(clock: Arc<dyn Clock>, options: MemoryOptions) -> MemoryStore {
        let per_shard = options.max_keys.div_ceil(SHARDS).max(1);
        let hasher = RandomState::default();
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..SHARDS)
                    .map(|_| Padded(ShardLock::new(Shard::new(per_shard, hasher.clone()))))
                    .collect(),
                hasher,
                clock,
                max_keys: per_shard * SHARDS,
                reservations: Default::default(),
                runtime: Default::default(),
            }),
        }
    }

    /// The key's hash, and its shard. The shard comes from middle bits: the table finds a slot
    /// with the low bits and tags it with the top seven, which must stay random within a shard.
    fn locate(&self, key: KeyRef<'_>) -> (u64, usize) {
        let hash = key.hash_with(&self.inner.hasher);
        (hash, (hash >> 40) as usize & (SHARDS - 1))
    }

    fn shard(&self, i: usize) -> ShardGuard<'_> {
        self.inner.shards[i].0.lock()
    }

    fn full(&self) -> StoreError {
        StoreError::transient(
            "memory",
            format!(
                "full: {} keys, all live; new keys are refused until some expire",
                self.inner.max_keys
            ),
        )
    }

    /// Decides a single-limit request synchronously, without allocating for a key the store
    /// holds (or any key of up to 31 bytes). Returns the time used and the outcome.
    pub fn decide_one(
        &self,
        call: &LimitCall,
        mode: Mode,
    ) -> Result<(Micros, LimitOutcome), StoreError> {
        self.decide_key((&call.key).into(), &call.step, mode)
    }

    /// [`MemoryStore::decide_one`] for a key given by its parts.
    pub fn decide_key(
        &self,
        key: KeyRef<'_>,
        step: &LimitStep,
        mode: Mode,
    ) -> Result<(Micros, LimitOutcome), StoreError> {
        let now = self.inner.clock.now_us();
        let (hash, shard) = self.locate(key);
        let mut shard = self.shard(shard);
        // Read under the key's shard lock, as the numbers are changed (see `runtime`).
        let runtime = if step.settable {
            self.inner.runtime.get(key)
        } else {
            None
        };
        let applied;
        let step = match runtime {
            Some(numbers) => {
                applied = numbers.apply(step);
                &applied
            }
            None => step,
        };
        let with_runtime = |mut outcome: LimitOutcome| {
            outcome.runtime = runtime;
            outcome
        };
        if let Some(entry) = shard.find(hash, key) {
            if entry.expires_us <= now {
                entry.state = PackedState::Empty;
            }
            let (outcome, ttl) = entry
                .state
                .with(|state| step::decide_one(state, step, now, mode));
            // An entry whose TTL is 0 stays until swept or reused: it equals no state.
            entry.expires_us = now + ttl;
            shard.expires_at(now + ttl);
            return Ok((now, with_runtime(outcome)));
        }
        let mut state = KeyState::default();
        let (outcome, ttl) = step::decide_one(&mut state, step, now, mode);
        match shard.put(hash, key, PackedState::pack(state), ttl, now) {
            Ok(()) => Ok((now, with_runtime(outcome))),
            Err(Full) => Err(self.full()),
        }
    }

    /// Decides a request synchronously (the [`Store::decide`] future is this, already done).
    /// A request with a new key that does not fit changes nothing and fails.
    pub fn decide_now(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        if let [call] = calls {
            let (now_us, outcome) = self.decide_one(call, mode)?;
            return Ok(StoreReply {
                now_us,
                outcomes: vec![outcome],
            });
        }
        self.decide_several(calls, mode)
    }

    /// Drops every entry that can no longer affect a decision.
    pub fn sweep(&self) {
        let now = self.inner.clock.now_us();
        for i in 0..SHARDS {
            self.shard(i).sweep(now);
        }
    }

    /// Number of keys held (live or not yet swept).
    pub fn len(&self) -> usize {
        (0..SHARDS).map(|i| self.shard(i).len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The most keys this store holds ([`MemoryOptions::max_keys`] rounded up).
    pub fn max_keys(&self) -> usize {
        self.inner.max_keys
    }

    /// Entries dropped so far to make room for new keys (each one expired).
    pub fn evictions(&self) -> u64 {
        (0..SHARDS).map(|i| self.shard(i).evictions).sum()
    }

    /// New keys refused so far because the store was full of live keys.
    pub fn refused_keys(&self) -> u64 {
        (0..SHARDS).map(|i| self.shard(i).refusals).sum()
    }

    fn with_entry<T>(
        &self,
        key: &LimitKey,
        f: impl FnOnce(&mut KeyState, Micros) -> T,
    ) -> Result<T, StoreError> {
        let key = KeyRef::from(key);
        let (hash, shard) = self.locate(key);
        let mut shard = self.shard(shard);
        let now = self.inner.clock.now_us();
        let (mut state, expires_us) = shard.take(hash, key, now);
        let (out, keep) = state.with(|state| {
            let out = f(state, now);
            // The algorithm's own TTL is not known here: keep at least the previous expiry.
            (out, state.ttl_us(expires_us - now, now))
        });
        match shard.put(hash, key, state, keep, now) {
            Ok(()) => Ok(out),
            Err(Full) => Err(self.full()),
        }
    }
}

impl Store for MemoryStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    fn in_process(&self) -> bool {
        true
    }

    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        self.decide_now(calls, mode)
    }

    fn decide_one_now(
        &self,
        key: KeyRef<'_>,
        step: &LimitStep,
        mode: Mode,
    ) -> Option<Result<(Micros, LimitOutcome), StoreError>> {
        Some(self.decide_key(key, step, mode))
    }

    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        let now = self.inner.clock.now_us();
        for key in keys {
            let key = KeyRef::from(key);
            let (hash, shard) = self.locate(key);
            self.shard(shard).take(hash, key, now);
        }
        Ok(())
    }

    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        let duration_us = Micros::from(duration);
        self.with_entry(key, |s, now| s.block.impose(now, duration_us))
    }

    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        self.with_entry(key, |s, now| {
            let was = s.block.active(now).is_some();
            s.block = Default::default();
            s.penalty = Default::default();
            was
        })
    }

    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        Ok(self.blocks_page(rule, cursor))
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }

    async fn release(&self, leases: &[LeaseCall]) -> Result<Vec<bool>, StoreError> {
        Ok(self.release_now(leases))
    }

    async fn renew(&self, leases: &[LeaseCall]) -> Result<Vec<Option<Micros>>, StoreError> {
        Ok(self.renew_now(leases))
    }

    async fn reserve(&self, reservations: &[ReserveCall]) -> Result<(), StoreError> {
        self.reserve_now(reservations)
    }

    async fn settle(&self, settlements: &[SettleCall]) -> Result<Vec<bool>, StoreError> {
        self.settle_now(settlements)
    }

    async fn give_back(&self, calls: &[GiveBackCall]) -> Result<(), StoreError> {
        self.give_back_now(calls)
    }

    async fn set_runtime(
        &self,
        key: &LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static Period>,
    ) -> Result<bool, StoreError> {
        Ok(self.set_runtime_now(key, numbers, max_entries, period))
    }

    async fn runtime(&self, key: &LimitKey) -> Result<Option<RuntimeNumbers>, StoreError> {
        Ok(self.runtime_now(key))
    }

    async fn runtime_entries(
        &self,
        rule: &str,
        limit_id: &str,
    ) -> Result<Vec<RuntimeEntry>, StoreError> {
        Ok(self.runtime_entries_now(rule, limit_id))
    }

    async fn remove_runtime(
        &self,
        key: &LimitKey,
        period: Option<&'static Period>,
    ) -> Result<bool, StoreError> {
        Ok(self.remove_runtime_now(key, period))
    }
}

#[cfg(test)]
mod tests;
