//! What a `sluice bench` run measured, and its text form (`--json` prints it as it is).

use serde::Serialize;

use crate::stdout::line;

/// What a run measured.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Decisions completed per second of wall time.
    pub decisions_per_sec: f64,
    /// With --rate: the decisions per second offered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offered_per_sec: Option<f64>,
    /// Median latency (µs).
    pub p50_us: f64,
    /// 99th percentile latency (µs).
    pub p99_us: f64,
    /// 99.9th percentile latency (µs).
    pub p999_us: f64,
    /// 99th percentile latency of the decisions that were not errors (µs): what the callers
    /// who got a real answer waited.
    pub p99_answered_us: f64,
    /// Median service time (µs): from a decision's call to its answer, without the wait for its
    /// due time that an open loop's latency counts (the same as the latency in a closed loop).
    pub service_p50_us: f64,
    /// 99th percentile service time (µs).
    pub service_p99_us: f64,
    /// Allowed decisions.
    pub allowed: u64,
    /// Denied decisions.
    pub denied: u64,
    /// Failed calls (errors, degraded decisions).
    pub errors: u64,
    /// What was driven.
    pub target: String,
    /// The algorithm (library mode) or rule (HTTP mode).
    pub algorithm: String,
    /// Tasks.
    pub concurrency: usize,
    /// Keys.
    pub keys: usize,
    /// Seconds run.
    pub duration_s: f64,
    /// With --ceiling: `redis-benchmark`'s rate for the same script, keys and concurrency.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling_per_sec: Option<f64>,
    /// With --ceiling: `decisions_per_sec / ceiling_per_sec`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio_to_ceiling: Option<f64>,
    /// With --batch: units taken in batches, and given back (at the end included).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub batches: Option<BatchTotals>,
}

/// Units a run took in batches and gave back.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct BatchTotals {
    /// Units taken.
    pub taken: u64,
    /// Units given back unspent.
    pub given_back: u64,
}

impl Report {
    /// Prints the report as text.
    pub(super) fn print(&self) -> std::io::Result<()> {
        line(format_args!(
            "{} on {}: {}, {}, {:.1} s",
            self.algorithm,
            self.target,
            crate::validate::counted(self.concurrency, "task", "tasks"),
            crate::validate::counted(self.keys, "key", "keys"),
            self.duration_s
        ))?;
        match self.offered_per_sec {
            Some(offered) => line(format_args!(
                "decisions/s  {:.0} of {offered:.0} offered (open loop: latency from when due)",
                self.decisions_per_sec
            ))?,
            None => line(format_args!("decisions/s  {:.0}", self.decisions_per_sec))?,
        }
        line(format_args!(
            "latency µs   p50 {:.2}   p99 {:.2}   p99.9 {:.2}",
            self.p50_us, self.p99_us, self.p999_us
        ))?;
        if self.offered_per_sec.is_some() {
            line(format_args!(
                "service µs   p50 {:.2}   p99 {:.2}   (from each call, not from when it was due)",
                self.service_p50_us, self.service_p99_us
            ))?;
        }
        line(format_args!(
            "allowed {}   denied {}   errors {}   (p99 of the answered {:.2} µs)",
            self.allowed, self.denied, self.errors, self.p99_answered_us
        ))?;
        if let (Some(ceiling), Some(ratio)) = (self.ceiling_per_sec, self.ratio_to_ceiling) {
            line(format_args!(
                "redis-benchmark on the same script: {ceiling:.0}/s; Sluice reaches {ratio:.2} of it"
            ))?;
        }
        Ok(())
    }
}
