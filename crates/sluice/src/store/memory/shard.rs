//! One shard of the memory store: a hash table of key states under one lock, with its share of
//! the key cap and the sweeps that keep it small.
//!
//! Invariants: a shard never holds more than its `cap` entries; an entry is removed only when its
//! state can no longer affect a decision (its `expires_us` has passed), or on an explicit reset.
//! So dropping entries to make room never lets a kept key, or a returning one, admit more than
//! its limit: when every entry is still live, a new key is refused instead (see
//! [`Shard::make_room`]).

use foldhash::fast::RandomState;
use hashbrown::HashTable;

use super::packed_state::PackedState;
use super::stored_key::StoredKey;
use crate::metric_catalog::names;
use crate::model::Micros;
use crate::store::KeyRef;

/// A key's state: one cache line, aligned to one. The key's hash is not kept: the table's tag
/// bits filter before the key (in the same line) is compared, and a table that grows hashes
/// its keys again.
#[derive(Debug)]
#[repr(align(64))]
pub(super) struct Entry {
    /// After this time the state is equivalent to no state.
    pub expires_us: Micros,
    pub state: PackedState,
    pub key: StoredKey,
}

/// The shard is at its cap and every entry is live: a new key cannot be stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Full;

#[derive(Debug)]
pub(super) struct Shard {
    table: HashTable<Entry>,
    /// The store's hash seed, to hash keys again when the table grows.
    hasher: RandomState,
    /// Length at which to sweep expired entries: twice what was live at the last sweep.
    sweep_at_len: usize,
    /// Most entries this shard may hold.
    cap: usize,
    /// No entry expires before this (it may be later than the true earliest): a shard at its
    /// cap sweeps only once something can have expired, so refused keys cost no repeated scans.
    earliest_expiry_us: Micros,
    /// Entries dropped to make room for a new key (all of them expired).
    pub evictions: u64,
    /// New keys refused because every entry was live.
    pub refusals: u64,
}

impl Shard {
    pub fn new(cap: usize, hasher: RandomState) -> Shard {
        Shard {
            table: HashTable::new(),
            hasher,
            sweep_at_len: 64,
            cap,
            earliest_expiry_us: Micros::ZERO,
            evictions: 0,
            refusals: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter()
    }

    /// Drops every entry whose state has expired; returns how many.
    pub fn sweep(&mut self, now: Micros) -> usize {
        let before = self.table.len();
        let mut earliest = Micros::MAX;
        self.table.retain(|e| {
            let live = e.expires_us > now;
            if live {
                earliest = earliest.min(e.expires_us);
            }
            live
        });
        self.earliest_expiry_us = earliest;
        self.sweep_at_len = (self.table.len() * 2).max(64);
        before - self.table.len()
    }

    /// Notes that an entry now expires at `expires_us`.
    pub fn expires_at(&mut self, expires_us: Micros) {
        self.earliest_expiry_us = self.earliest_expiry_us.min(expires_us);
    }

    pub fn find(&mut self, hash: u64, key: KeyRef<'_>) -> Option<&mut Entry> {
        self.table.find_mut(hash, |e| e.key.is(key))
    }

    /// Removes a key's state, returning it with the time it expires (no state if expired).
    pub fn take(&mut self, hash: u64, key: KeyRef<'_>, now: Micros) -> (PackedState, Micros) {
        match self.table.find_entry(hash, |e| e.key.is(key)) {
            Ok(found) if found.get().expires_us > now => {
                let (e, _) = found.remove();
                (e.state, e.expires_us)
            }
            Ok(found) => {
                found.remove();
                (PackedState::Empty, now)
            }
            Err(_) => (PackedState::Empty, now),
        }
    }

    /// Makes sure `new` more keys fit. At the cap, the eviction order is: every entry whose state
    /// has expired (it equals no state, so forgetting it changes no decision); then nothing —
    /// any live state (a count, a timestamp, a block, remembered violations) could still deny a
    /// request, and forgetting it would let its identity start over, so the new keys are refused.
    pub fn make_room(&mut self, new: usize, now: Micros) -> Result<(), Full> {
        if self.table.len() + new <= self.cap {
            return Ok(());
        }
        if now >= self.earliest_expiry_us {
            let evicted = self.sweep(now);
            self.evictions += evicted as u64;
            metrics::counter!(names::MEMORY_EVICTIONS_TOTAL).increment(evicted as u64);
        }
        if self.table.len() + new <= self.cap {
            Ok(())
        } else {
            self.refusals += 1;
            metrics::counter!(names::MEMORY_REFUSED_KEYS_TOTAL).increment(1);
            Err(Full)
        }
    }

    /// Stores a key's state for `ttl_us` (not at all when 0). The key must not be present, and
    /// [`Shard::make_room`] must have said there is room.
    pub fn insert(
        &mut self,
        hash: u64,
        key: KeyRef<'_>,
        state: PackedState,
        ttl_us: Micros,
        now: Micros,
    ) {
        if ttl_us.is_zero() {
            return;
        }
        debug_assert!(self.table.len() < self.cap, "make_room was not asked");
        self.expires_at(now + ttl_us);
        let entry = Entry {
            expires_us: now + ttl_us,
            state,
            key: StoredKey::new(key),
        };
        let hasher = &self.hasher;
        self.table
            .insert_unique(hash, entry, |e| e.key.hash_with(hasher));
        if self.table.len() >= self.sweep_at_len {
            self.sweep(now);
        }
    }

    /// [`Shard::make_room`] for one key, then [`Shard::insert`]; nothing is stored when full.
    pub fn put(
        &mut self,
        hash: u64,
        key: KeyRef<'_>,
        state: PackedState,
        ttl_us: Micros,
        now: Micros,
    ) -> Result<(), Full> {
        if ttl_us.is_zero() {
            return Ok(());
        }
        self.make_room(1, now)?;
        self.insert(hash, key, state, ttl_us, now);
        Ok(())
    }
}

const _: () = assert!(
    std::mem::size_of::<Entry>() == 64,
    "an entry is one cache line"
);
