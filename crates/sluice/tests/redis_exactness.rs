//! Exactness under contention: 4 OS processes × 32 tokio tasks hammer one key with limit 1,000
//! (`1000/1d`, so nothing refills during the test). The exact algorithms admit exactly 1,000 in
//! total, every time; `sliding_window` never more than its limit in a window.
//!
//! The parent test re-executes this test binary as the worker processes (the ignored test
//! `exactness_worker`, configured through environment variables); each prints its admitted count.
#![cfg(feature = "redis")]

use sluice::Options;
use std::process::Command;
use std::time::Duration;

use sluice::model::{Algorithm, Limit};
use sluice::{FailPolicy, Limiter, Rule};
use sluice_test_support::RedisServer;

const PROCESSES: usize = 4;
const TASKS: usize = 32;
const ATTEMPTS_PER_TASK: usize = 12;
const LIMIT: u64 = 1000;

#[tokio::test]
async fn four_processes_admit_exactly_the_limit() {
    let server = RedisServer::start();
    let exe = std::env::current_exe().expect("the test binary knows its path");
    for algorithm in Algorithm::ALL {
        let workers: Vec<_> = (0..PROCESSES)
            .map(|_| {
                Command::new(&exe)
                    .args(["--exact", "exactness_worker", "--ignored", "--nocapture"])
                    .env("SLUICE_EXACT_URL", server.url())
                    .env("SLUICE_EXACT_ALGORITHM", algorithm.name())
                    .output()
            })
            .collect();
        let mut admitted = 0;
        for worker in workers {
            let out = worker.expect("the worker process runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "worker failed: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let count: u64 = stdout
                .lines()
                .find_map(|l| l.strip_prefix("admitted="))
                .unwrap_or_else(|| panic!("no count in worker output: {stdout}"))
                .trim()
                .parse()
                .expect("a number");
            admitted += count;
        }
        let attempts = (PROCESSES * TASKS * ATTEMPTS_PER_TASK) as u64;
        assert!(attempts > LIMIT);
        match algorithm {
            // Documented bound: never more than `limit` in any window (all requests fall in one).
            Algorithm::SlidingWindow => {
                assert!(admitted <= LIMIT && admitted > 0, "{algorithm}: {admitted}")
            }
            _ => assert_eq!(admitted, LIMIT, "{algorithm}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of four_processes_admit_exactly_the_limit"]
async fn exactness_worker() {
    let url = std::env::var("SLUICE_EXACT_URL").expect("run by the parent test");
    let algorithm: Algorithm = std::env::var("SLUICE_EXACT_ALGORITHM")
        .expect("run by the parent test")
        .parse()
        .expect("an algorithm name");
    let store = sluice::store::redis::RedisStore::connect(&url, Default::default())
        .await
        .expect("a valid URL");
    let limiter = Limiter::builder(store)
        .rule(
            "hammer",
            Rule::new(vec![Limit::new(&[], "1000/1d".parse().unwrap(), algorithm)]),
        )
        // A degraded decision would not be an answer from Redis: deny those and count them.
        .options(Options {
            fail: FailPolicy::Closed,
            timeout: Duration::from_secs(10),
            ..Options::default()
        })
        .build()
        .unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let limiter = limiter.clone();
        tasks.spawn(async move {
            let (mut admitted, mut degraded) = (0u64, 0u64);
            for _ in 0..ATTEMPTS_PER_TASK {
                let d = limiter.check("hammer", &[("x", "y")]).await.unwrap();
                admitted += u64::from(d.allowed);
                degraded += u64::from(d.degraded);
            }
            (admitted, degraded)
        });
    }
    let (mut admitted, mut degraded) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        let (a, d) = r.expect("no task panics");
        admitted += a;
        degraded += d;
    }
    assert_eq!(degraded, 0, "every decision came from Redis");
    println!("admitted={admitted}");
}
