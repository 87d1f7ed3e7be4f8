//! [`Micros`]: the one time type of clocks, stores and algorithms, a whole number of microseconds.
//!
//! The same type holds a point in time (microseconds since the Unix epoch, as [`Clock`] reads
//! it) and a length (a window, a wait, a TTL), because the algorithms mix the two freely
//! (`tat - now`, `now + window`) exactly as their Redis scripts do. Rules and options hold
//! [`Duration`]s; they become `Micros` once, through [`From<Duration>`], which saturates rather
//! than wraps. The raw number ([`Micros::get`]) is read only at the wire: script arguments and
//! replies, and the milliseconds a [`Decision`](crate::Decision) reports.
//!
//! Arithmetic behaves as `u64`'s: `+` and `-` overflow as `u64` does (a panic in debug builds),
//! the `saturating_` forms never do. There is deliberately no `Display`: a time written into
//! text (a script argument, a stored value) is written as [`Micros::get`], never by accident.
//!
//! [`Clock`]: crate::Clock

use std::ops::{Add, AddAssign, Div, Mul, Rem, Sub, SubAssign};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A time in whole microseconds: since the Unix epoch, or a length.
///
/// ```
/// use std::time::Duration;
/// use sluice::Micros;
/// let window = Micros::from(Duration::from_secs(60));
/// assert_eq!(window, Micros::from_secs(60));
/// assert_eq!((window / 4).as_millis(), 15_000);
/// assert_eq!(Micros::new(1_500).as_millis_ceil(), 2);
/// ```
/// Serialized as the bare number of microseconds (a field named `…_us`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Micros(u64);

impl Micros {
    /// No time: the epoch, or an empty length.
    pub const ZERO: Micros = Micros(0);
    /// The latest time there is (half a million years).
    pub const MAX: Micros = Micros(u64::MAX);

    /// `us` microseconds.
    pub const fn new(us: u64) -> Micros {
        Micros(us)
    }

    /// `ms` milliseconds, saturating.
    pub const fn from_millis(ms: u64) -> Micros {
        Micros(ms.saturating_mul(1_000))
    }

    /// `s` seconds, saturating.
    pub const fn from_secs(s: u64) -> Micros {
        Micros(s.saturating_mul(1_000_000))
    }

    /// The number of microseconds, for the wire.
    pub const fn get(self) -> u64 {
        self.0
    }

    /// Whole milliseconds, rounded down: a point in time on the wire (`blocked_until_ms`).
    pub const fn as_millis(self) -> u64 {
        self.0 / 1_000
    }

    /// Whole milliseconds, rounded up: a wait on the wire (`retry_after_ms`), so that waiting
    /// that long is always enough.
    pub const fn as_millis_ceil(self) -> u64 {
        self.0.div_ceil(1_000)
    }

    /// In seconds, for reports and plots.
    pub fn as_secs_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// Whether this is [`Micros::ZERO`].
    pub const fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// `self + rhs`, at most [`Micros::MAX`].
    #[must_use]
    pub const fn saturating_add(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_add(rhs.0))
    }

    /// `self - rhs`, at least [`Micros::ZERO`].
    #[must_use]
    pub const fn saturating_sub(self, rhs: Micros) -> Micros {
        Micros(self.0.saturating_sub(rhs.0))
    }

    /// `self * n`, at most [`Micros::MAX`].
    #[must_use]
    pub const fn saturating_mul(self, n: u64) -> Micros {
        Micros(self.0.saturating_mul(n))
    }

    /// `self - rhs`, or `None` if `rhs` is later.
    pub const fn checked_sub(self, rhs: Micros) -> Option<Micros> {
        match self.0.checked_sub(rhs.0) {
            Some(us) => Some(Micros(us)),
            None => None,
        }
    }

    /// `self / rhs` rounded up: how many `rhs` fit in `self`, a last partial one counted.
    pub const fn div_ceil(self, rhs: Micros) -> u64 {
        self.0.div_ceil(rhs.0)
    }

    /// As a [`Duration`].
    pub const fn to_duration(self) -> Duration {
        Duration::from_micros(self.0)
    }
}

impl From<Duration> for Micros {
    /// Saturating: a duration beyond [`Micros::MAX`] becomes it rather than wrap into a short one.
    fn from(d: Duration) -> Micros {
        Micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

impl From<Micros> for Duration {
    fn from(m: Micros) -> Duration {
        m.to_duration()
    }
}

impl Add for Micros {
    type Output = Micros;
    fn add(self, rhs: Micros) -> Micros {
        Micros(self.0 + rhs.0)
    }
}

impl AddAssign for Micros {
    fn add_assign(&mut self, rhs: Micros) {
        self.0 += rhs.0;
    }
}

impl Sub for Micros {
    type Output = Micros;
    fn sub(self, rhs: Micros) -> Micros {
        Micros(self.0 - rhs.0)
    }
}

impl SubAssign for Micros {
    fn sub_assign(&mut self, rhs: Micros) {
        self.0 -= rhs.0;
    }
}

/// A length repeated `n` times.
impl Mul<u64> for Micros {
    type Output = Micros;
    fn mul(self, n: u64) -> Micros {
        Micros(self.0 * n)
    }
}

/// A length repeated `n` times, written as `3 * window`.
impl Mul<Micros> for u64 {
    type Output = Micros;
    fn mul(self, m: Micros) -> Micros {
        Micros(self * m.0)
    }
}

/// A length split in `n` equal parts, rounded down.
impl Div<u64> for Micros {
    type Output = Micros;
    fn div(self, n: u64) -> Micros {
        Micros(self.0 / n)
    }
}

/// How many whole `rhs` fit in `self`.
impl Div for Micros {
    type Output = u64;
    fn div(self, rhs: Micros) -> u64 {
        self.0 / rhs.0
    }
}

/// What is left of `self` after the whole `rhs` that fit in it: the position within a window.
impl Rem for Micros {
    type Output = Micros;
    fn rem(self, rhs: Micros) -> Micros {
        Micros(self.0 % rhs.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conversions_saturate_and_round_as_documented() {
        assert_eq!(Micros::from(Duration::MAX), Micros::MAX);
        assert_eq!(Micros::from_secs(u64::MAX), Micros::MAX);
        assert_eq!(Micros::new(1_999).as_millis(), 1);
        assert_eq!(Micros::new(1_001).as_millis_ceil(), 2);
        assert_eq!(Micros::new(2_000).as_millis_ceil(), 2);
        assert_eq!(
            Duration::from(Micros::from_millis(3)),
            Duration::from_millis(3)
        );
        assert_eq!(Micros::new(5).saturating_sub(Micros::new(9)), Micros::ZERO);
        assert_eq!(Micros::new(5).checked_sub(Micros::new(9)), None);
        assert_eq!(Micros::new(10) / Micros::new(3), 3);
        assert_eq!(Micros::new(10).div_ceil(Micros::new(3)), 4);
        assert_eq!(Micros::new(10) % Micros::new(3), Micros::new(1));
    }
}
