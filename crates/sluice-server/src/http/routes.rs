//! The public routes: decisions (`/v1/check`, `/v1/peek`), the rules in force (`/v1/rules`),
//! health (`/healthz`, `/readyz`) and metrics (`/metrics`). The lease endpoints of concurrency
//! limits (`/v1/release`, `/v1/renew`) are in `leases`.
//!
//! Decision responses carry the decision as JSON and the rate-limit headers of
//! [`sluice::model::headers`]; `/v1/check` answers 429 when denied, `/v1/peek` always 200 (it
//! consumed nothing, so nothing was limited; `allowed` says what a check would do). A client
//! that needs less than the full decision asks for it with `?view=` ([`View`]): `compact` (the
//! most restrictive limit's numbers only) or `headers` (an empty body).

use sluice::algorithm::Mode;
use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::{BodyExt, Collected, LengthLimitError, Limited};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sluice::Decision;
use sluice::middleware::insert_headers;
use sluice::model::HeaderStyle;

use crate::decision_json::write_decision_json;

use super::MAX_BODY_BYTES;
use super::deadline::{Budget, timed_out};
use super::error::{ApiError, no_route, parse_bytes, too_large, unreadable, wrong_method};
use super::request::DecisionRequest;
use crate::metrics;
use crate::state::AppState;
use crate::traces::HeaderCarrier;

pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/check", post(check))
        .route("/v1/peek", post(peek))
        .route("/v1/rules", get(rules))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// How much of a decision a response body carries (`?view=`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
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
struct ViewQuery {
    #[serde(default)]
    view: View,
}

fn view_of(query: Result<Query<ViewQuery>, QueryRejection>) -> Result<View, ApiError> {
    query.map(|Query(q)| q.view).map_err(|_| {
        ApiError::bad_request("`view` must be full, compact or headers (and nothing else is asked)")
    })
}

/// Answers a decision route without the router (see [`super::front`]): the extractions of
/// `check` and `peek`, done by hand, within `budget`. A wait for the body arms its timer; a wait
/// for the store does only when `store_bounded` is false (see [`super::deadline`]).
pub(super) async fn answer_request<B>(
    state: &AppState,
    request: Request<B>,
    mode: Mode,
    mut budget: Budget,
    store_bounded: bool,
) -> Response
where
    B: hyper::body::Body,
    B::Error: Into<axum::BoxError>,
{
    let (head, body) = request.into_parts();
    let query = Query::<ViewQuery>::try_from_uri(&head.uri);
    let read = Limited::new(body, MAX_BODY_BYTES).collect();
    let Some(read) = budget.within(read, true).await else {
        return timed_out();
    };
    let body = read.map(Collected::to_bytes).map_err(|error| {
        if error.is::<LengthLimitError>() {
            too_large()
        } else {
            ApiError::bad_request(format!("Failed to buffer the request body: {error}"))
        }
    });
    match budget
        .within(
            answer(state, query, body, mode, &head.headers),
            !store_bounded,
        )
        .await
    {
        Some(answer) => answer.into_response(),
        None => timed_out(),
    }
}

async fn check(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<ViewQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|r| unreadable(&r));
    answer(&state, query, body, Mode::Apply, &headers).await
}

async fn peek(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<ViewQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|r| unreadable(&r));
    answer(&state, query, body, Mode::Peek, &headers).await
}

/// Decides a `/v1/check` (`Mode::Apply`: 200 or 429, with the rule's message when denied) or a
/// `/v1/peek` (always 200) and answers in the view asked.
async fn answer(
    state: &AppState,
    query: Result<Query<ViewQuery>, QueryRejection>,
    body: Result<Bytes, ApiError>,
    mode: Mode,
    headers: &HeaderMap,
) -> Result<Response, ApiError> {
    let view = view_of(query)?;
    let body = if state.remote_store {
        detached(body?)
    } else {
        body?
    };
    let request: DecisionRequest = parse_bytes(&body)?;
    let attributes = request.attributes.pairs()?;
    let check = match mode {
        Mode::Apply => request.check()?,
        Mode::Peek => request.check()?.peek(),
    };
    let carrier = HeaderCarrier(headers);
    let decision = state
        .decide_traced(&request.rule, &attributes, check, &carrier)
        .await?;
    let denied = mode == Mode::Apply && !decision.allowed;
    let status = if denied {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    };
    let message = denied
        .then(|| state.limiter.denial_message(&decision))
        .flatten();
    Ok(decision_response(
        status,
        &decision,
        state.live.load().headers,
        message.as_deref(),
        view,
    ))
}

/// A copy of `body` that shares no memory with the connection's read buffer. hyper hands over a
/// body read with the head as a slice of that buffer; held while a decision waits for a remote
/// store, it keeps the buffer from being reused, and the connection allocates a new one (8 KB)
/// for every request. Copying the few bytes out costs less.
fn detached(body: Bytes) -> Bytes {
    Bytes::copy_from_slice(&body)
}

/// The compact body (see [`View::Compact`]).
#[derive(Serialize)]
struct CompactBody<'a> {
    allowed: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lease_until_ms: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reservation: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reservation_until_ms: Option<u64>,
    limit: u64,
    remaining: u64,
    reset_after_ms: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    retry_after_ms: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    degraded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<&'a str>,
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
    match view {
        View::Full => write_decision_json(&mut body, decision, message),
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
            if serde_json::to_writer(&mut body, &compact).is_err() {
                body.clear();
            }
        }
        View::Headers => {}
    }
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
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
    response
}

/// `X-RateLimit-Lease: <id>`: the lease an admitted check holds on the rule's concurrency
/// limits, in every view (with `?view=headers` it is the only place the lease is given).
pub const LEASE_HEADER: header::HeaderName = header::HeaderName::from_static("x-ratelimit-lease");

async fn rules(State(state): State<Arc<AppState>>) -> Json<Value> {
    let live = state.live.load();
    let book = state.limiter.rules();
    let rules: serde_json::Map<String, Value> = book
        .iter()
        .map(|(name, compiled)| {
            let mut rule = serde_json::to_value(&compiled.definition).unwrap_or(Value::Null);
            if let Value::Object(fields) = &mut rule {
                let ids: Vec<String> = compiled.definition.limits.iter().map(|l| l.id()).collect();
                fields.insert("limit_ids".into(), json!(ids));
            }
            (name.clone(), rule)
        })
        .collect();
    Json(json!({
        "version": live.version,
        "loaded_at_ms": live.loaded_at_ms,
        "source": state.config_path.as_ref().map(|p| p.display().to_string()),
        "enabled": live.config.enabled,
        "rules": rules,
    }))
}

async fn healthz() -> Json<Value> {
    Json(json!({ "status": "ok" }))
}

/// Whether the store answers a ping within a deadline derived from the store timeout; the error
/// says why not.
pub(super) async fn store_answer(state: &AppState) -> Result<(), String> {
    let store = state.limiter.store();
    let deadline = (state.limiter.options().timeout * 4)
        .clamp(Duration::from_millis(100), Duration::from_secs(2));
    match tokio::time::timeout(deadline, store.ping()).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(error)) => Err(error.to_string()),
        Err(_) => Err(format!(
            "{} store: no answer within {deadline:?}",
            store.name()
        )),
    }
}

async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let store = state.limiter.store();
    match store_answer(&state).await {
        Ok(()) => Json(json!({ "status": "ready", "store": store.name() })).into_response(),
        Err(error) => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "unavailable", "store": store.name(), "error": error })),
        )
            .into_response(),
    }
}

async fn prometheus(State(state): State<Arc<AppState>>) -> Response {
    // Read at scrape time: the decisions pay nothing for them.
    let (waiting, bound) = state.limiter.store_in_flight();
    ::metrics::gauge!("sluice_store_in_flight").set(waiting);
    ::metrics::gauge!("sluice_store_in_flight_limit").set(bound);
    let mut text = metrics::render();
    state.top_denied.render_into(&mut text);
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        text,
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use bytes::BytesMut;

    use super::detached;

    /// As hyper reads a request: the body is split off the connection's read buffer, which then
    /// wants room for the next request. While the body shares the buffer, that room can only be
    /// found in a new allocation; once it is detached, the buffer is reused.
    #[test]
    fn a_detached_body_leaves_the_read_buffer_to_the_connection() {
        let body = br#"{"rule":"login","attributes":{"ip":"203.0.113.9"}}"#;
        let mut read_buffer = BytesMut::with_capacity(256);
        read_buffer.extend_from_slice(body);
        let held = read_buffer.split().freeze();
        assert!(
            !read_buffer.try_reclaim(256),
            "a body held keeps the buffer"
        );

        let detached = detached(held);
        assert_eq!(detached, body[..]);
        assert!(
            read_buffer.try_reclaim(256),
            "the buffer is the connection's again"
        );
    }
}
