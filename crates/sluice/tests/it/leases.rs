//! Leases of concurrency limits beyond what every store shows (the conformance suite): leases
//! under each fail policy, the bound on lease ids, and what a lease's decision says in headers.
//! Time is a `ManualClock`; nothing sleeps.

use std::sync::Arc;
use std::time::Duration;

use sluice::limiter::MAX_LEASE_LEN;
use sluice::model::{HeaderStyle, Limit, Rule, headers};
use sluice::{Clock, Error, FailPolicy, Limiter, ManualClock, MemoryStore, Options};

use crate::common;
use common::DownStore;

fn jobs(limit: u64) -> Rule {
    Rule::new(vec![Limit::concurrency(
        &["tenant"],
        limit,
        Duration::from_secs(60),
    )])
}

#[tokio::test(start_paused = true)]
async fn leases_under_each_fail_policy() {
    let clock = ManualClock::at_2026();
    let with_policy = |fail| {
        let mut rule = jobs(1);
        rule.fail = Some(fail);
        rule
    };
    let limiter = Limiter::builder(Arc::new(DownStore::default()))
        .clock(Arc::new(clock.clone()))
        .options(Options {
            timeout: Duration::from_millis(50),
            ..Options::default()
        })
        .rule("open", with_policy(FailPolicy::Open))
        .rule("closed", with_policy(FailPolicy::Closed))
        .rule("local", with_policy(FailPolicy::Local))
        .build()
        .unwrap();
    let t1 = [("tenant", "t1")];
    // Open: admitted without a lease (nothing was taken anywhere, nothing to give back).
    let open = limiter.check("open", &t1).await.unwrap();
    assert!(open.allowed && open.degraded && open.lease.is_none());
    let closed = limiter.check("closed", &t1).await.unwrap();
    assert!(!closed.allowed && closed.degraded && closed.lease.is_none());
    // Local: this node holds the lease; releasing and renewing it work while the store is down.
    let local = limiter.check("local", &t1).await.unwrap();
    assert!(local.allowed && local.degraded);
    let lease = local.lease.clone().expect("a lease on this node");
    assert!(!limiter.check("local", &t1).await.unwrap().allowed);
    clock.advance(Duration::from_secs(30));
    assert_eq!(
        limiter.renew(&lease).await.unwrap(),
        Some(clock.now_us().as_millis() + 60_000)
    );
    assert!(limiter.release(&lease).await.unwrap());
    assert!(limiter.check("local", &t1).await.unwrap().allowed);
    // A lease this node does not hold is in the store, which cannot be asked: an error, and the
    // lease ends by itself.
    let elsewhere = lease.replacen(&lease[..1], if &lease[..1] == "A" { "B" } else { "A" }, 1);
    assert!(matches!(
        limiter.release(&elsewhere).await,
        Err(Error::Store(_))
    ));
}

#[tokio::test]
async fn lease_ids_are_bounded_and_rules_that_could_exceed_the_bound_are_refused() {
    let long = "a".repeat(64);
    let by = [long.as_str(), long.as_str()].map(|n| n.to_string());
    let named = |name: &str| {
        let mut limit = Limit::concurrency(&[], 5, Duration::from_secs(60));
        limit.by = by
            .iter()
            .map(|b| sluice::model::By::parse(&format!("{b}|x")).unwrap())
            .collect();
        limit.name = Some(name.to_string());
        limit
    };
    // Two limits of two 64-character attributes: ids fit.
    let fits = Rule::new(vec![named("first"), named("second")]);
    let limiter = Limiter::builder(MemoryStore::new())
        .rule("fits", fits)
        .build()
        .unwrap();
    let value = "v".repeat(64);
    let d = limiter
        .check("fits", &[(long.as_str(), value.as_str())])
        .await
        .unwrap();
    let id = d.lease.unwrap();
    assert!(id.len() <= MAX_LEASE_LEN, "{}", id.len());
    assert!(limiter.release(&id).await.unwrap());
    // Five such limits could make ids longer than the bound: refused when the rule is compiled.
    let names = ["l1", "l2", "l3", "l4", "l5"];
    let refused = Limiter::builder(MemoryStore::new())
        .rule("long", Rule::new(names.map(named).to_vec()))
        .build();
    match refused {
        Err(Error::InvalidRule { error, .. }) => {
            assert!(error.message.contains("lease ids"), "{error}")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn the_headers_of_a_lease_count_places() {
    let limiter = Limiter::builder(MemoryStore::with_clock(Arc::new(ManualClock::at_2026())))
        .rule("jobs", jobs(2))
        .build()
        .unwrap();
    let t1 = [("tenant", "t1")];
    let d = limiter.check("jobs", &t1).await.unwrap();
    let h = headers(&d, HeaderStyle::Both);
    let value = |name: &str| h.iter().find(|(n, _)| *n == name).unwrap().1.clone();
    // Two places, leases of 60 s, one free, every lease over in 60 s.
    assert_eq!(value("RateLimit-Policy"), "\"jobs\";q=2;w=60");
    assert_eq!(value("RateLimit"), "\"jobs\";r=1;t=60");
    assert_eq!(value("X-RateLimit-Remaining"), "1");
    limiter.check("jobs", &t1).await.unwrap();
    let denied = limiter.check("jobs", &t1).await.unwrap();
    let h = headers(&denied, HeaderStyle::Both);
    assert!(h.contains(&("Retry-After", "60".to_string())));
}
