//! Every reply a decision script gives, by kind, decoded in one place ([`decode`]).
//!
//! Each kind is told by its Redis type and, within a type, by one fixed mark, so that no reply
//! needs a tag value of its own (each value of a reply costs Redis about as much as a line of
//! Lua: see BENCHMARKS.md, "Counted in instructions"):
//!
//! | kind | Redis type | mark | from | decoded by |
//! | --- | --- | --- | --- | --- |
//! | [`Kind::Declined`] | array | empty | any one-limit or rule script | (the general decision follows) |
//! | [`Kind::Outcomes`] | array | odd length: `now`, then 4, 6 or 8 values per limit | every script | `wire::parse_shaped_reply`, `wire::parse_reply` |
//! | [`Kind::MarkedKeys`] | array | even length: `value, PTTL` per limit (a guarded one adds its violations' count and end) | `fixed_window.lua#one`, `#many_marked` | `marked_reply::parse_marked_reply` |
//! | [`Kind::Packed`] | integer | — | `fixed_window.lua#one` | `packed_reply::unpack` |
//! | [`Kind::Blocked`] | text | first byte `B` | `lua/marker_answer.lua` in a one-limit script | `wire::parse_marker_text` |
//! | [`Kind::MarkedBlock`] | text | first byte a digit: `<PTTL>B0<end>` | `fixed_window.lua#one`, `gcra.lua#one` | `marked_reply::text_values` |
//!
//! Invariant: the kinds' marks never overlap. An outcome reply is odd in length (the time, then
//! whole limits of 4, 6 or 8 values each), a marked one even (pairs, or one limit's four
//! values); a marker starts with `B`, a PTTL with a digit.

use redis::{FromRedisValue, Value};

use super::{marked_reply, wire};
use crate::algorithm::LimitOutcome;
use crate::model::Micros;
use crate::store::{LimitCall, StoreError};

/// The kinds of reply (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// The script left the request to the general decision, having written nothing.
    Declined,
    /// The time and each limit's outcome.
    Outcomes,
    /// Fixed windows' keys counted in their marked windows: their values and PTTLs.
    MarkedKeys,
    /// One fixed window's admission in its marked window, packed into one number.
    Packed,
    /// A block in force, answered from its marker, with the time.
    Blocked,
    /// A block in force, answered from its marker's PTTL.
    MarkedBlock,
}

/// The kind of `reply`; none for a reply no script gives.
pub(super) fn kind(reply: &Value) -> Option<Kind> {
    match reply {
        Value::Array(values) if values.is_empty() => Some(Kind::Declined),
        Value::Array(values) if values.len() % 2 == 1 => Some(Kind::Outcomes),
        Value::Array(_) => Some(Kind::MarkedKeys),
        Value::Int(_) => Some(Kind::Packed),
        Value::BulkString(text) => match text.first() {
            Some(b'B') => Some(Kind::Blocked),
            Some(b) if b.is_ascii_digit() => Some(Kind::MarkedBlock),
            _ => None,
        },
        _ => None,
    }
}

/// What a decision's reply tells: the time, and an outcome per call.
pub(super) type Decided = (Micros, Vec<LimitOutcome>);

/// How a reply is read: the marked kinds need the limits' numbers and a clock.
pub(super) struct Reading<'a> {
    /// The decision's calls, in order.
    pub calls: &'a [LimitCall],
    /// The local clock, read only for a marked reply.
    pub local_now_us: &'a (dyn Fn() -> Micros + Sync),
    /// The latest Redis time the store has read (see `marked_reply::parse_marked_reply`).
    pub latest_us: Micros,
}

/// Decodes `reply` by its kind: `None` when the script declined. `Err` for a reply of no kind, or
/// of a kind whose values are malformed.
pub(super) fn decode(reply: Value, reading: &Reading<'_>) -> Result<Option<Decided>, StoreError> {
    let limits = reading.calls.len();
    let unexpected = |reply: &Value| {
        StoreError::permanent("redis", format!("unexpected script reply: {reply:?}"))
    };
    let marked = |values: &[i64]| {
        marked_reply::parse_marked_reply(
            values,
            reading.calls,
            reading.local_now_us,
            reading.latest_us,
        )?
        .ok_or_else(|| {
            StoreError::permanent("redis", format!("unexpected marked reply: {values:?}"))
        })
        .map(Some)
    };
    let Some(kind) = kind(&reply) else {
        return Err(unexpected(&reply));
    };
    match (kind, reply) {
        (Kind::Declined, _) => Ok(None),
        (Kind::Packed, Value::Int(packed)) => marked(&[packed]),
        (Kind::Blocked, Value::BulkString(text)) => {
            let values = wire::parse_marker_text(&text)?;
            wire::parse_reply(&values, limits).map(Some)
        }
        (Kind::MarkedBlock, Value::BulkString(text)) => marked(&marked_reply::text_values(&text)?),
        (Kind::MarkedKeys, reply) => marked(&integers(reply)?),
        (Kind::Outcomes, reply) => {
            let mut values = integers(reply)?;
            let whole = 1 + limits * wire::REPLY_PER_LIMIT;
            if values.len() <= whole {
                return wire::parse_shaped_reply(&values, limits);
            }
            // The general decision's run-time numbers of its settable limits follow.
            let runtime = values.split_off(whole);
            let mut decided = wire::parse_reply(&values, limits)?;
            wire::attach_runtime(&mut decided.1, reading.calls, &runtime)?;
            Ok(Some(decided))
        }
        (_, reply) => Err(unexpected(&reply)),
    }
}

/// The values of an array reply, each an integer.
fn integers(reply: Value) -> Result<Vec<i64>, StoreError> {
    Vec::from_redis_value(reply).map_err(|e| StoreError::permanent("redis", e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_its_own_mark() {
        let array = |n: usize| Value::Array(vec![Value::Int(1); n]);
        let text = |t: &[u8]| Value::BulkString(t.to_vec());
        assert_eq!(kind(&array(0)), Some(Kind::Declined));
        for n in [5, 7, 9, 13] {
            assert_eq!(kind(&array(n)), Some(Kind::Outcomes), "{n}");
        }
        for n in [2, 4, 6] {
            assert_eq!(kind(&array(n)), Some(Kind::MarkedKeys), "{n}");
        }
        assert_eq!(kind(&Value::Int(7)), Some(Kind::Packed));
        assert_eq!(kind(&text(b"B1000 400 0 0")), Some(Kind::Blocked));
        assert_eq!(kind(&text(b"35B01000")), Some(Kind::MarkedBlock));
        assert_eq!(kind(&text(b"x")), None);
        assert_eq!(kind(&text(b"")), None);
        assert_eq!(kind(&Value::Nil), None);
        // Every outcome layout is odd in length: the time, then whole limits.
        for per_limit in [
            wire::SHAPED_REPLY_PER_LIMIT,
            wire::GUARDED_REPLY_PER_LIMIT,
            wire::REPLY_PER_LIMIT,
        ] {
            for limits in 1..=8 {
                assert_eq!((1 + per_limit * limits) % 2, 1);
            }
        }
    }
}
