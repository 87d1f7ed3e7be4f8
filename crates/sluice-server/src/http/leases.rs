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

use super::bodies::{ReleaseBody, RenewBody, SettleBody};
use crate::api_error::ErrorBody;

use super::error::MAX_BODY_BYTES;
use super::error::{ApiError, json_body};
use crate::state::AppState;

/// The body of `/v1/settle`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
#[schema(example = json!({"reservation": "r", "cost": 1}))]
pub(super) struct SettleRequest {
    /// The `reservation` of an admitted check.
    reservation: String,
    /// The actual cost.
    #[schema(minimum = 0)]
    cost: u64,
}

/// The body of `/v1/release` and `/v1/renew`.
#[derive(Debug, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LeaseRequest {
    /// The `lease` of an admitted check.
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

#[utoipa::path(post, path = "/v1/release", tag = "leases", description = "Frees a concurrency limit's lease.", request_body(content = LeaseRequest, content_type = "application/json"), responses((status = 200, description = "Whether the lease was held", body = ReleaseBody), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_cost`, `bad_batch`, …)", body = ErrorBody), (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn release(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<ReleaseBody>, ApiError> {
    let request: LeaseRequest = json_body(body)?;
    let released = state.limiter.release(&request.lease).await?;
    Ok(Json(ReleaseBody { released }))
}

#[utoipa::path(post, path = "/v1/renew", tag = "leases", description = "Extends a lease by its limit's lease time.", request_body(content = LeaseRequest, content_type = "application/json"), responses((status = 200, description = "Whether the lease was held, and its new end", body = RenewBody), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_cost`, `bad_batch`, …)", body = ErrorBody), (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn renew(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<RenewBody>, ApiError> {
    let request: LeaseRequest = json_body(body)?;
    let until = state.limiter.renew(&request.lease).await?;
    Ok(Json(RenewBody {
        renewed: until.is_some(),
        lease_until_ms: until,
    }))
}

#[utoipa::path(post, path = "/v1/settle", tag = "leases", description = "Settles a reservation at its actual cost.", request_body(content = SettleRequest, content_type = "application/json"), responses((status = 200, description = "Whether it was settled now", body = SettleBody), (status = 400, description = "Bad input (`bad_json`, `bad_query`, `bad_attribute`, `missing_attribute`, `bad_cost`, `bad_batch`, …)", body = ErrorBody), (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody), (status = 413, description = "The body is over 64 KiB (`body_too_large`)", body = ErrorBody), (status = 503, description = "The store did not answer (`store_unavailable`)", body = ErrorBody)))]
pub(super) async fn settle(
    State(state): State<Arc<AppState>>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<SettleBody>, ApiError> {
    let request: SettleRequest = json_body(body)?;
    let settled = state
        .limiter
        .settle(&request.reservation, request.cost)
        .await?;
    Ok(Json(SettleBody { settled }))
}
