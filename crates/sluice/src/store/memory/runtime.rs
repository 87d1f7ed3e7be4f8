//! Run-time numbers in the memory store: per rule and limit, each identity's
//! [`RuntimeNumbers`].
//!
//! Invariant: the table is read by a decision while it holds the shard lock of the key it decides
//! (and a change is made holding that same lock), so a decision sees a key's numbers from before
//! a change or after it, and one that starts after a change returns sees the change. Entries are
//! kept until removed (never swept, never evicted: they are settings, not state) and each limit
//! holds at most the `max_entries` its sets were given. A change of a quota's billing day moves
//! the key's count to the new day's period under that same lock, so no decision sees the new day
//! without the count (`fixed_window::carry_over`).

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use super::{MemoryStore, ShardGuard};
use crate::algorithm::{AlgoState, RuntimeNumbers, fixed_window};
use crate::model::Period;
use crate::store::{KeyRef, LimitKey, RuntimeEntry};

/// Identity → numbers, per limit id, per rule.
type Limits = HashMap<String, HashMap<String, HashMap<String, RuntimeNumbers>>>;

/// The run-time numbers of every settable limit.
#[derive(Debug, Default)]
pub(super) struct RuntimeTable {
    limits: RwLock<Limits>,
}

impl RuntimeTable {
    /// The numbers of one key; the caller holds the key's shard lock.
    pub(super) fn get(&self, key: KeyRef<'_>) -> Option<RuntimeNumbers> {
        let limits = self.limits.read().unwrap_or_else(PoisonError::into_inner);
        limits
            .get(key.rule)?
            .get(key.limit_id)?
            .get(key.identity)
            .copied()
    }
}

impl MemoryStore {
    pub(super) fn set_runtime_now(
        &self,
        key: &LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static Period>,
    ) -> bool {
        let (hash, shard) = self.locate(key.into());
        let mut decisions_of_this_key = self.shard(shard);
        let mut limits = self
            .inner
            .runtime
            .limits
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let entries = limits
            .entry(key.rule.to_string())
            .or_default()
            .entry(key.limit_id.to_string())
            .or_default();
        if !entries.contains_key(&key.identity) && entries.len() >= max_entries {
            return false;
        }
        let was = entries.insert(key.identity.clone(), numbers);
        if let Some(period) = period {
            let from = was.and_then(|n| n.anchor);
            self.carry_over(
                &mut decisions_of_this_key,
                hash,
                key,
                period,
                from,
                numbers.anchor,
            );
        }
        true
    }

    /// Moves the key's quota count from the period billing day `from` gives to the one `to`
    /// gives (`None`: `period`'s own), under its shard lock.
    fn carry_over(
        &self,
        shard: &mut ShardGuard<'_>,
        hash: u64,
        key: &LimitKey,
        period: &'static Period,
        from: Option<u8>,
        to: Option<u8>,
    ) {
        let day = |anchor: Option<u8>| anchor.map_or(period, |a| period.with_anchor(a));
        let (from, to) = (day(from), day(to));
        if from == to {
            return;
        }
        let now = self.inner.clock.now_us();
        let Some(entry) = shard.find(hash, key.into()) else {
            return;
        };
        if entry.expires_us <= now {
            return;
        }
        let end = entry.state.with(|state| match &mut state.algo {
            AlgoState::FixedWindow(window) => fixed_window::carry_over(window, now, from, to),
            _ => None,
        });
        if let Some(end) = end {
            entry.expires_us = end;
            shard.expires_at(end);
        }
    }

    pub(super) fn remove_runtime_now(
        &self,
        key: &LimitKey,
        period: Option<&'static Period>,
    ) -> bool {
        let (hash, shard) = self.locate(key.into());
        let mut decisions_of_this_key = self.shard(shard);
        let mut limits = self
            .inner
            .runtime
            .limits
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        let Some(by_limit) = limits.get_mut(&*key.rule) else {
            return false;
        };
        let Some(entries) = by_limit.get_mut(&*key.limit_id) else {
            return false;
        };
        let removed = entries.remove(&key.identity);
        if let (Some(period), Some(was)) = (period, removed) {
            self.carry_over(
                &mut decisions_of_this_key,
                hash,
                key,
                period,
                was.anchor,
                None,
            );
        }
        let removed = removed.is_some();
        if entries.is_empty() {
            by_limit.remove(&*key.limit_id);
            if by_limit.is_empty() {
                limits.remove(&*key.rule);
            }
        }
        removed
    }

    pub(super) fn runtime_now(&self, key: &LimitKey) -> Option<RuntimeNumbers> {
        self.inner.runtime.get(key.into())
    }

    pub(super) fn runtime_entries_now(&self, rule: &str, limit_id: &str) -> Vec<RuntimeEntry> {
        let limits = self
            .inner
            .runtime
            .limits
            .read()
            .unwrap_or_else(PoisonError::into_inner);
        limits
            .get(rule)
            .and_then(|by_limit| by_limit.get(limit_id))
            .map(|entries| {
                entries
                    .iter()
                    .map(|(identity, &numbers)| RuntimeEntry {
                        identity: identity.clone(),
                        numbers,
                    })
                    .collect()
            })
            .unwrap_or_default()
    }
}
