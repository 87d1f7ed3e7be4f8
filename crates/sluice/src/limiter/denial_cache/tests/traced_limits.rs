//! Limits whose denials leave a trace (a block, a penalty, `count_denied`): which of a rule's
//! limits may be cached, and their entries, which answer only while a block or ban lasts.

use super::super::*;
use super::{S, advance, cache, confirm, denied, key, step};
use crate::model::Algorithm;

#[test]
fn a_block_speaks_for_every_cost_and_a_block_lock_only_while_it_lasts() {
    let (cache, clock) = cache(100);
    // The limit's own block lock (15 s) imposed by a denial whose algorithm wait is 60 s: after
    // the block a new denial would start a new block, so the store must answer then.
    let mut locked = step(Algorithm::SlidingLog, 5, 60 * S, 1);
    locked.block_us = Some(15 * S);
    let outcome = LimitOutcome {
        blocked_until_us: Some(Micros::new(1_000) + 15 * S),
        ..denied(60 * S)
    };
    cache.insert(
        cache.call_start(),
        &key("a"),
        &locked,
        &outcome,
        Micros::new(1_000),
    );
    let hit = cache.lookup((&key("a")).into(), 1).unwrap();
    assert_eq!(hit.blocked_until_us, Some(Micros::new(1_000) + 15 * S));
    assert_eq!(
        (hit.retry_after_us, hit.reset_after_us, hit.remaining),
        (Some(15 * S), 15 * S, 0),
        "what the store answers while the block lasts, not the wait of the denial that imposed it"
    );
    advance(&clock, 15 * S - Micros::new(1));
    confirm(&cache);
    assert!(cache.lookup((&key("a")).into(), 1).is_some());
    advance(&clock, Micros::new(1));
    assert_eq!(cache.lookup((&key("a")).into(), 1), None);

    // An administrative block on a limit without block lock: every cost, until its end.
    let plain = step(Algorithm::Gcra, 100, 60 * S, 5);
    let outcome = LimitOutcome {
        blocked_until_us: Some(Micros::new(9_000) + 30 * S),
        ..denied(30 * S)
    };
    cache.insert(
        cache.call_start(),
        &key("b"),
        &plain,
        &outcome,
        Micros::new(9_000),
    );
    let small = cache
        .lookup((&key("b")).into(), 1)
        .expect("a block denies any cost");
    assert_eq!(small.retry_after_us, Some(30 * S));
}

#[test]
fn a_penalty_is_cached_only_while_its_ban_lasts_and_keeps_its_violations() {
    let (cache, clock) = cache(100);
    let mut punishing = step(Algorithm::Gcra, 1, 60 * S, 1);
    punishing.penalty = Some(crate::algorithm::PenaltyParams {
        warn_after: 1,
        ban_after: 3,
        ban_us: 30 * S,
        memory_us: 3600 * S,
    });
    // A denial that counted a violation but banned nothing: the next one counts one more.
    let counted = LimitOutcome {
        violations: 2,
        warning: true,
        ..denied(60 * S)
    };
    cache.insert(
        cache.call_start(),
        &key("a"),
        &punishing,
        &counted,
        Micros::ZERO,
    );
    assert_eq!(cache.lookup((&key("a")).into(), 1), None);
    assert!(cache.is_empty());

    // The denial that banned: until the ban ends, the store would answer from it alone.
    let banned = LimitOutcome {
        violations: 3,
        blocked_until_us: Some(30 * S),
        ..counted
    };
    cache.insert(
        cache.call_start(),
        &key("a"),
        &punishing,
        &banned,
        Micros::ZERO,
    );
    let hit = cache.lookup((&key("a")).into(), 1).expect("banned");
    assert_eq!((hit.violations, hit.warning), (3, true));
    assert_eq!(hit.blocked_until_us, Some(30 * S));
    advance(&clock, 30 * S - Micros::new(1));
    confirm(&cache);
    assert!(cache.lookup((&key("a")).into(), 1).is_some());
    advance(&clock, Micros::new(1));
    assert_eq!(
        cache.lookup((&key("a")).into(), 1),
        None,
        "after the ban, a denial counts a violation again"
    );
}

#[test]
fn a_ban_is_not_cached_while_the_violations_it_reports_may_be_forgotten_before_it_ends() {
    let (cache, _clock) = cache(100);
    let settings = crate::algorithm::PenaltyParams {
        warn_after: 1,
        ban_after: 2,
        ban_us: 60 * S,
        memory_us: 3600 * S,
    };
    let banned = |until_us| LimitOutcome {
        violations: 2,
        warning: true,
        blocked_until_us: Some(until_us),
        ..denied(until_us)
    };
    // Violations forgotten 20 s after the last, a ban of 60 s: the store stops reporting them
    // in the middle of the ban.
    let mut forgetful = step(Algorithm::Gcra, 1, 60 * S, 1);
    forgetful.penalty = Some(crate::algorithm::PenaltyParams {
        memory_us: 20 * S,
        ..settings
    });
    cache.insert(
        cache.call_start(),
        &key("a"),
        &forgetful,
        &banned(60 * S),
        Micros::ZERO,
    );
    assert_eq!(cache.lookup((&key("a")).into(), 1), None);

    // A block longer than any the limit imposes is an administrative one, which says nothing
    // about when the violations were counted.
    let mut punishing = forgetful;
    punishing.penalty = Some(settings);
    cache.insert(
        cache.call_start(),
        &key("b"),
        &punishing,
        &banned(61 * S),
        Micros::ZERO,
    );
    assert_eq!(cache.lookup((&key("b")).into(), 1), None);
    assert!(cache.is_empty());

    // The limit's own ban: its violations outlive it.
    cache.insert(
        cache.call_start(),
        &key("c"),
        &punishing,
        &banned(60 * S),
        Micros::ZERO,
    );
    assert_eq!(
        cache.lookup((&key("c")).into(), 1).map(|o| o.violations),
        Some(2)
    );
}

#[test]
fn limits_whose_denials_leave_a_trace_are_not_cached() {
    let plain = step(Algorithm::Gcra, 1, 60 * S, 1);
    let mut counting = plain;
    counting.params.count_denied = true;
    let mut punishing = plain;
    punishing.penalty = Some(crate::algorithm::PenaltyParams {
        warn_after: 1,
        ban_after: 3,
        ban_us: S,
        memory_us: S,
    });
    let mut locked = plain;
    locked.block_us = Some(S);
    let mut shadow = plain;
    shadow.shadow = true;
    assert_eq!(cacheable_limits(&[plain]), [true]);
    assert_eq!(cacheable_limits(&[locked]), [true], "while its block lasts");
    assert_eq!(cacheable_limits(&[counting]), [false]);
    assert_eq!(
        cacheable_limits(&[punishing]),
        [true],
        "while its ban lasts"
    );
    assert_eq!(
        cacheable_limits(&[plain, punishing]),
        [false, true],
        "the plain limit's denial would leave the other's violation uncounted"
    );
    let mut counting_locked = counting;
    counting_locked.block_us = Some(S);
    assert_eq!(
        cacheable_limits(&[counting_locked]),
        [true],
        "while its block lasts"
    );
    assert_eq!(cacheable_limits(&[plain, counting]), [false, false]);
    assert_eq!(cacheable_limits(&[plain, shadow]), [true, false]);
    assert_eq!(
        cacheable_limits(&[plain, locked]),
        [false, true],
        "a cached answer would skip the block the other limit starts when it denies too"
    );
}
