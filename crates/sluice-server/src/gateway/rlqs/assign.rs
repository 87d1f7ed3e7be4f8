//! An assignment and the units behind it: each one is drawn from the rule's shared limit in the
//! store with the limiter's ordinary decision (a check of the units it hands out), so what every
//! server of a fleet assigns adds up to what the limit lets through, plus the bound the book
//! states ("Rate Limit Quota Service").
//!
//! A token bucket assignment of `s` units per report interval `R` is
//! `{max_tokens: b, tokens_per_fill: s, fill_interval: R}` with a burst `b = ⌈s/4⌉`
//! ([`burst`]): Envoy fills it continuously at `s/R`, and a proxy may run a quarter of an
//! interval's share ahead. Envoy starts a token bucket full when it is new or its settings
//! change, and keeps an unchanged one as it is; so an assignment that repeats the one this
//! stream holds draws `s` (the next interval's fill) and any other draws `s + b` (the fill and
//! the full bucket). When the store grants less, the share shrinks to what was granted; when it
//! grants nothing, the assignment is `DENY_ALL`.
//!
//! The steady shares add up to 90 % of the limit's rate ([`HEADROOM_PERCENT`]): the rest pays
//! for the full buckets of new and changed assignments.
//!
//! A rule that does not limit the bucket (disabled, shadow, its condition false, an `unlimited`
//! override) is `ALLOW_ALL`. A store that cannot answer (the decision is `degraded`, or the
//! call failed) gets no assignment at all: the proxy keeps the one it has until its time to live
//! ends and then applies its own `expired_assignment_behavior`, so an outage never turns into
//! units that were not drawn.

use std::time::Duration;

use envoy_types::pb::envoy::r#type::v3::RateLimitStrategy;
use envoy_types::pb::envoy::r#type::v3::TokenBucket;
use envoy_types::pb::envoy::r#type::v3::rate_limit_strategy::{BlanketRule, Strategy};
use envoy_types::pb::google::protobuf::{Duration as ProtoDuration, UInt32Value};
use sluice::Check;
use sluice::model::Limit;

use crate::gateway::envoy::rate_in_force;
use crate::state::AppState;

/// What a proxy is told for one bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Assignment {
    /// `ALLOW_ALL`: no limit applies to the bucket.
    Allow,
    /// `DENY_ALL`: the limit has nothing left for this proxy this interval.
    Deny,
    /// A token bucket of this many units per report interval.
    Units(u64),
}

/// A token bucket's burst is its share over this.
pub const BURST_DIVISOR: u64 = 4;

/// The burst (`max_tokens`) of a token bucket of `share` units per interval: `⌈share/4⌉`.
pub fn burst(share: u64) -> u64 {
    share.div_ceil(BURST_DIVISOR).max(1)
}

/// An assignment and the units drawn for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drawn {
    /// What the proxy is told.
    pub assignment: Assignment,
    /// The units taken from the limit for it.
    pub units: u64,
}

/// The part of a limit's rate kept out of the steady shares, in percent: the room that the full
/// buckets of new and changed assignments are drawn from, so that a proxy whose share grows
/// is not refused by a limit the steady shares already fill.
pub const HEADROOM_PERCENT: u128 = 10;

/// How many units the proxies of a bucket share in one report interval: the smallest
/// `count × interval / window` among the rule's limits, less [`HEADROOM_PERCENT`] (at least 1),
/// with each limit's rate as its attributes choose it. `None` when the rule has no limits.
pub fn interval_allowance(
    limits: &[Limit],
    attributes: &[(&str, &str)],
    interval: Duration,
) -> Option<u64> {
    limits
        .iter()
        .map(|limit| {
            let rate = rate_in_force(limit, attributes);
            let window = rate.window().as_micros().max(1);
            let units = u128::from(rate.count()) * interval.as_micros() * (100 - HEADROOM_PERCENT)
                / (window * 100);
            u64::try_from(units).unwrap_or(u64::MAX).max(1)
        })
        .min()
}

/// Draws the units of an assignment of `share` units per interval for a proxy that holds
/// `held`, and says what it is; `None` when the store could not be asked (no assignment).
pub async fn draw(
    state: &AppState,
    rule: &str,
    attributes: &[(&str, &str)],
    share: u64,
    held: Option<Assignment>,
) -> Option<Drawn> {
    let only = |assignment| Drawn {
        assignment,
        units: 0,
    };
    if share == 0 {
        return Some(only(Assignment::Deny));
    }
    let cost = |s: u64| match held {
        Some(Assignment::Units(h)) if h == s => s,
        _ => s.saturating_add(burst(s)),
    };
    let decision = take(state, rule, attributes, cost(share)).await?;
    if decision.limits.is_empty() || decision.shadow {
        return Some(only(Assignment::Allow));
    }
    if decision.allowed {
        return Some(Drawn {
            assignment: Assignment::Units(share),
            units: cost(share),
        });
    }
    // Less is left than asked: the share shrinks to what the limit still has (the one held, if
    // it fits, else the largest new one whose fill and bucket do).
    let left = decision.remaining.min(cost(share));
    let smaller = match held {
        Some(Assignment::Units(h)) if h <= left => h,
        _ => {
            let mut s = left.saturating_mul(BURST_DIVISOR) / (BURST_DIVISOR + 1);
            while s > 0 && s + burst(s) > left {
                s -= 1;
            }
            s
        }
    };
    if smaller == 0 {
        return Some(only(Assignment::Deny));
    }
    let decision = take(state, rule, attributes, cost(smaller)).await?;
    Some(match decision.allowed {
        true => Drawn {
            assignment: Assignment::Units(smaller),
            units: cost(smaller),
        },
        false => only(Assignment::Deny),
    })
}

/// One decision of `units` on the rule, or `None` when the store could not answer.
async fn take(
    state: &AppState,
    rule: &str,
    attributes: &[(&str, &str)],
    units: u64,
) -> Option<sluice::Decision> {
    match state
        .limiter
        .check_with(rule, attributes, Check::cost(units))
        .await
    {
        Ok(decision) if decision.degraded => None,
        Ok(decision) => Some(decision),
        Err(error) => {
            tracing::warn!(%error, rule, "RLQS: the units of an assignment could not be drawn");
            None
        }
    }
}

/// The strategy Envoy applies for an assignment, its buckets filled over `interval`.
pub fn strategy(assignment: Assignment, interval: Duration) -> RateLimitStrategy {
    let strategy = match assignment {
        Assignment::Allow => Strategy::BlanketRule(BlanketRule::AllowAll.into()),
        Assignment::Deny => Strategy::BlanketRule(BlanketRule::DenyAll.into()),
        Assignment::Units(units) => {
            let max_tokens = u32::try_from(burst(units)).unwrap_or(u32::MAX);
            let units = u32::try_from(units).unwrap_or(u32::MAX);
            Strategy::TokenBucket(TokenBucket {
                max_tokens,
                tokens_per_fill: Some(UInt32Value { value: units }),
                fill_interval: Some(proto_duration(interval)),
            })
        }
    };
    RateLimitStrategy {
        strategy: Some(strategy),
    }
}

/// A duration on the wire.
pub fn proto_duration(d: Duration) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        nanos: i32::try_from(d.subsec_nanos()).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit(yaml_rate: &str) -> Limit {
        serde_json::from_value(serde_json::json!({
            "by": ["tenant"],
            "rate": yaml_rate,
        }))
        .unwrap()
    }

    #[test]
    fn the_allowance_is_the_tightest_limit_over_one_interval() {
        let limits = [limit("1000/10s"), limit("60/1s")];
        let second = Duration::from_secs(1);
        assert_eq!(interval_allowance(&limits, &[], second), Some(54));
        assert_eq!(interval_allowance(&limits[..1], &[], second), Some(90));
        // A limit slower than one unit per interval still hands out one.
        assert_eq!(interval_allowance(&[limit("1/1h")], &[], second), Some(1));
        assert_eq!(interval_allowance(&[], &[], second), None);
    }

    #[test]
    fn a_bucket_bursts_a_quarter_of_its_share() {
        assert_eq!(burst(100), 25);
        assert_eq!(burst(5), 2);
        assert_eq!(burst(1), 1);
        assert_eq!(burst(0), 1);
    }
}
