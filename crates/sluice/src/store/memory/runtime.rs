//! Run-time numbers in the memory store: per rule and limit, each identity's
//! [`RuntimeNumbers`].
//!
//! Invariant: the table is read by a decision while it holds the shard lock of the key it decides
//! (and a change is made holding that same lock), so a decision sees a key's numbers from before
//! a change or after it, and one that starts after a change returns sees the change. Entries are
//! kept until removed (never swept, never evicted: they are settings, not state) and each limit
//! holds at most the `max_entries` its sets were given.

use std::collections::HashMap;
use std::sync::{PoisonError, RwLock};

use super::MemoryStore;
use crate::algorithm::RuntimeNumbers;
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
    ) -> bool {
        let (_, shard) = self.locate(key.into());
        let _decisions_of_this_key = self.shard(shard);
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
        entries.insert(key.identity.clone(), numbers);
        true
    }

    pub(super) fn remove_runtime_now(&self, key: &LimitKey) -> bool {
        let (_, shard) = self.locate(key.into());
        let _decisions_of_this_key = self.shard(shard);
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
        let removed = entries.remove(&key.identity).is_some();
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
