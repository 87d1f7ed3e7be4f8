//! Run-time limits over HTTP, behind the admin token: `GET|PUT|DELETE /v1/limits`.
//!
//! - `PUT /v1/limits` `{"rule", "limit"?, "attributes", "rate", "burst"?}` (or `"max_leases"` for a
//!   concurrency limit, `"quota"` and on a monthly quota `"anchor"`, the billing day, for a
//!   quota) sets one identity's numbers on a settable limit (`limit`: its id, needed only when
//!   the rule has several settable limits) and answers the entry as it now stands;
//! - `GET /v1/limits[?rule=R][&limit=L][&attributes={"customer":"42"}]` lists the entries of
//!   every settable limit (or of one rule, one limit, one identity: `attributes` is a JSON object
//!   as in a check's body);
//! - `DELETE /v1/limits` `{"rule", "limit"?, "attributes"}` removes one.
//!
//! Bad input (an unknown or non-settable limit, numbers a rule file would refuse: code
//! `invalid_runtime_limit`; a missing attribute, a bad query) is a 400 and changes nothing; a
//! limit already holding the most entries it may (`runtime_limits.max_per_limit`) is a 409
//! `runtime_limits_full`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::routing::get;
use axum::{Json, Router, middleware};
use serde::{Deserialize, Serialize};
use sluice::{RuntimeLimit, RuntimeLimitInfo};
use utoipa::{IntoParams, ToSchema};

use super::admin::guard;
use super::error::MAX_BODY_BYTES;
use super::error::{ApiError, ErrorCode, parse_json};
use super::request::RequestAttributes;
use crate::api_error::ErrorBody;
use crate::state::AppState;

/// The body of `PUT /v1/limits`: an identity of a rule's settable limit, and its numbers.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"rule": "api", "attributes": {"user": "42"}, "rate": "5000/1m", "burst": 6000}))]
pub(super) struct RuntimeLimitSet<'a> {
    /// The rule.
    rule: String,
    /// The limit's id; needed only when the rule has several settable limits.
    limit: Option<String>,
    /// The identity's values.
    #[serde(default, borrow)]
    #[schema(schema_with = super::request::attributes_schema)]
    attributes: RequestAttributes<'a>,
    /// Units per window (`5000/1m`); the window must be the limit's.
    #[schema(value_type = Option<String>)]
    rate: Option<sluice::Rate>,
    /// A bucket algorithm's capacity; defaults to the rate's count.
    burst: Option<u64>,
    /// For a concurrency limit, instead of `rate`: leases held at once.
    max_leases: Option<u64>,
    /// For a quota, instead of `rate`: units per period.
    quota: Option<u64>,
    /// For a monthly quota: the day (1–31) each of the identity's months begins on. Alone, the
    /// rule's quota keeps applying; a change keeps what the identity used this period.
    anchor: Option<u8>,
}

/// The body of `DELETE /v1/limits`: an identity of a rule's settable limit.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"rule": "api", "attributes": {"user": "42"}}))]
pub(super) struct RuntimeLimitTarget<'a> {
    /// The rule.
    rule: String,
    /// The limit's id; needed only when the rule has several settable limits.
    limit: Option<String>,
    /// The identity's values.
    #[serde(default, borrow)]
    #[schema(schema_with = super::request::attributes_schema)]
    attributes: RequestAttributes<'a>,
}

/// The query of `GET /v1/limits`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct RuntimeLimitsQuery {
    /// Only this rule's run-time limits.
    rule: Option<String>,
    /// Only this limit's (an id; needs `rule`).
    limit: Option<String>,
    /// Only this identity's, as a JSON object as in a check's body (needs `rule`).
    attributes: Option<String>,
}

/// One identity's run-time limit.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RuntimeLimitEntry {
    /// The rule.
    rule: String,
    /// The limit's id.
    limit: String,
    /// The identity (its values, escaped and joined as the store keys them).
    identity: String,
    /// Its units per window.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<String>)]
    rate: Option<sluice::Rate>,
    /// Its capacity, when not the rate's count.
    #[serde(skip_serializing_if = "Option::is_none")]
    burst: Option<u64>,
    /// A concurrency limit's leases held at once.
    #[serde(skip_serializing_if = "Option::is_none")]
    max_leases: Option<u64>,
    /// A quota's units per period (absent when only the billing day is set).
    #[serde(skip_serializing_if = "Option::is_none")]
    quota: Option<u64>,
    /// A monthly quota's billing day for this identity.
    #[serde(skip_serializing_if = "Option::is_none")]
    anchor: Option<u8>,
}

impl RuntimeLimitEntry {
    fn new(rule: &str, info: RuntimeLimitInfo) -> RuntimeLimitEntry {
        RuntimeLimitEntry {
            rule: rule.to_string(),
            limit: info.limit_id,
            identity: info.identity,
            rate: info.set.rate,
            burst: info.set.burst,
            max_leases: info.set.max_leases,
            quota: info.set.quota,
            anchor: info.set.anchor,
        }
    }
}

/// The answer of `GET /v1/limits`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RuntimeLimitsPage {
    /// The run-time limits asked for.
    limits: Vec<RuntimeLimitEntry>,
}

/// The answer of `DELETE /v1/limits`.
#[derive(Debug, Serialize, ToSchema)]
pub(super) struct RuntimeLimitRemoved {
    /// The rule.
    rule: String,
    /// Whether the identity had a run-time limit.
    removed: bool,
}

pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/limits", get(list).put(set).delete(remove))
        .route_layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

#[utoipa::path(put, path = "/v1/limits", tag = "admin", description = "Sets an identity's own numbers on a rule's settable limit, kept in the store for every node.", security(("admin_token" = [])), request_body(content = RuntimeLimitSet, content_type = "application/json"), responses((status = 200, description = "The run-time limit as it now stands", body = RuntimeLimitEntry), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `invalid_runtime_limit`: an unknown or non-settable limit, numbers a rule file would refuse)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 409, description = "The limit already holds `runtime_limits.max_per_limit` run-time limits (`runtime_limits_full`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn set(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RuntimeLimitEntry>, ApiError> {
    let request: RuntimeLimitSet = parse_json(&body)?;
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
                quota: request.quota,
                anchor: request.anchor,
            },
        )
        .await?;
    tracing::info!(rule = %request.rule, limit = %info.limit_id, identity = %info.identity,
        "run-time limit set by admin");
    Ok(Json(RuntimeLimitEntry::new(&request.rule, info)))
}

#[utoipa::path(delete, path = "/v1/limits", tag = "admin", description = "Removes an identity's run-time limit: the rule file's numbers apply again.", security(("admin_token" = [])), request_body(content = RuntimeLimitTarget, content_type = "application/json"), responses((status = 200, description = "Whether it had one", body = RuntimeLimitRemoved), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `invalid_runtime_limit`: an unknown or non-settable limit, numbers a rule file would refuse)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn remove(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RuntimeLimitRemoved>, ApiError> {
    let request: RuntimeLimitTarget = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    let removed = state
        .limiter
        .remove_runtime_limit(&request.rule, request.limit.as_deref(), &attributes)
        .await?;
    tracing::info!(rule = %request.rule, removed, "run-time limit removed by admin");
    Ok(Json(RuntimeLimitRemoved {
        rule: request.rule,
        removed,
    }))
}

fn bad_query(message: impl Into<String>) -> ApiError {
    ApiError::new(ErrorCode::BadQuery, message)
}

#[utoipa::path(get, path = "/v1/limits", tag = "admin", description = "The run-time limits of every settable limit, or of one rule, one limit, or one identity.", security(("admin_token" = [])), params(RuntimeLimitsQuery), responses((status = 200, description = "The run-time limits", body = RuntimeLimitsPage), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `invalid_runtime_limit`: an unknown or non-settable limit, numbers a rule file would refuse)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    query: Result<Query<RuntimeLimitsQuery>, QueryRejection>,
) -> Result<Json<RuntimeLimitsPage>, ApiError> {
    let Query(query) = query.map_err(|e| bad_query(format!("query string: {}", e.body_text())))?;
    let limiter = &state.limiter;
    if let Some(text) = &query.attributes {
        let Some(rule) = &query.rule else {
            return Err(bad_query(
                "`attributes` needs `rule`: the identity of which rule's limit",
            ));
        };
        let attributes: RequestAttributes = serde_json::from_str(text)
            .map_err(|e| bad_query(format!("`attributes` must be a JSON object: {e}")))?;
        let attributes = attributes.pairs()?;
        let found = limiter
            .runtime_limit(rule, query.limit.as_deref(), &attributes)
            .await?;
        let limits = found
            .into_iter()
            .map(|i| RuntimeLimitEntry::new(rule, i))
            .collect();
        return Ok(Json(RuntimeLimitsPage { limits }));
    }
    let rules: Vec<String> = match (&query.rule, &query.limit) {
        (Some(rule), _) => vec![rule.clone()],
        (None, Some(_)) => {
            return Err(bad_query("`limit` needs `rule`: limit ids are per rule"));
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
            limits.push(RuntimeLimitEntry::new(&rule, info));
        }
    }
    Ok(Json(RuntimeLimitsPage { limits }))
}
