//! The denial cache in the conformance suite: two limiter instances (two nodes) on one real
//! Redis, each with its cache subscribed to the invalidation channel, on one manual clock.
//!
//! Whether the store was asked is read from Redis itself (`INFO commandstats`: `EVALSHA` calls).
//! Waits below are for a message to arrive (bounded by a real-time deadline), never for time.
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{CACHED, Harness, S};
use sluice::limiter::DenialCacheOptions;
use sluice::model::{Algorithm, Limit, Penalty};
use sluice::{Check, Decision, FailPolicy, Limiter, Micros, Options, Rule};

const IP: [(&str, &str); 1] = [("ip", "203.0.113.9")];

/// A node: a limiter on the harness's store and clock with its cache on the channel, once its
/// subscription is up (a new subscription forgets everything: it must not happen mid-test).
async fn node(h: &Harness, rules: Vec<(&str, Rule)>, max_stale: Duration) -> Limiter {
    let channel = common::redis_store(h.server(), Some(h.clock.clone()))
        .await
        .channel();
    let limiter = Limiter::builder(h.store.clone())
        .rules(rules.into_iter().map(|(n, r)| (n.to_string(), r)))
        .clock(Arc::new(h.clock.clone()))
        .options(Options {
            timeout: Duration::from_secs(5),
            denial_cache: DenialCacheOptions {
                max_stale,
                ..DenialCacheOptions::default()
            },
            ..Options::default()
        })
        .invalidation_channel(Arc::new(channel))
        .build()
        .expect("valid rules");
    let cache = limiter.denial_cache().expect("a remote store has a cache");
    eventually("subscribed", || async { cache.confirmed_as_of().is_some() }).await;
    limiter
}

/// How many decisions Redis has run.
fn store_calls(h: &Harness) -> u64 {
    h.server().decision_calls()
}

/// Waits (10 s of real time at most) until `done` holds; polls every millisecond.
async fn eventually<F: std::future::Future<Output = bool>>(what: &str, done: impl Fn() -> F) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done().await {
        assert!(Instant::now() < deadline, "never happened: {what}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

fn gcra(rate: &str) -> Rule {
    Rule::new(vec![Limit::new(
        &["ip"],
        rate.parse().unwrap(),
        Algorithm::Gcra,
    )])
}

fn without_reason(mut d: Decision) -> Decision {
    d.reason = None;
    d
}

#[tokio::test]
async fn a_denial_is_answered_locally_until_it_could_pass() {
    let h = Harness::redis().await;
    let a = node(&h, vec![("login", gcra("1/1m"))], Duration::from_secs(3600)).await;
    assert!(a.check("login", &IP).await.unwrap().allowed);
    let denial = a.check("login", &IP).await.unwrap();
    assert!(!denial.allowed);
    assert_eq!(denial.reason, None, "the store's own answer");
    let asked = store_calls(&h);
    for _ in 0..5 {
        let cached = a.check("login", &IP).await.unwrap();
        assert_eq!(cached.reason.as_deref(), Some(CACHED));
        assert_eq!(
            without_reason(cached),
            denial,
            "the same answer as the store's"
        );
    }
    assert!(
        a.check_with("login", &IP, Check::cost(2))
            .await
            .unwrap()
            .reason
            .is_some(),
        "a larger cost cannot pass either"
    );
    assert_eq!(store_calls(&h), asked, "the store was not asked again");
    let other = a.check("login", &[("ip", "198.51.100.1")]).await.unwrap();
    assert!(other.allowed, "other identities are not affected");

    h.advance_us(60 * S - Micros::from_millis(1));
    assert_eq!(
        a.check("login", &IP).await.unwrap().reason.as_deref(),
        Some(CACHED)
    );
    h.advance_us(Micros::from_millis(1));
    let d = a.check("login", &IP).await.unwrap();
    assert!(
        d.allowed,
        "admitted by the store once the retry time has come"
    );
    assert_eq!(store_calls(&h), asked + 2);
}

#[tokio::test]
async fn a_reset_or_unblock_on_another_node_reaches_this_nodes_cache() {
    let h = Harness::redis().await;
    let rules = || vec![("login", gcra("1/1m"))];
    let a = node(&h, rules(), Duration::from_secs(3600)).await;
    let b = node(&h, rules(), Duration::from_secs(3600)).await;

    // Reset on B: A's cached denial goes.
    a.check("login", &IP).await.unwrap();
    assert!(!a.check("login", &IP).await.unwrap().allowed);
    b.reset("login", &IP).await.unwrap();
    eventually("A admits after B's reset", || async {
        a.check("login", &IP).await.unwrap().allowed
    })
    .await;

    // An administrative block on B, lifted by an unblock on B: A's cached block goes. (The
    // manual clock stands still: only the invalidation can let A admit.)
    h.advance_us(60 * S);
    b.block("login", &IP, Duration::from_secs(600))
        .await
        .unwrap();
    let blocked = a.check("login", &IP).await.unwrap();
    assert!(!blocked.allowed && blocked.blocked_until_ms.is_some());
    // B's block was published too: once A has applied it, A caches the block.
    eventually("A caches the block", || async {
        a.check("login", &IP).await.unwrap().reason.as_deref() == Some(CACHED)
    })
    .await;
    let asked = store_calls(&h);
    assert!(!a.check("login", &IP).await.unwrap().allowed);
    assert_eq!(
        store_calls(&h),
        asked,
        "the block is answered from A's cache"
    );
    assert!(b.unblock("login", &IP).await.unwrap());
    eventually("A admits after B's unblock", || async {
        a.check("login", &IP).await.unwrap().allowed
    })
    .await;
}

#[tokio::test]
async fn a_limit_raised_by_a_reload_admits_at_once() {
    let h = Harness::redis().await;
    // A fixed window keeps its count across the reload (the limit's id does not change).
    let fixed = |rate: &str| {
        Rule::new(vec![Limit::new(
            &["ip"],
            rate.parse().unwrap(),
            Algorithm::FixedWindow,
        )])
    };
    let a = node(
        &h,
        vec![("login", fixed("1/1m"))],
        Duration::from_secs(3600),
    )
    .await;
    let other = node(&h, vec![("api", fixed("1/1m"))], Duration::from_secs(3600)).await;
    for (n, rule) in [(&a, "login"), (&other, "api")] {
        n.check(rule, &IP).await.unwrap();
        assert!(!n.check(rule, &IP).await.unwrap().allowed);
    }
    a.set_rules(vec![("login".to_string(), fixed("5/1m"))])
        .unwrap();
    let d = a.check("login", &IP).await.unwrap();
    assert!(d.allowed, "the new limit decides at once: {d:?}");
    assert_eq!(d.remaining, 3);
    assert_eq!(
        other.check("api", &IP).await.unwrap().reason.as_deref(),
        Some(CACHED),
        "rules that did not change keep their cached denials"
    );
}

/// A part of a `check_all` (Envoy's descriptors, `/v1/check-all`) that the store has denied
/// answers the whole request from the cache, unless another part's denial would leave a trace.
#[tokio::test]
async fn check_all_answers_a_cached_denial_without_the_store() {
    use sluice::limiter::RuleCheck;
    let h = Harness::redis().await;
    let mut counted = Limit::new(&["path"], "10/1m".parse().unwrap(), Algorithm::FixedWindow);
    counted.count_denied = true;
    let rules = vec![
        ("login", gcra("1/1m")),
        (
            "per_path",
            Rule::new(vec![Limit::new(
                &["path"],
                "10/1m".parse().unwrap(),
                Algorithm::Gcra,
            )]),
        ),
        ("counted", Rule::new(vec![counted])),
    ];
    let a = node(&h, rules, Duration::from_secs(3600)).await;
    let path = [("path", "/a")];
    let part = |rule, attrs| RuleCheck {
        rule,
        attrs,
        cost: 1,
    };
    let both = [part("login", &IP[..]), part("per_path", &path[..])];
    assert!(a.check_all(&both).await.unwrap().iter().all(|d| d.allowed));
    let denied = a.check_all(&both).await.unwrap();
    assert!(
        !denied[0].allowed && denied[0].reason.is_none(),
        "the store's answer"
    );
    let asked = store_calls(&h);
    for _ in 0..5 {
        let cached = a.check_all(&both).await.unwrap();
        assert_eq!(cached[0].reason.as_deref(), Some(CACHED));
        assert!(!cached[0].allowed && cached[1].allowed);
        assert_eq!(cached[0].retry_after_ms, denied[0].retry_after_ms);
    }
    // The check-all's denial answers a check of that rule too.
    assert_eq!(
        a.check("login", &IP).await.unwrap().reason.as_deref(),
        Some(CACHED)
    );
    assert_eq!(store_calls(&h), asked, "the store was not asked again");
    // A part whose denial would count (`count_denied`) sends the request to the store.
    let with_counted = [part("login", &IP[..]), part("counted", &path[..])];
    assert_eq!(a.check_all(&with_counted).await.unwrap()[0].reason, None);
    assert_eq!(store_calls(&h), asked + 1);
    // Nothing was consumed by the denied requests.
    let left = a
        .check_with("per_path", &path, Check::ONE.peek())
        .await
        .unwrap();
    assert_eq!(left.remaining, 9);
}

#[tokio::test]
async fn denials_that_must_be_counted_and_peeks_always_ask_the_store() {
    let h = Harness::redis().await;
    let mut counted = Limit::new(&["ip"], "1/1m".parse().unwrap(), Algorithm::FixedWindow);
    counted.count_denied = true;
    let penalty = Penalty {
        warn_after: 1,
        ban_after: 100,
        ban: Duration::from_secs(60),
        memory: Duration::from_secs(3600),
    };
    let punished =
        Limit::new(&["ip"], "1/1m".parse().unwrap(), Algorithm::Gcra).with_penalty(penalty);
    let mut shadow = Limit::new(&["ip"], "1/1m".parse().unwrap(), Algorithm::Gcra);
    shadow.shadow = true;
    let a = node(
        &h,
        vec![
            ("counted", Rule::new(vec![counted])),
            ("punished", Rule::new(vec![punished])),
            ("shadow", Rule::new(vec![shadow])),
            ("plain", gcra("1/1m")),
        ],
        Duration::from_secs(3600),
    )
    .await;
    for rule in ["counted", "punished", "shadow", "plain"] {
        a.check(rule, &IP).await.unwrap();
        a.check(rule, &IP).await.unwrap();
        let asked = store_calls(&h);
        let d = a.check(rule, &IP).await.unwrap();
        let peek = a.check_with(rule, &IP, Check::ONE.peek()).await.unwrap();
        assert_eq!(peek.reason, None, "{rule}: peeks ask the store");
        if rule == "plain" {
            assert_eq!(d.reason.as_deref(), Some(CACHED));
            assert_eq!(store_calls(&h), asked + 1);
        } else {
            assert_eq!(d.reason, None, "{rule}");
            // A denial by a limit with a penalty is two calls: its one-limit script leaves the
            // denial to the general decision, which counts the violation.
            let denial = if rule == "punished" { 2 } else { 1 };
            assert_eq!(store_calls(&h), asked + denial + 1, "{rule}");
        }
    }
    assert_eq!(
        a.check("punished", &IP).await.unwrap().violations,
        3,
        "every denial counted as a violation"
    );
}

#[tokio::test]
async fn a_block_or_ban_of_a_penalty_limit_is_answered_locally_until_it_ends() {
    let penalty = Penalty {
        warn_after: 1,
        ban_after: 2,
        ban: Duration::from_secs(60),
        memory: Duration::from_secs(3600),
    };
    for algorithm in [
        Algorithm::Gcra,
        Algorithm::FixedWindow,
        Algorithm::SlidingWindow,
    ] {
        let h = Harness::redis().await;
        let limit = Limit::new(&["ip"], "1/1m".parse().unwrap(), algorithm)
            .with_block(Duration::from_secs(10))
            .with_penalty(penalty);
        let a = node(
            &h,
            vec![("login", Rule::new(vec![limit.clone()]))],
            Duration::from_secs(3600),
        )
        .await;
        // A node that always asks the store, for what it answers while the block lasts.
        let store_only = h.limiter_with(
            vec![("login", Rule::new(vec![limit]))],
            Options {
                denial_cache: DenialCacheOptions {
                    enabled: false,
                    ..DenialCacheOptions::default()
                },
                ..Options::default()
            },
        );
        assert!(a.check("login", &IP).await.unwrap().allowed);
        // Each denial by the algorithm asks the store, which counts it; what follows it is the
        // block, then the ban, answered here until they end.
        for (violations, lasts) in [(1, 10 * S), (2, 60 * S)] {
            let asked = store_calls(&h);
            let denial = a.check("login", &IP).await.unwrap();
            assert!(
                store_calls(&h) > asked,
                "{algorithm}: the store counts the denial"
            );
            assert_eq!(denial.reason, None, "{algorithm}");
            assert_eq!((denial.violations, denial.warning), (violations, true));
            let until = denial.blocked_until_ms.expect("blocked");
            let blocked = store_only.check("login", &IP).await.unwrap();
            let asked = store_calls(&h);
            for _ in 0..5 {
                let cached = a.check("login", &IP).await.unwrap();
                assert_eq!(cached.reason.as_deref(), Some(CACHED), "{algorithm}");
                assert_eq!(
                    without_reason(cached),
                    blocked,
                    "{algorithm}: the store's answer while the block lasts"
                );
            }
            h.advance_us(lasts - Micros::from_millis(1));
            let late = a.check("login", &IP).await.unwrap();
            assert_eq!(late.reason.as_deref(), Some(CACHED), "{algorithm}");
            assert_eq!(late.blocked_until_ms, Some(until));
            assert_eq!(
                store_calls(&h),
                asked,
                "{algorithm}: the store was not asked"
            );
            h.advance_us(Micros::from_millis(1));
        }
        let d = a.check("login", &IP).await.unwrap();
        assert!(
            d.allowed,
            "{algorithm}: admitted by the store once the ban is over: {d:?}"
        );
    }
}

#[tokio::test]
async fn one_global_denial_answers_every_identity() {
    let h = Harness::redis().await;
    let rule = Rule::new(vec![
        Limit::new(&["ip"], "100/1m".parse().unwrap(), Algorithm::Gcra),
        Limit::new(&[], "3/1m".parse().unwrap(), Algorithm::SlidingLog),
    ]);
    let a = node(&h, vec![("api", rule)], Duration::from_secs(3600)).await;
    for i in 0..4 {
        a.check("api", &[("ip", format!("10.0.0.{i}").as_str())])
            .await
            .unwrap();
    }
    let asked = store_calls(&h);
    for i in 10..20 {
        let d = a
            .check("api", &[("ip", format!("10.0.0.{i}").as_str())])
            .await
            .unwrap();
        assert!(!d.allowed);
        assert_eq!(d.limits[1].id, "global-sliding_log-1m");
        assert!(!d.limits[1].allowed && d.limits[0].allowed);
    }
    assert_eq!(
        store_calls(&h),
        asked,
        "the global limit's denial is one entry"
    );
}

#[tokio::test]
async fn without_the_channel_cached_denials_live_at_most_max_stale() {
    let mut h = Harness::redis().await;
    let mut rule = gcra("1/1m");
    rule.fail = Some(FailPolicy::Open);
    let a = node(&h, vec![("login", rule)], Duration::from_secs(1)).await;
    a.check("login", &IP).await.unwrap();
    assert!(!a.check("login", &IP).await.unwrap().allowed);
    h.server.as_mut().unwrap().stop();
    // Redis is gone (and with it the channel): the cache still answers for max_stale...
    h.advance_us(S / 2);
    let d = a.check("login", &IP).await.unwrap();
    assert!(!d.allowed && !d.degraded);
    // ...and not a moment longer: the fail policy decides.
    h.advance_us(S / 2);
    let d = a.check("login", &IP).await.unwrap();
    assert!(d.allowed && d.degraded, "{d:?}");
}

#[tokio::test]
async fn stores_in_this_process_have_no_cache() {
    let h = Harness::memory();
    assert!(
        h.limiter(vec![("login", gcra("1/1m"))])
            .denial_cache()
            .is_none()
    );
}
