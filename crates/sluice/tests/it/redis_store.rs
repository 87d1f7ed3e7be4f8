//! Redis-specific behaviour of the Redis store: unique sorted-set members, key layout and expiry,
//! hostile identities, peek, connection and script handling.
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

/// One page large enough for every listing of this file.
const PAGE: sluice::store::BlocksCursor = sluice::store::BlocksCursor {
    after: None,
    count: 1000,
};

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{Harness, S, call, redis_store, step};
use sluice::algorithm::Mode;
use sluice::model::{Algorithm, Limit, Penalty};
use sluice::store::redis::{KeyNames, RedisOptions, RedisStore};
use sluice::{Clock, ManualClock, Micros, Rule, Store, SystemClock};
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
    let zset = &KeyNames::new("sluice", &c.key).state;
    assert_eq!(h.server().cli(&["ZCARD", zset]), "1000");
    let scores = h.server().cli(&["ZRANGE", zset, "0", "-1", "WITHSCORES"]);
    let now = h.now_us().get().to_string();
    assert!(scores.lines().skip(1).step_by(2).all(|s| s == now));
}

/// Every key but the key format's marker (the one key without an expiry), by SCAN.
fn keys_but_the_format(server: &RedisServer) -> Vec<String> {
    sluice_test_support::decision_keys(&server.cli(&["--scan", "--pattern", "*"]))
}

/// Every state key with its PTTL, by SCAN.
fn keys_with_pttl(server: &RedisServer) -> Vec<(String, i64)> {
    keys_but_the_format(server)
        .into_iter()
        .map(|k| {
            let pttl = server.cli(&["PTTL", &k]).parse().expect("PTTL is a number");
            (k, pttl)
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
                Algorithm::Concurrency => "b-concurrency",
                other => panic!("{other:?}: give it a rule here"),
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
    // All traffic at one instant, so every key was last written at `now`. Raw µs: the keys'
    // contents are compared with it.
    let now = clock.now_us().get();
    for (name, _) in &rules {
        for ip in ["1.1.1.1", "2.2.2.2"] {
            for _ in 0..5 {
                let d = limiter.check(name, &[("ip", ip)]).await.unwrap();
                assert!(!d.degraded);
            }
        }
    }
    let window_us = Micros::from(window).get();
    // Which algorithm each state key belongs to (state keys are named by a hash of rule and limit).
    let mut algorithms = std::collections::HashMap::new();
    for (name, rule) in &rules {
        for ip in ["1.1.1.1", "2.2.2.2"] {
            let keys_of = limiter.keys(name, &[("ip", ip)]).unwrap();
            for (c, limit) in keys_of.iter().zip(&rule.limits) {
                algorithms.insert(KeyNames::new("sluice", c).state, limit.algorithm);
            }
        }
    }
    // When a state stops mattering, from its content.
    let state_deadline = |key: &str, algorithm: Algorithm| -> u64 {
        let value = server.cli(&["GET", key]);
        let level_deadline = |v: &str| {
            let (level, last) = v[1..].split_once(':').unwrap();
            let level: f64 = level.parse().unwrap();
            last.parse::<u64>().unwrap() + (level * window_us as f64 / 3.0).ceil() as u64
        };
        match algorithm {
            Algorithm::Gcra => value.parse().unwrap(),
            // All traffic came at `now`: the count lives until the end of now's window.
            Algorithm::FixedWindow => now - now % window_us + window_us,
            Algorithm::TokenBucket | Algorithm::LeakyBucket => level_deadline(&value),
            Algorithm::SlidingLog => {
                let newest = server.cli(&["ZRANGE", key, "-1", "-1", "WITHSCORES"]);
                newest.lines().nth(1).unwrap().parse::<u64>().unwrap() + window_us
            }
            // The last lease to end (leases end a window after they were taken).
            Algorithm::Concurrency => {
                let last = server.cli(&["ZRANGE", key, "-1", "-1", "WITHSCORES"]);
                last.lines().nth(1).unwrap().parse::<u64>().unwrap()
            }
            Algorithm::SlidingWindow => {
                let fields = server.cli(&["HKEYS", key]);
                let newest: u64 = fields
                    .lines()
                    .map(|f| f.parse::<u64>().unwrap())
                    .max()
                    .unwrap();
                (newest + 11) * (window_us / 10)
            }
            other => panic!("{other:?}: say when its state expires"),
        }
    };
    let keys = keys_with_pttl(&server);
    // Per algorithm and IP: the plain state; the blocking limit's parked state, marker and
    // block; the punishing limit's parked state, marker, block and violations.
    assert_eq!(
        keys.len(),
        Algorithm::ALL.len() * 2 * (1 + 3 + 4),
        "{keys:?}"
    );
    let mut parts = std::collections::BTreeSet::new();
    for (key, pttl) in &keys {
        assert!(*pttl > 0, "{key} has no expiry ({pttl})");
        let state = key.strip_suffix(":h").unwrap_or(key);
        let (part, deadline_us, bound) = if let Some(&algorithm) = algorithms.get(state) {
            // A sliding-window bucket counts up to a tenth of the window longer.
            let bound = match algorithm {
                Algorithm::SlidingWindow => window + window / 10,
                _ => window,
            };
            let value = server.cli(&["GET", key]);
            if let Some(until) = value.strip_prefix('B') {
                // A block marker lives as long as the block or the parked state.
                let parked = state_deadline(&format!("{key}:h"), algorithm);
                // A penalty's marker holds a copy of the violations after its end.
                let until: u64 = until.split(' ').next().unwrap().parse().unwrap();
                ("marker", until.max(parked), block.max(penalty.ban))
            } else if key.ends_with(":h") {
                ("h", state_deadline(key, algorithm), bound)
            } else {
                ("state", state_deadline(key, algorithm), bound)
            }
        } else {
            let value = server.cli(&["GET", key]);
            match key.rsplit(':').next().unwrap() {
                "b" => ("b", value.parse().unwrap(), block.max(penalty.ban)),
                "v" => (
                    "v",
                    value.split(':').nth(1).unwrap().parse().unwrap(),
                    penalty.memory,
                ),
                _ => panic!("unexpected key {key}"),
            }
        };
        parts.insert(part);
        assert!(
            *pttl as u128 <= bound.as_millis(),
            "{key}: {pttl} ms > {bound:?}"
        );
        // The key expires when its own content says it stops mattering, to the millisecond
        // (less the real time spent since it was written).
        let exact_ms = (deadline_us - now).div_ceil(1000) as i64;
        assert!(*pttl <= exact_ms, "{key}: {pttl} ms > {exact_ms} ms");
        assert!(
            *pttl >= exact_ms - 5_000,
            "{key}: {pttl} ms, expected {exact_ms} ms"
        );
    }
    assert_eq!(
        parts.into_iter().collect::<Vec<_>>(),
        ["b", "h", "marker", "state", "v"]
    );
    // Lifting a block deletes it and the violations and puts the state back; a reset deletes
    // everything of an identity.
    let blocked = limiter.blocks("b-gcra", &PAGE).await.unwrap().blocks;
    assert_eq!(blocked.len(), 4, "{blocked:?}");
    assert!(
        limiter
            .unblock("b-gcra", &[("ip", "1.1.1.1")])
            .await
            .unwrap()
    );
    let left = server.cli(&["--scan", "--pattern", "sluice:b-gcra:*:{ip=1.1.1.1}:*"]);
    assert_eq!(left, "");
    for c in limiter.keys("b-gcra", &[("ip", "1.1.1.1")]).unwrap() {
        let state = KeyNames::new("sluice", &c).state;
        assert!(
            server.cli(&["GET", &state]).parse::<u64>().is_ok(),
            "{state}"
        );
        assert_eq!(server.cli(&["EXISTS", &format!("{state}:h")]), "0");
    }
    limiter.reset("b-gcra", &[("ip", "2.2.2.2")]).await.unwrap();
    let left = server.cli(&["--scan", "--pattern", "sluice:b-gcra:*:{ip=2.2.2.2}:*"]);
    assert_eq!(left, "");
    for c in limiter.keys("b-gcra", &[("ip", "2.2.2.2")]).unwrap() {
        let state = KeyNames::new("sluice", &c).state;
        assert_eq!(server.cli(&["EXISTS", &state, &format!("{state}:h")]), "0");
    }
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
        .cli(&["PTTL", &KeyNames::new("exact", &c.key).state])
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
    let names = keys_but_the_format(h.server());
    assert_eq!(
        names.len(),
        values.len() * 3,
        "one block marker, one parked state and one block each"
    );
    let limit_keys = KeyNames::new(
        "sluice",
        &sluice::store::LimitKey {
            rule: "login".into(),
            limit_id: "user-gcra-1h".into(),
            identity: String::new(),
        },
    );
    let state_head = limit_keys.state.trim_end_matches("{}").to_string();
    for key in &names {
        assert!(key.len() < 120, "{key}");
        assert_eq!(key.matches('{').count(), 1, "{key}");
        assert_eq!(key.matches('}').count(), 1, "{key}");
        let (head, tail) = key.split_once('{').unwrap();
        let (identity, part) = tail.split_once('}').unwrap();
        assert!(!identity.contains(':'));
        if head == state_head {
            assert!(part.is_empty() || part == ":h", "{key}");
        } else {
            assert_eq!(head, "sluice:login:user-gcra-1h:");
            assert_eq!(part, ":b");
        }
    }
    let blocks = limiter.blocks("login", &PAGE).await.unwrap().blocks;
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
        s.penalty = Some(sluice::algorithm::PenaltyParams {
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

/// The general decision is a function (`FCALL`), loaded once: a flush of the functions, as a new
/// or wiped server would have, loads it again and the decision goes on.
#[tokio::test]
async fn the_general_decision_is_a_function_reloaded_after_a_flush() {
    let h = Harness::redis().await;
    let server = h.server();
    // Two limits, one counting its denials: no rule script takes them.
    let mut counting = call("b", step(Algorithm::SlidingWindow, 2, 60 * S));
    counting.step.params.count_denied = true;
    let calls = [call("a", step(Algorithm::Gcra, 2, 60 * S)), counting];
    let decide = async || h.store.decide(&calls, Mode::Apply).await.unwrap();
    assert!(decide().await.outcomes.iter().all(|o| o.allowed));
    let calls_of = |name: &str| server.command_calls(name);
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert!(decide().await.outcomes.iter().all(|o| o.allowed));
    assert_eq!((calls_of("fcall"), calls_of("evalsha")), (1, 0));
    // A one-limit request with a block runs its algorithm's one-limit script, which reads the
    // state key once: the read that looks for a block marker is the algorithm's read.
    let mut guarded = call("g", step(Algorithm::Gcra, 2, 60 * S));
    guarded.step.block_us = Some(60 * S);
    let decide_guarded = async || {
        h.store
            .decide(std::slice::from_ref(&guarded), Mode::Apply)
            .await
            .unwrap()
    };
    // Once first, so that its script is loaded (not counted below as a call refused NOSCRIPT).
    assert!(decide_guarded().await.outcomes[0].allowed);
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert!(decide_guarded().await.outcomes[0].allowed);
    assert_eq!(
        (calls_of("fcall"), calls_of("evalsha"), calls_of("get")),
        (0, 1, 1)
    );
    assert_eq!(server.cli(&["FUNCTION", "FLUSH"]), "OK");
    let third = decide().await;
    assert!(
        third.outcomes.iter().all(|o| !o.allowed),
        "the counts survive"
    );
    assert!(
        server.cli(&["FUNCTION", "LIST"]).contains("sluice_decide_"),
        "loaded again"
    );
}

/// The algorithms with a one-limit script and a part in rule scripts.
const SCRIPTED: [Algorithm; 5] = [
    Algorithm::SlidingLog,
    Algorithm::SlidingWindow,
    Algorithm::FixedWindow,
    Algorithm::TokenBucket,
    Algorithm::Gcra,
];

/// A rule of several plain limits (no block, penalty or `count_denied`) is one call of a script
/// made for the rule, up to 8 limits of any algorithm with a one-limit script; a denial by one
/// of them records nothing on the others.
#[tokio::test]
async fn a_rule_of_plain_limits_is_one_rule_script_call() {
    let h = Harness::redis().await;
    let server = h.server();
    let calls_of = |name: &str| server.command_calls(name);
    for algorithm in SCRIPTED {
        // Seven limits of 3 and an eighth of 1, each on its own key.
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let count = if i == 7 { 1 } else { 3 };
                call(
                    &format!("{}{i}", algorithm.name()),
                    step(algorithm, count, 60 * S),
                )
            })
            .collect();
        let decide = async || h.store.decide(&calls, Mode::Apply).await.unwrap();
        let first = decide().await;
        assert!(first.outcomes.iter().all(|o| o.allowed), "{algorithm:?}");
        assert_eq!(first.outcomes[0].remaining, 2);
        assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
        let second = decide().await;
        assert!(!second.outcomes[7].allowed, "{algorithm:?}");
        assert!(second.outcomes[..7].iter().all(|o| o.allowed));
        let third = decide().await;
        assert_eq!(
            third.outcomes[0].remaining, 2,
            "{algorithm:?}: the denied requests took nothing"
        );
        // The sliding log's denial (its retry time needs a search) is the general decision's.
        let general = u64::from(algorithm == Algorithm::SlidingLog);
        assert_eq!(
            (calls_of("evalsha"), calls_of("fcall")),
            (2, 2 * general),
            "{algorithm:?}"
        );
    }
}

/// A rule whose limits have a block or a penalty is one call of its rule script while it admits,
/// and reports the penalty's violations; a denial by such a limit, which blocks and counts a
/// violation, and the block that follows, are the general decision's.
#[tokio::test]
async fn a_rule_with_blocks_and_penalties_is_one_rule_script_call_while_it_admits() {
    let h = Harness::redis().await;
    let server = h.server();
    let calls_of = |name: &str| {
        (
            server.command_calls("evalsha"),
            server.command_calls("fcall"),
            server.command_calls(name),
        )
    };
    for algorithm in SCRIPTED {
        let mut penalized = call(
            &format!("p{}", algorithm.name()),
            step(algorithm, 2, 60 * S),
        );
        penalized.step.penalty = Some(sluice::algorithm::PenaltyParams {
            warn_after: 1,
            ban_after: 3,
            ban_us: 600 * S,
            memory_us: 600 * S,
        });
        let mut blocking = call(
            &format!("b{}", algorithm.name()),
            step(Algorithm::Gcra, 5, 60 * S),
        );
        blocking.step.block_us = Some(600 * S);
        let calls = [penalized, blocking];
        let decide = async || h.store.decide(&calls, Mode::Apply).await.unwrap();
        assert!(decide().await.outcomes.iter().all(|o| o.allowed));
        assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
        let second = decide().await;
        assert!(second.outcomes.iter().all(|o| o.allowed), "{algorithm:?}");
        assert_eq!(
            (second.outcomes[0].violations, second.outcomes[0].warning),
            (0, false)
        );
        // The script reads the penalty's violations key, nothing else but the states.
        assert_eq!(calls_of("get").0, 1, "{algorithm:?}");
        assert_eq!(calls_of("get").1, 0, "{algorithm:?}");
        // The penalized limit denies: the general decision counts the violation.
        let third = decide().await;
        assert!(!third.outcomes[0].allowed && third.outcomes[1].allowed);
        assert_eq!(
            (third.outcomes[0].violations, third.outcomes[0].warning),
            (1, true)
        );
        assert_eq!(
            calls_of("get").1,
            1,
            "{algorithm:?}: the denial went to the general decision"
        );
        assert_eq!(
            third.outcomes[1].remaining, 3,
            "{algorithm:?}: the denial took nothing"
        );
        // Once the window has passed, the rule script admits again and reports the violation.
        h.advance_us(70 * S);
        assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
        let fourth = decide().await;
        assert!(fourth.outcomes.iter().all(|o| o.allowed), "{algorithm:?}");
        assert_eq!(
            (fourth.outcomes[0].violations, fourth.outcomes[0].warning),
            (1, true)
        );
        assert_eq!(
            (calls_of("get").0, calls_of("get").1),
            (1, 0),
            "{algorithm:?}"
        );
    }
    // Up to 8 penalized limits of one algorithm, each reading its violations, in one call.
    for algorithm in SCRIPTED {
        let calls: Vec<_> = (0..8)
            .map(|i| {
                let mut c = call(
                    &format!("8{}{i}", algorithm.name()),
                    step(algorithm, 3, 60 * S),
                );
                c.step.block_us = Some(60 * S);
                c.step.penalty = Some(sluice::algorithm::PenaltyParams {
                    warn_after: 2,
                    ban_after: 3,
                    ban_us: 60 * S,
                    memory_us: 60 * S,
                });
                c
            })
            .collect();
        let decide = async || h.store.decide(&calls, Mode::Apply).await.unwrap();
        assert!(decide().await.outcomes.iter().all(|o| o.allowed));
        assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
        assert!(decide().await.outcomes.iter().all(|o| o.remaining == 1));
        let (evalsha, fcall, gets) = calls_of("get");
        assert_eq!((evalsha, fcall), (1, 0), "{algorithm:?}");
        assert!(
            gets >= 8,
            "{algorithm:?}: {gets} GET, one per violations key at least"
        );
    }
    // A denial by the blocking limit blocks the identity; the rule script leaves the block to
    // the general decision, which answers it.
    let mut blocking = call("blocked", step(Algorithm::Gcra, 1, 60 * S));
    blocking.step.block_us = Some(600 * S);
    let plain = call("plain", step(Algorithm::FixedWindow, 100, 3600 * S));
    let calls = [plain, blocking];
    let decide = async || h.store.decide(&calls, Mode::Apply).await.unwrap();
    assert!(decide().await.outcomes.iter().all(|o| o.allowed));
    let denied = decide().await;
    let until = denied.outcomes[1].blocked_until_us.expect("blocked");
    h.advance_us(120 * S);
    let blocked = decide().await;
    assert!(!blocked.outcomes[1].allowed);
    assert_eq!(blocked.outcomes[1].blocked_until_us, Some(until));
    assert_eq!(
        blocked.outcomes[0].remaining, 99,
        "the blocked request took nothing"
    );
}

/// A blocked identity of a one-limit rule is answered by its algorithm's one-limit script, in
/// one call, from the block marker its own read finds in the state key.
#[tokio::test]
async fn a_block_in_force_is_answered_by_the_one_limit_script() {
    let h = Harness::redis().await;
    let server = h.server();
    for algorithm in SCRIPTED {
        let mut c = call(algorithm.name(), step(algorithm, 1, 60 * S));
        c.step.block_us = Some(600 * S);
        assert!(h.one(&c).await.allowed);
        let blocking = h.one(&c).await;
        assert!(!blocking.allowed && blocking.blocked_until_us.is_some());
        assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
        let blocked = h.one(&c).await;
        assert_eq!(
            blocked.blocked_until_us, blocking.blocked_until_us,
            "{algorithm:?}"
        );
        assert_eq!(
            (
                server.command_calls("evalsha"),
                server.command_calls("fcall")
            ),
            (1, 0),
            "{algorithm:?}"
        );
    }
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
        reply.now_us.get().abs_diff(local.get()) < (5 * S).get(),
        "{:?} vs {local:?}",
        reply.now_us
    );
    let until = store.block(&c.key, (10 * S).into()).await.unwrap();
    assert!(until.get().abs_diff((local + 10 * S).get()) < (5 * S).get());
    assert_eq!(
        store.blocks("r", &PAGE).await.unwrap().entries[0].until_us,
        until
    );
    assert!(store.unblock(&c.key).await.unwrap());
}

/// The listing of blocks scans Redis a batch at a time: a small page stops after a batch, its
/// cursor resumes the scan, and following cursors lists each block once. A block value that is
/// not a block end (corrupt or foreign data) is skipped and counted, never an error.
#[tokio::test]
async fn block_listings_page_through_redis_and_skip_bad_values() {
    let h = Harness::redis().await;
    let limiter = h.limiter(vec![(
        "login",
        Rule::new(vec![Limit::new(
            &["ip"],
            "2/1m".parse().unwrap(),
            Algorithm::Gcra,
        )]),
    )]);
    for i in 0..3000 {
        let ip = format!("10.{}.{}.{}", i / 65536, (i / 256) % 256, i % 256);
        limiter
            .block("login", &[("ip", ip.as_str())], Duration::from_secs(600))
            .await
            .unwrap();
    }
    let calls = limiter.keys("login", &[("ip", "10.0.0.0")]).unwrap();
    let bad = KeyNames::new("sluice", &calls[0])
        .block
        .replace("10.0.0.0", "junk");
    h.server().cli(&["SET", &bad, "not a number", "EX", "600"]);

    let listing = sluice::conformance::list_blocks(&limiter, "login", 10).await;
    assert_eq!(listing.blocks.len(), 3000);
    assert!(listing.pages > 1, "a page of 10 stops after one SCAN batch");
    assert_eq!(
        listing.skipped, 1,
        "the corrupt value is counted, not listed"
    );
}

/// A page of a block listing stops when the store's list budget is spent, however few entries
/// it holds, and says where to go on: with no budget, a page asking for everything returns after
/// one `SCAN` batch; with the default budget the same request lists every block at once.
#[tokio::test]
async fn a_block_listing_page_stops_at_its_time_budget() {
    let server = RedisServer::start();
    let url = server.url();
    let store = |list_budget| {
        RedisStore::connect(
            &url,
            RedisOptions {
                list_budget,
                ..RedisOptions::default()
            },
        )
    };
    let patient = store(sluice::store::redis::LIST_BUDGET).await.unwrap();
    let hasty = store(Duration::ZERO).await.unwrap();
    for i in 0..3000 {
        let key = common::key("gcra", &format!("ip={i}"));
        patient.block(&key, Duration::from_secs(600)).await.unwrap();
    }
    let everything = sluice::store::BlocksCursor {
        after: None,
        count: 100_000,
    };
    let page = patient.blocks("r", &everything).await.unwrap();
    assert_eq!((page.entries.len(), page.next), (3000, None));

    let mut cursor = everything.clone();
    let (mut pages, mut listed) = (0, 0);
    loop {
        let page = hasty.blocks("r", &cursor).await.unwrap();
        pages += 1;
        listed += page.entries.len();
        match page.next {
            Some(next) => cursor.after = Some(next),
            None => break,
        }
    }
    assert_eq!(listed, 3000);
    assert!(
        pages >= 3,
        "one SCAN batch (COUNT 1000) per page: {pages} pages"
    );
}

/// The key format's marker: written once per prefix, read back as this release's format, and
/// a newer format is refused with the reason instead of being misread.
#[tokio::test]
async fn the_key_format_is_written_once_and_a_newer_one_is_refused() {
    let server = RedisServer::start();
    let store = RedisStore::connect(&server.url(), RedisOptions::default())
        .await
        .unwrap();
    assert_eq!(
        store.key_format().await.unwrap(),
        sluice::store::redis::KEY_FORMAT
    );
    assert_eq!(server.cli(&["GET", "sluice:format"]), "1");
    assert_eq!(
        server.cli(&["PTTL", "sluice:format"]),
        "-1",
        "the marker never expires"
    );
    server.cli(&["SET", "sluice:format", "2"]);
    let error = store.key_format().await.unwrap_err();
    assert!(
        error.message.contains("format \"2\"") && error.message.contains("reads format 1"),
        "{error}"
    );
    assert_eq!(
        server.cli(&["GET", "sluice:format"]),
        "2",
        "a newer marker is left as it is"
    );
}
