//! The bound on decisions waiting for a remote store at once: past it, a decision is answered
//! at once by its rule's fail policy (degraded, reason "shed") instead of joining the queue.
//!
//! A store that keeps up answers in about a round trip, so the calls in flight are about the
//! decision rate times that round trip: a few dozen. When they pile up into the hundreds, the
//! store (or the network to it) is late, and every further call only lengthens the wait of the
//! ones before it, until the store timeout answers them all by the fail policy anyway, late.
//! Shedding answers the excess with that same policy without the wait, and leaves the store the
//! calls it can serve.
//!
//! What is counted is the calls' weight, not their number: a call weighs the limits it asks
//! about (one for a check of a one-limit rule; a `check_all` of 64 identities weighs 64, about
//! what it costs the store), capped at the bound so that any call can pass an idle store.
//!
//! Invariants: a permit is taken before the call and returned when it ends, however it ends (its
//! `Drop`); the count never exceeds the bound by more than the racing callers' momentary
//! increments, which each take back at once; a shed call does not reach the store and does not
//! count as a store failure for the breaker. In-process stores are never bounded (nothing waits).

use std::sync::atomic::{AtomicU32, Ordering};

/// How many decisions may wait for a remote store at once ([`Options::in_flight`](super::Options::in_flight)).
///
/// ```
/// use sluice::limiter::InFlightLimit;
/// assert_eq!("512".parse::<InFlightLimit>(), Ok(InFlightLimit::Fixed(512)));
/// assert_eq!("unbounded".parse::<InFlightLimit>(), Ok(InFlightLimit::Unbounded));
/// ```
///
/// There is no adaptive bound: none measured better than every fixed one (RELIABILITY.md), and
/// `"adaptive"` no longer parses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InFlightLimit {
    /// No bound but the store timeout.
    Unbounded,
    /// At most this many.
    Fixed(u32),
}

impl InFlightLimit {
    /// The default: a fixed 1,024, far above what a store that keeps up ever has in flight.
    pub const DEFAULT: InFlightLimit = InFlightLimit::Fixed(1024);
}

/// The word of the adaptive bound, which is no more.
const ADAPTIVE: &str = "adaptive";

/// Why `adaptive`, the word of a bound that is no more, is refused, and what to write instead.
pub const ADAPTIVE_REMOVED: &str = "the adaptive bound was removed, as no adaptive bound \
measured better than every fixed one past the store's capacity; write a number of calls (the \
default is 1024) or `unbounded`";

impl Default for InFlightLimit {
    fn default() -> InFlightLimit {
        InFlightLimit::DEFAULT
    }
}

impl std::str::FromStr for InFlightLimit {
    type Err = String;

    /// `unbounded`, or a number from 1.
    fn from_str(text: &str) -> Result<InFlightLimit, String> {
        match text.trim() {
            "unbounded" => Ok(InFlightLimit::Unbounded),
            ADAPTIVE => Err(format!("`{ADAPTIVE}`: {ADAPTIVE_REMOVED}")),
            number => match number.parse::<u32>() {
                Ok(n) if n > 0 => Ok(InFlightLimit::Fixed(n)),
                _ => Err(format!("`{text}`: `unbounded` or a number of calls from 1")),
            },
        }
    }
}

impl std::fmt::Display for InFlightLimit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            InFlightLimit::Unbounded => f.write_str("unbounded"),
            InFlightLimit::Fixed(n) => write!(f, "{n}"),
        }
    }
}

/// The count of calls in flight and their bound.
#[derive(Debug)]
pub(crate) struct InFlight {
    count: AtomicU32,
    /// `u32::MAX` when unbounded.
    bound: u32,
}

/// One call in flight; dropping it ends the call.
#[derive(Debug)]
pub(crate) struct Permit<'a> {
    of: &'a InFlight,
    weight: u32,
}

impl InFlight {
    pub(crate) fn new(limit: InFlightLimit) -> InFlight {
        let bound = match limit {
            InFlightLimit::Unbounded => u32::MAX,
            InFlightLimit::Fixed(n) => n.max(1),
        };
        InFlight {
            count: AtomicU32::new(0),
            bound,
        }
    }

    /// A permit for one more call of `limits` limits (its weight, at most the bound), or `None`
    /// when it would take the weight in flight past the bound.
    pub(crate) fn enter(&self, limits: usize) -> Option<Permit<'_>> {
        let bound = self.bound;
        let weight = u32::try_from(limits).unwrap_or(u32::MAX).clamp(1, bound);
        let before = self.count.fetch_add(weight, Ordering::AcqRel);
        if before > bound - weight {
            self.count.fetch_sub(weight, Ordering::AcqRel);
            return None;
        }
        Some(Permit { of: self, weight })
    }

    /// The bound now.
    pub(crate) fn bound(&self) -> u32 {
        self.bound
    }

    /// The weight of the calls in flight now.
    pub(crate) fn count(&self) -> u32 {
        self.count.load(Ordering::Relaxed)
    }
}

impl Drop for Permit<'_> {
    fn drop(&mut self) {
        self.of.count.fetch_sub(self.weight, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_bound_admits_that_many_calls_and_one_more_when_one_ends() {
        let in_flight = InFlight::new(InFlightLimit::Fixed(2));
        let (a, b) = (in_flight.enter(1), in_flight.enter(1));
        assert!(a.is_some() && b.is_some());
        assert!(in_flight.enter(1).is_none(), "the third waits for none");
        assert_eq!(in_flight.count(), 2, "a refused call leaves no trace");
        drop(a);
        assert!(in_flight.enter(1).is_some());
    }

    #[test]
    fn calls_weigh_their_limits() {
        let in_flight = InFlight::new(InFlightLimit::Fixed(10));
        let heavy = in_flight.enter(8).expect("8 of 10");
        assert!(in_flight.enter(3).is_none(), "8 + 3 is past 10");
        assert_eq!(in_flight.count(), 8);
        let light = in_flight.enter(2).expect("8 + 2 fits");
        assert!(in_flight.enter(1).is_none());
        drop((heavy, light));
        let huge = in_flight
            .enter(64)
            .expect("capped at the bound: an idle store takes it");
        assert!(in_flight.enter(1).is_none());
        drop(huge);
        assert_eq!(in_flight.count(), 0);
    }

    #[test]
    fn unbounded_never_refuses() {
        let in_flight = InFlight::new(InFlightLimit::Unbounded);
        let permits: Vec<_> = (0..10_000).filter_map(|_| in_flight.enter(1)).collect();
        assert_eq!(permits.len(), 10_000);
    }

    #[test]
    fn limits_read_from_text() {
        assert_eq!("1".parse(), Ok(InFlightLimit::Fixed(1)));
        assert!("0".parse::<InFlightLimit>().is_err());
        assert!("-3".parse::<InFlightLimit>().is_err());
        assert!("lots".parse::<InFlightLimit>().is_err());
        let removed = "adaptive".parse::<InFlightLimit>().unwrap_err();
        assert!(removed.contains("removed"), "{removed}");
        for limit in [InFlightLimit::Unbounded, InFlightLimit::Fixed(9)] {
            assert_eq!(limit.to_string().parse(), Ok(limit));
        }
    }
}
