//! Fault tests: the test's own Redis is stopped (`SIGSTOP`), killed mid-traffic and restarted.
//! Decisions keep coming, marked degraded and decided by each rule's fail policy, instead of
//! waiting for Redis; the breaker then skips Redis; after a restart normal service resumes by
//! itself. Durations below are bounds on real time, never sleeps, and each separates two outcomes
//! by a wide margin (an answer from the fail policy against a wait for a server that is stopped
//! until the test resumes it), so a loaded machine does not change the verdict.
#![cfg(feature = "redis")]

use crate::common;

use sluice::Options;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use common::redis_store;
use sluice::model::{Algorithm, Limit};
use sluice::{Decision, FailPolicy, Limiter, Rule};
use sluice_test_support::RedisServer;

/// The store's deadline: far above what a healthy call takes on a loaded machine, so the
/// decisions the tests expect from Redis are never degraded by a slow moment.
const TIMEOUT: Duration = Duration::from_secs(1);
/// What a decision may take: the deadline and room for a loaded machine, nowhere near the
/// minutes a wait for a stopped Redis would take.
const BOUND: Duration = Duration::from_secs(5);

async fn limiter(server: &RedisServer) -> Limiter {
    let rule = |fail| {
        let mut r = Rule::new(vec![Limit::new(
            &["ip"],
            "2/1m".parse().unwrap(),
            Algorithm::Gcra,
        )]);
        r.fail = Some(fail);
        r
    };
    Limiter::builder(redis_store(server, None).await)
        .rule("open", rule(FailPolicy::Open))
        .rule("closed", rule(FailPolicy::Closed))
        .rule("local", rule(FailPolicy::Local))
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

/// Checks that each policy decides as it should while the store cannot answer.
async fn assert_policies(limiter: &Limiter, ip: &str) {
    let d = timed(limiter, "open", ip).await;
    assert!(d.allowed && d.degraded, "open: {d:?}");
    let d = timed(limiter, "closed", ip).await;
    assert!(!d.allowed && d.degraded, "closed: {d:?}");
    let local: Vec<(bool, bool)> = {
        let mut v = Vec::new();
        for _ in 0..3 {
            let d = timed(limiter, "local", ip).await;
            v.push((d.allowed, d.degraded));
        }
        v
    };
    assert_eq!(local, [(true, true), (true, true), (false, true)], "local");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_times_out_into_the_fail_policy() {
    let server = RedisServer::start();
    let limiter = limiter(&server).await;
    let d = timed(&limiter, "open", "1.1.1.1").await;
    assert!(d.allowed && !d.degraded, "{d:?}");
    // Redis answers nothing until resumed: the calls time out.
    server.pause();
    assert_policies(&limiter, "9.9.9.9").await;
    assert!(
        limiter.store_skipped(),
        "repeated timeouts open the breaker"
    );
    let started = Instant::now();
    let d = limiter.check("open", &[("ip", "1.1.1.1")]).await.unwrap();
    let took = started.elapsed();
    server.resume();
    assert!(d.degraded);
    assert!(took < TIMEOUT / 2, "skipped, not waited on: {took:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_mid_traffic_then_restarted_redis_degrades_and_recovers() {
    let mut server = RedisServer::start();
    let limiter = limiter(&server).await;
    for rule in ["open", "closed", "local"] {
        let d = timed(&limiter, rule, "1.1.1.1").await;
        assert!(d.allowed && !d.degraded, "{rule}: {d:?}");
    }
    // Traffic from 16 tasks while the server dies.
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicUsize::new(0));
    let mut traffic = tokio::task::JoinSet::new();
    for task in 0..16 {
        let limiter = limiter.clone();
        let stop = stop.clone();
        let done = done.clone();
        traffic.spawn(async move {
            let mut degraded = 0;
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let ip = format!("10.0.{task}.{}", n % 200);
                let d = timed(&limiter, "open", &ip).await;
                degraded += usize::from(d.degraded);
                n += 1;
                done.fetch_add(1, Ordering::Relaxed);
                tokio::task::yield_now().await;
            }
            (n, degraded)
        });
    }
    // Let 200 checks through, then kill the server under the traffic.
    while done.load(Ordering::Relaxed) < 200 {
        tokio::task::yield_now().await;
    }
    server.stop();
    assert_policies(&limiter, "9.9.9.9").await;
    stop.store(true, Ordering::Relaxed);
    let (mut total, mut degraded) = (0, 0);
    while let Some(r) = traffic.join_next().await {
        let (n, d) = r.expect("no traffic task panics");
        total += n;
        degraded += d;
    }
    assert!(
        total > degraded && degraded > 0,
        "{total} checks, {degraded} degraded"
    );
    // The breaker is open by now: answers are immediate.
    assert!(limiter.store_skipped());
    let started = Instant::now();
    for _ in 0..100 {
        assert!(
            limiter
                .check("open", &[("ip", "1.1.1.1")])
                .await
                .unwrap()
                .degraded
        );
    }
    assert!(
        started.elapsed() < TIMEOUT,
        "100 skipped checks took {:?}",
        started.elapsed()
    );

    server.restart();
    // The breaker's back-off is at most 0.5 s; service resumes without intervention (the
    // deadline bounds the wait, not the recovery's speed).
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut n = 0;
    let resumed = loop {
        n += 1;
        let d = timed(&limiter, "closed", &format!("20.0.0.{}", n % 250)).await;
        if !d.degraded {
            break d;
        }
        assert!(
            Instant::now() < deadline,
            "Redis is back but decisions still degrade"
        );
        // Poll interval while the breaker backs off, not a wait for the decision's time.
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(resumed.allowed);
    let d = timed(&limiter, "closed", "1.1.1.1").await;
    assert!(d.allowed && !d.degraded, "restarted empty: {d:?}");
    assert_eq!(d.remaining, 1);
}
