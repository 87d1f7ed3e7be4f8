//! Conformance: concurrency limits — leases taken, released, renewed and expired, and how they
//! compose with the other limits of a rule, blocks, shadow mode and bad lease ids.

use std::time::Duration;

use super::{S, Subject};
use crate::error::Error;
use crate::model::{Algorithm, Limit, Micros};
use crate::{Check, Decision, Limiter, Rule};

fn exports(h: &Subject, limit: u64) -> Limiter {
    h.limiter(vec![(
        "export",
        Rule::new(vec![Limit::concurrency(
            &["tenant"],
            limit,
            Duration::from_secs(30),
        )]),
    )])
}

const T1: [(&str, &str); 1] = [("tenant", "t1")];

fn lease(d: &Decision) -> &str {
    d.lease.as_deref().expect("an admitted check holds a lease")
}

/// Behaviour: N leases are held, the next check is denied until one is released.
pub async fn concurrency_holds_n_then_a_release_lets_the_next_in(h: Subject) {
    let limiter = exports(&h, 3);
    let mut held = Vec::new();
    for i in 0..3 {
        let d = limiter.check("export", &T1).await.unwrap();
        assert!(d.allowed);
        assert_eq!((d.quota, d.remaining), (3, 2 - i));
        assert_eq!(d.lease_until_ms, Some(h.now_us().as_millis() + 30_000));
        held.push(d);
        h.advance_us(S);
    }
    assert!(
        held.windows(2).all(|w| w[0].lease != w[1].lease),
        "every lease has its own id"
    );
    let denied = limiter.check("export", &T1).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!(denied.lease, None, "a denied check holds nothing");
    // Without a release, the first lease (taken 3 s ago) frees a place in 27 s.
    assert_eq!(denied.retry_after_ms, Some(27_000));
    assert_eq!(denied.reset_after_ms, 29_000);
    // Another tenant has its own three.
    assert!(
        limiter
            .check("export", &[("tenant", "t2")])
            .await
            .unwrap()
            .allowed
    );
    assert!(limiter.release(lease(&held[1])).await.unwrap());
    let next = limiter.check("export", &T1).await.unwrap();
    assert!(next.allowed, "the release let the next one in");
    assert_eq!(next.remaining, 0);
    assert!(!limiter.check("export", &T1).await.unwrap().allowed);
    // A peek takes nothing and holds no lease.
    let peek = limiter
        .check_with("export", &T1, Check::ONE.peek())
        .await
        .unwrap();
    assert!(!peek.allowed && peek.lease.is_none());
}

/// Behaviour: A lease expires by itself; releasing it twice, or after it expired, is harmless.
pub async fn concurrency_leases_expire_and_double_releases_are_harmless(h: Subject) {
    let limiter = exports(&h, 2);
    let first = limiter.check("export", &T1).await.unwrap();
    let second = limiter.check("export", &T1).await.unwrap();
    assert!(first.allowed && second.allowed);
    assert!(!limiter.check("export", &T1).await.unwrap().allowed);
    assert!(limiter.release(lease(&second)).await.unwrap());
    assert!(!limiter.release(lease(&second)).await.unwrap(), "twice");
    let third = limiter.check("export", &T1).await.unwrap();
    assert!(third.allowed);
    assert_eq!(third.remaining, 0, "the double release freed nothing more");
    // Nobody releases: the leases end 30 s after they were taken.
    h.advance_us(30 * S - Micros::new(1));
    assert!(!limiter.check("export", &T1).await.unwrap().allowed);
    h.advance_us(Micros::new(1));
    let after = limiter.check("export", &T1).await.unwrap();
    assert!(after.allowed);
    assert_eq!(
        after.remaining, 1,
        "both expired leases gave their place back"
    );
    assert!(
        !limiter.release(lease(&first)).await.unwrap(),
        "an expired lease is not held"
    );
    assert_eq!(
        limiter
            .check_with("export", &T1, Check::ONE.peek())
            .await
            .unwrap()
            .remaining,
        1,
        "releasing an expired lease freed nothing"
    );
}

/// Behaviour: A renewal moves a lease's end; a lapsed lease is not renewed.
pub async fn concurrency_renewals_extend_leases(h: Subject) {
    let limiter = exports(&h, 1);
    let d = limiter.check("export", &T1).await.unwrap();
    h.advance_us(20 * S);
    let until = limiter.renew(lease(&d)).await.unwrap();
    assert_eq!(until, Some(h.now_us().as_millis() + 30_000));
    h.advance_us(29 * S);
    assert!(
        !limiter.check("export", &T1).await.unwrap().allowed,
        "still held 49 s after it was taken"
    );
    h.advance_us(S);
    assert!(limiter.check("export", &T1).await.unwrap().allowed);
    assert_eq!(
        limiter.renew(lease(&d)).await.unwrap(),
        None,
        "it lapsed (and the place went to someone else)"
    );
}

/// Behaviour: Costs hold units; a lease is all-or-nothing with the other limits of its rule.
pub async fn concurrency_composes_all_or_nothing(h: Subject) {
    let limiter = h.limiter(vec![(
        "report",
        Rule::new(vec![
            Limit::concurrency(&["tenant"], 3, Duration::from_secs(60)),
            Limit::new(&["tenant"], "4/1h".parse().unwrap(), Algorithm::Gcra),
        ]),
    )]);
    let cost = |n| Check::cost(n);
    let first = limiter.check_with("report", &T1, cost(2)).await.unwrap();
    assert!(first.allowed);
    assert_eq!(first.limits[0].remaining, 1, "a cost of 2 holds two places");
    // The concurrency limit denies: gcra consumes nothing.
    let d = limiter.check_with("report", &T1, cost(2)).await.unwrap();
    assert!(!d.allowed && d.lease.is_none());
    assert!(!d.limits[0].allowed && d.limits[1].allowed);
    let d = limiter.check("report", &T1).await.unwrap();
    assert!(d.allowed && d.lease.is_some());
    assert_eq!(
        d.limits[1].remaining, 1,
        "gcra took 2 + 1, not the denied 2"
    );
    // Gcra denies: the concurrency limit takes no lease.
    assert!(limiter.release(lease(&first)).await.unwrap());
    let d = limiter.check_with("report", &T1, cost(2)).await.unwrap();
    assert!(!d.allowed && d.lease.is_none());
    assert!(d.limits[0].allowed && !d.limits[1].allowed);
    let peek = limiter
        .check_with("report", &T1, Check::ONE.peek())
        .await
        .unwrap();
    assert_eq!(peek.limits[0].remaining, 2, "the denied check held nothing");
}

/// Behaviour: Shadow rules and limits, and blocks, with concurrency limits.
pub async fn concurrency_with_shadow_and_block(h: Subject) {
    let mut shadow_rule = Rule::new(vec![Limit::concurrency(&[], 1, Duration::from_secs(60))]);
    shadow_rule.shadow = true;
    let mut shadow_limit = Limit::concurrency(&["tenant"], 1, Duration::from_secs(60));
    shadow_limit.shadow = true;
    let blocking = Limit::concurrency(&["tenant"], 1, Duration::from_secs(60))
        .with_block(Duration::from_secs(10));
    let limiter = h.limiter(vec![
        ("trial", shadow_rule),
        (
            "mixed",
            Rule::new(vec![
                Limit::new(&["tenant"], "10/1h".parse().unwrap(), Algorithm::SlidingLog),
                shadow_limit,
            ]),
        ),
        ("strict", Rule::new(vec![blocking])),
    ]);
    // A shadow rule admits over its limit, but only the lease that fit is held.
    let first = limiter.check("trial", &T1).await.unwrap();
    let over = limiter.check("trial", &T1).await.unwrap();
    assert!(first.allowed && first.lease.is_some());
    assert!(over.allowed && over.shadow && !over.limits[0].allowed && over.lease.is_none());
    // A shadow concurrency limit reports, never denies, and holds a lease when it has room.
    let a = limiter.check("mixed", &T1).await.unwrap();
    let b = limiter.check("mixed", &T1).await.unwrap();
    assert!(a.allowed && a.lease.is_some());
    assert!(b.allowed && !b.limits[1].allowed && b.lease.is_none());
    // A block on a concurrency limit: the denial blocks; a release during the block frees the
    // place for when it ends.
    let held = limiter.check("strict", &T1).await.unwrap();
    let denied = limiter.check("strict", &T1).await.unwrap();
    assert_eq!(
        denied.blocked_until_ms,
        Some((h.now_us() + 10 * S).as_millis_ceil())
    );
    assert!(limiter.release(lease(&held)).await.unwrap());
    h.advance_us(5 * S);
    assert!(
        !limiter.check("strict", &T1).await.unwrap().allowed,
        "blocked"
    );
    h.advance_us(5 * S);
    let d = limiter.check("strict", &T1).await.unwrap();
    assert!(d.allowed, "the block ended and the lease was released");
    assert!(limiter.renew(lease(&d)).await.unwrap().is_some());
}

/// Behaviour: Anything but a lease id of the rules in force is refused and changes nothing.
pub async fn concurrency_refuses_bad_lease_ids(h: Subject) {
    let limiter = h.limiter(vec![
        (
            "export",
            Rule::new(vec![Limit::concurrency(
                &["tenant"],
                1,
                Duration::from_secs(30),
            )]),
        ),
        (
            "login",
            Rule::new(vec![Limit::new(
                &["ip"],
                "5/1m".parse().unwrap(),
                Algorithm::Gcra,
            )]),
        ),
    ]);
    let d = limiter.check("export", &T1).await.unwrap();
    let id = lease(&d).to_string();
    let (token, rest) = id.split_once(':').unwrap();
    let other = if token.starts_with('A') { "B" } else { "A" };
    let forged = format!("{other}{}:{rest}", &token[1..]);
    let limit_id = Limit::concurrency(&["tenant"], 1, Duration::from_secs(30)).id();
    for bad in [
        String::new(),
        "not a lease".into(),
        id.replace(":1:", ":0:"),
        id.replace("tenant=t1", "tenant=t1}"),
        id.replace("tenant=t1", "ip=t1"),
        format!("{token}:1:login:ip-gcra-1m:ip=1"),
        format!("{token}:1:export:{limit_id}:tenant=t1:{limit_id}"),
        format!("{id}{}", "x".repeat(2000)),
    ] {
        match limiter.release(&bad).await {
            Err(Error::InvalidLease { .. }) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
        assert!(matches!(
            limiter.renew(&bad).await,
            Err(Error::InvalidLease { .. })
        ));
    }
    assert!(matches!(
        limiter.release(&id.replace(":export:", ":nope:")).await,
        Err(Error::UnknownRule { .. })
    ));
    // A well-formed id under a token nobody was given holds nothing.
    assert!(!limiter.release(&forged).await.unwrap());
    assert_eq!(limiter.renew(&forged).await.unwrap(), None);
    assert!(
        !limiter.check("export", &T1).await.unwrap().allowed,
        "the real lease is still held"
    );
    assert!(limiter.release(&id).await.unwrap());
}
