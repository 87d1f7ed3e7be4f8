//! `Gradient`: an adaptive bound on store calls in flight, from their latency alone (the
//! "gradient" limit of Netflix's concurrency-limits, simplified).
//!
//! Each finished call gives a sample: its round trip. A long-run average of the round trips is
//! what the store answers in when it keeps up; the short-run average is what it answers in now.
//! While the two agree the bound grows by a small queue allowance; when calls start waiting in
//! the store (the short-run average climbs above the long-run one by more than `TOLERANCE`), the
//! bound shrinks in proportion, at most by half per sample. Calls over the bound are not made:
//! the limiter answers them by the rule's fail policy at once instead of queueing them behind a
//! store that is already late.
//!
//! Invariants: the bound stays within `[min, max]`; it grows only while the calls in flight use
//! at least half of it (a quiet service gives no evidence the store could take more); it is pure
//! arithmetic on the samples given, with no clock of its own.

/// How much slower than usual the store may answer before the bound shrinks.
const TOLERANCE: f64 = 1.5;
/// Samples the short-run average spans (its smoothing: 2 / (n + 1)).
const SHORT_SAMPLES: f64 = 10.0;
/// Samples the long-run average spans.
const LONG_SAMPLES: f64 = 600.0;
/// Weight of each new bound against the current one.
const SMOOTHING: f64 = 0.2;

/// The adaptive bound and the averages it is computed from.
#[derive(Debug, Clone)]
pub(crate) struct Gradient {
    min: f64,
    max: f64,
    bound: f64,
    short_ns: f64,
    long_ns: f64,
}

impl Gradient {
    /// Starts at `min`, the bound a store that was never measured is trusted with.
    pub(crate) fn new(min: u32, max: u32) -> Gradient {
        let (min, max) = (f64::from(min.max(1)), f64::from(max.max(min.max(1))));
        Gradient {
            min,
            max,
            bound: min,
            short_ns: 0.0,
            long_ns: 0.0,
        }
    }

    /// The bound now.
    pub(crate) fn bound(&self) -> u32 {
        self.bound as u32
    }

    /// Takes one finished call's round trip, made while `in_flight` calls (this one included)
    /// were waiting, and returns the new bound.
    pub(crate) fn sample(&mut self, rtt_ns: f64, in_flight: u32) -> u32 {
        // Within 1 ns and 1,000 s, so no average can overflow.
        let rtt_ns = rtt_ns.clamp(1.0, 1e12);
        if self.long_ns == 0.0 {
            (self.short_ns, self.long_ns) = (rtt_ns, rtt_ns);
        }
        self.short_ns = ema(self.short_ns, rtt_ns, SHORT_SAMPLES);
        self.long_ns = ema(self.long_ns, rtt_ns, LONG_SAMPLES);
        // A long-run average far above today's latency still remembers a slow spell that is
        // over: let it come down faster than its smoothing would, so the bound grows back soon.
        if self.long_ns > self.short_ns * 2.0 {
            self.long_ns *= 0.95;
        }
        if f64::from(in_flight) * 2.0 < self.bound {
            return self.bound();
        }
        let gradient = (TOLERANCE * self.long_ns / self.short_ns).clamp(0.5, 1.0);
        let queue = self.bound.sqrt();
        let next = self.bound * gradient + queue;
        self.bound = (self.bound * (1.0 - SMOOTHING) + next * SMOOTHING).clamp(self.min, self.max);
        self.bound()
    }
}

/// An exponential moving average over about `samples` samples.
fn ema(average: f64, sample: f64, samples: f64) -> f64 {
    let weight = 2.0 / (samples + 1.0);
    average + (sample - average) * weight
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: f64 = 1e6;

    /// Feeds `n` samples of `rtt` with the bound fully used, returning the last bound.
    fn run(g: &mut Gradient, n: usize, rtt: f64) -> u32 {
        (0..n).fold(0, |_, _| {
            let in_flight = g.bound();
            g.sample(rtt, in_flight)
        })
    }

    #[test]
    fn a_store_that_keeps_its_latency_earns_the_whole_range() {
        let mut g = Gradient::new(10, 1000);
        assert_eq!(g.bound(), 10);
        assert_eq!(run(&mut g, 2000, 1.0 * MS), 1000);
    }

    #[test]
    fn a_store_that_slows_down_gets_fewer_calls_then_more_again_when_it_recovers() {
        let mut g = Gradient::new(10, 1000);
        run(&mut g, 2000, 1.0 * MS);
        // Calls queue in the store: latency ten times the usual.
        let slowed = run(&mut g, 60, 10.0 * MS);
        assert!(slowed < 100, "the bound fell to {slowed}");
        let recovered = run(&mut g, 2000, 1.0 * MS);
        assert_eq!(recovered, 1000);
    }

    #[test]
    fn latency_within_the_tolerance_does_not_shrink_the_bound() {
        let mut g = Gradient::new(10, 1000);
        run(&mut g, 2000, 1.0 * MS);
        assert_eq!(run(&mut g, 200, 1.4 * MS), 1000);
    }

    #[test]
    fn an_idle_service_does_not_grow_its_bound() {
        let mut g = Gradient::new(10, 1000);
        for _ in 0..1000 {
            g.sample(1.0 * MS, 1);
        }
        assert_eq!(g.bound(), 10);
    }

    #[test]
    fn the_bound_stays_in_its_range_on_any_samples() {
        let mut g = Gradient::new(5, 50);
        for (i, rtt) in [0.0, 1.0, f64::MAX, 1e-9, 3e9, 7.0]
            .iter()
            .cycle()
            .take(600)
            .enumerate()
        {
            let bound = g.sample(*rtt, (i % 80) as u32);
            assert!((5..=50).contains(&bound), "{bound} after {rtt}");
        }
    }
}
