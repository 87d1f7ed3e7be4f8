//! GCRA (generic cell rate algorithm): a leaky bucket as a meter with one timestamp per key.
//!
//! Each unit is due `T = ceil(window / limit)` µs after the previous one (rounded up to whole
//! microseconds, so never faster than the rate); the theoretical arrival time `tat` is the time
//! at which the key is back to full. A request of `cost` is admitted when
//! `max(tat, now) + cost * T <= now + capacity * T`, so up to `capacity` units pass at once.
//! Integer arithmetic throughout; the Redis script computes the same numbers. Rules are refused
//! when `capacity * T` reaches 2^53 (see [`crate::model::Limit::validate`]) and a request never
//! costs more than the capacity, so no product overflows; the arithmetic saturates regardless.

use super::{Mode, Outcome, Params};
use crate::model::Micros;

/// The theoretical arrival time (µs); 0 when the key has no history.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// When the key is back to full.
    pub tat_us: Micros,
}

/// Decides `cost` units at `now`.
pub fn decide(state: &mut State, now: Micros, p: &Params, cost: u64, mode: Mode) -> Outcome {
    let t = p.emission_interval_us();
    let tau = t.saturating_mul(p.capacity);
    let tat = state.tat_us.max(now);
    let new_tat = tat.saturating_add(t.saturating_mul(cost));
    let allowed = new_tat <= now.saturating_add(tau);
    let retry_after_us = (!allowed).then(|| new_tat - tau - now);
    // What remains after this request: consumed only when applied (a peek reports the present).
    let tat_after = if mode == Mode::Apply && allowed {
        new_tat
    } else {
        tat
    };
    if mode == Mode::Apply && allowed {
        state.tat_us = new_tat;
    }
    let reset_after_us = tat_after - now;
    // A capacity lowered on a live key can leave the tat beyond now + tau: nothing remains.
    Outcome::unshaped(
        allowed,
        now.saturating_add(tau).saturating_sub(tat_after) / t,
        reset_after_us,
        retry_after_us,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    #[test]
    fn burst_at_once_then_one_per_interval() {
        // 5 per 10 s: one unit every 2 s, all five at once from full.
        let p = Params::new(5, 10 * S, 5);
        let mut s = State::default();
        for i in 0..5 {
            let o = decide(&mut s, 100 * S, &p, 1, Mode::Apply);
            assert!(o.allowed);
            assert_eq!(o.remaining, 4 - i);
        }
        let o = decide(&mut s, 100 * S, &p, 1, Mode::Apply);
        assert!(!o.allowed);
        assert_eq!(o.retry_after_us, Some(2 * S));
        assert_eq!(o.reset_after_us, 10 * S);
        assert!(!decide(&mut s, 102 * S - Micros::new(1), &p, 1, Mode::Apply).allowed);
        assert!(decide(&mut s, 102 * S, &p, 1, Mode::Apply).allowed);
    }

    #[test]
    fn interval_rounds_up_never_faster_than_the_rate() {
        let p = Params::new(3, Micros::new(10), 3);
        assert_eq!(p.emission_interval_us(), Micros::new(4));
    }
}
