//! Billing days per identity on Redis, between nodes: a node decides an identity with its own
//! day in one call once it has seen the day, a node that has not is told the day by the decision
//! itself (one more call, nothing written by the first), and a change made on another node
//! reaches every node at its next decision. (What a day decides is the conformance suite's.)
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{redis_now, redis_store};
use sluice::model::{Limit, Period, PeriodUnit, RuntimeLimit};
use sluice::{Limiter, Options, Rule};
use sluice_test_support::RedisServer;

/// A node: a limiter on its own store (its own connection and cache) of the shared server.
async fn node(server: &RedisServer) -> Limiter {
    let plan = Limit::quota(&["tenant"], 100, Period::new(PeriodUnit::Month)).settable();
    Limiter::builder(Arc::new(redis_store(server, None).await))
        .rules([("plan".to_string(), Rule::new(vec![plan]))])
        .options(Options {
            timeout: Duration::from_secs(5),
            ..Options::default()
        })
        .build()
        .unwrap()
}

fn day(anchor: u8) -> RuntimeLimit {
    RuntimeLimit {
        anchor: Some(anchor),
        ..RuntimeLimit::default()
    }
}

/// The general decisions Redis ran for one check of tenant `t` on `node`, and what the check
/// left of the quota.
async fn calls_for_a_check(server: &RedisServer, node: &Limiter, t: &str) -> (u64, u64) {
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let d = node.check("plan", &[("tenant", t)]).await.unwrap();
    assert!(d.allowed && !d.degraded, "{d:?}");
    let general = server.command_calls("fcall") + server.command_calls("evalsha");
    (general, d.remaining)
}

/// The start of tenant `t`'s period as `node` reads it, and the one day `anchor` gives now.
async fn period_start(server: &RedisServer, node: &Limiter, t: &str, anchor: u8) -> (u64, u64) {
    let usage = node.usage("plan", &[("tenant", t)]).await.unwrap();
    let month = Period::new(PeriodUnit::Month).anchored(anchor).unwrap();
    (
        usage.limits[0].period_start_ms.unwrap(),
        month.bounds_at(redis_now(server)).start.as_millis(),
    )
}

#[tokio::test]
async fn an_identitys_day_is_learnt_from_the_decision_and_follows_a_change_made_elsewhere() {
    let server = RedisServer::start();
    let (a, b) = (node(&server).await, node(&server).await);
    // Tenants without a day of their own: one call, as for any settable limit.
    assert_eq!(calls_for_a_check(&server, &a, "plain").await, (1, 99));
    a.set_runtime_limit("plan", None, &[("tenant", "t")], &day(15))
        .await
        .unwrap();
    // The node that set it knows the day: one call.
    assert_eq!(calls_for_a_check(&server, &a, "t").await, (1, 99));
    // The other is told it by its first decision, which wrote nothing, then keeps it.
    assert_eq!(calls_for_a_check(&server, &b, "t").await, (2, 98));
    assert_eq!(calls_for_a_check(&server, &b, "t").await, (1, 97));
    let (read, expected) = period_start(&server, &b, "t", 15).await;
    assert_eq!(read, expected);
    // A change made on b reaches a at its next decision, with the count kept.
    b.set_runtime_limit("plan", None, &[("tenant", "t")], &day(20))
        .await
        .unwrap();
    assert_eq!(calls_for_a_check(&server, &a, "t").await, (2, 96));
    assert_eq!(calls_for_a_check(&server, &a, "t").await, (1, 95));
    let (read, expected) = period_start(&server, &a, "t", 20).await;
    assert_eq!(read, expected);
    // Removed on a: b, which still expects the 20th, is told the rule's day.
    assert!(
        a.remove_runtime_limit("plan", None, &[("tenant", "t")])
            .await
            .unwrap()
    );
    assert_eq!(calls_for_a_check(&server, &b, "t").await, (2, 94));
    let (read, expected) = period_start(&server, &b, "t", 1).await;
    assert_eq!(read, expected);
}

#[tokio::test]
async fn a_day_kept_on_a_limit_no_longer_monthly_is_harmless() {
    // A named monthly quota made daily in the rule file keeps its id, and so its entries: a day
    // kept there gives no period, and decisions go on (two calls each, until the entry is set
    // again or removed).
    let server = RedisServer::start();
    let mut daily = Limit::quota(&["tenant"], 2, Period::new(PeriodUnit::Day)).settable();
    daily.name = Some("plan".into());
    let limiter = Limiter::builder(Arc::new(redis_store(&server, None).await))
        .rules([("plan".to_string(), Rule::new(vec![daily]))])
        .options(Options {
            timeout: Duration::from_secs(5),
            ..Options::default()
        })
        .build()
        .unwrap();
    assert_eq!(calls_for_a_check(&server, &limiter, "t").await, (1, 1));
    let keys = sluice_test_support::decision_keys(&server.cli(&["KEYS", "sluice:*"]));
    assert_eq!(keys.len(), 1, "{keys:?}");
    assert_eq!(
        server.cli(&["SET", &format!("{}:r", keys[0]), "0 0 15"]),
        "OK"
    );
    assert_eq!(calls_for_a_check(&server, &limiter, "t").await, (2, 0));
    let d = limiter.check("plan", &[("tenant", "t")]).await.unwrap();
    assert!(!d.allowed && !d.degraded, "{d:?}");
    let usage = limiter.usage("plan", &[("tenant", "t")]).await.unwrap();
    let day = Period::new(PeriodUnit::Day).bounds_at(redis_now(&server));
    assert_eq!(usage.limits[0].period_start_ms, Some(day.start.as_millis()));
}
