//! Escalating penalty: violations remembered for a while, a warning, then a ban.
//!
//! Each denial by the limit is one violation. Violations are forgotten `memory` after the last
//! one. From `warn_after` violations decisions carry a warning; reaching `ban_after` bans the
//! identity for `ban` (through the block lock). Violations are kept across the ban, so a repeat
//! offender is banned again at its next violation until `memory` has passed without one.

use crate::model::Micros;

/// Penalty settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PenaltyParams {
    /// Warning threshold.
    pub warn_after: u64,
    /// Ban threshold.
    pub ban_after: u64,
    /// Ban length.
    pub ban_us: Micros,
    /// How long violations are remembered after the last one.
    pub memory_us: Micros,
}

/// Remembered violations.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// Violation count.
    pub violations: u64,
    /// When the count is forgotten (since the epoch).
    pub expires_us: Micros,
}

impl State {
    /// Violations still remembered at `now`.
    pub fn current(&self, now: Micros) -> u64 {
        if self.expires_us > now {
            self.violations
        } else {
            0
        }
    }

    /// Records one violation; returns the new count and whether it earns a ban.
    pub fn record(&mut self, now: Micros, p: &PenaltyParams) -> (u64, bool) {
        self.violations = self.current(now) + 1;
        self.expires_us = now + p.memory_us;
        (self.violations, self.violations >= p.ban_after)
    }
}

/// Whether `violations` deserve a warning.
pub fn warns(violations: u64, p: &PenaltyParams) -> bool {
    violations > 0 && violations >= p.warn_after
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: PenaltyParams = PenaltyParams {
        warn_after: 3,
        ban_after: 5,
        ban_us: Micros::new(1_000),
        memory_us: Micros::new(10_000),
    };

    #[test]
    fn warns_then_bans_then_forgets() {
        let mut s = State::default();
        let results: Vec<(u64, bool, bool)> = (1..=5)
            .map(|t| {
                let (v, ban) = s.record(Micros::new(t), &P);
                (v, warns(v, &P), ban)
            })
            .collect();
        assert_eq!(
            results,
            [
                (1, false, false),
                (2, false, false),
                (3, true, false),
                (4, true, false),
                (5, true, true)
            ]
        );
        assert_eq!(s.current(Micros::new(5 + 10_000 - 1)), 5);
        assert_eq!(s.current(Micros::new(5 + 10_000)), 0);
    }
}
