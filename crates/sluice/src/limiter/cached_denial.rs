//! A denial the denial cache answers at once: a one-limit rule on a store in another process
//! (Redis), whose limit the store denied this identity recently enough that the cache still
//! speaks for it.
//!
//! The identity is written into the per-thread buffer `at_once` uses and looked up by its
//! borrowed parts, so a cached denial builds no store calls and no owned keys. It is the decision
//! the general path in `decide` gives from the cache: the same limit decision, the same reason,
//! the same metrics. Anything else — several limits, a limit the cache may not answer for, a
//! peek, a reservation, a cost above the capacity, a disabled rule or limiter, bad input, and
//! every miss — goes to the general path, which has the one answer for each. An empty cache
//! (traffic that is allowed) costs one load.

use std::sync::atomic::Ordering;

use super::answer::limit_decision;
use super::at_once::with_identity;
use super::decide::CACHED;
use super::identity::{attribute_names, write_identity};
use super::options::Check;
use super::{Attributes, Limiter};
use crate::algorithm::Mode;
use crate::model::Decision;
use crate::store::KeyRef;

impl Limiter {
    /// The decision of this check if the denial cache answers it; `None` sends it to the
    /// general path.
    pub(super) fn cached_denial(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> Option<Decision> {
        let inner = &self.inner;
        let denials = inner.denials.as_deref()?;
        if denials.is_empty()
            || check.mode() != Mode::Apply
            || check.reserves()
            || !inner.enabled.load(Ordering::Relaxed)
        {
            return None;
        }
        let rules = inner.rules.load();
        let rule = rules.get(name)?;
        // The capacity is at most `MAX_COST`: a cost the general path refuses never gets here.
        let limit = rule.sole_limit(check.units())?;
        if rule.cacheable != [true] {
            return None;
        }
        let step = limit.step(check.units(), None);
        let max_len = inner.options.max_attribute_len;
        let (outcome, names) = with_identity(|identity| {
            write_identity(&limit.by, &limit.groups, attrs, max_len, identity).ok()?;
            let key = KeyRef {
                rule: &rule.name,
                limit_id: &limit.id,
                identity,
            };
            let outcome = denials.lookup(key, step.cost)?;
            Some((outcome, attribute_names(&limit.by, identity)))
        })?;
        let one = limit_decision(limit, names, &step, &outcome);
        rule.meters.cache_hit();
        rule.meters.decided_one(
            rule.definition.shadow,
            one.allowed,
            one.shadow,
            one.over_quota,
        );
        let mut decision = Decision::of_one(rule.name.clone(), rule.definition.shadow, one);
        decision.reason = Some(CACHED.to_string());
        Some(decision)
    }
}

#[cfg(test)]
mod tests;
