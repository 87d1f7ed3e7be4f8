//! Batches with the choices a limit makes per request: `when`, and the `unlimited` and `deny`
//! overrides are decided before any unit is taken or spent (no store call, nothing held), and
//! the requests the limit's own numbers apply to are served from batches on every path,
//! including the in-process store's allocation-free one. Numbers other than the limit's own
//! (overrides with numbers, `settable`) are refused beside batches.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::tests::Remote;
use crate::clock::ManualClock;
use crate::model::{Algorithm, Batches, Condition, Limit, Override, Rule};
use crate::{Limiter, MemoryStore};

fn when(json: &str) -> Condition {
    serde_json::from_str(json).expect("a valid condition")
}

/// Per tenant, on POST only, with batches; tenant `ops` unlimited, tenant `banned` refused.
fn rule() -> Rule {
    let limit = Limit::new(&["tenant"], "100000/1s".parse().unwrap(), Algorithm::Gcra)
        .with_batches(Batches::new(100, Duration::from_secs(1)))
        .when(when(r#"{"method": "POST"}"#))
        .with_override(Override::unlimited(when(r#"{"tenant": "ops"}"#)))
        .with_override(Override::deny(when(r#"{"tenant": "banned"}"#), "go away"));
    Rule::new(vec![limit])
}

#[tokio::test]
async fn conditions_and_outcomes_take_nothing_and_the_own_numbers_take_batches() {
    let clock = ManualClock::at_2026();
    let remote = Arc::new(Remote {
        store: MemoryStore::with_clock(Arc::new(clock.clone())),
        ..Remote::default()
    });
    let limiter = Limiter::builder(remote.clone())
        .clock(Arc::new(clock))
        .rule("hot", rule())
        .build()
        .unwrap();
    let get = [("tenant", "t1"), ("method", "GET")];
    let ops = [("tenant", "ops"), ("method", "POST")];
    let banned = [("tenant", "banned"), ("method", "POST")];
    for _ in 0..50 {
        assert!(limiter.check("hot", &get).await.unwrap().allowed);
        assert!(limiter.check("hot", &ops).await.unwrap().allowed);
        let d = limiter.check("hot", &banned).await.unwrap();
        assert_eq!((d.allowed, d.reason.as_deref()), (false, Some("go away")));
    }
    assert_eq!(remote.calls.load(Ordering::SeqCst), 0, "no store call");
    assert_eq!(limiter.held_units()[0].taken, 0, "nothing taken");

    let post = [("tenant", "t1"), ("method", "POST")];
    for _ in 0..1000 {
        assert!(limiter.check("hot", &post).await.unwrap().allowed);
    }
    let calls = remote.calls.load(Ordering::SeqCst);
    assert!((10..=20).contains(&calls), "one call per batch: {calls}");
    assert!(limiter.held_units()[0].taken >= 1000);
}

/// On an in-process store a one-limit rule with a condition is decided without allocating
/// unless it takes batches: the batches must not be skipped there.
#[tokio::test]
async fn a_conditional_rule_on_an_in_process_store_spends_batches() {
    let limiter = Limiter::builder(MemoryStore::new())
        .rule("hot", rule())
        .build()
        .unwrap();
    let post = [("tenant", "t1"), ("method", "POST")];
    for _ in 0..100 {
        assert!(limiter.check("hot", &post).await.unwrap().allowed);
    }
    let held = &limiter.held_units()[0];
    assert!(held.taken >= 100, "{held:?}");
}

#[test]
fn overrides_with_other_numbers_are_refused_with_batches() {
    let numbers = Override::numbers(
        when(r#"{"plan": "pro"}"#),
        Some("200000/1s".parse().unwrap()),
        None,
    );
    let limit = Limit::new(&["tenant"], "100000/1s".parse().unwrap(), Algorithm::Gcra)
        .with_batches(Batches::new(100, Duration::from_secs(1)))
        .with_override(Override::unlimited(when(r#"{"tenant": "ops"}"#)))
        .with_override(numbers);
    let error = limit.validate().unwrap_err().to_string();
    assert!(error.contains("overrides[1]"), "{error}");
    assert!(error.contains("not other numbers"), "{error}");
    rule().limits[0]
        .validate()
        .expect("when, unlimited and deny combine with batches");
}

#[test]
fn a_settable_limit_cannot_take_batches() {
    let mut limit = rule().limits[0].clone();
    limit.settable = true;
    let error = limit.validate().unwrap_err().to_string();
    assert!(error.contains("cannot be settable"), "{error}");
}
