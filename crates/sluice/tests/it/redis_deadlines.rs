//! The caller's deadline on Redis ([`sluice::limiter::deadline`]):
//! - a check whose caller has already given up asks Redis nothing (Redis' own count of script
//!   calls does not move) and is answered by its rule's fail policy with `reason: "deadline"`,
//!   on the one-rule path and on [`Limiter::check_all`];
//! - a deadline that comes before `store.timeout` bounds the wait for a stalled Redis, and
//!   running out of it does not open the breaker: once Redis answers again, so do decisions.
#![cfg(feature = "redis")]

use crate::common;

use std::time::Duration;

use sluice::limiter::{RuleCheck, deadline};
use sluice::model::{Algorithm, Limit};
use sluice::{FailPolicy, Limiter, Options, Rule};
use sluice_test_support::{Fault, FaultProxy, RedisServer};
use tokio::time::Instant;

/// Far longer than any deadline here: a check that waited for it was not bounded by its deadline.
const STORE_TIMEOUT: Duration = Duration::from_secs(30);

async fn limiter(url: &str) -> Limiter {
    let rule = |fail| {
        let mut r = Rule::new(vec![Limit::new(
            &["ip"],
            "1000/1d".parse().unwrap(),
            Algorithm::Gcra,
        )]);
        r.fail = Some(fail);
        r
    };
    Limiter::builder(common::url_store(url, None, &common::unique_prefix()).await)
        .rule("open", rule(FailPolicy::Open))
        .rule("closed", rule(FailPolicy::Closed))
        .options(Options {
            timeout: STORE_TIMEOUT,
            ..Options::default()
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_check_past_its_deadline_asks_redis_nothing() {
    let server = RedisServer::start();
    let limiter = limiter(&server.url()).await;
    let d = limiter.check("open", &[("ip", "1.2.3.4")]).await.unwrap();
    assert!(d.allowed && !d.degraded, "{d:?}");
    let before = server.decision_calls();
    assert!(before > 0, "a check without a deadline asks Redis");

    for (rule, allowed) in [("open", true), ("closed", false)] {
        let d = deadline::within(Instant::now(), limiter.check(rule, &[("ip", "1.2.3.4")]))
            .await
            .unwrap();
        assert_eq!(
            (d.allowed, d.degraded, d.reason.as_deref()),
            (allowed, true, Some(deadline::REASON)),
            "{rule}: {d:?}"
        );
    }
    let parts = [
        RuleCheck {
            rule: "open",
            attrs: &[("ip", "5.6.7.8")][..],
            cost: 1,
        },
        RuleCheck {
            rule: "closed",
            attrs: &[("ip", "5.6.7.8")][..],
            cost: 1,
        },
    ];
    let all = deadline::within(Instant::now(), limiter.check_all(&parts))
        .await
        .unwrap();
    assert!(
        all.iter()
            .all(|d| d.degraded && d.reason.as_deref() == Some(deadline::REASON)),
        "{all:?}"
    );
    assert_eq!(
        server.decision_calls(),
        before,
        "no script ran past a deadline"
    );

    // A deadline still ahead leaves the decision to Redis.
    let ahead = Instant::now() + STORE_TIMEOUT;
    let d = deadline::within(ahead, limiter.check("closed", &[("ip", "1.2.3.4")]))
        .await
        .unwrap();
    assert!(d.allowed && !d.degraded, "{d:?}");
    assert!(server.decision_calls() > before);
}

#[tokio::test]
async fn a_deadline_bounds_the_wait_for_a_stalled_redis_and_spares_the_breaker() {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let limiter = limiter(&proxy.redis_url()).await;
    let d = limiter.check("closed", &[("ip", "1.2.3.4")]).await.unwrap();
    assert!(d.allowed && !d.degraded, "{d:?}");

    proxy.set(Fault::Stall);
    // More than the breaker's failures to open, each cut short by its deadline.
    for _ in 0..5 {
        let started = Instant::now();
        let d = deadline::within(
            started + Duration::from_millis(50),
            limiter.check("closed", &[("ip", "1.2.3.4")]),
        )
        .await
        .unwrap();
        assert_eq!(
            (d.allowed, d.degraded, d.reason.as_deref()),
            (false, true, Some(deadline::REASON)),
            "{d:?}"
        );
        assert!(
            started.elapsed() < STORE_TIMEOUT,
            "the deadline, not the store timeout, ended the wait"
        );
    }

    proxy.set(Fault::None);
    let d = limiter.check("closed", &[("ip", "1.2.3.4")]).await.unwrap();
    assert!(
        d.allowed && !d.degraded,
        "the breaker stayed closed: deadlines are not store failures: {d:?}"
    );
}
