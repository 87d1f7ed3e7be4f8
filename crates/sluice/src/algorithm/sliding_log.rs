//! Sliding log: the exact limit, keeping the time of every admitted unit.
//!
//! A unit admitted at `t` counts while `now < t + window`. A request of `cost` units is admitted
//! when `count + cost <= limit`. Memory is O(limit): with `count_denied` the log keeps only the
//! newest `limit` entries, which gives the same decisions (see `record`).

use std::collections::VecDeque;

use super::{Outcome, Params};

/// The admitted units' timestamps (µs), oldest first.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct State {
    /// One entry per admitted unit; equal timestamps are distinct entries.
    pub entries: VecDeque<u64>,
}

/// Decides `cost` units at `now`; records them when `apply` and admitted (or counted when denied).
pub fn decide(state: &mut State, now: u64, p: &Params, cost: u64, apply: bool) -> Outcome {
    // Pruning never changes a decision: pruned entries no longer count.
    while state
        .entries
        .front()
        .is_some_and(|&t| t + p.window_us <= now)
    {
        state.entries.pop_front();
    }
    let count = state.entries.len() as u64;
    let allowed = count + cost <= p.limit;
    let retry_after_us = (!allowed).then(|| {
        // The request fits once `need` of the oldest entries have expired.
        let need = (count + cost - p.limit) as usize;
        match need.checked_sub(1).and_then(|i| state.entries.get(i)) {
            Some(&t) => t + p.window_us - now,
            None => p.window_us,
        }
    });
    if apply && (allowed || p.count_denied) {
        record(state, now, p, cost);
    }
    let count = state.entries.len() as u64;
    let reset_after_us = state.entries.back().map_or(0, |&t| t + p.window_us - now);
    Outcome {
        allowed,
        remaining: p.limit.saturating_sub(count),
        reset_after_us,
        retry_after_us,
        delay_us: 0,
        ttl_us: reset_after_us,
    }
}

/// Appends `cost` entries at `now`, keeping at most `limit` entries. Dropping the oldest beyond
/// `limit` keeps decisions exact: with `limit` entries in the window everything is denied, and the
/// wait until `cost` units fit depends only on the newest `limit` entries.
fn record(state: &mut State, now: u64, p: &Params, cost: u64) {
    for _ in 0..cost {
        state.entries.push_back(now);
    }
    while state.entries.len() as u64 > p.limit {
        state.entries.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000;

    fn p(limit: u64, window_s: u64) -> Params {
        Params::new(limit, window_s * S, limit)
    }

    #[test]
    fn admits_exactly_limit_then_denies_until_the_oldest_expires() {
        let p = p(5, 10);
        let mut s = State::default();
        for i in 0..5 {
            let o = decide(&mut s, i * S, &p, 1, true);
            assert!(o.allowed);
            assert_eq!(o.remaining, 4 - i);
        }
        let denied = decide(&mut s, 5 * S, &p, 1, true);
        assert!(!denied.allowed);
        // The first unit (t=0) leaves the window at t=10s.
        assert_eq!(denied.retry_after_us, Some(5 * S));
        assert_eq!(denied.reset_after_us, 9 * S);
        assert!(!decide(&mut s, 10 * S - 1, &p, 1, true).allowed);
        assert!(decide(&mut s, 10 * S, &p, 1, true).allowed);
    }

    #[test]
    fn same_instant_requests_are_distinct_entries() {
        let p = p(1000, 1);
        let mut s = State::default();
        let admitted = (0..1500)
            .filter(|_| decide(&mut s, 7, &p, 1, true).allowed)
            .count();
        assert_eq!(admitted, 1000);
    }

    #[test]
    fn cost_counts_units_and_retry_waits_for_enough_of_them() {
        let p = p(5, 10);
        let mut s = State::default();
        assert!(decide(&mut s, 0, &p, 3, true).allowed);
        assert!(decide(&mut s, S, &p, 2, true).allowed);
        let o = decide(&mut s, 2 * S, &p, 4, true);
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
            decide(&mut s, 0, &params, 2, true);
            assert!(!decide(&mut s, 5 * S, &params, 1, true).allowed);
            let o = decide(&mut s, 10 * S, &params, 1, true);
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
        assert!(decide(&mut s, 0, &p, 1, false).allowed);
        assert!(decide(&mut s, 0, &p, 1, true).allowed);
        assert!(!decide(&mut s, 0, &p, 1, false).allowed);
    }
}
