//! Helpers of the tests of marked keys on Redis `TIME` (`redis_marked.rs`,
//! `redis_marked_blocks.rs`): a call decided alone, a blocked answer, a limit that bans at its
//! first denial.

use sluice::algorithm::{Mode, PenaltyParams};
use sluice::model::Algorithm;
use sluice::store::redis::RedisStore;
use sluice::store::{LimitCall, StoreReply};
use sluice::{Micros, Store};

use super::{S, call, step};

/// `call` decided alone, applied.
pub async fn decide_one(store: &RedisStore, call: &LimitCall) -> StoreReply {
    store
        .decide(std::slice::from_ref(call), Mode::Apply)
        .await
        .unwrap()
}

/// `r` denies its one limit with the block that lasts until `until`, counted from Redis' time.
pub fn assert_blocked_until(r: &StoreReply, until: Micros) {
    let o = &r.outcomes[0];
    assert!(!o.allowed && o.remaining == 0);
    assert_eq!(o.blocked_until_us, Some(until));
    assert_eq!(o.retry_after_us, Some(until - r.now_us));
}

/// A limit of 1 a minute whose first denial warns and bans its identity for an hour.
pub fn banned_at_first_denial(name: &str, algorithm: Algorithm) -> LimitCall {
    let mut c = call(name, step(algorithm, 1, 60 * S));
    c.step.penalty = Some(PenaltyParams {
        warn_after: 1,
        ban_after: 1,
        ban_us: 3600 * S,
        memory_us: 7200 * S,
    });
    c
}
