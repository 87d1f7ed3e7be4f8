//! Conformance: run-time limits, an identity's own numbers on a settable limit, kept in the store
//! and read inside each decision.

use std::time::Duration;

use super::{S, Subject};
use crate::model::{Algorithm, Limit, RuntimeLimit};
use crate::{Error, Limiter, Options, Rule};

fn settable(algorithm: Algorithm, rate: &str) -> Limit {
    Limit::new(&["customer"], rate.parse().unwrap(), algorithm).settable()
}

fn rate(text: &str) -> RuntimeLimit {
    RuntimeLimit::rate(text.parse().unwrap())
}

/// How many of `n` checks of one unit pass, one after the other.
async fn admitted(limiter: &Limiter, rule: &str, customer: &str, n: usize) -> usize {
    let attrs = [("customer", customer), ("ip", "203.0.113.9")];
    let mut passed = 0;
    for _ in 0..n {
        if limiter.check(rule, &attrs).await.unwrap().allowed {
            passed += 1;
        }
    }
    passed
}

/// Behaviour: a run-time limit raises, lowers and, removed, gives back the file's numbers for
/// one identity only, on every rate algorithm; the counter carries over; decisions report it.
pub async fn runtime_limits_replace_the_numbers_of_one_identity(h: Subject) {
    for algorithm in [
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::FixedWindow,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::LeakyBucket,
    ] {
        let rule = format!("api_{}", algorithm.name());
        let limiter = h.limiter(vec![(&rule, Rule::new(vec![settable(algorithm, "2/1h")]))]);
        let attrs = [("customer", "42")];
        let set = limiter
            .set_runtime_limit(&rule, None, &attrs, &rate("5/1h"))
            .await
            .unwrap();
        assert_eq!(set.identity, "customer=42");
        assert_eq!(set.set, rate("5/1h"));
        // The leaky bucket shapes: it admits its queue with delays, then denies.
        assert_eq!(admitted(&limiter, &rule, "42", 8).await, 5, "{algorithm}");
        assert_eq!(admitted(&limiter, &rule, "7", 4).await, 2, "{algorithm}");
        let d = limiter.check(&rule, &attrs).await.unwrap();
        assert_eq!((d.allowed, d.limits[0].quota), (false, 5), "{algorithm}");
        // Lowered below what was used: nothing more passes; the counter was kept.
        limiter
            .set_runtime_limit(&rule, None, &attrs, &rate("3/1h"))
            .await
            .unwrap();
        assert_eq!(admitted(&limiter, &rule, "42", 2).await, 0, "{algorithm}");
        let listed = limiter.runtime_limits(&rule, None).await.unwrap();
        assert_eq!(listed.len(), 1);
        assert_eq!(
            (listed[0].identity.as_str(), &listed[0].set),
            ("customer=42", &rate("3/1h"))
        );
        let read = limiter.runtime_limit(&rule, None, &attrs).await.unwrap();
        assert_eq!(read.map(|r| r.set), Some(rate("3/1h")));
        assert!(
            limiter
                .remove_runtime_limit(&rule, None, &attrs)
                .await
                .unwrap()
        );
        assert!(
            !limiter
                .remove_runtime_limit(&rule, None, &attrs)
                .await
                .unwrap()
        );
        assert_eq!(
            limiter.runtime_limit(&rule, None, &attrs).await.unwrap(),
            None
        );
        assert!(
            limiter
                .runtime_limits(&rule, None)
                .await
                .unwrap()
                .is_empty()
        );
        let d = limiter.check(&rule, &attrs).await.unwrap();
        assert_eq!((d.allowed, d.limits[0].quota), (false, 2), "{algorithm}");
        h.advance_us(3600 * S);
    }
}

/// Behaviour: a run-time burst and a concurrency limit's `max_leases` apply, and a cost above
/// the file's capacity passes when the identity's allows it.
pub async fn runtime_limits_set_bursts_and_leases(h: Subject) {
    let limiter = h.limiter(vec![
        (
            "bucket",
            Rule::new(vec![settable(Algorithm::TokenBucket, "2/1h")]),
        ),
        (
            "jobs",
            Rule::new(vec![
                Limit::concurrency(&["customer"], 1, Duration::from_secs(30)).settable(),
            ]),
        ),
    ]);
    let attrs = [("customer", "42")];
    let cost = |units| crate::Check::cost(units);
    assert!(
        !limiter
            .check_with("bucket", &attrs, cost(5))
            .await
            .unwrap()
            .allowed
    );
    let burst = RuntimeLimit {
        burst: Some(6),
        ..rate("2/1h")
    };
    limiter
        .set_runtime_limit("bucket", None, &attrs, &burst)
        .await
        .unwrap();
    let d = limiter.check_with("bucket", &attrs, cost(5)).await.unwrap();
    assert!(d.allowed, "{:?}", d.reason);
    assert_eq!((d.remaining, d.limits[0].quota), (1, 6));
    assert!(
        !limiter
            .check_with("bucket", &attrs, cost(2))
            .await
            .unwrap()
            .allowed
    );
    // Another identity keeps the file's capacity.
    assert!(
        !limiter
            .check_with("bucket", &[("customer", "7")], cost(5))
            .await
            .unwrap()
            .allowed
    );

    limiter
        .set_runtime_limit("jobs", None, &attrs, &RuntimeLimit::max_leases(3))
        .await
        .unwrap();
    let mut leases = Vec::new();
    for _ in 0..3 {
        let d = limiter.check("jobs", &attrs).await.unwrap();
        assert!(d.allowed);
        leases.push(d.lease.unwrap());
    }
    assert!(!limiter.check("jobs", &attrs).await.unwrap().allowed);
    assert!(limiter.release(&leases[0]).await.unwrap());
    assert!(limiter.check("jobs", &attrs).await.unwrap().allowed);
}

/// Behaviour: a run-time limit is checked as a rule file's numbers are, and bounded per limit; a
/// refused change changes nothing.
pub async fn runtime_limits_are_validated_and_bounded(h: Subject) {
    let rules = vec![(
        "api",
        Rule::new(vec![
            settable(Algorithm::SlidingLog, "2/1m"),
            Limit::new(&["ip"], "100/1m".parse().unwrap(), Algorithm::Gcra),
        ]),
    )];
    let limiter = h.limiter_with(
        rules,
        Options {
            timeout: Duration::from_secs(5),
            max_runtime_limits: 2,
            ..Options::default()
        },
    );
    let customer = |c: &'static str| [("customer", c), ("ip", "203.0.113.9")];
    let invalid = |e: Error| match e {
        Error::InvalidRuntimeLimit { reason, .. } => reason,
        other => panic!("expected an invalid run-time limit, got {other:?}"),
    };
    let window = limiter
        .set_runtime_limit("api", None, &customer("1"), &rate("5/1h"))
        .await
        .unwrap_err();
    assert!(invalid(window).contains("per 1m"));
    let burst = RuntimeLimit {
        burst: Some(9),
        ..rate("5/1m")
    };
    let no_burst = limiter
        .set_runtime_limit("api", None, &customer("1"), &burst)
        .await
        .unwrap_err();
    assert!(invalid(no_burst).contains("burst"));
    let ip = limiter
        .set_runtime_limit("api", Some("ip-gcra-1m"), &customer("1"), &rate("5/1m"))
        .await
        .unwrap_err();
    assert!(invalid(ip).contains("settable: true"));
    let unknown = limiter
        .set_runtime_limit("api", Some("nope"), &customer("1"), &rate("5/1m"))
        .await
        .unwrap_err();
    assert!(invalid(unknown).contains("no limit `nope`"));
    let missing = limiter
        .set_runtime_limit("api", None, &[("ip", "1")], &rate("5/1m"))
        .await
        .unwrap_err();
    assert!(
        matches!(missing, Error::MissingAttribute { .. }),
        "{missing:?}"
    );
    assert!(
        limiter
            .runtime_limits("api", None)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(admitted(&limiter, "api", "1", 3).await, 2);

    for c in ["1", "2"] {
        limiter
            .set_runtime_limit("api", None, &customer(c), &rate("5/1m"))
            .await
            .unwrap();
    }
    let full = limiter
        .set_runtime_limit("api", None, &customer("3"), &rate("5/1m"))
        .await
        .unwrap_err();
    assert!(
        matches!(full, Error::RuntimeLimitsFull { max: 2, .. }),
        "{full:?}"
    );
    assert_eq!(
        limiter
            .runtime_limit("api", None, &customer("3"))
            .await
            .unwrap(),
        None
    );
    // An identity already listed may still be changed.
    limiter
        .set_runtime_limit("api", None, &customer("2"), &rate("4/1m"))
        .await
        .unwrap();
    let listed: Vec<(String, RuntimeLimit)> = limiter
        .runtime_limits("api", None)
        .await
        .unwrap()
        .into_iter()
        .map(|r| (r.identity, r.set))
        .collect();
    assert_eq!(
        listed,
        [
            ("customer=1".to_string(), rate("5/1m")),
            ("customer=2".to_string(), rate("4/1m"))
        ]
    );
    assert_eq!(admitted(&limiter, "api", "1", 4).await, 3);
    assert_eq!(admitted(&limiter, "api", "3", 4).await, 2);
}

/// Behaviour: right after a change, concurrent checks admit exactly what the new numbers allow,
/// on a one-limit rule and on a rule of two limits (on a Cluster, two slots).
pub async fn runtime_limits_are_exact_under_concurrency_right_after_a_change(h: Subject) {
    let limiter = h.limiter(vec![
        (
            "one",
            Rule::new(vec![settable(Algorithm::SlidingLog, "5/1h")]),
        ),
        (
            "two",
            Rule::new(vec![
                // Counted in units (GCRA counts time: a count raised mid-window spaces the units to
                // come rather than adding room at once).
                settable(Algorithm::TokenBucket, "5/1h"),
                Limit::new(
                    &["ip"],
                    "1000/1h".parse().unwrap(),
                    Algorithm::SlidingWindow,
                ),
            ]),
        ),
    ]);
    for rule in ["one", "two"] {
        let attrs = [("customer", "42"), ("ip", "203.0.113.9")];
        let burst = |n: usize| {
            let mut checks = tokio::task::JoinSet::new();
            for _ in 0..n {
                let limiter = limiter.clone();
                checks.spawn(async move { limiter.check(rule, &attrs).await });
            }
            checks.join_all()
        };
        limiter
            .set_runtime_limit(rule, None, &attrs, &rate("20/1h"))
            .await
            .unwrap();
        let passed = burst(60)
            .await
            .into_iter()
            .filter(|d| d.as_ref().unwrap().allowed)
            .count();
        assert_eq!(passed, 20, "{rule}");
        limiter
            .set_runtime_limit(rule, None, &attrs, &rate("35/1h"))
            .await
            .unwrap();
        let passed = burst(60)
            .await
            .into_iter()
            .filter(|d| d.as_ref().unwrap().allowed)
            .count();
        assert_eq!(passed, 15, "{rule}");
    }
}

/// Behaviour: two limiters on one store (two nodes) see a change at once: the one that did not
/// make it applies it from its next decision, with no stale denial answered from its cache.
pub async fn runtime_limits_reach_every_node_at_once(h: Subject) {
    let rules = || {
        vec![(
            "api",
            Rule::new(vec![settable(Algorithm::SlidingLog, "2/1h")]),
        )]
    };
    let (a, b) = (h.limiter(rules()), h.limiter(rules()));
    let attrs = [("customer", "42")];
    assert_eq!(admitted(&b, "api", "42", 3).await, 2);
    // `b` denied twice in a row: a cache of denials would now answer for it.
    assert!(!b.check("api", &attrs).await.unwrap().allowed);
    a.set_runtime_limit("api", None, &attrs, &rate("4/1h"))
        .await
        .unwrap();
    assert_eq!(admitted(&b, "api", "42", 3).await, 2);
    assert_eq!(admitted(&a, "api", "42", 1).await, 0);
    assert_eq!(
        b.runtime_limit("api", None, &attrs)
            .await
            .unwrap()
            .map(|r| r.set),
        Some(rate("4/1h"))
    );
    a.set_runtime_limit("api", None, &attrs, &rate("1/1h"))
        .await
        .unwrap();
    h.advance_us(3600 * S);
    assert_eq!(admitted(&b, "api", "42", 3).await, 1);
    assert!(b.remove_runtime_limit("api", None, &attrs).await.unwrap());
    assert_eq!(admitted(&a, "api", "42", 3).await, 1);
}
