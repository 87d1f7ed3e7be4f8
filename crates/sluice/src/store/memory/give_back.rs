//! Units a batch did not spend, given back to the memory store (see
//! [`GiveBackCall`](crate::store::GiveBackCall)).
//!
//! The draining meters give back through the settlement's arithmetic (an admission of `units` at
//! `at_us` settled at nothing: `max(units − drained, 0)` comes off the level, never below empty);
//! a fixed window takes the units off its count only while the window they were counted in lasts.
//! Each call is one critical section on its shard, like a decision.

use super::{KeyRef, MemoryStore, StoreError};
use crate::algorithm::settle::{Settlement, settle};
use crate::algorithm::{AlgoState, Params, fixed_window};
use crate::model::{Algorithm, Micros};
use crate::store::GiveBackCall;

impl MemoryStore {
    pub(super) fn give_back_now(&self, calls: &[GiveBackCall]) -> Result<(), StoreError> {
        for call in calls {
            let key = KeyRef::from(&call.key);
            let (hash, shard) = self.locate(key);
            let mut shard = self.shard(shard);
            let now = self.inner.clock.now_us();
            let (mut state, expires_us) = shard.take(hash, key, now);
            let keep = state.with(|state| {
                give_back(&mut state.algo, call, now);
                // The units only ever shorten what the state must be kept for.
                state.ttl_us(expires_us.saturating_sub(now), now)
            });
            if shard.put(hash, key, state, keep, now).is_err() {
                return Err(self.full());
            }
        }
        Ok(())
    }
}

/// Takes `call.units` admitted at `call.at_us` off `state`, as far as they still weigh on it.
fn give_back(state: &mut AlgoState, call: &GiveBackCall, now: Micros) {
    match (call.algorithm, &mut *state) {
        (Algorithm::TokenBucket, AlgoState::TokenBucket(_))
        | (Algorithm::Gcra, AlgoState::Gcra(_)) => {
            let settlement = Settlement {
                at_us: call.at_us,
                estimate: call.units,
                actual: 0,
            };
            settle(state, call.algorithm, now, &call.params, settlement);
        }
        (Algorithm::FixedWindow, AlgoState::FixedWindow(window)) => {
            fixed_window_give_back(window, &call.params, call.at_us, call.units);
        }
        // No state of that algorithm (expired, reset, or another algorithm now): nothing to undo.
        _ => {}
    }
}

fn fixed_window_give_back(state: &mut fixed_window::State, p: &Params, at_us: Micros, units: u64) {
    if state.window_start == fixed_window::window_at(at_us, p).0 {
        state.count = state.count.saturating_sub(units);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{Mode, S};

    #[test]
    fn a_fixed_window_gets_units_back_only_in_their_window() {
        let p = Params::new(10, 10 * S, 10);
        let mut w = fixed_window::State::default();
        fixed_window::decide(&mut w, 12 * S, &p, 8, Mode::Apply);
        fixed_window_give_back(&mut w, &p, 12 * S, 5);
        assert_eq!(w.count, 3);
        fixed_window_give_back(&mut w, &p, 5 * S, 3);
        assert_eq!(w.count, 3, "units of another window are not this one's");
        fixed_window_give_back(&mut w, &p, 19 * S, 9);
        assert_eq!(w.count, 0, "never below empty");
    }
}
