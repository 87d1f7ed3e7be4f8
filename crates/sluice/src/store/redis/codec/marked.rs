//! The reply of fixed windows admitted in their marked windows (`lua/fixed_window.lua#one`,
//! `lua/fixed_window.lua#many_marked`): each key's value and its PTTL (for one limit, packed into
//! one number: see "The packed answer"), from which the store rebuilds the outcomes and Redis' time. The
//! only reply decoded with the limits' own numbers and a local clock; and a quota's in the key of
//! its period ([`quota`]), decoded with the period the store sent.
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
//! ([`outcomes`]). A PTTL longer than the window (a key written for a longer window) is
//! not taken as a mark; a key written for a shorter one (a limit whose window was changed) counts
//! as this window's until it ends, as if the change had been made then.
//!
//! # Fixed window keys
//! One negative integer, -(slot * FW_M + count), so Redis keeps it in the key's object and
//! DECRBY adds to the count. `slot` is the window's index modulo FW_SLOTS, plus 1 (never 0: a
//! missing key decrements to a slot-0 value, read as another window); the count is capped at
//! COUNT_CAP < FW_M, so the whole stays below 2^53. A key outlives its window by at most 1 ms.
//! Flagged: slot * 2^25 + (2^25 - 1 - count), positive, which DECRBY counts up as well, holds the
//! count of an identity whose penalty has violations (decide.lua flags its key when it counts one;
//! a window starts flagged while they are remembered). An unflagged count of a penalized limit
//! thus tells that there are none, and a one-limit script need not read the violations key
//! (fixed_window.lua#one). Every script that reads a count reads both forms, and keeps the flag.
//! A GCRA tat, which a named limit whose algorithm changed may leave, reads as a flagged value of
//! some other window (the TIME path starts this window afresh); counted in a marked window
//! without TIME, it passes only if its low 25 bits happen to read as a count within the limit
//! (one chance in 2^25 / limit), and then only until that count passes the limit or the key expires.
//!
//! # The one-limit script's answers
//! On Redis TIME, with `time_deferred` written in
//! (now.lua then leaves TIME to the script), an admission in a window that the key's expiry marks
//! answers without TIME: one number, ((slot - 1) % ${PACKED_SLOTS} * (limit + 1) + count) *
//! (window_ms + 1) + PTTL (see "The packed answer"); or, when a penalty's violations key is there,
//! { the key's count (as an unflagged value), its PTTL in ms, the violations' count and end as
//! read }. Nothing else answers one integer, nor four values but a block (below).
//! A block marker that expires with its block (`B0`, see the prelude) is answered from its PTTL
//! too, as one value: `<PTTL>B0<end>`, then with a penalty ` <count> <end>` of its violations (the
//! marker's own copy, see the prelude, or the violations key's; each value of a table costs Redis
//! more than the text). A PTTL of 2 ms or more proves the block in force at Redis' time; at 1 ms
//! it may just have ended, and TIME decides. Everything else reads TIME and decides below.
//! A penalty's violations, in a marked script (`late`, see one_head.lua): the key is read first
//! (GET, then DECRBY), and the violations key only when the key does not tell the violations: a
//! count that is not flagged (see fixed_window.lua) has none, and a marker that holds their copy
//! tells them. So an identity without violations is admitted with a GET, a DECRBY and a PTTL, and
//! a blocked one answered with a GET and a PTTL, as without a penalty.
//!
//!
//! # A rule's fixed windows in their marked windows
//! `lua/fixed_window.lua#many_marked`, a fixed-window limit's count in its marked window, in a rule script
//! whose limits are all fixed windows that fixed_window.lua#one would mark, none with a block or a
//! penalty (see many_head.lua). On Redis TIME such a rule is decided first without the time, as
//! fixed_window.lua#one decides one limit: each limit in turn, while every one before it was counted
//! in its marked window or starts one and admits (`all`), counts with DECRBY. A count that is this
//! window's and admits reads its PTTL into ttl_@; a DECRBY that made the key (it answers -cost: a
//! stored count is never 0) starts a window, ttl_@ -1 and `fresh` set; ttl_@ stays 0 otherwise. When
//! every limit's ttl is set, the new windows' keys are completed as fixed_window.lua#one completes a
//! window's first admission (the lines after the fresh marker, once TIME is read: the slot added to
//! the count, the key to expire at the window's end), and the script answers { value, ttl } per
//! limit, two values a limit, which no other answer has: a new window's value and ttl are what its
//! key now holds and its PTTL would say (the expiry less Redis' millisecond).
//! Otherwise each count made is undone (the lines after the undo marker: INCRBY, or DEL for a key
//! the DECRBY made), TIME is read, and the rule is decided as many_head.lua says, on the keys as
//! they were.
//! A quota's part is counted so too, its window the period written into the script (the one that
//! held the store's clock): its key's slot is its period's, so a count is taken only when the
//! slot is that period's; a key it starts is completed only once TIME says the period holds
//! Redis' time (else every count is undone and the general decision chooses the period). The
//! store finds the period from the slot beside its own clock ([`in_period`]).
//!
//! # Reading first
//! In `lua/fixed_window.lua#one`, a block without a penalty reads the key first: a refused
//! `DECRBY` on a block marker costs Redis three times a `GET`. So does a penalty's limit: its
//! marker holds the violations (see the prelude), and its count says whether the identity has
//! any. On a client's clock (the head read the violations), only an identity with violations, the
//! one a penalty bans, reads first. A `GET` refused on another type answers a table with `err` (a
//! string has no such field). A count has 17 characters at most, a penalty's marker more: `late`,
//! `string.byte`, which costs Redis a function call, reads only what may be a marker (a shorter
//! one, which only an administrative block leaves, has the `DECRBY` refused and is answered
//! below it). A marker that expires with its block answers with the copy of its violations, after
//! `B0` and the end's 16 digits (one without, which an administrative block leaves, reads `TIME`).
//!
//! # The packed answer
//! A one-limit fixed window's admission in its marked window as one number
//! (`lua/fixed_window.lua#one`): the key's count, its window's slot and its PTTL, packed as
//!
//! `x = ((slot − 1) mod S × (limit + 1) + count) × (window_ms + 1) + PTTL`.
//!
//! A reply of two values costs Redis about 4,200 instructions more than one number (it looks for
//! the typed fields, `err`, `ok`…, of every table it converts), a sixth of the whole admission.
//!
//! Invariants: `x < 2^53`, so that Lua's doubles hold it exactly; `S` divides the slots' period
//! (2^28 − 1), so that `(slot − 1) mod S` is the window's index mod `S`; and `S` windows span at
//! least [`MIN_SPAN_MS`], so that a clock within half of it of Redis' finds the window from the
//! residue. A limit whose numbers leave no such `S` gets no packed answer (its script reads
//! `TIME`).

use smallvec::SmallVec;

use super::super::constants::{FIXED_WINDOW_M, FIXED_WINDOW_SLOTS, MARKER_AT_END};
use super::super::keys;
use super::{Decided, Reading};
use crate::algorithm::LimitOutcome;
use crate::model::{Micros, Period, PeriodBounds};
use crate::store::LimitCall;

/// What one key's value and PTTL tell: a count in its marked window, or a block in force; the
/// end of either and the start of the millisecond Redis read the PTTL in, in µs.
struct Marked {
    count: u64,
    blocked: bool,
    end_us: u64,
    start_us: u64,
}

/// A penalty's violations as read beside a key: their count and when they are forgotten (µs).
type Held = Option<(i64, i64)>;

/// `{ value, PTTL }` per limit, from a one-limit fixed window (an admission in its marked
/// window, or a block in force, then for a guarded one its violations key's count and end) or
/// from a rule of such limits, unguarded, all admitted (`lua/fixed_window.lua#many_marked`).
pub(super) fn keys(values: &[i64], reading: &Reading<'_>) -> Option<Decided> {
    let calls = reading.calls;
    let (pairs, held) = match (calls.len(), values) {
        (1, [_, _]) => (values, None),
        (1, [value, ttl, count, forget]) => (&[*value, *ttl][..], Some((*count, *forget))),
        (n, _) if n >= 2 && values.len() == 2 * n => (values, None),
        _ => return None,
    };
    let local_us = (reading.local_now_us)().get();
    let keys = pairs
        .chunks_exact(2)
        .zip(calls)
        .map(|(pair, call)| marked(pair[0], pair[1], call, local_us))
        .collect::<Option<SmallVec<[Marked; 4]>>>()?;
    outcomes(&keys, held, reading)
}

/// A one-limit fixed window's admission as one number (see "The packed answer").
pub(super) fn packed(x: i64, reading: &Reading<'_>) -> Option<Decided> {
    let [call] = reading.calls else { return None };
    let params = &call.step.params;
    let counted = unpack(x, params.count, params.window_us.get())?;
    let key = in_window(counted, call, (reading.local_now_us)().get())?;
    outcomes(&[key], None, reading)
}

/// The radix of a quota's packed answer in `period` (`lua/quota.lua`): one more than the
/// longest PTTL its key can have (the period in ms, rounded up, and the ms its expiry is
/// rounded up by), and the largest count it packs below 2^53.
pub fn quota_radix(period: PeriodBounds) -> (u64, u64) {
    let radix = (period.end - period.start).get().div_ceil(1000) + 2;
    (radix, ((1u64 << 53) - radix) / radix)
}

/// A quota counted in the key of its period, answered without `TIME` (`lua/quota.lua`): the count
/// after the decision times [`quota_radix`] plus the key's PTTL, negated for a denial (its count
/// undone). The key expires at the period's end rounded up to the millisecond, so Redis' time is
/// that less the PTTL, to the millisecond, raised within it to the latest time Redis reported.
pub fn quota(x: i64, period: PeriodBounds, call: &LimitCall, latest_us: Micros) -> Option<Decided> {
    let (radix, _) = quota_radix(period);
    let denied = x < 0;
    let packed = x.unsigned_abs();
    let (count, ttl_ms) = (packed / radix, packed % radix);
    let end_us = period.end.get();
    let from_ttl = end_us.div_ceil(1000).checked_sub(ttl_ms)? * 1000;
    let now_us = from_ttl
        .max(latest_us.get().min(from_ttl + 999))
        .min(end_us.checked_sub(1)?);
    let left = Micros::new(end_us - now_us);
    let limit = call.step.params.capacity;
    let allowed = !denied && count <= limit;
    let outcome = LimitOutcome {
        allowed,
        remaining: limit.saturating_sub(count),
        reset_after_us: left,
        retry_after_us: (!allowed).then_some(left),
        delay_us: Micros::ZERO,
        blocked_until_us: None,
        violations: 0,
        warning: false,
        runtime: None,
    };
    Some(Decided {
        now_us: Micros::new(now_us),
        outcomes: vec![outcome],
        exact: false,
    })
}

/// A block in force answered from its marker's PTTL, as one text: `<PTTL>B0<end>`, then with a
/// penalty's violations ` <count> <end>`.
pub(super) fn block(text: &str, reading: &Reading<'_>) -> Option<Decided> {
    let [call] = reading.calls else { return None };
    let (ttl, rest) = text.split_once(MARKER_AT_END)?;
    let words = rest
        .split(' ')
        .map(|word| word.parse::<i64>().ok())
        .collect::<Option<SmallVec<[i64; 3]>>>()?;
    let (end, held) = match words.as_slice() {
        [end] => (*end, None),
        [end, count, forget] => (*end, Some((*count, *forget))),
        _ => return None,
    };
    let key = marked(end, ttl.parse().ok()?, call, (reading.local_now_us)().get())?;
    outcomes(&[key], held, reading)
}

/// Decodes the value and PTTL of `call`'s key. The window is the one of the value's slot nearest
/// `local_us` (see [`in_window`]). A positive value is the end of a block whose marker expires
/// with it (`B0`, see `lua/prelude.lua`), in µs, rounded up to the millisecond for its expiry;
/// 2 ms or more left prove it in force.
fn marked(value: i64, ttl_ms: i64, call: &LimitCall, local_us: u64) -> Option<Marked> {
    if value > 0 {
        if ttl_ms < 2 || (call.step.block_us.is_none() && call.step.penalty.is_none()) {
            return None;
        }
        let end_ms = value / 1000 + i64::from(value % 1000 != 0);
        return Some(Marked {
            // A block answers remaining 0 (decide.lua).
            count: call.step.params.count,
            blocked: true,
            end_us: value.unsigned_abs(),
            start_us: u64::try_from(end_ms - ttl_ms).ok()?.checked_mul(1000)?,
        });
    }
    let held = value.checked_neg()?;
    let (slot, count) = (held / FIXED_WINDOW_M as i64, held % FIXED_WINDOW_M as i64);
    if !(1..=FIXED_WINDOW_SLOTS as i64).contains(&slot) || count < 1 || ttl_ms < 1 {
        return None;
    }
    let counted = Unpacked {
        residue: (slot - 1).unsigned_abs(),
        modulus: FIXED_WINDOW_SLOTS,
        count: count.unsigned_abs(),
        ttl_ms: ttl_ms.unsigned_abs(),
    };
    in_window(counted, call, local_us)
}

/// A count in its marked window: the window is the one of index `residue` mod `modulus` nearest
/// `local_us` (a clock need only be within `modulus / 2` windows of Redis': 2^27 windows for a
/// key's value, at least a day for a packed answer).
fn in_window(counted: Unpacked, call: &LimitCall, local_us: u64) -> Option<Marked> {
    if let Some(period) = call.step.params.period {
        return in_period(counted, call.step.params.count, period, local_us);
    }
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
        return None;
    }
    let guess = local_us / window_us;
    let above = guess + (residue + modulus - guess % modulus) % modulus;
    let index = match above.checked_sub(modulus) {
        Some(below) if guess - below < above - guess => below,
        _ => above,
    };
    let end_ms = (index + 1).checked_mul(window_us / 1000)?;
    Some(Marked {
        count,
        blocked: false,
        end_us: end_ms.checked_mul(1000)?,
        start_us: (end_ms - ttl_ms).checked_mul(1000)?,
    })
}

/// A quota's count in its marked period (`lua/fixed_window.lua#many_marked`): the period of the
/// count's slot, the one that holds `local_us` or either beside it (the rule script was written
/// for the one that held this node's clock, and no two periods near each other share a slot).
/// Its key expires at the period's end, rounded up to the millisecond.
fn in_period(counted: Unpacked, limit: u64, period: &Period, local_us: u64) -> Option<Marked> {
    let Unpacked {
        residue,
        count,
        ttl_ms,
        ..
    } = counted;
    let here = period.bounds_at(Micros::new(local_us));
    let before = period.bounds_at(here.start.checked_sub(Micros::new(1))?);
    let after = period.bounds_at(here.end);
    let bounds = [here, before, after]
        .into_iter()
        .find(|p| keys::period_slot(p.start) - 1 == residue)?;
    let end_ms = bounds.end.get().div_ceil(1000);
    if count < 1 || count > limit || ttl_ms < 1 || ttl_ms > end_ms - bounds.start.get() / 1000 {
        return None;
    }
    Some(Marked {
        count,
        blocked: false,
        end_us: bounds.end.get(),
        start_us: (end_ms - ttl_ms).checked_mul(1000)?,
    })
}

/// The outcomes of marked keys. Redis' time was each key's end less its TTL, to the millisecond
/// (Redis 7 reads one time for a whole script; were the PTTLs read in different milliseconds,
/// the time is kept where every window still runs).
///
/// The decision's time, which the violations count at, is the latest instant of that millisecond
/// known to have passed: its start, raised to `latest_us`, the latest Redis time the store has
/// read, up to its last µs. Redis decided at some instant of the millisecond, and the answer is
/// the same at every one of them; but a block lifted, or a violation forgotten, earlier in that
/// millisecond was over for Redis, and must not be in force again at the time reported.
fn outcomes(keys: &[Marked], held: Held, reading: &Reading<'_>) -> Option<Decided> {
    if keys.len() > 1 && keys.iter().any(|k| k.blocked) {
        return None;
    }
    let start_us = keys.iter().map(|k| k.start_us).max().unwrap_or(0);
    let end_us = keys.iter().map(|k| k.end_us).min().unwrap_or(0);
    let now_us = start_us
        .max(reading.latest_us.get().min(start_us + 999))
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
        .zip(reading.calls)
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
                runtime: None,
            }
        })
        .collect();
    Some(Decided {
        now_us: Micros::new(now_us),
        outcomes,
        exact: false,
    })
}

/// The span of windows a residue must tell apart: a clock within a day of Redis' finds its window.
const MIN_SPAN_MS: u128 = 2 * 86_400_000;

/// The divisors of the slots' period, 2^28 − 1 = 3 × 5 × 29 × 43 × 113 × 127 (`lua/fixed_window.lua`),
/// in increasing order: a store decodes each packed answer with its limit's, so finding it is a
/// binary search.
const DIVISORS: [u64; 64] = {
    const FACTORS: [u64; 6] = [3, 5, 29, 43, 113, 127];
    let mut divisors = [1u64; 64];
    let mut mask = 0;
    while mask < 64 {
        let mut i = 0;
        while i < FACTORS.len() {
            if mask & (1 << i) != 0 {
                divisors[mask] *= FACTORS[i];
            }
            i += 1;
        }
        mask += 1;
    }
    // Insertion sort: `sort` is not const.
    let mut i = 1;
    while i < 64 {
        let mut j = i;
        while j > 0 && divisors[j - 1] > divisors[j] {
            let d = divisors[j];
            divisors[j] = divisors[j - 1];
            divisors[j - 1] = d;
            j -= 1;
        }
        i += 1;
    }
    divisors
};

/// The slot's modulus `S` in the packed answer of a fixed window of `limit` units per
/// `window_us`, if its numbers leave one.
pub fn packed_slots(limit: u64, window_us: u64) -> Option<u64> {
    if !window_us.is_multiple_of(1000) {
        return None;
    }
    let window_ms = window_us / 1000;
    let per_slot = limit.checked_add(1)?.checked_mul(window_ms + 1)?;
    let bound = (1u64 << 53) / per_slot;
    let best = DIVISORS[DIVISORS.partition_point(|&d| d <= bound).checked_sub(1)?];
    (u128::from(best) * u128::from(window_ms) >= MIN_SPAN_MS).then_some(best)
}

/// What a packed answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Unpacked {
    /// The window's index mod `modulus`.
    residue: u64,
    /// [`packed_slots`] of the limit.
    modulus: u64,
    /// The key's count, this request's cost included.
    count: u64,
    /// The key's PTTL, in ms.
    ttl_ms: u64,
}

/// Unpacks `x`, the answer for a fixed window of `limit` units per `window_us`; `None` when no
/// script of that limit could have given it.
fn unpack(x: i64, limit: u64, window_us: u64) -> Option<Unpacked> {
    let modulus = packed_slots(limit, window_us)?;
    let x = u64::try_from(x).ok()?;
    let (window_ms, limit_1) = (window_us / 1000 + 1, limit + 1);
    let (rest, ttl_ms) = (x / window_ms, x % window_ms);
    let (residue, count) = (rest / limit_1, rest % limit_1);
    (residue < modulus).then_some(Unpacked {
        residue,
        modulus,
        count,
        ttl_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As `lua/fixed_window.lua#one` packs it.
    fn pack(slot: u64, count: u64, ttl_ms: u64, limit: u64, window_us: u64) -> i64 {
        let s = packed_slots(limit, window_us).expect("packable");
        let x = ((slot - 1) % s * (limit + 1) + count) * (window_us / 1000 + 1) + ttl_ms;
        i64::try_from(x).expect("below 2^53")
    }

    #[test]
    fn a_packed_answer_unpacks_to_what_was_packed() {
        let minute = 60_000_000;
        for (limit, window_us) in [
            (1000, minute),
            (1, 1000),
            (16_777_216, minute),
            (10, 86_400_000_000),
        ] {
            let s = packed_slots(limit, window_us).expect("packable");
            assert_eq!(FIXED_WINDOW_SLOTS % s, 0);
            assert!(DIVISORS.is_sorted() && DIVISORS[63] == FIXED_WINDOW_SLOTS);
            let window_ms = window_us / 1000;
            assert!(u128::from(s) * u128::from(limit + 1) * u128::from(window_ms + 1) <= 1 << 53);
            assert!(u128::from(s) * u128::from(window_ms) >= MIN_SPAN_MS);
            for (slot, count, ttl) in [
                (1, 1, 1),
                (FIXED_WINDOW_SLOTS, limit, window_ms),
                (77, 1, window_ms.min(2)),
            ] {
                let x = pack(slot, count, ttl, limit, window_us);
                assert_eq!(
                    unpack(x, limit, window_us),
                    Some(Unpacked {
                        residue: (slot - 1) % s,
                        modulus: s,
                        count,
                        ttl_ms: ttl
                    })
                );
            }
        }
        // Small numbers keep every slot; larger ones the largest divisor of the period that fits.
        assert_eq!(packed_slots(10, 60_000_000), Some(FIXED_WINDOW_SLOTS));
        assert_eq!(packed_slots(1000, 60_000_000), Some(FIXED_WINDOW_SLOTS / 3));
    }

    #[test]
    fn limits_that_leave_no_modulus_get_no_packed_answer() {
        // Not whole milliseconds; no span of a day; above 2^53 even for one slot.
        assert_eq!(packed_slots(10, 1500), None);
        assert_eq!(packed_slots(u64::from(u32::MAX), 1000), None);
        assert_eq!(packed_slots(16_777_216, 1 << 50), None);
        assert_eq!(packed_slots(10, 0), None);
        // A value out of range for the limit is no packed answer.
        assert_eq!(unpack(-1, 10, 60_000_000), None);
        assert_eq!(unpack(1 << 60, 10, 60_000_000), None);
    }
}
