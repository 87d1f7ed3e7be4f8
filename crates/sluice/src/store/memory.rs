//! The in-memory store: limit state in this process, for one node or as the `local` fail policy.
//!
//! State lives in [`SHARDS`] shards, each a `HashMap` behind its own mutex, picked by the key's
//! hash. A request's keys are locked in shard order (no deadlock) and decided in one critical
//! section, so decisions are exact under any number of threads.
//!
//! **Memory bound.** An entry is dropped as soon as its state is equivalent to no state (its TTL
//! is zero after a decision), and every entry carries the time after which it can no longer affect
//! a decision (`expires_us`: window, block and violation memory). A shard sweeps its expired
//! entries whenever it has doubled in size since its last sweep, and [`MemoryStore::sweep`] sweeps
//! every shard (the server calls it periodically). So a shard holds at most twice the number of
//! keys that were live at its last sweep plus the keys touched since, and memory is proportional
//! to the keys active within their TTL: about 100 bytes per key plus 8 bytes per entry of a
//! sliding log (at most `limit`) and 16 per sliding-window bucket (at most 11).

use std::hash::BuildHasher;

use foldhash::fast::RandomState;
use hashbrown::HashTable;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::{Mutex, MutexGuard};

use super::{BlockEntry, LimitCall, LimitKey, Store, StoreError, StoreReply};
use crate::algorithm::{KeyState, LimitOutcome, Mode, step};
use crate::clock::{Clock, SystemClock, micros};

/// Number of shards; a power of two well above the core count keeps contention low.
pub const SHARDS: usize = 64;

#[derive(Debug)]
struct Entry {
    /// The key's hash, kept so the table never rehashes keys when it grows.
    hash: u64,
    /// `rule\0limit\0identity` in one allocation: one cache miss to compare, not three (no part
    /// contains a NUL: names and escaped identities are restricted to printable characters).
    key: Box<str>,
    state: KeyState,
    expires_us: u64,
}

impl Entry {
    fn is(&self, key: &LimitKey) -> bool {
        self.key
            .strip_prefix(&*key.rule)
            .and_then(|rest| rest.strip_prefix('\0'))
            .and_then(|rest| rest.strip_prefix(&*key.limit))
            .and_then(|rest| rest.strip_prefix('\0'))
            == Some(key.identity.as_str())
    }

    fn limit_key(&self) -> LimitKey {
        let mut parts = self.key.splitn(3, '\0');
        let mut next = || parts.next().unwrap_or_default();
        LimitKey {
            rule: next().into(),
            limit: next().into(),
            identity: next().to_string(),
        }
    }
}

/// One shard: entries found by a hash computed once per request (it also picks the shard).
#[derive(Debug, Default)]
struct Shard {
    table: HashTable<Entry>,
    sweep_at_len: usize,
}

impl Shard {
    fn sweep(&mut self, now: u64) {
        self.table.retain(|e| e.expires_us > now);
        self.sweep_at_len = (self.table.len() * 2).max(64);
    }

    fn find(&mut self, hash: u64, key: &LimitKey) -> Option<&mut Entry> {
        self.table.find_mut(hash, |e| e.is(key))
    }

    /// Removes a key's state, returning it with the time it expires (no state if expired).
    fn take(&mut self, hash: u64, key: &LimitKey, now: u64) -> (KeyState, u64) {
        match self.table.find_entry(hash, |e| e.is(key)) {
            Ok(found) => {
                let (e, _) = found.remove();
                if e.expires_us > now {
                    (e.state, e.expires_us)
                } else {
                    (KeyState::default(), now)
                }
            }
            Err(_) => (KeyState::default(), now),
        }
    }

    /// Stores a key's state for `ttl_us` (not at all when 0). The key must not be present.
    fn put(&mut self, hash: u64, key: &LimitKey, state: KeyState, ttl_us: u64, now: u64) {
        if ttl_us == 0 {
            return;
        }
        let entry = Entry {
            hash,
            key: format!("{}\0{}\0{}", key.rule, key.limit, key.identity).into_boxed_str(),
            state,
            expires_us: now + ttl_us,
        };
        self.table.insert_unique(hash, entry, |e| e.hash);
        if self.table.len() >= self.sweep_at_len {
            self.sweep(now);
        }
    }
}

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
    shards: Vec<Mutex<Shard>>,
    hasher: RandomState,
    clock: Arc<dyn Clock>,
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
        MemoryStore {
            inner: Arc::new(Inner {
                shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
                hasher: RandomState::default(),
                clock,
            }),
        }
    }

    /// The key's hash, and its shard (from the top bits: the table uses the low ones).
    fn locate(&self, key: &LimitKey) -> (u64, usize) {
        let hash = self.inner.hasher.hash_one(key);
        (hash, (hash >> 58) as usize & (SHARDS - 1))
    }

    /// Decides a single-limit request synchronously, without allocating. Returns the time used
    /// and the outcome.
    pub fn decide_one(&self, call: &LimitCall, mode: Mode) -> (u64, LimitOutcome) {
        let now = self.inner.clock.now_us();
        let (hash, shard) = self.locate(&call.key);
        let mut shard = self.inner.shards[shard].lock();
        if let Some(entry) = shard.find(hash, &call.key) {
            if entry.expires_us <= now {
                entry.state = KeyState::default();
            }
            let (outcome, ttl) = step::decide_one(&mut entry.state, &call.step, now, mode);
            // An entry whose TTL is 0 stays until swept or reused: it equals no state.
            entry.expires_us = now + ttl;
            return (now, outcome);
        }
        let mut state = KeyState::default();
        let (outcome, ttl) = step::decide_one(&mut state, &call.step, now, mode);
        shard.put(hash, &call.key, state, ttl, now);
        (now, outcome)
    }

    /// Decides a request synchronously (the [`Store::decide`] future is this, already done).
    pub fn decide_now(&self, calls: &[LimitCall], mode: Mode) -> StoreReply {
        if let [call] = calls {
            let (now_us, outcome) = self.decide_one(call, mode);
            return StoreReply {
                now_us,
                outcomes: vec![outcome],
            };
        }
        let now = self.inner.clock.now_us();
        let steps: Vec<_> = calls.iter().map(|c| c.step).collect();
        let located: Vec<(u64, usize)> = calls.iter().map(|c| self.locate(&c.key)).collect();
        let mut order: Vec<usize> = located.iter().map(|&(_, s)| s).collect();
        order.sort_unstable();
        order.dedup();
        let mut guards: Vec<(usize, MutexGuard<'_, Shard>)> = order
            .iter()
            .map(|&i| (i, self.inner.shards[i].lock()))
            .collect();
        let guard_of = |i: usize| {
            order
                .binary_search(&i)
                .expect("every shard of the calls was locked above")
        };
        let mut states: Vec<KeyState> = calls
            .iter()
            .zip(&located)
            .map(|(c, &(h, s))| guards[guard_of(s)].1.take(h, &c.key, now).0)
            .collect();
        let mut refs: Vec<&mut KeyState> = states.iter_mut().collect();
        let results = step::decide(&mut refs, &steps, now, mode);
        for ((call, state), (&(h, s), (_, ttl))) in
            calls.iter().zip(states).zip(located.iter().zip(&results))
        {
            guards[guard_of(s)].1.put(h, &call.key, state, *ttl, now);
        }
        StoreReply {
            now_us: now,
            outcomes: results.into_iter().map(|(o, _)| o).collect(),
        }
    }

    /// Drops every entry that can no longer affect a decision.
    pub fn sweep(&self) {
        let now = self.inner.clock.now_us();
        for shard in &self.inner.shards {
            shard.lock().sweep(now);
        }
    }

    /// Number of keys held (live or not yet swept).
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| s.lock().table.len()).sum()
    }

    /// Whether no key is held.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn with_entry<T>(&self, key: &LimitKey, f: impl FnOnce(&mut KeyState, u64) -> T) -> T {
        let now = self.inner.clock.now_us();
        let (hash, shard) = self.locate(key);
        let mut shard = self.inner.shards[shard].lock();
        let (mut state, expires_us) = shard.take(hash, key, now);
        let out = f(&mut state, now);
        // The algorithm's own TTL is not known here: keep at least the previous expiry.
        let keep = state.ttl_us(expires_us - now, now);
        shard.put(hash, key, state, keep, now);
        out
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
        Ok(self.decide_now(calls, mode))
    }

    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        let now = self.inner.clock.now_us();
        for key in keys {
            let (hash, shard) = self.locate(key);
            self.inner.shards[shard].lock().take(hash, key, now);
        }
        Ok(())
    }

    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<u64, StoreError> {
        let duration_us = micros(duration);
        Ok(self.with_entry(key, |s, now| s.block.impose(now, duration_us)))
    }

    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        Ok(self.with_entry(key, |s, now| {
            let was = s.block.active(now).is_some();
            s.block = Default::default();
            s.penalty = Default::default();
            was
        }))
    }

    async fn blocks(&self, rule: &str) -> Result<Vec<BlockEntry>, StoreError> {
        let now = self.inner.clock.now_us();
        let mut out: Vec<BlockEntry> = Vec::new();
        for shard in &self.inner.shards {
            out.extend(shard.lock().table.iter().filter_map(|e| {
                let until = e.state.block.active(now)?;
                let key = e.limit_key();
                (&*key.rule == rule).then_some(BlockEntry {
                    key,
                    until_us: until,
                })
            }));
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{LimitStep, Params};
    use crate::clock::ManualClock;
    use crate::model::Algorithm;

    fn call(i: usize, block_us: Option<u64>) -> LimitCall {
        LimitCall {
            key: LimitKey {
                rule: "r".into(),
                limit: "l".into(),
                identity: format!("ip={i}"),
            },
            step: LimitStep {
                algorithm: Algorithm::Gcra,
                params: Params::new(1, 1_000_000, 1),
                cost: 1,
                block_us,
                penalty: None,
                enforce: true,
            },
        }
    }

    #[test]
    fn idle_keys_are_evicted_once_they_cannot_matter() {
        let clock = ManualClock::at_2026();
        let store = MemoryStore::with_clock(Arc::new(clock.clone()));
        // 10k keys each touched once; every state lasts one second.
        for round in 0..10 {
            for i in 0..10_000 {
                store.decide_now(&[call(round * 10_000 + i, None)], Mode::Apply);
            }
            clock.advance(std::time::Duration::from_secs(2));
        }
        // Growth-triggered sweeps keep at most about twice the live keys per shard.
        assert!(store.len() <= 2 * 10_000 + SHARDS * 64, "{}", store.len());
        store.sweep();
        assert_eq!(store.len(), 0);
    }

    #[test]
    fn a_block_keeps_its_key_until_it_ends() {
        let clock = ManualClock::at_2026();
        let store = MemoryStore::with_clock(Arc::new(clock.clone()));
        let c = call(1, Some(60_000_000));
        store.decide_now(std::slice::from_ref(&c), Mode::Apply);
        let denied = store.decide_now(std::slice::from_ref(&c), Mode::Apply);
        assert!(denied.outcomes[0].blocked_until_us.is_some());
        clock.advance(std::time::Duration::from_secs(30));
        store.sweep();
        assert_eq!(store.len(), 1, "the block still matters");
        clock.advance(std::time::Duration::from_secs(31));
        store.sweep();
        assert!(store.is_empty());
    }
}
