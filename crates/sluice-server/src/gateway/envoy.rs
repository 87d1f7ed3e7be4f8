//! Envoy's global rate-limit service, `envoy.service.ratelimit.v3.RateLimitService`.
//!
//! A `ShouldRateLimit` request carries a `domain` and descriptors (ordered `key`/`value`
//! entries). Each descriptor is looked up in the config's `envoy` section (see
//! [`crate::config::gateway`]): a match names a rule and turns the entries into attributes; a
//! descriptor that matches nothing (or a domain that is not configured) is `OK` and consumes
//! nothing, as Envoy users expect of a limit that does not exist.
//!
//! The matched descriptors are decided together by [`sluice::Limiter::check_all`]: the request
//! is `OVER_LIMIT` if any of them is, and then none of them consumes anything (unlike
//! envoyproxy/ratelimit, which counts every descriptor even when one is over).
//!
//! Numbers:
//! - cost: the descriptor's `hits_addend` when set (0 only looks), else the request's
//!   `hits_addend`, where 0 means unset, i.e. 1 (proto3 cannot tell them apart);
//! - `current_limit`: the rate of the descriptor's most restrictive limit in Envoy's units (the
//!   rate of the override its attributes chose, when that override gives one); a window that is
//!   not a whole unit is reported over the smallest unit that holds it, rounded down (`5/10s` →
//!   30 per `MINUTE`, `2/120s` → 60 per `HOUR`); `name` is `rule.limit`;
//! - `limit_remaining`, `duration_until_reset`: the decision's `remaining` and `reset_after_ms`;
//! - `response_headers_to_add`: the rate-limit headers (the config's `headers` style) of the
//!   descriptor that denied, else of the one with the fewest units left.
//!
//! Failures: a store that cannot answer is the rule's fail policy (`open` → `OK`, `closed` →
//! `OVER_LIMIT`, `local` → this node decides); bad input is `INVALID_ARGUMENT` and anything else
//! `INTERNAL`, so that Envoy's own `failure_mode_deny` applies.

use std::sync::Arc;

use crate::config::gateway::find_mapping;
use envoy_types::pb::envoy::config::core::v3::HeaderValue;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{
    Code, DescriptorStatus, RateLimit,
};
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use sluice::limiter::RuleCheck;
use sluice::model::{Decision, Limit, Rate, headers};
use tonic::{Request, Response, Status};

use crate::state::AppState;
use crate::traces::MetadataCarrier;
use crate::traces::timed_store::timing;

/// Most descriptors one request may carry; Envoy sends one per rate-limit action of a route.
pub const MAX_DESCRIPTORS: usize = 64;

pub use crate::config::gateway::MAX_ENTRIES;

/// The gRPC service over the server's state.
#[derive(Debug, Clone)]
pub struct RateLimitService {
    state: Arc<AppState>,
}

impl RateLimitService {
    /// A service deciding with `state`'s limiter and the `envoy` section in force.
    pub fn new(state: Arc<AppState>) -> RateLimitService {
        RateLimitService { state }
    }
}

#[tonic::async_trait]
impl rate_limit_service_server::RateLimitService for RateLimitService {
    async fn should_rate_limit(
        &self,
        request: Request<RateLimitRequest>,
    ) -> Result<Response<RateLimitResponse>, Status> {
        let Some(traces) = &self.state.traces else {
            return answer(&self.state, request.get_ref())
                .await
                .map(Response::new);
        };
        let span = traces.decision(&MetadataCarrier(request.metadata()));
        let (answered, store) = timing(answer(&self.state, request.get_ref())).await;
        span.end_envoy(&answered, store);
        answered.map(Response::new)
    }
}

/// What one descriptor asks, once matched.
struct Matched<'a> {
    index: usize,
    rule: &'a str,
    attributes: Vec<(&'a str, &'a str)>,
    cost: u64,
}

/// Decides one `ShouldRateLimit` request.
pub async fn answer(
    state: &AppState,
    request: &RateLimitRequest,
) -> Result<RateLimitResponse, Status> {
    if request.domain.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit domain must not be empty",
        ));
    }
    if request.descriptors.is_empty() {
        return Err(Status::invalid_argument(
            "rate limit descriptor list must not be empty",
        ));
    }
    if request.descriptors.len() > MAX_DESCRIPTORS {
        return Err(Status::invalid_argument(format!(
            "{} descriptors; at most {MAX_DESCRIPTORS} are accepted",
            request.descriptors.len()
        )));
    }
    let live = state.live.load();
    let entries: Vec<Vec<(&str, &str)>> = request
        .descriptors
        .iter()
        .map(entries_of)
        .collect::<Result<_, _>>()?;
    let mut matched = Vec::new();
    for (index, (descriptor, entries)) in request.descriptors.iter().zip(&entries).enumerate() {
        let Some((mapping, attributes)) =
            find_mapping(&live.config.envoy, &request.domain, entries)
        else {
            continue;
        };
        if descriptor.is_negative_hits {
            return Err(Status::invalid_argument(format!(
                "descriptor {index}: negative hits (refunds) are not supported"
            )));
        }
        let cost = match &descriptor.hits_addend {
            Some(hits) => hits.value,
            None => u64::from(request.hits_addend.max(1)),
        };
        matched.push(Matched {
            index,
            rule: &mapping.rule,
            attributes,
            cost,
        });
    }
    let parts: Vec<RuleCheck<'_, [(&str, &str)]>> = matched
        .iter()
        .map(|m| RuleCheck {
            rule: m.rule,
            attrs: &m.attributes[..],
            cost: m.cost,
        })
        .collect();
    let decisions =
        state
            .limiter
            .check_all(&parts)
            .await
            .map_err(|error| match error.is_client_error() {
                true => Status::invalid_argument(error.to_string()),
                false => Status::internal(error.to_string()),
            })?;

    let rules = state.limiter.rules();
    let mut statuses: Vec<DescriptorStatus> = (0..request.descriptors.len())
        .map(|_| DescriptorStatus {
            code: Code::Ok.into(),
            ..DescriptorStatus::default()
        })
        .collect();
    for (m, d) in matched.iter().zip(&decisions) {
        if !d.allowed {
            let owned: Vec<(&str, String)> = m
                .attributes
                .iter()
                .map(|&(k, v)| (k, v.to_string()))
                .collect();
            state.top_denied.record(d, &owned);
        }
        let rate = Decision::most_restrictive(&d.limits).and_then(|top| {
            let limit = rules
                .get(d.rule.as_str())?
                .definition
                .limits
                .iter()
                .find(|l| l.id() == top.id)?;
            Some((
                format!("{}.{}", d.rule, top.id),
                rate_in_force(limit, &m.attributes),
            ))
        });
        statuses[m.index] = DescriptorStatus {
            code: if d.allowed { Code::Ok } else { Code::OverLimit }.into(),
            current_limit: rate.map(|(name, rate)| current_limit(name, rate)),
            limit_remaining: u32::try_from(d.remaining).unwrap_or(u32::MAX),
            duration_until_reset: (!d.limits.is_empty()).then(|| duration(d.reset_after_ms)),
            ..DescriptorStatus::default()
        };
    }
    let allowed = decisions.iter().all(|d| d.allowed);
    let headline = decisions
        .iter()
        .filter(|d| !d.limits.is_empty())
        .min_by_key(|d| {
            (
                d.allowed,
                std::cmp::Reverse(d.retry_after_ms.unwrap_or(0)),
                d.remaining,
            )
        });
    let response_headers_to_add = headline
        .map(|d| {
            headers(d, live.headers)
                .into_iter()
                .map(|(key, value)| HeaderValue {
                    key: key.to_string(),
                    value,
                    ..HeaderValue::default()
                })
                .collect()
        })
        .unwrap_or_default();
    Ok(RateLimitResponse {
        overall_code: if allowed { Code::Ok } else { Code::OverLimit }.into(),
        statuses,
        response_headers_to_add,
        ..RateLimitResponse::default()
    })
}

/// The rate a limit decided a descriptor with: the first override whose `when` holds for its
/// attributes, when that override gives other numbers, else the limit's own.
pub(crate) fn rate_in_force(limit: &Limit, attributes: &[(&str, &str)]) -> Rate {
    limit
        .overrides
        .iter()
        .find(|o| o.when.holds(attributes))
        .and_then(|o| limit.overridden(o))
        .map_or(limit.rate, |tier| tier.rate)
}

/// A descriptor's entries, bounded.
fn entries_of(descriptor: &RateLimitDescriptor) -> Result<Vec<(&str, &str)>, Status> {
    if descriptor.entries.len() > MAX_ENTRIES {
        return Err(Status::invalid_argument(format!(
            "a descriptor has {} entries; at most {MAX_ENTRIES} are accepted",
            descriptor.entries.len()
        )));
    }
    Ok(descriptor
        .entries
        .iter()
        .map(|e| (e.key.as_str(), e.value.as_str()))
        .collect())
}

/// Envoy's units, shortest first, with their length in seconds.
const UNITS: [(Unit, u64); 5] = [
    (Unit::Second, 1),
    (Unit::Minute, 60),
    (Unit::Hour, 3_600),
    (Unit::Day, 86_400),
    (Unit::Year, 31_536_000),
];

/// A rate in Envoy's terms: over the smallest unit that holds the window, rounded down.
pub fn current_limit(name: String, rate: Rate) -> RateLimit {
    let window_ms = rate.window().as_millis().max(1);
    let (unit, secs) = UNITS
        .iter()
        .copied()
        .find(|&(_, secs)| u128::from(secs) * 1000 >= window_ms)
        .unwrap_or(UNITS[UNITS.len() - 1]);
    let per_unit = u128::from(rate.count()) * u128::from(secs) * 1000 / window_ms;
    RateLimit {
        name,
        requests_per_unit: u32::try_from(per_unit).unwrap_or(u32::MAX),
        unit: unit.into(),
    }
}

fn duration(ms: u64) -> ProtoDuration {
    ProtoDuration {
        seconds: i64::try_from(ms / 1000).unwrap_or(i64::MAX),
        nanos: i32::try_from((ms % 1000) * 1_000_000).unwrap_or(0),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn unit_of(count: u64, window_secs: u64) -> (u32, Unit) {
        let limit = current_limit(
            "r".into(),
            Rate::new(count, Duration::from_secs(window_secs)).unwrap(),
        );
        (limit.requests_per_unit, limit.unit())
    }

    #[test]
    fn whole_units_are_reported_as_they_are() {
        assert_eq!(unit_of(100, 1), (100, Unit::Second));
        assert_eq!(unit_of(5, 60), (5, Unit::Minute));
        assert_eq!(unit_of(3, 3600), (3, Unit::Hour));
        assert_eq!(unit_of(1000, 86_400), (1000, Unit::Day));
    }

    #[test]
    fn other_windows_go_to_the_unit_that_holds_them_rounded_down() {
        assert_eq!(unit_of(5, 10), (30, Unit::Minute));
        assert_eq!(unit_of(2, 120), (60, Unit::Hour));
        assert_eq!(unit_of(7, 9), (46, Unit::Minute));
        assert_eq!(unit_of(3, 1800), (6, Unit::Hour));
    }
}
