//! Conformance: each algorithm's numbers, unit by unit, on a manual clock.

use super::{S, Subject, call, step};
use crate::model::{Algorithm, Micros};

/// Behaviour: Sliding log admits limit then slides.
pub async fn sliding_log_admits_limit_then_slides(h: Subject) {
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
    h.advance_us(5 * S - Micros::new(1));
    assert!(!h.one(&c).await.allowed);
    h.advance_us(Micros::new(1));
    let o = h.one(&c).await;
    assert!(o.allowed, "admitted exactly when the oldest unit leaves");
    assert_eq!(o.remaining, 0);
}

/// Behaviour: Sliding log same instant units are distinct.
pub async fn sliding_log_same_instant_units_are_distinct(h: Subject) {
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

/// Behaviour: Sliding window admits limit and slides by bucket.
pub async fn sliding_window_admits_limit_and_slides_by_bucket(h: Subject) {
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
    h.advance_us(6 * S - Micros::new(1));
    assert!(!h.one(&c).await.allowed);
    h.advance_us(Micros::new(1));
    assert!(h.one(&c).await.allowed);
}

/// Behaviour: Fixed window counts per aligned window.
pub async fn fixed_window_counts_per_aligned_window(h: Subject) {
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

/// Behaviour: Token bucket bursts then refills keeping fractions.
pub async fn token_bucket_bursts_then_refills_keeping_fractions(h: Subject) {
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

/// Behaviour: GCRA bursts then spaces units.
pub async fn gcra_bursts_then_spaces_units(h: Subject) {
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
    h.advance_us(2 * S - Micros::new(1));
    assert!(!h.one(&c).await.allowed);
    h.advance_us(Micros::new(1));
    assert!(h.one(&c).await.allowed);
    // Interval rounds up: 3 per 10 µs spaces units 4 µs apart.
    let c = call("gcra-odd", step(Algorithm::Gcra, 3, Micros::new(10)));
    for _ in 0..3 {
        assert!(h.one(&c).await.allowed);
    }
    assert_eq!(h.one(&c).await.retry_after_us, Some(Micros::new(4)));
}

/// Behaviour: Leaky bucket delays then denies and keeps fractional leak.
pub async fn leaky_bucket_delays_then_denies_and_keeps_fractional_leak(h: Subject) {
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
    assert_eq!(delays, [Micros::ZERO, S, 2 * S]);
    let o = h.one(&c).await;
    assert!(!o.allowed);
    assert_eq!(o.retry_after_us, Some(S));
    // Queue of 1, checks every 0.4 s: the partial leak is kept.
    let c = call("lb1", step(Algorithm::LeakyBucket, 1, S));
    assert!(h.one(&c).await.allowed);
    h.advance_us(Micros::new(400_000));
    let o = h.one(&c).await;
    assert!(!o.allowed);
    // 0.6 units left: 0.6 * 1e6 is 600000.0000000001 in f64, rounded up (never early).
    assert_eq!(o.retry_after_us, Some(Micros::new(600_001)));
    h.advance_us(Micros::new(400_000));
    assert!(!h.one(&c).await.allowed);
    h.advance_us(Micros::new(200_000));
    assert!(
        h.one(&c).await.allowed,
        "exactly one second after the first unit"
    );
}
