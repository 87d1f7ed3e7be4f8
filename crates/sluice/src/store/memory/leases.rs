//! Leases in the memory store: releasing and renewing the leases a concurrency limit's state
//! holds (see [`crate::algorithm::release`]), each under its shard's lock like a decision.

use super::{KeyRef, MemoryStore};
use crate::algorithm::{AlgoState, concurrency};
use crate::model::Micros;
use crate::store::LeaseCall;

impl MemoryStore {
    pub(super) fn release_now(&self, leases: &[LeaseCall]) -> Vec<bool> {
        leases
            .iter()
            .map(|call| {
                self.with_leases(call, |state, now| {
                    concurrency::release(state, now, call.token).then_some(())
                })
                .is_some()
            })
            .collect()
    }

    pub(super) fn renew_now(&self, leases: &[LeaseCall]) -> Vec<Option<Micros>> {
        leases
            .iter()
            .map(|call| {
                self.with_leases(call, |state, now| {
                    concurrency::renew(state, now, call.lease_us, call.token)
                })
            })
            .collect()
    }

    /// Runs `f` on the leases held on `call`'s key, if it holds a concurrency state in force,
    /// and keeps the entry as long as its state then matters.
    fn with_leases<T>(
        &self,
        call: &LeaseCall,
        f: impl FnOnce(&mut concurrency::State, Micros) -> Option<T>,
    ) -> Option<T> {
        let key = KeyRef::from(&call.key);
        let (hash, shard) = self.locate(key);
        let mut shard = self.shard(shard);
        let now = self.inner.clock.now_us();
        let entry = shard.find(hash, key).filter(|e| e.expires_us > now)?;
        // Leases are never held inline (see `packed_state`).
        let state = entry.state.boxed()?;
        let AlgoState::Concurrency(leases) = &mut state.algo else {
            return None;
        };
        let out = f(leases, now);
        let algo_ttl = leases.reset_after_us(now);
        let ttl = state.ttl_us(algo_ttl, now);
        entry.expires_us = now + ttl;
        shard.expires_at(now + ttl);
        out
    }
}
