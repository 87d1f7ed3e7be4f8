//! The Lua scripts and their wire format: arguments out, outcomes back.
//!
//! Which script decides a request depends on its shape ([`Scripts::for_calls`]):
//! - one limit, applied (the common case): `one_<algorithm>.lua`, a script written for that
//!   algorithm alone, at the floor of what Redis must do. It handles the state it expects and
//!   answers `{}` for anything else (a block marker, another algorithm's state, for the sliding
//!   log a denial), having written nothing; the store then sends the general script. For a limit
//!   with a block or a penalty it also answers a block in force and reports the penalty's
//!   violations, and leaves every denial (which blocks and counts a violation) to the general
//!   script. The leaky bucket has none.
//! - anything else (several limits, a peek, what a one-limit script left): `decide`, the
//!   prelude, every algorithm and `lua/decide.lua`, which restates [`crate::algorithm::step`].
//!   Its first part, `lua/blocked.lua`, answers a one-limit request of a blocked identity before
//!   anything else (a blocked identity costs Redis a read), and otherwise keeps its read for the
//!   look.
//!
//! The general decision runs as a Redis function ([`Library`], `FCALL`): the prelude and the
//! algorithms are defined once, when the library is loaded, where a script defines them again on
//! every call (about 4.5 µs of Redis time, more than most decisions). The same code is kept as
//! the script [`DECIDE`] for a server that refuses functions.
//!
//! The layout of KEYS/ARGV/reply is documented in each script and mirrored here by [`one_args`],
//! [`decide_args`] and [`parse_reply`], which must stay in step with them.

use redis::Script;

use crate::algorithm::{LimitOutcome, Mode};
use crate::model::Micros;
use crate::model::REGISTRY;
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

/// The shared part of every script but the one-limit ones, as one literal: `lua/idiv.lua` and
/// `lua/prelude.lua` (a macro, so that `concat!` can join it to each script's own parts).
macro_rules! prelude {
    () => {
        concat!(
            include_str!("lua/idiv.lua"),
            include_str!("lua/prelude.lua")
        )
    };
}
pub(crate) use prelude;

/// A one-limit script: `lua/one_head.lua` (the time and the limit's arguments), the parts it
/// names (`idiv.lua` for those that divide), then `lua/one_<algorithm>.lua`.
macro_rules! one {
    ($($part:literal),+) => {
        Some(concat!(include_str!("lua/one_head.lua"), $(include_str!(concat!("lua/", $part))),+))
    };
}

/// The one-limit scripts, in registry order ([`crate::model::REGISTRY`]: index = wire code - 1).
pub const ONE: [Option<&str>; REGISTRY.len()] = [
    one!("one_sliding_log.lua"),
    one!("idiv.lua", "one_sliding_window.lua"),
    one!("idiv.lua", "one_fixed_window.lua"),
    one!("one_token_bucket.lua"),
    one!("idiv.lua", "one_gcra.lua"),
    None,
    None,
];

/// The definitions the general decision uses, as one literal: the prelude and every algorithm,
/// in registry order (a macro, so that [`DECIDE`] and [`DEFINITIONS`] share the one list).
macro_rules! definitions {
    () => {
        concat!(
            prelude!(),
            include_str!("lua/sliding_log.lua"),
            include_str!("lua/sliding_window.lua"),
            include_str!("lua/fixed_window.lua"),
            include_str!("lua/token_bucket.lua"),
            include_str!("lua/gcra.lua"),
            include_str!("lua/leaky_bucket.lua"),
            include_str!("lua/concurrency.lua"),
        )
    };
}

/// The general decision script: the definitions, then the driver (the blocked answer first).
pub const DECIDE: &str = concat!(
    definitions!(),
    include_str!("lua/blocked.lua"),
    include_str!("lua/decide.lua"),
);

/// The definitions the general decision uses (see [`definitions!`]).
const DEFINITIONS: &str = definitions!();

/// The general decision as a function library (`FUNCTION LOAD`): [`DEFINITIONS`] run once when
/// it loads; the function runs `lua/blocked.lua` and `lua/decide.lua` with `KEYS` and `ARGV` as
/// its parameters, so the driver's code is the script's, unchanged. The library and function
/// names carry a hash of the code, so Sluice versions that differ never call each other's.
#[derive(Debug, Clone)]
pub struct Library {
    /// The source for `FUNCTION LOAD REPLACE`.
    pub source: String,
    /// The name to `FCALL`.
    pub function: String,
}

impl Library {
    fn new() -> Library {
        let driver = concat!(
            include_str!("lua/blocked.lua"),
            include_str!("lua/decide.lua")
        );
        let hash = Script::new(&format!("{DEFINITIONS}{driver}")).get_hash()[..12].to_string();
        let function = format!("sluice_decide_{hash}");
        let source = format!(
            "#!lua name=sluice_{hash}\n{DEFINITIONS}\nlocal function decide(KEYS, ARGV)\n{driver}\nend\n\
             redis.register_function('{function}', decide)\n"
        );
        Library { source, function }
    }
}

/// The admin block script.
pub const BLOCK: &str = concat!(prelude!(), include_str!("lua/block.lua"));

/// The admin unblock script.
pub const UNBLOCK: &str = concat!(prelude!(), include_str!("lua/unblock.lua"));

/// The release and renew script of concurrency limits' leases.
pub const LEASE: &str = concat!(prelude!(), include_str!("lua/lease.lua"));

/// The settle script of reservations.
pub const SETTLE: &str = concat!(prelude!(), include_str!("lua/settle.lua"));

/// The scripts, hashed once.
#[derive(Debug)]
pub struct Scripts {
    /// See [`ONE`].
    pub one: [Option<Script>; REGISTRY.len()],
    /// See [`DECIDE`].
    pub decide: Script,
    /// See [`BLOCK`].
    pub block: Script,
    /// See [`UNBLOCK`].
    pub unblock: Script,
    /// See [`LEASE`].
    pub lease: Script,
    /// See [`SETTLE`].
    pub settle: Script,
    /// See [`Library`].
    pub library: Library,
}

impl Default for Scripts {
    /// Hashes the scripts.
    fn default() -> Scripts {
        Scripts {
            one: ONE.map(|s| s.map(Script::new)),
            decide: Script::new(DECIDE),
            block: Script::new(BLOCK),
            unblock: Script::new(UNBLOCK),
            lease: Script::new(LEASE),
            settle: Script::new(SETTLE),
            library: Library::new(),
        }
    }
}

impl Scripts {
    /// Every script, for loading them all.
    pub fn all(&self) -> impl Iterator<Item = &Script> {
        self.one.iter().flatten().chain([
            &self.decide,
            &self.block,
            &self.unblock,
            &self.lease,
            &self.settle,
        ])
    }

    /// The one-limit script that decides these calls, if they have that shape.
    pub fn one_for(&self, calls: &[LimitCall], mode: Mode) -> Option<&Script> {
        match calls {
            [call] if mode == Mode::Apply => {
                self.one[usize::from(call.step.algorithm.wire_code()) - 1].as_ref()
            }
            _ => None,
        }
    }
}

/// Whether a limit keeps a block key and a violations key beside its state.
pub fn guarded(call: &LimitCall) -> bool {
    call.step.block_us.is_some() || call.step.penalty.is_some()
}

/// Values `decide.lua` reads per limit (`ARGS_PER_LIMIT` there).
pub const ARGS_PER_LIMIT: usize = 12;
/// Values the decision scripts return per limit.
pub const REPLY_PER_LIMIT: usize = 8;

/// Largest integer the scripts compute with exactly (2^53).
const LUA_EXACT: u64 = 1 << 53;

/// Refuses numbers (and products) the scripts could not compute exactly: a permanent error, the
/// configuration or the request is at fault, not the store.
fn check_exact(call: &LimitCall) -> Result<(), StoreError> {
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

/// The ARGV of a `one_<algorithm>` script (`lua/one_head.lua` lists them). Its KEYS are the state
/// key and, with a penalty, the violations key.
pub fn one_args(
    call: &LimitCall,
    now_us: Option<Micros>,
    min_ttl_us: Micros,
) -> Result<[String; 9], StoreError> {
    check_exact(call)?;
    let s = &call.step;
    Ok([
        now_arg(now_us),
        min_ttl_us.get().to_string(),
        s.params.count.to_string(),
        s.params.window_us.get().to_string(),
        s.params.capacity.to_string(),
        s.cost.to_string(),
        flag(s.params.count_denied).to_string(),
        flag(guarded(call)).to_string(),
        s.penalty
            .map_or_else(String::new, |p| p.warn_after.to_string()),
    ])
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
        args.extend([
            s.algorithm.wire_code().to_string(),
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

/// Values a `one_<algorithm>` script returns (but for a block in force, answered as the general
/// script answers one limit).
pub const ONE_REPLY: usize = 7;

/// Decodes a `one_<algorithm>` script's reply: `None` when it left the request to the general
/// script.
pub fn parse_one_reply(reply: &[i64]) -> Result<Option<(Micros, LimitOutcome)>, StoreError> {
    if reply.is_empty() {
        return Ok(None);
    }
    let mut full = Vec::with_capacity(1 + REPLY_PER_LIMIT);
    if reply.len() == ONE_REPLY {
        // No delay (the leaky bucket has no one-limit script), no block in force.
        full.extend_from_slice(&reply[..5]);
        full.extend_from_slice(&[0, -1, reply[5], reply[6]]);
    } else {
        full.extend_from_slice(reply);
    }
    let (now, mut outcomes) = parse_reply(&full, 1)?;
    Ok(outcomes.pop().map(|o| (now, o)))
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
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok((now_us, outcomes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Algorithm;

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
    fn every_script_starts_with_the_prelude_and_has_a_header() {
        for s in [DECIDE, BLOCK, UNBLOCK, LEASE, SETTLE] {
            assert!(s.starts_with(prelude!()));
        }
        let library = Library::new();
        assert!(library.source.starts_with("#!lua name=sluice_"));
        assert!(library.source.contains(DEFINITIONS));
        assert!(DECIDE.contains(include_str!("lua/blocked.lua")));
        assert!(DECIDE.contains(&format!("local ARGS_PER_LIMIT = {ARGS_PER_LIMIT}")));
        for a in Algorithm::ALL {
            if let Some(one) = ONE[usize::from(a.wire_code()) - 1] {
                assert!(one.starts_with(include_str!("lua/one_head.lua")));
                assert!(one.contains(&format!("\n-- one_{}: ", a.name())));
            }
        }
    }
}
