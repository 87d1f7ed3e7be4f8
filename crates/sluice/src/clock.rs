//! Time as the stores and the limiter see it: microseconds since the Unix epoch.
//!
//! Production uses [`SystemClock`]; tests use [`ManualClock`] and move time by hand, so no test
//! sleeps. The Redis store reads Redis `TIME` unless it is given a clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// Microseconds since the Unix epoch.
    fn now_us(&self) -> u64;
}

/// The operating system's wall clock.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_us(&self) -> u64 {
        // A clock before 1970 is a broken host; treat it as the epoch rather than panic.
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64)
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use sluice::{Clock, ManualClock};
/// let clock = ManualClock::new(1_000);
/// clock.advance(Duration::from_millis(2));
/// assert_eq!(clock.now_us(), 3_000);
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_us: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock showing `now_us`.
    pub fn new(now_us: u64) -> ManualClock {
        ManualClock {
            now_us: Arc::new(AtomicU64::new(now_us)),
        }
    }

    /// A clock at a fixed, realistic epoch time (2026-01-01T00:00:00Z), so that windows and
    /// epoch timestamps in tests look like production ones.
    pub fn at_2026() -> ManualClock {
        ManualClock::new(1_767_225_600_000_000)
    }

    /// Moves time forward.
    pub fn advance(&self, by: Duration) {
        self.now_us
            .fetch_add(by.as_micros() as u64, Ordering::SeqCst);
    }

    /// Sets the time.
    pub fn set_us(&self, now_us: u64) {
        self.now_us.store(now_us, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> u64 {
        self.now_us.load(Ordering::SeqCst)
    }
}
