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
pub fn slots(limit: u64, window_us: u64) -> Option<u64> {
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
pub struct Unpacked {
    /// The window's index mod `modulus`.
    pub residue: u64,
    /// [`slots`] of the limit.
    pub modulus: u64,
    /// The key's count, this request's cost included.
    pub count: u64,
    /// The key's PTTL, in ms.
    pub ttl_ms: u64,
}

/// Unpacks `x`, the answer for a fixed window of `limit` units per `window_us`; `None` when no
/// script of that limit could have given it.
pub fn unpack(x: i64, limit: u64, window_us: u64) -> Option<Unpacked> {
    let modulus = slots(limit, window_us)?;
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
    use super::super::source::FIXED_WINDOW_SLOTS;
    use super::*;

    /// As `lua/fixed_window.lua#one` packs it.
    fn pack(slot: u64, count: u64, ttl_ms: u64, limit: u64, window_us: u64) -> i64 {
        let s = slots(limit, window_us).expect("packable");
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
            let s = slots(limit, window_us).expect("packable");
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
        assert_eq!(slots(10, 60_000_000), Some(FIXED_WINDOW_SLOTS));
        assert_eq!(slots(1000, 60_000_000), Some(FIXED_WINDOW_SLOTS / 3));
    }

    #[test]
    fn limits_that_leave_no_modulus_get_no_packed_answer() {
        // Not whole milliseconds; no span of a day; above 2^53 even for one slot.
        assert_eq!(slots(10, 1500), None);
        assert_eq!(slots(u64::from(u32::MAX), 1000), None);
        assert_eq!(slots(16_777_216, 1 << 50), None);
        assert_eq!(slots(10, 0), None);
        // A value out of range for the limit is no packed answer.
        assert_eq!(unpack(-1, 10, 60_000_000), None);
        assert_eq!(unpack(1 << 60, 10, 60_000_000), None);
    }
}
