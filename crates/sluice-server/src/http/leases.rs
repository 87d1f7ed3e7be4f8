//! The endpoints that end what a check began. Leases of concurrency limits: `POST /v1/release`
//! and `POST /v1/renew`, each with
//! a body `{"lease": "<id>"}` (the `lease` of an admitted `/v1/check` decision).
//!
//! Like `/v1/check`, they need no admin token: holding a lease id is what allows ending or
//! extending that lease (its token is 128 random bits). Answers:
//! - `/v1/release`: 200 `{"released": true}` when the lease was held and is now free,
//!   `{"released": false}` when it had expired or was released already (nothing changes);
//! - `/v1/renew`: 200 `{"renewed": true, "lease_until_ms": N}` with its new end (epoch ms), or
//!   `{"renewed": false}` when it lapsed (it is not taken again: check again before going on);
//! - 400 for a body or an id that is not a lease of the rules in force, 404 for a rule that is
//!   not, 503 when the store cannot be asked (the lease then ends by itself).
//!
//! `POST /v1/settle` with `{"reservation": "<id>", "cost": N}` settles the reservation of an
//! admitted `/v1/check` that asked `"reserve": true`, at the actual cost: 200 `{"settled": true}`,
//! or `{"settled": false}` when it was settled already or is out of time (its estimate stands);
//! 400, 404 and 503 as above.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::extract::{DefaultBodyLimit, State};
use axum::routing::post;
use axum::{Json, Router};
use serde::Deserialize;
use serde_json::{Value, json};

use super::MAX_BODY_BYTES;
use super::error::{ApiError, json_body};
use crate::state::AppState;

/// The body of `/v1/settle`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettleRequest {
    reservation: String,
    cost: u64,
}

/// The body of `/v1/release` and `/v1/renew`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LeaseRequest {
    lease: String,
}

pub(super) fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/release", post(release))
        .route("/v1/renew", post(renew))
        .route("/v1/settle", post(settle))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state)
}

async fn release(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: LeaseRequest = json_body(body)?;
    let released = state.limiter.release(&request.lease).await?;
    Ok(Json(json!({ "released": released })))
}

async fn renew(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: LeaseRequest = json_body(body)?;
    Ok(Json(match state.limiter.renew(&request.lease).await? {
        Some(until) => json!({ "renewed": true, "lease_until_ms": until }),
        None => json!({ "renewed": false }),
    }))
}

async fn settle(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Value>, ApiError> {
    let request: SettleRequest = json_body(body)?;
    let settled = state
        .limiter
        .settle(&request.reservation, request.cost)
        .await?;
    Ok(Json(json!({ "settled": settled })))
}
