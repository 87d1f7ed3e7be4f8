//! Fixed window: one counter per aligned window (`floor(now / window)`), or per calendar period
//! for a quota (`Params::period`: the day, week, month or year that holds `now`).
//!
//! Exact within a window; a burst of `limit` at the end of one window and `limit` at the start of
//! the next admits up to twice the limit across the edge. That is the known price of O(1) state.

use super::{COUNT_CAP, Mode, Outcome, Params};
use crate::model::{Micros, Period};

/// The current window's start (µs) and the units counted in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// Start of the window the count belongs to.
    pub window_start: Micros,
    /// Units counted in that window.
    pub count: u64,
}

/// Decides `cost` units at `now`.
pub fn decide(state: &mut State, now: Micros, p: &Params, cost: u64, mode: Mode) -> Outcome {
    let (start, end) = window_at(now, p);
    if state.window_start != start {
        *state = State {
            window_start: start,
            count: 0,
        };
    }
    let allowed = state.count + cost <= p.count;
    if mode == Mode::Apply && (allowed || p.count_denied) {
        state.count = (state.count + cost).min(COUNT_CAP);
    }
    let window_left = end - now;
    let reset_after_us = if state.count == 0 {
        Micros::ZERO
    } else {
        window_left
    };
    Outcome::unshaped(
        allowed,
        p.count.saturating_sub(state.count),
        reset_after_us,
        (!allowed).then_some(window_left),
    )
}

/// The window that holds `now`: `[start, end)`.
pub fn window_at(now: Micros, p: &Params) -> (Micros, Micros) {
    match p.period {
        Some(period) => {
            let bounds = period.bounds_at(now);
            (bounds.start, bounds.end)
        }
        None => {
            let start = now - now % p.window_us;
            (start, start + p.window_us)
        }
    }
}

/// Moves a quota's count from the period `from` gives at `now` to the one `to` gives (an
/// identity's billing day changed): what was used in the current period is kept. Returns the new
/// period's end, until which the state must be kept, or `None` when the state holds no count of
/// `from`'s current period (nothing was used in it: nothing to keep).
pub fn carry_over(state: &mut State, now: Micros, from: &Period, to: &Period) -> Option<Micros> {
    if state.count == 0 || state.window_start != from.bounds_at(now).start {
        return None;
    }
    let bounds = to.bounds_at(now);
    state.window_start = bounds.start;
    Some(bounds.end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    #[test]
    fn counts_per_aligned_window() {
        let p = Params::new(3, 10 * S, 3);
        let mut s = State::default();
        for _ in 0..3 {
            assert!(decide(&mut s, 12 * S, &p, 1, Mode::Apply).allowed);
        }
        let o = decide(&mut s, 15 * S, &p, 1, Mode::Apply);
        assert!(!o.allowed);
        assert_eq!(o.retry_after_us, Some(5 * S));
        assert_eq!(o.remaining, 0);
        // A new window starts at 20s with a full quota.
        let o = decide(&mut s, 20 * S, &p, 1, Mode::Apply);
        assert!(o.allowed);
        assert_eq!(o.remaining, 2);
        assert_eq!(o.reset_after_us, 10 * S);
    }

    #[test]
    fn twice_the_limit_across_an_edge() {
        let p = Params::new(3, 10 * S, 3);
        let mut s = State::default();
        let admitted = (0..6)
            .filter(|i| {
                decide(
                    &mut s,
                    10 * S - Micros::new(1) + Micros::new(i / 3),
                    &p,
                    1,
                    Mode::Apply,
                )
                .allowed
            })
            .count();
        assert_eq!(admitted, 6);
    }

    #[test]
    fn a_new_billing_day_keeps_the_count_of_the_current_period() {
        use crate::model::PeriodUnit;
        let month = |anchor| {
            Period::new(PeriodUnit::Month)
                .anchored(anchor)
                .unwrap()
                .interned()
        };
        let (first, fifteenth) = (month(1), month(15));
        let mut p = Params::new(5, first.longest().into(), 5);
        p.period = Some(first);
        // 2026-11-20: the period from the 1st holds 3 units.
        let now = Micros::from_secs(1_795_132_800);
        let mut s = State::default();
        decide(&mut s, now, &p, 3, Mode::Apply);
        let end = carry_over(&mut s, now, first, fifteenth).unwrap();
        assert_eq!(end, fifteenth.bounds_at(now).end);
        p.period = Some(fifteenth);
        let o = decide(&mut s, now, &p, 1, Mode::Apply);
        assert_eq!(o.remaining, 1, "the 3 units came along");
        // A count of an earlier period is nothing to keep.
        let mut stale = State {
            window_start: Micros::ZERO,
            count: 2,
        };
        assert_eq!(carry_over(&mut stale, now, first, fifteenth), None);
    }

    #[test]
    fn cost_above_what_is_left_is_denied_whole() {
        let p = Params::new(5, 10 * S, 5);
        let mut s = State::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 4, Mode::Apply).allowed);
        assert!(!decide(&mut s, Micros::ZERO, &p, 2, Mode::Apply).allowed);
        assert!(decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply).allowed);
    }
}
