//! Quotas on Redis' own clock: a quota counts until its period ends by Redis' time, in the key of
//! its period without reading TIME, and a quota alone is decided by its own script. (The scripts
//! answering a period that does not hold Redis' time are tested with the store's own units.)
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::{redis_now, redis_store};
use sluice::model::{Limit, Period, PeriodUnit};
use sluice::{Limiter, Options, Rule};
use sluice_test_support::{RedisServer, decision_keys};

fn limiter(store: sluice::store::redis::RedisStore, period: Period) -> Limiter {
    Limiter::builder(Arc::new(store))
        .rules([(
            "plan".to_string(),
            Rule::new(vec![Limit::quota(&["tenant"], 2, period)]),
        )])
        .options(Options {
            timeout: Duration::from_secs(5),
            ..Options::default()
        })
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_quota_counts_until_its_period_ends_by_redis_time() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let period = Period::new(PeriodUnit::Day)
        .in_zone("Pacific/Auckland")
        .unwrap();
    let limiter = limiter(store, period.clone());
    let attributes = [("tenant", "t1")];
    let first = limiter.check("plan", &attributes).await.unwrap();
    let bounds = period.bounds_at(redis_now(&server));
    assert!(first.allowed);
    assert_eq!(first.limits[0].remaining, 1);
    // The key ends with the day in Auckland, to the millisecond.
    let keys = decision_keys(&server.cli(&["KEYS", "sluice:*"]));
    assert_eq!(keys.len(), 1, "{keys:?}");
    let expiry_ms: u64 = server.cli(&["PEXPIRETIME", &keys[0]]).parse().unwrap();
    assert_eq!(expiry_ms, bounds.end.as_millis());
    // In the key of its period, a quota is counted without reading TIME: the key ends with the
    // period, so Redis' time is in it.
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let second = limiter.check("plan", &attributes).await.unwrap();
    assert!(second.allowed);
    assert_eq!(second.limits[0].remaining, 0);
    let denied = limiter.check("plan", &attributes).await.unwrap();
    assert!(!denied.allowed);
    assert_eq!(
        ["evalsha", "decrby", "pttl", "incrby", "time", "fcall"].map(|c| server.command_calls(c)),
        [2, 2, 2, 1, 0, 0],
        "counted, then the denial undone"
    );
    assert_eq!(
        server.cli(&["GET", &keys[0]]).parse::<i64>().unwrap() % (1 << 25),
        -2,
        "two counted"
    );
    let retry_ms = denied.retry_after_ms.unwrap();
    let left_ms = (bounds.end - redis_now(&server)).as_millis();
    assert!(
        retry_ms >= left_ms && retry_ms <= left_ms + 60_000,
        "{retry_ms} ms to wait, {left_ms} ms left of the day"
    );
}

#[tokio::test]
async fn a_quota_alone_never_needs_the_general_decision() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let limiter = limiter(store.clone(), Period::new(PeriodUnit::Month));
    let command = store
        .command_for(&limiter, "plan", &[("tenant", "t1")])
        .unwrap();
    assert_eq!(
        command[0], "EVALSHA",
        "a quota alone is decided by the quota script"
    );
    assert_eq!(command.len(), 4, "its numbers are written in: {command:?}");
    // The first decision loads the script of this quota and period (NOSCRIPT, SCRIPT LOAD).
    let first = limiter.check("plan", &[("tenant", "t1")]).await.unwrap();
    assert!(first.allowed && first.limits[0].remaining == 1);
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let second = limiter.check("plan", &[("tenant", "t1")]).await.unwrap();
    assert!(second.allowed && second.limits[0].remaining == 0);
    assert!(
        !limiter
            .check("plan", &[("tenant", "t1")])
            .await
            .unwrap()
            .allowed
    );
    assert_eq!(
        ["evalsha", "fcall", "script|load", "time"].map(|c| server.command_calls(c)),
        [2, 0, 0, 0]
    );
}

/// A rule of two quotas, or of a quota beside a rate, is decided by its rule script, written for
/// the period that holds the node's clock, at the cost of its one-limit parts together.
#[tokio::test]
async fn a_rule_with_quotas_is_decided_by_its_rule_script() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let day = Period::new(PeriodUnit::Day)
        .in_zone("Asia/Kolkata")
        .unwrap();
    let month = Period::new(PeriodUnit::Month).anchored(31).unwrap();
    let limiter = Limiter::builder(Arc::new(store.clone()))
        .rules([
            (
                "plan".to_string(),
                Rule::new(vec![
                    Limit::quota(&["tenant"], 3, day.clone()),
                    Limit::quota(&["tenant"], 2, month.clone()),
                ]),
            ),
            (
                "paced".to_string(),
                Rule::new(vec![
                    Limit::new(
                        &["tenant"],
                        "100/1s".parse().unwrap(),
                        sluice::Algorithm::Gcra,
                    ),
                    Limit::quota(&["tenant"], 1, day.clone()),
                ]),
            ),
        ])
        .options(Options {
            timeout: Duration::from_secs(5),
            ..Options::default()
        })
        .build()
        .unwrap();
    let attributes = [("tenant", "t1")];
    let command = store.command_for(&limiter, "plan", &attributes).unwrap();
    assert_eq!(command[0], "EVALSHA", "{command:?}");
    let first = limiter.check("plan", &attributes).await.unwrap();
    assert!(first.allowed);
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let second = limiter.check("plan", &attributes).await.unwrap();
    assert!(second.allowed);
    let third = limiter.check("plan", &attributes).await.unwrap();
    assert!(!third.allowed, "the month's 2 are used");
    assert_eq!(
        ["evalsha", "fcall", "time"].map(|c| server.command_calls(c)),
        [2, 0, 1],
        "the rule script, never the general decision; the admission counted in its periods' \
         keys without the time, the denial undone and decided on it"
    );
    assert_eq!(
        third.limits.iter().map(|l| l.remaining).collect::<Vec<_>>(),
        [1, 0]
    );
    let now = redis_now(&server);
    let (day_end, month_end) = (day.bounds_at(now).end, month.bounds_at(now).end);
    assert!(third.limits[0].reset_after_ms <= (day_end - now).as_millis() + 1000);
    assert!(third.limits[1].reset_after_ms <= (month_end - now).as_millis() + 1000);
    assert!(third.retry_after_ms.unwrap() + 1000 >= (month_end - now).as_millis());
    assert!(limiter.check("paced", &attributes).await.unwrap().allowed);
    assert!(!limiter.check("paced", &attributes).await.unwrap().allowed);
    assert_eq!(server.command_calls("fcall"), 0);
    // Each key ends with its period.
    let keys = decision_keys(&server.cli(&["KEYS", "sluice:*"]));
    let mut ends: Vec<u64> = keys
        .iter()
        .filter_map(|k| server.cli(&["PEXPIRETIME", k]).parse().ok())
        .filter(|&ms: &u64| ms > now.as_millis() + 2_000)
        .collect();
    ends.sort();
    ends.dedup();
    assert!(
        ends.contains(&day_end.as_millis()) && ends.contains(&month_end.as_millis()),
        "{ends:?}"
    );
}

/// Tasks racing on a rule of two quotas, on Redis' own time, from the first count of their
/// periods: exactly the smaller quota is admitted.
#[tokio::test]
async fn a_rule_of_quotas_is_exact_under_concurrency() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let limiter = Limiter::builder(Arc::new(store))
        .rules([(
            "plan".to_string(),
            Rule::new(vec![
                Limit::quota(&["tenant"], 50, Period::new(PeriodUnit::Day)),
                Limit::quota(
                    &["tenant"],
                    100,
                    Period::new(PeriodUnit::Month)
                        .in_zone("Europe/Berlin")
                        .unwrap(),
                ),
            ]),
        )])
        .options(Options {
            timeout: Duration::from_secs(5),
            ..Options::default()
        })
        .build()
        .unwrap();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let limiter = limiter.clone();
            tokio::spawn(async move {
                let mut admitted = 0;
                for _ in 0..20 {
                    let d = limiter.check("plan", &[("tenant", "t1")]).await.unwrap();
                    assert!(!d.degraded, "{d:?}");
                    admitted += u32::from(d.allowed);
                }
                admitted
            })
        })
        .collect();
    let mut admitted = 0;
    for t in tasks {
        admitted += t.await.unwrap();
    }
    assert_eq!(admitted, 50);
    assert_eq!(server.command_calls("fcall"), 0, "the rule script decided");
}

/// Reading usage is one round trip: one call of the general decision, which looks and writes
/// nothing.
#[tokio::test]
async fn a_usage_read_is_one_call_that_writes_nothing() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let limiter = limiter(store, Period::new(PeriodUnit::Month));
    let attributes = [("tenant", "t1")];
    assert!(limiter.check("plan", &attributes).await.unwrap().allowed);
    let before = server.cli(&[
        "DUMP",
        &decision_keys(&server.cli(&["KEYS", "sluice:*"]))[0],
    ]);
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let usage = limiter.usage("plan", &attributes).await.unwrap();
    assert_eq!((usage.limits[0].used, usage.limits[0].remaining), (1, 1));
    // One call, whose script reads (GET, TIME) and writes nothing.
    assert_eq!(
        ["fcall", "evalsha", "get", "time"].map(|c| server.command_calls(c)),
        [1, 0, 1, 1]
    );
    for write in ["set", "decrby", "incrby", "del", "pexpire", "pexpireat"] {
        assert_eq!(server.command_calls(write), 0, "{write}");
    }
    let key = &decision_keys(&server.cli(&["KEYS", "sluice:*"]))[0];
    assert_eq!(server.cli(&["DUMP", key]), before, "nothing written");
}
