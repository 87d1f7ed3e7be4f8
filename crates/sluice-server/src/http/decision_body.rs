//! A decision as an HTTP answer: its body in the view asked ([`View`]), its rate-limit headers,
//! and the lease header of a concurrency limit. Shared by `/v1/check`, `/v1/peek` and
//! `/v1/check-all`.
//!
//! Bodies are written straight from the decision ([`crate::decision_json`] for the full view),
//! with no JSON tree in between: this is on every decision's path.

use axum::body::Body;
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use axum::http::{StatusCode, header};
use axum::response::Response;
use serde::{Deserialize, Serialize};
use sluice::Decision;
use sluice::middleware::insert_headers;
use sluice::model::HeaderStyle;

use super::error::{ApiError, ErrorCode};
use crate::decision_json::write_decision_json;

/// How much of a decision a response body carries (`?view=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum View {
    /// The whole decision, every limit's part included (the default).
    #[default]
    Full,
    /// `allowed`, the `lease` and `lease_until_ms` of a concurrency limit, and the most
    /// restrictive limit's `limit`, `remaining`, `reset_after_ms`, `retry_after_ms` when denied;
    /// `degraded`, `reason` and `message` when they apply.
    Compact,
    /// No body: the status and the rate-limit headers say it all.
    Headers,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct ViewQuery {
    #[serde(default)]
    view: View,
}

pub(super) fn view_of(query: Result<Query<ViewQuery>, QueryRejection>) -> Result<View, ApiError> {
    query.map(|Query(q)| q.view).map_err(|_| {
        ApiError::new(
            ErrorCode::BadQuery,
            "`view` must be full, compact or headers (and nothing else is asked)",
        )
    })
}

/// A decision in the compact view (see [`View::Compact`]).
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CompactBody<'a> {
    /// Whether the request may go on.
    allowed: bool,
    /// The lease an admitted check holds on the rule's concurrency limits.
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<&'a str>,
    /// When the lease ends unless renewed (epoch ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_until_ms: Option<u64>,
    /// The reservation of an admitted check that asked `reserve`.
    #[serde(skip_serializing_if = "Option::is_none")]
    reservation: Option<&'a str>,
    /// When the reservation can no longer be settled (epoch ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    reservation_until_ms: Option<u64>,
    /// The most restrictive limit's quota.
    limit: u64,
    /// Units left under it.
    remaining: u64,
    /// Milliseconds until it is full again.
    reset_after_ms: u64,
    /// When denied, milliseconds until a retry can pass.
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
    /// Decided by the fail policy (present only when true).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    degraded: bool,
    /// Why the decision is not an ordinary one.
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
    /// The rule's `message`, on a denied check.
    #[serde(skip_serializing_if = "Option::is_none")]
    message: Option<&'a str>,
}

/// The decision with its rate-limit headers, as much of it as `view` asks, and the rule's
/// `message` when denied. Bodies are written straight from the decision, with no JSON tree in
/// between.
pub fn decision_response(
    status: StatusCode,
    decision: &Decision,
    style: HeaderStyle,
    message: Option<&str>,
    view: View,
) -> Response {
    // Sized for a one-limit decision, so the body is written without growing.
    let mut body = Vec::with_capacity(if view == View::Full { 640 } else { 160 });
    write_body(&mut body, decision, message, view);
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    decorate(&mut response, decision, style, view);
    response
}

/// Appends the body of `decision` in `view` (nothing for [`View::Headers`]).
pub(super) fn write_body(
    body: &mut Vec<u8>,
    decision: &Decision,
    message: Option<&str>,
    view: View,
) {
    match view {
        View::Full => write_decision_json(body, decision, message),
        View::Compact => {
            let compact = CompactBody {
                allowed: decision.allowed,
                lease: decision.lease.as_deref(),
                lease_until_ms: decision.lease_until_ms,
                reservation: decision.reservation.as_deref(),
                reservation_until_ms: decision.reservation_until_ms,
                limit: decision.quota,
                remaining: decision.remaining,
                reset_after_ms: decision.reset_after_ms,
                retry_after_ms: decision.retry_after_ms,
                degraded: decision.degraded,
                reason: decision.reason.as_deref(),
                message,
            };
            // Serializing plain numbers and strings cannot fail; an empty body would still
            // carry the decision in its status and headers.
            let start = body.len();
            if serde_json::to_writer(&mut *body, &compact).is_err() {
                body.truncate(start);
            }
        }
        View::Headers => {}
    }
}

/// Gives `response` the content type of `view` and the rate-limit and lease headers of
/// `decision`.
pub(super) fn decorate(
    response: &mut Response,
    decision: &Decision,
    style: HeaderStyle,
    view: View,
) {
    // Room for every header a decision sends, so the map is allocated once.
    response.headers_mut().reserve(8);
    if view != View::Headers {
        response.headers_mut().insert(
            header::CONTENT_TYPE,
            header::HeaderValue::from_static("application/json"),
        );
    }
    insert_headers(response.headers_mut(), decision, style);
    if let Some(lease) = &decision.lease {
        // Made of token characters (see `sluice::limiter`'s lease ids): always a valid value.
        if let Ok(value) = header::HeaderValue::from_str(lease) {
            response.headers_mut().insert(LEASE_HEADER, value);
        }
    }
}

/// `X-RateLimit-Lease: <id>`: the lease an admitted check holds on the rule's concurrency
/// limits, in every view (with `?view=headers` it is the only place the lease is given).
pub const LEASE_HEADER: header::HeaderName = header::HeaderName::from_static("x-ratelimit-lease");
