//! A key's state as a memory-store entry holds it: the common small states inline, the rest in a
//! box.
//!
//! Most keys hold one GCRA timestamp, one fixed-window count or one bucket level, and no block or
//! remembered violations. Those are held inline in 24 bytes, which keeps an entry to one cache
//! line: a store of many keys is bounded by memory traffic, one line per decision. A state with
//! a block or violations, a sliding window or log, or leases is held whole in a [`KeyState`]
//! box; it stays boxed until the entry expires (no churn between the two forms).
//!
//! Invariant: [`PackedState::unpack`] of [`PackedState::pack`] is the state packed, for every
//! state.

use crate::algorithm::{AlgoState, KeyState, Level, block, fixed_window, gcra};

#[derive(Debug, Default)]
pub(super) enum PackedState {
    #[default]
    Empty,
    Gcra(gcra::State),
    FixedWindow(fixed_window::State),
    TokenBucket(Level),
    LeakyBucket(Level),
    Boxed(Box<KeyState>),
}

impl PackedState {
    /// The state in its held form; boxed only when it has no inline form.
    #[inline]
    pub fn pack(state: KeyState) -> PackedState {
        let bare = state.block == Default::default() && state.penalty == Default::default();
        match state.algo {
            AlgoState::Empty if bare => PackedState::Empty,
            AlgoState::Gcra(s) if bare => PackedState::Gcra(s),
            AlgoState::FixedWindow(s) if bare => PackedState::FixedWindow(s),
            AlgoState::TokenBucket(s) if bare => PackedState::TokenBucket(s),
            AlgoState::LeakyBucket(s) if bare => PackedState::LeakyBucket(s),
            _ => PackedState::Boxed(Box::new(state)),
        }
    }

    /// The state in full.
    #[inline]
    pub fn unpack(self) -> KeyState {
        let algo = match self {
            PackedState::Boxed(state) => return *state,
            PackedState::Empty => AlgoState::Empty,
            PackedState::Gcra(s) => AlgoState::Gcra(s),
            PackedState::FixedWindow(s) => AlgoState::FixedWindow(s),
            PackedState::TokenBucket(s) => AlgoState::TokenBucket(s),
            PackedState::LeakyBucket(s) => AlgoState::LeakyBucket(s),
        };
        KeyState {
            algo,
            ..KeyState::default()
        }
    }

    /// Runs `f` on the state in full: in place when boxed, else on an unpacked copy packed
    /// back afterwards.
    #[inline]
    pub fn with<T>(&mut self, f: impl FnOnce(&mut KeyState) -> T) -> T {
        if let PackedState::Boxed(state) = self {
            return f(state);
        }
        let mut state = std::mem::take(self).unpack();
        let out = f(&mut state);
        *self = PackedState::pack(state);
        out
    }

    /// Whether the state is held in a box.
    pub fn is_boxed(&self) -> bool {
        matches!(self, PackedState::Boxed(_))
    }

    /// The state in full, if it is held in a box.
    pub fn boxed(&mut self) -> Option<&mut KeyState> {
        match self {
            PackedState::Boxed(state) => Some(state),
            _ => None,
        }
    }

    /// The block part of the state.
    pub fn block(&self) -> block::State {
        match self {
            PackedState::Boxed(state) => state.block,
            _ => block::State::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::{concurrency, penalty, sliding_log, sliding_window};
    use crate::model::Micros;

    fn states() -> Vec<KeyState> {
        let at = Micros::from_secs(5);
        let algos = [
            AlgoState::Empty,
            AlgoState::Gcra(gcra::State { tat_us: at }),
            AlgoState::FixedWindow(fixed_window::State {
                window_start: at,
                count: 3,
            }),
            AlgoState::TokenBucket(Level {
                level: 2.5,
                last_us: at,
            }),
            AlgoState::LeakyBucket(Level {
                level: 0.5,
                last_us: at,
            }),
            AlgoState::SlidingWindow(sliding_window::State::default()),
            AlgoState::SlidingLog(sliding_log::State::default()),
            AlgoState::Concurrency(concurrency::State::default()),
        ];
        let marks = [
            (block::State::default(), penalty::State::default()),
            (block::State { until_us: at }, penalty::State::default()),
            (
                block::State::default(),
                penalty::State {
                    violations: 2,
                    expires_us: at,
                },
            ),
        ];
        algos
            .iter()
            .flat_map(|algo| {
                marks.iter().map(|&(block, penalty)| KeyState {
                    algo: algo.clone(),
                    block,
                    penalty,
                })
            })
            .collect()
    }

    #[test]
    fn every_state_round_trips_and_only_bare_small_ones_are_inline() {
        for state in states() {
            let packed = PackedState::pack(state.clone());
            let inline = state.block == Default::default()
                && state.penalty == Default::default()
                && !matches!(
                    state.algo,
                    AlgoState::SlidingWindow(_)
                        | AlgoState::SlidingLog(_)
                        | AlgoState::Concurrency(_)
                );
            assert_eq!(
                !matches!(packed, PackedState::Boxed(_)),
                inline,
                "{state:?}"
            );
            assert_eq!(packed.block(), state.block);
            assert_eq!(packed.unpack(), state);
        }
    }

    #[test]
    fn with_changes_the_state_in_either_form() {
        for state in states() {
            let mut packed = PackedState::pack(state.clone());
            let until = Micros::from_secs(9);
            packed.with(|s| s.block.until_us = until);
            let mut expected = state;
            expected.block.until_us = until;
            assert!(matches!(packed, PackedState::Boxed(_)));
            assert_eq!(packed.unpack(), expected);
        }
    }

    #[test]
    fn an_inline_state_fits_in_three_words() {
        assert_eq!(std::mem::size_of::<PackedState>(), 24);
    }
}
