//! Settling a reservation: a request admitted at `t0` for an estimated cost is charged its
//! actual cost once that is known, as if it had cost that from the start.
//!
//! Only the draining meters settle, `token_bucket` and
//! `gcra`: their state is one level that drains at the rate, and an admission of
//! `c` units at `t0` weighs `max(c − d, 0)` on it at `now`, where `d` is what drained since `t0`.
//! A settlement swaps the estimate's weight for the actual cost's:
//!
//! `level += max(actual − d, 0) − max(estimate − d, 0)`
//!
//! so settling 30 of a 100-unit reservation at once gives 70 back, settling 150 charges 50 more,
//! and a late settlement changes only what the rate has not forgiven yet. The level never falls
//! below empty, so a give-back never frees units that other requests hold. A charge may take the
//! level past the capacity: the identity is then in debt (`remaining` 0, `retry_after` counting
//! the debt) until it drains, which is how a request that cost more than its estimate is paid for.
//!
//! The others do not settle. The window counters (`fixed_window`, `sliding_window`,
//! `sliding_log`) count a request in the window it was admitted in: a give-back after that window
//! ended returns nothing, and a charge lands in the settlement's window rather than the work's, so
//! the effect would depend on when the settlement arrives. `leaky_bucket` shapes: an admitted
//! request was told when to run, and lowering the queue afterwards would let later requests
//! overtake work already scheduled. `concurrency` holds places, which a release gives back.

use super::{AlgoState, Level, Params, gcra};
use crate::model::{Algorithm, Micros};

/// A reservation being settled: `estimate` units admitted at `at_us`, which really cost
/// `actual`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settlement {
    /// When the reservation was admitted (`t0` above).
    pub at_us: Micros,
    /// The units it was admitted for.
    pub estimate: u64,
    /// The units it really cost.
    pub actual: u64,
}

/// Settles a reservation at `now`. Returns the algorithm's new TTL (how long the state still
/// matters), or `None` for an algorithm that does not settle (the state is left alone).
pub fn settle(
    state: &mut AlgoState,
    algorithm: Algorithm,
    now: Micros,
    p: &Params,
    s: Settlement,
) -> Option<Micros> {
    match algorithm {
        Algorithm::TokenBucket => {
            if !matches!(state, AlgoState::TokenBucket(_)) {
                *state = AlgoState::TokenBucket(Level::default());
            }
            let AlgoState::TokenBucket(level) = state else {
                unreachable!("the variant was set just above")
            };
            Some(token_bucket(level, now, p, s))
        }
        Algorithm::Gcra => {
            if !matches!(state, AlgoState::Gcra(_)) {
                *state = AlgoState::Gcra(gcra::State::default());
            }
            let AlgoState::Gcra(tat) = state else {
                unreachable!("the variant was set just above")
            };
            Some(gcra(tat, now, p, s))
        }
        // Named one by one, so that a new algorithm is placed here or among these.
        Algorithm::SlidingLog
        | Algorithm::SlidingWindow
        | Algorithm::FixedWindow
        | Algorithm::LeakyBucket
        | Algorithm::Concurrency => None,
    }
}

/// The token bucket's used level, in units (fractions kept, as its decisions do).
fn token_bucket(state: &mut Level, now: Micros, p: &Params, s: Settlement) -> Micros {
    let drained =
        now.saturating_sub(s.at_us).get() as f64 * p.count as f64 / p.window_us.get() as f64;
    let delta = (s.actual as f64 - drained).max(0.0) - (s.estimate as f64 - drained).max(0.0);
    let level = (state.drained(now, p) + delta).max(0.0);
    *state = Level {
        level,
        last_us: now,
    };
    p.time_to_drain(level)
}

/// GCRA's tat: each unit weighs one emission interval. Signed arithmetic, in µs, because a
/// give-back may take the weight below zero before it is clamped.
fn gcra(state: &mut gcra::State, now: Micros, p: &Params, s: Settlement) -> Micros {
    let t = i128::from(p.emission_interval_us().get());
    let elapsed = i128::from(now.saturating_sub(s.at_us).get());
    let weight = |units: u64| (i128::from(units) * t - elapsed).max(0);
    let now_i = i128::from(now.get());
    let tat = (i128::from(state.tat_us.get()).max(now_i) + weight(s.actual) - weight(s.estimate))
        .max(now_i);
    state.tat_us = Micros::new(u64::try_from(tat).unwrap_or(u64::MAX));
    state.tat_us - now
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;
    use crate::algorithm::{Mode, token_bucket};

    /// `estimate` units admitted at `at_us` that really cost `actual`.
    fn reserved(at_us: Micros, estimate: u64, actual: u64) -> Settlement {
        Settlement {
            at_us,
            estimate,
            actual,
        }
    }

    fn remaining(state: &mut AlgoState, algorithm: Algorithm, now: Micros, p: &Params) -> u64 {
        let step = crate::algorithm::LimitStep {
            algorithm,
            params: *p,
            cost: 1,
            block_us: None,
            penalty: None,
            shadow: false,
            lease: None,
            settable: false,
        };
        state.decide(&step, now, Mode::Peek).remaining
    }

    #[test]
    fn a_settlement_gives_back_or_charges_the_difference_on_both_meters() {
        // 100 per 100 s (one unit a second), capacity 200.
        let p = Params::new(100, 100 * S, 200);
        for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
            let mut state = AlgoState::Empty;
            let step = crate::algorithm::LimitStep {
                algorithm,
                params: p,
                cost: 100,
                block_us: None,
                penalty: None,
                shadow: false,
                lease: None,
                settable: false,
            };
            assert!(state.decide(&step, 1000 * S, Mode::Apply).allowed);
            assert_eq!(remaining(&mut state, algorithm, 1000 * S, &p), 100);
            settle(
                &mut state,
                algorithm,
                1000 * S,
                &p,
                reserved(1000 * S, 100, 30),
            );
            assert_eq!(
                remaining(&mut state, algorithm, 1000 * S, &p),
                170,
                "{algorithm}: 70 back"
            );

            let mut state = AlgoState::Empty;
            assert!(state.decide(&step, 1000 * S, Mode::Apply).allowed);
            settle(
                &mut state,
                algorithm,
                1000 * S,
                &p,
                reserved(1000 * S, 100, 250),
            );
            let o = state.decide(&step, 1000 * S, Mode::Peek);
            assert_eq!(
                o.remaining, 0,
                "{algorithm}: 150 more is 50 past the capacity"
            );
            assert_eq!(
                o.retry_after_us,
                Some(150 * S),
                "{algorithm}: the 50 of debt and the 100 asked drain first"
            );
        }
    }

    #[test]
    fn a_late_settlement_changes_only_what_has_not_drained() {
        let p = Params::new(100, 100 * S, 100);
        let mut level = Level::default();
        token_bucket::decide(&mut level, Micros::ZERO, &p, 60, Mode::Apply);
        // 40 s later 40 units have drained: the estimate weighs 20, a cost of 50 weighs 10.
        let mut state = AlgoState::TokenBucket(level);
        let ttl = settle(
            &mut state,
            Algorithm::TokenBucket,
            40 * S,
            &p,
            reserved(Micros::ZERO, 60, 50),
        );
        assert_eq!(ttl, Some(10 * S));
        // A cost of 30 had drained already: the 20 the estimate still weighs go back.
        let mut state = AlgoState::TokenBucket(level);
        assert_eq!(
            settle(
                &mut state,
                Algorithm::TokenBucket,
                40 * S,
                &p,
                Settlement {
                    at_us: Micros::ZERO,
                    estimate: 60,
                    actual: 30
                }
            ),
            Some(Micros::ZERO)
        );
    }

    #[test]
    fn a_give_back_never_frees_what_others_hold() {
        let p = Params::new(10, 10 * S, 10);
        let mut state = AlgoState::Gcra(gcra::State {
            tat_us: Micros::ZERO,
        });
        // Nothing of the reservation is left (it drained, or the state was lost): nothing back.
        assert_eq!(
            settle(
                &mut state,
                Algorithm::Gcra,
                100 * S,
                &p,
                Settlement {
                    at_us: Micros::ZERO,
                    estimate: 5,
                    actual: 0
                }
            ),
            Some(Micros::ZERO)
        );
        let mut level = AlgoState::TokenBucket(Level {
            level: 3.0,
            last_us: 100 * S,
        });
        settle(
            &mut level,
            Algorithm::TokenBucket,
            100 * S,
            &p,
            reserved(100 * S, 8, 0),
        );
        assert_eq!(
            remaining(&mut level, Algorithm::TokenBucket, 100 * S, &p),
            10
        );
    }

    #[test]
    fn the_other_algorithms_do_not_settle() {
        let p = Params::new(10, 10 * S, 10);
        for algorithm in Algorithm::ALL.into_iter().filter(|a| !a.settles()) {
            let mut state = AlgoState::Empty;
            assert_eq!(
                settle(
                    &mut state,
                    algorithm,
                    Micros::ZERO,
                    &p,
                    Settlement {
                        at_us: Micros::ZERO,
                        estimate: 5,
                        actual: 1
                    }
                ),
                None
            );
            assert_eq!(state, AlgoState::Empty);
        }
    }
}
