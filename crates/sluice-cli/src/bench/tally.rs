//! One benchmark task's tallies: its latencies (all, and those of the decisions that were not
//! errors), its service times, and its counts of allowed, denied and failed decisions.
//!
//! A decision's latency counts from when it was due (open loop) or sent (closed loop); its
//! service time from when it was sent, so it leaves out the wait for the load tool's own pacing
//! (tokio's timer ticks each millisecond) and for a task's earlier decisions.

use std::time::Instant;

use anyhow::Context;
use hdrhistogram::Histogram;

/// One task's tallies.
pub(super) struct Tally {
    pub(super) histogram: Histogram<u64>,
    /// The decisions that were not errors.
    pub(super) answered: Histogram<u64>,
    /// Service times: from each decision's call to its answer.
    pub(super) service: Histogram<u64>,
    pub(super) allowed: u64,
    pub(super) denied: u64,
    pub(super) errors: u64,
    /// When the task made its last decision.
    pub(super) ended: Instant,
}

impl Tally {
    pub(super) fn new() -> anyhow::Result<Tally> {
        Ok(Tally {
            // 1 ns .. 60 s at 2 significant digits (1 %): 30 KB a task. At 3 digits each task's
            // counts took 210 KB, so that recording a latency missed the caches and cost the
            // run's only thread about 4 % of its time.
            histogram: Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .context("histogram bounds are valid")?,
            answered: Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .context("histogram bounds are valid")?,
            service: Histogram::new_with_bounds(1, 60_000_000_000, 2)
                .context("histogram bounds are valid")?,
            allowed: 0,
            denied: 0,
            errors: 0,
            ended: Instant::now(),
        })
    }

    /// Records a decision due at `due`, sent at `sent` and answered now.
    pub(super) fn record(&mut self, due: Instant, sent: Instant, outcome: Option<bool>) {
        let now = Instant::now();
        let ns = |from: Instant| (now - from).as_nanos().max(1) as u64;
        self.histogram.saturating_record(ns(due));
        self.service.saturating_record(ns(sent));
        if outcome.is_some() {
            self.answered.saturating_record(ns(due));
        }
        match outcome {
            Some(true) => self.allowed += 1,
            Some(false) => self.denied += 1,
            None => self.errors += 1,
        }
        self.ended = now;
    }
}
