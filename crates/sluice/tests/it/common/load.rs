//! Decisions running under load while a test breaks the store: every decision's time, duration
//! and whether it was degraded, for failover tests to measure against, and how late the runtime
//! ran its tasks meanwhile (on a busy machine, every decision is late by as much, whatever the
//! store did: the bounds allow for it).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice::Limiter;

/// One decision made under load.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When it finished.
    pub at: Instant,
    /// How long it took.
    pub took: Duration,
    /// Whether the fail policy answered it.
    pub degraded: bool,
}

/// Tasks checking `rule` in a loop until stopped.
pub struct Load {
    stop: Arc<AtomicBool>,
    samples: Arc<Mutex<Vec<Sample>>>,
    /// The most a 10 ms sleep overran, in µs.
    lag_us: Arc<AtomicU64>,
    tasks: tokio::task::JoinSet<()>,
}

/// What a load saw once stopped.
pub struct Seen {
    /// Every decision, in time order.
    pub samples: Vec<Sample>,
    /// The most the runtime was late to wake a task.
    pub lag: Duration,
}

impl Load {
    /// Starts `tasks` tasks, each checking `rule` for identity `ip` over and over.
    pub fn start(limiter: &Limiter, rule: &'static str, ip: &'static str, tasks: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let samples = Arc::new(Mutex::new(Vec::new()));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            let (limiter, stop, samples) = (limiter.clone(), stop.clone(), samples.clone());
            set.spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let started = Instant::now();
                    let d = limiter.check(rule, &[("ip", ip)]).await.unwrap();
                    let at = Instant::now();
                    samples.lock().unwrap().push(Sample {
                        at,
                        took: at - started,
                        degraded: d.degraded,
                    });
                    // Leave the runtime to the test's other work between decisions.
                    tokio::task::yield_now().await;
                }
            });
        }
        let lag_us = Arc::new(AtomicU64::new(0));
        let (stop_ticks, lag) = (stop.clone(), lag_us.clone());
        set.spawn(async move {
            let tick = Duration::from_millis(10);
            while !stop_ticks.load(Ordering::Relaxed) {
                let before = Instant::now();
                tokio::time::sleep(tick).await;
                let late = before.elapsed().saturating_sub(tick);
                lag.fetch_max(late.as_micros() as u64, Ordering::Relaxed);
            }
        });
        Load {
            stop,
            samples,
            lag_us,
            tasks: set,
        }
    }

    /// Polls until `n` decisions have been made (or 10 s passed).
    pub async fn made(&self, n: usize) {
        self.poll(|samples| samples.len() >= n).await;
    }

    /// Polls until the decisions of the last `quiet` were all exact (or `within` passed).
    pub async fn exact_for(&self, quiet: Duration) {
        self.poll(|samples| {
            let last = samples.iter().map(|s| s.at).max();
            let last_degraded = samples.iter().filter(|s| s.degraded).map(|s| s.at).max();
            match (last, last_degraded) {
                (Some(last), Some(d)) => last > d && last - d >= quiet,
                (Some(_), None) => true,
                _ => false,
            }
        })
        .await;
    }

    async fn poll(&self, done: impl Fn(&[Sample]) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !done(&self.samples.lock().unwrap()) && Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops the tasks and returns what they saw.
    pub async fn stop(mut self) -> Seen {
        self.stop.store(true, Ordering::Relaxed);
        while self.tasks.join_next().await.is_some() {}
        let mut samples = std::mem::take(&mut *self.samples.lock().unwrap());
        samples.sort_by_key(|s| s.at);
        Seen {
            samples,
            lag: Duration::from_micros(self.lag_us.load(Ordering::Relaxed)),
        }
    }
}

/// The first decision after `t` from which on every decision is exact (not degraded).
pub fn exact_again_after(samples: &[Sample], t: Instant) -> Option<Instant> {
    let last_degraded = samples.iter().rposition(|s| s.degraded);
    let from = last_degraded.map_or(0, |i| i + 1);
    samples[from..].first().map(|s| s.at.max(t))
}

/// The longest decision.
pub fn slowest(samples: &[Sample]) -> Duration {
    samples.iter().map(|s| s.took).max().unwrap_or_default()
}

/// Checks what a failover test saw against the bounds of the issue — some decisions degraded,
/// none slower than the timeout plus slack, every decision exact again within 1 s of the new
/// primary taking writes, each bound widened by how late the runtime ran — and prints the
/// figures for the record.
pub fn check_failover(
    name: &str,
    seen: &Seen,
    (killed_at, writable_at): (Instant, Instant),
    timeout: Duration,
    not_ready: &dyn std::fmt::Debug,
) {
    let (samples, lag) = (&seen.samples[..], seen.lag);
    let degraded = samples.iter().filter(|s| s.degraded).count();
    let recovered = samples
        .iter()
        .rfind(|s| s.degraded)
        .map_or(Duration::ZERO, |s| {
            s.at.saturating_duration_since(writable_at)
        });
    eprintln!(
        "{name} failover: replica took writes {:?} after the kill; decisions exact again {:?} \
         after that; {degraded} of {} decisions degraded; slowest decision {:?}; readiness while \
         down: {not_ready:?}; the runtime ran up to {lag:?} late",
        writable_at - killed_at,
        recovered,
        samples.len(),
        slowest(samples),
    );
    assert!(degraded > 0, "the kill was noticed");
    assert!(
        slowest(samples) < timeout + Duration::from_millis(150) + lag,
        "every decision within the timeout: {:?}",
        slowest(samples)
    );
    assert!(
        recovered < Duration::from_secs(1) + lag,
        "exact again within 1 s of the new primary taking writes: {recovered:?}"
    );
}

/// Checks `rule` for identity `ip` twice its `limit` times: exactly `limit` admitted, none
/// degraded.
pub async fn admits_exactly(limiter: &Limiter, rule: &str, ip: &str, limit: u32) {
    let mut admitted = 0;
    for _ in 0..2 * limit {
        let d = limiter.check(rule, &[("ip", ip)]).await.unwrap();
        assert!(!d.degraded, "{d:?}");
        admitted += u32::from(d.allowed);
    }
    assert_eq!(admitted, limit);
}
