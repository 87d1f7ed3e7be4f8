//! The reply of a one-limit fixed window admitted in a marked window
//! (`lua/one_fixed_window.lua`): the key's value and its PTTL, from which the store rebuilds the
//! outcome and Redis' time. The only reply decoded with the limit's own numbers and a local clock.

use crate::algorithm::LimitOutcome;
use crate::model::Micros;
use crate::store::{LimitCall, StoreError};

/// How a fixed window's key holds its count: -(slot * 2^25 + count) (`lua/fixed_window.lua`).
const FIXED_WINDOW_M: i64 = 1 << 25;
const FIXED_WINDOW_SLOTS: i64 = 268_435_455;

/// Decodes a one-limit fixed window's admission in a marked window (`lua/one_fixed_window.lua`):
/// `{ the key's value, its PTTL in ms }`, then for a guarded limit its violations key's count and
/// end; `None` for any other reply. The window is the one of the value's slot nearest
/// `local_now_us` (a clock need only be within 2^27 windows of Redis'); Redis' time was its end
/// less the TTL, to the millisecond.
///
/// The decision's time, which the violations count at, is the latest instant of that millisecond
/// known to have passed: its start, raised to `latest_us`, the latest Redis time the store has
/// read, up to its last µs. Redis decided at some instant of the millisecond, and the count's answer is
/// the same at every one of them; but a block lifted, or a violation forgotten, earlier in that
/// millisecond was over for Redis, and must not be in force again at the time reported.
pub fn parse_marked_reply(
    reply: &[i64],
    call: &LimitCall,
    local_now_us: impl FnOnce() -> Micros,
    latest_us: Micros,
) -> Result<Option<(Micros, LimitOutcome)>, StoreError> {
    let (value, ttl_ms, held_violations, held_forget_us) = match *reply {
        [value, ttl_ms] => (value, ttl_ms, 0, 0),
        [value, ttl_ms, held, forget] => (value, ttl_ms, held, forget),
        _ => return Ok(None),
    };
    let (limit, window_us) = (call.step.params.count, call.step.params.window_us);
    let bad = || StoreError::permanent("redis", format!("unexpected marked reply: {reply:?}"));
    let window = i64::try_from(window_us.get()).map_err(|_| bad())?;
    let held = value.checked_neg().ok_or_else(bad)?;
    let (slot, count) = (held / FIXED_WINDOW_M, held % FIXED_WINDOW_M);
    if !(1..=FIXED_WINDOW_SLOTS).contains(&slot)
        || count < 1
        || count.unsigned_abs() > limit
        || ttl_ms < 1
        || ttl_ms.saturating_mul(1000) > window
        || window % 1000 != 0
    {
        return Err(bad());
    }
    let residue = slot - 1;
    let guess = i64::try_from(local_now_us().get()).unwrap_or(i64::MAX) / window;
    let above = guess + (residue - guess).rem_euclid(FIXED_WINDOW_SLOTS);
    let below = above - FIXED_WINDOW_SLOTS;
    let index = if below >= 0 && guess - below < above - guess {
        below
    } else {
        above
    };
    let end_ms = (index + 1).checked_mul(window / 1000).ok_or_else(bad)?;
    let start_us = u64::try_from(end_ms - ttl_ms)
        .ok()
        .and_then(|ms| ms.checked_mul(1000))
        .ok_or_else(bad)?;
    let now_us = start_us.max(latest_us.get().min(start_us + 999));
    // As one_head.lua counts them: remembered until their end, a warning from warn_after on.
    let violations = if held_forget_us > 0 && held_forget_us.unsigned_abs() > now_us {
        held_violations.unsigned_abs()
    } else {
        0
    };
    let warn_after = call.step.penalty.map(|p| p.warn_after);
    let outcome = LimitOutcome {
        allowed: true,
        remaining: limit - count.unsigned_abs(),
        reset_after_us: Micros::new(ttl_ms.unsigned_abs() * 1000 - (now_us - start_us)),
        retry_after_us: None,
        delay_us: Micros::ZERO,
        blocked_until_us: None,
        violations,
        warning: warn_after.is_some_and(|w| violations > 0 && violations >= w),
    };
    Ok(Some((Micros::new(now_us), outcome)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixed-window call of `limit` units per `window_us`, with a penalty warning from 2.
    fn fixed_window(limit: u64, window_us: u64) -> LimitCall {
        use crate::algorithm::{LimitStep, Params, penalty};
        use crate::model::Algorithm;
        LimitCall {
            key: crate::store::LimitKey {
                rule: "r".into(),
                limit_id: "l".into(),
                identity: "ip=1".into(),
            },
            step: LimitStep {
                algorithm: Algorithm::FixedWindow,
                params: Params::new(limit, Micros::new(window_us), limit),
                cost: 1,
                block_us: None,
                penalty: Some(penalty::Settings {
                    warn_after: 2,
                    ban_after: 5,
                    ban_us: Micros::new(1),
                    memory_us: Micros::new(1),
                }),
                shadow: false,
                lease: None,
            },
        }
    }

    #[test]
    fn a_marked_reply_finds_its_window_from_the_slot_and_a_nearby_clock() {
        let held = |slot: i64, count: i64| -(slot * FIXED_WINDOW_M + count);
        let minute = fixed_window(10, 60_000_000);
        // Window 29_402_280 (from 1_764_136_800 s) has slot 29_402_281; Redis is 20 s into it.
        let redis_ms = 1_764_136_820_000;
        let reply = [held(29_402_281, 3), 40_000];
        for local_s in [1_764_136_820, 1_764_136_790, 1_764_136_900, 1_764_100_000] {
            let local = || Micros::new(local_s * 1_000_000);
            let (now, o) = parse_marked_reply(&reply, &minute, local, Micros::ZERO)
                .unwrap()
                .unwrap();
            assert_eq!(
                now,
                Micros::new(redis_ms * 1000),
                "local clock at {local_s} s"
            );
            assert!(o.allowed && o.retry_after_us.is_none() && o.blocked_until_us.is_none());
            assert_eq!(
                (o.remaining, o.reset_after_us),
                (7, Micros::new(40_000_000))
            );
            assert_eq!((o.violations, o.warning), (0, false));
        }
        // The violations count while they are remembered, at Redis' time.
        let local = || Micros::new(redis_ms * 1000);
        let redis_us = 1_764_136_820_000_000;
        let remembered = [held(29_402_281, 3), 40_000, 2, redis_us + 1];
        let (_, o) = parse_marked_reply(&remembered, &minute, local, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!((o.violations, o.warning), (2, true));
        let forgotten = [held(29_402_281, 3), 40_000, 2, redis_us];
        let (_, o) = parse_marked_reply(&forgotten, &minute, local, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!((o.violations, o.warning), (0, false));
        // Redis' latest time read is the decision's, within its millisecond: a violation
        // forgotten before it is not counted again. One read before it says nothing; one after
        // it makes the decision's the millisecond's last µs.
        let at = |us: u64| Micros::new(1_764_136_820_000_000 + us);
        for (latest, now, violations) in [
            (at(1), at(1), 0),
            (Micros::new(1_764_136_819_999_999), at(0), 2),
            (at(5000), at(999), 0),
        ] {
            let (n, o) = parse_marked_reply(&remembered, &minute, local, latest)
                .unwrap()
                .unwrap();
            assert_eq!((n, o.violations), (now, violations), "{latest:?}");
            assert_eq!(o.reset_after_us, Micros::new(40_000_000) - (now - at(0)));
        }
        // Windows of 1 ms wrap their slots every 2^28 - 1 ms (3.1 days): a clock off by a day
        // still finds the window.
        let ms = fixed_window(2, 1000);
        let index: i64 = 1_764_136_820_000;
        let slot = index % FIXED_WINDOW_SLOTS + 1;
        let day = 86_400_000_000;
        let clock = || Micros::new(1_764_136_820_000_000 + day);
        let (now, o) = parse_marked_reply(&[held(slot, 2), 1], &ms, clock, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!((now, o.remaining), (Micros::new(1_764_136_820_000_000), 0));
        // Any other reply is not a marked one; a marked one out of range is an error.
        assert_eq!(
            parse_marked_reply(&[5, 1, 3], &ms, clock, Micros::ZERO).unwrap(),
            None
        );
        assert_eq!(
            parse_marked_reply(&[], &ms, clock, Micros::ZERO).unwrap(),
            None
        );
        for bad in [
            [held(1, 1), 2],
            [held(1, 1), 0],
            [held(1, 3), 1],
            [held(1, 0), 1],
            [held(0, 1), 1],
            [held(FIXED_WINDOW_SLOTS + 1, 1), 1],
            [5, 1],
            [i64::MIN, 1],
        ] {
            assert!(
                parse_marked_reply(&bad, &ms, clock, Micros::ZERO).is_err(),
                "{bad:?}"
            );
        }
        let odd = fixed_window(2, 1500);
        assert!(parse_marked_reply(&[held(1, 1), 1], &odd, clock, Micros::ZERO).is_err());
        // A reply no window could give (a garbled or hostile server) is an error, never a panic.
        let long = fixed_window(2, 1 << 52);
        let far = || Micros::new(u64::MAX);
        for slot in [5000, FIXED_WINDOW_SLOTS] {
            assert!(parse_marked_reply(&[held(slot, 1), 1], &long, far, Micros::ZERO).is_err());
        }
        assert!(
            parse_marked_reply(&[held(1, 1), 1], &fixed_window(2, 0), clock, Micros::ZERO).is_err()
        );
    }
}
