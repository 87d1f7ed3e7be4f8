//! Conformance: parts of one [`Limiter::check_all`] request that count on the same counter are
//! one request on it — their costs added up and judged once — so repeating a part never admits
//! more than the limit, on any algorithm, with leases too.

use std::time::Duration;

use super::Subject;
use crate::error::Error;
use crate::limiter::RuleCheck;
use crate::model::{Algorithm, Limit};
use crate::{Check, Limiter, Rule};

type Attrs<'a> = [(&'a str, &'a str)];

fn part<'a>(rule: &'a str, attrs: &'a Attrs<'a>, cost: u64) -> RuleCheck<'a, Attrs<'a>> {
    RuleCheck { rule, attrs, cost }
}

async fn left(limiter: &Limiter, rule: &str, attrs: &Attrs<'_>) -> u64 {
    let peek = limiter.check_with(rule, attrs, Check::ONE.peek()).await;
    peek.expect("a valid peek").remaining
}

async fn passes(limiter: &Limiter, parts: &[RuleCheck<'_, Attrs<'_>>]) -> bool {
    let decided = limiter.check_all(parts).await.expect("valid parts");
    assert_eq!(decided.len(), parts.len());
    let allowed = decided.iter().all(|d| d.allowed);
    if !allowed {
        assert!(
            decided.iter().all(|d| d.lease.is_none()),
            "denied: no lease"
        );
    }
    allowed
}

/// Behaviour: Repeated parts add up their costs against one count.
pub async fn repeated_parts_add_up_against_one_count(h: Subject) {
    for algorithm in Algorithm::ALL {
        if algorithm == Algorithm::Concurrency {
            continue;
        }
        let pair = Rule::new(vec![
            Limit::new(&["member"], "3/1h".parse().unwrap(), algorithm),
            Limit::new(&["ip"], "10/1h".parse().unwrap(), algorithm),
        ]);
        let limiter = h.limiter(vec![("pair", pair)]);
        let a = [("member", "m1"), ("ip", "a")];
        let b = [("member", "m1"), ("ip", "b")];
        // 2 of 3 taken: three copies of a one-unit part ask for 3 and are denied, taking nothing.
        let two = limiter.check_with("pair", &a, Check::cost(2)).await;
        assert!(two.unwrap().allowed, "{algorithm}");
        let copies = [
            part("pair", &a, 1),
            part("pair", &a, 1),
            part("pair", &a, 1),
        ];
        assert!(!passes(&limiter, &copies).await, "{algorithm}");
        assert_eq!(left(&limiter, "pair", &a).await, 1, "{algorithm}");
        // Copies that look (cost 0) are one look: they consume nothing.
        let looks = [part("pair", &a, 0), part("pair", &a, 0)];
        assert!(passes(&limiter, &looks).await, "{algorithm}");
        assert!(passes(&limiter, &copies[..1]).await, "{algorithm}");
        assert_eq!(left(&limiter, "pair", &a).await, 0, "{algorithm}");

        // Two parts of cost 3 on a limit of 3 ask for 6: denied whole.
        let fresh = [("member", "m2"), ("ip", "c")];
        let big = [part("pair", &fresh, 3), part("pair", &fresh, 3)];
        assert!(!passes(&limiter, &big).await, "{algorithm}");
        assert_eq!(left(&limiter, "pair", &fresh).await, 3, "{algorithm}");
        // Two of cost 1 pass, and both read the one count after the sum.
        let small = [part("pair", &fresh, 1), part("pair", &fresh, 1)];
        let decided = limiter.check_all(&small).await.unwrap();
        assert!(decided.iter().all(|d| d.allowed), "{algorithm}");
        assert!(decided.iter().all(|d| d.remaining == 1), "{algorithm}");

        // Parts that share only the member's counter add up on it alone: 2 + 2 > 3.
        let (ma, mb) = (
            [("member", "m3"), ("ip", "a")],
            [("member", "m3"), ("ip", "b")],
        );
        let shared = [part("pair", &ma, 2), part("pair", &mb, 2)];
        assert!(!passes(&limiter, &shared).await, "{algorithm}");
        let shared = [part("pair", &ma, 2), part("pair", &mb, 1)];
        assert!(passes(&limiter, &shared).await, "{algorithm}");
        assert_eq!(left(&limiter, "pair", &ma).await, 0, "{algorithm}");
        // ip `a` took 2 and 1 from m1's checks above, 2 here; ip `b` only 1.
        let ip_b = limiter.check_with("pair", &b, Check::ONE.peek()).await;
        assert_eq!(ip_b.unwrap().limits[1].remaining, 9, "{algorithm}");
    }
}

/// Behaviour: Repeated parts on a concurrency limit share one lease holding their sum.
pub async fn repeated_parts_share_one_lease(h: Subject) {
    let jobs = Rule::new(vec![Limit::concurrency(
        &["tenant"],
        2,
        Duration::from_secs(30),
    )]);
    let pair = Rule::new(vec![
        Limit::concurrency(&["tenant"], 2, Duration::from_secs(30)),
        Limit::new(&["ip"], "10/1h".parse().unwrap(), Algorithm::Gcra),
    ]);
    let limiter = h.limiter(vec![("jobs", jobs), ("pair", pair)]);
    let t1 = [("tenant", "t1")];
    let four = [(); 4].map(|()| part("jobs", &t1, 1));
    assert!(!passes(&limiter, &four).await, "4 leases of 2");
    let decided = limiter.check_all(&four[..2]).await.unwrap();
    assert!(decided.iter().all(|d| d.allowed));
    let lease = decided[0]
        .lease
        .clone()
        .expect("a passed request holds a lease");
    assert_eq!(
        decided[1].lease.as_deref(),
        Some(lease.as_str()),
        "one lease"
    );
    assert!(!limiter.check("jobs", &t1).await.unwrap().allowed, "2 held");
    assert!(limiter.release(&lease).await.unwrap());
    assert!(
        !limiter.release(&lease).await.unwrap(),
        "released once, whole"
    );
    assert!(
        passes(&limiter, &four[..2]).await,
        "both places are free again"
    );

    // A lease shared by parts that differ on another limit could not say what each holds.
    let (a, b) = (
        [("tenant", "t2"), ("ip", "a")],
        [("tenant", "t2"), ("ip", "b")],
    );
    let error = limiter
        .check_all(&[part("pair", &a, 1), part("pair", &b, 1)])
        .await
        .unwrap_err();
    assert!(
        matches!(
            &error,
            Error::ConflictingParts {
                first: 0,
                second: 1,
                ..
            }
        ),
        "{error}"
    );
    assert_eq!(left(&limiter, "pair", &a).await, 2, "nothing was decided");
}
