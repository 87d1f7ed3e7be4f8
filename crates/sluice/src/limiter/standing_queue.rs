//! A queue that cannot grow old: the decisions that have waited in the service longer than a
//! target, while such waits stand, are answered at once by their rule's fail policy instead of
//! asking a remote store.
//!
//! A decision's *sojourn* is the time from its request's arrival, which the caller states with
//! [`arrived`] (the service: when the connection hands it the request), to the moment the
//! decision would ask the store. A queue that forms and drains (a burst) shows sojourns that
//! dip below the target; a queue that stands (more arrives than is answered) shows none. So the
//! test is CoDel's: when no decision has waited at most [`QueueLimit::target`] for a whole
//! [`QueueLimit::interval`] (the minimum sojourn over the interval is above the target), the
//! queue stands, and each decision that has waited longer than the target is shed: answered by
//! its rule's fail policy, degraded, with `reason: "queue"` ([`REASON`]), and counted in
//! `sluice_queue_shed_decisions_total`. Shedding answers in microseconds, so the queue drains,
//! the next sojourns fall below the target, and the shedding ends.
//!
//! Invariants: nothing is shed while the queue drains at least once per interval (below
//! capacity it always does), nor a decision that waited at most the target; a shed decision
//! makes no store call and never feeds the breaker (the store did not fail); checks outside
//! [`arrived`], and checks on an in-process store (its answer costs less than the fail
//! policy's), are never shed, and pay one task-local read on the remote path only.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::time::Instant;

tokio::task_local! {
    static ARRIVED: Instant;
}

/// The reason a decision shed from a standing queue carries.
pub const REASON: &str = "queue";

/// The store error a shed decision is answered from (it names no failure of the store).
pub(crate) const SHED: &str = "shed: a standing queue in the service";

/// Runs `checks` as the work of a request that arrived at `at`.
pub fn arrived<F: Future>(at: Instant, checks: F) -> impl Future<Output = F::Output> {
    ARRIVED.scope(at, checks)
}

/// How long a decision may wait in the service ([`Options::queue`](super::Options::queue)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimit {
    /// The wait a decision is shed past, while the queue stands.
    pub target: Duration,
    /// How long every wait must stay above `target` for the queue to stand.
    pub interval: Duration,
}

impl QueueLimit {
    /// CoDel's figures: 5 ms, over 100 ms.
    pub const DEFAULT: QueueLimit = QueueLimit {
        target: Duration::from_millis(5),
        interval: Duration::from_millis(100),
    };
}

impl Default for QueueLimit {
    fn default() -> QueueLimit {
        QueueLimit::DEFAULT
    }
}

/// The standing-queue test of one limiter.
#[derive(Debug)]
pub(crate) struct StandingQueue {
    limit: Option<QueueLimit>,
    /// The instant `above_since` counts from.
    epoch: Instant,
    /// Nanoseconds from `epoch`, plus one, since when every sojourn has been above the target;
    /// 0 when the last one was not.
    above_since: AtomicU64,
    /// When the last sojourn above the target was seen (the same count): a gap longer than the
    /// interval with no decision at all is no evidence of a queue, and starts a new interval.
    last_above: AtomicU64,
}

impl StandingQueue {
    pub(crate) fn new(limit: Option<QueueLimit>) -> StandingQueue {
        StandingQueue {
            limit,
            epoch: Instant::now(),
            above_since: AtomicU64::new(0),
            last_above: AtomicU64::new(0),
        }
    }

    /// The sojourn of the request being decided, when it is shed from a standing queue; `None`
    /// when it is decided (or outside [`arrived`]).
    pub(crate) fn shed_now(&self) -> Option<Duration> {
        self.limit?;
        let arrived = ARRIVED.try_with(|at| *at).ok()?;
        self.shed(arrived, Instant::now())
    }

    /// Whether a decision that arrived at `arrived`, about to ask the store at `now`, is shed:
    /// its sojourn, if so.
    pub(crate) fn shed(&self, arrived: Instant, now: Instant) -> Option<Duration> {
        let limit = self.limit?;
        let sojourn = now.saturating_duration_since(arrived);
        if sojourn <= limit.target {
            if self.above_since.load(Ordering::Relaxed) != 0 {
                self.above_since.store(0, Ordering::Relaxed);
            }
            return None;
        }
        let now_ns = u64::try_from(now.saturating_duration_since(self.epoch).as_nanos())
            .unwrap_or(u64::MAX - 1)
            + 1;
        let interval = u64::try_from(limit.interval.as_nanos()).unwrap_or(u64::MAX);
        let last = self.last_above.swap(now_ns, Ordering::Relaxed);
        let since = self.above_since.load(Ordering::Relaxed);
        if since == 0 || now_ns.saturating_sub(last) > interval {
            // Racing decisions agree within their own sojourns: whichever stores last wins.
            self.above_since.store(now_ns, Ordering::Relaxed);
            return None;
        }
        (now_ns.saturating_sub(since) >= interval).then_some(sojourn)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn queue() -> (StandingQueue, Instant) {
        let q = StandingQueue::new(Some(QueueLimit::DEFAULT));
        let epoch = q.epoch;
        (q, epoch)
    }

    /// Decisions every `every`, each having waited `sojourn(i)`, for `total`: how many were shed.
    fn run(
        q: &StandingQueue,
        start: Instant,
        every: Duration,
        total: Duration,
        sojourn: impl Fn(u32) -> Duration,
    ) -> usize {
        let n = (total.as_nanos() / every.as_nanos()) as u32;
        (0..n)
            .filter(|&i| {
                let now = start + every * i;
                q.shed(now - sojourn(i), now).is_some()
            })
            .count()
    }

    #[test]
    fn a_queue_that_stands_longer_than_the_interval_is_shed() {
        let (q, t0) = queue();
        // Every decision has waited 20 ms, one every 10 µs, for a second.
        let shed = run(
            &q,
            t0,
            Duration::from_micros(10),
            Duration::from_secs(1),
            |_| 20 * MS,
        );
        // The first 100 ms are the interval's evidence; everything after is shed.
        assert_eq!(shed, 90_000);
        let end = t0 + Duration::from_secs(1);
        assert_eq!(q.shed(end - 20 * MS, end), Some(20 * MS));
        // After a silence longer than the interval, a long wait is no evidence of a queue.
        let later = end + Duration::from_secs(1);
        assert_eq!(q.shed(later - 20 * MS, later), None);
    }

    #[test]
    fn the_shedding_ends_with_the_first_wait_below_the_target() {
        let (q, t0) = queue();
        run(&q, t0, MS, 200 * MS, |_| 10 * MS);
        let t = t0 + 200 * MS;
        assert!(q.shed(t - 10 * MS, t).is_some(), "standing");
        assert_eq!(q.shed(t - MS, t), None, "a short wait is never shed");
        assert_eq!(
            q.shed(t - 10 * MS, t),
            None,
            "the queue drained: a new interval starts"
        );
    }

    #[test]
    fn nothing_is_shed_below_capacity() {
        let (q, t0) = queue();
        // Below capacity, waits rise and fall, mostly under the target, and whatever the
        // longest of them (a burst of 50 ms), the queue drains within each interval.
        let below = |i: u32| match i % 1000 {
            0..=899 => Duration::from_micros(u64::from(i % 7) * 500),
            n => Duration::from_micros(u64::from(n - 899) * 500),
        };
        let shed = run(
            &q,
            t0,
            Duration::from_micros(50),
            Duration::from_secs(10),
            below,
        );
        assert_eq!(shed, 0);
        // A burst that lasts nearly an interval, all above the target, is not shed either.
        let burst = |i: u32| if i < 9_900 { 40 * MS } else { MS };
        let t1 = t0 + Duration::from_secs(20);
        let shed = run(
            &q,
            t1,
            Duration::from_micros(10),
            Duration::from_secs(1),
            burst,
        );
        assert_eq!(shed, 0);
    }

    #[test]
    fn without_a_limit_nothing_is_shed() {
        let q = StandingQueue::new(None);
        let t = q.epoch + Duration::from_secs(10);
        assert_eq!(q.shed(q.epoch, q.epoch + 200 * MS), None);
        assert_eq!(q.shed(q.epoch, t), None);
    }

    #[tokio::test(start_paused = true)]
    async fn the_sojourn_counts_from_the_arrival_stated() {
        let q = StandingQueue::new(Some(QueueLimit::DEFAULT));
        assert_eq!(q.shed_now(), None, "outside `arrived`, nothing is shed");
        let t0 = Instant::now();
        arrived(t0, async {
            tokio::time::advance(10 * MS).await;
            assert_eq!(
                q.shed_now(),
                None,
                "the first wait above the target starts the interval"
            );
            tokio::time::advance(100 * MS).await;
            assert_eq!(q.shed_now(), Some(110 * MS));
        })
        .await;
    }
}
