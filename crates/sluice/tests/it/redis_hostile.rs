//! What a hostile request costs Redis: huge costs on shadow limits, errors that belong to one
//! request, and sliding logs whose work does not grow with the cost.
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

use std::time::Duration;

use common::{Harness, redis_store};
use sluice::model::{Algorithm, Limit, Penalty, Rate};
use sluice::store::redis::KeyNames;
use sluice::{FailPolicy, Limiter, Options, Rule};
use sluice_test_support::RedisServer;

fn limit(rate: &str, algorithm: Algorithm) -> Limit {
    Limit::new(&["ip"], rate.parse::<Rate>().unwrap(), algorithm)
}

#[tokio::test]
async fn a_huge_cost_on_a_shadow_limit_is_checked_and_degrades_nobody() {
    let h = Harness::redis().await;
    let mut shadow = limit("1/30d", Algorithm::TokenBucket);
    shadow.shadow = true;
    let mut gcra_shadow = limit("1/30d", Algorithm::Gcra);
    gcra_shadow.shadow = true;
    let limiter = h.limiter(vec![
        (
            "upload",
            Rule::new(vec![
                limit("10000000/1s", Algorithm::Gcra),
                shadow,
                gcra_shadow,
            ]),
        ),
        (
            "other",
            Rule::new(vec![limit("5/1m", Algorithm::FixedWindow)]),
        ),
    ]);
    for i in 0..5 {
        let d = limiter
            .check_with("upload", &[("ip", "1")], sluice::Check::cost(10_000_000))
            .await
            .unwrap();
        assert!(!d.degraded, "{d:?}");
        // The enforced limit holds the cost once, then is empty for 10 s.
        assert_eq!(d.allowed, i == 0, "{d:?}");
        assert!(d.limits[1].shadow && !d.limits[1].allowed, "{d:?}");
        assert!(!d.limits[2].allowed, "{d:?}");
    }
    assert!(!limiter.store_skipped());
    let d = limiter.check("other", &[("ip", "1")]).await.unwrap();
    assert!(d.allowed && !d.degraded, "{d:?}");
}

#[test]
fn rules_whose_products_lua_cannot_hold_exactly_are_refused() {
    let mut huge = limit("1/30d", Algorithm::TokenBucket);
    huge.burst = Some(10_000_000);
    let error = huge.validate().unwrap_err();
    assert!(error.to_string().contains("2^53"), "{error}");
    let mut gcra = limit("1/30d", Algorithm::Gcra);
    gcra.burst = Some(10_000_000);
    assert!(gcra.validate().is_err());
    let mut fine = limit("1000/1h", Algorithm::Gcra);
    fine.burst = Some(10_000_000);
    assert!(fine.validate().is_ok());
}

#[tokio::test]
async fn a_deterministic_error_is_answered_for_its_request_alone() {
    let h = Harness::redis().await;
    let punished = limit("1/1m", Algorithm::Gcra).with_penalty(Penalty {
        warn_after: 1,
        ban_after: 3,
        ban: Duration::from_secs(60),
        memory: Duration::from_secs(600),
    });
    let limiter = h.limiter_with(
        vec![("login", Rule::new(vec![punished]))],
        Options {
            timeout: Duration::from_secs(5),
            fail: FailPolicy::Closed,
            ..Options::default()
        },
    );
    // A violations key of the wrong type: every decision for this identity fails in the script.
    let calls = limiter.keys("login", &[("ip", "bad")]).unwrap();
    let violations = KeyNames::new("sluice", &calls[0]).violations;
    h.server().cli(&["HSET", &violations, "x", "1"]);
    for _ in 0..10 {
        let d = limiter.check("login", &[("ip", "bad")]).await.unwrap();
        assert!(d.degraded && !d.allowed, "the fail policy answers: {d:?}");
    }
    // Ten failures of one request did not open the breaker for the others.
    assert!(!limiter.store_skipped());
    let d = limiter.check("login", &[("ip", "good")]).await.unwrap();
    assert!(d.allowed && !d.degraded, "{d:?}");
}

/// Cost = limit = 100,000 on a sliding log, on Redis' own clock: script calls stay fast, however
/// many units each request asks for, admitted or denied, counted or not.
#[tokio::test]
async fn sliding_log_work_does_not_grow_with_the_cost() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let log = limit("100000/1h", Algorithm::SlidingLog);
    let mut counting = log.clone();
    counting.count_denied = true;
    counting.name = Some("counting".into());
    let limiter = Limiter::builder(store)
        .timeout(Duration::from_secs(5))
        .rule("log", Rule::new(vec![log]))
        .rule("counting", Rule::new(vec![counting]))
        .build()
        .unwrap();
    // Work that grew with the cost would take about 100 ms per call at cost 100,000. A loaded
    // machine can stop redis-server for some milliseconds now and then, which a bar on the
    // slowest call would count; the mean over all 300 calls cannot be moved far by a few such
    // pauses, so the bar is on the mean: 5 ms, a twentieth of growing work.
    server.cli(&["CONFIG", "RESETSTAT"]);
    for rule in ["log", "counting"] {
        for i in 0..50 {
            for cost in [100_000, 1, 99_999] {
                let d = limiter
                    .check_with(rule, &[("ip", &i.to_string())], sluice::Check::cost(cost))
                    .await
                    .unwrap();
                assert!(!d.degraded, "{d:?}");
            }
        }
    }
    let (scripts, usec) = (server.decision_calls(), server.decision_usec());
    assert!(scripts >= 300, "every check ran a script: {scripts}");
    assert!(
        usec / scripts < 5_000,
        "{} µs per call on average",
        usec / scripts
    );
    // Exact all the same: the first request took the whole limit.
    let d = limiter.check("log", &[("ip", "0")]).await.unwrap();
    assert!(!d.allowed);
    let retry = d.retry_after_ms.unwrap();
    assert!(retry > 3_590_000 && retry <= 3_600_000, "{retry}");
    // One member per recorded request, never one per unit.
    let calls = limiter.keys("counting", &[("ip", "0")]).unwrap();
    let members: u64 = server
        .cli(&["ZCARD", &KeyNames::new("sluice", &calls[0]).state])
        .parse()
        .unwrap();
    assert!(members <= 3, "{members}");
}

/// Only the `allkeys-*` policies can evict a counter that has not expired (every Sluice key has an
/// expiry); the store reports them, on a single server and on any primary of a Cluster.
#[tokio::test]
async fn eviction_policies_that_can_drop_live_counters_are_reported() {
    use sluice::store::redis::RISKY_EVICTION_POLICIES as RISKY;
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    for safe in [
        "noeviction",
        "volatile-lru",
        "volatile-lfu",
        "volatile-random",
        "volatile-ttl",
    ] {
        server.cli(&["CONFIG", "SET", "maxmemory-policy", safe]);
        assert_eq!(store.eviction_risk().await.unwrap(), None, "{safe}");
    }
    for risky in RISKY {
        server.cli(&["CONFIG", "SET", "maxmemory-policy", risky]);
        assert_eq!(
            store.eviction_risk().await.unwrap().as_deref(),
            Some(risky),
            "{risky}"
        );
    }
}
