//! Bytes per key of each algorithm's Redis state, by `MEMORY USAGE <key> SAMPLES 0`. Ignored by
//! default (it measures, it does not check); the figures are in the Redis store's module docs and
//! the book's capacity-planning chapter (`docs/src/operations/capacity.md`):
//! `cargo test -p sluice-ratelimit --all-features --test it redis_memory:: -- --ignored --nocapture`.
#![cfg(feature = "redis")]

use crate::common;

use sluice::Options;
use std::sync::Arc;
use std::time::Duration;

use sluice::model::{Algorithm, Limit, Penalty};
use sluice::{Limiter, ManualClock, Rule};
use sluice_test_support::RedisServer;

#[tokio::test]
#[ignore = "prints measurements"]
async fn memory_usage_per_algorithm() {
    let server = RedisServer::start();
    let clock = ManualClock::at_2026();
    let store = common::redis_store(&server, Some(clock.clone())).await;
    let mut rules = Vec::new();
    for algorithm in Algorithm::ALL {
        rules.push((
            "login".to_string(),
            Rule::new(vec![
                Limit::new(&["ip"], "1000/1m".parse().unwrap(), algorithm).with_penalty(Penalty {
                    warn_after: 1,
                    ban_after: 1,
                    ban: Duration::from_secs(60),
                    memory: Duration::from_secs(3600),
                }),
            ]),
        ));
    }
    println!(
        "{}",
        server
            .cli(&["INFO", "server"])
            .lines()
            .find(|l| l.starts_with("redis_version"))
            .unwrap()
    );
    let usage = |key: &str| server.cli(&["MEMORY", "USAGE", key, "SAMPLES", "0"]);
    for (_, rule) in rules {
        let algorithm = rule.limits[0].algorithm;
        let limiter = Limiter::builder(store.clone())
            .rule("login", rule)
            .clock(Arc::new(clock.clone()))
            .options(Options {
                timeout: Duration::from_secs(5),
                ..Options::default()
            })
            .build()
            .unwrap();
        let attrs = [("ip", "203.0.113.9")];
        let call = limiter.keys("login", &attrs).unwrap().remove(0);
        let key = sluice::store::redis::KeyNames::new("sluice", &call).state;
        let mut report = Vec::new();
        for (done, target) in [(0, 1), (1, 11), (11, 100), (100, 1000)] {
            for i in done..target {
                if algorithm == Algorithm::SlidingWindow {
                    // One bucket per 6 s: spread the first 11 units over 11 buckets.
                    if i < 11 {
                        clock.advance(Duration::from_secs(6));
                    }
                }
                limiter.check("login", &attrs).await.unwrap();
            }
            report.push(format!("{target} units: {} B", usage(&key)));
        }
        println!("{algorithm}: {}", report.join(", "));
        if algorithm == Algorithm::Gcra {
            // A denial records a violation and bans.
            limiter.check("login", &attrs).await.unwrap();
            println!(
                "block marker: {} B, parked state: {} B, block: {} B, violations: {} B",
                usage(&key),
                usage(&format!("{key}:h")),
                usage(&sluice::store::redis::KeyNames::new("sluice", &call).block),
                usage(&sluice::store::redis::KeyNames::new("sluice", &call).violations)
            );
        }
    }
}
