//! `Override`: a limit's numbers for the requests a condition picks out (a plan's tier, an
//! allowlist, a refused range).
//!
//! A limit's `overrides` are tried in order and the first whose `when` holds decides; with none,
//! the limit's own numbers apply. An override either replaces numbers (`rate`, `burst`,
//! `max_leases`, `quota`), or makes the limit `unlimited` (it counts nothing), or `deny`s with a message
//! (the request is refused without asking the store).
//!
//! Invariants kept by [`Limit::validate`](super::Limit::validate): exactly one outcome per
//! override; replaced numbers form a valid limit of the same algorithm and the same window (so
//! an identity whose tier changes keeps its counter: the limit id, which names the counter,
//! does not depend on the numbers); no override is unreachable behind an earlier one.

use serde::{Deserialize, Serialize};

use super::{Condition, ModelError, Rate};

/// The longest message a `deny` may carry.
pub const MAX_DENY_MESSAGE: usize = 1024;

/// One entry of a limit's `overrides`: when `when` holds, `outcome` replaces the limit's own.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "OverrideFields", into = "OverrideFields")]
pub struct Override {
    /// The requests this override is for.
    pub when: Condition,
    /// What it does to them.
    pub outcome: OverrideOutcome,
}

/// What an override does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OverrideOutcome {
    /// Other numbers; an absent one keeps the limit's own.
    Numbers {
        /// Units per window (same window as the limit).
        rate: Option<Rate>,
        /// Capacity, for the algorithms with a burst.
        burst: Option<u64>,
        /// Leases held at once, for a concurrency limit.
        max_leases: Option<u64>,
        /// Units per period, for a quota (same period as the limit).
        quota: Option<u64>,
    },
    /// The limit never limits these requests and counts nothing for them.
    Unlimited,
    /// The request is refused with this message, without asking the store.
    Deny(String),
}

/// An entry of a limit's `overrides`: for the requests `when` picks out, other numbers
/// (`rate`, `burst`, `max_leases`, `quota`), `unlimited: true`, or `deny: "message"` — exactly one of
/// the three. The first entry whose `when` holds decides.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(title = "Override"))]
#[serde(deny_unknown_fields)]
pub(super) struct OverrideFields {
    /// The requests this override is for.
    when: Condition,
    /// Units per window for them, with the limit's own window.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    rate: Option<Rate>,
    /// Their capacity, for the algorithms with a burst.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = 50))]
    burst: Option<u64>,
    /// Leases they may hold at once, for a concurrency limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = 10))]
    max_leases: Option<u64>,
    /// Units per period for them, for a quota (with the limit's own period).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = 100000))]
    quota: Option<u64>,
    /// The limit never limits them and counts nothing for them.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    unlimited: bool,
    /// They are refused with this message (at most 1024 bytes), without asking the store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = &"this network is not served"))]
    deny: Option<String>,
}

impl TryFrom<OverrideFields> for Override {
    type Error = ModelError;
    fn try_from(f: OverrideFields) -> Result<Override, ModelError> {
        let numbers =
            f.rate.is_some() || f.burst.is_some() || f.max_leases.is_some() || f.quota.is_some();
        let outcome = match (numbers, f.unlimited, f.deny) {
            (true, false, None) => OverrideOutcome::Numbers {
                rate: f.rate,
                burst: f.burst,
                max_leases: f.max_leases,
                quota: f.quota,
            },
            (false, true, None) => OverrideOutcome::Unlimited,
            (false, false, Some(message)) => OverrideOutcome::Deny(message),
            (false, false, None) => {
                return Err(ModelError::new(
                    "override",
                    "an override needs an outcome: `rate`/`burst`/`max_leases`/`quota`, \
                     `unlimited: true` or `deny: \"message\"`",
                ));
            }
            _ => {
                return Err(ModelError::new(
                    "override",
                    "an override has one outcome: numbers, `unlimited` or `deny`, not several",
                ));
            }
        };
        Ok(Override {
            when: f.when,
            outcome,
        })
    }
}

impl From<Override> for OverrideFields {
    fn from(o: Override) -> OverrideFields {
        let mut f = OverrideFields {
            when: o.when,
            rate: None,
            burst: None,
            max_leases: None,
            quota: None,
            unlimited: false,
            deny: None,
        };
        match o.outcome {
            OverrideOutcome::Numbers {
                rate,
                burst,
                max_leases,
                quota,
            } => {
                f.rate = rate;
                f.burst = burst;
                f.max_leases = max_leases;
                f.quota = quota;
            }
            OverrideOutcome::Unlimited => f.unlimited = true,
            OverrideOutcome::Deny(message) => f.deny = Some(message),
        }
        f
    }
}

impl Override {
    /// An override giving the requests `when` picks out other numbers.
    pub fn numbers(when: Condition, rate: Option<Rate>, burst: Option<u64>) -> Override {
        Override {
            when,
            outcome: OverrideOutcome::Numbers {
                rate,
                burst,
                max_leases: None,
                quota: None,
            },
        }
    }

    /// An override that never limits the requests `when` picks out.
    pub fn unlimited(when: Condition) -> Override {
        Override {
            when,
            outcome: OverrideOutcome::Unlimited,
        }
    }

    /// An override that refuses the requests `when` picks out with `message`.
    pub fn deny(when: Condition, message: impl Into<String>) -> Override {
        Override {
            when,
            outcome: OverrideOutcome::Deny(message.into()),
        }
    }
}
