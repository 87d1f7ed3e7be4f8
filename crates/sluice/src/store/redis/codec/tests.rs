//! The decoding of every reply kind, against replies written by hand as the scripts write them.

use redis::Value;

use super::marked::packed_slots;
use super::*;
use crate::store::redis::constants;

const FIXED_WINDOW_M: i64 = constants::FIXED_WINDOW_M as i64;
const FIXED_WINDOW_SLOTS: i64 = constants::FIXED_WINDOW_SLOTS as i64;

/// A fixed-window call of `limit` units per `window_us`, with a penalty warning from 2.
fn fixed_window(limit: u64, window_us: u64) -> LimitCall {
    use crate::algorithm::{LimitStep, Params, PenaltyParams};
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
            penalty: Some(PenaltyParams {
                warn_after: 2,
                ban_after: 5,
                ban_us: Micros::new(1),
                memory_us: Micros::new(1),
            }),
            shadow: false,
            lease: None,
            settable: false,
        },
    }
}

/// An array reply of integers, as a script answers a Lua table of numbers.
fn array(values: &[i64]) -> Value {
    Value::Array(values.iter().map(|&v| Value::Int(v)).collect())
}

/// `reply` decoded for `calls`, with the local clock at `local` and Redis' latest time `latest`.
fn decode_with(
    reply: &Value,
    calls: &[LimitCall],
    local: impl Fn() -> Micros + Sync,
    latest: Micros,
) -> Result<Option<(Micros, Vec<LimitOutcome>)>, StoreError> {
    let reading = Reading {
        calls,
        local_now_us: &local,
        latest_us: latest,
    };
    Ok(decode(reply, &reading)?.map(|d| (d.now_us, d.outcomes)))
}

/// A marked reply (one integer, or integers) for `calls`.
fn decode_marked(
    reply: &[i64],
    calls: &[LimitCall],
    local: impl Fn() -> Micros + Sync,
    latest: Micros,
) -> Result<Option<(Micros, Vec<LimitOutcome>)>, StoreError> {
    let reply = match reply {
        [packed] => Value::Int(*packed),
        _ => array(reply),
    };
    decode_with(&reply, calls, local, latest)
}

/// The marked reply for `call` alone.
fn parse_one(
    reply: &[i64],
    call: &LimitCall,
    local: impl Fn() -> Micros + Sync,
    latest: Micros,
) -> Result<Option<(Micros, LimitOutcome)>, StoreError> {
    let parsed = decode_marked(reply, std::slice::from_ref(call), local, latest)?;
    Ok(parsed.map(|(now, mut outcomes)| (now, outcomes.remove(0))))
}

/// `calls` plain limits of 10 a minute, no block or penalty, for the replies that need no
/// numbers of theirs.
fn plain(calls: usize) -> Vec<LimitCall> {
    let mut call = fixed_window(10, 60_000_000);
    call.step.penalty = None;
    vec![call; calls]
}

/// An outcome reply of the general decision, or a one-limit or rule script, for `limits`.
fn outcomes_of(
    reply: &[i64],
    calls: &[LimitCall],
) -> Result<Option<(Micros, Vec<LimitOutcome>)>, StoreError> {
    decode_with(&array(reply), calls, || Micros::ZERO, Micros::ZERO)
}

#[test]
fn every_kind_has_its_own_sign() {
    let calls = plain(1);
    let text = |t: &[u8]| Value::BulkString(t.to_vec());
    let local = || Micros::new(1_764_136_800_000_000);
    let of = |reply: &Value| decode_with(reply, &calls, local, Micros::ZERO);
    assert_eq!(of(&array(&[])).unwrap(), None);
    for bad in [text(b"x"), text(b""), Value::Nil, text(b"\xff")] {
        assert!(of(&bad).is_err(), "{bad:?}");
    }
    // Every outcome layout is odd in length: the time, then whole limits.
    for width in WIDTHS {
        for limits in 1..=8 {
            assert_eq!((1 + width * limits) % 2, 1);
        }
    }
}

#[test]
fn outcome_replies_decode_and_malformed_ones_are_errors() {
    let two = plain(2);
    // The general decision's layout: allowed, remaining, reset, retry, violations, warning,
    // delay, blocked until.
    let reply = [5, 1, 3, 10, -1, 0, 0, 0, -1, 0, 0, 7, 2, 2, 1, 0, 9];
    let (now, o) = outcomes_of(&reply, &two).unwrap().unwrap();
    assert_eq!(now, Micros::new(5));
    assert!(o[0].allowed && o[0].retry_after_us.is_none());
    assert_eq!(o[1].retry_after_us, Some(Micros::new(2)));
    assert_eq!(o[1].blocked_until_us, Some(Micros::new(9)));
    assert!(o[1].warning);
    assert!(outcomes_of(&reply, &plain(1)).is_err());
    assert!(outcomes_of(&[1, 1, -5, 0, -1, 0, 0, 0, -1], &plain(1)).is_err());
    // A one-limit or rule script's: the first 4 values, or 6 with a block or penalty.
    let one = outcomes_of(&[5, 0, 0, 10, 7, 2, 1], &plain(1))
        .unwrap()
        .unwrap();
    assert_eq!(one.1[0].retry_after_us, Some(Micros::new(7)));
    assert_eq!((one.1[0].violations, one.1[0].warning), (2, true));
    let unguarded = outcomes_of(&[5, 1, 3, 10, -1], &plain(1)).unwrap().unwrap();
    assert_eq!(unguarded.0, Micros::new(5));
    let o = &unguarded.1[0];
    assert!(o.allowed && o.retry_after_us.is_none() && o.blocked_until_us.is_none());
    assert_eq!((o.remaining, o.violations, o.warning), (3, 0, false));
    assert_eq!(o.delay_us, Micros::ZERO);
    assert!(outcomes_of(&[5, 1, 3, 10, -1, 0, 0, 1], &plain(1)).is_err());
    let (_, many) = outcomes_of(&[5, 1, 3, 10, -1, 0, 0, 4, 4], &two)
        .unwrap()
        .unwrap();
    assert!(many[0].allowed && many[0].retry_after_us.is_none());
    assert_eq!(many[1].retry_after_us, Some(Micros::new(4)));
    assert_eq!(many[1].blocked_until_us, None);
    assert!(outcomes_of(&[5, 1, 3, 10, -1, 0, 0, 4], &two).is_err());
    let (_, guarded) = outcomes_of(&[5, 1, 3, 10, -1, 0, 0, 1, 4, 9, -1, 2, 1], &two)
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

#[test]
fn the_general_decision_adds_each_settable_limits_numbers() {
    let mut calls = plain(2);
    calls[1].step.settable = true;
    let limits = [5, 1, 3, 10, -1, 0, 0, 0, -1, 1, 4, 10, -1, 0, 0, 0, -1];
    let with = |tail: &[i64]| outcomes_of(&[&limits[..], tail].concat(), &calls);
    let (_, o) = with(&[7, 9]).unwrap().unwrap();
    assert_eq!(o[0].runtime, None);
    let numbers = o[1].runtime.expect("the settable limit's numbers");
    assert_eq!(numbers, crate::algorithm::RuntimeNumbers::counts(7, 9));
    assert_eq!(with(&[0, 0]).unwrap().unwrap().1[1].runtime, None);
    for bad in [&[][..], &[7][..], &[7, 9, 1, 1], &[0, 9], &[-1, 9]] {
        assert!(with(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_block_in_force_decodes_from_its_text() {
    let one = plain(1);
    let text = |t: &[u8]| Value::BulkString(t.to_vec());
    let of = |t: &[u8]| decode_with(&text(t), &one, || Micros::ZERO, Micros::ZERO);
    let (now, o) = of(b"B1000 400 3 1").unwrap().unwrap();
    assert_eq!(now, Micros::new(400));
    assert!(!o[0].allowed && o[0].remaining == 0);
    assert_eq!(o[0].retry_after_us, Some(Micros::new(600)));
    assert_eq!(o[0].reset_after_us, Micros::new(600));
    assert_eq!(o[0].blocked_until_us, Some(Micros::new(1000)));
    assert_eq!((o[0].violations, o[0].warning), (3, true));
    // A marker that expires with its block (`B0`) reads the same.
    let b0 = of(b"B01000 400 3 1").unwrap().unwrap();
    assert_eq!(b0.1[0].blocked_until_us, Some(Micros::new(1000)));
    // So does one with the copy of its violations: the answer's own count is the one taken.
    assert_eq!(of(b"B01000 3 5000 400 3 1").unwrap(), Some(b0.clone()));
    assert_eq!(Some(b0.clone()), of(b"B1000 400 3 1").unwrap());
    for bad in [
        &b"B1000 400 0"[..],
        b"B1000 400 0 0 0",
        b"B1000 3 5000 400 3 1 0",
        b"B1000 1000 0 0",
        b"B1000 4e2 0 0",
        b"B\xff",
    ] {
        assert!(of(bad).is_err(), "{bad:?}");
    }
    // A rule script never answers so.
    let two = plain(2);
    assert!(decode_with(&text(b"B1000 400 3 1"), &two, || Micros::ZERO, Micros::ZERO).is_err());
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
    // A marked reply out of range is an error.
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
    let (now, o) = decode_marked(&reply, &rule, local, Micros::ZERO)
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
    let (now, o) = decode_marked(&apart, &rule, local, Micros::ZERO)
        .unwrap()
        .unwrap();
    assert_eq!(now, redis + Micros::new(1000));
    assert_eq!(o[0].reset_after_us, Micros::new(39_999_000));
    // Two values a limit, no violations: anything else is an error.
    assert!(decode_marked(&reply[..2], &rule, local, Micros::ZERO).is_err());
    let four = [held(29_402_281, 3), 40_000, 2, 1];
    assert!(decode_marked(&four, &rule[..1], local, Micros::ZERO).is_ok());
    let six = [
        held(29_402_281, 3),
        40_000,
        held(490_039, 7),
        3_580_000,
        2,
        1,
    ];
    assert!(decode_marked(&six, &rule, local, Micros::ZERO).is_err());
    let late = [held(29_402_281, 3), 40_000, held(490_039, 7), 3_600_001];
    assert!(decode_marked(&late, &rule, local, Micros::ZERO).is_err());
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
    assert!(decode_marked(&reply, &rule, local, Micros::ZERO).is_err());
}

#[test]
fn a_block_answered_as_one_value_reads_as_its_values() {
    let minute = fixed_window(10, 60_000_000);
    let local = || Micros::new(1_764_100_000_000_000);
    let text = |t: &[u8]| {
        decode_with(
            &Value::BulkString(t.to_vec()),
            std::slice::from_ref(&minute),
            local,
            Micros::ZERO,
        )
    };
    let until: i64 = 1_764_136_823_001_500;
    assert_eq!(
        text(b"3001B01764136823001500").unwrap(),
        decode_marked(
            &[until, 3001],
            std::slice::from_ref(&minute),
            local,
            Micros::ZERO
        )
        .unwrap()
    );
    assert_eq!(
        text(b"3001B01764136823001500 2 1764136900000000").unwrap(),
        decode_marked(
            &[until, 3001, 2, 1_764_136_900_000_000],
            std::slice::from_ref(&minute),
            local,
            Micros::ZERO
        )
        .unwrap()
    );
    for bad in [
        &b"3001B1764"[..],
        b"B01764",
        b"3001B0",
        b"x",
        b"3001B0-",
        b"3001B01764 2",
        b"3001B01764 2 3 4",
        b"3001B01764  2 3",
    ] {
        assert!(text(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn a_packed_admission_decodes_as_its_pair() {
    let held = |slot: i64, count: i64| -(slot * FIXED_WINDOW_M + count);
    // As fixed_window.lua#one packs `{ value, PTTL }`.
    let pack = |slot: i64, count: i64, ttl: i64, call: &LimitCall| {
        let (limit, window_us) = (call.step.params.count, call.step.params.window_us.get());
        let s = packed_slots(limit, window_us).expect("packable") as i64;
        let (limit, window_ms) = (limit as i64, (window_us / 1000) as i64);
        ((slot - 1) % s * (limit + 1) + count) * (window_ms + 1) + ttl
    };
    let minute = fixed_window(10, 60_000_000);
    // A day's window of a large limit keeps fewer slots: a clock a day off still finds it.
    let day = fixed_window(1 << 24, 86_400_000_000);
    let redis_s = 1_764_136_820;
    for (call, slot, count, ttl) in [
        (&minute, 29_402_281, 3, 40_000),
        (&minute, 29_402_281, 10, 1),
        (&day, 20_419, 5, 64_780_000),
    ] {
        for local_s in [redis_s, redis_s - 30, redis_s + 86_000, redis_s - 86_000] {
            let local = || Micros::new(local_s * 1_000_000);
            let latest = Micros::new(redis_s * 1_000_000 + 300);
            let packed = parse_one(&[pack(slot, count, ttl, call)], call, local, latest);
            let pair = parse_one(&[held(slot, count), ttl], call, local, latest);
            assert_eq!(
                packed.unwrap(),
                pair.unwrap(),
                "{slot} {count} {ttl} at {local_s}"
            );
        }
    }
    // A number no script of the limit could pack is an error.
    for bad in [
        -1,
        i64::MAX,
        0,
        pack(7, 11, 5, &minute),
        pack(7, 1, 60_001, &minute),
    ] {
        assert!(
            parse_one(&[bad], &minute, || Micros::new(0), Micros::ZERO).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn a_quota_in_its_periods_key_decodes_from_one_number() {
    use crate::model::{Period, PeriodBounds, PeriodUnit};
    let mut call = plain(1).remove(0);
    call.step.params.period = Some(Period::new(PeriodUnit::Day).interned());
    // A day ending at 86,400,000,000 µs (a whole ms).
    let (start, end) = (0u64, 86_400_000_000u64);
    let period = PeriodBounds {
        start: Micros::new(start),
        end: Micros::new(end),
    };
    let (radix, packable) = quota_radix(period);
    assert_eq!(radix, 86_400_002);
    assert!(packable * radix + radix < 1 << 53);
    let read = |x: i64, latest: u64| quota_answer(x, period, &call, Micros::new(latest)).unwrap();
    // Three counted, 250 ms left.
    let d = read(3 * radix as i64 + 250, 0);
    assert_eq!(d.now_us.get(), end - 250_000);
    let o = d.outcomes[0];
    assert!(o.allowed && !d.exact);
    assert_eq!(
        (o.remaining, o.reset_after_us.get(), o.retry_after_us),
        (7, 250_000, None)
    );
    // Redis' latest time raises the estimate within its millisecond, never past the end.
    let d = read(3 * radix as i64 + 250, end - 250_000 + 400);
    assert_eq!(d.now_us.get(), end - 250_000 + 400);
    // A denial (negated, its count undone) waits for the period's end.
    let o = read(-(10 * radix as i64 + 1), 0).outcomes[0];
    assert!(!o.allowed);
    assert_eq!(
        (o.remaining, o.retry_after_us),
        (0, Some(Micros::new(1000)))
    );
    // Past the quota, counted (`over: allow`): not allowed by the limit itself.
    let o = read(12 * radix as i64 + 5, 0).outcomes[0];
    assert_eq!((o.allowed, o.remaining), (false, 0));
    // A PTTL past the period's end is no answer.
    assert!(quota_answer(86_400_001, period, &call, Micros::ZERO).is_none());
}

#[test]
fn a_billing_day_that_moved_is_told_from_an_outcome() {
    let moved = Value::Array(vec![Value::Int(5), Value::Int(2), Value::Int(15)]);
    assert_eq!(
        super::anchor_moved(&moved),
        Some((Micros::new(5), 1, Some(15)))
    );
    assert_eq!(super::period_moved(&moved), None);
    let none = Value::Array(vec![Value::Int(5), Value::Int(1), Value::Int(0)]);
    assert_eq!(super::anchor_moved(&none), Some((Micros::new(5), 0, None)));
    let first = Value::Array(vec![Value::Int(5), Value::Int(0), Value::Int(15)]);
    assert_eq!(super::anchor_moved(&first), None, "limits count from 1");
    assert_eq!(
        super::anchor_moved(&Value::Array(vec![Value::Int(5)])),
        None
    );
}
