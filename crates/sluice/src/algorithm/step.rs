//! One decision over all the limits of a request: block check → algorithms → all-or-nothing
//! commit → violations → block/ban. Pure; a store calls it inside one critical section and the
//! Redis script restates it.
//!
//! All-or-nothing: the request passes when every enforcing (non-shadow) limit allows it; only then
//! does any limit consume. A denied request consumes nothing, except on limits with
//! `count_denied`, which record their own denial. Each limit that denies by its algorithm (not by
//! an existing block) records a violation and may set a block or ban.

use super::concurrency::LeaseToken;
use super::{AlgoState, Params, PenaltyParams, block, penalty};
use crate::model::{Algorithm, Micros};

/// Consume, or only look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Record the request.
    Apply,
    /// Answer as if, change nothing.
    Peek,
}

/// What to decide for one limit of the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitStep {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Its numbers.
    pub params: Params,
    /// Units requested.
    pub cost: u64,
    /// Block length once the limit denies.
    pub block_us: Option<Micros>,
    /// Escalating penalty.
    pub penalty: Option<PenaltyParams>,
    /// A shadow limit: its denial is reported but does not deny the request.
    pub shadow: bool,
    /// On a concurrency limit, the token an admitted request's lease is held under (`None`:
    /// an anonymous lease, which only expiry ends). Ignored by the other algorithms.
    pub lease: Option<LeaseToken>,
    /// Whether the store looks for numbers set for this identity at run time
    /// ([`RuntimeNumbers`](super::RuntimeNumbers)) and decides with them.
    pub settable: bool,
}

/// Everything a store keeps for one limit and one identity.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyState {
    /// The algorithm's state.
    pub algo: AlgoState,
    /// Block lock / ban.
    pub block: block::State,
    /// Remembered violations.
    pub penalty: penalty::State,
}

/// One limit's answer, as a store returns it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitOutcome {
    /// This limit allowed the request (not blocked, and the units fit).
    pub allowed: bool,
    /// Units left after the decision.
    pub remaining: u64,
    /// Until back to full (or until the block ends).
    pub reset_after_us: Micros,
    /// When denied: the earliest wait after which the request could pass.
    pub retry_after_us: Option<Micros>,
    /// Shaping delay.
    pub delay_us: Micros,
    /// End of a block or ban in force after the decision (since the epoch).
    pub blocked_until_us: Option<Micros>,
    /// Violations remembered after the decision.
    pub violations: u64,
    /// Past the penalty's warning threshold.
    pub warning: bool,
    /// The numbers set for this identity at run time that the store decided with, if any.
    pub runtime: Option<super::RuntimeNumbers>,
}

impl LimitOutcome {
    /// The outcome of a limit the store was not asked about: `allowed`, and nothing else known.
    pub fn unanswered(allowed: bool) -> LimitOutcome {
        LimitOutcome {
            allowed,
            remaining: 0,
            reset_after_us: Micros::ZERO,
            retry_after_us: None,
            delay_us: Micros::ZERO,
            blocked_until_us: None,
            violations: 0,
            warning: false,
            runtime: None,
        }
    }
}

impl KeyState {
    /// How long after `now` this state still matters; 0 means it can be dropped.
    pub fn ttl_us(&self, algo_ttl_us: Micros, now: Micros) -> Micros {
        algo_ttl_us
            .max(self.block.until_us.saturating_sub(now))
            .max(self.penalty.expires_us.saturating_sub(now))
    }
}

/// The first pass over one limit: what it would answer, changing nothing.
struct Look {
    outcome: LimitOutcome,
    ttl_us: Micros,
    blocked: bool,
}

fn look(state: &mut KeyState, step: &LimitStep, now: Micros) -> Look {
    let violations = state.penalty.current(now);
    let warning = step.penalty.is_some_and(|p| penalty::warns(violations, &p));
    if let Some(until) = state.block.active(now) {
        // The block answers, but the algorithm's state must outlive it: once the block ends,
        // the counts still decide.
        let algo = state.algo.decide(step, now, Mode::Peek);
        return Look {
            outcome: LimitOutcome {
                allowed: false,
                remaining: 0,
                reset_after_us: until - now,
                retry_after_us: Some(until - now),
                delay_us: Micros::ZERO,
                blocked_until_us: Some(until),
                violations,
                warning,
                runtime: None,
            },
            ttl_us: algo.ttl_us,
            blocked: true,
        };
    }
    let o = state.algo.decide(step, now, Mode::Peek);
    Look {
        outcome: limit_outcome(o, violations, warning),
        ttl_us: o.ttl_us,
        blocked: false,
    }
}

/// The second pass over one limit, once it is known whether the request passes: consume or
/// count, record a violation, set a block or ban. Returns the outcome and the state's TTL.
fn commit(
    state: &mut KeyState,
    step: &LimitStep,
    now: Micros,
    mode: Mode,
    look: Look,
    pass: bool,
) -> (LimitOutcome, Micros) {
    let Look {
        mut outcome,
        mut ttl_us,
        blocked,
    } = look;
    if mode == Mode::Peek || blocked {
        return (outcome, state.ttl_us(ttl_us, now));
    }
    // A quota that admits past itself counts what passes, past the quota too.
    let record = if outcome.allowed || step.params.admits_over {
        pass
    } else {
        step.params.count_denied
    };
    if record {
        let o = state.algo.decide(step, now, Mode::Apply);
        outcome = LimitOutcome {
            allowed: outcome.allowed,
            ..limit_outcome(o, outcome.violations, outcome.warning)
        };
        ttl_us = o.ttl_us;
    }
    if !outcome.allowed {
        punish(state, step, now, &mut outcome);
    }
    (outcome, state.ttl_us(ttl_us, now))
}

/// A denial by the limit itself: one more violation (and maybe a ban), the block lock.
fn punish(state: &mut KeyState, step: &LimitStep, now: Micros, outcome: &mut LimitOutcome) {
    if let Some(p) = &step.penalty {
        let (violations, ban) = state.penalty.record(now, p);
        outcome.violations = violations;
        outcome.warning = penalty::warns(violations, p);
        if ban {
            outcome.blocked_until_us = Some(state.block.impose(now, p.ban_us));
        }
    }
    if let Some(block_us) = step.block_us {
        outcome.blocked_until_us = Some(state.block.impose(now, block_us));
    }
    if let Some(until) = outcome.blocked_until_us {
        // The request now waits for the block, whatever the algorithm said.
        let wait = until - now;
        outcome.retry_after_us = Some(outcome.retry_after_us.unwrap_or_default().max(wait));
    }
}

/// Decides a request with a single limit (the common case): the same answer as [`decide`], with
/// one run of the algorithm and no allocation. With one limit the request passes exactly when the
/// limit allows, so the look-only pass is not needed.
#[inline]
pub fn decide_one(
    state: &mut KeyState,
    step: &LimitStep,
    now: Micros,
    mode: Mode,
) -> (LimitOutcome, Micros) {
    if state.block.active(now).is_some() {
        let first = look(state, step, now);
        return commit(state, step, now, mode, first, false);
    }
    let violations = state.penalty.current(now);
    let warning = step.penalty.is_some_and(|p| penalty::warns(violations, &p));
    let o = state.algo.decide(step, now, mode);
    let mut outcome = limit_outcome(o, violations, warning);
    if mode == Mode::Apply && !outcome.allowed {
        punish(state, step, now, &mut outcome);
    }
    (outcome, state.ttl_us(o.ttl_us, now))
}

/// Decides one request over its limits. `states[i]` belongs to `steps[i]`. Returns each limit's
/// outcome and the time each state must be kept (from `now`).
pub fn decide(
    states: &mut [&mut KeyState],
    steps: &[LimitStep],
    now: Micros,
    mode: Mode,
) -> Vec<(LimitOutcome, Micros)> {
    debug_assert_eq!(states.len(), steps.len());
    let looks: Vec<Look> = states
        .iter_mut()
        .zip(steps)
        .map(|(state, step)| look(state, step, now))
        .collect();
    let pass = looks
        .iter()
        .zip(steps)
        .all(|(l, step)| l.outcome.allowed || step.shadow);
    states
        .iter_mut()
        .zip(steps)
        .zip(looks)
        .map(|((state, step), first)| commit(state, step, now, mode, first, pass))
        .collect()
}

fn limit_outcome(o: super::Outcome, violations: u64, warning: bool) -> LimitOutcome {
    LimitOutcome {
        allowed: o.allowed,
        remaining: o.remaining,
        reset_after_us: o.reset_after_us,
        retry_after_us: o.retry_after_us,
        delay_us: o.delay_us,
        blocked_until_us: None,
        violations,
        warning,
        runtime: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algorithm::S;

    fn step(limit: u64) -> LimitStep {
        LimitStep {
            algorithm: Algorithm::SlidingLog,
            params: Params::new(limit, 10 * S, limit),
            cost: 1,
            block_us: None,
            penalty: None,
            shadow: false,
            lease: None,
            settable: false,
        }
    }

    fn run(states: &mut [KeyState], steps: &[LimitStep], now: Micros) -> Vec<LimitOutcome> {
        let mut refs: Vec<&mut KeyState> = states.iter_mut().collect();
        decide(&mut refs, steps, now, Mode::Apply)
            .into_iter()
            .map(|(o, _)| o)
            .collect()
    }

    #[test]
    fn a_denial_by_one_limit_consumes_nothing_from_the_others() {
        let steps = [step(5), step(1)];
        let mut states = [KeyState::default(), KeyState::default()];
        assert!(
            run(&mut states, &steps, Micros::ZERO)
                .iter()
                .all(|o| o.allowed)
        );
        let second = run(&mut states, &steps, Micros::ZERO);
        assert!(second[0].allowed && !second[1].allowed);
        // The first limit still has 4 left: the denied request took nothing from it.
        assert_eq!(second[0].remaining, 4);
    }

    #[test]
    fn shadow_limits_do_not_deny_the_request() {
        let mut shadow = step(1);
        shadow.shadow = true;
        let steps = [step(5), shadow];
        let mut states = [KeyState::default(), KeyState::default()];
        run(&mut states, &steps, Micros::ZERO);
        let o = run(&mut states, &steps, Micros::ZERO);
        assert!(!o[1].allowed);
        assert_eq!(o[0].remaining, 3, "the enforcing limit consumed");
    }

    #[test]
    fn block_lock_answers_until_its_end() {
        let mut s = step(1);
        s.block_us = Some(30 * S);
        let mut states = [KeyState::default()];
        assert!(run(&mut states, &[s], Micros::ZERO)[0].allowed);
        let denied = run(&mut states, &[s], S);
        assert_eq!(denied[0].blocked_until_us, Some(31 * S));
        assert_eq!(denied[0].retry_after_us, Some(30 * S));
        // Long after the window, the block still answers...
        let blocked = run(&mut states, &[s], 20 * S);
        assert!(!blocked[0].allowed);
        assert_eq!(blocked[0].blocked_until_us, Some(31 * S));
        // ...and a blocked request does not extend it.
        assert!(run(&mut states, &[s], 31 * S)[0].allowed);
    }

    #[test]
    fn a_blocked_check_keeps_the_algorithm_state_alive() {
        let mut s = step(1);
        s.params.window_us = 100 * S;
        s.block_us = Some(S);
        let mut states = [KeyState::default()];
        run(&mut states, &[s], Micros::ZERO);
        run(&mut states, &[s], Micros::ZERO);
        let mut refs: Vec<&mut KeyState> = states.iter_mut().collect();
        let (blocked, ttl) = decide(&mut refs, &[s], S / 2, Mode::Apply)[0];
        assert!(!blocked.allowed);
        // The unit admitted at 0 counts until 100 s, long after the block.
        assert_eq!(ttl, 100 * S - S / 2);
    }

    #[test]
    fn penalty_warns_then_bans() {
        let mut s = step(1);
        s.penalty = Some(PenaltyParams {
            warn_after: 2,
            ban_after: 3,
            ban_us: 60 * S,
            memory_us: 3600 * S,
        });
        let mut states = [KeyState::default()];
        assert!(run(&mut states, &[s], Micros::ZERO)[0].allowed);
        let v: Vec<(u64, bool, Option<Micros>)> = (1..=3)
            .map(|i| run(&mut states, &[s], Micros::new(i)))
            .map(|o| (o[0].violations, o[0].warning, o[0].blocked_until_us))
            .collect();
        assert_eq!(
            v,
            [
                (1, false, None),
                (2, true, None),
                (3, true, Some(Micros::new(3) + 60 * S))
            ]
        );
        // After the window the ban still holds.
        assert!(!run(&mut states, &[s], 30 * S)[0].allowed);
        assert!(run(&mut states, &[s], Micros::new(3) + 60 * S)[0].allowed);
    }

    #[test]
    fn peek_records_nothing() {
        let mut s = step(1);
        s.block_us = Some(S);
        let mut states = [KeyState::default()];
        run(&mut states, &[s], Micros::ZERO);
        let before = states[0].clone();
        let mut refs: Vec<&mut KeyState> = states.iter_mut().collect();
        let peek = decide(&mut refs, &[s], Micros::ZERO, Mode::Peek);
        assert!(!peek[0].0.allowed);
        assert_eq!(states[0], before);
    }
}
