//! Unit tests of the denial cache: the invariants of its module docs, one by one, on a manual
//! clock; limits with a block, a penalty or `count_denied`, cached only while blocked
//! (`traced_limits`); and, against the pure algorithms (`against_algorithms`), that a cached
//! denial never outlives the store's.
use super::*;
use crate::ManualClock;
use crate::algorithm::Params;

const S: Micros = Micros::from_secs(1);

fn key(identity: &str) -> LimitKey {
    LimitKey {
        rule: "login".into(),
        limit_id: "ip".into(),
        identity: identity.into(),
    }
}

fn step(algorithm: Algorithm, limit: u64, window_us: Micros, cost: u64) -> LimitStep {
    LimitStep {
        algorithm,
        params: Params::new(limit, window_us, limit),
        cost,
        block_us: None,
        penalty: None,
        shadow: false,
        lease: None,
        settable: false,
    }
}

fn denied(retry_after_us: Micros) -> LimitOutcome {
    LimitOutcome {
        allowed: false,
        remaining: 0,
        reset_after_us: retry_after_us,
        retry_after_us: Some(retry_after_us),
        delay_us: Micros::ZERO,
        blocked_until_us: None,
        violations: 0,
        warning: false,
        runtime: None,
    }
}

/// A cache on a manual clock whose channel confirms at every reading: staleness plays no part.
fn cache(max_entries: usize) -> (DenialCache, ManualClock) {
    let clock = ManualClock::at_2026();
    let options = DenialCacheOptions {
        max_entries,
        ..DenialCacheOptions::default()
    };
    (DenialCache::new(&options, Arc::new(clock.clone())), clock)
}

fn confirm(cache: &DenialCache) {
    cache.confirmed(cache.now_us());
}

fn advance(clock: &ManualClock, by: Micros) {
    clock.advance(by.into());
}

#[test]
fn a_denial_answers_until_its_retry_time_and_no_longer() {
    let (cache, clock) = cache(100);
    let gcra = step(Algorithm::Gcra, 1, 60 * S, 1);
    let store_now = Micros::new(42); // the store's clock plays no part in local times
    cache.insert(
        cache.call_start(),
        &key("a"),
        &gcra,
        &denied(60 * S),
        store_now,
    );
    assert_eq!(cache.len(), 1);
    let hit = cache.lookup((&key("a")).into(), 1).expect("cached");
    assert!(!hit.allowed);
    assert_eq!(hit.retry_after_us, Some(60 * S));
    assert_eq!(
        cache.lookup((&key("b")).into(), 1),
        None,
        "other identities ask the store"
    );
    advance(&clock, 60 * S - Micros::new(1));
    confirm(&cache);
    assert_eq!(
        cache.lookup((&key("a")).into(), 1).unwrap().retry_after_us,
        Some(Micros::new(1))
    );
    advance(&clock, Micros::new(1));
    assert_eq!(
        cache.lookup((&key("a")).into(), 1),
        None,
        "the store may admit it now"
    );
    assert!(cache.is_empty(), "an expired entry is dropped when met");
}

#[test]
fn a_denial_at_one_cost_speaks_for_larger_costs_only() {
    let (cache, _clock) = cache(100);
    cache.insert(
        cache.call_start(),
        &key("a"),
        &step(Algorithm::FixedWindow, 5, 60 * S, 3),
        &denied(10 * S),
        Micros::ZERO,
    );
    assert_eq!(cache.lookup((&key("a")).into(), 1), None);
    assert_eq!(cache.lookup((&key("a")).into(), 2), None);
    assert!(cache.lookup((&key("a")).into(), 3).is_some());
    assert!(cache.lookup((&key("a")).into(), 7).is_some());
}

#[test]
fn float_algorithms_end_their_entries_a_little_early() {
    let (cache, clock) = cache(100);
    let bucket = step(Algorithm::TokenBucket, 1, 3600 * S, 1);
    cache.insert(
        cache.call_start(),
        &key("a"),
        &bucket,
        &denied(3600 * S),
        Micros::ZERO,
    );
    let margin = float_margin_us(&bucket);
    assert!(
        margin > Micros::new(3_000),
        "1e-6 of a unit of 1/h is 3.6 ms: {margin:?}"
    );
    advance(&clock, 3600 * S - margin - Micros::new(1));
    confirm(&cache);
    assert!(cache.lookup((&key("a")).into(), 1).is_some());
    advance(&clock, Micros::new(1));
    assert_eq!(cache.lookup((&key("a")).into(), 1), None);
}

#[test]
fn reported_waits_count_from_the_reply() {
    let (cache, clock) = cache(100);
    let start = cache.call_start();
    advance(&clock, Micros::new(2_000)); // the round trip
    cache.insert(
        start,
        &key("a"),
        &step(Algorithm::Gcra, 1, 60 * S, 1),
        &denied(60 * S),
        Micros::ZERO,
    );
    let hit = cache.lookup((&key("a")).into(), 1).unwrap();
    assert_eq!(
        hit.retry_after_us,
        Some(60 * S),
        "from the reply: never early"
    );
    advance(&clock, 60 * S - Micros::new(2_000));
    confirm(&cache);
    assert_eq!(
        cache.lookup((&key("a")).into(), 1),
        None,
        "but the entry ends counted from the call, so it never outlives the store's denial"
    );
}

#[test]
fn without_confirmations_entries_live_at_most_max_stale() {
    let (cache, clock) = cache(100);
    let gcra = step(Algorithm::Gcra, 1, 60 * S, 1);
    cache.insert(
        cache.call_start(),
        &key("a"),
        &gcra,
        &denied(60 * S),
        Micros::ZERO,
    );
    advance(&clock, S - Micros::new(1));
    assert!(cache.lookup((&key("a")).into(), 1).is_some());
    advance(&clock, Micros::new(1));
    assert_eq!(
        cache.lookup((&key("a")).into(), 1),
        None,
        "never confirmed: 1 s at most"
    );

    // Confirmed at t, then silent: used until t + max_stale.
    cache.insert(
        cache.call_start(),
        &key("b"),
        &gcra,
        &denied(60 * S),
        Micros::ZERO,
    );
    advance(&clock, 10 * S);
    confirm(&cache);
    advance(&clock, S - Micros::new(1));
    assert!(cache.lookup((&key("b")).into(), 1).is_some());
    advance(&clock, Micros::new(1));
    assert_eq!(cache.lookup((&key("b")).into(), 1), None);
    confirm(&cache);
    assert!(
        cache.lookup((&key("b")).into(), 1).is_some(),
        "fresh again once the channel confirms (a new subscription clears it first)"
    );
}

#[test]
fn invalidations_forget_keys_rules_or_everything_at_once() {
    let (cache, _clock) = cache(100);
    let gcra = step(Algorithm::Gcra, 1, 60 * S, 1);
    let other_rule = LimitKey {
        rule: "api".into(),
        ..key("a")
    };
    for k in [key("a"), key("b"), other_rule.clone()] {
        cache.insert(cache.call_start(), &k, &gcra, &denied(60 * S), Micros::ZERO);
    }
    cache.invalidate(&Invalidation::Keys(vec![key("a")]));
    assert_eq!(cache.lookup((&key("a")).into(), 1), None);
    assert!(cache.lookup((&key("b")).into(), 1).is_some());
    cache.invalidate(&Invalidation::Rules(vec!["login".into()]));
    assert_eq!(cache.lookup((&key("b")).into(), 1), None);
    assert!(cache.lookup((&other_rule).into(), 1).is_some());
    cache.invalidate(&Invalidation::All);
    assert!(cache.is_empty());
}

#[test]
fn a_denial_that_raced_an_invalidation_is_dropped() {
    let (cache, _clock) = cache(100);
    let start = cache.call_start();
    // The store answered from the state before a reset; the reset's invalidation came first.
    cache.apply(Invalidation::Keys(vec![key("a")]));
    cache.insert(
        start,
        &key("a"),
        &step(Algorithm::Gcra, 1, 60 * S, 1),
        &denied(60 * S),
        Micros::ZERO,
    );
    assert!(cache.is_empty());
}

#[test]
fn memory_is_bounded_and_expired_entries_go_first() {
    let (cache, clock) = cache(64);
    let gcra = step(Algorithm::Gcra, 1, 60 * S, 1);
    for i in 0..10_000 {
        cache.insert(
            cache.call_start(),
            &key(&format!("ip={i}")),
            &gcra,
            &denied(60 * S),
            Micros::ZERO,
        );
        assert!(cache.len() <= 64 + SHARDS, "{} entries", cache.len());
    }
    // Short denials expire; the long ones inserted next push them out, not each other.
    let (cache, _) = (cache, ());
    cache.invalidate(&Invalidation::All);
    for i in 0..32 {
        let k = key(&format!("short{i}"));
        cache.insert(cache.call_start(), &k, &gcra, &denied(S / 2), Micros::ZERO);
    }
    advance(&clock, S);
    confirm(&cache);
    for i in 0..48 {
        let k = key(&format!("long{i}"));
        cache.insert(cache.call_start(), &k, &gcra, &denied(60 * S), Micros::ZERO);
    }
    let kept = (0..48)
        .filter(|i| {
            cache
                .lookup((&key(&format!("long{i}"))).into(), 1)
                .is_some()
        })
        .count();
    assert!(kept >= 40, "only {kept} of 48 live denials kept");
}

#[test]
fn a_disabled_size_keeps_nothing() {
    let (cache, _clock) = cache(0);
    let gcra = step(Algorithm::Gcra, 1, 60 * S, 1);
    cache.insert(
        cache.call_start(),
        &key("a"),
        &gcra,
        &denied(60 * S),
        Micros::ZERO,
    );
    assert!(cache.is_empty());
}

mod against_algorithms;
mod traced_limits;
