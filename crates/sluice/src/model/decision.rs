//! `Decision`: the answer to one check, with everything a caller needs to act and to explain.
//!
//! Durations are milliseconds, rounded up so that a client that waits `retry_after_ms` is never
//! early. `blocked_until_ms` and `lease_until_ms` are epoch timestamps.

use std::ops::Deref;

use serde::{Deserialize, Serialize};
use smallvec::SmallVec;

use super::{Algorithm, Name};

/// The limits' answers of a decision: held inline for a rule of one limit (no allocation).
pub type LimitDecisions = SmallVec<[LimitDecision; 1]>;

/// The attribute names an identity was formed from, in the limit's order: held inline up to two.
/// Reads as a slice of names, and compares with a list of strings.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct AttributeNames(SmallVec<[Name; 2]>);

impl Deref for AttributeNames {
    type Target = [Name];
    fn deref(&self) -> &[Name] {
        &self.0
    }
}

impl AttributeNames {
    /// The names of an identity formed from one attribute.
    #[inline]
    pub(crate) fn one(name: Name) -> AttributeNames {
        let mut names = SmallVec::new();
        names.push(name);
        AttributeNames(names)
    }
}

impl FromIterator<Name> for AttributeNames {
    fn from_iter<I: IntoIterator<Item = Name>>(names: I) -> AttributeNames {
        AttributeNames(names.into_iter().collect())
    }
}

impl<'a> IntoIterator for &'a AttributeNames {
    type Item = &'a Name;
    type IntoIter = std::slice::Iter<'a, Name>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

impl<S: AsRef<str>> PartialEq<[S]> for AttributeNames {
    fn eq(&self, other: &[S]) -> bool {
        self.len() == other.len() && self.iter().zip(other).all(|(a, b)| a == b.as_ref())
    }
}

impl<S: AsRef<str>, const N: usize> PartialEq<[S; N]> for AttributeNames {
    fn eq(&self, other: &[S; N]) -> bool {
        *self == other[..]
    }
}

impl<S: AsRef<str>> PartialEq<Vec<S>> for AttributeNames {
    fn eq(&self, other: &Vec<S>) -> bool {
        *self == other[..]
    }
}

/// The answer to one check of one rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct Decision {
    /// Whether the caller may proceed (always true in shadow mode).
    pub allowed: bool,
    /// The rule that was checked.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub rule: Name,
    /// The quota of the most restrictive limit: the most units it admits (its rate's count, or
    /// its burst), as `X-RateLimit-Limit` and the service's JSON (`"limit"`) report it.
    #[serde(rename = "limit", alias = "quota")]
    pub quota: u64,
    /// Units left in the most restrictive limit after this decision.
    pub remaining: u64,
    /// Until the most restrictive limit is back to full.
    pub reset_after_ms: u64,
    /// When denied: the earliest wait after which the same request could pass.
    pub retry_after_ms: Option<u64>,
    /// Epoch milliseconds when a block or ban ends; none if not blocked.
    pub blocked_until_ms: Option<u64>,
    /// Violations remembered for the identity (penalty limits only).
    pub violations: u64,
    /// The identity has passed a penalty's warning threshold.
    pub warning: bool,
    /// The store could not be asked; the fail policy decided.
    pub degraded: bool,
    /// Decided in shadow mode: `allowed` is true whatever the limits said.
    pub shadow: bool,
    /// Admitted past a quota that admits past itself (`over: allow`): overage, to bill.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub over_quota: bool,
    /// Shaping (leaky bucket): how long the caller should wait before acting.
    pub delay_ms: u64,
    /// Why a request was refused without counting (cost above capacity, rule disabled...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Each limit's own answer.
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<LimitDecision>))]
    pub limits: LimitDecisions,
    /// The lease an admitted request holds on the rule's concurrency limits: give it back
    /// (`Limiter::release`, `POST /v1/release`) when the work ends.
    /// None when the rule has no concurrency limit, or nothing was taken (denied, peeked,
    /// degraded to `open`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<String>,
    /// Epoch milliseconds when the lease expires by itself unless renewed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_until_ms: Option<u64>,
    /// The reservation of an admitted check that reserved its cost (`Check::reserve`): settle
    /// it at the actual cost (`Limiter::settle`, `POST /v1/settle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation: Option<String>,
    /// Epoch milliseconds until which the reservation can be settled; afterwards its estimate
    /// stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reservation_until_ms: Option<u64>,
}

/// One limit's part of a [`Decision`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct LimitDecision {
    /// The limit's id (its name, or by-algorithm-window).
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: Name,
    /// The attributes whose values formed the identity (after fallback), e.g. `["session"]`;
    /// `"identity"` in the service's JSON.
    #[serde(rename = "identity", alias = "attributes")]
    #[cfg_attr(feature = "openapi", schema(value_type = Vec<String>))]
    pub attributes: AttributeNames,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Whether this limit allowed the request.
    pub allowed: bool,
    /// The quota (the rate's count, or the burst for bucket algorithms); `"limit"` in JSON and
    /// `q` in `RateLimit-Policy`.
    #[serde(rename = "limit", alias = "quota")]
    pub quota: u64,
    /// The window length in milliseconds.
    pub window_ms: u64,
    /// Units left after this decision.
    pub remaining: u64,
    /// Until this limit is back to full.
    pub reset_after_ms: u64,
    /// When denied: earliest wait after which the request could pass.
    pub retry_after_ms: Option<u64>,
    /// Epoch ms when this identity's block or ban ends.
    pub blocked_until_ms: Option<u64>,
    /// Violations remembered.
    pub violations: u64,
    /// Past the warning threshold.
    pub warning: bool,
    /// Shaping delay.
    pub delay_ms: u64,
    /// This limit is in shadow mode.
    pub shadow: bool,
    /// A quota that admits past itself (`over: allow`) is past its quota: the request was
    /// admitted and counted past it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub over_quota: bool,
}

impl Decision {
    /// An allowed decision that touched no limit (disabled rule or limiter).
    pub fn pass_through(rule: impl Into<Name>, reason: &str) -> Decision {
        Decision {
            allowed: true,
            rule: rule.into(),
            quota: 0,
            remaining: 0,
            reset_after_ms: 0,
            retry_after_ms: None,
            blocked_until_ms: None,
            violations: 0,
            warning: false,
            degraded: false,
            shadow: false,
            over_quota: false,
            delay_ms: 0,
            reason: Some(reason.to_string()),
            limits: LimitDecisions::new(),
            lease: None,
            lease_until_ms: None,
            reservation: None,
            reservation_until_ms: None,
        }
    }

    /// The decision of a rule from each limit's answer: allowed when every enforcing limit
    /// allows (or always, in shadow mode); the top-level numbers are those of the
    /// [most restrictive](Decision::most_restrictive) limit.
    #[inline]
    pub fn of_limits(
        rule: impl Into<Name>,
        shadow: bool,
        limits: impl Into<LimitDecisions>,
    ) -> Decision {
        let limits: LimitDecisions = limits.into();
        // The summary is read from the limits where they are, and the decision is built as the
        // returned value: a decision is a few hundred bytes, and each move of it costs as much as
        // a part of an in-memory check.
        let enforced_ok = limits.iter().all(|l| l.allowed || l.shadow || l.over_quota);
        let (quota, remaining, reset_after_ms, retry_after_ms) =
            match Decision::most_restrictive(&limits) {
                Some(top) => (
                    top.quota,
                    top.remaining,
                    top.reset_after_ms,
                    top.retry_after_ms.filter(|_| !enforced_ok),
                ),
                None => (0, 0, 0, None),
            };
        Decision {
            allowed: shadow || enforced_ok,
            rule: rule.into(),
            quota,
            remaining,
            reset_after_ms,
            retry_after_ms,
            blocked_until_ms: limits.iter().filter_map(|l| l.blocked_until_ms).max(),
            violations: limits.iter().map(|l| l.violations).max().unwrap_or(0),
            warning: limits.iter().any(|l| l.warning),
            degraded: false,
            shadow,
            over_quota: limits.iter().any(|l| l.over_quota),
            delay_ms: limits.iter().map(|l| l.delay_ms).max().unwrap_or(0),
            reason: None,
            limits,
            lease: None,
            lease_until_ms: None,
            reservation: None,
            reservation_until_ms: None,
        }
    }

    /// [`Decision::of_limits`] for a rule of one limit: the same decision, built without
    /// iterating: on an in-process store the general summary was a sizeable part of a one-limit
    /// check (the figures are in BENCHMARKS.md, "Bottlenecks found and fixed").
    #[inline]
    pub(crate) fn of_one(rule: Name, shadow: bool, limit: LimitDecision) -> Decision {
        let enforced_ok = limit.allowed || limit.shadow || limit.over_quota;
        Decision {
            allowed: shadow || enforced_ok,
            rule,
            quota: limit.quota,
            remaining: limit.remaining,
            reset_after_ms: limit.reset_after_ms,
            retry_after_ms: limit.retry_after_ms.filter(|_| !enforced_ok),
            blocked_until_ms: limit.blocked_until_ms,
            violations: limit.violations,
            warning: limit.warning,
            degraded: false,
            shadow,
            over_quota: limit.over_quota,
            delay_ms: limit.delay_ms,
            reason: None,
            limits: LimitDecisions::from_buf([limit]),
            lease: None,
            lease_until_ms: None,
            reservation: None,
            reservation_until_ms: None,
        }
    }

    /// The limit whose numbers the top level reports: when denied, the one with the longest
    /// wait; when allowed, the one with the fewest units left.
    #[inline]
    pub fn most_restrictive(limits: &[LimitDecision]) -> Option<&LimitDecision> {
        let denied = limits
            .iter()
            .filter(|l| !l.allowed && !l.shadow && !l.over_quota);
        if let Some(l) = denied.max_by_key(|l| l.retry_after_ms.unwrap_or(u64::MAX)) {
            return Some(l);
        }
        limits
            .iter()
            .min_by_key(|l| (l.remaining, std::cmp::Reverse(l.reset_after_ms)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_of_one_limit_is_the_decision_of_a_list_of_it() {
        let allowed = LimitDecision {
            id: "l".into(),
            attributes: AttributeNames::one("ip".into()),
            algorithm: Algorithm::Gcra,
            allowed: true,
            quota: 10,
            window_ms: 1000,
            remaining: 3,
            reset_after_ms: 700,
            retry_after_ms: None,
            blocked_until_ms: None,
            violations: 0,
            warning: false,
            delay_ms: 0,
            shadow: false,
            over_quota: false,
        };
        let denied = LimitDecision {
            allowed: false,
            remaining: 0,
            retry_after_ms: Some(100),
            blocked_until_ms: Some(5000),
            violations: 2,
            warning: true,
            ..allowed.clone()
        };
        let shadowed = LimitDecision {
            shadow: true,
            ..denied.clone()
        };
        for limit in [allowed, denied, shadowed] {
            for shadow in [false, true] {
                assert_eq!(
                    Decision::of_one("r".into(), shadow, limit.clone()),
                    Decision::of_limits("r", shadow, LimitDecisions::from_buf([limit.clone()])),
                    "{limit:?} {shadow}"
                );
            }
        }
    }
}
