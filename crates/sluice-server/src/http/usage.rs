//! `GET /v1/usage?rule=R&attributes={…}`: what an identity has used of a rule's limits, read
//! without consuming ([`sluice::model::Usage`]): used, remaining, the window or calendar period
//! that holds the store's time, and whether one more unit would be refused.
//!
//! The identity is a JSON object as in a check's body, as `GET /v1/limits` takes it. A store that
//! cannot be read is `503 store_unavailable`: a reading has no fail policy.

use std::sync::Arc;

use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use serde::Deserialize;
use sluice::model::Usage;
use utoipa::IntoParams;

use super::error::{ApiError, ErrorCode};
use super::request::RequestAttributes;
use crate::api_error::ErrorBody;
use crate::state::AppState;

/// The query of `GET /v1/usage`.
#[derive(Debug, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct UsageQuery {
    /// The rule.
    rule: String,
    /// The identity, as a JSON object as in a check's body (`{"tenant": "42"}`).
    attributes: Option<String>,
}

#[utoipa::path(get, path = "/v1/usage", tag = "decisions", description = "What an identity has used of a rule's limits, consuming nothing: for each limit that applies, its limit, used and remaining units, the window or calendar period that holds the store's time (`fixed_window` limits and quotas), and whether one more unit would be refused.", params(UsageQuery), responses((status = 200, description = "The identity's usage", body = Usage), (status = 400, description = "Bad input (`bad_query`, `bad_attribute`, `missing_attribute`, …)", body = ErrorBody), (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn usage(
    State(state): State<Arc<AppState>>,
    query: Result<Query<UsageQuery>, QueryRejection>,
) -> Result<Json<Usage>, ApiError> {
    let bad_query = |message: String| ApiError::new(ErrorCode::BadQuery, message);
    let Query(query) = query.map_err(|e| bad_query(format!("query string: {}", e.body_text())))?;
    let text = query.attributes.as_deref().unwrap_or("{}");
    let attributes: RequestAttributes = serde_json::from_str(text)
        .map_err(|e| bad_query(format!("`attributes` must be a JSON object: {e}")))?;
    let usage = state
        .limiter
        .usage(&query.rule, &attributes.pairs()?)
        .await
        .map_err(|e| ApiError::from(e).with_rule(&query.rule))?;
    Ok(Json(usage))
}
