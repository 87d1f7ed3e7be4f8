//! `FailPolicy`: how a decision is made when the store cannot be asked in time.

use serde::{Deserialize, Serialize};

/// What the limiter does when its store cannot be asked in time.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum FailPolicy {
    /// Allow, marked `degraded`.
    #[default]
    Open,
    /// Deny, marked `degraded`.
    Closed,
    /// Decide with this node's in-memory limiter, marked `degraded`: each of N nodes counts
    /// alone, so a fleet admits up to N times the limit while the store is out.
    Local,
}
