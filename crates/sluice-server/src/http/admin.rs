//! Admin endpoints: `POST /v1/reset`, `GET|POST|DELETE /v1/blocks`, behind a bearer token.
//!
//! The token comes from the environment variable named by `admin_token_env`. Without one the
//! admin routes answer 404 (they are off, not merely forbidden); with one, a request without
//! `Authorization: Bearer <token>` or with another token gets 401. Tokens are compared by their
//! SHA-1 digests in constant time, so neither the content nor the length of the secret leaks
//! through timing.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{HeaderMap, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;

use super::bodies::{BlockBody, BlockEntry, BlocksPage, ResetBody, UnblockBody};
use crate::api_error::ErrorBody;
use sluice::model::parse_duration;
use sluice::store::BlocksCursor;

use super::error::MAX_BODY_BYTES;
use super::error::{ApiError, ErrorCode, parse_json};
use super::request::RequestAttributes;
use crate::state::AppState;

/// The body of `/v1/reset` and `DELETE /v1/blocks`: a rule and an identity.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"rule": "login", "attributes": {"ip": "203.0.113.9"}}))]
pub(super) struct IdentityRequest<'a> {
    /// The rule.
    rule: String,
    /// The identity's values.
    #[serde(default, borrow)]
    #[schema(schema_with = super::request::attributes_schema)]
    attributes: RequestAttributes<'a>,
}

/// The body of `POST /v1/blocks`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"rule": "login", "attributes": {"ip": "203.0.113.9"}, "duration": "15m"}))]
pub(super) struct BlockRequest<'a> {
    /// The rule.
    rule: String,
    /// The identity's values.
    #[serde(default, borrow)]
    #[schema(schema_with = super::request::attributes_schema)]
    attributes: RequestAttributes<'a>,
    /// How long (`15m`, `1h`, at most `366d`).
    duration: String,
}

/// The query of `GET /v1/blocks`.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub(super) struct BlocksQuery {
    /// Only this rule's blocks.
    rule: Option<String>,
    /// The `next` of the previous page.
    cursor: Option<String>,
    /// Entries per page, 1 to 1000 (default 100).
    #[param(minimum = 1, maximum = 1000)]
    count: Option<usize>,
}

/// Entries per page of `GET /v1/blocks` unless `count` says otherwise, and the most it may ask.
const DEFAULT_PAGE: usize = 100;
const MAX_PAGE: usize = 1000;

pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/reset", post(reset))
        .route("/v1/blocks", get(list).post(block).delete(unblock))
        .route_layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

/// Lets a request through only with the right bearer token.
pub(super) async fn guard(
    State(state): State<Arc<AppState>>,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = &state.admin_token else {
        return ApiError::new(
            ErrorCode::AdminDisabled,
            "admin endpoints are off: set `admin_token_env` in the config and that variable in \
             the environment",
        )
        .into_response();
    };
    match presented(request.headers()) {
        Some(presented) if same_secret(presented.trim().as_bytes(), token.as_bytes()) => {
            next.run(request).await
        }
        Some(_) => unauthorized("wrong admin token"),
        None => unauthorized("admin endpoints need `Authorization: Bearer <token>`"),
    }
}

/// The bearer token a request presents, if any.
fn presented(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
}

/// Whether a request presents the admin token (never while the admin endpoints are off): what
/// public routes ask before showing more than using the API needs (`/v1/rules`).
pub(super) fn is_admin(state: &AppState, headers: &HeaderMap) -> bool {
    match (&state.admin_token, presented(headers)) {
        (Some(token), Some(presented)) => {
            same_secret(presented.trim().as_bytes(), token.as_bytes())
        }
        _ => false,
    }
}

fn unauthorized(message: &str) -> Response {
    ApiError::new(ErrorCode::Unauthorized, message).into_response()
}

/// Compares two secrets in time independent of where they differ and of their lengths.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let a = sha1_smol::Sha1::from(a).digest().bytes();
    let b = sha1_smol::Sha1::from(b).digest().bytes();
    a.iter()
        .zip(b.iter())
        .fold(0u8, |acc, (x, y)| acc | (x ^ y))
        == 0
}

#[utoipa::path(post, path = "/v1/reset", tag = "admin", description = "Forgets an identity's counters under a rule.", security(("admin_token" = [])), request_body(content = IdentityRequest, content_type = "application/json"), responses((status = 200, description = "Reset", body = ResetBody), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_duration`, …)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn reset(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ResetBody>, ApiError> {
    let request: IdentityRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    state.limiter.reset(&request.rule, &attributes).await?;
    tracing::info!(rule = %request.rule, "identity reset by admin");
    Ok(Json(ResetBody {
        rule: request.rule,
        reset: true,
    }))
}

#[utoipa::path(post, path = "/v1/blocks", tag = "admin", description = "Blocks an identity under every limit of a rule for a while.", security(("admin_token" = [])), request_body(content = BlockRequest, content_type = "application/json"), responses((status = 200, description = "Blocked", body = BlockBody), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_duration`, …)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn block(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<BlockBody>, ApiError> {
    let request: BlockRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    let duration = parse_duration(&request.duration)
        .map_err(|e| ApiError::new(ErrorCode::BadDuration, format!("`duration`: {}", e.message)))?;
    if duration > sluice::model::MAX_WINDOW {
        return Err(ApiError::new(
            ErrorCode::BadDuration,
            "`duration` must not exceed 366d",
        ));
    }
    let until = state
        .limiter
        .block(&request.rule, &attributes, duration)
        .await?;
    tracing::info!(rule = %request.rule, blocked_until_ms = until, "identity blocked by admin");
    Ok(Json(BlockBody {
        rule: request.rule,
        blocked_until_ms: until,
    }))
}

#[utoipa::path(delete, path = "/v1/blocks", tag = "admin", description = "Lifts an identity's blocks under a rule.", security(("admin_token" = [])), request_body(content = IdentityRequest, content_type = "application/json"), responses((status = 200, description = "Whether it was blocked", body = UnblockBody), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_duration`, …)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn unblock(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<UnblockBody>, ApiError> {
    let request: IdentityRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    let was = state.limiter.unblock(&request.rule, &attributes).await?;
    tracing::info!(rule = %request.rule, was_blocked = was, "identity unblocked by admin");
    Ok(Json(UnblockBody {
        rule: request.rule,
        unblocked: was,
    }))
}

/// `GET /v1/blocks[?rule=R][&count=N][&cursor=C]`: one page of the blocks in force, rule by rule
/// in name order. The cursor is `<rule> <store cursor>` (rule names hold no spaces); `next` is
/// null once every rule has been listed.
#[utoipa::path(get, path = "/v1/blocks", tag = "admin", description = "One page of the blocks in force, rule by rule in name order.", security(("admin_token" = [])), params(BlocksQuery), responses((status = 200, description = "A page", body = BlocksPage), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_duration`, …)", body = ErrorBody), (status = 401, description = "No or a wrong bearer token (`unauthorized`)", body = ErrorBody), (status = 404, description = "Admin endpoints are off (`admin_disabled`), or no rule by that name (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn list(
    State(state): State<Arc<AppState>>,
    query: Result<Query<BlocksQuery>, QueryRejection>,
) -> Result<Json<BlocksPage>, ApiError> {
    let Query(query) = query.map_err(|e| {
        ApiError::new(
            ErrorCode::BadQuery,
            format!("query string: {}", e.body_text()),
        )
    })?;
    let count = query.count.unwrap_or(DEFAULT_PAGE);
    if count == 0 || count > MAX_PAGE {
        return Err(ApiError::new(
            ErrorCode::BadQuery,
            format!("`count` must be 1 to {MAX_PAGE}"),
        ));
    }
    let mut rules: Vec<String> = match query.rule {
        Some(rule) => vec![rule],
        None => state.limiter.rules().keys().cloned().collect(),
    };
    rules.sort();
    let (mut index, mut after) = match &query.cursor {
        None => (0, None),
        Some(cursor) => {
            let (rule, store) = cursor.split_once(' ').ok_or_else(|| {
                ApiError::new(ErrorCode::BadQuery, "`cursor` is not one this API gave")
            })?;
            // The rule's place in name order, even if a reload removed it meanwhile.
            let index = rules.partition_point(|r| r.as_str() < rule);
            let resumes = rules.get(index).is_some_and(|r| r == rule);
            (
                index,
                (resumes && !store.is_empty()).then(|| store.to_string()),
            )
        }
    };
    let mut blocks = Vec::new();
    let mut skipped = 0;
    let mut next = None;
    while let Some(rule) = rules.get(index) {
        let cursor = BlocksCursor {
            after: after.take(),
            count: count - blocks.len().min(count - 1),
        };
        let page = state.limiter.blocks(rule, &cursor).await?;
        skipped += page.skipped;
        for block in page.blocks {
            blocks.push(BlockEntry {
                rule: rule.clone(),
                limit: block.limit_id.to_string(),
                identity: block.identity,
                blocked_until_ms: block.blocked_until_ms,
            });
        }
        match page.next {
            Some(store) => {
                next = Some(format!("{rule} {store}"));
                break;
            }
            None => index += 1,
        }
        if blocks.len() >= count {
            next = rules.get(index).map(|r| format!("{r} "));
            break;
        }
    }
    Ok(Json(BlocksPage {
        blocks,
        next,
        skipped,
    }))
}

#[cfg(test)]
mod tests {
    use super::same_secret;

    #[test]
    fn secrets_compare_by_content() {
        assert!(same_secret(b"s3cret", b"s3cret"));
        assert!(!same_secret(b"s3cret", b"s3cres"));
        assert!(!same_secret(b"s3cret", b"s3cret-longer"));
        assert!(!same_secret(b"", b"s3cret"));
    }
}
