//! Block lock: once a limit denies, the identity is refused outright until a deadline.
//!
//! While blocked, a check is answered by the block alone (O(1)), whatever the algorithm's state.
//! A new block never shortens an existing one.

/// The end of the current block (µs since the epoch); 0 when never blocked.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct State {
    /// Block end; in the past means not blocked.
    pub until_us: u64,
}

impl State {
    /// The block's end if it is still in force at `now`.
    pub fn active(&self, now: u64) -> Option<u64> {
        (self.until_us > now).then_some(self.until_us)
    }

    /// Blocks for `duration_us` from `now`, keeping a later existing end. Returns the end.
    pub fn impose(&mut self, now: u64, duration_us: u64) -> u64 {
        self.until_us = self.until_us.max(now + duration_us);
        self.until_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ends_exactly_at_its_deadline_and_never_shortens() {
        let mut b = State::default();
        assert_eq!(b.active(0), None);
        assert_eq!(b.impose(100, 50), 150);
        assert_eq!(b.active(149), Some(150));
        assert_eq!(b.active(150), None);
        b.impose(100, 500);
        assert_eq!(b.impose(120, 10), 600);
    }
}
