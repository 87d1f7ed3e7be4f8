//! The memory store's own memory bound (the key cap is tested through the limiter in
//! `tests/memory_cap.rs`).

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
