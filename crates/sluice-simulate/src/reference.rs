//! The exact sliding log every algorithm is measured against, written independently of the
//! library's algorithms.
//!
//! Per identity: admit `cost` units at `now` when the units admitted in `(now - window, now]`
//! plus `cost` do not exceed the limit. It is the ideal the other algorithms approximate: no
//! window of the limit's length ever holds more than the limit, and nothing is denied that fits.

use std::collections::HashMap;

use sluice::Micros;

use super::window::Window;

/// Identities whose log is empty are dropped after this many decisions, bounding memory to the
/// identities active within one window.
const SWEEP_EVERY: u64 = 1 << 16;

/// An exact sliding log over any number of identities.
#[derive(Debug)]
pub struct ExactSlidingLog {
    limit: u64,
    window_us: Micros,
    logs: HashMap<String, Window>,
    decisions: u64,
}

impl ExactSlidingLog {
    /// `limit` units per `window_us`.
    pub fn new(limit: u64, window_us: Micros) -> ExactSlidingLog {
        ExactSlidingLog {
            limit,
            window_us,
            logs: HashMap::new(),
            decisions: 0,
        }
    }

    /// Decides (and records, when admitted) `cost` units of `identity` at `now`.
    pub fn admit(&mut self, identity: &str, now: Micros, cost: u64) -> bool {
        self.decisions += 1;
        if self.decisions.is_multiple_of(SWEEP_EVERY) {
            let window_us = self.window_us;
            self.logs.retain(|_, log| log.advance(now, window_us) > 0);
        }
        let log = match self.logs.get_mut(identity) {
            Some(log) => log,
            None => self.logs.entry(identity.to_string()).or_default(),
        };
        let admitted = log.advance(now, self.window_us) + cost <= self.limit;
        if admitted {
            log.add(now, cost);
        }
        admitted
    }
}

#[cfg(test)]
mod tests {
    use super::{ExactSlidingLog, Micros};

    #[test]
    fn admits_the_limit_per_window_per_identity() {
        let us = Micros::new;
        let mut log = ExactSlidingLog::new(2, us(1_000));
        assert!(log.admit("a", us(0), 1));
        assert!(log.admit("a", us(10), 1));
        assert!(!log.admit("a", us(999), 1));
        assert!(log.admit("b", us(999), 2));
        assert!(log.admit("a", us(1_000), 1));
        assert!(!log.admit("a", us(1_005), 1));
        assert!(
            !log.admit("c", us(1_005), 3),
            "a cost above the limit never fits"
        );
    }
}
