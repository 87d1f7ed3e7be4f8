//! [`Usage`]: how much of each of a rule's limits an identity has used, read without consuming
//! anything (`Limiter::usage`, `GET /v1/usage`, `sluice usage`): what a billing page or a
//! customer's dashboard shows.
//!
//! Invariant: `used + remaining == limit` for every limit; `period_start_ms` and
//! `period_end_ms` are the window that holds the store's time, given for the limits counted in
//! windows (`fixed_window`, and a quota's calendar period) and none for the others.

use serde::{Deserialize, Serialize};

use super::Name;

/// What an identity has used of a rule's limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct Usage {
    /// The rule read.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub rule: Name,
    /// The store's time of the reading, epoch milliseconds.
    pub at_ms: u64,
    /// Each limit that applies to the identity, in the rule's order (a limit whose `when` does not
    /// hold, or that an `unlimited` override lifts, is left out).
    pub limits: Vec<LimitUsage>,
}

/// What an identity has used of one limit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[non_exhaustive]
pub struct LimitUsage {
    /// The limit's id.
    #[cfg_attr(feature = "openapi", schema(value_type = String))]
    pub id: Name,
    /// The most units it admits: the quota, the rate's count, or the burst (the identity's own
    /// numbers when set at run time).
    pub limit: u64,
    /// Units used.
    pub used: u64,
    /// Units left.
    pub remaining: u64,
    /// Where the window or period that holds the store's time began, epoch ms (windowed limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_start_ms: Option<u64>,
    /// Where it ends, and the count with it, epoch ms (windowed limits).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub period_end_ms: Option<u64>,
    /// One more unit would be refused (nothing left, or the identity is blocked).
    pub over: bool,
}
