//! The decision scripts' arguments: each limit's numbers out, as the scripts themselves document
//! them (`lua/one_head.lua`, `lua/many_head.lua`, `lua/decide.lua`). A change to either side must
//! change the other: the Redis store tests and the differential tests send every spec through
//! both.
//!
//! Invariant: every number sent is one Lua computes exactly (below 2^53, products included);
//! a limit that needs more is refused before anything is sent ([`StoreError::permanent`]). The
//! numbers a one-limit or rule script has written into it (`one_script`, `many_script`) are the
//! ones checked here.

use super::super::constants::{ARGS_PER_LIMIT, CODES_M, GIVE_BACK_ARGS};
use crate::algorithm::{Mode, Params};
use crate::model::{Algorithm, Micros};
use crate::store::{LimitCall, StoreError};

/// Times go to the scripts, and come back from them, as integer µs: the one place a [`Micros`]
/// becomes a bare number for Redis.
impl redis::ToRedisArgs for Micros {
    fn write_redis_args<W: ?Sized + redis::RedisWrite>(&self, out: &mut W) {
        self.get().write_redis_args(out);
    }
}

impl redis::FromRedisValue for Micros {
    fn from_redis_value(v: redis::Value) -> Result<Micros, redis::ParsingError> {
        u64::from_redis_value(v).map(Micros::new)
    }
}

/// Largest integer the scripts compute with exactly (2^53).
const LUA_EXACT: u64 = 1 << 53;

/// Refuses numbers (and products) the scripts could not compute exactly: a permanent error, the
/// configuration or the request is at fault, not the store.
pub fn check_exact(call: &LimitCall) -> Result<(), StoreError> {
    let s = &call.step;
    let p = &s.params;
    let refuse = |what: &str| {
        Err(StoreError::permanent(
            "redis",
            format!("limit `{}`: {what}", call.key.limit_id),
        ))
    };
    if p.count == 0 || p.window_us.is_zero() {
        return refuse("zero count or window");
    }
    let penalty = s.penalty;
    let numbers = [
        p.count,
        p.window_us.get(),
        p.capacity,
        s.cost,
        s.block_us.unwrap_or_default().get(),
        penalty.map_or(0, |p| p.warn_after),
        penalty.map_or(0, |p| p.ban_after),
        penalty.map_or(0, |p| p.ban_us.get()),
        penalty.map_or(0, |p| p.memory_us.get()),
    ];
    if numbers.iter().any(|&n| n >= LUA_EXACT) {
        return refuse("a number above 2^53 that Lua cannot hold");
    }
    // The largest products the algorithms form: capacity (or cost) times the emission interval.
    let t = p.emission_interval_us().get();
    if p.capacity
        .max(s.cost)
        .checked_mul(t)
        .is_none_or(|v| v >= LUA_EXACT)
    {
        return refuse("capacity or cost times the emission interval reaches 2^53");
    }
    Ok(())
}

pub fn now_arg(now_us: Option<Micros>) -> String {
    now_us.map_or_else(String::new, |n| n.get().to_string())
}

fn mode_arg(mode: Mode) -> &'static str {
    if mode == Mode::Peek { "peek" } else { "apply" }
}

fn flag(b: bool) -> &'static str {
    if b { "1" } else { "0" }
}

/// The `EVALSHA` of the one-limit, rule or shared script whose SHA-1 is `hash` (`one_script`,
/// `many_script`, `shared_script`): `keys` (each state key and, in a rule script, the violations
/// key of a penalty after it), then the ARGV `lua/one_head.lua`, `lua/many_head.lua` and
/// `lua/shared_call.lua` list: each limit's cost (a rule script reads `every_cost`; one-limit
/// scripts on Redis `TIME` get none when all are 1), then the time from a client clock (none on
/// Redis `TIME`). This is nearly every admitted request's call. The caller has checked each limit
/// ([`check_exact`]).
pub fn spec_command<'a>(
    hash: &str,
    keys: impl Iterator<Item = &'a String> + Clone,
    costs: impl Iterator<Item = u64> + Clone,
    every_cost: bool,
    now_us: Option<Micros>,
) -> redis::Cmd {
    let (key_count, cost_count) = (keys.clone().count(), costs.clone().count());
    // Sized for its arguments (a u64 is at most 20 digits): building it reallocates nothing.
    let data = "EVALSHA".len()
        + hash.len()
        + keys.clone().map(String::len).sum::<usize>()
        + 20 * (2 + cost_count);
    let mut cmd = redis::Cmd::with_capacity(4 + key_count + cost_count, data);
    cmd.arg("EVALSHA").arg(hash).arg(key_count);
    for key in keys {
        cmd.arg(key);
    }
    if every_cost || now_us.is_some() || costs.clone().any(|c| c != 1) {
        for cost in costs {
            cmd.arg(cost);
        }
    }
    if let Some(now) = now_us {
        cmd.arg(now.get());
    }
    cmd
}

/// One limit's values in the give-back script's ARGV (`lua/give_back.lua`): its algorithm, its
/// numbers and the units to give back, and for a quota the start of its period that held `at_us`,
/// when the units were taken (the window the script gives them back to).
pub fn give_back_args(
    algorithm: Algorithm,
    p: &Params,
    units: u64,
    at_us: Micros,
) -> [String; GIVE_BACK_ARGS] {
    let start = p.period.map_or_else(String::new, |period| {
        period.bounds_at(at_us).start.get().to_string()
    });
    [
        algorithm.wire_code().to_string(),
        p.count.to_string(),
        p.window_us.get().to_string(),
        p.capacity.to_string(),
        units.to_string(),
        start,
    ]
}

/// The ARGV of the general decision script (`lua/decide.lua`); a quota's window is its period
/// that holds `period_at`, a settable monthly quota's from the billing day its identity is
/// `assumed` to keep (one per call, `None`: none, the limit's own; see `anchors`; empty: none
/// for every call).
pub fn decide_args(
    calls: &[LimitCall],
    mode: Mode,
    now_us: Option<Micros>,
    period_at: Micros,
    min_ttl_us: Micros,
    assumed: &[Option<u8>],
) -> Result<Vec<String>, StoreError> {
    let mut args = Vec::with_capacity(4 + calls.len() * ARGS_PER_LIMIT);
    args.push(now_arg(now_us));
    args.push(min_ttl_us.get().to_string());
    args.push(mode_arg(mode).to_string());
    // One token per request: every concurrency limit of it takes its lease under the same one.
    let lease = calls.iter().find_map(|c| c.step.lease);
    args.push(lease.map_or_else(String::new, |t| t.to_string()));
    for (i, call) in calls.iter().enumerate() {
        check_exact(call)?;
        let s = &call.step;
        let day = assumed.get(i).copied().flatten();
        let p = &s.params;
        let penalty = s.penalty;
        let or_none = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
        let micros = |v: Micros| v.get().to_string();
        let code = s.algorithm.wire_code();
        let (window, start) = match p.period {
            Some(period) => {
                let period = day.map_or(period, |day| period.with_anchor(day));
                let bounds = period.bounds_at(period_at);
                (bounds.end - bounds.start, micros(bounds.start))
            }
            None => (p.window_us, String::new()),
        };
        args.extend([
            // Negated for a settable limit: the script then reads the identity's numbers, and
            // checks the billing day it keeps against the one assumed, above the code.
            if s.settable {
                let day = u64::from(day.unwrap_or(0));
                format!("-{}", u64::from(code) + CODES_M * day)
            } else {
                code.to_string()
            },
            p.count.to_string(),
            micros(window),
            p.capacity.to_string(),
            s.cost.to_string(),
            flag(p.count_denied).to_string(),
            // A quota that admits past itself is a shadow that counts what passes.
            if p.admits_over { "2" } else { flag(s.shadow) }.to_string(),
            or_none(s.block_us.map(Micros::get)),
            or_none(penalty.map(|p| p.warn_after)),
            penalty.map_or(0, |p| p.ban_after).to_string(),
            micros(penalty.map_or(Micros::ZERO, |p| p.ban_us)),
            micros(penalty.map_or(Micros::ZERO, |p| p.memory_us)),
            start,
        ]);
    }
    Ok(args)
}
