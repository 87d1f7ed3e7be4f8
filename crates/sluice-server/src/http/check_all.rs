//! `POST /v1/check-all`: several rules, or one rule for several identities, decided as one
//! request, all or nothing ([`sluice::Limiter::check_all`]).
//!
//! The body is `{"checks": [{"rule", "attributes", "cost"}, …]}` (1 to [`MAX_CHECKS`] parts, each
//! as the body of `/v1/check`, without `reserve`). The answer is 200 when every part is allowed
//! and 429 when one is not, and then no part consumed anything; a request whose parts all cost 0
//! only looks and is always 200, as `/v1/peek`. Its body, in the `?view=` asked:
//! - `full`: `{"allowed", "decisions": [<decision>, …]}`, one decision per part in the request's
//!   order, each as `/v1/check` writes it (with its rule's `message` when that part denied);
//! - `compact`: the same with each decision in the compact view;
//! - `headers`: no body.
//!
//! The rate-limit headers (and `X-RateLimit-Lease`) are those of one part: the first that denied,
//! else the one with the fewest units left, as the Envoy gateway chooses. Each part on a rule with
//! a concurrency limit holds its own lease when the request passed, given in its decision.
//!
//! Invariants: bad input in any part (an unknown rule, a missing attribute, a bad cost) is the
//! 4xx of that part, prefixed with its index, and nothing is decided.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde::Deserialize;
use sluice::Decision;
use sluice::limiter::{MAX_COST, RuleCheck};

use super::bodies::CheckAllBody;
use super::decision_body::{View, ViewQuery, decorate, view_of, write_body};
use super::error::{ApiError, ErrorCode, parse_json};
use super::request::DecisionRequest;
use crate::api_error::ErrorBody;
use crate::state::AppState;

/// Most parts one request may have (as many descriptors as the Envoy gateway takes).
pub const MAX_CHECKS: usize = 64;

/// The body of `/v1/check-all`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"checks": [
    {"rule": "login", "attributes": {"ip": "203.0.113.9"}},
    {"rule": "api", "attributes": {"user": "u1"}, "cost": 2}
]}))]
pub struct CheckAllRequest<'a> {
    /// The parts, each as the body of `/v1/check` (without `reserve`), 1 to 64.
    #[serde(borrow)]
    #[schema(min_items = 1, max_items = 64)]
    pub checks: Vec<DecisionRequest<'a>>,
}

/// One part of a check-all request, read and checked.
#[derive(Debug)]
pub struct Part<'a> {
    /// The rule.
    pub rule: &'a str,
    /// The identity values.
    pub attributes: Vec<(&'a str, &'a str)>,
    /// Units to consume (0 looks).
    pub cost: u64,
}

impl<'a> Part<'a> {
    /// A part, unless its cost is over [`MAX_COST`].
    pub fn new(
        rule: &'a str,
        attributes: Vec<(&'a str, &'a str)>,
        cost: u64,
    ) -> Result<Part<'a>, ApiError> {
        if cost > MAX_COST {
            return Err(ApiError::from(sluice::Error::InvalidCost {
                cost,
                max: MAX_COST,
            }));
        }
        Ok(Part {
            rule,
            attributes,
            cost,
        })
    }
}

/// The 400 of a check-all request of `len` parts unless it has 1 to [`MAX_CHECKS`].
pub fn check_len(len: usize) -> Result<(), ApiError> {
    if len == 0 || len > MAX_CHECKS {
        return Err(ApiError::new(
            ErrorCode::BadCheckAll,
            format!("`checks` has {len} parts; 1 to {MAX_CHECKS} are accepted"),
        ));
    }
    Ok(())
}

/// The 400 of a part that asks for a reservation.
pub fn no_reservations() -> ApiError {
    ApiError::new(
        ErrorCode::BadCheckAll,
        "a check-all takes no reservations (`reserve`): ask `/v1/check` for each",
    )
}

/// `error`, prefixed with the index of the part it is about.
pub fn at(index: usize) -> impl Fn(ApiError) -> ApiError {
    move |mut error: ApiError| {
        error.message = format!("checks[{index}]: {}", error.message);
        error
    }
}

/// The parts of a JSON check-all request, or the error of the first part that is not one.
pub fn parts<'a>(checks: &'a [DecisionRequest<'a>]) -> Result<Vec<Part<'a>>, ApiError> {
    check_len(checks.len())?;
    checks
        .iter()
        .enumerate()
        .map(|(index, check)| {
            if check.reserve {
                return Err(at(index)(no_reservations()));
            }
            Part::new(
                &check.rule,
                check.attributes.pairs().map_err(at(index))?,
                check.cost().map_err(at(index))?,
            )
            .map_err(at(index))
        })
        .collect()
}

/// Decides every part, recording denied identities as single checks do.
pub async fn decide_all(state: &AppState, parts: &[Part<'_>]) -> Result<Vec<Decision>, ApiError> {
    let rule_checks: Vec<RuleCheck<'_, [(&str, &str)]>> = parts
        .iter()
        .map(|part| RuleCheck {
            rule: part.rule,
            attrs: &part.attributes[..],
            cost: part.cost,
        })
        .collect();
    let decisions = state
        .limiter
        .check_all(&rule_checks)
        .await
        .map_err(|error| match part_of(&error, parts) {
            Some(index) => at(index)(ApiError::from(error)),
            None => ApiError::from(error),
        })?;
    for (decision, part) in decisions.iter().zip(parts) {
        if part.cost > 0 && decision.limits.iter().any(|l| !l.allowed) {
            state.top_denied.record(decision, &part.attributes);
        }
    }
    Ok(decisions)
}

/// The part the limiter's `error` is about, if it says (so the answer can say which).
fn part_of(error: &sluice::Error, parts: &[Part<'_>]) -> Option<usize> {
    match error {
        sluice::Error::UnknownRule { rule } | sluice::Error::MissingAttribute { rule, .. } => {
            parts.iter().position(|p| p.rule == rule.as_str())
        }
        sluice::Error::ConflictingParts { second, .. } => Some(*second),
        _ => None,
    }
}

/// `POST /v1/check-all`.
#[utoipa::path(post, path = "/v1/check-all", tag = "decisions", description = "Decides several rules, or one rule for several identities, all or nothing: a denial consumes nothing in any part.", params(("view" = Option<View>, Query, description = "How much of each decision the body carries: `full` (default), `compact`, or `headers` (no body)"), ("sluice-timeout-ms" = Option<u64>, Header, description = "How long the caller waits for the answer, in milliseconds (Envoy's `x-envoy-expected-rq-timeout-ms` is read the same way): past it the decision is made by the rule's fail policy without asking the store, with `reason: \"deadline\"`")), request_body(content = CheckAllRequest, content_type = "application/json"), responses((status = 200, description = "Every part allowed (or every part cost 0)", body = CheckAllBody), (status = 429, description = "A part denied; nothing was consumed", body = CheckAllBody), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_cost`, `bad_batch`, …)", body = ErrorBody), (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody)))]
pub(super) async fn check_all(
    State(state): State<Arc<AppState>>,
    query: Result<Query<ViewQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let view = view_of(query)?;
    let request: CheckAllRequest = parse_json(&body)?;
    let parts = parts(&request.checks)?;
    let decisions = decide_all(&state, &parts).await?;
    let allowed = decisions.iter().all(|d| d.allowed);
    let looks = parts.iter().all(|p| p.cost == 0);
    let status = if allowed || looks {
        StatusCode::OK
    } else {
        StatusCode::TOO_MANY_REQUESTS
    };
    let mut body = Vec::with_capacity(if view == View::Full { 640 } else { 160 } * decisions.len());
    if view != View::Headers {
        body.extend_from_slice(if allowed {
            b"{\"allowed\":true,\"decisions\":["
        } else {
            b"{\"allowed\":false,\"decisions\":["
        });
        for (i, decision) in decisions.iter().enumerate() {
            if i > 0 {
                body.push(b',');
            }
            let message = (!looks && !decision.allowed)
                .then(|| state.limiter.message(&decision.rule))
                .flatten();
            write_body(&mut body, decision, message.as_deref(), view);
        }
        body.extend_from_slice(b"]}");
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    match headline(&decisions) {
        Some(headline) => decorate(&mut response, headline, state.live.load().headers, view),
        None if view != View::Headers => {
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
        }
        None => {}
    }
    Ok(response)
}

/// The part whose headers the answer carries: the first that denied, else the one with the fewest
/// units left, among those that have limits.
pub fn headline(decisions: &[Decision]) -> Option<&Decision> {
    decisions
        .iter()
        .filter(|d| !d.limits.is_empty())
        .min_by_key(|d| (d.allowed, d.remaining))
}
