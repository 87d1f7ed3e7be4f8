//! Shared calls: decisions of one limit (or of one rule's limits) that wait while a call of that
//! spec is in flight go to Redis together, in one script call, each decided as a call of its
//! own would decide it.
//!
//! Each test holds Redis with `CLIENT PAUSE … WRITE`, so the calls of the first two decisions
//! (two calls of a spec are in flight at most) wait in Redis while the others queue behind them
//! (a current-thread runtime runs every spawned task up to its wait before the test goes on),
//! then lets it go: the first two calls answer the first two decisions, the next one the first
//! 64 of the queue, the next the rest.
#![cfg(all(feature = "redis", feature = "conformance"))]

use crate::common;

use std::collections::BTreeMap;

use common::{S, answered, call, key, redis_store, step};
use sluice::algorithm::{Mode, PenaltyParams};
use sluice::model::Algorithm;
use sluice::store::redis::RedisStore;
use sluice::store::{LimitCall, Store, StoreError, StoreReply};
use sluice::{ManualClock, Micros};
use sluice_test_support::RedisServer;
use tokio::task::JoinHandle;

/// Decisions made at once in each test.
const AT_ONCE: usize = 100;

/// A decision on its own task.
type Deciding = JoinHandle<Result<StoreReply, StoreError>>;

/// Starts deciding `calls`, one request's limits, on its own task.
fn spawn_decide(store: &RedisStore, calls: &[LimitCall]) -> Deciding {
    let (store, calls) = (store.clone(), calls.to_vec());
    tokio::spawn(async move { store.decide(&calls, Mode::Apply).await })
}

/// Makes one decision, so that the connection is up and the scripts known; then zeroes Redis'
/// counters and holds its writes.
async fn warm_and_hold(server: &RedisServer, store: &RedisStore) {
    let warm = call("warm", step(Algorithm::FixedWindow, 1000, 60 * S));
    store.decide(&[warm], Mode::Apply).await.expect("warm");
    assert_eq!(server.cli(&["CONFIG", "RESETSTAT"]), "OK");
    assert_eq!(server.cli(&["CLIENT", "PAUSE", "60000", "WRITE"]), "OK");
}

/// With Redis' writes held, starts two decisions of `c`, whose calls wait in Redis, then
/// `queued` more, which queue behind them.
async fn two_sent_then_queued(
    server: &RedisServer,
    store: &RedisStore,
    c: &LimitCall,
    queued: usize,
) -> (Deciding, Deciding, Vec<Deciding>) {
    warm_and_hold(server, store).await;
    let one = std::slice::from_ref(c);
    let (first, second) = (spawn_decide(store, one), spawn_decide(store, one));
    tokio::task::yield_now().await;
    let queued = (0..queued).map(|_| spawn_decide(store, one)).collect();
    tokio::task::yield_now().await;
    (first, second, queued)
}

/// Runs `requests` at once while Redis holds its writes, then lets Redis go; returns each answer,
/// and how many script calls (`EVALSHA`) and general decisions (`FCALL`) Redis ran meanwhile.
async fn all_at_once(
    server: &RedisServer,
    store: &RedisStore,
    requests: &[Vec<LimitCall>],
) -> (Vec<StoreReply>, u64, u64) {
    warm_and_hold(server, store).await;
    let tasks: Vec<_> = requests.iter().map(|r| spawn_decide(store, r)).collect();
    tokio::task::yield_now().await;
    assert_eq!(server.cli(&["CLIENT", "UNPAUSE"]), "OK");
    let mut replies = Vec::with_capacity(tasks.len());
    for t in tasks {
        replies.push(t.await.expect("no panic").expect("an answer"));
    }
    let calls = (answered(server, "evalsha"), answered(server, "fcall"));
    (replies, calls.0, calls.1)
}

/// `AT_ONCE` requests of the limits `rule`, spread over 10 identities in turn.
fn spread(rule: &[LimitCall]) -> Vec<Vec<LimitCall>> {
    (0..AT_ONCE)
        .map(|i| {
            rule.iter()
                .map(|c| LimitCall {
                    key: key(&c.key.limit_id, &format!("ip={}", i % 10)),
                    ..c.clone()
                })
                .collect()
        })
        .collect()
}

/// Each identity's admitted requests' remaining units of each limit, most first. (Two calls in
/// flight may reach Redis in either order, as concurrent requests may: only within a call is the
/// order the requests'.)
fn admitted(
    requests: &[Vec<LimitCall>],
    replies: &[StoreReply],
) -> BTreeMap<String, Vec<Vec<u64>>> {
    let mut by_identity = BTreeMap::<String, Vec<Vec<u64>>>::new();
    for (request, r) in requests.iter().zip(replies) {
        let entry = by_identity
            .entry(request[0].key.identity.clone())
            .or_default();
        if r.outcomes.iter().all(|o| o.allowed) {
            entry.push(r.outcomes.iter().map(|o| o.remaining).collect());
        }
    }
    for remaining in by_identity.values_mut() {
        remaining.sort_unstable_by(|a, b| b.cmp(a));
    }
    by_identity
}

/// Every algorithm with a one-limit script, on Redis TIME and on a client clock, with and without
/// a block: 100 decisions, 10 per identity, of a limit of 5. Each identity gets exactly 5, each
/// decided once (4 left, 3, …, 0), from four script calls: the first two alone, then 64, then 34.
/// A denial that imposes a block is left to the general decision.
#[tokio::test]
async fn waiting_decisions_share_one_call_and_each_is_decided_once() {
    let server = RedisServer::start();
    for algorithm in [
        Algorithm::FixedWindow,
        Algorithm::Gcra,
        Algorithm::TokenBucket,
        Algorithm::SlidingWindow,
        Algorithm::SlidingLog,
    ] {
        for clock in [None, Some(ManualClock::new(Micros::from_secs(1_000_000)))] {
            for blocked in [false, true] {
                let case = format!("{algorithm:?}, clock {}, block {blocked}", clock.is_some());
                let store = redis_store(&server, clock.clone()).await;
                let mut template = call(&case, step(algorithm, 5, 3600 * S));
                if blocked {
                    template.step.block_us = Some(3600 * S);
                }
                let requests = spread(&[template]);
                let (replies, evalsha, fcall) = all_at_once(&server, &store, &requests).await;
                let by_identity = admitted(&requests, &replies);
                assert_eq!(by_identity.len(), 10, "{case}");
                for (identity, remaining) in &by_identity {
                    assert_eq!(remaining, &[[4], [3], [2], [1], [0]], "{case}: {identity}");
                }
                assert_eq!(evalsha, 4, "{case}: two alone, then 64, then 34");
                // Without a block only a sliding log's denials (whose retry time needs a search)
                // go to the general decision; with one, every first denial imposes it.
                let general = match (blocked, algorithm) {
                    (true, _) => 10..=AT_ONCE as u64 / 2,
                    (false, Algorithm::SlidingLog) => AT_ONCE as u64 / 2..=AT_ONCE as u64 / 2,
                    (false, _) => 0..=0,
                };
                assert!(
                    general.contains(&fcall),
                    "{case}: {fcall} general decisions"
                );
            }
        }
    }
}

/// A rule of two limits, on Redis TIME and on a client clock, with and without a penalty on its
/// second limit: each identity gets exactly what its tighter limit allows (5 of the fixed
/// window's 5, from the GCRA limit's 7), from three calls of the rule's script.
#[tokio::test]
async fn waiting_decisions_of_a_rule_share_one_call() {
    let server = RedisServer::start();
    for clock in [None, Some(ManualClock::new(Micros::from_secs(1_000_000)))] {
        for penalized in [false, true] {
            let case = format!("clock {}, penalty {penalized}", clock.is_some());
            let store = redis_store(&server, clock.clone()).await;
            let fixed = call(
                &format!("fw {case}"),
                step(Algorithm::FixedWindow, 5, 3600 * S),
            );
            let mut gcra = call(&format!("gcra {case}"), step(Algorithm::Gcra, 7, 3600 * S));
            if penalized {
                gcra.step.penalty = Some(PenaltyParams {
                    warn_after: 3,
                    ban_after: 5,
                    ban_us: 3600 * S,
                    memory_us: 3600 * S,
                });
            }
            let requests = spread(&[fixed, gcra]);
            let (replies, evalsha, fcall) = all_at_once(&server, &store, &requests).await;
            let by_identity = admitted(&requests, &replies);
            assert_eq!(by_identity.len(), 10, "{case}");
            for (identity, remaining) in &by_identity {
                let expected = [[4, 6], [3, 5], [2, 4], [1, 3], [0, 2]];
                assert_eq!(remaining, &expected, "{case}: {identity}");
            }
            assert_eq!(evalsha, 4, "{case}: two alone, then 64, then 34");
            assert_eq!(
                fcall, 0,
                "{case}: denials by the fixed window, answered by the script"
            );
        }
    }
}

/// The decision that sent a call is dropped (its deadline) while the call is in flight: the call
/// still ends, the decisions queued behind it get their call and their answers, and the dropped
/// decision was counted, since its call reached Redis.
#[tokio::test]
async fn a_call_outlives_the_decision_that_sent_it() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let c = call("outlived", step(Algorithm::Gcra, 100, 3600 * S));
    let (first, second, queued) = two_sent_then_queued(&server, &store, &c, 20).await;
    first.abort();
    assert!(first.await.expect_err("dropped").is_cancelled());
    assert_eq!(server.cli(&["CLIENT", "UNPAUSE"]), "OK");
    let mut remaining =
        vec![second.await.expect("no panic").expect("an answer").outcomes[0].remaining];
    for t in queued {
        let r = t.await.expect("no panic").expect("an answer");
        assert!(r.outcomes[0].allowed);
        remaining.push(r.outcomes[0].remaining);
    }
    assert_eq!(remaining, (78..=98).rev().collect::<Vec<u64>>());
    assert_eq!(answered(&server, "evalsha"), 3);
}

/// A decision dropped while it waits in the queue is left out of the next call: Redis never
/// counts it.
#[tokio::test]
async fn a_decision_dropped_in_the_queue_is_not_sent() {
    let server = RedisServer::start();
    let store = redis_store(&server, None).await;
    let c = call("dropped", step(Algorithm::FixedWindow, 100, 3600 * S));
    let (first, second, queued) = two_sent_then_queued(&server, &store, &c, 10).await;
    for t in &queued[..4] {
        t.abort();
    }
    assert_eq!(server.cli(&["CLIENT", "UNPAUSE"]), "OK");
    assert_eq!(
        first.await.expect("no panic").expect("an answer").outcomes[0].remaining,
        99
    );
    let mut remaining =
        vec![second.await.expect("no panic").expect("an answer").outcomes[0].remaining];
    for t in queued.into_iter().skip(4) {
        remaining.push(t.await.expect("no panic").expect("an answer").outcomes[0].remaining);
    }
    assert_eq!(remaining, [98, 97, 96, 95, 94, 93, 92]);
    let last = store
        .decide(std::slice::from_ref(&c), Mode::Apply)
        .await
        .expect("an answer");
    assert_eq!(
        last.outcomes[0].remaining, 91,
        "the 4 dropped were never counted"
    );
}
