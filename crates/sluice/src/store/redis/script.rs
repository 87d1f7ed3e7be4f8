//! The Lua scripts and their wire format: arguments out, outcomes back.
//!
//! Each script is the shared prelude followed by its own parts, concatenated at compile time. The
//! decision script restates [`crate::algorithm::step`] and the algorithm modules; the layout of its
//! KEYS/ARGV/reply is documented in `lua/decide.lua` and mirrored here by [`decide_args`] and
//! [`parse_reply`], which must stay in step with it.

use redis::Script;

use crate::algorithm::{LimitOutcome, Mode};
use crate::model::Algorithm;
use crate::store::{LimitCall, StoreError};

/// The decision script: prelude, one function per algorithm, then the driver.
pub const DECIDE: &str = concat!(
    include_str!("lua/prelude.lua"),
    include_str!("lua/sliding_log.lua"),
    include_str!("lua/sliding_window.lua"),
    include_str!("lua/fixed_window.lua"),
    include_str!("lua/token_bucket.lua"),
    include_str!("lua/gcra.lua"),
    include_str!("lua/leaky_bucket.lua"),
    include_str!("lua/decide.lua"),
);

/// The admin block script.
pub const BLOCK: &str = concat!(
    include_str!("lua/prelude.lua"),
    include_str!("lua/block.lua")
);

/// The admin unblock script.
pub const UNBLOCK: &str = concat!(
    include_str!("lua/prelude.lua"),
    include_str!("lua/unblock.lua")
);

/// The scripts, hashed once.
#[derive(Debug)]
pub struct Scripts {
    /// See [`DECIDE`].
    pub decide: Script,
    /// See [`BLOCK`].
    pub block: Script,
    /// See [`UNBLOCK`].
    pub unblock: Script,
}

impl Default for Scripts {
    /// Hashes the scripts.
    fn default() -> Scripts {
        Scripts {
            decide: Script::new(DECIDE),
            block: Script::new(BLOCK),
            unblock: Script::new(UNBLOCK),
        }
    }
}

/// Values the decision script reads per limit (`ARGS_PER_LIMIT` in `decide.lua`).
pub const ARGS_PER_LIMIT: usize = 13;
/// Values the decision script returns per limit.
pub const REPLY_PER_LIMIT: usize = 8;

/// The number that names an algorithm in the scripts' ARGV.
pub fn algorithm_code(a: Algorithm) -> u8 {
    match a {
        Algorithm::SlidingLog => 1,
        Algorithm::SlidingWindow => 2,
        Algorithm::FixedWindow => 3,
        Algorithm::TokenBucket => 4,
        Algorithm::Gcra => 5,
        Algorithm::LeakyBucket => 6,
    }
}

/// Largest integer the script computes with exactly (2^53).
const LUA_EXACT: u64 = 1 << 53;

/// The ARGV of the decision script. Refuses numbers the script could not compute exactly
/// (a permanent error: the configuration, not the store, is at fault).
pub fn decide_args(
    calls: &[LimitCall],
    mode: Mode,
    now_us: Option<u64>,
    min_ttl_us: u64,
) -> Result<Vec<String>, StoreError> {
    let mut args = Vec::with_capacity(3 + calls.len() * ARGS_PER_LIMIT);
    args.push(if mode == Mode::Peek { "peek" } else { "apply" }.to_string());
    args.push(now_us.map_or_else(String::new, |n| n.to_string()));
    args.push(min_ttl_us.to_string());
    for call in calls {
        let s = &call.step;
        let p = &s.params;
        if p.limit == 0 || p.window_us == 0 {
            return Err(StoreError::permanent(
                "redis",
                format!("limit `{}` has a zero count or window", call.key.limit),
            ));
        }
        let penalty = s.penalty;
        let numbers = [
            p.limit,
            p.window_us,
            p.capacity,
            s.cost,
            s.block_us.unwrap_or(0),
            penalty.map_or(0, |p| p.warn_after),
            penalty.map_or(0, |p| p.ban_after),
            penalty.map_or(0, |p| p.ban_us),
            penalty.map_or(0, |p| p.memory_us),
        ];
        if numbers.iter().any(|&n| n >= LUA_EXACT) {
            return Err(StoreError::permanent(
                "redis",
                format!(
                    "limit `{}` has a number above 2^53 that Lua cannot hold",
                    call.key.limit
                ),
            ));
        }
        let flag = |b: bool| if b { "1" } else { "0" }.to_string();
        args.extend([
            algorithm_code(s.algorithm).to_string(),
            p.limit.to_string(),
            p.window_us.to_string(),
            p.capacity.to_string(),
            flag(p.count_denied),
            s.cost.to_string(),
            s.block_us.map_or_else(String::new, |b| b.to_string()),
            flag(s.enforce),
            flag(penalty.is_some()),
            penalty.map_or(0, |p| p.warn_after).to_string(),
            penalty.map_or(0, |p| p.ban_after).to_string(),
            penalty.map_or(0, |p| p.ban_us).to_string(),
            penalty.map_or(0, |p| p.memory_us).to_string(),
        ]);
    }
    Ok(args)
}

/// Decodes the decision script's reply for `limits` limits: the time and one outcome each.
pub fn parse_reply(reply: &[i64], limits: usize) -> Result<(u64, Vec<LimitOutcome>), StoreError> {
    let bad =
        |what: &str| StoreError::permanent("redis", format!("unexpected script reply: {what}"));
    if reply.len() != 1 + limits * REPLY_PER_LIMIT {
        return Err(bad(&format!("{} values for {limits} limits", reply.len())));
    }
    let unsigned = |v: i64| u64::try_from(v).map_err(|_| bad(&format!("negative value {v}")));
    let optional = |v: i64| {
        if v == -1 {
            Ok(None)
        } else {
            unsigned(v).map(Some)
        }
    };
    let now_us = unsigned(reply[0])?;
    let outcomes = reply[1..]
        .chunks_exact(REPLY_PER_LIMIT)
        .map(|r| {
            Ok(LimitOutcome {
                allowed: r[0] == 1,
                remaining: unsigned(r[1])?,
                reset_after_us: unsigned(r[2])?,
                retry_after_us: optional(r[3])?,
                delay_us: unsigned(r[4])?,
                blocked_until_us: optional(r[5])?,
                violations: unsigned(r[6])?,
                warning: r[7] == 1,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok((now_us, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_decode_and_malformed_ones_are_errors() {
        let reply = [5, 1, 3, 10, -1, 0, -1, 0, 0, 0, 0, 7, 2, 0, 9, 2, 1];
        let (now, o) = parse_reply(&reply, 2).unwrap();
        assert_eq!(now, 5);
        assert!(o[0].allowed && o[0].retry_after_us.is_none());
        assert_eq!(o[1].retry_after_us, Some(2));
        assert_eq!(o[1].blocked_until_us, Some(9));
        assert!(o[1].warning);
        assert!(parse_reply(&reply, 1).is_err());
        assert!(parse_reply(&[1, 1, -5, 0, -1, 0, -1, 0, 0], 1).is_err());
    }

    #[test]
    fn every_script_starts_with_the_prelude_and_has_a_header() {
        for s in [DECIDE, BLOCK, UNBLOCK] {
            assert!(s.starts_with("-- Sluice scripts, shared prelude"));
        }
        assert!(DECIDE.contains(&format!("local ARGS_PER_LIMIT = {ARGS_PER_LIMIT}")));
    }
}
