//! The vocabulary of Sluice: rules, limits, rates, decisions.
//!
//! Everything here is plain data with validation. A [`Rule`] that passed [`Rule::validate`] can
//! be handed to the [`Limiter`](crate::Limiter) without further checks.
//!
//! # Layout
//! - `rule`: [`Rule`], [`By`] (the attributes a limit counts per) and rule names;
//! - `limit`: [`Limit`], one limit of a rule; `limit_fields`: a limit as rule files write it;
//!   `limit_choices`: its `when`, `overrides` and address `group`s, built and checked;
//!   `runtime_limit`: [`RuntimeLimit`], an identity's own numbers for a settable limit;
//! - `condition`: [`Condition`] and [`Matcher`], the `when` of rules, limits and overrides;
//!   `overrides`: [`Override`], a limit's other numbers, `unlimited` or `deny` for some requests;
//!   `address`: [`AddressGroup`], addresses counted by network (IPv6 by /64);
//! - `rate`: [`Rate`] (`"100/1m"`); `duration`: durations as rule files write them;
//! - `algorithm`: [`Algorithm`] and the crate-private registry every layer derives from
//!   (`registry_tests` checks the Lua files against it);
//! - `batch`: [`Batches`], a limit's opt-in to hot-key batches;
//! - `penalty`: [`Penalty`]; `fail_policy`: [`FailPolicy`];
//! - `period`: [`Period`], a quota's calendar period (a day, week, month or year in a zone);
//!   `over`: [`Over`], what a quota does past itself; `notify`: [`Notify`], the thresholds a
//!   quota sends notice at;
//! - `decision`: [`Decision`] and [`LimitDecision`], the answer to a check (the service writes
//!   its JSON itself); `headers`: the HTTP rate-limit headers it sets; `verdict`: [`Verdict`],
//!   the compact answer for callers in the same process;
//! - `usage`: [`Usage`], what an identity has used of a rule's limits;
//! - `micros`: [`Micros`], the one time type below the configuration;
//! - `schema` (feature `schema`): the JSON Schemas of the types rule files write as text;
//! - `name`: [`Name`], interned names a decision carries without allocating.

mod address;
mod algorithm;
mod batch;
mod condition;
mod decision;
mod duration;
mod fail_policy;
mod headers;
pub(crate) mod limit;
mod limit_choices;
mod limit_fields;
mod micros;
mod name;
mod notify;
mod over;
mod overrides;
mod penalty;
mod period;
mod rate;
#[cfg(test)]
mod registry_tests;
mod rule;
mod runtime_limit;
#[cfg(feature = "schema")]
mod schema;
mod usage;
mod verdict;

pub use address::AddressGroup;
pub(crate) use address::DEFAULT_ADDRESS_ATTRIBUTE;
pub use algorithm::Algorithm;
#[cfg(any(feature = "redis", test))]
pub(crate) use algorithm::REGISTRY;
pub use batch::{Batches, MAX_HOLD, refusal as batch_refusal};
pub use condition::{Condition, MAX_MATCHER_ITEMS, Matcher};
pub use decision::{AttributeNames, Decision, LimitDecision, LimitDecisions};
pub(crate) use duration::serde_text;
pub use duration::{format_duration, parse_duration};
pub use fail_policy::FailPolicy;
pub(crate) use headers::write_headers;
pub use headers::{HeaderStyle, headers};
pub use limit::Limit;
pub use micros::Micros;
pub use name::Name;
pub(crate) use name::same_bytes;
pub use notify::{Notify, Threshold};
pub use over::Over;
pub(crate) use overrides::MAX_DENY_MESSAGE;
pub use overrides::{Override, OverrideOutcome};
pub use penalty::Penalty;
pub use period::{Period, PeriodBounds, PeriodError, PeriodUnit};
pub use rate::{MAX_COUNT, MAX_WINDOW, Rate};
pub use rule::{By, Rule, validate_rule_name};
pub use runtime_limit::RuntimeLimit;
#[cfg(feature = "schema")]
pub use schema::DurationText;
pub use usage::{LimitUsage, Usage};
pub use verdict::Verdict;

/// A value in a rule or rate that is not acceptable, with the field it came from.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ModelError {
    /// The field, as a path when nested (`limits[1].rate`).
    pub field: String,
    /// What is wrong and, where possible, what would be right.
    pub message: String,
}

impl ModelError {
    pub(crate) fn new(field: impl Into<String>, message: impl Into<String>) -> ModelError {
        ModelError {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Prefixes the field with its parent, so errors read as paths (`rules.login.limits[0].rate`).
    pub fn within(mut self, parent: &str) -> ModelError {
        self.field = if self.field.is_empty() {
            parent.to_string()
        } else {
            format!("{parent}.{}", self.field)
        };
        self
    }
}
