//! The reply of fixed windows admitted in their marked windows (`lua/one_fixed_window.lua`,
//! `lua/many_marked.lua`): each key's value and its PTTL, from which the store rebuilds the
//! outcomes and Redis' time. The only reply decoded with the limits' own numbers and a local
//! clock.

use smallvec::SmallVec;

use crate::algorithm::LimitOutcome;
use crate::model::Micros;
use crate::store::{LimitCall, StoreError};

/// How a fixed window's key holds its count: -(slot * 2^25 + count) (`lua/fixed_window.lua`).
const FIXED_WINDOW_M: i64 = 1 << 25;
const FIXED_WINDOW_SLOTS: i64 = 268_435_455;

/// What one key's value and PTTL tell: a count in its marked window, or a block in force; the
/// end of either and the start of the millisecond Redis read the PTTL in, in µs.
struct Marked {
    count: u64,
    blocked: bool,
    end_us: u64,
    start_us: u64,
}

/// Decodes the value and PTTL of `call`'s key. The window is the one of the value's slot nearest
/// `local_us` (a clock need only be within 2^27 windows of Redis'). A positive value is the end of
/// a block whose marker expires with it (`B0`, see `lua/prelude.lua`), in µs, rounded up to the
/// millisecond for its expiry; 2 ms or more left prove it in force.
fn marked(
    value: i64,
    ttl_ms: i64,
    call: &LimitCall,
    local_us: u64,
    bad: impl Fn() -> StoreError,
) -> Result<Marked, StoreError> {
    let (limit, window_us) = (call.step.params.count, call.step.params.window_us);
    let ms_to_us = |ms: i64| {
        u64::try_from(ms)
            .ok()
            .and_then(|ms| ms.checked_mul(1000))
            .ok_or_else(&bad)
    };
    if value > 0 {
        if ttl_ms < 2 || (call.step.block_us.is_none() && call.step.penalty.is_none()) {
            return Err(bad());
        }
        let end_ms = value / 1000 + i64::from(value % 1000 != 0);
        return Ok(Marked {
            // A block answers remaining 0 (decide.lua).
            count: limit,
            blocked: true,
            end_us: value.unsigned_abs(),
            start_us: ms_to_us(end_ms - ttl_ms)?,
        });
    }
    let window = i64::try_from(window_us.get()).map_err(|_| bad())?;
    let held = value.checked_neg().ok_or_else(&bad)?;
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
    let guess = i64::try_from(local_us).unwrap_or(i64::MAX) / window;
    let above = guess + (residue - guess).rem_euclid(FIXED_WINDOW_SLOTS);
    let below = above - FIXED_WINDOW_SLOTS;
    let index = if below >= 0 && guess - below < above - guess {
        below
    } else {
        above
    };
    let end_ms = (index + 1).checked_mul(window / 1000).ok_or_else(&bad)?;
    Ok(Marked {
        count: count.unsigned_abs(),
        blocked: false,
        end_us: ms_to_us(end_ms)?,
        start_us: ms_to_us(end_ms - ttl_ms)?,
    })
}

/// A blocked fixed window's answer as one value, `<PTTL>B0<end>` (`lua/one_fixed_window.lua`):
/// the pair `[end, PTTL]` that [`parse_marked_reply`] decodes.
pub fn text_pair(text: &[u8]) -> Result<[i64; 2], StoreError> {
    let pair = std::str::from_utf8(text).ok().and_then(|text| {
        let (ttl, end) = text.split_once("B0")?;
        Some([end.parse().ok()?, ttl.parse().ok()?])
    });
    pair.ok_or_else(|| {
        let text = String::from_utf8_lossy(text);
        StoreError::permanent("redis", format!("unexpected marked reply: {text}"))
    })
}

/// Decodes an answer from marked keys: `{ the key's value, its PTTL in ms }` per limit, from a
/// one-limit fixed window (`lua/one_fixed_window.lua`: an admission in its marked window, or a
/// block in force), then for a guarded one its violations key's count and end; or from a rule of
/// such limits, unguarded, all admitted (`lua/many_marked.lua`). `None` for any other reply. Each
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
    let (pairs, held) = match (calls.len(), reply) {
        (1, [_, _]) => (reply, None),
        (1, [value, ttl, violations, forget]) => {
            (&[*value, *ttl][..], Some((*violations, *forget)))
        }
        (n, _) if n >= 2 && reply.len() == 2 * n => (reply, None),
        _ => return Ok(None),
    };
    let bad = || StoreError::permanent("redis", format!("unexpected marked reply: {reply:?}"));
    let local_us = local_now_us().get();
    let keys = pairs
        .chunks_exact(2)
        .zip(calls)
        .map(|(pair, call)| marked(pair[0], pair[1], call, local_us, bad))
        .collect::<Result<SmallVec<[Marked; 4]>, _>>()?;
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

    /// The reply for `call` alone.
    fn parse_one(
        reply: &[i64],
        call: &LimitCall,
        local_now_us: impl FnOnce() -> Micros,
        latest_us: Micros,
    ) -> Result<Option<(Micros, LimitOutcome)>, StoreError> {
        let parsed =
            parse_marked_reply(reply, std::slice::from_ref(call), local_now_us, latest_us)?;
        Ok(parsed.map(|(now, mut outcomes)| (now, outcomes.remove(0))))
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
            let (now, o) = parse_one(&reply, &minute, local, Micros::ZERO)
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
        let (_, o) = parse_one(&remembered, &minute, local, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!((o.violations, o.warning), (2, true));
        let forgotten = [held(29_402_281, 3), 40_000, 2, redis_us];
        let (_, o) = parse_one(&forgotten, &minute, local, Micros::ZERO)
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
            let (n, o) = parse_one(&remembered, &minute, local, latest)
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
        let (now, o) = parse_one(&[held(slot, 2), 1], &ms, clock, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!((now, o.remaining), (Micros::new(1_764_136_820_000_000), 0));
        // Any other reply is not a marked one; a marked one out of range is an error.
        assert_eq!(
            parse_one(&[5, 1, 3], &ms, clock, Micros::ZERO).unwrap(),
            None
        );
        assert_eq!(parse_one(&[], &ms, clock, Micros::ZERO).unwrap(), None);
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
                parse_one(&bad, &ms, clock, Micros::ZERO).is_err(),
                "{bad:?}"
            );
        }
        let odd = fixed_window(2, 1500);
        assert!(parse_one(&[held(1, 1), 1], &odd, clock, Micros::ZERO).is_err());
        // A reply no window could give (a garbled or hostile server) is an error, never a panic.
        let long = fixed_window(2, 1 << 52);
        let far = || Micros::new(u64::MAX);
        for slot in [5000, FIXED_WINDOW_SLOTS] {
            assert!(parse_one(&[held(slot, 1), 1], &long, far, Micros::ZERO).is_err());
        }
        assert!(parse_one(&[held(1, 1), 1], &fixed_window(2, 0), clock, Micros::ZERO).is_err());
    }

    #[test]
    fn a_rule_of_marked_windows_answers_two_values_a_limit_at_one_time() {
        let held = |slot: i64, count: i64| -(slot * FIXED_WINDOW_M + count);
        let (minute, hour) = (
            fixed_window(10, 60_000_000),
            fixed_window(100, 3_600_000_000),
        );
        let rule = [minute, hour];
        // 20 s into minute 29_402_280 and into hour 490_038 (slots one above).
        let reply = [held(29_402_281, 3), 40_000, held(490_039, 7), 3_580_000];
        let local = || Micros::new(1_764_136_800_000_000);
        let redis = Micros::new(1_764_136_820_000_000);
        let (now, o) = parse_marked_reply(&reply, &rule, local, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!(now, redis);
        assert_eq!(
            (o[0].remaining, o[0].reset_after_us),
            (7, Micros::new(40_000_000))
        );
        assert_eq!(
            (o[1].remaining, o[1].reset_after_us),
            (93, Micros::new(3_580_000_000))
        );
        assert!(o.iter().all(|o| o.allowed && o.violations == 0));
        // PTTLs read a millisecond apart (a Redis that reads the clock anew): the later one.
        let apart = [held(29_402_281, 3), 40_000, held(490_039, 7), 3_579_999];
        let (now, o) = parse_marked_reply(&apart, &rule, local, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!(now, redis + Micros::new(1000));
        assert_eq!(o[0].reset_after_us, Micros::new(39_999_000));
        // Two values a limit, no violations; anything else is no marked reply of the rule.
        assert!(
            parse_marked_reply(&reply[..2], &rule, local, Micros::ZERO)
                .unwrap()
                .is_none()
        );
        let odd = [held(29_402_281, 3), 40_000, 1];
        assert!(
            parse_marked_reply(&odd, &rule, local, Micros::ZERO)
                .unwrap()
                .is_none()
        );
        let late = [held(29_402_281, 3), 40_000, held(490_039, 7), 3_600_001];
        assert!(parse_marked_reply(&late, &rule, local, Micros::ZERO).is_err());
    }

    #[test]
    fn a_marker_that_ends_with_its_block_answers_the_block_at_redis_time() {
        let minute = fixed_window(10, 60_000_000);
        // Ends 1.5 ms into a millisecond: expires at the next; 3,001 ms left at Redis' time.
        let until: i64 = 1_764_136_823_001_500;
        let redis = Micros::new(1_764_136_820_001_000);
        let local = || Micros::new(1_764_100_000_000_000);
        let (now, o) = parse_one(&[until, 3001, 2, until + 1], &minute, local, Micros::ZERO)
            .unwrap()
            .unwrap();
        assert_eq!(now, redis);
        let left = Micros::new(3_000_500);
        assert!(!o.allowed && o.remaining == 0);
        assert_eq!((o.retry_after_us, o.reset_after_us), (Some(left), left));
        assert_eq!(o.blocked_until_us, Some(Micros::new(until.unsigned_abs())));
        assert_eq!((o.violations, o.warning), (2, true));
        // 1 ms left may be none; a limit without a block or penalty has no marker; nor has a rule.
        assert!(parse_one(&[until, 1], &minute, local, Micros::ZERO).is_err());
        let mut plain = fixed_window(10, 60_000_000);
        plain.step.penalty = None;
        assert!(parse_one(&[until, 3001], &plain, local, Micros::ZERO).is_err());
        let rule = [minute.clone(), minute];
        let reply = [until, 3001, -(FIXED_WINDOW_M + 1), 40_000];
        assert!(parse_marked_reply(&reply, &rule, local, Micros::ZERO).is_err());
    }

    #[test]
    fn a_block_answered_as_one_value_reads_as_its_pair() {
        assert_eq!(
            text_pair(b"3001B01764136823001500").unwrap(),
            [1_764_136_823_001_500, 3001]
        );
        for bad in [&b"3001B1764"[..], b"B01764", b"3001B0", b"x", b"3001B0-"] {
            assert!(text_pair(bad).is_err(), "{bad:?}");
        }
    }
}
