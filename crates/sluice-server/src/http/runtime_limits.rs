//! Run-time limits over HTTP, behind the admin token: `GET|PUT|DELETE /v1/limits`.
//!
//! - `PUT /v1/limits` `{"rule", "limit"?, "attributes", "rate", "burst"?}` (or `"max_leases"` for a
//!   concurrency limit) sets one identity's numbers on a settable limit (`limit`: its id, needed
//!   only when the rule has several settable limits) and answers the entry as it now stands;
//! - `GET /v1/limits[?rule=R][&limit=L][&attributes={"customer":"42"}]` lists the entries of
//!   every settable limit (or of one rule, one limit, one identity: `attributes` is a JSON object
//!   as in a check's body);
//! - `DELETE /v1/limits` `{"rule", "limit"?, "attributes"}` removes one.
//!
//! Bad input (an unknown or non-settable limit, numbers a rule file would refuse, a missing
//! attribute) is a 400 and changes nothing; a limit already holding the most entries it may
//! (`runtime_limits.max_per_limit`) is a 409.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::routing::get;
use axum::{Json, Router, middleware};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice::{RuntimeLimit, RuntimeLimitInfo};

use super::MAX_BODY_BYTES;
use super::admin::guard;
use super::error::{ApiError, parse_json};
use super::request::RequestAttributes;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SetRequest<'a> {
    rule: String,
    limit: Option<String>,
    #[serde(default, borrow)]
    attributes: RequestAttributes<'a>,
    rate: Option<sluice::Rate>,
    burst: Option<u64>,
    max_leases: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityRequest<'a> {
    rule: String,
    limit: Option<String>,
    #[serde(default, borrow)]
    attributes: RequestAttributes<'a>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListQuery {
    rule: Option<String>,
    limit: Option<String>,
    attributes: Option<String>,
}

pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/limits", get(list).put(set).delete(remove))
        .route_layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

fn entry(rule: &str, info: RuntimeLimitInfo) -> Value {
    let mut value = json!({ "rule": rule });
    if let (Value::Object(out), Ok(Value::Object(fields))) =
        (&mut value, serde_json::to_value(info))
    {
        out.extend(fields);
    }
    value
}

async fn set(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: SetRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    let info = state
        .limiter
        .set_runtime_limit(
            &request.rule,
            request.limit.as_deref(),
            &attributes,
            &RuntimeLimit {
                rate: request.rate,
                burst: request.burst,
                max_leases: request.max_leases,
            },
        )
        .await?;
    tracing::info!(rule = %request.rule, limit = %info.limit_id, identity = %info.identity,
        "run-time limit set by admin");
    Ok(Json(entry(&request.rule, info)))
}

async fn remove(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: IdentityRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    let removed = state
        .limiter
        .remove_runtime_limit(&request.rule, request.limit.as_deref(), &attributes)
        .await?;
    tracing::info!(rule = %request.rule, removed, "run-time limit removed by admin");
    Ok(Json(json!({ "rule": request.rule, "removed": removed })))
}

async fn list(
    State(state): State<Arc<AppState>>,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("query string: {}", e.body_text())))?;
    let limiter = &state.limiter;
    if let Some(text) = &query.attributes {
        let Some(rule) = &query.rule else {
            return Err(ApiError::bad_request(
                "`attributes` needs `rule`: the identity of which rule's limit",
            ));
        };
        let attributes: RequestAttributes = serde_json::from_str(text).map_err(|e| {
            ApiError::bad_request(format!("`attributes` must be a JSON object: {e}"))
        })?;
        let attributes = attributes.pairs()?;
        let found = limiter
            .runtime_limit(rule, query.limit.as_deref(), &attributes)
            .await?;
        let limits: Vec<Value> = found.into_iter().map(|i| entry(rule, i)).collect();
        return Ok(Json(json!({ "limits": limits })));
    }
    let rules: Vec<String> = match (&query.rule, &query.limit) {
        (Some(rule), _) => vec![rule.clone()],
        (None, Some(_)) => {
            return Err(ApiError::bad_request(
                "`limit` needs `rule`: limit ids are per rule",
            ));
        }
        (None, None) => limiter
            .rules()
            .iter()
            .filter(|(_, r)| r.definition.limits.iter().any(|l| l.settable))
            .map(|(name, _)| name.clone())
            .collect(),
    };
    let mut limits = Vec::new();
    for rule in rules {
        for info in limiter
            .runtime_limits(&rule, query.limit.as_deref())
            .await?
        {
            limits.push(entry(&rule, info));
        }
    }
    Ok(Json(json!({ "limits": limits })))
}
