//! Shedding: with `in_flight` decisions already waiting for a Redis that stopped answering, the
//! next decisions are answered at once by the rule's fail policy, marked degraded ("shed"),
//! instead of waiting out the store timeout behind them; the waiting ones are still decided by
//! Redis when it answers again, and shedding never trips the breaker.
//!
//! The bound counts the limits the calls ask about: one `check_all` of `WAITING` parts fills it
//! alone.
//!
//! The store timeout is long (10 s) so that only shedding can answer within the bound.
#![cfg(feature = "redis")]

use crate::common;

use std::time::{Duration, Instant};

use sluice::limiter::InFlightLimit;
use sluice::model::{Algorithm, Limit};
use sluice::store::redis::{RedisOptions, RedisStore};
use sluice::{FailPolicy, Limiter, Options, Rule};
use sluice_test_support::{Fault, FaultProxy, RedisServer};

const WAITING: u32 = 8;
/// A shed decision's answer comes well within this; the store timeout is 10 s.
const AT_ONCE: Duration = Duration::from_millis(500);

async fn limiter(url: &str) -> Limiter {
    let store = RedisStore::connect(
        url,
        RedisOptions {
            prefix: common::unique_prefix(),
            ..RedisOptions::default()
        },
    )
    .await
    .expect("a valid URL");
    let mut rule = Rule::new(vec![Limit::new(
        &["ip"],
        "1000/1h".parse().unwrap(),
        Algorithm::Gcra,
    )]);
    rule.fail = Some(FailPolicy::Open);
    Limiter::builder(store)
        .rule("api", rule)
        .options(Options {
            timeout: Duration::from_secs(10),
            in_flight: InFlightLimit::Fixed(WAITING),
            ..Options::default()
        })
        .build()
        .unwrap()
}

/// Waits (bounded) until `n` decisions wait for the store.
async fn until_waiting(limiter: &Limiter, n: u32) {
    let started = Instant::now();
    while limiter.store_in_flight().0 < n {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "{} of {n} decisions reached the store",
            limiter.store_in_flight().0
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_past_the_bound_are_answered_at_once_by_the_fail_policy() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let limiter = limiter(&proxy.redis_url()).await;
    let first = limiter.check("api", &[("ip", "warm")]).await.unwrap();
    assert!(!first.degraded, "Redis decides while it answers");
    assert_eq!(limiter.store_in_flight(), (0, WAITING));

    proxy.set(Fault::Stall);
    let waiting: Vec<_> = (0..WAITING)
        .map(|i| {
            let limiter = limiter.clone();
            tokio::spawn(async move { limiter.check("api", &[("ip", &format!("w{i}"))]).await })
        })
        .collect();
    until_waiting(&limiter, WAITING).await;

    for i in 0..20 {
        let started = Instant::now();
        let d = limiter
            .check("api", &[("ip", &format!("s{i}"))])
            .await
            .unwrap();
        let took = started.elapsed();
        assert!(took < AT_ONCE, "a shed decision took {took:?}");
        assert!(d.allowed && d.degraded, "fail open answers: {d:?}");
        let reason = d.reason.as_deref().unwrap_or_default();
        assert!(reason.contains("shed"), "{reason}");
    }
    assert!(!limiter.store_skipped(), "shedding is not a store failure");

    proxy.set(Fault::None);
    for task in waiting {
        let d = task.await.unwrap().unwrap();
        assert!(!d.degraded, "the waiting decisions are Redis': {d:?}");
    }
    assert_eq!(limiter.store_in_flight().0, 0, "every permit returned");
    let after = limiter.check("api", &[("ip", "after")]).await.unwrap();
    assert!(!after.degraded);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_check_all_weighs_its_limits_in_the_bound() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let limiter = limiter(&proxy.redis_url()).await;
    assert!(
        !limiter
            .check("api", &[("ip", "warm")])
            .await
            .unwrap()
            .degraded
    );

    proxy.set(Fault::Stall);
    let ips: Vec<[(&str, String); 1]> = (0..WAITING).map(|i| [("ip", format!("b{i}"))]).collect();
    let check_all = {
        let limiter = limiter.clone();
        tokio::spawn(async move {
            let attrs: Vec<Vec<(&str, &str)>> =
                ips.iter().map(|[(k, v)]| vec![(*k, v.as_str())]).collect();
            let parts: Vec<_> = attrs
                .iter()
                .map(|a| sluice::limiter::RuleCheck {
                    rule: "api",
                    attrs: &a[..],
                    cost: 1,
                })
                .collect();
            limiter.check_all(&parts).await
        })
    };
    until_waiting(&limiter, WAITING).await;
    assert_eq!(
        limiter.store_in_flight().0,
        WAITING,
        "one call, {WAITING} limits"
    );
    let d = limiter.check("api", &[("ip", "single")]).await.unwrap();
    assert!(
        d.degraded && d.reason.as_deref().unwrap_or_default().contains("shed"),
        "{d:?}"
    );

    proxy.set(Fault::None);
    let decided = check_all.await.unwrap().unwrap();
    assert!(
        decided.iter().all(|d| d.allowed && !d.degraded),
        "Redis decided the check-all"
    );
    assert_eq!(limiter.store_in_flight().0, 0, "every permit returned");
}
