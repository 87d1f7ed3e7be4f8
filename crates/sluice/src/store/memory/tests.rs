//! The memory store's own behaviour: its memory bound and how it holds states (the key cap is
//! tested through the limiter in `tests/it/memory_cap.rs`).

use super::*;
use crate::algorithm::{LimitStep, Params};
use crate::clock::ManualClock;
use crate::model::Algorithm;

fn call(i: usize, block_us: Option<Micros>) -> LimitCall {
    LimitCall {
        key: LimitKey {
            rule: "r".into(),
            limit_id: "l".into(),
            identity: format!("ip={i}"),
        },
        step: LimitStep {
            algorithm: Algorithm::Gcra,
            params: Params::new(1, Micros::from_secs(1), 1),
            cost: 1,
            block_us,
            penalty: None,
            shadow: false,
            lease: None,
            settable: false,
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
            store
                .decide_now(&[call(round * 10_000 + i, None)], Mode::Apply)
                .unwrap();
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
    let c = call(1, Some(Micros::from_secs(60)));
    store
        .decide_now(std::slice::from_ref(&c), Mode::Apply)
        .unwrap();
    let denied = store
        .decide_now(std::slice::from_ref(&c), Mode::Apply)
        .unwrap();
    assert!(denied.outcomes[0].blocked_until_us.is_some());
    clock.advance(std::time::Duration::from_secs(30));
    store.sweep();
    assert_eq!(store.len(), 1, "the block still matters");
    clock.advance(std::time::Duration::from_secs(31));
    store.sweep();
    assert!(store.is_empty());
}

#[test]
fn a_request_of_several_limits_keeps_inline_and_boxed_states_alike() {
    let clock = ManualClock::at_2026();
    let store = MemoryStore::with_clock(Arc::new(clock.clone()));
    let limit = |id: &str, algorithm, count, block_us| LimitCall {
        key: LimitKey {
            rule: "r".into(),
            limit_id: id.into(),
            identity: "ip=1".into(),
        },
        step: LimitStep {
            algorithm,
            params: Params::new(count, Micros::from_secs(60), count),
            cost: 1,
            block_us,
            penalty: None,
            shadow: false,
            lease: None,
            settable: false,
        },
    };
    // A GCRA state is held inline, a sliding window's in a box; the fixed window's goes into
    // one once its block starts.
    let calls = [
        limit("gcra", Algorithm::Gcra, 5, None),
        limit("window", Algorithm::SlidingWindow, 4, None),
        limit(
            "fixed",
            Algorithm::FixedWindow,
            3,
            Some(Micros::from_secs(600)),
        ),
    ];
    let remaining =
        |reply: &StoreReply| -> Vec<u64> { reply.outcomes.iter().map(|o| o.remaining).collect() };
    for left in [[4, 3, 2], [3, 2, 1], [2, 1, 0]] {
        let reply = store.decide_now(&calls, Mode::Apply).unwrap();
        assert!(reply.outcomes.iter().all(|o| o.allowed));
        assert_eq!(remaining(&reply), left);
    }
    // The fixed window denies and blocks; the denied request consumes nothing anywhere.
    for _ in 0..2 {
        let reply = store.decide_now(&calls, Mode::Apply).unwrap();
        assert!(!reply.outcomes[2].allowed);
        assert!(reply.outcomes[2].blocked_until_us.is_some());
        assert_eq!(remaining(&reply)[..2], [2, 1]);
    }
    // The block outlives the windows, in a box that stayed in the store; the other two states
    // have expired and a denied request stores nothing new.
    clock.advance(std::time::Duration::from_secs(120));
    let reply = store.decide_now(&calls, Mode::Apply).unwrap();
    assert!(reply.outcomes[2].blocked_until_us.is_some());
    assert_eq!(store.len(), 1);
}
