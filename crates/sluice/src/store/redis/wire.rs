//! The scripts' wire format: each limit's arguments out, the outcomes back, as documented in
//! the scripts themselves (`lua/one_head.lua`, `lua/decide.lua`). A change to either side must
//! change the other: the Redis store tests and the differential tests send every shape through
//! both.
//!
//! Invariant: every number sent is one Lua computes exactly (below 2^53, products included);
//! a limit that needs more is refused before anything is sent ([`StoreError::permanent`]). The
//! numbers a one-limit or rule script has written into it (`one_script`, `many_script`) are the
//! ones checked here.

use smallvec::SmallVec;

use crate::algorithm::{LimitOutcome, Mode, RuntimeNumbers};
use crate::model::Micros;
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

/// Values `decide.lua` reads per limit (`ARGS_PER_LIMIT` there).
pub const ARGS_PER_LIMIT: usize = 12;
/// Values the decision scripts return per limit.
pub const REPLY_PER_LIMIT: usize = 8;

/// Largest integer the scripts compute with exactly (2^53).
const LUA_EXACT: u64 = 1 << 53;

/// Refuses numbers (and products) the scripts could not compute exactly: a permanent error, the
/// configuration or the request is at fault, not the store.
pub(super) fn check_exact(call: &LimitCall) -> Result<(), StoreError> {
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

pub(super) fn now_arg(now_us: Option<Micros>) -> String {
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
pub fn shaped_command<'a>(
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

/// The ARGV of the general decision script (`lua/decide.lua`).
pub fn decide_args(
    calls: &[LimitCall],
    mode: Mode,
    now_us: Option<Micros>,
    min_ttl_us: Micros,
) -> Result<Vec<String>, StoreError> {
    let mut args = Vec::with_capacity(4 + calls.len() * ARGS_PER_LIMIT);
    args.push(now_arg(now_us));
    args.push(min_ttl_us.get().to_string());
    args.push(mode_arg(mode).to_string());
    // One token per request: every concurrency limit of it takes its lease under the same one.
    let lease = calls.iter().find_map(|c| c.step.lease);
    args.push(lease.map_or_else(String::new, |t| t.to_string()));
    for call in calls {
        check_exact(call)?;
        let s = &call.step;
        let p = &s.params;
        let penalty = s.penalty;
        let or_none = |v: Option<u64>| v.map_or_else(String::new, |v| v.to_string());
        let micros = |v: Micros| v.get().to_string();
        let code = s.algorithm.wire_code();
        args.extend([
            // Negated for a settable limit: the script then reads the identity's numbers.
            if s.settable {
                format!("-{code}")
            } else {
                code.to_string()
            },
            p.count.to_string(),
            micros(p.window_us),
            p.capacity.to_string(),
            s.cost.to_string(),
            flag(p.count_denied).to_string(),
            flag(s.shadow).to_string(),
            or_none(s.block_us.map(Micros::get)),
            or_none(penalty.map(|p| p.warn_after)),
            penalty.map_or(0, |p| p.ban_after).to_string(),
            micros(penalty.map_or(Micros::ZERO, |p| p.ban_us)),
            micros(penalty.map_or(Micros::ZERO, |p| p.memory_us)),
        ]);
    }
    Ok(args)
}

/// Values a one-limit or rule script returns per limit, after the time: allowed, remaining,
/// reset and retry.
pub const SHAPED_REPLY_PER_LIMIT: usize = 4;

/// Values per limit when a limit has a block or a penalty: [`SHAPED_REPLY_PER_LIMIT`], then the
/// violations and the warning.
pub const GUARDED_REPLY_PER_LIMIT: usize = 6;

/// Decodes the reply of a one-limit script (`one_<algorithm>`) or a rule script for `limits`
/// limits: `None` when it left the request to the general script. A one-limit script's answer
/// for a block in force, read from its text by [`parse_marker_text`], is the general script's.
pub fn parse_shaped_reply(
    reply: &[i64],
    limits: usize,
) -> Result<Option<(Micros, Vec<LimitOutcome>)>, StoreError> {
    if reply.is_empty() {
        return Ok(None);
    }
    let values = reply.len() - 1;
    let per_limit = values.checked_div(limits).unwrap_or(0);
    let shaped = values.is_multiple_of(limits)
        && matches!(per_limit, SHAPED_REPLY_PER_LIMIT | GUARDED_REPLY_PER_LIMIT);
    if !shaped {
        return parse_reply(reply, limits).map(Some);
    }
    // No delay (the leaky bucket has no such script), no block in force; no violations without
    // a block or penalty.
    let mut full = Vec::with_capacity(1 + limits * REPLY_PER_LIMIT);
    full.push(reply[0]);
    for r in reply[1..].chunks_exact(per_limit) {
        full.extend_from_slice(&r[..SHAPED_REPLY_PER_LIMIT]);
        let (violations, warning) = match r {
            [.., violations, warning] if per_limit == GUARDED_REPLY_PER_LIMIT => {
                (*violations, *warning)
            }
            _ => (0, 0),
        };
        full.extend_from_slice(&[0, -1, violations, warning]);
    }
    parse_reply(&full, limits).map(Some)
}

/// Decodes a one-limit script's answer for a block in force, `<marker> <now> <violations>
/// <warning>` (`lua/marker_answer.lua`; the marker is `B<end>` or `B0<end>`, perhaps followed by
/// the copy of its violations, ` <count> <forgotten at>`, see `lua/prelude.lua`), into the
/// general script's reply for one limit. The violations are the answer's own, counted at its time.
pub fn parse_marker_text(text: &[u8]) -> Result<Vec<i64>, StoreError> {
    parse_text(text, |text| {
        let words = text
            .strip_prefix('B')?
            .split(' ')
            .map(|word| word.parse::<i64>().ok())
            .collect::<Option<SmallVec<[i64; 6]>>>()?;
        let (end, now, violations, warning) = match words.as_slice() {
            [end, now, violations, warning] | [end, _, _, now, violations, warning] => {
                (*end, *now, *violations, *warning)
            }
            _ => return None,
        };
        let left = end.checked_sub(now).filter(|&left| left > 0)?;
        Some(vec![now, 0, 0, left, left, 0, end, violations, warning])
    })
}

/// A script's answer given as one text value, decoded by `parse`; `None` from it (or text that is
/// not UTF-8) is an unexpected reply.
pub fn parse_text<T>(text: &[u8], parse: impl FnOnce(&str) -> Option<T>) -> Result<T, StoreError> {
    std::str::from_utf8(text)
        .ok()
        .and_then(parse)
        .ok_or_else(|| {
            let text = String::from_utf8_lossy(text);
            StoreError::permanent("redis", format!("unexpected script reply: {text}"))
        })
}

/// Decodes the decision script's reply for `limits` limits: the time and one outcome each.
pub fn parse_reply(
    reply: &[i64],
    limits: usize,
) -> Result<(Micros, Vec<LimitOutcome>), StoreError> {
    let bad =
        |what: &str| StoreError::permanent("redis", format!("unexpected script reply: {what}"));
    if reply.len() != 1 + limits * REPLY_PER_LIMIT {
        return Err(bad(&format!("{} values for {limits} limits", reply.len())));
    }
    let unsigned = |v: i64| u64::try_from(v).map_err(|_| bad(&format!("negative value {v}")));
    let micros = |v: i64| unsigned(v).map(Micros::new);
    let optional = |v: i64| {
        if v == -1 {
            Ok(None)
        } else {
            micros(v).map(Some)
        }
    };
    let now_us = micros(reply[0])?;
    let outcomes = reply[1..]
        .chunks_exact(REPLY_PER_LIMIT)
        .map(|r| {
            Ok(LimitOutcome {
                allowed: r[0] == 1,
                remaining: unsigned(r[1])?,
                reset_after_us: micros(r[2])?,
                retry_after_us: optional(r[3])?,
                delay_us: micros(r[4])?,
                blocked_until_us: optional(r[5])?,
                violations: unsigned(r[6])?,
                warning: r[7] == 1,
                runtime: None,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok((now_us, outcomes))
}

/// Gives each settable limit's outcome the run-time numbers `lua/decide.lua` decided it with:
/// `values` holds a count and a capacity per settable call, in call order (0, 0: none set).
pub fn attach_runtime(
    outcomes: &mut [LimitOutcome],
    calls: &[LimitCall],
    values: &[i64],
) -> Result<(), StoreError> {
    let mut pairs = values.chunks_exact(2);
    for (outcome, _) in outcomes
        .iter_mut()
        .zip(calls)
        .filter(|(_, c)| c.step.settable)
    {
        let Some(&[count, capacity]) = pairs.next() else {
            return Err(unexpected_runtime(values));
        };
        outcome.runtime = match (u64::try_from(count), u64::try_from(capacity)) {
            (Ok(0), Ok(0)) => None,
            (Ok(count @ 1..), Ok(capacity @ 1..)) => Some(RuntimeNumbers { count, capacity }),
            _ => return Err(unexpected_runtime(values)),
        };
    }
    if pairs.next().is_some() || !pairs.remainder().is_empty() {
        return Err(unexpected_runtime(values));
    }
    Ok(())
}

fn unexpected_runtime(values: &[i64]) -> StoreError {
    StoreError::permanent(
        "redis",
        format!("unexpected run-time numbers in a script reply: {values:?}"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_decode_and_malformed_ones_are_errors() {
        let reply = [5, 1, 3, 10, -1, 0, -1, 0, 0, 0, 0, 7, 2, 0, 9, 2, 1];
        let (now, o) = parse_reply(&reply, 2).unwrap();
        assert_eq!(now, Micros::new(5));
        assert!(o[0].allowed && o[0].retry_after_us.is_none());
        assert_eq!(o[1].retry_after_us, Some(Micros::new(2)));
        assert_eq!(o[1].blocked_until_us, Some(Micros::new(9)));
        assert!(o[1].warning);
        assert!(parse_reply(&reply, 1).is_err());
        assert!(parse_reply(&[1, 1, -5, 0, -1, 0, -1, 0, 0], 1).is_err());
    }

    #[test]
    fn a_block_in_force_decodes_from_its_text_as_the_general_reply() {
        let reply = parse_marker_text(b"B1000 400 3 1").unwrap();
        assert_eq!(reply, [400, 0, 0, 600, 600, 0, 1000, 3, 1]);
        let (now, o) = parse_reply(&reply, 1).unwrap();
        assert_eq!(now, Micros::new(400));
        assert!(!o[0].allowed);
        assert_eq!(o[0].retry_after_us, Some(Micros::new(600)));
        assert_eq!(o[0].blocked_until_us, Some(Micros::new(1000)));
        assert_eq!((o[0].violations, o[0].warning), (3, true));
        // A marker that expires with its block (`B0`) reads the same.
        assert_eq!(parse_marker_text(b"B01000 400 0 0").unwrap()[6], 1000);
        // So does one with the copy of its violations: the answer's own count is the one taken.
        assert_eq!(parse_marker_text(b"B01000 3 5000 400 3 1").unwrap(), reply);
        for bad in [
            &b"1000 400 0 0"[..],
            b"B1000 400 0",
            b"B1000 400 0 0 0",
            b"B1000 3 5000 400 3 1 0",
            b"B1000 1000 0 0",
            b"B1000 4e2 0 0",
            b"B\xff",
        ] {
            assert!(parse_marker_text(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn shaped_replies_decode_as_the_general_one() {
        assert_eq!(parse_shaped_reply(&[], 2).unwrap(), None);
        let one = parse_shaped_reply(&[5, 0, 0, 10, 7, 2, 1], 1)
            .unwrap()
            .unwrap();
        assert_eq!(one.1[0].retry_after_us, Some(Micros::new(7)));
        assert_eq!((one.1[0].violations, one.1[0].warning), (2, true));
        let unguarded = parse_shaped_reply(&[5, 1, 3, 10, -1], 1).unwrap().unwrap();
        assert_eq!(unguarded.0, Micros::new(5));
        let o = &unguarded.1[0];
        assert!(o.allowed && o.retry_after_us.is_none() && o.blocked_until_us.is_none());
        assert_eq!((o.remaining, o.violations, o.warning), (3, 0, false));
        assert!(parse_shaped_reply(&[5, 1, 3, 10], 1).is_err());
        let (now, many) = parse_shaped_reply(&[5, 1, 3, 10, -1, 0, 0, 4, 4], 2)
            .unwrap()
            .unwrap();
        assert_eq!(now, Micros::new(5));
        assert!(many[0].allowed && many[0].retry_after_us.is_none());
        assert_eq!(many[1].retry_after_us, Some(Micros::new(4)));
        assert_eq!(many[1].blocked_until_us, None);
        assert!(parse_shaped_reply(&[5, 1, 3, 10, -1, 0], 2).is_err());
        let (_, guarded) = parse_shaped_reply(&[5, 1, 3, 10, -1, 0, 0, 1, 4, 9, -1, 2, 1], 2)
            .unwrap()
            .unwrap();
        assert_eq!((guarded[0].violations, guarded[0].warning), (0, false));
        assert_eq!(
            (guarded[1].remaining, guarded[1].reset_after_us),
            (4, Micros::new(9))
        );
        assert_eq!((guarded[1].violations, guarded[1].warning), (2, true));
        assert_eq!(guarded[1].blocked_until_us, None);
    }
}
