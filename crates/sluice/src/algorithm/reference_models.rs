//! Property tests: each algorithm against a tiny reference model over random timelines.
//!
//! The reference models are written differently from the algorithms on purpose (a plain list of
//! admitted times, a map of windows, integer credit arithmetic), so a shared mistake is unlikely.
//! Besides the allow/deny sequence, every denial's `retry_after_us` is checked: waiting exactly
//! that long admits the same request, waiting one microsecond less does not.

use crate::Micros;
use crate::algorithm::LeaseToken;
use crate::algorithm::{
    Level, Mode, Outcome, Params, concurrency, fixed_window, gcra, leaky_bucket, sliding_log,
    sliding_window, token_bucket,
};
use proptest::prelude::*;

/// A timeline: (gap before the request in µs, cost).
fn timeline() -> impl Strategy<Value = Vec<(u64, u64)>> {
    prop::collection::vec(
        (prop_oneof![Just(0u64), 0u64..2_000, 0u64..40_000], 1u64..=3),
        1..120,
    )
}

/// Limit, window (whole ms, in µs), capacity.
fn params() -> impl Strategy<Value = Params> {
    (1u64..=8, 1u64..=30, 0u64..=4).prop_map(|(limit, window_ms, extra)| {
        Params::new(limit, Micros::from_millis(window_ms), limit + extra)
    })
}

/// Absolute times and costs; costs above the capacity (which the limiter refuses before any
/// algorithm runs) are clamped to it.
fn times(timeline: &[(u64, u64)], p: &Params) -> Vec<(Micros, u64)> {
    let mut now = Micros::from_secs(1);
    timeline
        .iter()
        .map(|&(gap, cost)| {
            now += Micros::new(gap);
            (now, cost.min(p.capacity))
        })
        .collect()
}

/// Checks that `retry_after_us` is exact for a denied request: a peek at `now + retry` admits,
/// one at `now + retry - 1` does not.
fn check_retry<S: Clone>(
    state: &S,
    now: Micros,
    cost: u64,
    o: &Outcome,
    decide: impl Fn(&mut S, Micros) -> Outcome,
) -> Result<(), TestCaseError> {
    if o.allowed {
        prop_assert_eq!(o.retry_after_us, None);
        return Ok(());
    }
    let retry = o.retry_after_us.expect("a denial carries a retry time");
    prop_assert!(retry > Micros::ZERO);
    prop_assert!(
        decide(&mut state.clone(), now + retry).allowed,
        "not admitted after retry {retry:?} (cost {cost})"
    );
    prop_assert!(
        !decide(&mut state.clone(), now + retry - Micros::new(1)).allowed,
        "admitted before retry {retry:?}"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn sliding_log_matches_a_list_of_admitted_times(p in params(), tl in timeline()) {
        let p = Params { capacity: p.count, ..p };
        let mut state = sliding_log::State::default();
        let mut admitted: Vec<Micros> = Vec::new();
        for (now, cost) in times(&tl, &p) {
            let in_window = admitted.iter().filter(|&&t| t + p.window_us > now).count() as u64;
            let expected = in_window + cost <= p.count;
            let before = state.clone();
            let o = sliding_log::decide(&mut state, now, &p, cost, Mode::Apply);
            prop_assert_eq!(o.allowed, expected);
            check_retry(&before, now, cost, &o, |s, t| sliding_log::decide(s, t, &p, cost, Mode::Peek))?;
            if expected {
                admitted.extend(std::iter::repeat_n(now, cost as usize));
                prop_assert_eq!(o.remaining, p.count - in_window - cost);
            }
        }
    }

    #[test]
    fn concurrency_matches_a_list_of_leases(
        p in params(),
        tl in timeline(),
        releases in prop::collection::vec(0usize..4, 120),
    ) {
        // Each admitted request holds its units from `now` until `now + window`, unless released
        // earlier; some requests release the lease of an earlier one instead of asking.
        let p = Params { capacity: p.count, ..p };
        let mut state = concurrency::State::default();
        let mut leases: Vec<(LeaseToken, u64, Micros)> = Vec::new();
        for (i, (now, cost)) in times(&tl, &p).into_iter().enumerate() {
            let held = |leases: &[(LeaseToken, u64, Micros)]| {
                leases.iter().filter(|l| l.2 > now).map(|l| l.1).sum::<u64>()
            };
            if releases[i] == 0 && !leases.is_empty() {
                let (token, _, ends) = leases.remove(i % leases.len());
                prop_assert_eq!(concurrency::release(&mut state, now, token), ends > now);
                continue;
            }
            let expected = held(&leases) + cost <= p.capacity;
            let token = LeaseToken((i as u128 + 1).to_be_bytes());
            let before = state.clone();
            let o = concurrency::decide(&mut state, now, &p, cost, Mode::Apply, Some(token));
            prop_assert_eq!(o.allowed, expected);
            check_retry(&before, now, cost, &o, |s, t| {
                concurrency::decide(s, t, &p, cost, Mode::Peek, None)
            })?;
            if expected {
                leases.push((token, cost, now + p.window_us));
            }
            prop_assert_eq!(o.remaining, p.capacity - held(&leases));
        }
    }

    #[test]
    fn fixed_window_matches_a_map_of_windows(p in params(), tl in timeline()) {
        let p = Params { capacity: p.count, ..p };
        let mut state = fixed_window::State::default();
        let mut counts = std::collections::HashMap::<u64, u64>::new();
        for (now, cost) in times(&tl, &p) {
            let count = counts.entry(now / p.window_us).or_default();
            let expected = *count + cost <= p.count;
            let before = state;
            let o = fixed_window::decide(&mut state, now, &p, cost, Mode::Apply);
            prop_assert_eq!(o.allowed, expected);
            check_retry(&before, now, cost, &o, |s, t| fixed_window::decide(s, t, &p, cost, Mode::Peek))?;
            if expected {
                *count += cost;
            }
        }
    }

    #[test]
    fn sliding_window_is_bounded_by_the_exact_log(p in params(), tl in timeline()) {
        // Never admits what the exact log over `window` would deny; always admits what the exact
        // log over `window + window / BUCKETS` would admit.
        let p = Params { capacity: p.count, ..p };
        let g = sliding_window::bucket_us(&p);
        let mut state = sliding_window::State::default();
        let mut admitted: Vec<Micros> = Vec::new();
        for (now, cost) in times(&tl, &p) {
            let count_over = |w: Micros| admitted.iter().filter(|&&t| t + w > now).count() as u64;
            let before = state.clone();
            let o = sliding_window::decide(&mut state, now, &p, cost, Mode::Apply);
            if o.allowed {
                prop_assert!(count_over(p.window_us) + cost <= p.count, "admitted beyond the limit");
                admitted.extend(std::iter::repeat_n(now, cost as usize));
            } else {
                prop_assert!(count_over(p.window_us + g) + cost > p.count, "denied within the bound");
            }
            check_retry(&before, now, cost, &o, |s, t| sliding_window::decide(s, t, &p, cost, Mode::Peek))?;
        }
    }

    #[test]
    fn gcra_matches_integer_credits(p in params(), tl in timeline()) {
        // Credits in µs: the bucket holds capacity * T, refills one per µs, a unit costs T.
        let t = p.emission_interval_us().get();
        let mut state = gcra::State::default();
        let (mut credits, mut last) = (p.capacity * t, 0u64);
        for (now, cost) in times(&tl, &p) {
            credits = (credits + (now.get() - last)).min(p.capacity * t);
            last = now.get();
            let expected = credits >= cost * t;
            let before = state;
            let o = gcra::decide(&mut state, now, &p, cost, Mode::Apply);
            prop_assert_eq!(o.allowed, expected);
            check_retry(&before, now, cost, &o, |s, at| gcra::decide(s, at, &p, cost, Mode::Peek))?;
            if expected {
                credits -= cost * t;
                prop_assert_eq!(o.remaining, credits / t);
            }
        }
    }

    #[test]
    fn token_bucket_matches_exact_rational_tokens(p in params(), tl in timeline()) {
        bucket_matches_exact_tokens(p, &tl, token_bucket::decide, false)?;
    }

    #[test]
    fn leaky_bucket_matches_exact_rational_level(p in params(), tl in timeline()) {
        bucket_matches_exact_tokens(p, &tl, leaky_bucket::decide, true)?;
    }
}

/// Token and leaky bucket against exact arithmetic: the level scaled by the window (units × µs)
/// drains `limit` per µs. Where the exact margin is within float noise of the boundary, the
/// model follows the algorithm instead of asserting.
fn bucket_matches_exact_tokens(
    p: Params,
    tl: &[(u64, u64)],
    decide: fn(&mut Level, Micros, &Params, u64, Mode) -> Outcome,
    shaping: bool,
) -> Result<(), TestCaseError> {
    let w = p.window_us.get() as i128;
    let mut state = Level::default();
    let (mut scaled, mut last) = (0i128, 0u64);
    for (now, cost) in times(tl, &p) {
        scaled = (scaled - (now.get() - last) as i128 * p.count as i128).max(0);
        last = now.get();
        let margin = p.capacity as i128 * w - (scaled + cost as i128 * w);
        let before = state;
        let o = decide(&mut state, now, &p, cost, Mode::Apply);
        if margin.abs() > w / 1_000_000 + 1 {
            prop_assert_eq!(o.allowed, margin >= 0, "margin {}", margin);
        }
        if o.allowed {
            scaled += cost as i128 * w;
            // Shaping delay: the time for the level ahead to drain, rounded up.
            let ahead = scaled - cost as i128 * w;
            let exact_delay = if shaping {
                (ahead + p.count as i128 - 1) / p.count as i128
            } else {
                0
            };
            prop_assert!(
                (o.delay_us.get() as i128 - exact_delay).abs() <= 1,
                "delay {:?} vs {}",
                o.delay_us,
                exact_delay
            );
        } else {
            let retry = o.retry_after_us.expect("a denial carries a retry time");
            prop_assert!(decide(&mut before.clone(), now + retry, &p, cost, Mode::Peek).allowed);
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// The single-limit fast path answers exactly as the general multi-limit step.
    #[test]
    fn single_limit_fast_path_equals_the_general_step(
        p in params(),
        tl in timeline(),
        algorithm in prop::sample::select(crate::Algorithm::ALL.to_vec()),
        block in prop::option::of(1u64..50_000),
        penalty in prop::option::of((0u64..3, 1u64..4)),
        count_denied: bool,
        peek_every in 2usize..7,
    ) {
        use crate::algorithm::{KeyState, LimitStep, Mode, PenaltyParams, step};
        let p = Params {
            capacity: if algorithm.supports_burst() { p.capacity } else { p.count },
            count_denied: count_denied && algorithm.supports_count_denied(),
            ..p
        };
        let (mut fast, mut general) = (KeyState::default(), KeyState::default());
        for (i, (now, cost)) in times(&tl, &p).into_iter().enumerate() {
            let s = LimitStep {
                algorithm,
                params: p,
                cost,
                block_us: block.map(Micros::new),
                penalty: penalty.map(|(warn, ban)| PenaltyParams {
                    warn_after: warn,
                    ban_after: warn + ban,
                    ban_us: Micros::new(30_000),
                    memory_us: Micros::new(100_000),
                }),
                shadow: false,
                lease: None,
                settable: false,
            };
            let mode = if i % peek_every == 0 { Mode::Peek } else { Mode::Apply };
            let one = step::decide_one(&mut fast, &s, now, mode);
            let all = step::decide(&mut [&mut general], &[s], now, mode)[0];
            prop_assert_eq!(one, all);
        }
    }
}
