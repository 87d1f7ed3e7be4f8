//! The memory store's key cap, through the limiter: a flood of new identities cannot grow the
//! store past `max_keys`, no kept key ever admits more than its limit, expired keys make room,
//! and a refused identity is decided by the rule's fail policy.
//! Time is a `ManualClock`; nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use sluice::model::{Algorithm, Limit, Rule};
use sluice::store::memory::{MemoryOptions, SHARDS};
use sluice::{Check, Decision, FailPolicy, Limiter, ManualClock, MemoryStore};

const CAP: usize = 10 * SHARDS;

fn store(clock: &ManualClock) -> MemoryStore {
    MemoryStore::with_options(Arc::new(clock.clone()), MemoryOptions { max_keys: CAP })
}

fn one_per_minute(fail: FailPolicy) -> Rule {
    let mut rule = Rule::new(vec![Limit::new(
        &["user"],
        "1/1m".parse().unwrap(),
        Algorithm::FixedWindow,
    )]);
    rule.fail = Some(fail);
    rule
}

fn limiter(store: &MemoryStore, clock: &ManualClock) -> Limiter {
    Limiter::builder(store.clone())
        .clock(Arc::new(clock.clone()))
        .rule("closed", one_per_minute(FailPolicy::Closed))
        .rule("open", one_per_minute(FailPolicy::Open))
        .build()
        .unwrap()
}

/// Checks new identities until one is refused; returns the identities the store kept and the
/// refused identity's decision.
async fn fill(limiter: &Limiter, rule: &str) -> (Vec<String>, Decision) {
    let mut kept = Vec::new();
    for i in 0..100 * CAP {
        let user = format!("u{i}");
        let d = limiter.check(rule, &[("user", &user)]).await.unwrap();
        if d.degraded {
            return (kept, d);
        }
        assert!(d.allowed);
        kept.push(user);
    }
    panic!(
        "{} new identities and none refused: the store has no cap",
        100 * CAP
    )
}

#[tokio::test]
async fn a_flood_of_identities_stops_at_the_cap_and_kept_keys_stay_exact() {
    let clock = ManualClock::at_2026();
    let store = store(&clock);
    let limiter = limiter(&store, &clock);
    let (kept, refused) = fill(&limiter, "closed").await;
    assert!(!refused.allowed);
    assert!(kept.len() <= CAP && store.len() <= CAP, "{}", store.len());
    // Each shard holds its share; the first refusal comes once one shard is full.
    assert!(kept.len() >= 10, "{}", kept.len());
    assert_eq!(store.evictions(), 0, "every key is live: none was evicted");

    // A new identity now is refused, and `closed` denies it, marked degraded.
    let flood: Vec<_> = (0..2 * CAP).map(|i| format!("flood{i}")).collect();
    let mut refused = 0u64;
    for user in &flood {
        let d = limiter.check("closed", &[("user", user)]).await.unwrap();
        if d.degraded {
            assert!(!d.allowed);
            assert!(d.reason.as_deref().unwrap().contains("full"), "{d:?}");
            refused += 1;
        }
    }
    assert!(refused > CAP as u64 / 2, "{refused}");
    assert!(store.len() <= CAP);
    assert!(store.refused_keys() >= refused);

    // Nothing that was kept was forgotten: each kept identity is still at its limit.
    for user in &kept {
        let d = limiter.check("closed", &[("user", user)]).await.unwrap();
        assert!(
            !d.allowed && !d.degraded,
            "{user} admitted twice in its window"
        );
    }
    // Half a window later the counts are still live: still nothing evicted.
    clock.advance(Duration::from_secs(30));
    let d = limiter.check("closed", &[("user", "late")]).await.unwrap();
    assert!(d.degraded && !d.allowed);
    assert_eq!(store.evictions(), 0);
}

#[tokio::test]
async fn expired_keys_make_room_and_open_admits_refused_identities() {
    let clock = ManualClock::at_2026();
    let store = store(&clock);
    let limiter = limiter(&store, &clock);
    let (kept, refused) = fill(&limiter, "open").await;
    // Under `open`, a refused identity passes (degraded); it is not stored.
    assert!(refused.allowed);
    let held = store.len();
    assert_eq!(held, kept.len());

    clock.advance(Duration::from_secs(61));
    // Once the window is over every count has expired. The identity refused above (its shard
    // is the full one) now evicts them and is kept, exactly.
    let refused_user = format!("u{}", kept.len());
    let d = limiter
        .check("open", &[("user", &refused_user)])
        .await
        .unwrap();
    assert!(d.allowed && !d.degraded, "{d:?}");
    assert!(store.evictions() >= 1);
    assert!(store.len() <= held);
    let d = limiter
        .check("open", &[("user", &refused_user)])
        .await
        .unwrap();
    assert!(!d.allowed && !d.degraded, "its count was kept");
    // The old identities start a new window, exactly once each.
    let d = limiter.check("open", &[("user", &kept[0])]).await.unwrap();
    assert!(d.allowed && !d.degraded);
}

#[tokio::test]
async fn a_multi_limit_request_that_does_not_fit_changes_nothing() {
    let clock = ManualClock::at_2026();
    let store = store(&clock);
    let mut rule = Rule::new(vec![
        Limit::new(&["user"], "3/1m".parse().unwrap(), Algorithm::FixedWindow),
        Limit::new(
            &["user", "item"],
            "3/1m".parse().unwrap(),
            Algorithm::FixedWindow,
        ),
    ]);
    rule.fail = Some(FailPolicy::Closed);
    let limiter = Limiter::builder(store.clone())
        .clock(Arc::new(clock.clone()))
        .rule("fill", one_per_minute(FailPolicy::Closed))
        .rule("pair", rule)
        .build()
        .unwrap();
    let d = limiter
        .check("pair", &[("user", "u"), ("item", "0")])
        .await
        .unwrap();
    assert_eq!(d.remaining, 2);
    // Enough new identities that nearly every shard is full.
    for i in 0..4 * CAP {
        let user = format!("f{i}");
        limiter.check("fill", &[("user", &user)]).await.unwrap();
    }
    // New items for `u` until one lands in a full shard: that request is refused whole, and
    // `u`'s own count is not consumed by it.
    let mut refused = false;
    for item in 1..200 {
        let item = item.to_string();
        let before = limiter
            .check_with("pair", &[("user", "u"), ("item", "0")], Check::ONE.peek())
            .await
            .unwrap();
        let d = limiter
            .check("pair", &[("user", "u"), ("item", item.as_str())])
            .await
            .unwrap();
        let after = limiter
            .check_with("pair", &[("user", "u"), ("item", "0")], Check::ONE.peek())
            .await
            .unwrap();
        if d.degraded {
            assert!(!d.allowed);
            assert_eq!(after.limits[0].remaining, before.limits[0].remaining);
            refused = true;
            break;
        }
    }
    assert!(refused, "a full shard was hit");
}
