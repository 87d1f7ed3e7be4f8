//! A queue that cannot grow old ([`sluice::limiter::standing_queue`]), on a store outside the
//! process that counts the decisions it is asked for, on Tokio's paused clock (no test here
//! depends on how fast the machine is):
//! - once every decision has waited in the service longer than the target for a whole
//!   interval, the ones that waited longer are answered by their rule's fail policy, marked
//!   `reason: "queue"`, and the store is not asked for them;
//! - a steady load whose waits dip below the target within every interval (below capacity)
//!   has nothing shed: the store decides every request.

use crate::common::remote::Remote;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sluice::limiter::{QueueLimit, standing_queue};
use sluice::model::{Algorithm, Limit};
use sluice::{FailPolicy, Limiter, Options, Rule};
use tokio::time::Instant;

const MS: Duration = Duration::from_millis(1);

/// A limiter on a [`Remote`] store with rules `open` and `closed`, and its store's call count.
fn limiter() -> (Limiter, Arc<AtomicUsize>) {
    let store = Remote::default();
    let calls = store.calls.clone();
    let rule = |fail| {
        let mut r = Rule::new(vec![Limit::new(
            &["ip"],
            "1000000/1s".parse().unwrap(),
            Algorithm::Gcra,
        )]);
        r.fail = Some(fail);
        r
    };
    let limiter = Limiter::builder(store)
        .rule("open", rule(FailPolicy::Open))
        .rule("closed", rule(FailPolicy::Closed))
        .options(Options {
            queue: Some(QueueLimit::DEFAULT),
            ..Options::default()
        })
        .build()
        .unwrap();
    (limiter, calls)
}

/// A check of `rule` for a request that has waited `waited` in the service.
async fn check(limiter: &Limiter, rule: &str, waited: Duration) -> sluice::Decision {
    let arrived = Instant::now() - waited;
    standing_queue::arrived(arrived, limiter.check(rule, &[("ip", "203.0.113.9")]))
        .await
        .unwrap()
}

#[tokio::test(start_paused = true)]
async fn a_standing_queue_is_answered_by_the_fail_policy_without_the_store() {
    let (limiter, calls) = limiter();
    let target = QueueLimit::DEFAULT.target;
    // One decision every 10 ms, each having waited 4 × the target: the queue stands.
    let mut shed = 0;
    for i in 0..30 {
        let rule = if i % 2 == 0 { "closed" } else { "open" };
        let d = check(&limiter, rule, target * 4).await;
        if d.degraded {
            assert_eq!(d.reason.as_deref(), Some(standing_queue::REASON), "{d:?}");
            assert_eq!(d.allowed, rule == "open", "the rule's fail policy: {d:?}");
            shed += 1;
        } else {
            assert!(d.allowed && i <= 10, "decided by the store: {i}, {d:?}");
        }
        tokio::time::advance(10 * MS).await;
    }
    assert_eq!(shed, 20, "shed once the waits had stood for the interval");
    assert_eq!(
        calls.load(Ordering::SeqCst),
        10,
        "the store was asked for the decisions it decided only"
    );

    // A decision that waited less than the target is decided, and the queue has drained: the
    // next long wait starts a new interval instead of being shed.
    let d = check(&limiter, "closed", target / 2).await;
    assert!(d.allowed && !d.degraded, "{d:?}");
    let d = check(&limiter, "closed", target * 4).await;
    assert!(d.allowed && !d.degraded, "{d:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 12);
}

#[tokio::test(start_paused = true)]
async fn nothing_is_shed_below_capacity() {
    let (limiter, calls) = limiter();
    // A decision every millisecond for 5 s; waits from 0 to 9 ms (half of them past the
    // target), rising and falling as a queue below capacity does, draining every 10 ms.
    for i in 0..5_000u32 {
        let d = check(&limiter, "closed", MS * (i % 10)).await;
        assert!(d.allowed && !d.degraded, "{i}: {d:?}");
        tokio::time::advance(MS).await;
    }
    assert_eq!(calls.load(Ordering::SeqCst), 5_000);

    // Outside `arrived` no wait is known, and nothing is ever shed.
    for _ in 0..300 {
        let d = limiter
            .check("closed", &[("ip", "198.51.100.1")])
            .await
            .unwrap();
        assert!(!d.degraded, "{d:?}");
        tokio::time::advance(MS).await;
    }
}
