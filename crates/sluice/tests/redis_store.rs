//! Redis-specific behaviour of the Redis store: unique sorted-set members, key layout and expiry,
//! hostile identities, peek, connection and script handling.
#![cfg(feature = "redis")]

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Harness, S, call, redis_store, step};
use sluice::algorithm::Mode;
use sluice::model::{Algorithm, Limit, Penalty};
use sluice::store::redis::{RedisOptions, RedisStore};
use sluice::{Clock, ManualClock, Rule, Store, SystemClock};
use sluice_test_support::RedisServer;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_units_in_one_millisecond_are_a_thousand_members() {
    let h = Harness::redis().await;
    let c = call("log", step(Algorithm::SlidingLog, 1000, 60 * S));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let store = h.store.clone();
        let c = c.clone();
        tasks.spawn(async move {
            let mut admitted = 0;
            for _ in 0..125 {
                let reply = store.decide(std::slice::from_ref(&c), Mode::Apply).await;
                admitted += usize::from(reply.expect("redis answers").outcomes[0].allowed);
            }
            admitted
        });
    }
    let mut admitted = 0;
    while let Some(n) = tasks.join_next().await {
        admitted += n.expect("no task panics");
    }
    assert_eq!(admitted, 1000, "all within the limit, at one instant");
    assert!(!h.one(&c).await.allowed, "the 1,001st is denied");
    let zset = "sluice:r:log:{ip=1}:c";
    assert_eq!(h.server().cli(&["ZCARD", zset]), "1000");
    let scores = h.server().cli(&["ZRANGE", zset, "0", "-1", "WITHSCORES"]);
    let now = h.now_us().to_string();
    assert!(scores.lines().skip(1).step_by(2).all(|s| s == now));
}

/// Every state key with its PTTL, by SCAN.
fn keys_with_pttl(server: &RedisServer) -> Vec<(String, i64)> {
    let keys = server.cli(&["--scan", "--pattern", "*"]);
    keys.lines()
        .map(|k| {
            let pttl = server.cli(&["PTTL", k]).parse().expect("PTTL is a number");
            (k.to_string(), pttl)
        })
        .collect()
}

#[tokio::test]
async fn every_key_expires_exactly_when_it_stops_mattering() {
    let server = RedisServer::start();
    let clock = ManualClock::at_2026();
    let store = RedisStore::connect(
        &server.url(),
        RedisOptions {
            clock: Some(Arc::new(clock.clone())),
            ..RedisOptions::default()
        },
    )
    .await
    .unwrap();
    let window = Duration::from_secs(600);
    let block = Duration::from_secs(900);
    let penalty = Penalty {
        warn_after: 1,
        ban_after: 2,
        ban: Duration::from_secs(1200),
        memory: Duration::from_secs(1800),
    };
    let mut rules = Vec::new();
    for algorithm in Algorithm::ALL {
        let rate = sluice::Rate::new(3, window).unwrap();
        let plain = Limit::new(&["ip"], rate, algorithm);
        let mut blocking = plain.clone().with_block(block);
        blocking.name = Some("blocking".into());
        let mut punishing = plain.clone().with_penalty(penalty);
        punishing.name = Some("punishing".into());
        rules.push((algorithm.name(), Rule::new(vec![plain])));
        rules.push((
            match algorithm {
                Algorithm::SlidingLog => "b-sliding_log",
                Algorithm::SlidingWindow => "b-sliding_window",
                Algorithm::FixedWindow => "b-fixed_window",
                Algorithm::TokenBucket => "b-token_bucket",
                Algorithm::Gcra => "b-gcra",
                Algorithm::LeakyBucket => "b-leaky_bucket",
            },
            Rule::new(vec![blocking, punishing]),
        ));
    }
    let limiter = sluice::Limiter::builder(store)
        .rules(rules.iter().map(|(n, r)| (n.to_string(), r.clone())))
        .clock(Arc::new(clock.clone()))
        .options(sluice::Options {
            timeout: Duration::from_secs(5),
            ..sluice::Options::default()
        })
        .build()
        .unwrap();
    // All traffic at one instant, so every key was last written at `now`.
    let now = clock.now_us();
    for (name, _) in &rules {
        for ip in ["1.1.1.1", "2.2.2.2"] {
            for _ in 0..5 {
                let d = limiter.check(name, &[("ip", ip)]).await.unwrap();
                assert!(!d.degraded);
            }
        }
    }
    let window_us = window.as_micros() as u64;
    let keys = keys_with_pttl(&server);
    // Per algorithm and IP: the plain counter; counter and block; counter, block, violations.
    assert_eq!(keys.len(), 6 * 2 * (1 + 2 + 3), "{keys:?}");
    let mut parts = std::collections::BTreeSet::new();
    for (key, pttl) in &keys {
        assert!(*pttl > 0, "{key} has no expiry ({pttl})");
        let part = key.rsplit(':').next().unwrap();
        parts.insert(part.to_string());
        let rule = key.split(':').nth(1).unwrap();
        let bound = match part {
            // A sliding-window bucket counts up to a tenth of the window longer.
            "c" if rule.ends_with("sliding_window") => window + window / 10,
            "c" => window,
            "b" => block.max(penalty.ban),
            "v" => penalty.memory,
            _ => panic!("unexpected key {key}"),
        };
        assert!(
            *pttl as u128 <= bound.as_millis(),
            "{key}: {pttl} ms > {bound:?}"
        );
        // The key expires when its own content says it stops mattering, to the millisecond
        // (less the real time spent since it was written).
        let value = server.cli(&["GET", key]);
        let level_deadline = |v: &str| {
            let (level, last) = v[1..].split_once(':').unwrap();
            let level: f64 = level.parse().unwrap();
            last.parse::<u64>().unwrap() + (level * window_us as f64 / 3.0).ceil() as u64
        };
        let deadline_us: u64 = match (part, rule) {
            ("b", _) => value.parse().unwrap(),
            ("v", _) => value.split(':').nth(1).unwrap().parse().unwrap(),
            (_, r) if r.ends_with("gcra") => value[1..].parse().unwrap(),
            (_, r) if r.ends_with("fixed_window") => {
                let start: u64 = value[1..].split(':').next().unwrap().parse().unwrap();
                start + window_us
            }
            (_, r) if r.ends_with("token_bucket") || r.ends_with("leaky_bucket") => {
                level_deadline(&value)
            }
            (_, r) if r.ends_with("sliding_log") => {
                let newest = server.cli(&["ZRANGE", key, "-1", "-1", "WITHSCORES"]);
                newest.lines().nth(1).unwrap().parse::<u64>().unwrap() + window_us
            }
            (_, r) if r.ends_with("sliding_window") => {
                let fields = server.cli(&["HKEYS", key]);
                let newest: u64 = fields
                    .lines()
                    .map(|f| f.parse::<u64>().unwrap())
                    .max()
                    .unwrap();
                (newest + 11) * (window_us / 10)
            }
            _ => panic!("unexpected key {key}"),
        };
        let exact_ms = (deadline_us - now).div_ceil(1000) as i64;
        assert!(*pttl <= exact_ms, "{key}: {pttl} ms > {exact_ms} ms");
        assert!(
            *pttl >= exact_ms - 5_000,
            "{key}: {pttl} ms, expected {exact_ms} ms"
        );
    }
    assert_eq!(parts.into_iter().collect::<Vec<_>>(), ["b", "c", "v"]);
    // Lifting a block deletes it and the violations; a reset deletes everything of an identity.
    let blocked = limiter.blocks("b-gcra").await.unwrap();
    assert_eq!(blocked.len(), 4, "{blocked:?}");
    assert!(
        limiter
            .unblock("b-gcra", &[("ip", "1.1.1.1")])
            .await
            .unwrap()
    );
    let left = server.cli(&["--scan", "--pattern", "sluice:b-gcra:*:{ip=1.1.1.1}:*"]);
    assert_eq!(
        left.lines().filter(|k| !k.ends_with(":c")).count(),
        0,
        "{left}"
    );
    limiter.reset("b-gcra", &[("ip", "2.2.2.2")]).await.unwrap();
    let left = server.cli(&["--scan", "--pattern", "sluice:b-gcra:*:{ip=2.2.2.2}:*"]);
    assert_eq!(left, "");
}

#[tokio::test]
async fn expiries_are_whole_milliseconds_rounded_up() {
    let h = Harness::redis().await;
    // A fresh store without the test floor on expiries.
    let store = RedisStore::connect(
        &h.server().url(),
        RedisOptions {
            clock: Some(Arc::new(h.clock.clone())),
            prefix: "exact".into(),
            ..RedisOptions::default()
        },
    )
    .await
    .unwrap();
    // 3 per 10 s: GCRA's tat is 3,333,334 µs ahead, which is kept 3,334 ms (rounded up).
    let c = call("g", step(Algorithm::Gcra, 3, 10 * S));
    store
        .decide(std::slice::from_ref(&c), Mode::Apply)
        .await
        .unwrap();
    let pttl: i64 = h
        .server()
        .cli(&["PTTL", "exact:r:g:{ip=1}:c"])
        .parse()
        .unwrap();
    assert!((3000..=3334).contains(&pttl), "{pttl}");
}

#[tokio::test]
async fn hostile_identities_cannot_break_their_key_or_collide() {
    let h = Harness::redis().await;
    let limiter = h.limiter(vec![(
        "login",
        Rule::new(vec![
            Limit::new(&["user"], "1/1h".parse().unwrap(), Algorithm::Gcra)
                .with_block(Duration::from_secs(60)),
        ]),
    )]);
    let long_a = format!("{}a", "x".repeat(100));
    let long_b = format!("{}b", "x".repeat(100));
    let huge = "{}:".repeat(3500);
    let values = [
        "{", "}", ":", "a:b", "{a}", "}{", "a}:{b", "*", "a b", "é", &long_a, &long_b, &huge,
    ];
    for v in values {
        let attrs = [("user", v)];
        assert!(
            limiter.check("login", &attrs).await.unwrap().allowed,
            "{v:.20}"
        );
    }
    for v in values {
        let attrs = [("user", v)];
        let d = limiter.check("login", &attrs).await.unwrap();
        assert!(!d.allowed && d.blocked_until_ms.is_some(), "{v:.20}");
    }
    let keys = h.server().cli(&["--scan", "--pattern", "*"]);
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(
        keys.len(),
        values.len() * 2,
        "one counter and one block each"
    );
    for key in &keys {
        assert!(key.len() < 120, "{key}");
        assert_eq!(key.matches('{').count(), 1, "{key}");
        assert_eq!(key.matches('}').count(), 1, "{key}");
        let (head, tail) = key.split_once('{').unwrap();
        assert_eq!(head, "sluice:login:user-gcra-1h:");
        let (identity, part) = tail.split_once('}').unwrap();
        assert!(!identity.contains(':'));
        assert!(part == ":c" || part == ":b");
    }
    let blocks = limiter.blocks("login").await.unwrap();
    assert_eq!(blocks.len(), values.len());
}

#[tokio::test]
async fn peek_writes_nothing() {
    let h = Harness::redis().await;
    let changes = |h: &Harness| {
        let info = h.server().cli(&["INFO", "persistence"]);
        info.lines()
            .find_map(|l| l.strip_prefix("rdb_changes_since_last_save:"))
            .expect("INFO persistence reports changes")
            .trim()
            .parse::<u64>()
            .unwrap()
    };
    let mut calls = Vec::new();
    for (i, algorithm) in Algorithm::ALL.into_iter().enumerate() {
        let mut s = step(algorithm, 2, 60 * S);
        s.block_us = Some(S);
        s.penalty = Some(sluice::algorithm::penalty::Params {
            warn_after: 1,
            ban_after: 3,
            ban_us: S,
            memory_us: 60 * S,
        });
        calls.push(sluice::store::LimitCall {
            key: common::key(&format!("l{i}"), "ip=1"),
            step: s,
        });
    }
    for _ in 0..3 {
        h.decide(&calls[..3], Mode::Apply).await;
        h.decide(&calls[3..], Mode::Apply).await;
    }
    let before = changes(&h);
    assert!(before > 0);
    for _ in 0..5 {
        let reply = h.decide(&calls, Mode::Peek).await;
        assert!(reply.outcomes.iter().all(|o| !o.allowed));
        h.advance_us(S / 2);
    }
    assert_eq!(changes(&h), before, "peeks wrote nothing");
}

#[tokio::test]
async fn connect_returns_at_once_when_redis_is_down() {
    let port = sluice_test_support::free_port();
    let started = Instant::now();
    let store = RedisStore::connect(
        &format!("redis://127.0.0.1:{port}/"),
        RedisOptions::default(),
    )
    .await
    .expect("connecting does not wait for Redis");
    assert!(started.elapsed() < Duration::from_millis(200));
    let c = call("x", step(Algorithm::Gcra, 1, S));
    let err = store
        .decide(std::slice::from_ref(&c), Mode::Apply)
        .await
        .expect_err("nobody listens");
    assert!(err.transient, "{err}");
    assert!(store.ping().await.is_err());
    let bad = RedisStore::connect(
        "redis+cluster://:pw@127.0.0.1:7000/3",
        RedisOptions::default(),
    )
    .await
    .expect_err("a Cluster has no databases");
    assert!(!bad.transient);
    assert!(
        bad.message.contains("no databases") && !bad.message.contains("pw@"),
        "{bad}"
    );
    assert!(
        RedisStore::connect("nonsense", RedisOptions::default())
            .await
            .is_err()
    );
}

#[tokio::test]
async fn scripts_are_reloaded_after_a_flush() {
    let h = Harness::redis().await;
    let c = call("x", step(Algorithm::SlidingWindow, 2, S));
    assert!(h.one(&c).await.allowed);
    assert_eq!(h.server().cli(&["SCRIPT", "FLUSH"]), "OK");
    assert!(h.one(&c).await.allowed);
    assert!(!h.one(&c).await.allowed);
    h.store.ping().await.unwrap();
}

#[tokio::test]
async fn time_comes_from_redis_by_default() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let c = call("t", step(Algorithm::TokenBucket, 5, S));
    let reply = store
        .decide(std::slice::from_ref(&c), Mode::Apply)
        .await
        .unwrap();
    let local = SystemClock.now_us();
    assert!(
        reply.now_us.abs_diff(local) < 5 * S,
        "{} vs {local}",
        reply.now_us
    );
    let until = store
        .block(&c.key, Duration::from_micros(10 * S))
        .await
        .unwrap();
    assert!(until.abs_diff(local + 10 * S) < 5 * S);
    assert_eq!(store.blocks("r").await.unwrap()[0].until_us, until);
    assert!(store.unblock(&c.key).await.unwrap());
}
