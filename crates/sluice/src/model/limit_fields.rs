//! [`Limit`] as a rule file writes it: `rate` for the rate algorithms, `max_leases` and `lease`
//! for `concurrency` (and `limit`, the former spelling of `max_leases`), read and written through
//! this form so that every layer below reads the one shape `Limit` keeps (a concurrency limit's
//! two numbers in its `rate`).
//!
//! Invariant: a limit converts to this form and back unchanged; a file form that mixes the two
//! shapes, or lacks the numbers its algorithm needs, is refused naming the field.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    AddressGroup, Algorithm, Batches, By, Condition, Limit, ModelError, Override, Penalty, Rate,
    serde_text,
};

/// A limit as written in a rule file: `rate` for the rate algorithms, `max_leases` and `lease`
/// for `concurrency`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct LimitFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    #[serde(default)]
    by: Vec<By>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    rate: Option<Rate>,
    #[serde(default)]
    algorithm: Algorithm,
    // `limit` was this key's first spelling; "limit" now names only the `Limit` itself.
    #[serde(default, alias = "limit", skip_serializing_if = "Option::is_none")]
    max_leases: Option<u64>,
    #[serde(
        default,
        with = "serde_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    lease: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    burst: Option<u64>,
    #[serde(
        default,
        with = "serde_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    block: Option<Duration>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    penalty: Option<Penalty>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    count_denied: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    shadow: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    settable: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    batch: Option<Batches>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    when: Option<Condition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    overrides: Vec<Override>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    group: BTreeMap<String, AddressGroup>,
}

impl TryFrom<LimitFields> for Limit {
    type Error = ModelError;
    fn try_from(f: LimitFields) -> Result<Limit, ModelError> {
        let rate = if f.algorithm.holds_leases() {
            if f.rate.is_some() {
                return Err(ModelError::new(
                    "rate",
                    "a concurrency limit has no rate; write `max_leases: N` (held at once) \
                     and `lease: 30s` (how long an unreleased lease lasts)",
                ));
            }
            let (Some(count), Some(lease)) = (f.max_leases, f.lease) else {
                return Err(ModelError::new(
                    if f.max_leases.is_none() {
                        "max_leases"
                    } else {
                        "lease"
                    },
                    "a concurrency limit needs `max_leases` (held at once) and `lease` (how \
                     long an unreleased lease lasts, e.g. `30s`)",
                ));
            };
            Rate::new(count, lease).map_err(|e| {
                ModelError::new(
                    "max_leases",
                    e.message
                        .replace("the count", "max_leases")
                        .replace("the window", "the lease"),
                )
            })?
        } else {
            if f.max_leases.is_some() || f.lease.is_some() {
                return Err(ModelError::new(
                    if f.max_leases.is_some() {
                        "max_leases"
                    } else {
                        "lease"
                    },
                    format!(
                        "`max_leases` and `lease` belong to concurrency limits; {} takes a `rate`",
                        f.algorithm
                    ),
                ));
            }
            f.rate
                .ok_or_else(|| ModelError::new("rate", "missing: write e.g. `rate: 100/1m`"))?
        };
        Ok(Limit {
            name: f.name,
            by: f.by,
            rate,
            algorithm: f.algorithm,
            burst: f.burst,
            block: f.block,
            penalty: f.penalty,
            count_denied: f.count_denied,
            shadow: f.shadow,
            batch: f.batch,
            settable: f.settable,
            when: f.when,
            overrides: f.overrides,
            group: f.group,
        })
    }
}

impl From<Limit> for LimitFields {
    fn from(l: Limit) -> LimitFields {
        let leases = l.algorithm.holds_leases();
        LimitFields {
            name: l.name,
            by: l.by,
            rate: (!leases).then_some(l.rate),
            algorithm: l.algorithm,
            max_leases: leases.then_some(l.rate.count),
            lease: leases.then_some(l.rate.window),
            burst: l.burst,
            block: l.block,
            penalty: l.penalty,
            count_denied: l.count_denied,
            shadow: l.shadow,
            batch: l.batch,
            settable: l.settable,
            when: l.when,
            overrides: l.overrides,
            group: l.group,
        }
    }
}
