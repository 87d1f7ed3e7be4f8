//! Conformance: reservations — a check that reserves an estimated cost, settled at the actual
//! cost: the difference given back or charged, once, within its time, on the algorithms that
//! settle.

use super::{S, Subject};
use crate::error::Error;
use crate::model::{Algorithm, Limit};
use crate::{Check, Decision, Limiter, Rule};

/// 100 per 100 s (one unit a second back), capacity 200, on `algorithm`.
fn calls(h: &Subject, algorithm: Algorithm) -> Limiter {
    h.limiter(vec![(
        "llm",
        Rule::new(vec![
            Limit::new(&["user"], "100/100s".parse().unwrap(), algorithm).with_burst(200),
        ]),
    )])
}

const U1: [(&str, &str); 1] = [("user", "u1")];

fn reservation(d: &Decision) -> &str {
    d.reservation
        .as_deref()
        .expect("an admitted reserving check has a reservation")
}

async fn remaining(limiter: &Limiter) -> u64 {
    limiter
        .check_with("llm", &U1, Check::ONE.peek())
        .await
        .unwrap()
        .remaining
}

/// Behaviour: reserve 100 and settle 30: 70 come back; settle 150: 50 more are charged, past
/// the capacity; settling twice is refused and changes nothing.
pub async fn reservations_give_back_or_charge_the_difference_once(h: Subject) {
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let limiter = calls(&h, algorithm);
        let d = limiter
            .check_with("llm", &U1, Check::cost(100).reserve())
            .await
            .unwrap();
        assert!(d.allowed);
        assert_eq!(d.remaining, 100);
        assert_eq!(
            d.reservation_until_ms,
            Some(h.now_us().as_millis() + 200_000),
            "{algorithm}: settled within the time to refill from empty"
        );
        assert!(limiter.settle(reservation(&d), 30).await.unwrap());
        assert_eq!(remaining(&limiter).await, 170, "{algorithm}: 70 back");
        assert!(
            !limiter.settle(reservation(&d), 0).await.unwrap(),
            "{algorithm}: twice"
        );
        assert_eq!(remaining(&limiter).await, 170, "{algorithm}: unchanged");

        let d = limiter
            .check_with("llm", &U1, Check::cost(100).reserve())
            .await
            .unwrap();
        assert_eq!(d.remaining, 70);
        assert!(limiter.settle(reservation(&d), 250).await.unwrap());
        // 30 used + 250 = 280: 80 in debt, and one unit needs 81 s.
        let denied = limiter.check("llm", &U1).await.unwrap();
        assert!(!denied.allowed, "{algorithm}: in debt");
        assert_eq!(denied.remaining, 0);
        assert_eq!(denied.retry_after_ms, Some(81_000), "{algorithm}");
        limiter.reset("llm", &U1).await.unwrap();
        h.advance_us(1000 * S);
    }
}

/// Behaviour: a late settlement changes only what has not drained; one out of time is refused
/// and the estimate stands.
pub async fn reservations_settle_late_or_keep_their_estimate(h: Subject) {
    let limiter = calls(&h, Algorithm::TokenBucket);
    let d = limiter
        .check_with("llm", &U1, Check::cost(60).reserve())
        .await
        .unwrap();
    h.advance_us(40 * S);
    // 40 drained: the estimate weighs 20 now, an actual cost of 50 weighs 10.
    assert!(limiter.settle(reservation(&d), 50).await.unwrap());
    assert_eq!(remaining(&limiter).await, 190);

    let d = limiter
        .check_with("llm", &U1, Check::cost(60).reserve())
        .await
        .unwrap();
    h.advance_us(200 * S);
    assert!(
        !limiter.settle(reservation(&d), 1).await.unwrap(),
        "out of time: the estimate stands"
    );
    // A denied or peeked check reserves nothing.
    let peek = limiter
        .check_with("llm", &U1, Check::cost(5).reserve().peek())
        .await
        .unwrap();
    assert!(peek.reservation.is_none());
    let denied = limiter
        .check_with("llm", &U1, Check::cost(200).reserve())
        .await
        .unwrap();
    assert!(denied.allowed, "a full bucket takes 200");
    let denied = limiter
        .check_with("llm", &U1, Check::cost(1).reserve())
        .await
        .unwrap();
    assert!(!denied.allowed && denied.reservation.is_none());
}

/// Behaviour: a rule with a limit that cannot settle refuses reservations, and texts that are
/// not reservation ids of the rules in force are refused without changing anything.
pub async fn reservations_refuse_rules_and_ids_they_cannot_settle(h: Subject) {
    let limiter = h.limiter(vec![
        (
            "mixed",
            Rule::new(vec![
                Limit::new(&["user"], "10/1m".parse().unwrap(), Algorithm::TokenBucket),
                Limit::new(&["user"], "100/1h".parse().unwrap(), Algorithm::FixedWindow),
            ]),
        ),
        (
            "llm",
            Rule::new(vec![Limit::new(
                &["user"],
                "10/1m".parse().unwrap(),
                Algorithm::Gcra,
            )]),
        ),
    ]);
    let refused = limiter
        .check_with("mixed", &U1, Check::cost(2).reserve())
        .await;
    assert!(
        matches!(&refused, Err(Error::InvalidReservation { reason }) if reason.contains("fixed_window")),
        "{refused:?}"
    );
    assert_eq!(
        limiter
            .check_with("mixed", &U1, Check::ONE.peek())
            .await
            .unwrap()
            .remaining,
        10,
        "the refused check consumed nothing"
    );
    let d = limiter
        .check_with("llm", &U1, Check::cost(4).reserve())
        .await
        .unwrap();
    let id = reservation(&d).to_string();
    let token = id.split(':').next().unwrap();
    for bad in [
        String::new(),
        "nonsense".to_string(),
        id.replace("u1", "u2")
            .replace(token, "AAAAAAAAAAAAAAAAAAAAAA")
            + ":x",
        format!("{token}:4:llm:nolimit:user=u1"),
        format!("{token}:4:llm:{}:name=u1", d.limits[0].id),
    ] {
        assert!(
            matches!(
                limiter.settle(&bad, 1).await,
                Err(Error::InvalidReservation { .. })
            ),
            "{bad}"
        );
    }
    assert!(matches!(
        limiter.settle(&id.replace(":llm:", ":nope:"), 1).await,
        Err(Error::UnknownRule { .. })
    ));
    assert!(matches!(
        limiter.settle(&id, u64::MAX).await,
        Err(Error::InvalidCost { .. })
    ));
    // Another token for the same limit and identity is no reservation: nothing settles.
    let forged = id.replace(token, "AAAAAAAAAAAAAAAAAAAAAA");
    assert!(!limiter.settle(&forged, 0).await.unwrap());
    assert!(limiter.settle(&id, 1).await.unwrap());
}
