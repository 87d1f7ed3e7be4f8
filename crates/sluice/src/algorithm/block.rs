//! Block lock: once a limit denies, the identity is refused outright until a deadline.
//!
//! While blocked, a check is answered by the block alone (O(1)), whatever the algorithm's state.
//! A new block never shortens an existing one.

use crate::model::Micros;

/// The end of the current block (since the epoch); zero when never blocked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// Block end; in the past means not blocked.
    pub until_us: Micros,
}

impl State {
    /// The block's end if it is still in force at `now`.
    pub fn active(&self, now: Micros) -> Option<Micros> {
        (self.until_us > now).then_some(self.until_us)
    }

    /// Blocks for `duration_us` from `now`, keeping a later existing end. Returns the end.
    pub fn impose(&mut self, now: Micros, duration_us: Micros) -> Micros {
        self.until_us = self.until_us.max(now + duration_us);
        self.until_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_exactly_at_its_deadline_and_never_shortens() {
        let us = Micros::new;
        let mut b = State::default();
        assert_eq!(b.active(us(0)), None);
        assert_eq!(b.impose(us(100), us(50)), us(150));
        assert_eq!(b.active(us(149)), Some(us(150)));
        assert_eq!(b.active(us(150)), None);
        b.impose(us(100), us(500));
        assert_eq!(b.impose(us(120), us(10)), us(600));
    }
}
