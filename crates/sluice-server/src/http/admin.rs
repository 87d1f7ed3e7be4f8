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
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};
use sluice::model::parse_duration;
use sluice::store::BlocksCursor;

use super::MAX_BODY_BYTES;
use super::error::{ApiError, parse_json};
use super::request::RequestAttributes;
use crate::state::AppState;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityRequest<'a> {
    rule: String,
    #[serde(default, borrow)]
    attributes: RequestAttributes<'a>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlockRequest<'a> {
    rule: String,
    #[serde(default, borrow)]
    attributes: RequestAttributes<'a>,
    duration: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BlocksQuery {
    rule: Option<String>,
    cursor: Option<String>,
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
            StatusCode::NOT_FOUND,
            "admin endpoints are off: set `admin_token_env` in the config and that variable in \
             the environment",
        )
        .into_response();
    };
    let presented = request
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match presented {
        Some(presented) if same_secret(presented.trim().as_bytes(), token.as_bytes()) => {
            next.run(request).await
        }
        Some(_) => unauthorized("wrong admin token"),
        None => unauthorized("admin endpoints need `Authorization: Bearer <token>`"),
    }
}

fn unauthorized(message: &str) -> Response {
    let mut response = ApiError::new(StatusCode::UNAUTHORIZED, message).into_response();
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        header::HeaderValue::from_static("Bearer"),
    );
    response
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

async fn reset(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: IdentityRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    state.limiter.reset(&request.rule, &attributes).await?;
    tracing::info!(rule = %request.rule, "identity reset by admin");
    Ok(Json(json!({ "rule": request.rule, "reset": true })))
}

async fn block(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: BlockRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    let duration = parse_duration(&request.duration)
        .map_err(|e| ApiError::bad_request(format!("`duration`: {}", e.message)))?;
    if duration > sluice::model::MAX_WINDOW {
        return Err(ApiError::bad_request("`duration` must not exceed 366d"));
    }
    let until = state
        .limiter
        .block(&request.rule, &attributes, duration)
        .await?;
    tracing::info!(rule = %request.rule, blocked_until_ms = until, "identity blocked by admin");
    Ok(Json(
        json!({ "rule": request.rule, "blocked_until_ms": until }),
    ))
}

async fn unblock(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: IdentityRequest = parse_json(&body)?;
    let attributes = request.attributes.pairs()?;
    let was = state.limiter.unblock(&request.rule, &attributes).await?;
    tracing::info!(rule = %request.rule, was_blocked = was, "identity unblocked by admin");
    Ok(Json(json!({ "rule": request.rule, "unblocked": was })))
}

/// `GET /v1/blocks[?rule=R][&count=N][&cursor=C]`: one page of the blocks in force, rule by rule
/// in name order. The cursor is `<rule> <store cursor>` (rule names hold no spaces); `next` is
/// null once every rule has been listed.
async fn list(
    State(state): State<Arc<AppState>>,
    query: Result<Query<BlocksQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(query) =
        query.map_err(|e| ApiError::bad_request(format!("query string: {}", e.body_text())))?;
    let count = query.count.unwrap_or(DEFAULT_PAGE);
    if count == 0 || count > MAX_PAGE {
        return Err(ApiError::bad_request(format!(
            "`count` must be 1 to {MAX_PAGE}"
        )));
    }
    let mut rules: Vec<String> = match query.rule {
        Some(rule) => vec![rule],
        None => state.limiter.rules().keys().cloned().collect(),
    };
    rules.sort();
    let (mut index, mut after) = match &query.cursor {
        None => (0, None),
        Some(cursor) => {
            let (rule, store) = cursor
                .split_once(' ')
                .ok_or_else(|| ApiError::bad_request("`cursor` is not one this API gave"))?;
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
            blocks.push(json!({
                "rule": rule,
                "limit": block.limit_id,
                "identity": block.identity,
                "blocked_until_ms": block.blocked_until_ms,
            }));
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
    Ok(Json(
        json!({ "blocks": blocks, "next": next, "skipped": skipped }),
    ))
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
