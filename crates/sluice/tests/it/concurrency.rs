//! Exactness under concurrency on the memory store: 16 threads hammering one key never admit
//! more than the limit on the exact algorithms, a multi-limit rule never over-admits either, and
//! threads taking and releasing leases never hold more than a concurrency limit at once.

use sluice::Check;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice::model::{Algorithm, Limit, Rule};
use sluice::{Limiter, ManualClock, MemoryStore};

const THREADS: usize = 16;
const ATTEMPTS_PER_THREAD: usize = 250;

fn hammer(limiter: &Limiter, rule: &str, attrs: &'static [(&'static str, &'static str)]) -> u64 {
    let admitted = Arc::new(AtomicU64::new(0));
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            let limiter = limiter.clone();
            let admitted = admitted.clone();
            scope.spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("a current-thread runtime builds without I/O drivers");
                runtime.block_on(async {
                    for _ in 0..ATTEMPTS_PER_THREAD {
                        let d = limiter.check(rule, attrs).await.expect("valid request");
                        if d.allowed {
                            admitted.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            });
        }
    });
    admitted.load(Ordering::Relaxed)
}

/// Rule `hot`: 1000 per day per user. The clock is fixed: nothing refills or slides during the
/// run, so exactly `limit` may pass.
fn hot_key_limiter(algorithm: Algorithm) -> Limiter {
    Limiter::builder(MemoryStore::with_clock(Arc::new(ManualClock::at_2026())))
        .rule(
            "hot",
            Rule::new(vec![Limit::new(
                &["user"],
                "1000/1d".parse().unwrap(),
                algorithm,
            )]),
        )
        .build()
        .unwrap()
}

#[test]
fn sixteen_threads_never_admit_more_than_the_limit() {
    for algorithm in [
        Algorithm::SlidingLog,
        Algorithm::FixedWindow,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::LeakyBucket,
        Algorithm::Concurrency,
    ] {
        let admitted = hammer(&hot_key_limiter(algorithm), "hot", &[("user", "u1")]);
        assert_eq!(admitted, 1000, "{algorithm}");
    }
}

#[test]
fn sliding_window_stays_within_its_bound_under_contention() {
    let limiter = hot_key_limiter(Algorithm::SlidingWindow);
    assert_eq!(hammer(&limiter, "hot", &[("user", "u1")]), 1000);
}

#[test]
fn multi_limit_rules_are_all_or_nothing_under_contention() {
    // Two limits over different keys (and likely different shards): the request passes only if
    // both allow, so the tighter one bounds admissions and the looser one counts exactly those.
    let clock = ManualClock::at_2026();
    let limiter = Limiter::builder(MemoryStore::with_clock(Arc::new(clock)))
        .rule(
            "pair",
            Rule::new(vec![
                Limit::new(&["member"], "700/1d".parse().unwrap(), Algorithm::Gcra),
                Limit::new(&["ip"], "1000/1d".parse().unwrap(), Algorithm::SlidingLog),
            ]),
        )
        .build()
        .unwrap();
    let admitted = hammer(&limiter, "pair", &[("member", "m1"), ("ip", "10.0.0.1")]);
    assert_eq!(admitted, 700);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let peek = runtime
        .block_on(limiter.check_with(
            "pair",
            &[("member", "m2"), ("ip", "10.0.0.1")],
            Check::cost(1).peek(),
        ))
        .unwrap();
    // The IP limit consumed exactly the 700 admitted requests, nothing for the denied ones.
    assert_eq!(peek.limits[1].remaining, 300);
}

#[test]
fn threads_holding_leases_never_exceed_the_concurrency_limit() {
    const LIMIT: u64 = 4;
    const TURNS: u64 = 50;
    let limiter = Limiter::builder(MemoryStore::with_clock(Arc::new(ManualClock::at_2026())))
        .rule(
            "jobs",
            Rule::new(vec![Limit::concurrency(
                &["tenant"],
                LIMIT,
                std::time::Duration::from_secs(60),
            )]),
        )
        .build()
        .unwrap();
    let (held, most, admitted) = (AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0));
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            let (limiter, held, most, admitted) = (&limiter, &held, &most, &admitted);
            scope.spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .build()
                    .expect("a current-thread runtime builds without I/O drivers");
                runtime.block_on(async {
                    let mut turns = 0;
                    while turns < TURNS {
                        let d = limiter.check("jobs", &[("tenant", "t1")]).await.unwrap();
                        let Some(lease) = d.lease else {
                            std::thread::yield_now();
                            continue;
                        };
                        turns += 1;
                        admitted.fetch_add(1, Ordering::Relaxed);
                        let now = held.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::yield_now();
                        held.fetch_sub(1, Ordering::SeqCst);
                        assert!(limiter.release(&lease).await.unwrap());
                    }
                });
            });
        }
    });
    let most = most.load(Ordering::SeqCst);
    assert!((1..=LIMIT).contains(&most), "{most} leases held at once");
    assert_eq!(admitted.load(Ordering::Relaxed), THREADS as u64 * TURNS);
}
