//! Sliding log: the exact limit, keeping the time of every recorded request.
//!
//! A unit recorded at `t` counts while `now < t + window`. A request of `cost` units is admitted
//! when `count + cost <= limit`. The log holds one entry per request, whatever its cost: its time
//! and the running total of units recorded up to it, so the count in the window is a difference
//! of two totals and the request holding the k-th oldest unit is found by binary search. A
//! decision is O(log n) in the requests in the window (plus, amortized, removing the entries that
//! left it), never O(cost). Memory is O(limit): with `count_denied` the log keeps only the
//! requests that hold the newest `limit` units, which gives the same decisions (see `record`).
//! A request's time is never before the newest entry's: a clock stepping back cannot reorder the
//! log. The Redis script keeps the same log in a sorted set.

use std::collections::VecDeque;

use super::{Mode, Outcome, Params};
use crate::model::Micros;

/// One recorded request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// When it was recorded (µs).
    pub at_us: Micros,
    /// Units recorded on the key up to and including this request (wrapping).
    pub total: u64,
}

/// The recorded requests, oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// One entry per recorded request.
    pub entries: VecDeque<Entry>,
    /// Units recorded before the oldest entry (wrapping).
    pub base: u64,
}

impl State {
    /// Units in the log.
    pub fn count(&self) -> u64 {
        self.entries
            .back()
            .map_or(0, |e| e.total.wrapping_sub(self.base))
    }
}

/// Decides `cost` units at `now`; records them when `apply` and admitted (or counted when denied).
pub fn decide(state: &mut State, now: Micros, p: &Params, cost: u64, mode: Mode) -> Outcome {
    // Pruning never changes a decision: pruned entries no longer count.
    while let Some(&oldest) = state.entries.front() {
        if oldest.at_us.saturating_add(p.window_us) > now {
            break;
        }
        state.base = oldest.total;
        state.entries.pop_front();
    }
    let count = state.count();
    let allowed = count.saturating_add(cost) <= p.count;
    let retry_after_us = (!allowed).then(|| {
        // The request fits once `need` of the oldest units have left the window.
        let need = count + cost - p.count;
        let base = state.base;
        let holder = state
            .entries
            .partition_point(|e| e.total.wrapping_sub(base) < need);
        match state.entries.get(holder) {
            Some(e) if need <= count => (e.at_us + p.window_us).saturating_sub(now),
            _ => p.window_us,
        }
    });
    if mode == Mode::Apply && (allowed || p.count_denied) {
        record(state, now, p, cost);
    }
    let reset_after_us = state.entries.back().map_or(Micros::ZERO, |e| {
        (e.at_us + p.window_us).saturating_sub(now)
    });
    Outcome::unshaped(
        allowed,
        p.count.saturating_sub(state.count()),
        reset_after_us,
        retry_after_us,
    )
}

/// Appends one entry of `min(cost, limit)` units at `now` (or the newest entry's time, if later),
/// then drops the oldest entries while the newer ones alone hold `limit` units. Both keep
/// decisions exact: with `limit` units in the window everything is denied, and the wait until
/// `cost` units fit depends only on the newest `limit` units.
fn record(state: &mut State, now: Micros, p: &Params, cost: u64) {
    let (at_us, total) = state
        .entries
        .back()
        .map_or((now, state.base), |e| (now.max(e.at_us), e.total));
    state.entries.push_back(Entry {
        at_us,
        total: total.wrapping_add(cost.min(p.count)),
    });
    let newest = total.wrapping_add(cost.min(p.count));
    while state.entries.len() > 1 && newest.wrapping_sub(state.entries[0].total) >= p.count {
        state.base = state.entries[0].total;
        state.entries.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    fn p(limit: u64, window_s: u64) -> Params {
        Params::new(limit, window_s * S, limit)
    }

    #[test]
    fn admits_exactly_limit_then_denies_until_the_oldest_expires() {
        let p = p(5, 10);
        let mut s = State::default();
        for i in 0..5 {
            let o = decide(&mut s, i * S, &p, 1, Mode::Apply);
            assert!(o.allowed);
            assert_eq!(o.remaining, 4 - i);
        }
        let denied = decide(&mut s, 5 * S, &p, 1, Mode::Apply);
        assert!(!denied.allowed);
        // The first unit (t=0) leaves the window at t=10s.
        assert_eq!(denied.retry_after_us, Some(5 * S));
        assert_eq!(denied.reset_after_us, 9 * S);
        assert!(!decide(&mut s, 10 * S - Micros::new(1), &p, 1, Mode::Apply).allowed);
        assert!(decide(&mut s, 10 * S, &p, 1, Mode::Apply).allowed);
    }

    #[test]
    fn same_instant_requests_are_distinct_entries() {
        let p = p(1000, 1);
        let mut s = State::default();
        let admitted = (0..1500)
            .filter(|_| decide(&mut s, Micros::new(7), &p, 1, Mode::Apply).allowed)
            .count();
        assert_eq!(admitted, 1000);
    }

    #[test]
    fn cost_counts_units_and_retry_waits_for_enough_of_them() {
        let p = p(5, 10);
        let mut s = State::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 3, Mode::Apply).allowed);
        assert!(decide(&mut s, S, &p, 2, Mode::Apply).allowed);
        let o = decide(&mut s, 2 * S, &p, 4, Mode::Apply);
        assert!(!o.allowed);
        // Four units must leave: the three from t=0 and one from t=1s.
        assert_eq!(o.retry_after_us, Some(9 * S));
    }

    #[test]
    fn denied_requests_count_only_when_asked() {
        let mut counting = p(2, 10);
        counting.count_denied = true;
        let plain = p(2, 10);
        let mut remaining_at_10s = Vec::new();
        for params in [counting, plain] {
            let mut s = State::default();
            decide(&mut s, Micros::ZERO, &params, 2, Mode::Apply);
            assert!(!decide(&mut s, 5 * S, &params, 1, Mode::Apply).allowed);
            let o = decide(&mut s, 10 * S, &params, 1, Mode::Apply);
            assert!(o.allowed);
            remaining_at_10s.push(o.remaining);
        }
        // Counted, the denial at 5 s still occupies a slot at 10 s.
        assert_eq!(remaining_at_10s, [0, 1]);
    }

    #[test]
    fn peek_changes_nothing() {
        let p = p(1, 10);
        let mut s = State::default();
        assert!(decide(&mut s, Micros::ZERO, &p, 1, Mode::Peek).allowed);
        assert!(decide(&mut s, Micros::ZERO, &p, 1, Mode::Apply).allowed);
        assert!(!decide(&mut s, Micros::ZERO, &p, 1, Mode::Peek).allowed);
    }
}
