//! Fixed windows counted in their marked windows on Redis `TIME`: a key that expires at its
//! window's end tells Redis' time, so an admission needs no `TIME` read, for one limit
//! (`lua/one_fixed_window.lua`) and for a rule of them (`lua/many_marked.lua`). Blocks whose
//! marker expires with them, answered the same way: `redis_marked_blocks.rs`.
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

use common::marked::{assert_blocked_until, decide_one};
use common::{S, call, redis_now, redis_store, step};
use sluice::Micros;
use sluice::algorithm::{Mode, PenaltyParams};
use sluice::model::Algorithm;
use sluice::store::Store;
use sluice::store::redis::KeyNames;
use sluice_test_support::RedisServer;

/// A fixed window's key: -(slot * 2^25 + count), or flagged, slot * 2^25 + (2^25 - 1 - count).
fn held_in(server: &RedisServer, key: &str) -> i64 {
    server.cli(&["GET", key]).parse().expect("a count")
}

/// The count a fixed window's key holds, flagged or not.
fn count_in(server: &RedisServer, key: &str) -> i64 {
    let held = held_in(server, key);
    if held > 0 {
        (1 << 25) - 1 - held % (1 << 25)
    } else {
        (-held) % (1 << 25)
    }
}

/// When a key expires, in Unix ms: a marked window's key expires at its window's end.
fn expiry_ms(server: &RedisServer, key: &str) -> u64 {
    server
        .cli(&["PEXPIRETIME", key])
        .parse()
        .expect("an expiry")
}

/// On Redis TIME, a fixed window's key expires at its window's end, and that mark spares an
/// admission the TIME read: one DECRBY and one PTTL. The decision's time is still Redis' own, to
/// the millisecond, and a denial, which the denial cache keeps until its retry time, reads TIME.
#[tokio::test]
async fn a_fixed_window_admits_in_its_marked_window_without_reading_time() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let redis_ms = || redis_now(&server).get() / 1000;
    // A day's window, so that the test does not straddle two of them.
    let day = 86_400 * S;
    let c = call("fw", step(Algorithm::FixedWindow, 5, day));
    let decide = || decide_one(&store, &c);
    let first = decide().await;
    assert_eq!(first.outcomes[0].remaining, 4, "a new window");
    let end_us = first.now_us + first.outcomes[0].reset_after_us;
    let state = KeyNames::new("sluice", &c.key).state;
    assert_eq!(expiry_ms(&server, &state) * 1000, end_us.get());
    let before = redis_ms();
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    for remaining in [3, 2, 1, 0] {
        let r = decide().await;
        let o = &r.outcomes[0];
        assert!(o.allowed && o.retry_after_us.is_none());
        assert_eq!(o.remaining, remaining);
        let now_ms = r.now_us.get() / 1000;
        assert_eq!(r.now_us.get() % 1000, 0, "Redis' time to the millisecond");
        assert!(
            now_ms >= before && now_ms <= before + 5000,
            "{now_ms} vs {before}"
        );
        // Until the window's end: the same instant for every admission of one window.
        let end_ms = now_ms + o.reset_after_us.get() / 1000;
        assert_eq!(end_ms % 86_400_000, 0, "{end_ms}");
        assert!(o.reset_after_us > Micros::ZERO && o.reset_after_us <= day);
    }
    assert_eq!(
        (
            server.command_calls("evalsha"),
            server.command_calls("pttl"),
            server.command_calls("time"),
        ),
        (4, 4, 0)
    );
    let denied = decide().await;
    let o = &denied.outcomes[0];
    assert!(!o.allowed && o.remaining == 0);
    assert_eq!(o.retry_after_us, Some(o.reset_after_us));
    assert_eq!(server.command_calls("time"), 1, "a denial reads TIME");
    // The denial took nothing: the window holds the 5 admitted units.
    assert_eq!(count_in(&server, &state), 5);
}

/// A fixed window with a penalty counts in its marked window too: its admission carries the
/// violations remembered, counted at Redis' time, without reading TIME. Its key is read before
/// the count; a count that is not flagged tells that the identity has no violations, so only a
/// new window or a flagged count (a violation was counted) reads the violations key.
#[tokio::test]
async fn a_penalized_fixed_window_reports_its_violations_from_its_marked_window() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let mut c = call("fwp", step(Algorithm::FixedWindow, 5, 86_400 * S));
    c.step.penalty = Some(PenaltyParams {
        warn_after: 1,
        ban_after: 5,
        ban_us: 3600 * S,
        memory_us: 3600 * S,
    });
    let decide = async |cost: u64| {
        let mut c = c.clone();
        c.step.cost = cost;
        store.decide(&[c], Mode::Apply).await.unwrap().outcomes[0]
    };
    let calls = |names: [&str; 4]| names.map(|name| server.command_calls(name));
    let reads = ["get", "decrby", "pttl", "time"];
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert!(decide(2).await.allowed);
    assert_eq!(
        calls(reads),
        [2, 2, 0, 1],
        "a new window: the key, then the violations key, read; TIME"
    );
    let state = KeyNames::new("sluice", &c.key).state;
    assert!(held_in(&server, &state) < 0, "no violations: not flagged");
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let admitted = decide(1).await;
    assert_eq!((admitted.remaining, admitted.violations), (2, 0));
    assert_eq!(
        calls(reads),
        [1, 1, 1, 0],
        "no violations: the key read and counted, the violations key left alone"
    );
    let denied = decide(3).await;
    assert!(!denied.allowed);
    assert_eq!((denied.violations, denied.warning), (1, true));
    assert!(held_in(&server, &state) > 0, "a violation flags the count");
    assert_eq!(count_in(&server, &state), 3, "the denial took nothing");
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let admitted = decide(1).await;
    assert!(admitted.allowed);
    assert_eq!(admitted.remaining, 1);
    assert_eq!((admitted.violations, admitted.warning), (1, true));
    assert_eq!(
        calls(reads),
        [2, 1, 1, 0],
        "a flagged count: the violations key read too"
    );
    assert_eq!(count_in(&server, &state), 4);
    // An administrative block leaves a marker without the violations' copy: they are read, and
    // TIME, and the answer is the same as a penalty's block. A minute's block: the parked count
    // outlives it, its marker is `B` (as short as a count: the DECRBY is refused); two days': `B0`.
    for (secs, marker, expected) in [(60, "B", [2, 1, 0, 1]), (172_800, "B0", [2, 0, 1, 1])] {
        let until = store
            .block(&c.key, std::time::Duration::from_secs(secs))
            .await
            .unwrap();
        assert_eq!(
            server.cli(&["GET", &state]),
            format!("{marker}{}", until.get())
        );
        assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
        let r = decide_one(&store, &c).await;
        assert_blocked_until(&r, until);
        assert_eq!((r.outcomes[0].violations, r.outcomes[0].warning), (1, true));
        assert_eq!(calls(reads), expected, "{marker}");
    }
}

/// A rule of fixed windows counts each in its marked window: a DECRBY and a PTTL a limit, no
/// TIME. A denial by any limit undoes every count, reads TIME and is decided as before.
#[tokio::test]
async fn a_rule_of_fixed_windows_admits_in_their_marked_windows_without_reading_time() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    // A day's and an hour's window, so that the test does not straddle two of them.
    let (day, hour) = (86_400 * S, 3600 * S);
    let mut hourly = call("fw", step(Algorithm::FixedWindow, 5, hour));
    hourly.key.limit_id = "hourly".into();
    let rule = [call("fw", step(Algorithm::FixedWindow, 3, day)), hourly];
    let decide = async || store.decide(&rule, Mode::Apply).await.unwrap();
    let calls = |name: &str| server.command_calls(name);
    // New windows: each DECRBY makes its key, which is then completed once TIME is read, a
    // DECRBY of its slot and a PEXPIREAT; nothing is undone or read again.
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let first = decide().await;
    assert!(first.outcomes.iter().all(|o| o.allowed), "new windows");
    let writes = [
        "decrby",
        "pexpireat",
        "time",
        "set",
        "pttl",
        "get",
        "del",
        "incrby",
    ];
    assert_eq!(writes.map(calls), [4, 2, 1, 0, 0, 0, 0, 0]);
    assert_eq!(first.now_us.get() % 1000, 0, "Redis' time, to the ms");
    let state = |i: usize| KeyNames::new("sluice", &rule[i].key).state;
    for (i, o) in first.outcomes.iter().enumerate() {
        let end_us = first.now_us + o.reset_after_us;
        assert_eq!(
            expiry_ms(&server, &state(i)) * 1000,
            end_us.get(),
            "its window's end"
        );
    }
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    for (daily, hourly) in [(1, 3), (0, 2)] {
        let r = decide().await;
        let (d, h) = (&r.outcomes[0], &r.outcomes[1]);
        assert!(d.allowed && h.allowed);
        assert_eq!((d.remaining, h.remaining), (daily, hourly));
        assert!(r.now_us >= first.now_us, "Redis' time, to the millisecond");
        // Each until its window's end.
        let end = |o: &sluice::algorithm::LimitOutcome| (r.now_us + o.reset_after_us).get();
        assert_eq!(end(d) % 86_400_000_000, 0);
        assert_eq!(end(h) % 3_600_000_000, 0);
        assert!(d.reset_after_us <= day && h.reset_after_us <= hour);
    }
    assert_eq!(
        ["evalsha", "decrby", "pttl", "time"].map(calls),
        [2, 4, 4, 0]
    );
    // The day's limit denies: the hour's count is undone too, and TIME decides.
    let denied = decide().await;
    assert!(!denied.outcomes[0].allowed && denied.outcomes[1].allowed);
    assert_eq!(
        denied.outcomes[0].retry_after_us,
        Some(denied.outcomes[0].reset_after_us)
    );
    assert_eq!(server.command_calls("time"), 1, "a denial reads TIME");
    assert_eq!(
        (count_in(&server, &state(0)), count_in(&server, &state(1))),
        (3, 3)
    );
    // One limit starts a window while the other counts in its marked one.
    assert_eq!(server.cli(&["DEL", &state(0)]), "1");
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let r = decide().await;
    assert!(r.outcomes.iter().all(|o| o.allowed));
    assert_eq!((r.outcomes[0].remaining, r.outcomes[1].remaining), (2, 1));
    assert_eq!(writes.map(calls), [3, 1, 1, 0, 1, 0, 0, 0]);
    assert_eq!(
        (count_in(&server, &state(0)), count_in(&server, &state(1))),
        (1, 4)
    );
    let end_us = r.now_us + r.outcomes[0].reset_after_us;
    assert_eq!(expiry_ms(&server, &state(0)) * 1000, end_us.get());
}
