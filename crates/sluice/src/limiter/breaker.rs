//! The circuit breaker in front of the store: a store that keeps failing is skipped for a short
//! back-off instead of being waited on by every request.
//!
//! After [`FAILURES_TO_OPEN`] consecutive failures the breaker opens for a back-off that doubles
//! with each further failure, from [`MIN_BACKOFF`] up to [`MAX_BACKOFF`]. When the back-off ends,
//! one request (the first to claim it) probes the store while the others keep being skipped; a
//! success closes the breaker.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Clock;
use crate::model::Micros;

/// Consecutive failures that open the breaker.
pub const FAILURES_TO_OPEN: u32 = 3;
/// First back-off.
pub const MIN_BACKOFF: Duration = Duration::from_millis(250);
/// Longest back-off. Short enough that a store back from a failover is probed again well within
/// a second (one probe per back-off costs the store nothing).
pub const MAX_BACKOFF: Duration = Duration::from_millis(500);

/// Shared failure state of one store.
#[derive(Debug)]
pub struct Breaker {
    failures: AtomicU32,
    /// 0 when closed; otherwise the store is skipped until this time (µs).
    open_until_us: AtomicU64,
    clock: Arc<dyn Clock>,
    probe_window: Duration,
}

impl Breaker {
    /// A closed breaker. `probe_window` is how long a probing request may take (the store timeout).
    pub fn new(clock: Arc<dyn Clock>, probe_window: Duration) -> Breaker {
        Breaker {
            failures: AtomicU32::new(0),
            open_until_us: AtomicU64::new(0),
            clock,
            probe_window,
        }
    }

    /// Whether this request should call the store.
    pub fn allow(&self) -> bool {
        let until = self.open_until_us.load(Ordering::Acquire);
        if until == 0 {
            return true;
        }
        // The atomic holds the raw µs: 0 is "closed".
        let now = self.clock.now_us().get();
        if now < until {
            return false;
        }
        // Back-off over: exactly one caller wins the probe; the others wait for its result.
        let next = now + Micros::from(self.probe_window).get() + 1;
        self.open_until_us
            .compare_exchange(until, next, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }

    /// Records a successful call; returns true if the breaker was open.
    pub fn success(&self) -> bool {
        self.failures.store(0, Ordering::Release);
        self.open_until_us.swap(0, Ordering::AcqRel) != 0
    }

    /// Records a failed call; returns true if this failure opened the breaker.
    pub fn failure(&self) -> bool {
        let failures = self.failures.fetch_add(1, Ordering::AcqRel) + 1;
        if failures < FAILURES_TO_OPEN {
            return false;
        }
        let doublings = (failures - FAILURES_TO_OPEN).min(16);
        let backoff = MIN_BACKOFF.saturating_mul(1 << doublings).min(MAX_BACKOFF);
        let until = self.clock.now_us().saturating_add(backoff.into()).get();
        self.open_until_us.swap(until, Ordering::AcqRel) == 0
    }

    /// Whether the store is being skipped right now.
    pub fn is_open(&self) -> bool {
        let until = self.open_until_us.load(Ordering::Acquire);
        until != 0 && self.clock.now_us().get() < until
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    #[test]
    fn opens_after_repeated_failures_then_probes_once_and_closes() {
        let clock = ManualClock::new(Micros::from_secs(1));
        let b = Breaker::new(Arc::new(clock.clone()), Duration::from_millis(50));
        assert!(!b.failure());
        assert!(!b.failure());
        assert!(b.allow());
        assert!(b.failure(), "the third failure opens");
        assert!(!b.allow());
        clock.advance(MIN_BACKOFF);
        assert!(b.allow(), "one probe after the back-off");
        assert!(!b.allow(), "only one");
        assert!(b.success());
        assert!(b.allow());
    }

    #[test]
    fn back_off_doubles_up_to_the_maximum() {
        let clock = ManualClock::new(Micros::ZERO);
        let b = Breaker::new(Arc::new(clock.clone()), Duration::from_millis(50));
        for _ in 0..4 {
            b.failure();
        }
        clock.advance(MIN_BACKOFF);
        assert!(!b.allow(), "the fourth failure doubled the back-off");
        clock.advance(MIN_BACKOFF);
        assert!(b.allow());
        for _ in 0..40 {
            b.failure();
        }
        clock.advance(MAX_BACKOFF);
        assert!(b.allow());
    }
}
