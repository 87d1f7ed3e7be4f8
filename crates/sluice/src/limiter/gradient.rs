//! `Gradient`: an adaptive bound on store calls in flight, from their latency (the gradient
//! controller of Envoy's adaptive concurrency filter).
//!
//! The bound follows the ratio of the store's round trip with no queue in front of it (the
//! *minimum round trip*) to its round trip now. The minimum is measured, not remembered as a
//! long-run average: an average drifts up to meet a queue that stands long enough, and then
//! takes that queue for the store's usual speed. So:
//!
//! - **the minimum is measured at a pinned bound**: now and then (every [`PROBE_EVERY`] calls,
//!   jittered so that the nodes of a fleet do not all probe the same store at once, and at once
//!   when the bound has fallen to its floor, where a stale minimum would keep it) the bound drops
//!   to `min` until [`WINDOW`] calls have ended, and the median of their round trips is the new
//!   minimum;
//! - **between probes**, every [`WINDOW`] calls the median round trip is compared with the
//!   minimum plus a [`BUFFER`] (the jitter a store that keeps up shows); the bound is scaled by
//!   that ratio, clamped to [½, 2] per window, plus a headroom of its square root, so that it
//!   keeps probing upward while the store keeps its speed and halves at most once per window
//!   when calls start to queue.
//!
//! Invariants: the bound stays within `[min, max]`; it grows only while the calls in flight use
//! at least half of it (a quiet service gives no evidence the store could take more); it is pure
//! arithmetic on the samples given (their count is its clock), allocates nothing and costs
//! a sort of [`WINDOW`] numbers once per [`WINDOW`] calls.

/// How much slower than its measured minimum the store may answer before the bound shrinks.
const BUFFER: f64 = 0.5;
/// Calls per update of the bound, and per measurement of the minimum.
const WINDOW: usize = 64;
/// Calls between two measurements of the minimum, before jitter (± a quarter).
const PROBE_EVERY: u64 = 100_000;
/// The most a window may scale the bound by, down ([`MIN_GRADIENT`]) or up.
const MIN_GRADIENT: f64 = 0.5;
const MAX_GRADIENT: f64 = 2.0;

/// The adaptive bound and what it is computed from.
#[derive(Debug, Clone)]
pub(crate) struct Gradient {
    min: f64,
    max: f64,
    /// The bound between probes; during a probe the bound in force is `min`.
    bound: f64,
    /// The store's round trip with no queue (ns); 0 until first measured.
    min_rtt_ns: f64,
    probing: bool,
    /// Round trips of the window (or probe) under way.
    window: [f64; WINDOW],
    len: usize,
    /// The most calls in flight seen during the window.
    busiest: u32,
    /// Calls until the next probe.
    until_probe: u64,
    /// The jitter's state (xorshift).
    seed: u64,
}

impl Gradient {
    /// Starts at `min` with a probe: a store that was never measured is trusted with the floor.
    pub(crate) fn new(min: u32, max: u32) -> Gradient {
        let (min, max) = (f64::from(min.max(1)), f64::from(max.max(min.max(1))));
        Gradient {
            min,
            max,
            bound: min,
            min_rtt_ns: 0.0,
            probing: true,
            window: [0.0; WINDOW],
            len: 0,
            busiest: 0,
            until_probe: 0,
            seed: 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// The bound in force now.
    pub(crate) fn bound(&self) -> u32 {
        if self.probing {
            self.min as u32
        } else {
            self.bound as u32
        }
    }

    /// Takes one finished call's round trip, ended while `in_flight` calls (this one included)
    /// were waiting, and returns the bound in force.
    pub(crate) fn sample(&mut self, rtt_ns: f64, in_flight: u32) -> u32 {
        // Within 1 ns and 1,000 s, so no ratio can overflow.
        let rtt_ns = if rtt_ns.is_nan() {
            1e12
        } else {
            rtt_ns.clamp(1.0, 1e12)
        };
        self.window[self.len] = rtt_ns;
        self.len += 1;
        self.busiest = self.busiest.max(in_flight);
        self.until_probe = self.until_probe.saturating_sub(1);
        if self.len < WINDOW {
            return self.bound();
        }
        let median = self.median();
        let busy = f64::from(self.busiest) * 2.0 >= self.bound;
        (self.len, self.busiest) = (0, 0);
        if self.probing {
            self.min_rtt_ns = median;
            self.probing = false;
            self.until_probe = self.jittered(PROBE_EVERY);
            return self.bound();
        }
        let gradient =
            (self.min_rtt_ns * (1.0 + BUFFER) / median).clamp(MIN_GRADIENT, MAX_GRADIENT);
        let mut next = self.bound * gradient + self.bound.sqrt();
        if !busy {
            next = next.min(self.bound);
        }
        self.bound = next.clamp(self.min, self.max);
        if self.until_probe == 0 || self.bound <= self.min {
            self.probing = true;
        }
        self.bound()
    }

    /// The median of the full window (its order is not kept).
    fn median(&mut self) -> f64 {
        let (_, median, _) = self
            .window
            .select_nth_unstable_by(WINDOW / 2, f64::total_cmp);
        *median
    }

    /// `calls` ± a quarter, from the jitter's next number.
    fn jittered(&mut self, calls: u64) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let quarter = calls / 4;
        calls - quarter + self.seed % (2 * quarter + 1)
    }
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
        let slowed = run(&mut g, 4 * WINDOW, 10.0 * MS);
        assert!(slowed < 100, "the bound fell to {slowed}");
        let recovered = run(&mut g, 2000, 1.0 * MS);
        assert_eq!(recovered, 1000);
    }

    /// A store that answers in 1 ms up to 200 calls at once and queues the rest: the bound
    /// settles near what it takes without a queue, however long the load lasts, instead of
    /// growing until the queue it lets stand is the norm.
    #[test]
    fn the_bound_settles_near_what_the_store_takes_without_a_queue() {
        let rtt = |in_flight: u32| (f64::from(in_flight) / 200.0).max(1.0) * MS;
        let mut g = Gradient::new(10, 4000);
        for round in 0..2_000 {
            let in_flight = g.bound();
            let bound = g.sample(rtt(in_flight), in_flight);
            if round > 1_000 {
                assert!(bound <= 600, "the bound grew to {bound} behind a queue");
            }
        }
        for _ in 0..1_000_000 {
            let in_flight = g.bound();
            let bound = g.sample(rtt(in_flight), in_flight);
            assert!(bound <= 600, "the bound grew to {bound} behind a queue");
        }
        assert!(g.bound >= 150.0, "the bound fell to {}", g.bound);
    }

    #[test]
    fn latency_within_the_buffer_does_not_shrink_the_bound() {
        let mut g = Gradient::new(10, 1000);
        run(&mut g, 2000, 1.0 * MS);
        assert_eq!(run(&mut g, 2000, 1.4 * MS), 1000);
    }

    #[test]
    fn the_minimum_is_measured_again_at_the_floor() {
        let mut g = Gradient::new(10, 1000);
        run(&mut g, 2000, 1.0 * MS);
        // The store becomes slower for good (another network path): once the bound has fallen
        // to its floor, the minimum is measured again and the bound grows back.
        run(&mut g, 10 * WINDOW, 4.0 * MS);
        assert_eq!(run(&mut g, 4000, 4.0 * MS), 1000);
    }

    #[test]
    fn a_probe_pins_the_bound_to_its_floor_then_gives_it_back() {
        let mut g = Gradient::new(10, 1000);
        run(&mut g, 2000, 1.0 * MS);
        g.until_probe = 1;
        assert_eq!(run(&mut g, WINDOW, 1.0 * MS), 10, "probing at the floor");
        assert_eq!(run(&mut g, WINDOW, 1.0 * MS), 1000, "the bound from before");
        assert!(
            (3 * PROBE_EVERY / 4 - WINDOW as u64..=5 * PROBE_EVERY / 4).contains(&g.until_probe)
        );
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
        for (i, rtt) in [0.0, 1.0, f64::MAX, 1e-9, 3e9, 7.0, f64::NAN]
            .iter()
            .cycle()
            .take(6000)
            .enumerate()
        {
            let bound = g.sample(*rtt, (i % 80) as u32);
            assert!((5..=50).contains(&bound), "{bound} after {rtt}");
        }
    }
}
