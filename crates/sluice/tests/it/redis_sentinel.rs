//! The Redis store behind real sentinels (a primary, a replica, three `redis-sentinel`): the
//! primary killed under load degrades decisions per policy within the timeout, the store asks
//! the sentinels again and is exact within 1 s of the promoted replica taking writes; readiness
//! follows. The conformance suite and the multi-process exactness tests run here too
//! (`conformance.rs`, `redis_exactness.rs`).
#![cfg(feature = "redis")]

use crate::common;

use std::time::{Duration, Instant};

use common::load::{Load, admits_exactly, check_failover};
use common::{unique_prefix, url_store};
use sluice::model::{Algorithm, Limit};
use sluice::{FailPolicy, Limiter, Rule, Store};
use sluice_test_support::member::cli;
use sluice_test_support::{Members, RedisSentinel, wait_until};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_is_replaced_and_decisions_are_exact_again() {
    const TIMEOUT: Duration = Duration::from_millis(100);
    let mut set = RedisSentinel::start();
    let store = url_store(&set.url(), None, &unique_prefix()).await;
    assert_eq!(
        store.ping().await,
        Ok(()),
        "ready: the primary takes writes"
    );
    let limit = |rate: &str| {
        Rule::new(vec![Limit::new(
            &["ip"],
            rate.parse().unwrap(),
            Algorithm::Gcra,
        )])
    };
    let limiter = Limiter::builder(store.clone())
        .rule("busy", limit("1000000/1s"))
        .rule("exact", limit("10/1d"))
        .fail(FailPolicy::Closed)
        .timeout(TIMEOUT)
        .build()
        .unwrap();
    let load = Load::start(&limiter, "busy", "z", 4);
    load.made(100).await;
    let old = set.primary().unwrap();

    let killed_at = Instant::now();
    let set = tokio::task::spawn_blocking(move || {
        set.kill(old);
        set
    })
    .await
    .unwrap();
    let not_ready = store.ping().await;
    assert!(not_ready.is_err(), "not ready while no primary answers");
    let (set, writable_at) = tokio::task::spawn_blocking(move || {
        assert!(
            wait_until(Duration::from_secs(20), || {
                set.primary()
                    .is_some_and(|p| p != old && cli(p, &["SET", "failover-probe", "1"]) == "OK")
            }),
            "the sentinels promote the replica"
        );
        (set, Instant::now())
    })
    .await
    .unwrap();
    load.exact_for(Duration::from_millis(500)).await;
    let seen = load.stop().await;
    check_failover(
        "sentinel",
        &seen,
        (killed_at, writable_at),
        TIMEOUT,
        &not_ready,
    );
    assert_eq!(store.ping().await, Ok(()), "ready again");
    // And exact: a fresh identity on the failed-over primary admits exactly its limit.
    admits_exactly(&limiter, "exact", "z", 10).await;
    drop(set);
}
