//! Token bucket: `capacity` (the limit's `burst`, default its count) tokens, refilled at the rate.
//!
//! Kept as the *used* level rather than the tokens left, so that "no state" means a full bucket.
//! The level drains continuously (`elapsed * limit / window`, fractions kept); a request of `cost`
//! is admitted when `used + cost <= capacity`. State is written only when a request is admitted,
//! so a denied flood changes nothing.

use super::{LEVEL_EPSILON, Level, Mode, Outcome, Params};
use crate::model::Micros;

/// Decides `cost` units at `now`.
pub fn decide(state: &mut Level, now: Micros, p: &Params, cost: u64, mode: Mode) -> Outcome {
    let mut used = state.drained(now, p);
    let allowed = used + cost as f64 <= p.capacity as f64 + LEVEL_EPSILON;
    let retry_after_us =
        (!allowed).then(|| p.time_to_drain(used + cost as f64 - p.capacity as f64));
    if mode == Mode::Apply && allowed {
        used += cost as f64;
        *state = Level {
            level: used,
            last_us: now,
        };
    }
    let reset_after_us = p.time_to_drain(used);
    Outcome::unshaped(
        allowed,
        (p.capacity as f64 - used + LEVEL_EPSILON).floor().max(0.0) as u64,
        reset_after_us,
        retry_after_us,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    #[test]
    fn burst_then_refill_at_the_rate() {
        // 10 per 10 s, burst 3: three at once, then one per second.
        let p = Params::new(10, 10 * S, 3);
        let mut s = Level::default();
        for _ in 0..3 {
            assert!(decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply).allowed);
        }
        let o = decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply);
        assert!(!o.allowed);
        assert_eq!(o.retry_after_us, Some(S));
        assert_eq!(o.reset_after_us, 3 * S);
        assert!(!decide(&mut s, S / 2, &p, 1, Mode::Apply).allowed);
        let o = decide(&mut s, S, &p, 1, Mode::Apply);
        assert!(o.allowed);
        assert_eq!(o.remaining, 0);
    }

    #[test]
    fn fractional_refill_is_kept() {
        let p = Params::new(10, 10 * S, 1);
        let mut s = Level::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply).allowed);
        // Four denied peeks at 0.25 s steps must not lose the partial refill.
        for i in 1..4 {
            assert!(!decide(&mut s, i * S / 4, &p, 1, Mode::Apply).allowed);
        }
        assert!(decide(&mut s, S, &p, 1, Mode::Apply).allowed);
    }

    #[test]
    fn cost_beyond_the_tokens_left_waits_for_them() {
        let p = Params::new(10, 10 * S, 10);
        let mut s = Level::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 8, Mode::Apply).allowed);
        let o = decide(&mut s, Micros::ZERO, &p, 5, Mode::Apply);
        assert!(!o.allowed);
        assert_eq!(o.retry_after_us, Some(3 * S));
    }
}
