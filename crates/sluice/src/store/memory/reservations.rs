//! Reservations in the memory store: remembered beside the shards until settled or out of time.
//!
//! A reservation is taken out of the map before its limit is charged or given back, under the
//! map's lock, so two settlements of one reservation cannot both apply. The map holds at most
//! [`MemoryOptions::max_keys`](super::MemoryOptions::max_keys) reservations: when it is full, those
//! out of time are dropped, and if every one is live the new ones are refused (the check's
//! estimate then stands, as for a reservation never settled).

use std::collections::HashMap;

use parking_lot::Mutex;

use super::{KeyRef, MemoryStore, StoreError};
use crate::algorithm::LeaseToken;
use crate::algorithm::settle::{Settlement, settle};
use crate::model::Micros;
use crate::store::{LimitKey, ReserveCall, SettleCall};

/// What is remembered of one reservation on one limit.
#[derive(Debug, Clone, Copy)]
struct Reserved {
    estimate: u64,
    at_us: Micros,
    until_us: Micros,
}

/// The reservations of a memory store.
#[derive(Debug, Default)]
pub(super) struct Reservations(Mutex<HashMap<(LimitKey, LeaseToken), Reserved>>);

impl Reservations {
    fn remember(&self, calls: &[ReserveCall], now: Micros, cap: usize) -> Result<(), StoreError> {
        let mut map = self.0.lock();
        if map.len() + calls.len() > cap {
            map.retain(|_, r| r.until_us > now);
            if map.len() + calls.len() > cap {
                return Err(StoreError::transient(
                    "memory",
                    format!("full: {cap} reservations, all live"),
                ));
            }
        }
        for call in calls {
            map.insert(
                (call.key.clone(), call.token),
                Reserved {
                    estimate: call.estimate,
                    at_us: call.at_us,
                    until_us: call.at_us.saturating_add(call.for_us),
                },
            );
        }
        Ok(())
    }

    fn take(&self, key: &LimitKey, token: LeaseToken, now: Micros) -> Option<Reserved> {
        self.0
            .lock()
            .remove(&(key.clone(), token))
            .filter(|r| r.until_us > now)
    }
}

impl MemoryStore {
    pub(super) fn reserve_now(&self, calls: &[ReserveCall]) -> Result<(), StoreError> {
        let now = self.inner.clock.now_us();
        self.inner
            .reservations
            .remember(calls, now, self.inner.max_keys)
    }

    pub(super) fn settle_now(&self, calls: &[SettleCall]) -> Result<Vec<bool>, StoreError> {
        let mut out = Vec::with_capacity(calls.len());
        for call in calls {
            let now = self.inner.clock.now_us();
            let Some(r) = self.inner.reservations.take(&call.key, call.token, now) else {
                out.push(false);
                continue;
            };
            let key = KeyRef::from(&call.key);
            let (hash, shard) = self.locate(key);
            let mut shard = self.shard(shard);
            let (mut state, _) = shard.take(hash, key, now);
            let settlement = Settlement {
                at_us: r.at_us,
                estimate: r.estimate,
                actual: call.actual,
            };
            let (ttl, keep) = state.with(|state| {
                let ttl = settle(
                    &mut state.algo,
                    call.algorithm,
                    now,
                    &call.params,
                    settlement,
                );
                (ttl, state.ttl_us(ttl.unwrap_or_default(), now))
            });
            if shard.put(hash, key, state, keep, now).is_err() {
                return Err(self.full());
            }
            out.push(ttl.is_some());
        }
        Ok(out)
    }
}
