//! The Redis store on a real Redis Cluster (3 primaries, 3 replicas): cross-slot give-backs for
//! every algorithm, keys of many identities spread over every primary, readiness, and a primary
//! killed under load (degraded per policy within the timeout, exact again within 1 s of the
//! replica taking writes). The conformance suite and the multi-process exactness tests run on
//! the Cluster too (`conformance.rs`, `redis_exactness.rs`).
#![cfg(feature = "redis")]

use crate::common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::load::{Load, admits_exactly, check_failover};
use common::{S, key, step, unique_prefix, url_store};
use sluice::algorithm::LeaseToken;
use sluice::algorithm::{LimitStep, Mode, PenaltyParams};
use sluice::model::{Algorithm, Limit};
use sluice::store::LimitCall;
use sluice::{FailPolicy, Limiter, ManualClock, Rule, Store};
use sluice_test_support::{Members, RedisCluster};

/// `member=m` hashes to slot 88 and `ip=a` to slot 15843: the member group is decided first.
#[tokio::test]
async fn a_denial_on_a_later_slot_gives_back_the_earlier_slots_units() {
    let cluster = RedisCluster::shared();
    for algorithm in Algorithm::ALL {
        let clock = ManualClock::at_2026();
        let store = url_store(&cluster.url(), Some(clock.clone()), &unique_prefix()).await;
        let mut member = step(algorithm, 5, 100 * S);
        member.params.capacity = 5;
        // Each request with its own lease token, as the limiter draws them (a concurrency limit
        // gives back by releasing the lease it took).
        let calls = |token: u8| {
            let lease = Some(LeaseToken([token; 16]));
            [
                LimitCall {
                    key: key("member", "member=m"),
                    step: LimitStep { lease, ..member },
                },
                LimitCall {
                    key: key("ip", "ip=a"),
                    step: LimitStep {
                        lease,
                        ..step(algorithm, 1, 100 * S)
                    },
                },
            ]
        };
        let first = store.decide(&calls(0), Mode::Apply).await.unwrap();
        assert!(first.outcomes.iter().all(|o| o.allowed), "{algorithm}");
        assert_eq!(first.outcomes[0].remaining, 4, "{algorithm}");
        for token in 1..4 {
            let denied = store.decide(&calls(token), Mode::Apply).await.unwrap();
            assert!(!denied.outcomes[1].allowed, "{algorithm}");
            assert!(denied.outcomes[0].allowed, "{algorithm}");
            assert_eq!(
                denied.outcomes[0].remaining, 4,
                "{algorithm}: the answer shows the units given back"
            );
        }
        let member_now = store.decide(&calls(9)[..1], Mode::Peek).await.unwrap();
        assert_eq!(
            member_now.outcomes[0].remaining, 4,
            "{algorithm}: three denied requests left the member's count as it was"
        );
    }
}

/// A quota's units go back to its period, which its window is (not the window of its longest
/// period's length).
#[tokio::test]
async fn a_quota_denied_on_a_later_slot_gets_its_units_back() {
    use sluice::model::{Period, PeriodUnit};
    let cluster = RedisCluster::shared();
    let clock = ManualClock::at_2026();
    let store = url_store(&cluster.url(), Some(clock.clone()), &unique_prefix()).await;
    let period = Period::new(PeriodUnit::Month)
        .in_zone("Europe/Berlin")
        .unwrap()
        .anchored(15)
        .unwrap();
    let mut quota = step(Algorithm::FixedWindow, 5, period.longest().into());
    quota.params.period = Some(period.interned());
    let pair = [
        LimitCall {
            key: key("member", "member=m"),
            step: quota,
        },
        LimitCall {
            key: key("ip", "ip=a"),
            step: step(Algorithm::FixedWindow, 1, 100 * S),
        },
    ];
    let first = store.decide(&pair, Mode::Apply).await.unwrap();
    assert!(first.outcomes.iter().all(|o| o.allowed));
    assert_eq!(first.outcomes[0].remaining, 4);
    for _ in 0..3 {
        let denied = store.decide(&pair, Mode::Apply).await.unwrap();
        assert!(!denied.outcomes[1].allowed && denied.outcomes[0].allowed);
        assert_eq!(denied.outcomes[0].remaining, 4, "given back");
    }
    let now = store.decide(&pair[..1], Mode::Peek).await.unwrap();
    assert_eq!(now.outcomes[0].remaining, 4);
}

/// A fixed window's count flagged by a penalty's violation (`lua/fixed_window.lua`) is given
/// back as an unflagged one is, and stays flagged.
#[tokio::test]
async fn a_flagged_fixed_window_count_is_given_back_too() {
    let cluster = RedisCluster::shared();
    let clock = ManualClock::at_2026();
    let prefix = unique_prefix();
    let store = url_store(&cluster.url(), Some(clock.clone()), &prefix).await;
    let mut member = LimitCall {
        key: key("member", "member=m"),
        step: step(Algorithm::FixedWindow, 5, 100 * S),
    };
    member.step.penalty = Some(PenaltyParams {
        warn_after: 1,
        ban_after: 100,
        ban_us: S,
        memory_us: 1000 * S,
    });
    let ip = LimitCall {
        key: key("ip", "ip=a"),
        step: step(Algorithm::FixedWindow, 1, 100 * S),
    };
    let one = |cost: u64| {
        let mut c = member.clone();
        c.step.cost = cost;
        [c]
    };
    assert!(store.decide(&one(1), Mode::Apply).await.unwrap().outcomes[0].allowed);
    let denied = store.decide(&one(5), Mode::Apply).await.unwrap();
    assert_eq!(
        denied.outcomes[0].violations, 1,
        "a violation: the count is flagged"
    );
    let pair = [member.clone(), ip];
    let first = store.decide(&pair, Mode::Apply).await.unwrap();
    assert!(first.outcomes.iter().all(|o| o.allowed));
    assert_eq!(first.outcomes[0].remaining, 3);
    for _ in 0..3 {
        let denied = store.decide(&pair, Mode::Apply).await.unwrap();
        assert!(!denied.outcomes[1].allowed && denied.outcomes[0].allowed);
        assert_eq!(denied.outcomes[0].remaining, 3, "given back");
    }
    let now = store.decide(&one(1), Mode::Peek).await.unwrap();
    assert_eq!(now.outcomes[0].remaining, 3);
    assert_eq!(now.outcomes[0].violations, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_identities_spread_over_every_primary() {
    let cluster = RedisCluster::shared();
    let prefix = unique_prefix();
    let store = url_store(&cluster.url(), None, &prefix).await;
    let limiter = Limiter::builder(store)
        .rule(
            "spread",
            Rule::new(vec![Limit::new(
                &["ip"],
                "5/1m".parse().unwrap(),
                Algorithm::Gcra,
            )]),
        )
        .fail(FailPolicy::Closed)
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for t in 0..50 {
        let limiter = limiter.clone();
        tasks.spawn(async move {
            for i in 0..200 {
                let ip = format!("10.0.{t}.{i}");
                let d = limiter
                    .check("spread", &[("ip", ip.as_str())])
                    .await
                    .unwrap();
                assert!(d.allowed && !d.degraded, "{d:?}");
            }
        });
    }
    while let Some(r) = tasks.join_next().await {
        r.unwrap();
    }
    let mut per_primary = BTreeMap::new();
    for port in cluster.primaries() {
        let pattern = format!("{prefix}:*");
        let keys = cluster.cli(port, &["--scan", "--pattern", &pattern]);
        per_primary.insert(port, sluice_test_support::decision_keys(&keys).len());
    }
    let total: usize = per_primary.values().sum();
    assert_eq!(total, 10_000, "{per_primary:?}");
    let (min, max) = (
        *per_primary.values().min().unwrap(),
        *per_primary.values().max().unwrap(),
    );
    assert_eq!(per_primary.len(), 3);
    assert!(
        max * 2 <= min * 3,
        "no primary holds more than 1.5× another's share: {per_primary:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_primary_degrades_per_policy_then_decisions_are_exact_again() {
    const TIMEOUT: Duration = Duration::from_millis(100);
    let mut cluster = RedisCluster::start();
    let prefix = unique_prefix();
    let store = url_store(&cluster.url(), None, &prefix).await;
    assert_eq!(store.ping().await, Ok(()), "ready: every slot takes writes");
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
        .fail(FailPolicy::Open)
        .timeout(TIMEOUT)
        .build()
        .unwrap();
    // The identity's slot and the primary serving it.
    let tag = format!("{prefix}:busy:x:{{ip=z}}:c");
    let victim = cluster.primary_of(&tag).expect("a primary serves the slot");
    let load = Load::start(&limiter, "busy", "z", 4);
    load.made(100).await;

    let killed_at = Instant::now();
    let cluster = tokio::task::spawn_blocking(move || {
        cluster.kill(victim);
        cluster
    })
    .await
    .unwrap();
    let not_ready = store.ping().await;
    assert!(not_ready.is_err(), "not ready while a primary is down");
    let (cluster_back, writable_at) = tokio::task::spawn_blocking(move || {
        // The moment a replica has taken over the slot and takes writes.
        assert!(
            sluice_test_support::wait_until(Duration::from_secs(20), || {
                cluster
                    .primary_of(&tag)
                    .is_some_and(|p| p != victim && cluster.cli(p, &["SET", &tag, "probe"]) == "OK")
            }),
            "a replica takes over"
        );
        let at = Instant::now();
        cluster.cli_any(&["DEL", &tag]);
        (cluster, at)
    })
    .await
    .unwrap();
    load.exact_for(Duration::from_millis(500)).await;
    let seen = load.stop().await;
    check_failover(
        "cluster",
        &seen,
        (killed_at, writable_at),
        TIMEOUT,
        &not_ready,
    );
    assert_eq!(store.ping().await, Ok(()), "ready again");
    // And exact: a fresh identity on the failed-over primary admits exactly its limit.
    admits_exactly(&limiter, "exact", "z", 10).await;
    drop(cluster_back);
}

#[tokio::test]
async fn scripts_and_functions_are_reloaded_on_every_primary_after_a_flush() {
    let cluster = RedisCluster::start();
    let store = url_store(&cluster.url(), None, &unique_prefix()).await;
    // Identities on every primary, and a cross-slot pair (decide and give-back scripts).
    let ips: Vec<String> = (0..30).map(|i| format!("ip={i}")).collect();
    let decide_all = async |expect_allowed: bool| {
        for ip in &ips {
            let c = LimitCall {
                key: key("x", ip),
                step: step(Algorithm::Gcra, 1, 100 * S),
            };
            let o = store.decide(&[c], Mode::Apply).await.unwrap().outcomes[0];
            assert_eq!(o.allowed, expect_allowed, "{ip}");
        }
    };
    decide_all(true).await;
    for port in cluster.primaries() {
        assert_eq!(cluster.cli(port, &["SCRIPT", "FLUSH"]), "OK");
    }
    decide_all(false).await;
    let pair = [
        LimitCall {
            key: key("m", "member=m"),
            step: step(Algorithm::SlidingLog, 5, 100 * S),
        },
        LimitCall {
            key: key("i", "ip=a"),
            step: step(Algorithm::SlidingLog, 1, 100 * S),
        },
    ];
    assert!(store.decide(&pair, Mode::Apply).await.unwrap().outcomes[1].allowed);
    for port in cluster.primaries() {
        assert_eq!(cluster.cli(port, &["SCRIPT", "FLUSH"]), "OK");
        assert_eq!(cluster.cli(port, &["FUNCTION", "FLUSH"]), "OK");
    }
    let denied = store.decide(&pair, Mode::Apply).await.unwrap();
    assert!(!denied.outcomes[1].allowed);
    let member = store.decide(&pair[..1], Mode::Peek).await.unwrap();
    assert_eq!(
        member.outcomes[0].remaining, 4,
        "given back after the flush too"
    );
}
