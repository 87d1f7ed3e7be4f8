//! In-memory decision cost per algorithm, side by side with `governor`'s keyed GCRA, in one run.
//!
//! Workloads: one hot key, and 100k keys visited in turn; each on 1 and 2 threads. The default
//! limit lets nearly every decision through, as in production where most requests pass.
//! `sluice_store/*` calls the memory store directly with a prepared request (the algorithm, state
//! lookup and locking); `sluice_limiter/*` goes through `Limiter::check` (rule lookup, identity,
//! decision) from the request's attributes, polled once: an in-process store answers at once.

use std::future::Future;
use std::hint::black_box;
use std::num::NonZeroU32;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use governor::{Quota, RateLimiter};
use sluice::algorithm::{LimitStep, Mode, Params};
use sluice::model::{Algorithm, Limit, Name, Rule};
use sluice::store::{LimitCall, LimitKey};
use sluice::{Limiter, MemoryStore, Micros};

const KEYS: usize = 100_000;
/// 10 million per second: effectively always allowed.
const RATE: u64 = 10_000_000;

/// A prepared request as the limiter builds it: the rule and limit names are interned, the
/// identity is the request's own.
fn call(algorithm: Algorithm, names: &(Name, Name), identity: String) -> LimitCall {
    LimitCall {
        key: LimitKey {
            rule: names.0.clone(),
            limit_id: names.1.clone(),
            identity,
        },
        step: LimitStep {
            algorithm,
            params: Params::new(RATE, Micros::from_secs(1), RATE),
            cost: 1,
            block_us: None,
            penalty: None,
            shadow: false,
            lease: None,
        },
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

fn store_vs_governor(c: &mut Criterion) {
    let rate = format!("{RATE}/1s").parse().expect("a valid rate");
    for (workload, keys) in [("hot_key", 1usize), ("100k_keys", KEYS)] {
        let ids: Vec<String> = (0..keys).map(|i| format!("user={i}")).collect();
        let values: Vec<String> = (0..keys).map(|i| i.to_string()).collect();
        for threads in [1u64, 2] {
            let mut group = c.benchmark_group(format!("{workload}/{threads}_threads"));
            group.throughput(Throughput::Elements(1));

            let governor = RateLimiter::keyed(Quota::per_second(
                NonZeroU32::new(RATE as u32).expect("RATE is not zero"),
            ));
            group.bench_function("governor_keyed_gcra", |b| {
                b.iter_custom(|iters| {
                    run_threads(iters, threads, &|i| {
                        black_box(governor.check_key(&ids[i as usize % keys]).is_ok());
                    })
                })
            });

            for algorithm in Algorithm::ALL {
                if algorithm == Algorithm::SlidingLog && keys == 1 {
                    // One hot key would hold millions of entries per second: measured per key
                    // spread only (its cost is O(log of live entries) anyway).
                    continue;
                }
                let store = MemoryStore::new();
                let names = (Name::interned("bench"), Name::interned("user"));
                let calls: Vec<LimitCall> = ids
                    .iter()
                    .map(|id| call(algorithm, &names, id.clone()))
                    .collect();
                group.bench_function(BenchmarkId::new("sluice_store", algorithm), |b| {
                    b.iter_custom(|iters| {
                        run_threads(iters, threads, &|i| {
                            let _ =
                                black_box(store.decide_one(&calls[i as usize % keys], Mode::Apply));
                        })
                    })
                });
            }

            for algorithm in [
                Algorithm::Gcra,
                Algorithm::TokenBucket,
                Algorithm::FixedWindow,
            ] {
                let limiter = Limiter::builder(MemoryStore::new())
                    .rule(
                        "bench",
                        Rule::new(vec![Limit::new(&["user"], rate, algorithm)]),
                    )
                    .build()
                    .expect("valid rule");
                group.bench_function(BenchmarkId::new("sluice_limiter", algorithm), |b| {
                    b.iter_custom(|iters| {
                        run_threads(iters, threads, &|i| {
                            let attrs = [("user", values[i as usize % keys].as_str())];
                            let decision = ready(limiter.check("bench", &attrs));
                            black_box(decision.expect("valid request").allowed);
                        })
                    })
                });
            }
            group.finish();
        }
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(20);
    targets = store_vs_governor
}
criterion_main!(benches);
