//! Leaky bucket as a queue (shaping): requests join a queue drained at the rate.
//!
//! The queue holds at most `capacity` units (the limit's `burst`, default its count). A request
//! that fits is admitted with `delay_us`, the time the units ahead of it need to drain, so the
//! caller can pace its work instead of being rejected; a request that does not fit is denied. The
//! level drains continuously and the fraction is kept: flooring the drained amount and resetting
//! the timestamp on every request would drain slower than configured.

use super::{LEVEL_EPSILON, Level, Mode, Outcome, Params};
use crate::model::Micros;

/// Decides `cost` units at `now`.
pub fn decide(state: &mut Level, now: Micros, p: &Params, cost: u64, mode: Mode) -> Outcome {
    let mut level = state.drained(now, p);
    let allowed = level + cost as f64 <= p.capacity as f64 + LEVEL_EPSILON;
    let delay_us = if allowed {
        p.time_to_drain(level)
    } else {
        Micros::ZERO
    };
    let retry_after_us =
        (!allowed).then(|| p.time_to_drain(level + cost as f64 - p.capacity as f64));
    if mode == Mode::Apply && allowed {
        level += cost as f64;
        *state = Level {
            level,
            last_us: now,
        };
    }
    let reset_after_us = p.time_to_drain(level);
    Outcome {
        allowed,
        remaining: (p.capacity as f64 - level + LEVEL_EPSILON).floor().max(0.0) as u64,
        reset_after_us,
        retry_after_us,
        delay_us,
        ttl_us: reset_after_us,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    #[test]
    fn admits_with_growing_delay_until_the_queue_is_full() {
        // Drains 1 unit per second; queue of 3.
        let p = Params::new(1, S, 3);
        let mut s = Level::default();
        let delays: Vec<Micros> = (0..3)
            .map(|_| decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply))
            .inspect(|o| assert!(o.allowed))
            .map(|o| o.delay_us)
            .collect();
        assert_eq!(delays, [Micros::ZERO, S, 2 * S]);
        let o = decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply);
        assert!(!o.allowed);
        assert_eq!(o.retry_after_us, Some(S));
    }

    #[test]
    fn keeps_the_fractional_leak() {
        // 1 unit per second, queue of 1; checks every 0.4 s.
        let p = Params::new(1, S, 1);
        let mut s = Level::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply).allowed);
        assert!(!decide(&mut s, Micros::new(400_000), &p, 1, Mode::Apply).allowed);
        assert!(!decide(&mut s, Micros::new(800_000), &p, 1, Mode::Apply).allowed);
        // Exactly one second after the first unit the queue is empty again.
        assert!(decide(&mut s, S, &p, 1, Mode::Apply).allowed);
        assert_eq!(s.level, 1.0);
    }
}
