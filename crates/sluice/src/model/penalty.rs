//! `Penalty`: escalating punishment of an identity that keeps being denied (warning, then ban).
//!
//! Validated with its limit ([`super::Rule::validate`]): every count and duration positive and
//! `warn_after <= ban_after`.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::serde_text;

/// Escalating punishment: violations are counted for `memory`; from `warn_after` the decision
/// carries a warning, at `ban_after` the identity is banned for `ban`.
///
/// In a rule file: `penalty: { warn_after: 3, ban_after: 5, ban: 1h, memory: 1d }`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Penalty {
    /// Violations from which decisions carry `warning: true`.
    #[cfg_attr(feature = "schema", schemars(example = 3))]
    pub warn_after: u32,
    /// Violations at which the identity is banned.
    #[cfg_attr(feature = "schema", schemars(example = 5))]
    pub ban_after: u32,
    /// How long a ban lasts.
    #[serde(with = "serde_text")]
    #[cfg_attr(feature = "schema", schemars(with = "super::DurationText"))]
    pub ban: Duration,
    /// How long violations are remembered after the last one.
    #[serde(with = "serde_text")]
    #[cfg_attr(feature = "schema", schemars(with = "super::DurationText"))]
    pub memory: Duration,
}
