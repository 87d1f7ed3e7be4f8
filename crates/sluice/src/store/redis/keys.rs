//! Redis key names, and back.
//!
//! - The algorithm's state: `{prefix}:{limit hash}{{identity}}`, e.g. `sluice:Xq3v_9aZ{ip=1.2.3.4}`.
//!   The limit hash is 8 URL-safe base64 characters (48 bits of FNV-1a over the rule name and the
//!   limit id): short, because the state key is the one Redis holds per identity and its name is
//!   most of its memory. [`state_key_readable`] is its readable form, for docs and debugging.
//! - While blocked, the state is parked at `{state key}:h` (see `lua/prelude.lua`).
//! - The block end `{prefix}:{rule}:{limit id}:{{identity}}:b`, written only for blocks, keeps a
//!   readable name: admin listings scan block keys and parse them back.
//! - The run-time numbers of an identity of a settable limit, `{state key}:r` (no expiry: kept
//!   until removed; a reset leaves them), which the general decision reads by name from its
//!   state key, and their listing `{prefix}:{rule}:{limit id}:runtime` ([`runtime_index`]).
//! - The remembered violations of a limit with a penalty, `{state key}:v`: a one-limit script
//!   names it from its state key rather than take it as an argument, which would cost Redis about
//!   1,500 instructions a call.
//!
//! The identity sits inside a Redis Cluster hash tag, so every key of one identity of a limit —
//! and of all the limits of a rule counting by the same identity — shares a slot. Rule names,
//! limit ids and escaped identities never contain `:`, `{` or `}` (see [`crate::limiter::identity`]
//! and [`crate::model`]), so a key has exactly one parse and a block key can be turned back into
//! its [`LimitKey`].
//!
//! # State formats
//! | algorithm | state key | type |
//! | --- | --- | --- |
//! | `sliding_log` | one member `"<start, 16 digits>:<units>"` per recorded request, score = time; `start` counts the units recorded before it, so a count is one subtraction | ZSET |
//! | `sliding_window` | field = bucket index, value = units; stale buckets deleted by the script (Redis 7.0 has no `HEXPIRE`) | HASH |
//! | `fixed_window` | `-(slot × 2^25 + count)`, slot = window index mod (2^28 − 1) + 1 (`constants::FIXED_WINDOW_M`, `FIXED_WINDOW_SLOTS`): one integer, counted by `DECRBY`; flagged `slot × 2^25 + (2^25 − 1 − count)` while a penalty remembers violations | integer |
//! | `token_bucket` | `t<used level>:<last>` | string |
//! | `gcra` | the tat (µs) | integer |
//! | `leaky_bucket` | `l<queue level>:<last>` | string |
//! | `concurrency` | one member per lease, its token scored by its end; `u<token>` scored -units for a lease of several units, `#` scored -(their extra units) | ZSET |
//!
//! Every key is written with a whole-millisecond expiry, rounded up (absolute, `PEXPIREAT` /
//! `SET PXAT`, from the `TIME` the decision read; relative, `PEXPIRE` / `SET PX`, on a client's
//! clock), equal to the time after which it can no longer affect a decision: the newest unit
//! leaving the window, the end of the window, the bucket being back to full, the block's end,
//! the violations' memory.
//! A state that is already equivalent to no state is deleted instead. Besides the run-time
//! numbers, the one key without an expiry is the key format's marker, `{prefix}:format` (see
//! `format`). Upgrading from a version with the former key names starts every counter afresh
//! (the old keys expire by themselves).
//!
//! # Memory per key
//! `MEMORY USAGE <key> SAMPLES 0` on Redis 7.0.15 (Debian's `redis-server`, 64-bit, jemalloc),
//! key name and Redis' per-key overhead included, for one request in the window, beside the
//! minimal scripts of the benchmark kit (`scripts/floor/*.lua`, key `k:000000012345`). The
//! rule and limit names never matter (they are hashed); the identity and the prefix do. Measured
//! 2026-11-22 by writing each format with `redis-cli`; `scripts/redis_floor.py` samples the keys
//! of a real run (`bytes per key` in BENCHMARKS.md):
//!
//! | algorithm | minimal | `sluice:…{key=k12345}` | `sluice:…{ip=203.0.113.9}` |
//! | --- | --- | --- | --- |
//! | `gcra` (integer) | 56 | 72 (+16) | 88 (+32) |
//! | `fixed_window` (integer) | 56 | 72 (+16) | 88 (+32) |
//! | `token_bucket` (string / the minimal's hash) | 104 | 104 (+0) | 120 (+16) |
//! | `sliding_window`, one bucket | 72 | 88 (+16) | 104 (+32) |
//! | `sliding_log`, 1 / 11 requests | 104 / 440 | 120 (+16) / — | 136 (+32) / 472 (+32) |
//!
//! Jemalloc rounds the key name's allocation to 16-byte classes: the 8-character limit hash, the
//! braces and the prefix put a name one class above the minimal `k:<12 digits>` for identities
//! up to about 10 bytes, two for longer ones; a shorter prefix (`RedisOptions::prefix`) gives one
//! class back. A sliding log holds one member per request (about 30 bytes while it is a listpack,
//! up to 128 members, about 100 as a skiplist beyond), whatever each request's cost. A blocked
//! identity has a marker in its state key, its parked state and a block key (88 bytes); a limit
//! with a penalty adds the violations key (120 bytes), and its marker holds their copy (136
//! bytes with it, `{ip=203.0.113.9}`; the `redis_memory` test prints these, 2026-11-27).

use super::constants::{BLOCK, FIXED_WINDOW_SLOTS, PARKED, PERIOD_SLOT_US, RUNTIME, VIOLATIONS};
use crate::model::Micros;
use crate::store::{LimitCall, LimitKey};

/// The part of an identity's state a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The algorithm's state (or a block marker while blocked).
    Counter,
    /// The state parked while the identity is blocked (`{state key}:h`).
    Parked,
    /// The block end, for listings (`:b`).
    Block,
    /// The remembered violations (`{state key}:v`).
    Violations,
    /// The identity's numbers set at run time (`{state key}:r`), on a settable limit.
    Runtime,
}

/// A calendar period's slot in its fixed-window key (`lua/fixed_window.lua`, `fixed_window_slot`).
pub fn period_slot(start: Micros) -> u64 {
    start.get() / PERIOD_SLOT_US % FIXED_WINDOW_SLOTS + 1
}

/// The 8-character hash of a rule's limit in state keys.
pub fn limit_hash(rule: &str, limit: &str) -> [u8; 8] {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    // FNV-1a over the rule, a byte no UTF-8 text holds, and the limit. Each part is folded on
    // its own: a chained iterator costs several instructions a byte, and every decision on Redis
    // names its state key.
    let fnv = |h: u64, bytes: &[u8]| {
        bytes
            .iter()
            .fold(h, |h, &b| (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3))
    };
    let h = fnv(
        fnv(fnv(0xcbf2_9ce4_8422_2325, rule.as_bytes()), &[0xff]),
        limit.as_bytes(),
    );
    let mut out = [0u8; 8];
    for (i, c) in out.iter_mut().enumerate() {
        *c = ALPHABET[((h >> (i * 6)) & 63) as usize];
    }
    out
}

/// The state key of a limit key.
pub fn state_key(prefix: &str, k: &LimitKey) -> String {
    let hash = limit_hash(&k.rule, &k.limit_id);
    let mut key = String::with_capacity(prefix.len() + k.identity.len() + 11);
    key.push_str(prefix);
    key.push(':');
    // The alphabet is ASCII: the hash is always text.
    key.push_str(std::str::from_utf8(&hash).unwrap_or_default());
    key.push('{');
    key.push_str(&k.identity);
    key.push('}');
    key
}

/// The readable form of a state key, `{prefix}:{rule}:{limit id}:{{identity}}`, as documentation
/// and listings show it.
pub fn state_key_readable(prefix: &str, k: &LimitKey) -> String {
    format!("{prefix}:{}:{}:{{{}}}", k.rule, k.limit_id, k.identity)
}

/// The key of one part of a limit key's state.
pub fn key(prefix: &str, k: &LimitKey, part: Part) -> String {
    match part {
        Part::Counter => state_key(prefix, k),
        Part::Block => format!("{}{BLOCK}", state_key_readable(prefix, k)),
        Part::Violations => format!("{}{VIOLATIONS}", state_key(prefix, k)),
        Part::Parked => format!("{}{PARKED}", state_key(prefix, k)),
        Part::Runtime => format!("{}{RUNTIME}", state_key(prefix, k)),
    }
}

/// The listing of a limit's run-time numbers, `{prefix}:{rule}:{limit id}:runtime` (a hash:
/// escaped identity → its stored numbers, `"<count> <capacity>[ <day>]"`). It bounds how many identities a limit holds and
/// lists them; decisions never read it.
pub fn runtime_index(prefix: &str, rule: &str, limit_id: &str) -> String {
    format!("{prefix}:{rule}:{limit_id}:runtime")
}

/// Every key a limit key may have: state, parked state, block, violations.
pub fn all(prefix: &str, k: &LimitKey) -> [String; 4] {
    [Part::Counter, Part::Parked, Part::Block, Part::Violations].map(|part| key(prefix, k, part))
}

/// Whether a limit keeps a block key and a violations key beside its state.
pub fn guarded(call: &LimitCall) -> bool {
    call.step.block_us.is_some() || call.step.penalty.is_some()
}

/// A `SCAN MATCH` pattern for the block keys of a rule. Glob characters in the prefix are escaped.
pub fn block_pattern(prefix: &str, rule: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + rule.len() + 8);
    for c in prefix.chars().chain(":".chars()).chain(rule.chars()) {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push_str(":*");
    pattern.push_str(BLOCK);
    pattern
}

/// Parses a block key of `rule` back into its [`LimitKey`]; `None` for any other key.
pub fn parse_block_key(prefix: &str, rule: &str, key: &str) -> Option<LimitKey> {
    let rest = key
        .strip_prefix(prefix)?
        .strip_prefix(':')?
        .strip_prefix(rule)?
        .strip_prefix(':')?
        .strip_suffix(BLOCK)?
        .strip_suffix('}')?;
    let (limit, identity) = rest.split_once(":{")?;
    let bad = |s: &str| s.is_empty() || s.contains([':', '{', '}']);
    if bad(limit) || bad(identity) {
        return None;
    }
    Some(LimitKey {
        rule: rule.into(),
        limit_id: limit.into(),
        identity: identity.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lk(identity: &str) -> LimitKey {
        LimitKey {
            rule: "login".into(),
            limit_id: "ip-gcra-1m".into(),
            identity: identity.into(),
        }
    }

    #[test]
    fn one_hash_tag_around_the_identity() {
        let [c, h, b, v] = all("sluice", &lk("ip=1.2.3.4"));
        let hash = limit_hash("login", "ip-gcra-1m");
        let hash = std::str::from_utf8(&hash).unwrap();
        assert_eq!(c, format!("sluice:{hash}{{ip=1.2.3.4}}"));
        assert_eq!(h, format!("{c}:h"));
        assert_eq!(b, "sluice:login:ip-gcra-1m:{ip=1.2.3.4}:b");
        assert_eq!(v, format!("{c}:v"));
        assert_eq!(
            state_key_readable("sluice", &lk("ip=1.2.3.4")),
            "sluice:login:ip-gcra-1m:{ip=1.2.3.4}"
        );
    }

    #[test]
    fn limit_hashes_are_stable_and_tell_limits_apart() {
        // Stored keys depend on it: it must never change between versions.
        assert_eq!(&limit_hash("login", "ip-gcra-1m"), b"PCtOB5-X");
        assert_ne!(
            limit_hash("login", "ip-gcra-1m"),
            limit_hash("login", "ip-gcra-1h")
        );
        assert_ne!(limit_hash("ab", "c"), limit_hash("a", "bc"));
        assert!(
            limit_hash("r", "l")
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(b))
        );
    }

    #[test]
    fn block_keys_parse_back() {
        for identity in ["ip=1.2.3.4", "*", "member=m1,promo_code=P7", "ip=~ab12"] {
            let k = lk(identity);
            let b = key("sluice", &k, Part::Block);
            assert_eq!(parse_block_key("sluice", "login", &b), Some(k));
        }
        let c = key("sluice", &lk("ip=1"), Part::Counter);
        assert_eq!(parse_block_key("sluice", "login", &c), None);
        assert_eq!(
            parse_block_key("sluice", "logins", "sluice:login:x:{a}:b"),
            None
        );
        assert_eq!(
            parse_block_key("sluice", "login", "sluice:login:x:y:{a}:b"),
            None
        );
    }

    #[test]
    fn patterns_escape_glob_characters() {
        assert_eq!(block_pattern("sluice", "login"), "sluice:login:*:b");
        assert_eq!(block_pattern("a*[b]", "r"), "a\\*\\[b\\]:r:*:b");
    }
}
