//! A trailing-window sum: the units recorded in the last `window`.
//!
//! A unit recorded at `t` counts while `now < t + window`, the same boundary as the sliding-log
//! algorithm, so "the most admitted in any window" and the exact reference agree with it.

use std::collections::VecDeque;

use sluice::Micros;

/// Units recorded at each time, oldest first, and their sum.
#[derive(Debug, Clone, Default)]
pub struct Window {
    entries: VecDeque<(Micros, u64)>,
    sum: u64,
}

impl Window {
    /// Forgets what no longer counts at `now`; returns what still does.
    pub fn advance(&mut self, now: Micros, window_us: Micros) -> u64 {
        while let Some(&(t, units)) = self.entries.front() {
            if t + window_us > now {
                break;
            }
            self.entries.pop_front();
            self.sum -= units;
        }
        self.sum
    }

    /// Records `units` at `now` (never earlier than the last record).
    pub fn add(&mut self, now: Micros, units: u64) {
        match self.entries.back_mut() {
            Some((t, n)) if *t == now => *n += units,
            _ => self.entries.push_back((now, units)),
        }
        self.sum += units;
    }

    /// Whether nothing counts any more.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::{Micros, Window};

    #[test]
    fn a_unit_counts_for_exactly_one_window() {
        let us = Micros::new;
        let mut w = Window::default();
        w.add(us(100), 1);
        w.add(us(100), 2);
        w.add(us(150), 1);
        assert_eq!(w.advance(us(199), us(100)), 4);
        assert_eq!(w.advance(us(200), us(100)), 1);
        assert_eq!(w.advance(us(250), us(100)), 0);
        assert!(w.is_empty());
    }
}
