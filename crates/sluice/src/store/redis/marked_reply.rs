//! The reply of fixed windows admitted in their marked windows (`lua/fixed_window.lua#one`,
//! `lua/fixed_window.lua#many_marked`): each key's value and its PTTL (for one limit, packed into
//! one number: `packed_reply`), from which the store rebuilds the outcomes and Redis' time. The
//! only reply decoded with the limits' own numbers and a local clock.
//!
//! # Marked windows
//! On Redis `TIME`, a key holding a count expires at its window's end, rounded up to the
//! millisecond (`PXAT`, from `TIME`, as every script writes it). When that end is a whole
//! millisecond (a window of whole milliseconds) and nothing makes keys outlive their window
//! (`min_ttl` 0), the key's expiry marks its window: a PTTL of at least 1 ms means Redis' clock
//! is still before the window's end, and at or after its start, when the count was first written.
//! An admission in such a window needs no `TIME`, which costs Redis more than the `DECRBY`.
//!
//! The store reads the count and the slot, finds the window from the slot and its own clock (any
//! clock within a day of Redis' finds the same one), and Redis' time from the window's end and
//! the PTTL, to the millisecond, raised within it to the latest time Redis reported to the store
//! ([`parse_marked_reply`]). A PTTL longer than the window (a key written for a longer window) is
//! not taken as a mark; a key written for a shorter one (a limit whose window was changed) counts
//! as this window's until it ends, as if the change had been made then.

use smallvec::{SmallVec, smallvec};

use super::packed_reply::{self, Unpacked};
use super::{source, wire};
use crate::algorithm::LimitOutcome;
use crate::model::Micros;
use crate::store::{LimitCall, StoreError};

/// How a fixed window's key holds its count: -(slot * M + count) (`lua/fixed_window.lua`).
const FIXED_WINDOW_M: i64 = source::FIXED_WINDOW_M as i64;
const FIXED_WINDOW_SLOTS: i64 = source::FIXED_WINDOW_SLOTS as i64;

/// What one key's value and PTTL tell: a count in its marked window, or a block in force; the
/// end of either and the start of the millisecond Redis read the PTTL in, in µs.
struct Marked {
    count: u64,
    blocked: bool,
    end_us: u64,
    start_us: u64,
}

/// Decodes the value and PTTL of `call`'s key. The window is the one of the value's slot nearest
/// `local_us` (see [`in_window`]). A positive value is the end of a block whose marker expires
/// with it (`B0`, see `lua/prelude.lua`), in µs, rounded up to the millisecond for its expiry;
/// 2 ms or more left prove it in force.
fn marked(
    value: i64,
    ttl_ms: i64,
    call: &LimitCall,
    local_us: u64,
    bad: impl Fn() -> StoreError,
) -> Result<Marked, StoreError> {
    if value > 0 {
        if ttl_ms < 2 || (call.step.block_us.is_none() && call.step.penalty.is_none()) {
            return Err(bad());
        }
        let end_ms = value / 1000 + i64::from(value % 1000 != 0);
        return Ok(Marked {
            // A block answers remaining 0 (decide.lua).
            count: call.step.params.count,
            blocked: true,
            end_us: value.unsigned_abs(),
            start_us: u64::try_from(end_ms - ttl_ms)
                .ok()
                .and_then(|ms| ms.checked_mul(1000))
                .ok_or_else(&bad)?,
        });
    }
    let held = value.checked_neg().ok_or_else(&bad)?;
    let (slot, count) = (held / FIXED_WINDOW_M, held % FIXED_WINDOW_M);
    if !(1..=FIXED_WINDOW_SLOTS).contains(&slot) || count < 1 || ttl_ms < 1 {
        return Err(bad());
    }
    let counted = Unpacked {
        residue: (slot - 1).unsigned_abs(),
        modulus: FIXED_WINDOW_SLOTS.unsigned_abs(),
        count: count.unsigned_abs(),
        ttl_ms: ttl_ms.unsigned_abs(),
    };
    in_window(counted, call, local_us, bad)
}

/// A count in its marked window: the window is the one of index `residue` mod `modulus` nearest
/// `local_us` (a clock need only be within `modulus / 2` windows of Redis': 2^27 windows for a
/// key's value, at least a day for a packed answer).
fn in_window(
    counted: Unpacked,
    call: &LimitCall,
    local_us: u64,
    bad: impl Fn() -> StoreError,
) -> Result<Marked, StoreError> {
    let (limit, window_us) = (call.step.params.count, call.step.params.window_us.get());
    let Unpacked {
        residue,
        modulus,
        count,
        ttl_ms,
    } = counted;
    if count < 1
        || count > limit
        || ttl_ms < 1
        || ttl_ms.saturating_mul(1000) > window_us
        || !window_us.is_multiple_of(1000)
        || residue >= modulus
    {
        return Err(bad());
    }
    let guess = local_us / window_us;
    let above = guess + (residue + modulus - guess % modulus) % modulus;
    let index = match above.checked_sub(modulus) {
        Some(below) if guess - below < above - guess => below,
        _ => above,
    };
    let end_ms = (index + 1).checked_mul(window_us / 1000).ok_or_else(&bad)?;
    let to_us = |ms: u64| ms.checked_mul(1000).ok_or_else(&bad);
    Ok(Marked {
        count,
        blocked: false,
        end_us: to_us(end_ms)?,
        start_us: to_us(end_ms - ttl_ms)?,
    })
}

/// A marked block's answer as one value (`lua/fixed_window.lua#one`, `lua/gcra.lua#one`):
/// `<PTTL>B0<end>`, then with a penalty's violations key ` <count> <end>`; as the values
/// `[end, PTTL]` or `[end, PTTL, count, end]` that [`parse_marked_reply`] decodes.
pub fn text_values(text: &[u8]) -> Result<Vec<i64>, StoreError> {
    wire::parse_text(text, |text| {
        let (ttl, rest) = text.split_once("B0")?;
        let mut words = rest.split(' ');
        let mut values = vec![words.next()?.parse().ok()?, ttl.parse().ok()?];
        for word in words {
            values.push(word.parse().ok()?);
        }
        matches!(values.len(), 2 | 4).then_some(values)
    })
}

/// Decodes an answer from marked keys: `{ the key's value, its PTTL in ms }` per limit, from a
/// one-limit fixed window (`lua/fixed_window.lua#one`: an admission in its marked window, or a
/// block in force), then for a guarded one its violations key's count and end (an admission
/// without them is one number, see `packed_reply`); or from a rule of such limits, unguarded, all
/// admitted (`lua/fixed_window.lua#many_marked`). `None` for any other reply. Each
/// window is found from its slot and `local_now_us`; Redis' time was each key's end less its TTL,
/// to the millisecond (Redis 7 reads one time for a whole script; were the PTTLs read in
/// different milliseconds, the time is kept where every window still runs).
///
/// The decision's time, which the violations count at, is the latest instant of that millisecond
/// known to have passed: its start, raised to `latest_us`, the latest Redis time the store has
/// read, up to its last µs. Redis decided at some instant of the millisecond, and the answer is
/// the same at every one of them; but a block lifted, or a violation forgotten, earlier in that
/// millisecond was over for Redis, and must not be in force again at the time reported.
pub fn parse_marked_reply(
    reply: &[i64],
    calls: &[LimitCall],
    local_now_us: impl FnOnce() -> Micros,
    latest_us: Micros,
) -> Result<Option<(Micros, Vec<LimitOutcome>)>, StoreError> {
    let bad = || StoreError::permanent("redis", format!("unexpected marked reply: {reply:?}"));
    let mut held = None;
    let keys: SmallVec<[Marked; 4]> = match (calls, reply) {
        ([call], [packed]) => {
            let params = &call.step.params;
            let counted = packed_reply::unpack(*packed, params.count, params.window_us.get())
                .ok_or_else(bad)?;
            smallvec![in_window(counted, call, local_now_us().get(), bad)?]
        }
        _ => {
            let pairs = match (calls.len(), reply) {
                (1, [_, _]) => reply,
                (1, [_, _, violations, forget]) => {
                    held = Some((*violations, *forget));
                    &reply[..2]
                }
                (n, _) if n >= 2 && reply.len() == 2 * n => reply,
                _ => return Ok(None),
            };
            let local_us = local_now_us().get();
            pairs
                .chunks_exact(2)
                .zip(calls)
                .map(|(pair, call)| marked(pair[0], pair[1], call, local_us, bad))
                .collect::<Result<_, _>>()?
        }
    };
    if keys.len() > 1 && keys.iter().any(|k| k.blocked) {
        return Err(bad());
    }
    let start_us = keys.iter().map(|k| k.start_us).max().unwrap_or(0);
    let end_us = keys.iter().map(|k| k.end_us).min().unwrap_or(0);
    let now_us = start_us
        .max(latest_us.get().min(start_us + 999))
        .min(end_us.saturating_sub(1));
    // As one_head.lua counts them: remembered until their end, a warning from warn_after on.
    let violations = match held {
        Some((count, forget)) if forget > 0 && forget.unsigned_abs() > now_us => {
            count.unsigned_abs()
        }
        _ => 0,
    };
    let outcomes = keys
        .iter()
        .zip(calls)
        .map(|(k, call)| {
            let left = Micros::new(k.end_us - now_us);
            LimitOutcome {
                allowed: !k.blocked,
                remaining: call.step.params.count - k.count,
                reset_after_us: left,
                retry_after_us: k.blocked.then_some(left),
                delay_us: Micros::ZERO,
                blocked_until_us: k.blocked.then_some(Micros::new(k.end_us)),
                violations,
                warning: call
                    .step
                    .penalty
                    .is_some_and(|p| violations > 0 && violations >= p.warn_after),
            }
        })
        .collect();
    Ok(Some((Micros::new(now_us), outcomes)))
}

#[cfg(test)]
mod tests;
