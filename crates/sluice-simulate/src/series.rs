//! Time series of a simulation, per bucket of simulated time: what was offered, admitted, what
//! the exact sliding log admitted, and the largest admitted-in-a-window count seen.
//!
//! Buckets have a fixed length chosen before the run; a trace of unknown length grows the series
//! and [`Series::downsampled`] merges buckets for plotting.

use serde::Serialize;
use sluice::Micros;

/// Per-bucket counts (units).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    /// Bucket length.
    pub bucket_us: Micros,
    /// Units offered.
    pub offered: Vec<u64>,
    /// Units admitted.
    pub admitted: Vec<u64>,
    /// Units the exact sliding log admitted.
    pub exact: Vec<u64>,
    /// The most units admitted in one window (of the limit's length) ending in the bucket.
    pub peak: Vec<u64>,
}

impl Series {
    /// An empty series of `bucket_us` buckets.
    pub fn new(bucket_us: Micros) -> Series {
        Series {
            bucket_us: bucket_us.max(Micros::new(1)),
            ..Series::default()
        }
    }

    /// The index of the bucket holding `at_us`, grown into existence.
    pub fn bucket(&mut self, at_us: Micros) -> usize {
        let i = (at_us / self.bucket_us) as usize;
        if i >= self.offered.len() {
            for v in [
                &mut self.offered,
                &mut self.admitted,
                &mut self.exact,
                &mut self.peak,
            ] {
                v.resize(i + 1, 0);
            }
        }
        i
    }

    /// Mean absolute difference between the admitted and the exact rates (units per second).
    pub fn mean_rate_error(&self) -> f64 {
        if self.admitted.is_empty() {
            return 0.0;
        }
        let total: u64 = self
            .admitted
            .iter()
            .zip(&self.exact)
            .map(|(a, e)| a.abs_diff(*e))
            .sum();
        total as f64 / self.admitted.len() as f64 / self.bucket_us.as_secs_f64()
    }

    /// The series with at most `points` buckets (sums merged, peaks maxed).
    pub fn downsampled(&self, points: usize) -> Series {
        let factor = self.offered.len().div_ceil(points.max(1)).max(1);
        let sum = |v: &[u64]| v.chunks(factor).map(|c| c.iter().sum()).collect();
        Series {
            bucket_us: self.bucket_us * factor as u64,
            offered: sum(&self.offered),
            admitted: sum(&self.admitted),
            exact: sum(&self.exact),
            peak: self
                .peak
                .chunks(factor)
                .map(|c| c.iter().copied().max().unwrap_or(0))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Micros, Series};

    #[test]
    fn buckets_grow_and_merge() {
        let mut s = Series::new(Micros::from_secs(1));
        let i = s.bucket(Micros::new(2_500_000));
        s.admitted[i] += 3;
        s.exact[i] += 1;
        s.peak[i] = 3;
        assert_eq!(s.offered.len(), 3);
        assert!((s.mean_rate_error() - 2.0 / 3.0).abs() < 1e-9);
        let d = s.downsampled(2);
        assert_eq!(d.bucket_us, Micros::from_secs(2));
        assert_eq!(d.admitted, [0, 3]);
        assert_eq!(d.peak, [0, 3]);
    }
}
