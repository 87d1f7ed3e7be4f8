//! `Limiter::check_all`: several rules decided as one request (Envoy's descriptors), on the
//! memory store and on a real Redis: all-or-nothing, looks that can deny, shadow rules that
//! cannot, shadow limits never sent a cost they cannot hold, leases only for a request that
//! passed, bad input that decides nothing, each part's fail policy when the store is down, and
//! exactness under concurrent requests.

#![cfg(feature = "conformance")]
use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{DownStore, Harness};
use sluice::limiter::RuleCheck;
use sluice::model::{Algorithm, FailPolicy, Limit, Penalty};
use sluice::{Check, Limiter, Rule};

fn rule(by: &str, rate: &str) -> Rule {
    Rule::new(vec![Limit::new(
        &[by],
        rate.parse().unwrap(),
        Algorithm::SlidingLog,
    )])
}

fn rules() -> Vec<(&'static str, Rule)> {
    let mut shadow = rule("path", "1/1m");
    shadow.shadow = true;
    vec![
        ("per_ip", rule("ip", "10/1m")),
        ("per_path", rule("path", "1/1m")),
        ("shadow_path", shadow),
    ]
}

const IP: [(&str, &str); 1] = [("ip", "203.0.113.9")];
const PATH: [(&str, &str); 1] = [("path", "/a")];

fn part<'a>(
    rule: &'a str,
    attrs: &'a [(&'a str, &'a str)],
    cost: u64,
) -> RuleCheck<'a, [(&'a str, &'a str)]> {
    RuleCheck { rule, attrs, cost }
}

async fn remaining(limiter: &Limiter, rule: &str, attrs: &[(&str, &str)]) -> u64 {
    limiter
        .check_with(rule, attrs, Check::ONE.peek())
        .await
        .unwrap()
        .remaining
}

async fn all_or_nothing(harness: Harness) {
    let limiter = harness.limiter(rules());
    let both = [part("per_ip", &IP, 1), part("per_path", &PATH, 1)];
    let first = limiter.check_all(&both).await.unwrap();
    assert!(first.iter().all(|d| d.allowed));
    let second = limiter.check_all(&both).await.unwrap();
    assert_eq!((second[0].allowed, second[1].allowed), (true, false));
    assert_eq!(
        remaining(&limiter, "per_ip", &IP).await,
        9,
        "the denial took nothing"
    );

    // A look (cost 0) that denies turns the whole request into a look.
    let looked = limiter
        .check_all(&[part("per_path", &PATH, 0), part("per_ip", &IP, 3)])
        .await
        .unwrap();
    assert!(!looked[0].allowed && looked[1].allowed);
    assert_eq!(remaining(&limiter, "per_ip", &IP).await, 9);
    // A look that allows lets the rest consume, and answers in the callers' order.
    let other_path = [("path", "/b")];
    let passed = limiter
        .check_all(&[part("per_ip", &IP, 3), part("per_path", &other_path, 0)])
        .await
        .unwrap();
    assert_eq!(
        (passed[0].rule.as_str(), passed[1].rule.as_str()),
        ("per_ip", "per_path")
    );
    assert!(passed.iter().all(|d| d.allowed));
    assert_eq!(remaining(&limiter, "per_ip", &IP).await, 6);
    assert_eq!(remaining(&limiter, "per_path", &other_path).await, 1);

    // A shadow rule over its limit never denies the others.
    let shadowed = [part("per_ip", &IP, 1), part("shadow_path", &PATH, 1)];
    limiter.check_all(&shadowed).await.unwrap();
    let again = limiter.check_all(&shadowed).await.unwrap();
    assert!(again.iter().all(|d| d.allowed));
    assert_eq!(remaining(&limiter, "per_ip", &IP).await, 4);

    // Bad input in any part decides nothing.
    let error = limiter
        .check_all(&[part("per_ip", &IP, 1), part("nope", &PATH, 1)])
        .await
        .unwrap_err();
    assert!(error.to_string().contains("nope"));
    let missing = limiter
        .check_all(&[part("per_ip", &IP, 1), part("per_path", &IP, 1)])
        .await;
    assert!(missing.is_err());
    assert_eq!(remaining(&limiter, "per_ip", &IP).await, 4);
}

#[tokio::test]
async fn all_or_nothing_on_memory() {
    all_or_nothing(Harness::memory()).await;
}

#[tokio::test]
async fn all_or_nothing_on_redis() {
    all_or_nothing(Harness::redis().await).await;
}

/// A part on a concurrency limit holds a lease when the request passed, and only then.
async fn leases_only_when_the_request_passed(harness: Harness) {
    let mut rules = rules();
    let jobs = Rule::new(vec![Limit::concurrency(
        &["tenant"],
        1,
        std::time::Duration::from_secs(30),
    )]);
    rules.push(("jobs", jobs));
    let limiter = harness.limiter(rules);
    let tenant = [("tenant", "t1")];
    // Denied by `per_path` (taken first): no lease, and the slot stays free.
    let path_taken = limiter
        .check_all(&[part("per_path", &PATH, 1)])
        .await
        .unwrap();
    assert!(path_taken[0].allowed);
    let denied = limiter
        .check_all(&[part("jobs", &tenant, 1), part("per_path", &PATH, 1)])
        .await
        .unwrap();
    assert!(denied[0].allowed && !denied[1].allowed);
    assert_eq!(denied[0].lease, None, "a denied request holds no lease");
    let passed = limiter
        .check_all(&[part("jobs", &tenant, 1), part("per_ip", &IP, 1)])
        .await
        .unwrap();
    assert!(passed.iter().all(|d| d.allowed));
    let lease = passed[0]
        .lease
        .clone()
        .expect("the passed request holds a lease");
    assert!(passed[0].lease_until_ms.is_some());
    assert!(
        !limiter
            .check_all(&[part("jobs", &tenant, 1)])
            .await
            .unwrap()[0]
            .allowed,
        "the one slot is held"
    );
    assert!(limiter.release(&lease).await.unwrap());
    assert!(
        limiter
            .check_all(&[part("jobs", &tenant, 1)])
            .await
            .unwrap()[0]
            .allowed
    );
}

#[tokio::test]
async fn leases_only_when_the_request_passed_on_memory() {
    leases_only_when_the_request_passed(Harness::memory()).await;
}

#[tokio::test]
async fn leases_only_when_the_request_passed_on_redis() {
    leases_only_when_the_request_passed(Harness::redis().await).await;
}

/// A shadow limit that cannot hold a part's cost is never sent it, as in a check: it answers
/// denied, and its store counts no violation (nor a ban) for a cost it could never admit.
async fn a_cost_a_shadow_limit_cannot_hold_is_not_sent(harness: Harness) {
    let ban = Duration::from_secs(3600);
    let watched =
        Limit::new(&["ip"], "1/1h".parse().unwrap(), Algorithm::Gcra).with_penalty(Penalty {
            warn_after: 1,
            ban_after: 1,
            ban,
            memory: ban,
        });
    let rules = vec![(
        "watched",
        Rule::new(vec![
            Limit::new(&["ip"], "10/1m".parse().unwrap(), Algorithm::Gcra),
            Limit {
                shadow: true,
                ..watched
            },
        ]),
    )];
    let limiter = harness.limiter(rules);
    let two = limiter.check_all(&[part("watched", &IP, 2)]).await.unwrap();
    assert!(two[0].allowed && !two[0].limits[1].allowed);
    let one = limiter.check("watched", &IP).await.unwrap();
    let shadowed = &one.limits[1];
    assert!(shadowed.allowed, "its unit was never taken");
    assert_eq!((shadowed.violations, shadowed.blocked_until_ms), (0, None));
}

#[tokio::test]
async fn a_cost_a_shadow_limit_cannot_hold_is_not_sent_on_memory() {
    a_cost_a_shadow_limit_cannot_hold_is_not_sent(Harness::memory()).await;
}

#[tokio::test]
async fn a_cost_a_shadow_limit_cannot_hold_is_not_sent_on_redis() {
    a_cost_a_shadow_limit_cannot_hold_is_not_sent(Harness::redis().await).await;
}

#[tokio::test]
async fn each_part_gets_its_rules_fail_policy_when_the_store_is_down() {
    let mut open = rule("ip", "10/1m");
    open.fail = Some(FailPolicy::Open);
    let mut closed = rule("path", "10/1m");
    closed.fail = Some(FailPolicy::Closed);
    let mut local = rule("ip", "1/1m");
    local.fail = Some(FailPolicy::Local);
    let limiter = Limiter::builder(DownStore::default())
        .rules([
            ("open".to_string(), open),
            ("closed".to_string(), closed),
            ("local".to_string(), local),
        ])
        .build()
        .unwrap();
    let decided = limiter
        .check_all(&[
            part("open", &IP, 1),
            part("closed", &PATH, 1),
            part("local", &IP, 1),
        ])
        .await
        .unwrap();
    assert!(decided.iter().all(|d| d.degraded));
    let allowed: Vec<bool> = decided.iter().map(|d| d.allowed).collect();
    assert_eq!(allowed, [true, false, true]);
    // The request was denied (closed), so the local part consumed nothing: it still passes.
    let local_only = limiter.check_all(&[part("local", &IP, 1)]).await.unwrap();
    assert!(local_only[0].allowed);
    let local_again = limiter.check_all(&[part("local", &IP, 1)]).await.unwrap();
    assert!(!local_again[0].allowed, "the node's own limit now holds");
}

#[tokio::test]
async fn concurrent_requests_never_admit_more_than_any_part_allows() {
    let harness = Harness::redis().await;
    let limiter = Arc::new(harness.limiter(vec![
        ("per_ip", rule("ip", "30/1m")),
        ("per_path", rule("path", "1000/1m")),
    ]));
    let tasks: Vec<_> = (0..120)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let parts = [part("per_path", &PATH, 1), part("per_ip", &IP, 1)];
                limiter
                    .check_all(&parts)
                    .await
                    .unwrap()
                    .iter()
                    .all(|d| d.allowed)
            })
        })
        .collect();
    let mut admitted = 0;
    for task in tasks {
        admitted += u64::from(task.await.unwrap());
    }
    assert_eq!(admitted, 30);
    // Denied requests took nothing from the path's counter.
    assert_eq!(remaining(&limiter, "per_path", &PATH).await, 1000 - 30);
}
