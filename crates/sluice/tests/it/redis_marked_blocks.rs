//! Blocks imposed on Redis `TIME`, whose marker expires with them: a one-limit script answers
//! them from the marker's PTTL without reading `TIME` (a fixed window's, `lua/one_fixed_window.lua`;
//! a GCRA limit's, `lua/one_gcra.lua`), a penalty's violations with them.
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

use common::marked::{assert_blocked_until, banned_at_first_denial, decide_one};
use common::{S, call, redis_now, redis_store, step};
use sluice::Micros;
use sluice::algorithm::PenaltyParams;
use sluice::model::Algorithm;
use sluice::store::redis::KeyNames;
use sluice_test_support::RedisServer;

/// A block imposed on Redis TIME leaves a marker that expires with it; a one-limit fixed window
/// answers it from its PTTL, without TIME, after a GET of its key: a count would be refused. Its
/// end is the block's, the time Redis' own to the millisecond, and a penalty's violations come
/// with it: a penalty's marker holds a copy of them, so its violations key is not read.
#[tokio::test]
async fn a_block_whose_marker_expires_with_it_is_answered_without_reading_time() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let c = banned_at_first_denial("fwb", Algorithm::FixedWindow);
    let decide = || decide_one(&store, &c);
    assert!(decide().await.outcomes[0].allowed);
    let banned = decide().await;
    let until = banned.outcomes[0].blocked_until_us.expect("banned");
    let marker = server.cli(&["GET", &KeyNames::new("sluice", &c.key).state]);
    let forget = banned.now_us + 7200 * S;
    assert_eq!(
        marker,
        format!("B0{} 1 {}", until.get(), forget.get()),
        "a marker that ends with its block, and the violations' copy"
    );
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    for _ in 0..3 {
        let r = decide().await;
        assert_blocked_until(&r, until);
        let o = &r.outcomes[0];
        assert_eq!(o.reset_after_us, until - r.now_us);
        assert!(r.now_us >= banned.now_us && r.now_us < banned.now_us + 5 * S);
        assert_eq!((o.violations, o.warning), (1, true));
    }
    assert_eq!(
        (
            server.command_calls("get"),
            server.command_calls("pttl"),
            server.command_calls("time"),
            server.command_calls("decrby"),
        ),
        (3, 3, 0, 0),
        "the key read first, which holds the violations, and its PTTL"
    );
    // Without a penalty the same block answers as one value.
    let mut e = call("fwe", step(Algorithm::FixedWindow, 1, 60 * S));
    e.step.block_us = Some(3600 * S);
    let decide = || decide_one(&store, &e);
    assert!(decide().await.outcomes[0].allowed);
    let until = decide().await.outcomes[0]
        .blocked_until_us
        .expect("blocked");
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    let r = decide().await;
    assert_eq!(r.outcomes[0].blocked_until_us, Some(until));
    assert_eq!(r.outcomes[0].retry_after_us, Some(until - r.now_us));
    assert_eq!(
        (
            server.command_calls("get"),
            server.command_calls("pttl"),
            server.command_calls("time"),
            server.command_calls("decrby"),
        ),
        (1, 1, 0, 0),
        "the key read first, the marker's PTTL"
    );
    // A marker that outlives its block (the parked window ends later) is answered on TIME.
    let mut d = call("fwd", step(Algorithm::FixedWindow, 1, 86_400 * S));
    d.step.block_us = Some(S);
    let decide = || decide_one(&store, &d);
    assert!(decide().await.outcomes[0].allowed);
    let blocked = decide().await.outcomes[0]
        .blocked_until_us
        .expect("blocked");
    let marker = server.cli(&["GET", &KeyNames::new("sluice", &d.key).state]);
    assert_eq!(marker, format!("B{}", blocked.get()));
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert_eq!(decide().await.outcomes[0].blocked_until_us, Some(blocked));
    assert_eq!(server.command_calls("time"), 1);
}

/// A GCRA limit with a block and no penalty reads its key before the time: an admission reads
/// TIME after its GET, and a block whose marker expires with it is answered from the marker's
/// PTTL, as a fixed window's is.
#[tokio::test]
async fn a_blocked_gcra_limit_is_answered_without_reading_time() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let mut g = call("gb", step(Algorithm::Gcra, 1, 60 * S));
    g.step.block_us = Some(3600 * S);
    let decide = || decide_one(&store, &g);
    let calls = |command| server.command_calls(command);
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert!(decide().await.outcomes[0].allowed);
    assert_eq!(
        (calls("get"), calls("time")),
        (1, 1),
        "its key, then the time"
    );
    let until = decide().await.outcomes[0]
        .blocked_until_us
        .expect("blocked");
    let marker = server.cli(&["GET", &KeyNames::new("sluice", &g.key).state]);
    assert_eq!(marker, format!("B0{}", until.get()));
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    for _ in 0..3 {
        assert_blocked_until(&decide().await, until);
    }
    assert_eq!(
        (calls("get"), calls("pttl"), calls("time")),
        (3, 3, 0),
        "the marker and its PTTL"
    );
    // The answer's time is Redis' own, to the millisecond, as TIME reads it around the call.
    for _ in 0..3 {
        let before = redis_now(&server);
        let now = decide().await.now_us;
        let after = redis_now(&server);
        assert!(
            now >= Micros::new(before.get() / 1000 * 1000) && now <= after,
            "{now:?}"
        );
    }
}

/// With a penalty too, a blocked GCRA limit is answered from its marker's PTTL without TIME, its
/// violations with it; an admission reads TIME after its key and counts the violations then.
#[tokio::test]
async fn a_banned_gcra_limit_is_answered_without_reading_time() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let g = banned_at_first_denial("gp", Algorithm::Gcra);
    let decide = || decide_one(&store, &g);
    let calls = |command| server.command_calls(command);
    assert!(decide().await.outcomes[0].allowed);
    let banned = decide().await;
    let until = banned.outcomes[0].blocked_until_us.expect("banned");
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    for _ in 0..3 {
        let r = decide().await;
        assert_blocked_until(&r, until);
        assert_eq!((r.outcomes[0].violations, r.outcomes[0].warning), (1, true));
    }
    assert_eq!(
        (calls("get"), calls("pttl"), calls("time")),
        (6, 3, 0),
        "the violations, the marker and its PTTL"
    );
    // Another identity of the same limit, with a violation and no ban: admitted on TIME, warned.
    let mut h = g.clone();
    h.key.identity = "user=other".into();
    h.step.penalty = g.step.penalty.map(|p| PenaltyParams { ban_after: 5, ..p });
    let decide = || decide_one(&store, &h);
    assert!(decide().await.outcomes[0].allowed);
    assert!(!decide().await.outcomes[0].allowed);
    server.cli(&["DEL", &KeyNames::new("sluice", &h.key).state]);
    let admitted = decide().await.outcomes[0];
    assert!(admitted.allowed);
    assert_eq!((admitted.violations, admitted.warning), (1, true));
}
