//! In-memory decision cost per algorithm, side by side with `governor`'s keyed GCRA, in one run.
//!
//! Workloads: one hot key, and 100k keys visited in turn; each on 1 and 2 threads. Every decision
//! is admitted, as in production where most requests pass, and every key stays live between its
//! visits: the limit is the largest count over the longest window, and a limiter is renewed
//! (outside the timed part) before any key could use up half of it. `sluice_store/*` calls the
//! memory store directly, as the limiter does, with the key's parts (the identities governor is
//! given) and the limit's step: the algorithm, state lookup and locking;
//! `sluice_limiter/*` goes through `Limiter::check` (rule lookup, identity, the full decision)
//! from the request's attributes, polled once: an in-process store answers at once;
//! `sluice_verdict/*` makes the same check through `Limiter::verdict` (the compact answer).

use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use sluice::algorithm::{LimitStep, Mode, Params};
use sluice::model::{Algorithm, Limit, Rate, Rule};
use sluice::store::KeyRef;
use sluice::{Limiter, MemoryStore};

const KEYS: usize = 100_000;
/// The largest count a rate may carry, over the longest window: no sample reaches it.
const COUNT: u64 = sluice::model::MAX_COUNT;
const WINDOW: Duration = sluice::model::MAX_WINDOW;

/// One limit's step as the limiter prepares it: the largest count over the longest window.
fn step(algorithm: Algorithm) -> LimitStep {
    LimitStep {
        algorithm,
        params: Params::new(COUNT, WINDOW.into(), COUNT),
        cost: 1,
        block_us: None,
        penalty: None,
        shadow: false,
        lease: None,
        settable: false,
    }
}

/// Runs `f(i)` for `iters` iterations split over `threads` threads; returns the wall time.
fn run_threads(iters: u64, threads: u64, f: &(dyn Fn(u64) + Sync)) -> Duration {
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                for i in 0..iters / threads {
                    f(i * threads + t);
                }
            });
        }
    });
    start.elapsed()
}

/// Polls a future once: `Limiter::check` on the memory store is ready at once.
fn ready<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("an in-process check does not wait"),
    }
}

/// The state a benchmark decides on, renewed before any key could use up half its count: every
/// decision of every sample is then admitted, and a key once decided stays live. A new state has
/// every key decided once; making states (and dropping them) is never timed.
struct Renewed<S, F, D> {
    state: S,
    keys: usize,
    fresh: F,
    decide: D,
    /// The most decisions any one key has had from the current state.
    used: u64,
}

impl<S: Sync, F: Fn() -> S, D: Fn(&S, usize) + Sync> Renewed<S, F, D> {
    fn new(keys: usize, fresh: F, decide: D) -> Renewed<S, F, D> {
        let state = Self::warm(fresh(), keys, &decide);
        Renewed {
            state,
            keys,
            fresh,
            decide,
            used: 1,
        }
    }

    fn warm(state: S, keys: usize, decide: &D) -> S {
        for key in 0..keys {
            decide(&state, key);
        }
        state
    }

    /// Times `iters` decisions on `threads` threads over the keys in turn. A fast machine's
    /// warm-up asks for more decisions at once than one state admits (tens of millions on the hot
    /// key): they are timed in parts, the state renewed between them.
    fn sample(&mut self, iters: u64, threads: u64) -> Duration {
        let keys = self.keys as u64;
        let mut elapsed = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let part = left.min(COUNT / 2 * keys);
            let per_key = part.div_ceil(keys);
            if self.used + per_key > COUNT / 2 {
                self.state = Self::warm((self.fresh)(), self.keys, &self.decide);
                self.used = 1;
            }
            self.used += per_key;
            let (state, decide) = (&self.state, &self.decide);
            elapsed += run_threads(part, threads, &|i| decide(state, (i % keys) as usize));
            left -= part;
        }
        elapsed
    }
}

fn store_vs_governor(c: &mut Criterion) {
    let rate = Rate::new(COUNT, WINDOW).expect("a valid rate");
    let burst = NonZeroU32::new(COUNT as u32).expect("COUNT is not zero");
    let quota = Quota::with_period(WINDOW / burst.get())
        .expect("a period")
        .allow_burst(burst);
    for (workload, keys) in [("hot_key", 1usize), ("100k_keys", KEYS)] {
        let ids: Vec<String> = (0..keys).map(|i| format!("user={i}")).collect();
        let values: Vec<String> = (0..keys).map(|i| i.to_string()).collect();
        for threads in [1u64, 2] {
            let mut group = c.benchmark_group(format!("{workload}/{threads}_threads"));
            group.throughput(Throughput::Elements(1));

            let mut governor = Renewed::new(
                keys,
                || RateLimiter::keyed(quota),
                |governor, key| assert!(black_box(governor.check_key(&ids[key]).is_ok())),
            );
            group.bench_function("governor_keyed_gcra", |b| {
                b.iter_custom(|iters| governor.sample(iters, threads))
            });

            for algorithm in Algorithm::ALL {
                if algorithm == Algorithm::SlidingLog && keys == 1 {
                    // One hot key would hold millions of entries: measured per key spread only
                    // (its cost is O(log of live entries) anyway).
                    continue;
                }
                let step = step(algorithm);
                let mut store = Renewed::new(keys, MemoryStore::new, |store, key| {
                    let key = KeyRef {
                        rule: "bench",
                        limit_id: "user",
                        identity: &ids[key],
                    };
                    let answer = store.decide_key(key, &step, Mode::Apply);
                    assert!(black_box(answer.is_ok_and(|(_, outcome)| outcome.allowed)));
                });
                group.bench_function(BenchmarkId::new("sluice_store", algorithm), |b| {
                    b.iter_custom(|iters| store.sample(iters, threads))
                });
            }

            for algorithm in [
                Algorithm::Gcra,
                Algorithm::TokenBucket,
                Algorithm::FixedWindow,
            ] {
                let fresh = || {
                    Limiter::builder(MemoryStore::new())
                        .rule(
                            "bench",
                            Rule::new(vec![Limit::new(&["user"], rate, algorithm)]),
                        )
                        .build()
                        .expect("valid rule")
                };
                let mut limiter = Renewed::new(keys, fresh, |limiter, key| {
                    let attrs = [("user", values[key].as_str())];
                    let decision = ready(limiter.check("bench", &attrs));
                    assert!(black_box(decision.is_ok_and(|d| d.allowed)));
                });
                group.bench_function(BenchmarkId::new("sluice_limiter", algorithm), |b| {
                    b.iter_custom(|iters| limiter.sample(iters, threads))
                });
                let mut verdicts = Renewed::new(keys, fresh, |limiter, key| {
                    let attrs = [("user", values[key].as_str())];
                    let verdict = ready(limiter.verdict("bench", &attrs));
                    assert!(black_box(verdict.is_ok_and(|v| v.allowed)));
                });
                group.bench_function(BenchmarkId::new("sluice_verdict", algorithm), |b| {
                    b.iter_custom(|iters| verdicts.sample(iters, threads))
                });
            }
            group.finish();
        }
    }
}

/// A one-limit rule with a condition and three overrides, against the same rule without them,
/// through `Limiter::check` and `Limiter::verdict`: the request carries the attributes the overrides read and falls
/// through all of them (the costliest case). `scripts/tier-instructions` counts the same in
/// instructions.
fn tiers(c: &mut Criterion) {
    let limit = r#""by": ["user"], "rate": "1000000/366d", "algorithm": "gcra""#;
    let overrides = r#""overrides": [
        {"when": {"plan": "pro"}, "rate": "2000000/366d"},
        {"when": {"tenant": ["monitoring", "partner-a", "partner-b"]}, "unlimited": true},
        {"when": {"ip": {"cidr": ["203.0.113.0/24"]}}, "deny": "this range is refused"}]"#;
    let plain = format!(r#"{{"limits": [{{{limit}}}]}}"#);
    let tiered = format!(
        r#"{{"when": {{"method": ["GET", "POST"]}}, "limits": [{{{limit}, {overrides}}}]}}"#
    );
    let values: Vec<String> = (0..KEYS).map(|i| i.to_string()).collect();
    let mut group = c.benchmark_group("tiers/100k_keys/1_threads");
    group.throughput(Throughput::Elements(1));
    for (name, rule) in [("plain", plain), ("condition_and_3_overrides", tiered)] {
        let rule: Rule = serde_json::from_str(&rule).expect("a valid rule");
        let fresh = || {
            Limiter::builder(MemoryStore::new())
                .rule("bench", rule.clone())
                .build()
                .expect("valid rule")
        };
        let attrs = |key: usize| {
            [
                ("method", "GET"),
                ("plan", "free"),
                ("tenant", "t1"),
                ("ip", "198.51.100.7"),
                ("user", values[key].as_str()),
            ]
        };
        let mut limiter = Renewed::new(KEYS, fresh, |limiter, key| {
            let decision = ready(limiter.check("bench", &attrs(key)));
            assert!(black_box(decision.is_ok_and(|d| d.allowed)));
        });
        group.bench_function(BenchmarkId::new("sluice_limiter", name), |b| {
            b.iter_custom(|iters| limiter.sample(iters, 1))
        });
        let mut verdicts = Renewed::new(KEYS, fresh, |limiter, key| {
            let verdict = ready(limiter.verdict("bench", &attrs(key)));
            assert!(black_box(verdict.is_ok_and(|v| v.allowed)));
        });
        group.bench_function(BenchmarkId::new("sluice_verdict", name), |b| {
            b.iter_custom(|iters| verdicts.sample(iters, 1))
        });
    }
    group.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = store_vs_governor, tiers
}
criterion_main!(benches);
