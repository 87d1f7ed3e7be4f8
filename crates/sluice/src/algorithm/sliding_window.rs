//! Sliding window counter: the window split into [`BUCKETS`] sub-window buckets.
//!
//! A unit counts in the bucket `floor(now / g)` with `g = window / BUCKETS`, and a bucket counts
//! while `now < (bucket + BUCKETS + 1) * g`, i.e. until between `window` and `window + g` after
//! each of its units. Error bound, on the safe side only: **no interval of length `window` ever
//! holds more than `limit` admitted units**, and a unit may keep counting up to `window / BUCKETS`
//! (10 %) longer than in the exact sliding log. Memory is at most `BUCKETS + 1` counters.

use std::collections::VecDeque;

use super::{COUNT_CAP, Mode, Outcome, Params};
use crate::model::Micros;

/// Sub-windows per window.
pub const BUCKETS: u64 = 10;

/// Non-empty buckets `(index, units)`, oldest first.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// Buckets that still count; older ones are dropped on each decision.
    pub buckets: VecDeque<(u64, u64)>,
}

/// Decides `cost` units at `now`.
pub fn decide(state: &mut State, now: Micros, p: &Params, cost: u64, mode: Mode) -> Outcome {
    let g = bucket_us(p);
    let current = now / g;
    while state
        .buckets
        .front()
        .is_some_and(|&(idx, _)| idx + BUCKETS < current)
    {
        state.buckets.pop_front();
    }
    let count: u64 = state.buckets.iter().map(|&(_, n)| n).sum();
    let allowed = count + cost <= p.count;
    let retry_after_us = (!allowed).then(|| {
        let need = count + cost - p.count;
        let mut freed = 0;
        for &(idx, n) in &state.buckets {
            freed += n;
            if freed >= need {
                return (idx + BUCKETS + 1) * g - now;
            }
        }
        p.window_us
    });
    if mode == Mode::Apply && (allowed || p.count_denied) {
        match state.buckets.back_mut() {
            Some((idx, n)) if *idx == current => *n = (*n + cost).min(COUNT_CAP),
            _ => state.buckets.push_back((current, cost.min(COUNT_CAP))),
        }
    }
    let count: u64 = state.buckets.iter().map(|&(_, n)| n).sum();
    let reset_after_us = state
        .buckets
        .back()
        .map_or(Micros::ZERO, |&(idx, _)| (idx + BUCKETS + 1) * g - now);
    Outcome::unshaped(
        allowed,
        p.count.saturating_sub(count),
        reset_after_us,
        retry_after_us,
    )
}

/// The bucket length. Windows are whole milliseconds, so this divides evenly.
pub fn bucket_us(p: &Params) -> Micros {
    (p.window_us / BUCKETS).max(Micros::new(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    #[test]
    fn admits_limit_and_slides_by_bucket() {
        let p = Params::new(4, 10 * S, 4);
        let mut s = State::default();
        for t in [Micros::ZERO, S, 2 * S, 3 * S] {
            assert!(decide(&mut s, t, &p, 1, Mode::Apply).allowed);
        }
        let o = decide(&mut s, 5 * S, &p, 1, Mode::Apply);
        assert!(!o.allowed);
        // Bucket 0 (t in [0,1s)) stops counting at (0 + 10 + 1) * 1s.
        assert_eq!(o.retry_after_us, Some(6 * S));
        assert!(!decide(&mut s, 11 * S - Micros::new(1), &p, 1, Mode::Apply).allowed);
        assert!(decide(&mut s, 11 * S, &p, 1, Mode::Apply).allowed);
    }

    #[test]
    fn keeps_at_most_buckets_plus_one() {
        let p = Params::new(1000, 10 * S, 1000);
        let mut s = State::default();
        for i in 0..100 {
            decide(&mut s, i * S / 2, &p, 1, Mode::Apply);
            assert!(s.buckets.len() as u64 <= BUCKETS + 1);
        }
    }
}
