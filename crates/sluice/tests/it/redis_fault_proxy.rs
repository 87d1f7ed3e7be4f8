//! Broken connections between the limiter and Redis, made by a proxy in between
//! ([`FaultProxy`]): every connection reset, a stall, replies delayed past the timeout, a reply
//! cut in the middle, a blackhole, replies one byte at a time. For each fault:
//! - every decision is answered within the limiter's timeout plus scheduling slack, by the rule's
//!   fail policy (`open` admits, `closed` refuses, both marked degraded);
//! - once the fault ends, Redis decides again within [`RECOVERY`] with no intervention (the
//!   breaker's back-off and a new connection where the old one broke);
//! - then 4 processes × 32 tasks through the same proxy admit exactly the limit (`1000/1d` on one
//!   key): nothing the fault did lets a later decision over-admit.
//!
//! A request that reached Redis before its reply was lost (a cut, a stall that ends) was still
//! counted there while its caller got the fail policy's answer: a fault can make Redis count more
//! than it admitted, never the reverse. Durations are bounds on real time, never sleeps.
#![cfg(feature = "redis")]

use crate::common;

use std::process::Command;
use std::time::{Duration, Instant};

use sluice::model::{Algorithm, Limit};
use sluice::store::redis::{RedisOptions, RedisStore};
use sluice::{Decision, FailPolicy, Limiter, Options, Rule};
use sluice_test_support::{Fault, FaultProxy, RedisServer};

const TIMEOUT: Duration = Duration::from_millis(100);
const BOUND: Duration = Duration::from_millis(400);
/// How soon after a fault ends Redis decides again: the breaker's longest back-off (500 ms) and
/// a reconnection, with room for a loaded machine.
const RECOVERY: Duration = Duration::from_secs(3);
const PROCESSES: usize = 4;
const TASKS: usize = 32;
const ATTEMPTS_PER_TASK: usize = 12;
const LIMIT: u64 = 1000;

async fn store(url: &str, prefix: &str) -> RedisStore {
    RedisStore::connect(
        url,
        RedisOptions {
            prefix: prefix.to_string(),
            ..RedisOptions::default()
        },
    )
    .await
    .expect("a valid URL")
}

async fn limiter(url: &str, algorithm: Algorithm) -> Limiter {
    let rule = |fail| {
        let mut r = Rule::new(vec![Limit::new(
            &["ip"],
            "1000/1d".parse().unwrap(),
            algorithm,
        )]);
        r.fail = Some(fail);
        r
    };
    Limiter::builder(store(url, &common::unique_prefix()).await)
        .rule("open", rule(FailPolicy::Open))
        .rule("closed", rule(FailPolicy::Closed))
        .options(Options {
            timeout: TIMEOUT,
            ..Options::default()
        })
        .build()
        .unwrap()
}

/// A check with its real duration, which must stay under the bound.
async fn timed(limiter: &Limiter, rule: &str, ip: &str) -> Decision {
    let started = Instant::now();
    let d = limiter.check(rule, &[("ip", ip)]).await.unwrap();
    let took = started.elapsed();
    assert!(took < BOUND, "{rule} took {took:?}");
    d
}

/// Runs `fault` through its three stages, the limits counted by `algorithm`.
async fn fault_then_recovery_then_exactness(fault: Fault, algorithm: Algorithm) {
    let server = RedisServer::start();
    let proxy = FaultProxy::start(server.port());
    let limiter = limiter(&proxy.redis_url(), algorithm).await;
    // The first decisions load the scripts, which on a busy machine can take longer than the
    // timeout: Redis must decide before the fault, however soon.
    decided_by_redis_within(&limiter, RECOVERY, &format!("{fault:?}, before")).await;

    proxy.set(fault);
    for n in 0..4 {
        let d = timed(&limiter, "open", &format!("2.0.0.{n}")).await;
        assert!(d.allowed && d.degraded, "{fault:?}, open: {d:?}");
        let d = timed(&limiter, "closed", &format!("3.0.0.{n}")).await;
        assert!(!d.allowed && d.degraded, "{fault:?}, closed: {d:?}");
    }

    proxy.set(Fault::None);
    let ended = Instant::now();
    decided_by_redis_within(&limiter, RECOVERY, &format!("{fault:?}, after")).await;
    println!(
        "{fault:?}: decided by Redis {:?} after the fault",
        ended.elapsed()
    );

    let admitted = run_workers(&proxy.redis_url(), &common::unique_prefix(), algorithm);
    assert_eq!(admitted, LIMIT, "{fault:?}, {algorithm}: exact afterwards");
}

/// Polls until a decision comes from Redis (not the fail policy), failing after `within`.
async fn decided_by_redis_within(limiter: &Limiter, within: Duration, what: &str) {
    let started = Instant::now();
    for n in 0u32.. {
        let d = timed(
            limiter,
            "closed",
            &format!("4.{}.{}.{}", n / 62500, n / 250 % 250, n % 250),
        )
        .await;
        if !d.degraded {
            assert!(d.allowed, "{what}: {d:?}");
            return;
        }
        assert!(
            started.elapsed() < within,
            "{what}: decisions still degrade"
        );
        // Poll interval while the breaker backs off, not a wait for the decision's time.
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_connections() {
    fault_then_recovery_then_exactness(Fault::Reset, Algorithm::Gcra).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_connection() {
    fault_then_recovery_then_exactness(Fault::Stall, Algorithm::TokenBucket).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_delayed_past_the_timeout() {
    let delay = Fault::Delay(Duration::from_millis(300));
    fault_then_recovery_then_exactness(delay, Algorithm::FixedWindow).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_cut_in_the_middle() {
    fault_then_recovery_then_exactness(Fault::CutReply, Algorithm::SlidingLog).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blackhole() {
    fault_then_recovery_then_exactness(Fault::Blackhole, Algorithm::Gcra).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_one_byte_at_a_time() {
    let trickle = Fault::Trickle(Duration::from_millis(30));
    fault_then_recovery_then_exactness(trickle, Algorithm::LeakyBucket).await;
}

/// The name libtest knows `function` of this file by, wherever the file sits in its test binary.
fn test_name(function: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{function}"),
        None => function.to_string(),
    }
}

/// Runs the worker processes through `url` and sums what they admitted.
fn run_workers(url: &str, prefix: &str, algorithm: Algorithm) -> u64 {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", &test_name("fault_exactness_worker")])
                .args(["--ignored", "--nocapture"])
                .env("SLUICE_FAULT_URL", url)
                .env("SLUICE_FAULT_PREFIX", prefix)
                .env("SLUICE_FAULT_ALGORITHM", algorithm.name())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("the worker process starts")
        })
        .collect();
    workers
        .into_iter()
        .map(|worker| {
            let out = worker.wait_with_output().expect("the worker process runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "worker failed: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
                .lines()
                .find_map(|l| l.strip_prefix("admitted="))
                .unwrap_or_else(|| panic!("no count in worker output: {stdout}"))
                .trim()
                .parse::<u64>()
                .expect("a number")
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of the tests above"]
async fn fault_exactness_worker() {
    let var = |name: &str| std::env::var(name).expect("run by the parent test");
    let algorithm: Algorithm = var("SLUICE_FAULT_ALGORITHM").parse().expect("a name");
    let store = store(&var("SLUICE_FAULT_URL"), &var("SLUICE_FAULT_PREFIX")).await;
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
                let d = limiter.check("hammer", &[("ip", "any")]).await.unwrap();
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
