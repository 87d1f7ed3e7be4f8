//! The answers a check gives, built in one place from each limit's outcome: a limit's part of a
//! [`Decision`] ([`limit_decision`]), the whole answer of a one-limit check as the caller
//! asked for it ([`Answer`]: the full decision, or the compact [`Verdict`]), and the decision
//! of a request a `deny` override refuses ([`refused`]).
//!
//! Invariant: a check's verdict is [`Verdict::of`] the decision the same check gets, whichever
//! path answers it (`at_once` builds it from the outcome directly; the unit test there holds the
//! two together).

use super::compile::CompiledRule;
use super::compiled_limit::CompiledLimit;
use super::identity::attribute_names;
use crate::algorithm::{LimitOutcome, LimitStep};
use crate::model::{AttributeNames, Decision, LimitDecision, Micros, Verdict};

/// What a check answered at once gives its caller, built from its one limit's outcome.
pub(super) trait Answer: Sized {
    /// What the answer keeps from the identity while its buffer is lent: the attribute names it
    /// was built from, for a decision; nothing, for a verdict.
    type Names: Names;
    /// The answer from the store's outcome of `limit`, counted in the rule's metrics.
    fn of_outcome(
        rule: &CompiledRule,
        limit: &CompiledLimit,
        names: Self::Names,
        step: &LimitStep,
        outcome: &LimitOutcome,
    ) -> Self;
    /// The answer a decision made another way gives (it is counted already).
    fn of_decision(d: Decision) -> Self;
}

/// See [`Answer::Names`].
pub(super) trait Names {
    fn of(limit: &CompiledLimit, identity: &str) -> Self;
}

impl Names for AttributeNames {
    #[inline]
    fn of(limit: &CompiledLimit, identity: &str) -> AttributeNames {
        attribute_names(&limit.by, identity)
    }
}

impl Names for () {
    #[inline]
    fn of(_: &CompiledLimit, _: &str) {}
}

impl Answer for Decision {
    type Names = AttributeNames;

    #[inline]
    fn of_outcome(
        rule: &CompiledRule,
        limit: &CompiledLimit,
        names: AttributeNames,
        step: &LimitStep,
        outcome: &LimitOutcome,
    ) -> Decision {
        // Counted first, so that the decision is built where it is returned: it is a few hundred
        // bytes, and each move of it costs as much as a part of the check.
        let one = limit_decision(limit, names, step, outcome);
        rule.meters.decided_one(
            rule.definition.shadow,
            one.allowed,
            one.shadow,
            one.over_quota,
        );
        Decision::of_one(rule.name.clone(), rule.definition.shadow, one)
    }

    fn of_decision(d: Decision) -> Decision {
        d
    }
}

impl Answer for Verdict {
    type Names = ();

    #[inline]
    fn of_outcome(
        rule: &CompiledRule,
        _: &CompiledLimit,
        _: (),
        step: &LimitStep,
        o: &LimitOutcome,
    ) -> Verdict {
        let limit_allowed = limit_allows(step, o);
        let admits_over = step.params.admits_over;
        rule.meters.decided_one(
            rule.definition.shadow,
            limit_allowed,
            step.shadow && !admits_over,
            admits_over && !limit_allowed,
        );
        // As `Decision::of_one` reads its one limit.
        let enforced_ok = limit_allowed || step.shadow;
        Verdict {
            allowed: rule.definition.shadow || enforced_ok,
            retry_after_ms: o
                .retry_after_us
                .filter(|_| !enforced_ok)
                .map(Micros::as_millis_ceil),
            remaining: o.remaining,
        }
    }

    fn of_decision(d: Decision) -> Verdict {
        Verdict::of(&d)
    }
}

/// One limit's part of the decision: the limit and the attribute names its identity was built
/// from say whose counter, the step what was asked, the outcome what the store answered.
#[inline]
pub(super) fn limit_decision(
    limit: &CompiledLimit,
    attributes: AttributeNames,
    step: &LimitStep,
    o: &LimitOutcome,
) -> LimitDecision {
    let allowed = limit_allows(step, o);
    LimitDecision {
        id: limit.id.clone(),
        attributes,
        algorithm: step.algorithm,
        allowed,
        quota: quota(step, o),
        window_ms: step.params.window_us.as_millis(),
        remaining: o.remaining,
        reset_after_ms: o.reset_after_us.as_millis_ceil(),
        retry_after_ms: o.retry_after_us.map(Micros::as_millis_ceil),
        blocked_until_ms: o.blocked_until_us.map(Micros::as_millis_ceil),
        violations: o.violations,
        warning: o.warning,
        delay_ms: o.delay_us.as_millis_ceil(),
        // A quota that admits past itself decides as a shadow does, and says what it is.
        shadow: step.shadow && !step.params.admits_over,
        over_quota: step.params.admits_over && !allowed,
    }
}

/// The limit's quota for this check: its own, or the identity's numbers set at run time.
#[inline]
fn quota(step: &LimitStep, o: &LimitOutcome) -> u64 {
    o.runtime
        .and_then(|n| n.capacity)
        .unwrap_or(step.params.capacity)
}

/// Whether the limit allowed the request: the store admitted it, within the identity's quota.
#[inline]
fn limit_allows(step: &LimitStep, o: &LimitOutcome) -> bool {
    o.allowed && step.cost <= quota(step, o)
}

/// The decision of a request a `deny` override refuses: its limit reports a quota of 0 (it
/// admits nothing, and no other limit does) and the decision's reason is the override's message.
pub(super) fn refused(rule: &CompiledRule, limit: &CompiledLimit, message: &str) -> Decision {
    let mut d = Decision::of_one(
        rule.name.clone(),
        rule.definition.shadow,
        limit_decision_refused(limit),
    );
    d.reason = Some(message.to_string());
    d
}

/// The part of a decision of a limit whose `deny` override refused the request: a quota of 0, as
/// a limit that admits nothing, with nothing counted and no wait that would help.
fn limit_decision_refused(limit: &CompiledLimit) -> LimitDecision {
    LimitDecision {
        id: limit.id.clone(),
        attributes: AttributeNames::default(),
        algorithm: limit.algorithm(),
        allowed: false,
        quota: 0,
        window_ms: limit.lease_us().as_millis(),
        remaining: 0,
        reset_after_ms: 0,
        retry_after_ms: None,
        blocked_until_ms: None,
        violations: 0,
        warning: false,
        delay_ms: 0,
        shadow: limit.is_shadow(),
        over_quota: false,
    }
}
