//! Randomized differential test: random timelines of requests over random limits, run against the
//! memory store and the Redis store, must give identical replies: on the same manual clock (the
//! client-clock path), and with Redis reading its own `TIME` (the production path: the memory
//! store then decides at the time Redis reports, and Redis expires keys in real time, so a key
//! expired too early shows as a difference).
//!
//! Concurrency limits take their leases under random tokens, and releases and renewals of leases
//! taken earlier join the timelines.
//!
//! Seeded, so a failure prints its seed and replays exactly (`SLUICE_DIFF_SEED=<seed>`, see
//! `common::seeded`).
#![cfg(feature = "redis")]

use crate::common;

use std::time::Duration;

use common::seeded::{Rng, seed};
use common::{S, redis_now, redis_store};
use sluice::algorithm::LeaseToken;
use sluice::algorithm::{LimitStep, Mode, Params, PenaltyParams};
use sluice::model::Algorithm;
use sluice::store::{LeaseCall, LimitCall, LimitKey, Store};
use sluice::{ManualClock, MemoryStore, Micros};
use sluice_test_support::RedisServer;
use std::sync::Arc;

/// A lease taken earlier in a timeline: by whom, its token and units.
type Taken = (&'static str, LeaseToken, u64);

/// The lease calls of a lease taken by `calls` of `steps` (its concurrency limits).
fn lease_calls(
    steps: &[LimitStep],
    key: impl Fn(usize, &str) -> LimitKey,
    (who, token, units): Taken,
) -> Vec<LeaseCall> {
    steps
        .iter()
        .enumerate()
        .filter(|(_, s)| s.algorithm.holds_leases())
        .map(|(i, s)| LeaseCall {
            key: key(i, who),
            token,
            units,
            lease_us: s.params.window_us,
        })
        .collect()
}

/// Durations a random limit is made of: windows, then blocks and bans, then penalty memories.
struct Scale {
    windows: &'static [Micros],
    blocks: &'static [Micros],
    memories: &'static [Micros],
}

const fn ms(n: u64) -> Micros {
    Micros::from_millis(n)
}

const fn secs(n: u64) -> Micros {
    Micros::from_secs(n)
}

/// For a manual clock that jumps by up to a minute.
const CLIENT_CLOCK: Scale = Scale {
    windows: &[ms(1), ms(7), secs(1), secs(10), secs(60), secs(3600)],
    blocks: &[ms(1), secs(1), secs(30)],
    memories: &[ms(1), secs(10), secs(3600)],
};

/// For Redis `TIME`, which moves by real time only (a few hundred µs per event): milliseconds.
const REDIS_TIME: Scale = Scale {
    windows: &[ms(1), ms(2), ms(7), ms(20), ms(100)],
    blocks: &[ms(1), ms(3), ms(30)],
    memories: &[ms(1), ms(5), ms(50)],
};

fn random_step(rng: &mut Rng, scale: &Scale) -> LimitStep {
    let algorithm = rng.pick(&Algorithm::ALL);
    let limit = rng.pick(&[1, 2, 3, 5, 10, 100]);
    let window_us = rng.pick(scale.windows);
    let capacity = if algorithm.supports_burst() && rng.chance(40) {
        rng.pick(&[1, 2, 7, 20])
    } else {
        limit
    };
    LimitStep {
        algorithm,
        params: Params {
            count: limit,
            window_us,
            capacity,
            count_denied: algorithm.supports_count_denied() && rng.chance(30),
            period: None,
            admits_over: false,
        },
        cost: 1,
        block_us: rng.chance(20).then(|| rng.pick(scale.blocks)),
        penalty: rng.chance(25).then(|| PenaltyParams {
            warn_after: rng.pick(&[0, 1, 2]),
            ban_after: rng.pick(&[2, 3, 5]),
            ban_us: rng.pick(scale.blocks),
            memory_us: rng.pick(scale.memories),
        }),
        shadow: rng.chance(15),
        lease: None,
        settable: false,
    }
}

/// The limits of case number `case`: in odd cases a rule of 2 to 4 limits without
/// `count_denied` or a lease (some with a block or a penalty), the spec a rule script decides;
/// in every fourth case one fixed window with a penalty, whose admissions on Redis `TIME` carry
/// the violations from a marked window (`lua/one_fixed_window.lua`), and in every fourth a rule
/// of fixed windows without one, counted in their marked windows (`lua/many_marked.lua`);
/// otherwise 1 to 3 random limits.
fn random_steps(rng: &mut Rng, scale: &Scale, case: usize) -> Vec<LimitStep> {
    if case % 4 == 2 {
        let mut step = random_step(rng, scale);
        step.algorithm = Algorithm::FixedWindow;
        step.params.capacity = step.params.count;
        step.penalty = Some(PenaltyParams {
            warn_after: rng.pick(&[0, 1, 2]),
            ban_after: rng.pick(&[3, 5]),
            ban_us: rng.pick(scale.blocks),
            memory_us: rng.pick(scale.memories),
        });
        step.shadow = false;
        return vec![step];
    }
    if case.is_multiple_of(2) {
        return (0..1 + rng.below(3))
            .map(|_| random_step(rng, scale))
            .collect();
    }
    let windows = case % 4 == 3;
    (0..2 + rng.below(3))
        .map(|_| {
            let mut step = random_step(rng, scale);
            if windows {
                step.algorithm = Algorithm::FixedWindow;
                step.params.capacity = step.params.count;
                (step.block_us, step.penalty) = (None, None);
            }
            if matches!(
                step.algorithm,
                Algorithm::LeakyBucket | Algorithm::Concurrency
            ) {
                step.algorithm = Algorithm::Gcra;
            }
            step.params.count_denied = false;
            step
        })
        .collect()
}

#[tokio::test]
async fn random_timelines_give_identical_replies() {
    let server = RedisServer::start();
    let seed = seed();
    let mut rng = Rng(seed);
    let cases = 60;
    for case in 0..cases {
        let clock = ManualClock::at_2026();
        clock.advance(Duration::from_micros(rng.below((10 * S).get())));
        let memory = MemoryStore::with_clock(Arc::new(clock.clone()));
        let redis = redis_store(&server, Some(clock.clone())).await;
        let rule = format!("case{case}");
        let steps = random_steps(&mut rng, &CLIENT_CLOCK, case);
        let key = |i: usize, who: &str| LimitKey {
            rule: rule.as_str().into(),
            limit_id: format!("l{i}").into(),
            identity: format!("ip={who}"),
        };
        let mut taken: Vec<Taken> = Vec::new();
        for event in 0..80 {
            let advance = rng.pick(
                &[
                    0, 0, 1, 333, 1_000, 99_999, 1_000_000, 7_000_000, 61_000_000,
                ]
                .map(Micros::new),
            );
            clock.advance(advance.into());
            let who = rng.pick(&["a", "b"]);
            let context = format!("seed {seed:#x} case {case} event {event} steps {steps:?}");
            match rng.below(40) {
                0 => {
                    let k = key(0, who);
                    let d = rng.pick(&[ms(1), S]);
                    assert_eq!(
                        memory.block(&k, d.into()).await,
                        redis.block(&k, d.into()).await,
                        "block: {context}"
                    );
                }
                1 => {
                    let k = key(0, who);
                    assert_eq!(
                        memory.unblock(&k).await,
                        redis.unblock(&k).await,
                        "unblock: {context}"
                    );
                }
                2 => {
                    let ks = [key(0, who)];
                    memory.reset(&ks).await.unwrap();
                    redis.reset(&ks).await.unwrap();
                }
                3..=6 if !taken.is_empty() => {
                    let lease = taken[rng.below(taken.len() as u64) as usize];
                    let calls = lease_calls(&steps, key, lease);
                    if rng.chance(50) {
                        assert_eq!(
                            memory.release(&calls).await,
                            redis.release(&calls).await,
                            "release {lease:?}: {context}"
                        );
                    } else {
                        assert_eq!(
                            memory.renew(&calls).await,
                            redis.renew(&calls).await,
                            "renew {lease:?}: {context}"
                        );
                    }
                }
                _ => {
                    let cost = rng.pick(&[1, 1, 1, 2, 3, 7]);
                    let mode = if rng.chance(20) {
                        Mode::Peek
                    } else {
                        Mode::Apply
                    };
                    // Mostly fresh tokens, as the limiter draws them; sometimes one taken before.
                    let token = match taken.last() {
                        Some(&(_, t, _)) if rng.chance(10) => t,
                        _ => rng.token(),
                    };
                    let calls: Vec<LimitCall> = steps
                        .iter()
                        .enumerate()
                        .map(|(i, s)| LimitCall {
                            key: key(i, who),
                            step: LimitStep {
                                cost,
                                lease: Some(token),
                                ..*s
                            },
                        })
                        .collect();
                    let m = memory.decide(&calls, mode).await.unwrap();
                    let r = redis.decide(&calls, mode).await.unwrap();
                    assert_eq!(m, r, "cost {cost} {mode:?} who {who}: {context}");
                    taken.push((who, token, cost));
                }
            }
        }
        let all = sluice::store::BlocksCursor {
            after: None,
            count: 100_000,
        };
        let mut blocks_m = memory.blocks(&rule, &all).await.unwrap();
        let mut blocks_r = redis.blocks(&rule, &all).await.unwrap();
        blocks_m.entries.sort_by(|a, b| a.key.cmp(&b.key));
        blocks_r.entries.sort_by(|a, b| a.key.cmp(&b.key));
        assert_eq!(blocks_m, blocks_r, "blocks: seed {seed:#x} case {case}");
    }
}

/// The same timelines with Redis reading its own `TIME`: Redis decides first, then the memory
/// store decides at the time Redis reported. Keys carry their real expiry (no minimum TTL).
#[tokio::test]
async fn random_timelines_on_redis_time_give_identical_replies() {
    let server = RedisServer::start();
    let seed = seed();
    let mut rng = Rng(seed ^ 0x7153);
    let redis = redis_store(&server, None).await;
    for case in 0..60 {
        let clock = ManualClock::new(Micros::ZERO);
        let memory = MemoryStore::with_clock(Arc::new(clock.clone()));
        let rule = format!("time{case}");
        let steps = random_steps(&mut rng, &REDIS_TIME, case);
        let key = |i: usize, who: &str| LimitKey {
            rule: rule.as_str().into(),
            limit_id: format!("l{i}").into(),
            identity: format!("ip={who}"),
        };
        let mut last_us = Micros::ZERO;
        let mut taken: Vec<Taken> = Vec::new();
        for event in 0..80 {
            let who = rng.pick(&["a", "b"]);
            let context = format!("seed {seed:#x} case {case} event {event} steps {steps:?}");
            match rng.below(40) {
                0 => {
                    // Redis blocks from its own now: the memory store blocks from the same
                    // instant. When a longer block was in force Redis answers its end, which says
                    // nothing of the time: then any instant up to Redis' current time answers
                    // alike, and none later may be taken (leases of other limits would lapse in
                    // the memory store only).
                    let k = key(0, who);
                    let d = rng.pick(REDIS_TIME.blocks);
                    let until = redis.block(&k, d.into()).await.unwrap();
                    clock.set_us(until.saturating_sub(d).min(redis_now(&server)).max(last_us));
                    assert_eq!(
                        memory.block(&k, d.into()).await.unwrap(),
                        until,
                        "block: {context}"
                    );
                }
                1 => {
                    // Whether a block was still in force depends on the instant; the effect
                    // (no block, no violations) does not.
                    let k = key(0, who);
                    redis.unblock(&k).await.unwrap();
                    memory.unblock(&k).await.unwrap();
                }
                2 => {
                    let ks = [key(0, who)];
                    memory.reset(&ks).await.unwrap();
                    redis.reset(&ks).await.unwrap();
                }
                3..=5 if !taken.is_empty() => {
                    // Whether the lease was still in force depends on the instant; the effect
                    // (no lease under that token) does not. A renewal would depend on it.
                    let lease = taken[rng.below(taken.len() as u64) as usize];
                    let calls = lease_calls(&steps, key, lease);
                    redis.release(&calls).await.unwrap();
                    memory.release(&calls).await.unwrap();
                }
                _ => {
                    let cost = rng.pick(&[1, 1, 1, 2, 3, 7]);
                    let mode = if rng.chance(20) {
                        Mode::Peek
                    } else {
                        Mode::Apply
                    };
                    let token = rng.token();
                    let calls: Vec<LimitCall> = steps
                        .iter()
                        .enumerate()
                        .map(|(i, s)| LimitCall {
                            key: key(i, who),
                            step: LimitStep {
                                cost,
                                lease: Some(token),
                                ..*s
                            },
                        })
                        .collect();
                    taken.push((who, token, cost));
                    let r = redis.decide(&calls, mode).await.unwrap();
                    // A fixed window's admission in a marked window tells Redis' time to the
                    // millisecond only.
                    assert!(
                        r.now_us + ms(1) > last_us,
                        "Redis TIME went back: {context}"
                    );
                    last_us = last_us.max(r.now_us);
                    clock.set_us(r.now_us);
                    let m = memory.decide(&calls, mode).await.unwrap();
                    assert_eq!(m, r, "cost {cost} {mode:?} who {who}: {context}");
                }
            }
        }
    }
}
