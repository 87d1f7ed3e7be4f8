//! Against the pure algorithms: whatever the history, a cached denial never outlives the denial
//! the store itself would give.

use proptest::prelude::*;

use super::super::*;
use super::{cache, key, step};
use crate::algorithm::step::{KeyState, decide_one};
use crate::algorithm::{Mode, Params};

fn algorithm() -> impl Strategy<Value = Algorithm> {
    prop::sample::select(Algorithm::ALL.to_vec())
}

proptest! {
    /// Whatever the history, a request the cache would deny at any time before its entry ends
    /// is one the algorithm denies too (invariant 2), for every algorithm.
    #[test]
    fn a_cached_denial_never_outlives_the_stores(
        algorithm in algorithm(),
        limit in 1u64..20,
        window_ms in 1u64..100_000,
        burst in 0u64..30,
        history in prop::collection::vec((0u64..5_000_000, 1u64..4), 1..40),
        cost in 1u64..5,
        probe in 0.0f64..1.0,
    ) {
        let capacity = if algorithm.supports_burst() && burst > 0 { burst } else { limit };
        let mut s = LimitStep {
            params: Params::new(limit, Micros::from_millis(window_ms), capacity),
            ..step(algorithm, limit, Micros::from_millis(window_ms), 1)
        };
        let mut state = KeyState::default();
        let mut now = Micros::new(1_767_225_600_000_000);
        for (gap, c) in history {
            now += Micros::new(gap);
            s.cost = c.min(capacity);
            decide_one(&mut state, &s, now, Mode::Apply);
        }
        s.cost = cost.min(capacity);
        let (outcome, _) = decide_one(&mut state, &s, now, Mode::Apply);
        let (cache, clock) = cache(10);
        clock.set_us(now);
        cache.insert(cache.call_start(), &key("a"), &s, &outcome, now);
        let Some(entry_end) = cache.lookup((&key("a")).into(), s.cost).map(|_| {
            let shard = cache.shards.iter().find_map(|sh| {
                sh.lock().table.iter().next().map(|e| e.end_us())
            });
            shard.expect("one entry")
        }) else {
            return Ok(());
        };
        prop_assert!(!outcome.allowed);
        let last = entry_end - Micros::new(1);
        let between = Micros::new(((last - now).get() as f64 * probe) as u64);
        for at in [now, last, now + between] {
            let (o, _) = decide_one(&mut state.clone(), &s, at, Mode::Peek);
            prop_assert!(!o.allowed, "{algorithm:?} admits at {:?} < {:?}", at - now, entry_end - now);
        }
    }
}
