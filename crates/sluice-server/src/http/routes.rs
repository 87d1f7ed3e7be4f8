//! The public routes: decisions (`/v1/check`, `/v1/peek`), usage (`/v1/usage`, in `usage`), the
//! rules in force (`/v1/rules`),
//! health (`/healthz`, `/readyz`) and metrics (`/metrics`). The lease endpoints of concurrency
//! limits (`/v1/release`, `/v1/renew`) are in `leases`.
//!
//! Decision responses carry the decision as JSON and the rate-limit headers of
//! [`sluice::model::headers`]; `/v1/check` answers 429 when denied, `/v1/peek` always 200 (it
//! consumed nothing, so nothing was limited; `allowed` says what a check would do). A client
//! that needs less than the full decision asks for it with `?view=` ([`View`](super::decision_body::View)): `compact` (the
//! most restrictive limit's numbers only) or `headers` (an empty body).

use sluice::algorithm::Mode;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::{HeaderMap, Request, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::{BodyExt, Collected, LengthLimitError, Limited};
use serde_json::{Value, json};

use super::bodies::{DecisionView, HealthBody, ReadyBody};
use super::deadline::{Budget, timed_out};
use super::decision_body::{View, ViewQuery, decision_response, view_of};
use super::error::MAX_BODY_BYTES;
use super::error::{
    ApiError, ErrorCode, no_route, parse_bytes, too_large, unreadable, wrong_method,
};
use super::request::DecisionRequest;
use crate::api_error::ErrorBody;
use crate::metrics;
use crate::state::{AppState, NoContext};
use crate::traces::HeaderCarrier;
use opentelemetry::propagation::Extractor;

pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/check", post(check))
        .route("/v1/peek", post(peek))
        .route("/v1/check-all", post(super::check_all::check_all))
        .route("/v1/rules", get(rules))
        .route("/v1/usage", get(super::usage::usage))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/metrics", get(prometheus))
        .fallback(no_route)
        .method_not_allowed_fallback(wrong_method)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
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
    // The request's head is dropped before the first await, and its headers are kept only when
    // a span reads them: held across the awaits, it would grow every decision's future (and
    // what each await copies) by its size.
    let (query, headers, body) = {
        let (head, body) = request.into_parts();
        let query = Query::<ViewQuery>::try_from_uri(&head.uri);
        let headers = state.traces.is_some().then(|| Box::new(head.headers));
        (query, headers, body)
    };
    let read = Limited::new(body, MAX_BODY_BYTES).collect();
    let Some(read) = budget.within(read, true).await else {
        return timed_out();
    };
    let body = read.map(Collected::to_bytes).map_err(|error| {
        if error.is::<LengthLimitError>() {
            too_large()
        } else {
            ApiError::bad_json(format!("Failed to buffer the request body: {error}"))
        }
    });
    match budget
        .within(
            answer(state, query, body, mode, headers.as_deref()),
            !store_bounded,
        )
        .await
    {
        Some(answer) => answer.into_response(),
        None => timed_out(),
    }
}

#[utoipa::path(post, path = "/v1/check", tag = "decisions", description = "Decides a request and consumes from its rule's limits.", params(("view" = Option<View>, Query, description = "How much of the decision the body carries: `full` (default), `compact`, or `headers` (no body)"), ("sluice-timeout-ms" = Option<u64>, Header, description = "How long the caller waits for the answer, in milliseconds (Envoy's `x-envoy-expected-rq-timeout-ms` is read the same way): past it the decision is made by the rule's fail policy without asking the store, with `reason: \"deadline\"`")), request_body(content = DecisionRequest, content_type = "application/json"), responses((status = 200, description = "Allowed", body = DecisionView), (status = 429, description = "Denied: the decision says by which limit and until when", body = DecisionView), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_cost`, …)", body = ErrorBody), (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody)))]
pub(super) async fn check(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<ViewQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|r| unreadable(&r));
    answer(&state, query, body, Mode::Apply, Some(&headers)).await
}

#[utoipa::path(post, path = "/v1/peek", tag = "decisions", description = "Says what a check would decide, consuming nothing.", params(("view" = Option<View>, Query, description = "How much of the decision the body carries: `full` (default), `compact`, or `headers` (no body)"), ("sluice-timeout-ms" = Option<u64>, Header, description = "How long the caller waits for the answer, in milliseconds (Envoy's `x-envoy-expected-rq-timeout-ms` is read the same way): past it the decision is made by the rule's fail policy without asking the store, with `reason: \"deadline\"`")), request_body(content = DecisionRequest, content_type = "application/json"), responses((status = 200, description = "What a check would decide", body = DecisionView), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_cost`, …)", body = ErrorBody), (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody)))]
pub(super) async fn peek(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    query: Result<Query<ViewQuery>, QueryRejection>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, ApiError> {
    let body = body.map_err(|r| unreadable(&r));
    answer(&state, query, body, Mode::Peek, Some(&headers)).await
}

/// Decides a `/v1/check` (`Mode::Apply`: 200 or 429, with the rule's message when denied) or a
/// `/v1/peek` (always 200) and answers in the view asked.
async fn answer(
    state: &AppState,
    query: Result<Query<ViewQuery>, QueryRejection>,
    body: Result<Bytes, ApiError>,
    mode: Mode,
    headers: Option<&HeaderMap>,
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
    let carrier = headers.map(HeaderCarrier);
    let carrier: &(dyn Extractor + Sync) = match &carrier {
        Some(carrier) => carrier,
        None => &NoContext,
    };
    let decision = state
        .decide_traced(&request.rule, &attributes, check, carrier)
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

#[utoipa::path(get, path = "/v1/rules", tag = "service", description = "The rules in force, the file's version and when it was loaded. The values the conditions (`when`) of rules, limits and overrides test are shown as `***` unless the request carries the admin token: an allow-list or a header value that grants `unlimited` is not for every caller to read.", responses((status = 200, description = "The rules in force", body = Object), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody)))]
pub(super) async fn rules(State(state): State<Arc<AppState>>, headers: HeaderMap) -> Json<Value> {
    let admin = super::admin::is_admin(&state, &headers);
    let live = state.live.load();
    let book = state.limiter.rules();
    let rules: serde_json::Map<String, Value> = book
        .iter()
        .map(|(name, compiled)| {
            let mut rule = serde_json::to_value(&compiled.definition).unwrap_or(Value::Null);
            if !admin {
                hide_condition_values(&mut rule);
            }
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

/// Replaces every value the conditions (`when`) in `value` test with `***`, keeping the
/// attribute names and the matchers' shape (what a caller needs to send).
fn hide_condition_values(value: &mut Value) {
    fn hide(matcher: &mut Value) {
        match matcher {
            Value::String(s) => *s = "***".to_string(),
            Value::Array(items) => items.iter_mut().for_each(hide),
            Value::Object(fields) => fields.values_mut().for_each(hide),
            _ => {}
        }
    }
    match value {
        Value::Object(fields) => {
            for (key, inner) in fields.iter_mut() {
                match (key.as_str(), inner) {
                    ("when", Value::Object(condition)) => condition.values_mut().for_each(hide),
                    (_, inner) => hide_condition_values(inner),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(hide_condition_values),
        _ => {}
    }
}

#[utoipa::path(get, path = "/healthz", tag = "service", description = "The process is up.", responses((status = 200, description = "Up", body = HealthBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody)))]
pub(super) async fn healthz() -> Json<HealthBody> {
    Json(HealthBody {
        status: "ok".into(),
    })
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

#[utoipa::path(get, path = "/readyz", tag = "service", description = "The store answers.", responses((status = 200, description = "Ready", body = ReadyBody), (status = 503, description = "The store does not answer; `error` says why", body = ReadyBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody)))]
pub(super) async fn readyz(State(state): State<Arc<AppState>>) -> Response {
    let store = state.limiter.store();
    match store_answer(&state).await {
        Ok(()) => Json(ReadyBody {
            status: "ready".into(),
            store: store.name().to_string(),
            error: None,
        })
        .into_response(),
        Err(error) => {
            let error = ApiError::new(ErrorCode::StoreUnavailable, error);
            (
                error.status(),
                Json(ReadyBody {
                    status: "unavailable".into(),
                    store: store.name().to_string(),
                    error: Some(error),
                }),
            )
                .into_response()
        }
    }
}

#[utoipa::path(get, path = "/metrics", tag = "service", description = "Prometheus metrics, in the text format.", responses((status = 200, description = "The metrics", content_type = "text/plain", body = String), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody)))]
pub(super) async fn prometheus(State(state): State<Arc<AppState>>) -> Response {
    // Read at scrape time: the decisions pay nothing for them.
    let (waiting, bound) = state.limiter.store_in_flight();
    ::metrics::gauge!(crate::metrics::STORE_IN_FLIGHT).set(waiting);
    ::metrics::gauge!(crate::metrics::STORE_IN_FLIGHT_LIMIT).set(bound);
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
