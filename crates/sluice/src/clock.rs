//! Time as the stores and the limiter see it: [`Micros`] since the Unix epoch.
//!
//! Production uses [`SystemClock`]; tests use [`ManualClock`] and move time by hand, so no test
//! sleeps. The Redis store reads Redis `TIME` unless it is given a clock.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::model::Micros;

/// A source of the current time.
pub trait Clock: Send + Sync + std::fmt::Debug {
    /// The time since the Unix epoch.
    fn now_us(&self) -> Micros;
}

/// The wall clock, read cheaply and never stepping back.
///
/// Reading the OS wall clock costs more than a whole in-memory decision on some virtual
/// machines, so each thread reads the wall clock once a second (its anchor) and advances from it
/// with the CPU's monotonic counter ([`quanta`]) in between. Successive readings never decrease,
/// even across threads or when NTP steps the wall clock back, because the algorithms assume
/// time moves forward; a re-anchor that lands earlier holds time still until it catches up.
/// A reading lent by the timer of the store call in progress (`lending`) stands for its own.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

/// Wall-clock anchors are at most this old.
const REANCHOR_NS: u64 = 1_000_000_000;

struct Fast {
    counter: quanta::Clock,
    last_us: AtomicU64,
}

fn wall_us() -> u64 {
    // A clock before 1970 is a broken host; treat it as the epoch rather than panic.
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| Micros::from(d).get())
}

fn fast() -> &'static Fast {
    static FAST: std::sync::OnceLock<Fast> = std::sync::OnceLock::new();
    FAST.get_or_init(|| Fast {
        counter: quanta::Clock::new(),
        last_us: AtomicU64::new(0),
    })
}

thread_local! {
    /// This thread's anchor: the wall clock (µs) and the counter reading taken together. Per
    /// thread, so reading the clock touches no shared state but `last_us`.
    static ANCHOR: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
    /// A counter reading lent by [`lending`] for the next clock reading on this thread.
    static LENT: std::cell::Cell<Option<u64>> = const { std::cell::Cell::new(None) };
}

/// The CPU counter [`SystemClock`] advances with, for timing code on the same readings.
pub(crate) fn counter() -> &'static quanta::Clock {
    &fast().counter
}

/// Runs `f` (synchronous: nothing else runs on this thread meanwhile) with the counter reading
/// `raw`, just taken, lent to the first [`SystemClock`] reading it makes. A store call timed by
/// its caller then reads the counter twice instead of three times: on virtual machines a reading
/// is a noticeable part of an in-memory decision (BENCHMARKS.md, "Bottlenecks found and fixed").
#[inline]
pub(crate) fn lending<T>(raw: u64, f: impl FnOnce() -> T) -> T {
    /// Takes back a reading not used, even if `f` unwinds: a later reading must not be stale.
    struct Return;
    impl Drop for Return {
        #[inline]
        fn drop(&mut self) {
            LENT.set(None);
        }
    }
    LENT.set(Some(raw));
    let _return = Return;
    f()
}

impl Clock for SystemClock {
    fn now_us(&self) -> Micros {
        let fast = fast();
        let raw = LENT.take().unwrap_or_else(|| fast.counter.raw());
        let (epoch_us, at) = ANCHOR.get();
        let elapsed_ns = fast.counter.delta_as_nanos(at, raw);
        let now = if epoch_us == 0 || elapsed_ns > REANCHOR_NS {
            let wall = wall_us();
            ANCHOR.set((wall, fast.counter.raw()));
            wall
        } else {
            epoch_us + elapsed_ns / 1_000
        };
        // Anchors of different threads (or a wall clock stepped back) may disagree by a little:
        // never return less than any earlier reading. Every reading returned has been published
        // in `last_us`; it is written only when time has moved on (about once a microsecond),
        // so threads reading the clock do not fight over its cache line on every call.
        let last = fast.last_us.load(Ordering::Relaxed);
        if now <= last {
            return Micros::new(last);
        }
        Micros::new(fast.last_us.fetch_max(now, Ordering::Relaxed).max(now))
    }
}

/// A clock that moves only when told to. Clones share the same time.
///
/// ```
/// use std::time::Duration;
/// use sluice::{Clock, ManualClock, Micros};
/// let clock = ManualClock::new(Micros::new(1_000));
/// clock.advance(Duration::from_millis(2));
/// assert_eq!(clock.now_us(), Micros::new(3_000));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ManualClock {
    now_us: Arc<AtomicU64>,
}

impl ManualClock {
    /// A clock showing `now_us`.
    pub fn new(now_us: Micros) -> ManualClock {
        ManualClock {
            now_us: Arc::new(AtomicU64::new(now_us.get())),
        }
    }

    /// A clock at a fixed, realistic epoch time (2026-01-01T00:00:00Z), so that windows and
    /// epoch timestamps in tests look like production ones.
    pub fn at_2026() -> ManualClock {
        ManualClock::new(Micros::new(1_767_225_600_000_000))
    }

    /// Moves time forward.
    pub fn advance(&self, by: Duration) {
        self.now_us
            .fetch_add(Micros::from(by).get(), Ordering::SeqCst);
    }

    /// Sets the time.
    pub fn set_us(&self, now_us: Micros) {
        self.now_us.store(now_us.get(), Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_us(&self) -> Micros {
        Micros::new(self.now_us.load(Ordering::SeqCst))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_clock_tracks_the_wall_clock_and_never_steps_back() {
        let before = wall_us();
        let mut last = 0;
        for _ in 0..10_000 {
            let now = SystemClock.now_us().get();
            assert!(now >= last);
            last = now;
        }
        let after = wall_us();
        assert!(
            last + 1_000 >= before && last <= after + 1_000,
            "{before} <= {last} <= {after}"
        );
    }
}
