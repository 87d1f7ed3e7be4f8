//! Conformance: what a request can ask — costs, peeks, several limits, shadow limits, distinct
//! identities — and that each store answers it the same way.

use super::{S, Subject, call, key, step};
use crate::Check;
use crate::algorithm::{Mode, PenaltyParams};
use crate::model::{Algorithm, Limit};
use crate::store::LimitCall;
use crate::{Attributes, Rule};

/// Behaviour: Cost is admitted whole or not at all.
pub async fn cost_is_admitted_whole_or_not_at_all(h: Subject) {
    for algorithm in crate::model::Algorithm::ALL {
        let mut s = step(algorithm, 5, 3600 * S);
        s.cost = 4;
        let id = format!("cost-{algorithm}");
        let big = call(&id, s);
        let o = h.one(&big).await;
        assert!(o.allowed, "{algorithm}");
        assert_eq!(o.remaining, 1, "{algorithm}");
        let two = call(&id, crate::algorithm::LimitStep { cost: 2, ..s });
        let o = h.one(&two).await;
        assert!(!o.allowed, "{algorithm}");
        assert_eq!(o.remaining, 1, "{algorithm}: a denial takes nothing");
        let one = call(&id, crate::algorithm::LimitStep { cost: 1, ..s });
        assert!(h.one(&one).await.allowed, "{algorithm}");
        assert!(!h.one(&one).await.allowed, "{algorithm}");
    }
}

/// Behaviour: Cost above capacity is refused with a reason.
pub async fn cost_above_capacity_is_refused_with_a_reason(h: Subject) {
    let limiter = h.limiter(vec![(
        "bulk",
        Rule::new(vec![Limit::new(
            &["ip"],
            "5/1m".parse().unwrap(),
            Algorithm::SlidingLog,
        )]),
    )]);
    let attrs = [("ip", "1.2.3.4")];
    let d = limiter
        .check_with("bulk", &attrs, Check::cost(6))
        .await
        .unwrap();
    assert!(!d.allowed && !d.degraded);
    assert!(d.reason.unwrap().contains("exceeds the capacity 5"));
    // Nothing was consumed; cost 0 peeks.
    let d = limiter
        .check_with("bulk", &attrs, Check::cost(0))
        .await
        .unwrap();
    assert_eq!(d.remaining, 5);
    let d = limiter
        .check_with("bulk", &attrs, Check::cost(5))
        .await
        .unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 0);
}

/// Behaviour: Count denied makes denials count.
pub async fn count_denied_makes_denials_count(h: Subject) {
    // Sliding algorithms: a counted denial at 5 s still holds a slot at 11 s, after the units
    // admitted at 0 s have left the window.
    for algorithm in [Algorithm::SlidingLog, Algorithm::SlidingWindow] {
        let mut results = Vec::new();
        for counting in [true, false] {
            let mut s = step(algorithm, 2, 10 * S);
            s.params.count_denied = counting;
            let c = call(&format!("cd-{algorithm}-{counting}"), s);
            let start = h.now_us();
            assert!(h.one(&c).await.allowed);
            assert!(h.one(&c).await.allowed);
            h.clock.set_us(start + 5 * S);
            assert!(!h.one(&c).await.allowed);
            h.clock.set_us(start + 11 * S);
            let o = h.one(&c).await;
            assert!(o.allowed, "{algorithm} {counting}");
            results.push(o.remaining);
            h.clock.set_us(start + 60 * S);
        }
        assert_eq!(results, [0, 1], "{algorithm}");
    }
    // Fixed window: a counted denial fills the window.
    let mut results = Vec::new();
    for counting in [true, false] {
        let mut s = step(Algorithm::FixedWindow, 5, 3600 * S);
        s.params.count_denied = counting;
        let id = format!("cd-fw-{counting}");
        s.cost = 3;
        assert!(h.one(&call(&id, s)).await.allowed);
        let denied = h.one(&call(&id, s)).await;
        assert!(!denied.allowed);
        s.cost = 1;
        results.push((denied.remaining, h.one(&call(&id, s)).await.allowed));
    }
    assert_eq!(results, [(0, false), (2, true)]);
}

/// Behaviour: Peek consumes nothing.
pub async fn peek_consumes_nothing(h: Subject) {
    for algorithm in Algorithm::ALL {
        let mut s = step(algorithm, 2, 60 * S);
        s.block_us = Some(60 * S);
        s.penalty = Some(PenaltyParams {
            warn_after: 1,
            ban_after: 1,
            ban_us: 120 * S,
            memory_us: 600 * S,
        });
        let c = [call(&format!("peek-{algorithm}"), s)];
        let peek = h.decide(&c, Mode::Peek).await.outcomes[0];
        assert!(peek.allowed, "{algorithm}: {peek:?}");
        assert!(h.decide(&c, Mode::Apply).await.outcomes[0].allowed);
        assert!(h.decide(&c, Mode::Apply).await.outcomes[0].allowed);
        for _ in 0..3 {
            let p = h.decide(&c, Mode::Peek).await.outcomes[0];
            assert!(!p.allowed, "{algorithm}");
            assert_eq!((p.violations, p.blocked_until_us), (0, None), "{algorithm}");
        }
        let denied = h.decide(&c, Mode::Apply).await.outcomes[0];
        assert_eq!(
            denied.violations, 1,
            "{algorithm}: peeks recorded no violation"
        );
        assert_eq!(denied.blocked_until_us, Some(h.now_us() + 120 * S));
    }
}

/// Behaviour: Multi limit rules are all or nothing.
pub async fn multi_limit_rules_are_all_or_nothing(h: Subject) {
    let limiter = h.limiter(vec![(
        "bank",
        Rule::new(vec![
            Limit::new(&["member"], "5/2m".parse().unwrap(), Algorithm::SlidingLog),
            Limit::new(&["ip"], "1/2m".parse().unwrap(), Algorithm::Gcra),
        ]),
    )]);
    let attrs = [("member", "m1"), ("ip", "1.2.3.4")];
    assert!(limiter.check("bank", &attrs).await.unwrap().allowed);
    let d = limiter.check("bank", &attrs).await.unwrap();
    assert!(!d.allowed);
    assert!(d.limits[0].allowed && !d.limits[1].allowed);
    assert_eq!(d.limits[0].remaining, 4, "the denied request took nothing");
    assert_eq!(d.retry_after_ms, Some(120_000));
    // The member limit alone, from another IP: it still has 4.
    let other = [("member", "m1"), ("ip", "5.6.7.8")];
    let d = limiter.check("bank", &other).await.unwrap();
    assert!(d.allowed);
    assert_eq!(d.limits[0].remaining, 3);
}

/// Behaviour: Shadow limits and rules never deny.
pub async fn shadow_limits_and_rules_never_deny(h: Subject) {
    let mut shadow = Limit::new(&["ip"], "1/1m".parse().unwrap(), Algorithm::FixedWindow);
    shadow.shadow = true;
    let mut shadow_rule = Rule::new(vec![Limit::new(
        &[],
        "1/1m".parse().unwrap(),
        Algorithm::Gcra,
    )]);
    shadow_rule.shadow = true;
    let limiter = h.limiter(vec![
        (
            "rollout",
            Rule::new(vec![
                Limit::new(&["ip"], "5/1m".parse().unwrap(), Algorithm::SlidingLog),
                shadow,
            ]),
        ),
        ("payments", shadow_rule),
    ]);
    let attrs = [("ip", "1.2.3.4")];
    limiter.check("rollout", &attrs).await.unwrap();
    let d = limiter.check("rollout", &attrs).await.unwrap();
    assert!(d.allowed);
    assert!(!d.limits[1].allowed && d.limits[1].shadow);
    assert_eq!(d.limits[0].remaining, 3, "the enforcing limit consumed");
    for _ in 0..3 {
        let d = limiter.check("payments", &attrs).await.unwrap();
        assert!(d.allowed && d.shadow);
    }
    let d = limiter.check("payments", &attrs).await.unwrap();
    assert!(!d.limits[0].allowed, "still evaluated and reported");
}

/// Behaviour: A named limit that changes algorithm starts fresh.
pub async fn a_named_limit_that_changes_algorithm_starts_fresh(h: Subject) {
    let named = |algorithm| {
        let mut l = Limit::new(&["ip"], "2/1h".parse().unwrap(), algorithm);
        l.name = Some("per-ip".into());
        Rule::new(vec![l])
    };
    let limiter = h.limiter(vec![("api", named(Algorithm::SlidingLog))]);
    let attrs = [("ip", "1.2.3.4")];
    // Concurrency keeps a sorted set, as the sliding log does: each must read the other's as no
    // state.
    let cycle = [
        Algorithm::SlidingLog,
        Algorithm::Concurrency,
        Algorithm::SlidingWindow,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::Gcra,
        Algorithm::Concurrency,
        Algorithm::SlidingLog,
    ];
    for algorithm in cycle {
        limiter
            .set_rules([("api".to_string(), named(algorithm))])
            .unwrap();
        let d = limiter.check("api", &attrs).await.unwrap();
        assert!(d.allowed, "{algorithm}");
        assert_eq!(d.remaining, 1, "{algorithm}: fresh state");
        assert!(limiter.check("api", &attrs).await.unwrap().allowed);
        assert!(!limiter.check("api", &attrs).await.unwrap().allowed);
    }
}

/// Behaviour: Identities are counted separately.
pub async fn identities_are_counted_separately(h: Subject) {
    let limiter = h.limiter(vec![(
        "promo",
        Rule::new(vec![Limit::new(
            &["member", "promo_code"],
            "1/1m".parse().unwrap(),
            Algorithm::SlidingWindow,
        )]),
    )]);
    let values: [&dyn Attributes; 3] = [
        &[("member", "m1"), ("promo_code", "P1")],
        &[("member", "m1"), ("promo_code", "P2")],
        &[("member", "m2"), ("promo_code", "P1")],
    ];
    for attrs in values {
        assert!(limiter.check("promo", attrs).await.unwrap().allowed);
    }
    for attrs in values {
        assert!(!limiter.check("promo", attrs).await.unwrap().allowed);
    }
    let direct: Vec<LimitCall> = ["a", "b"]
        .iter()
        .map(|id| LimitCall {
            key: key("k", id),
            step: step(Algorithm::FixedWindow, 1, S),
        })
        .collect();
    assert!(
        h.decide(&direct, Mode::Apply)
            .await
            .outcomes
            .iter()
            .all(|o| o.allowed)
    );
}
