//! The JSON bodies of the HTTP API's answers that are not written by serde from a type of their
//! own, described for the OpenAPI document ([`super::openapi`]): a decision in the full view (written
//! by [`crate::decision_json`]), a check-all's answer, and the small answers of the lease and admin
//! endpoints, which their handlers build from these types.
//!
//! Invariant: each type here is the body its endpoint sends. A decision is described by the
//! library's own type, so the document cannot drift from what is serialized.

use serde::Serialize;
use utoipa::ToSchema;

/// A decision, as `/v1/check` answers it (`?view=full`, the default), with the rule's
/// `message` on a denied check.
// The library's `Decision` as serde writes it: `decision_json` writes the same bytes without
// serde, and its tests hold the two equal.
#[derive(Debug, Serialize, ToSchema)]
pub struct DecisionBody<'a> {
    /// The decision's fields.
    #[serde(flatten)]
    pub decision: &'a sluice::Decision,
    /// The rule's `message`, on a denied check.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'a str>,
}

/// A decision in the view asked: full (default) or compact. With `?view=headers` the body is
/// empty.
// Never built: `decision_json` and the compact view write these bodies; this describes them.
#[allow(dead_code)]
#[derive(Debug, Serialize, ToSchema)]
#[serde(untagged)]
pub enum DecisionView {
    /// `?view=full`.
    Full(DecisionBody<'static>),
    /// `?view=compact`.
    Compact(super::decision_body::CompactBody<'static>),
}

/// The answer of `/v1/check-all`.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckAllBody {
    /// Whether every part was allowed.
    pub allowed: bool,
    /// One decision per part, in the request's order.
    pub decisions: Vec<DecisionView>,
}

/// The answer of `/v1/release`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReleaseBody {
    /// The lease was held and is now free (false: it had lapsed or was released already).
    pub released: bool,
}

/// The answer of `/v1/renew`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RenewBody {
    /// The lease was held and now ends at `lease_until_ms` (false: it lapsed; check again).
    pub renewed: bool,
    /// Its new end (epoch ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lease_until_ms: Option<u64>,
}

/// The answer of `/v1/settle`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SettleBody {
    /// Settled now (false: settled already or out of time; the estimate stands).
    pub settled: bool,
}

/// The answer of `/v1/reset`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ResetBody {
    /// The rule.
    pub rule: String,
    /// Always true: the identity's counters are gone.
    pub reset: bool,
}

/// The answer of `POST /v1/blocks`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockBody {
    /// The rule.
    pub rule: String,
    /// Until when the identity is blocked (epoch ms).
    pub blocked_until_ms: u64,
}

/// The answer of `DELETE /v1/blocks`.
#[derive(Debug, Serialize, ToSchema)]
pub struct UnblockBody {
    /// The rule.
    pub rule: String,
    /// Whether the identity was blocked.
    pub unblocked: bool,
}

/// One block in force, as `GET /v1/blocks` lists it.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlockEntry {
    /// The rule.
    pub rule: String,
    /// The limit's id.
    pub limit: String,
    /// The identity, as `POST /v1/blocks/lift` takes it.
    pub identity: String,
    /// Until when (epoch ms).
    pub blocked_until_ms: u64,
}

/// A page of `GET /v1/blocks`.
#[derive(Debug, Serialize, ToSchema)]
pub struct BlocksPage {
    /// The blocks of this page.
    pub blocks: Vec<BlockEntry>,
    /// The cursor of the next page; null once every rule was listed.
    pub next: Option<String>,
    /// Entries the store could not read (skipped).
    pub skipped: u64,
}

/// The answer of `POST /v1/blocks/lift`.
#[derive(Debug, Serialize, ToSchema)]
pub struct LiftBody {
    /// The rule.
    pub rule: String,
    /// The limit's id.
    pub limit: String,
    /// The identity.
    pub identity: String,
    /// Whether it was blocked.
    pub unblocked: bool,
}

/// The answer of `/healthz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct HealthBody {
    /// `ok`.
    pub status: String,
}

/// The answer of `/readyz`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReadyBody {
    /// `ready`, or `unavailable` (503).
    pub status: String,
    /// The store's name.
    pub store: String,
    /// Why the store is not ready (503 only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<crate::api_error::ApiError>,
}
