//! One conformance suite, every store: each behaviour below runs against the memory store and
//! (feature `redis`) the Redis store on a real `redis-server`, on a Redis Cluster (3 primaries,
//! 3 replicas; multi-limit rules there cross slots) and behind sentinels, with the same manual
//! clock, and must give the same numbers. The cluster and the sentinel set-up are shared by the
//! tests of this binary, each test under its own key prefix.

mod common;

use sluice::Check;
use std::time::Duration;

use common::{Harness, S, call, key, step};
use sluice::algorithm::{Mode, penalty};
use sluice::model::{Algorithm, Limit, Penalty};
use sluice::store::LimitCall;
use sluice::{Attributes, Rule};

/// Generates, for each behaviour, one test per store.
macro_rules! conformance {
    ($($name:ident),* $(,)?) => {
        mod memory {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::common::Harness::memory()).await
            })*
        }
        #[cfg(feature = "redis")]
        mod redis {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::common::Harness::redis().await).await
            })*
        }
        #[cfg(feature = "redis")]
        mod cluster {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::common::Harness::cluster().await).await
            })*
        }
        #[cfg(feature = "redis")]
        mod sentinel {
            $(#[tokio::test]
            async fn $name() {
                super::$name(super::common::Harness::sentinel().await).await
            })*
        }
    };
}

conformance!(
    sliding_log_admits_limit_then_slides,
    sliding_log_same_instant_units_are_distinct,
    sliding_window_admits_limit_and_slides_by_bucket,
    fixed_window_counts_per_aligned_window,
    token_bucket_bursts_then_refills_keeping_fractions,
    gcra_bursts_then_spaces_units,
    leaky_bucket_delays_then_denies_and_keeps_fractional_leak,
    cost_is_admitted_whole_or_not_at_all,
    cost_above_capacity_is_refused_with_a_reason,
    count_denied_makes_denials_count,
    block_lock_answers_until_its_end,
    penalty_warns_then_bans,
    peek_consumes_nothing,
    multi_limit_rules_are_all_or_nothing,
    shadow_limits_and_rules_never_deny,
    admin_block_unblock_blocks_and_reset,
    a_named_limit_that_changes_algorithm_starts_fresh,
    identities_are_counted_separately,
    a_block_shorter_than_the_window_keeps_the_count,
);

async fn sliding_log_admits_limit_then_slides(h: Harness) {
    let c = call("log", step(Algorithm::SlidingLog, 5, 10 * S));
    for i in 0..5 {
        let o = h.one(&c).await;
        assert!(o.allowed);
        assert_eq!(o.remaining, 4 - i);
        assert_eq!(o.reset_after_us, 10 * S);
        h.advance_us(S);
    }
    let denied = h.one(&c).await;
    assert!(!denied.allowed);
    assert_eq!(
        denied.retry_after_us,
        Some(5 * S),
        "the first unit leaves at 10 s"
    );
    assert_eq!(denied.reset_after_us, 9 * S);
    assert_eq!(denied.remaining, 0);
    h.advance_us(5 * S - 1);
    assert!(!h.one(&c).await.allowed);
    h.advance_us(1);
    let o = h.one(&c).await;
    assert!(o.allowed, "admitted exactly when the oldest unit leaves");
    assert_eq!(o.remaining, 0);
}

async fn sliding_log_same_instant_units_are_distinct(h: Harness) {
    let c = call("log", step(Algorithm::SlidingLog, 100, S));
    let admitted = {
        let mut n = 0;
        for _ in 0..150 {
            n += usize::from(h.one(&c).await.allowed);
        }
        n
    };
    assert_eq!(admitted, 100);
}

async fn sliding_window_admits_limit_and_slides_by_bucket(h: Harness) {
    let c = call("sw", step(Algorithm::SlidingWindow, 4, 10 * S));
    for i in 0..4 {
        let o = h.one(&c).await;
        assert!(o.allowed);
        assert_eq!(o.remaining, 3 - i);
        h.advance_us(S);
    }
    h.advance_us(S);
    let o = h.one(&c).await;
    assert!(!o.allowed);
    // The first bucket ([0, 1 s)) stops counting at (0 + 10 + 1) s.
    assert_eq!(o.retry_after_us, Some(6 * S));
    assert_eq!(o.reset_after_us, 9 * S);
    h.advance_us(6 * S - 1);
    assert!(!h.one(&c).await.allowed);
    h.advance_us(1);
    assert!(h.one(&c).await.allowed);
}

async fn fixed_window_counts_per_aligned_window(h: Harness) {
    // The clock starts on a 10 s boundary; move into the window.
    h.advance_us(2 * S);
    let c = call("fw", step(Algorithm::FixedWindow, 3, 10 * S));
    for _ in 0..3 {
        assert!(h.one(&c).await.allowed);
    }
    h.advance_us(3 * S);
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(5 * S));
    assert_eq!(o.reset_after_us, 5 * S);
    h.advance_us(5 * S);
    let o = h.one(&c).await;
    assert!(o.allowed);
    assert_eq!((o.remaining, o.reset_after_us), (2, 10 * S));
}

async fn token_bucket_bursts_then_refills_keeping_fractions(h: Harness) {
    // 10 per 10 s, burst 3: three at once, then one per second.
    let mut s = step(Algorithm::TokenBucket, 10, 10 * S);
    s.params.capacity = 3;
    let c = call("tb", s);
    for _ in 0..3 {
        assert!(h.one(&c).await.allowed);
    }
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(S));
    assert_eq!(o.reset_after_us, 3 * S);
    // Denied attempts every 0.25 s must not lose the partial refill.
    for _ in 0..3 {
        h.advance_us(S / 4);
        assert!(!h.one(&c).await.allowed);
    }
    h.advance_us(S / 4);
    let o = h.one(&c).await;
    assert!(o.allowed);
    assert_eq!(o.remaining, 0);
    // A third of a unit refilled: 0.333... of 1 token, not yet a whole one.
    h.advance_us(S / 3);
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(S - S / 3));
}

async fn gcra_bursts_then_spaces_units(h: Harness) {
    let c = call("gcra", step(Algorithm::Gcra, 5, 10 * S));
    for i in 0..5 {
        let o = h.one(&c).await;
        assert!(o.allowed);
        assert_eq!(o.remaining, 4 - i);
    }
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(2 * S));
    assert_eq!(o.reset_after_us, 10 * S);
    h.advance_us(2 * S - 1);
    assert!(!h.one(&c).await.allowed);
    h.advance_us(1);
    assert!(h.one(&c).await.allowed);
    // Interval rounds up: 3 per 10 µs spaces units 4 µs apart.
    let c = call("gcra-odd", step(Algorithm::Gcra, 3, 10));
    for _ in 0..3 {
        assert!(h.one(&c).await.allowed);
    }
    assert_eq!(h.one(&c).await.retry_after_us, Some(4));
}

async fn leaky_bucket_delays_then_denies_and_keeps_fractional_leak(h: Harness) {
    // Drains 1 unit per second; queue of 3.
    let mut s = step(Algorithm::LeakyBucket, 1, S);
    s.params.capacity = 3;
    let c = call("lb", s);
    let mut delays = Vec::new();
    for _ in 0..3 {
        let o = h.one(&c).await;
        assert!(o.allowed);
        delays.push(o.delay_us);
    }
    assert_eq!(delays, [0, S, 2 * S]);
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(S));
    // Queue of 1, checks every 0.4 s: the partial leak is kept.
    let c = call("lb1", step(Algorithm::LeakyBucket, 1, S));
    assert!(h.one(&c).await.allowed);
    h.advance_us(400_000);
    let o = h.one(&c).await;
    assert!(!o.allowed);
    // 0.6 units left: 0.6 * 1e6 is 600000.0000000001 in f64, rounded up (never early).
    assert_eq!(o.retry_after_us, Some(600_001));
    h.advance_us(400_000);
    assert!(!h.one(&c).await.allowed);
    h.advance_us(200_000);
    assert!(
        h.one(&c).await.allowed,
        "exactly one second after the first unit"
    );
}

async fn cost_is_admitted_whole_or_not_at_all(h: Harness) {
    for algorithm in sluice::model::Algorithm::ALL {
        let mut s = step(algorithm, 5, 3600 * S);
        s.cost = 4;
        let id = format!("cost-{algorithm}");
        let big = call(&id, s);
        let o = h.one(&big).await;
        assert!(o.allowed, "{algorithm}");
        assert_eq!(o.remaining, 1, "{algorithm}");
        let two = call(&id, sluice::algorithm::LimitStep { cost: 2, ..s });
        let o = h.one(&two).await;
        assert!(!o.allowed, "{algorithm}");
        assert_eq!(o.remaining, 1, "{algorithm}: a denial takes nothing");
        let one = call(&id, sluice::algorithm::LimitStep { cost: 1, ..s });
        assert!(h.one(&one).await.allowed, "{algorithm}");
        assert!(!h.one(&one).await.allowed, "{algorithm}");
    }
}

async fn cost_above_capacity_is_refused_with_a_reason(h: Harness) {
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

async fn count_denied_makes_denials_count(h: Harness) {
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

async fn block_lock_answers_until_its_end(h: Harness) {
    let limiter = h.limiter(vec![(
        "forgot",
        Rule::new(vec![
            Limit::new(
                &["login_id"],
                "3/30m".parse().unwrap(),
                Algorithm::SlidingLog,
            )
            .with_block(Duration::from_secs(1800)),
        ]),
    )]);
    let attrs = [("login_id", "alice")];
    for _ in 0..3 {
        assert!(limiter.check("forgot", &attrs).await.unwrap().allowed);
    }
    h.advance_us(60 * S);
    let denied = limiter.check("forgot", &attrs).await.unwrap();
    assert!(!denied.allowed);
    let until_ms = h.now_us() / 1000 + 1_800_000;
    assert_eq!(denied.blocked_until_ms, Some(until_ms));
    assert_eq!(denied.retry_after_ms, Some(1_800_000));
    // Long after the window the block still answers, and does not extend itself.
    h.advance_us(1799 * S);
    let blocked = limiter.check("forgot", &attrs).await.unwrap();
    assert!(!blocked.allowed);
    assert_eq!(blocked.blocked_until_ms, Some(until_ms));
    assert_eq!(blocked.retry_after_ms, Some(1000));
    h.advance_us(S);
    let free = limiter.check("forgot", &attrs).await.unwrap();
    assert!(free.allowed);
    assert_eq!(free.blocked_until_ms, None);
    // Another identity was never blocked.
    assert!(
        limiter
            .check("forgot", &[("login_id", "bob")])
            .await
            .unwrap()
            .allowed
    );
}

async fn penalty_warns_then_bans(h: Harness) {
    let limiter = h.limiter(vec![(
        "game",
        Rule::new(vec![
            Limit::new(&["member"], "1/10s".parse().unwrap(), Algorithm::SlidingLog).with_penalty(
                Penalty {
                    warn_after: 2,
                    ban_after: 3,
                    ban: Duration::from_secs(60),
                    memory: Duration::from_secs(3600),
                },
            ),
        ]),
    )]);
    let attrs = [("member", "m1")];
    assert!(limiter.check("game", &attrs).await.unwrap().allowed);
    let mut seen = Vec::new();
    for _ in 0..3 {
        h.advance_us(1000);
        let d = limiter.check("game", &attrs).await.unwrap();
        assert!(!d.allowed);
        seen.push((d.violations, d.warning, d.blocked_until_ms.is_some()));
    }
    assert_eq!(seen, [(1, false, false), (2, true, false), (3, true, true)]);
    let banned_until = h.now_us() / 1000 + 60_000;
    // After the window the ban still holds; the count and warning are reported.
    h.advance_us(30 * S);
    let d = limiter.check("game", &attrs).await.unwrap();
    assert!(!d.allowed);
    assert_eq!((d.violations, d.warning), (3, true));
    assert_eq!(d.blocked_until_ms, Some(banned_until));
    h.clock.set_us(banned_until * 1000);
    let d = limiter.check("game", &attrs).await.unwrap();
    assert!(d.allowed);
    assert_eq!(
        (d.violations, d.warning),
        (3, true),
        "violations outlive the ban"
    );
    // The next violation bans again at once (still remembered).
    let d = limiter.check("game", &attrs).await.unwrap();
    assert_eq!(d.violations, 4);
    assert_eq!(d.blocked_until_ms, Some(banned_until + 60_000));
    // Forgotten after `memory` without a violation.
    h.clock.set_us(banned_until * 1000 + 3600 * S + 1);
    let d = limiter.check("game", &attrs).await.unwrap();
    assert!(d.allowed);
    assert_eq!((d.violations, d.warning), (0, false));
    // Direct store call: penalty parameters with a zero-length memory.
    let mut s = step(Algorithm::Gcra, 1, S);
    s.penalty = Some(penalty::Settings {
        warn_after: 1,
        ban_after: 9,
        ban_us: S,
        memory_us: 1,
    });
    let c = call("pen-direct", s);
    assert!(h.one(&c).await.allowed);
    let o = h.one(&c).await;
    assert_eq!((o.violations, o.warning), (1, true));
    h.advance_us(1);
    assert_eq!(h.one(&c).await.violations, 1, "the first one was forgotten");
}

async fn peek_consumes_nothing(h: Harness) {
    for algorithm in Algorithm::ALL {
        let mut s = step(algorithm, 2, 60 * S);
        s.block_us = Some(60 * S);
        s.penalty = Some(penalty::Settings {
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

async fn multi_limit_rules_are_all_or_nothing(h: Harness) {
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

async fn shadow_limits_and_rules_never_deny(h: Harness) {
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

async fn admin_block_unblock_blocks_and_reset(h: Harness) {
    let limiter = h.limiter(vec![(
        "login",
        Rule::new(vec![
            Limit::new(&["ip"], "2/1m".parse().unwrap(), Algorithm::Gcra)
                .with_block(Duration::from_secs(60)),
        ]),
    )]);
    let a = [("ip", "1.2.3.4")];
    let b = [("ip", "5.6.7.8")];
    assert!(limiter.blocks("login").await.unwrap().is_empty());
    let until = limiter
        .block("login", &a, Duration::from_secs(600))
        .await
        .unwrap();
    assert_eq!(until, h.now_us() / 1000 + 600_000);
    // A shorter block never shortens a longer one.
    assert_eq!(
        limiter
            .block("login", &a, Duration::from_secs(60))
            .await
            .unwrap(),
        until
    );
    let d = limiter.check("login", &a).await.unwrap();
    assert!(!d.allowed);
    assert_eq!(d.blocked_until_ms, Some(until));
    for _ in 0..3 {
        limiter.check("login", &b).await.unwrap();
    }
    let blocks = limiter.blocks("login").await.unwrap();
    assert_eq!(blocks.len(), 2);
    assert_eq!(blocks[0].identity, "ip=1.2.3.4");
    assert_eq!(blocks[0].limit, "ip-gcra-1m");
    assert_eq!(blocks[0].blocked_until_ms, until);
    assert_eq!(blocks[1].identity, "ip=5.6.7.8");
    assert!(limiter.unblock("login", &a).await.unwrap());
    assert!(!limiter.unblock("login", &a).await.unwrap());
    assert!(limiter.check("login", &a).await.unwrap().allowed);
    // Reset forgets counters and blocks.
    limiter.reset("login", &b).await.unwrap();
    let d = limiter.check("login", &b).await.unwrap();
    assert!(d.allowed);
    assert_eq!(d.remaining, 1);
    assert_eq!(limiter.blocks("login").await.unwrap().len(), 0);
    // Blocks end by themselves.
    limiter
        .block("login", &a, Duration::from_secs(1))
        .await
        .unwrap();
    assert_eq!(limiter.blocks("login").await.unwrap().len(), 1);
    h.advance_us(S);
    assert!(limiter.blocks("login").await.unwrap().is_empty());
}

async fn a_named_limit_that_changes_algorithm_starts_fresh(h: Harness) {
    let named = |algorithm| {
        let mut l = Limit::new(&["ip"], "2/1h".parse().unwrap(), algorithm);
        l.name = Some("per-ip".into());
        Rule::new(vec![l])
    };
    let limiter = h.limiter(vec![("api", named(Algorithm::SlidingLog))]);
    let attrs = [("ip", "1.2.3.4")];
    let cycle = [
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::TokenBucket,
        Algorithm::LeakyBucket,
        Algorithm::FixedWindow,
        Algorithm::Gcra,
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

async fn identities_are_counted_separately(h: Harness) {
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

async fn a_block_shorter_than_the_window_keeps_the_count(h: Harness) {
    let mut s = step(Algorithm::SlidingWindow, 2, 3600 * S);
    s.block_us = Some(S);
    let c = call("short-block", s);
    assert!(h.one(&c).await.allowed);
    assert!(h.one(&c).await.allowed);
    assert!(h.one(&c).await.blocked_until_us.is_some());
    h.advance_us(S / 2);
    assert!(!h.one(&c).await.allowed, "blocked");
    h.advance_us(S);
    let o = h.one(&c).await;
    assert!(!o.allowed, "the block is over but the window is still full");
    assert_eq!(o.remaining, 0);
}
