//! The wire between the store and its scripts: each decision's arguments out (`arguments`), and
//! every reply a decision script gives back, decoded once, by kind, into outcomes ([`decode`]).
//!
//! Each kind is told by its Redis type and, within a type, by one fixed sign, so that no reply
//! needs a tag value of its own (each value of a reply costs Redis about as much as a line of
//! Lua: see BENCHMARKS.md, "Counted in instructions"). Each kind has one layout:
//!
//! | kind | Redis type | sign | layout | from |
//! | --- | --- | --- | --- | --- |
//! | declined | array | empty | `{}` | any one-limit or rule script (the general decision follows) |
//! | outcomes | array | odd length | `now`, then per limit `allowed, remaining, reset, retry, violations, warning, delay, blocked until`, the trailing values left out where a script never has them: 4 (no block or penalty), 6 (a one-limit or rule script) or 8 (the general decision, which then adds `count, capacity` per settable limit) | every script |
//! | marked keys | array | even length | `value, PTTL` per limit; one guarded limit adds its violations' `count, end` | `fixed_window.lua#one`, `#many_marked` |
//! | packed | integer | — | see `marked` | `fixed_window.lua#one` |
//! | blocked | text | first byte `B` | `<marker> <now> <violations> <warning>` (`lua/marker_answer.lua`) | a one-limit script |
//! | marked block | text | first byte a digit | `<PTTL>B0<end>`, then ` <count> <end>` of a penalty's violations | `fixed_window.lua#one`, `gcra.lua#one` |
//!
//! Invariant: the kinds' signs never overlap. An outcome reply is odd in length (the time, then
//! whole limits of 4, 6 or 8 values each, and pairs), a marked one even (pairs, or one limit's
//! four values); a marker starts with `B`, a PTTL with a digit. A reply of no kind, or of a kind
//! whose values are out of range for the request, is a permanent error, never a panic.

mod arguments;
mod marked;

pub use arguments::{check_exact, decide_args, give_back_args, now_arg, spec_command};
pub use marked::{packed_slots, quota as quota_answer, quota_radix};

use redis::Value;
use smallvec::SmallVec;

use super::constants::MARKER;
use crate::algorithm::{LimitOutcome, RuntimeNumbers};
use crate::model::Micros;
use crate::store::{LimitCall, StoreError};

/// Values per limit of an outcome reply, by what the script can tell: no block or penalty; a
/// one-limit or rule script's; the general decision's.
const WIDTHS: [usize; 3] = [4, 6, 8];

/// What a decision's reply tells.
#[derive(Debug, PartialEq)]
pub struct Decided {
    /// Redis' time at the decision.
    pub now_us: Micros,
    /// One outcome per call.
    pub outcomes: Vec<LimitOutcome>,
    /// The time is Redis' to the µs; a marked reply knows it to the millisecond only.
    pub exact: bool,
}

/// What a reply is read with: the marked kinds need the limits' numbers and a clock.
pub struct Reading<'a> {
    /// The decision's calls, in order.
    pub calls: &'a [LimitCall],
    /// The local clock, read only for a marked reply.
    pub local_now_us: &'a (dyn Fn() -> Micros + Sync),
    /// The latest Redis time the store has read (see `marked`).
    pub latest_us: Micros,
}

/// Decodes `reply` by its kind: `None` when the script declined.
pub fn decode(reply: &Value, reading: &Reading<'_>) -> Result<Option<Decided>, StoreError> {
    let calls = reading.calls;
    let decided = match reply {
        Value::Array(values) if values.is_empty() => return Ok(None),
        Value::Array(values) => values
            .iter()
            .map(integer)
            .collect::<Option<SmallVec<[i64; 16]>>>()
            .and_then(|values| {
                if values.len() % 2 == 1 {
                    outcomes(&values, calls)
                } else {
                    marked::keys(&values, reading)
                }
            }),
        Value::Int(packed) => marked::packed(*packed, reading),
        Value::BulkString(text) => std::str::from_utf8(text).ok().and_then(|text| {
            if text.starts_with(MARKER) {
                blocked(text, calls)
            } else if text.starts_with(|c: char| c.is_ascii_digit()) {
                marked::block(text, reading)
            } else {
                None
            }
        }),
        _ => None,
    };
    decided.map(Some).ok_or_else(|| {
        StoreError::permanent("redis", format!("unexpected script reply: {reply:?}"))
    })
}

/// Redis' time when the general decision found a quota's period not the one sent (its reply is
/// that time alone): the decision is to be asked again in the period that holds it.
pub fn period_moved(reply: &Value) -> Option<Micros> {
    match reply {
        Value::Array(values) if values.len() == 1 => {
            integer(&values[0]).and_then(|now| u64::try_from(now).ok().map(Micros::new))
        }
        _ => None,
    }
}

/// The general decision's answer that a settable monthly quota's identity keeps another billing
/// day than the one its period was sent for (`lua/decide.lua`): Redis' time, the limit's index
/// among the calls, and the day it keeps (`None`: none, the limit's own). Nothing was written;
/// the caller decides again with that day.
pub fn anchor_moved(reply: &Value) -> Option<(Micros, usize, Option<u8>)> {
    match reply {
        Value::Array(values) if values.len() == 3 => {
            let now = micros(integer(&values[0])?)?;
            let limit = usize::try_from(integer(&values[1])?).ok()?.checked_sub(1)?;
            let day = u8::try_from(integer(&values[2])?).ok()?;
            Some((now, limit, (day > 0).then_some(day)))
        }
        _ => None,
    }
}

/// An integer of an array reply (Redis gives Lua's numbers as integers, its strings as text).
fn integer(value: &Value) -> Option<i64> {
    match value {
        Value::Int(n) => Some(*n),
        Value::BulkString(text) => std::str::from_utf8(text).ok()?.parse().ok(),
        _ => None,
    }
}

fn unsigned(v: i64) -> Option<u64> {
    u64::try_from(v).ok()
}

fn micros(v: i64) -> Option<Micros> {
    unsigned(v).map(Micros::new)
}

/// -1 for none.
fn optional(v: i64) -> Option<Option<Micros>> {
    if v == -1 {
        Some(None)
    } else {
        micros(v).map(Some)
    }
}

/// An outcome reply: the time, each limit's values, then the general decision's run-time
/// numbers of each settable limit.
fn outcomes(values: &[i64], calls: &[LimitCall]) -> Option<Decided> {
    let (&now, rest) = values.split_first()?;
    let settable = calls.iter().filter(|c| c.step.settable).count();
    let general = WIDTHS[2];
    let width = WIDTHS
        .into_iter()
        .find(|&w| rest.len() == calls.len() * w + if w == general { 2 * settable } else { 0 })?;
    let (limits, runtime) = rest.split_at(calls.len() * width);
    let mut runtime = runtime.chunks_exact(2);
    let outcomes = limits
        .chunks_exact(width)
        .zip(calls)
        .map(|(v, call)| {
            let at = |i: usize, none: i64| v.get(i).copied().unwrap_or(none);
            let runtime = if width == general && call.step.settable {
                match runtime.next()? {
                    [0, 0] => None,
                    // The billing day is the one the call assumed (`decision.rs` adds it).
                    &[count, capacity] => Some(RuntimeNumbers::counts(
                        unsigned(count).filter(|&c| c > 0)?,
                        unsigned(capacity).filter(|&c| c > 0)?,
                    )),
                    _ => return None,
                }
            } else {
                None
            };
            Some(LimitOutcome {
                allowed: v[0] == 1,
                remaining: unsigned(v[1])?,
                reset_after_us: micros(v[2])?,
                retry_after_us: optional(v[3])?,
                violations: unsigned(at(4, 0))?,
                warning: at(5, 0) == 1,
                delay_us: micros(at(6, 0))?,
                blocked_until_us: optional(at(7, -1))?,
                runtime,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Decided {
        now_us: micros(now)?,
        outcomes,
        exact: true,
    })
}

/// A one-limit script's answer for a block in force: `<marker> <now> <violations> <warning>`,
/// the marker as held (`B<end>` or `B0<end>`, perhaps followed by the copy of its violations,
/// ` <count> <forgotten at>`, see `lua/prelude.lua`). The violations are the answer's own,
/// counted at its time.
fn blocked(text: &str, calls: &[LimitCall]) -> Option<Decided> {
    let [_] = calls else { return None };
    let words = text
        .strip_prefix(MARKER)?
        .split(' ')
        .map(|word| word.parse::<i64>().ok())
        .collect::<Option<SmallVec<[i64; 6]>>>()?;
    let (end, now, violations, warning) = match words.as_slice() {
        [end, now, violations, warning] | [end, _, _, now, violations, warning] => {
            (*end, *now, *violations, *warning)
        }
        _ => return None,
    };
    let left = micros(end.checked_sub(now).filter(|&left| left > 0)?)?;
    Some(Decided {
        now_us: micros(now)?,
        outcomes: vec![LimitOutcome {
            allowed: false,
            remaining: 0,
            reset_after_us: left,
            retry_after_us: Some(left),
            delay_us: Micros::ZERO,
            blocked_until_us: Some(micros(end)?),
            violations: unsigned(violations)?,
            warning: warning == 1,
            runtime: None,
        }],
        exact: true,
    })
}

#[cfg(test)]
mod tests;
