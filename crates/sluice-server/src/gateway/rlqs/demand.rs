//! What the proxies connected to this server asked for, per bucket, and the share of the bucket's
//! allowance each gets ([`super::fair_share::max_min`] over the demands still alive).
//!
//! A proxy's demand is what it last reported for the bucket (requests allowed plus denied,
//! scaled to one report interval). It counts until the assignment made from it would have
//! expired (`assignment_ttl` after the report) or until its stream ends, whichever is first: a
//! proxy that stops reporting loses its share then, and the others get it at their next report.
//!
//! This table is a cache of who is asking, not the state of the limit: the units behind every
//! assignment are taken from the store's shared counter (see [`super::assign`]), so a server
//! that restarts with an empty table cannot hand out more than the store grants.
//!
//! Bounds: one entry per (bucket, stream), and a stream holds at most
//! [`super::MAX_BUCKETS_PER_STREAM`] buckets, so the table holds at most
//! `MAX_STREAMS × MAX_BUCKETS_PER_STREAM` entries; a bucket no stream reports any more is
//! forgotten.

use std::collections::HashMap;

use parking_lot::Mutex;

use super::bucket_id::BucketKey;
use super::fair_share::max_min;

/// One stream's last report on a bucket.
#[derive(Debug, Clone, Copy)]
struct Asked {
    demand: u64,
    at_us: u64,
}

/// One stream's report on a bucket, as [`Demands::share`] takes it.
#[derive(Debug, Clone, Copy)]
pub struct Ask {
    /// The stream reporting.
    pub stream: u64,
    /// What it asked for, per report interval.
    pub demand: u64,
    /// When, in microseconds since the epoch.
    pub now_us: u64,
    /// How long a demand counts after it was reported.
    pub ttl_us: u64,
    /// The bucket's allowance for one interval, to be shared.
    pub pool: u64,
}

/// The demands of one server's streams, by domain and bucket.
#[derive(Debug, Default)]
pub struct Demands {
    buckets: Mutex<HashMap<(String, BucketKey), HashMap<u64, Asked>>>,
}

impl Demands {
    /// Records a stream's demand on a bucket and returns its share of the pool: max-min fair
    /// among the demands reported within the time to live (this one included).
    pub fn share(&self, domain: &str, bucket: &BucketKey, ask: Ask) -> u64 {
        let Ask {
            stream,
            demand,
            now_us,
            ttl_us,
            pool,
        } = ask;
        let mut buckets = self.buckets.lock();
        let key = (domain.to_string(), bucket.clone());
        let asking = buckets.entry(key).or_default();
        asking.insert(
            stream,
            Asked {
                demand,
                at_us: now_us,
            },
        );
        asking.retain(|_, a| now_us < a.at_us.saturating_add(ttl_us));
        let mut streams: Vec<(u64, u64)> = asking.iter().map(|(&s, a)| (s, a.demand)).collect();
        streams.sort_unstable();
        let demands: Vec<u64> = streams.iter().map(|&(_, d)| d).collect();
        let shares = max_min(pool, &demands);
        streams
            .iter()
            .zip(shares)
            .find_map(|(&(s, _), share)| (s == stream).then_some(share))
            .unwrap_or(0)
    }

    /// Forgets `stream`'s demand on a bucket (its stream ended, or the bucket was abandoned).
    pub fn forget(&self, domain: &str, bucket: &BucketKey, stream: u64) {
        let mut buckets = self.buckets.lock();
        let key = (domain.to_string(), bucket.clone());
        if let Some(asking) = buckets.get_mut(&key) {
            asking.remove(&stream);
            if asking.is_empty() {
                buckets.remove(&key);
            }
        }
    }

    /// How many buckets some stream is asking for.
    pub fn buckets(&self) -> usize {
        self.buckets.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(stream: u64, demand: u64, now_us: u64) -> Ask {
        Ask {
            stream,
            demand,
            now_us,
            ttl_us: 10,
            pool: 100,
        }
    }

    fn bucket() -> BucketKey {
        [("tenant".to_string(), "t1".to_string())].into()
    }

    #[test]
    fn a_silent_stream_loses_its_share_at_the_ttl() {
        let d = Demands::default();
        let b = bucket();
        assert_eq!(d.share("edge", &b, ask(1, 100, 0)), 100);
        // Stream 2 asks as much: they split.
        assert_eq!(d.share("edge", &b, ask(2, 100, 5)), 50);
        // Stream 1 has not reported since 0: at 10 its demand is gone.
        assert_eq!(d.share("edge", &b, ask(2, 100, 10)), 100);
    }

    #[test]
    fn forgetting_the_last_stream_forgets_the_bucket() {
        let d = Demands::default();
        let b = bucket();
        d.share("edge", &b, ask(1, 5, 0));
        assert_eq!(d.buckets(), 1);
        d.forget("edge", &b, 1);
        assert_eq!(d.buckets(), 0);
    }
}
