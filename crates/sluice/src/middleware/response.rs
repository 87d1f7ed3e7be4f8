//! The responses the middleware writes: rate-limit headers on every decided response, the 429
//! body on denial, the JSON error on bad input, and [`Limited`] as an axum response.
//!
//! Bodies are JSON objects with an `error` string, like the decision service's errors, so one
//! client handles both. Headers come from [`model::headers`](crate::model::headers) through
//! [`insert_headers`], which the service and the forward-auth endpoint use too.

use axum::response::IntoResponse;
use bytes::BytesMut;
use http::header::{CONTENT_TYPE, HeaderName, HeaderValue, RETRY_AFTER};
use http::{HeaderMap, Response, StatusCode};
use smallvec::SmallVec;

use crate::error::Error;
use crate::limited::Limited;
use crate::model::{Decision, HeaderStyle, write_headers};

/// `X-RateLimit-Degraded: true`: the store could not be asked and the fail policy decided.
pub const DEGRADED_HEADER: HeaderName = HeaderName::from_static("x-ratelimit-degraded");

/// `X-RateLimit-Delay-Ms: N`: the shaping delay the handler should apply (leaky bucket), sent
/// when the layer exposes delays instead of waiting them out.
pub const DELAY_HEADER: HeaderName = HeaderName::from_static("x-ratelimit-delay-ms");

/// The message of a denial when neither the layer nor the rule sets one.
pub const DEFAULT_MESSAGE: &str = "rate limit exceeded";

/// Writes the decision's rate-limit headers ([`crate::model::headers`]) into an HTTP header map:
/// the one conversion the middleware, the service and the forward-auth endpoint share.
pub fn insert_headers(map: &mut HeaderMap, d: &Decision, style: HeaderStyle) {
    // Every value is written into one buffer and the headers share it: one allocation per
    // response instead of one per header.
    let mut values = BytesMut::with_capacity(128);
    let mut lengths: SmallVec<[(&'static str, usize); 6]> = SmallVec::new();
    write_headers(d, style, &mut String::with_capacity(64), |name, value| {
        values.extend_from_slice(value.as_bytes());
        lengths.push((name, value.len()));
    });
    let mut values = values.freeze();
    for (name, len) in lengths {
        let value = values.split_to(len);
        // Values are numbers and rule names, which are checked to be token characters, so the
        // conversion does not fail; a header that did would be skipped.
        if let (Some(name), Ok(value)) = (header_name(name), HeaderValue::from_maybe_shared(value))
        {
            map.insert(name, value);
        }
    }
}

/// The `http` name of a header [`write_headers`] writes. The usual ones are constants:
/// `HeaderName::from_static` checks its argument on every call made at run time.
fn header_name(name: &'static str) -> Option<HeaderName> {
    const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
    const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
    const LIMIT: HeaderName = HeaderName::from_static("x-ratelimit-limit");
    const REMAINING: HeaderName = HeaderName::from_static("x-ratelimit-remaining");
    const RESET: HeaderName = HeaderName::from_static("x-ratelimit-reset");
    Some(match name {
        "RateLimit-Policy" => POLICY,
        "RateLimit" => RATELIMIT,
        "X-RateLimit-Limit" => LIMIT,
        "X-RateLimit-Remaining" => REMAINING,
        "X-RateLimit-Reset" => RESET,
        "Retry-After" => RETRY_AFTER,
        other => return HeaderName::from_bytes(other.as_bytes()).ok(),
    })
}

/// Writes the decision's rate-limit headers, and the degraded marker when it applies.
pub fn apply_headers(map: &mut HeaderMap, d: &Decision, style: HeaderStyle) {
    insert_headers(map, d, style);
    if d.degraded {
        map.insert(DEGRADED_HEADER, HeaderValue::from_static("true"));
    }
}

fn json<B: From<String>>(status: StatusCode, body: serde_json::Value) -> Response<B> {
    let mut response = Response::new(B::from(body.to_string()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// The 429 answer to a denied decision.
pub(crate) fn denied<B: From<String>>(
    d: &Decision,
    message: &str,
    style: HeaderStyle,
) -> Response<B> {
    let mut response = json(
        StatusCode::TOO_MANY_REQUESTS,
        serde_json::json!({
            "error": message,
            "rule": d.rule,
            "retry_after_ms": d.retry_after_ms,
            "blocked_until_ms": d.blocked_until_ms,
            "warning": d.warning,
            "degraded": d.degraded,
        }),
    );
    apply_headers(response.headers_mut(), d, style);
    response
}

/// A JSON error with this status.
pub(crate) fn error<B: From<String>>(status: StatusCode, message: &str) -> Response<B> {
    json(status, serde_json::json!({ "error": message }))
}

/// The answer to a failed check: the caller's fault is a 400, anything else is logged and 500.
pub(crate) fn check_error<B: From<String>>(e: &Error) -> Response<B> {
    if e.is_client_error() && !matches!(e, Error::UnknownRule { .. } | Error::InvalidRule { .. }) {
        error(StatusCode::BAD_REQUEST, &e.to_string())
    } else {
        // An unknown rule here is the route naming a rule that is not configured: a server bug.
        tracing::error!(error = %e, "rate limit check failed");
        error(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string())
    }
}

/// `Limited` answers as the middleware would: 429 with the headers when denied, 400 for bad
/// input, 500 when the server is wired wrongly.
impl IntoResponse for Limited {
    fn into_response(self) -> axum::response::Response {
        match &self {
            Limited::Denied { decision, message } => denied(
                decision,
                message.as_deref().unwrap_or(DEFAULT_MESSAGE),
                HeaderStyle::Both,
            ),
            Limited::Check(e) => check_error(e),
            Limited::NoLimiter => {
                tracing::error!("{self}");
                error(StatusCode::INTERNAL_SERVER_ERROR, &self.to_string())
            }
        }
    }
}
