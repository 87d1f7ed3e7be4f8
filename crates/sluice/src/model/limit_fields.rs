//! [`Limit`] as a rule file writes it: `rate` for the rate algorithms, `max_leases` and `lease`
//! for `concurrency` (and `limit`, the former spelling of `max_leases`), `quota` and `period`
//! (with `timezone` and `anchor`) for a quota, read and written through this form so that every
//! layer below reads the one shape `Limit` keeps (a concurrency limit's two numbers in its
//! `rate`, a quota's count in its `rate` and its calendar in its `period`).
//!
//! Invariant: a limit converts to this form and back unchanged; a file form that mixes the two
//! shapes, or lacks the numbers its algorithm needs, is refused naming the field.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{
    AddressGroup, Algorithm, Batches, By, Condition, Limit, ModelError, Notify, Over, Override,
    Penalty, Period, PeriodUnit, Rate, serde_text,
};

/// One limit of a rule, as a rule file writes it: `rate` for the rate algorithms,
/// `max_leases` and `lease` for `concurrency`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(title = "Limit"))]
#[serde(deny_unknown_fields)]
pub(super) struct LimitFields {
    /// A stable name for the limit, used in store keys instead of the id derived from `by`,
    /// algorithm and window (1 to 64 characters of a-z, A-Z, 0-9, _ and -). Naming a limit keeps
    /// its counters when its window or algorithm changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = &"per_user"))]
    name: Option<String>,
    /// The attributes counted per identity, each `name` or alternatives `a|b|c`; empty for one
    /// counter shared by every request.
    #[serde(default)]
    #[cfg_attr(feature = "schema", schemars(example = &["member|ip"]))]
    by: Vec<By>,
    /// Units admitted per window (every algorithm but `concurrency`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    rate: Option<Rate>,
    /// How the limit counts (`gcra` unless written; a quota counts in `fixed_window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "gcra")))]
    algorithm: Option<Algorithm>,
    /// Quotas: units admitted per calendar `period` per identity (instead of a `rate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = 10000))]
    quota: Option<u64>,
    /// Quotas: the calendar period the quota is per, `day`, `week` (from Monday), `month` (from
    /// the `anchor` day) or `year`, each from local midnight in `timezone`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    period: Option<PeriodUnit>,
    /// Quotas: the IANA time zone the period's days begin in (`Europe/Berlin`); a day is 23 or
    /// 25 hours across a daylight-saving change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "UTC")))]
    #[cfg_attr(feature = "schema", schemars(example = &"Europe/Berlin"))]
    timezone: Option<String>,
    /// Quotas: past the quota, `deny` (the default) or `allow`: admit, count, and mark each such
    /// decision `over_quota` (in the JSON, the `Sluice-Over-Quota` header and a metric), so that
    /// the overage can be billed.
    #[serde(default, skip_serializing_if = "is_deny")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = "deny")))]
    over: Over,
    /// Quotas: send one event per identity, threshold and period when a decision's count first
    /// reaches a share of the quota: `{ at: [0.8, 1.0], webhook: URL }` (CloudEvents JSON).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    notify: Option<Notify>,
    /// Monthly quotas: the day each period begins (1 to 31); past a month's end, its last day.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = 1)))]
    #[cfg_attr(feature = "schema", schemars(example = 15))]
    anchor: Option<u8>,
    /// Concurrency limits: how many leases one identity may hold at once (1 to 100000).
    // `limit` was this key's first spelling; "limit" now names only the `Limit` itself.
    #[serde(default, alias = "limit", skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = 3))]
    max_leases: Option<u64>,
    /// Concurrency limits: how long a lease lasts unless released or renewed.
    #[serde(
        default,
        with = "serde_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(with = "Option<super::DurationText>"))]
    lease: Option<Duration>,
    /// `token_bucket`, `gcra` and `leaky_bucket`: the most units admitted at once (the bucket's
    /// size, the queue's length); the rate's count when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = 20))]
    burst: Option<u64>,
    /// Once the limit denies an identity, deny it outright for this long (a lock-out), without
    /// counting; admins can lift it (`DELETE /v1/blocks`).
    #[serde(
        default,
        with = "serde_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(with = "Option<super::DurationText>"))]
    block: Option<Duration>,
    /// Escalation for identities denied again and again: a warning on their decisions, then a
    /// ban.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    penalty: Option<Penalty>,
    /// Count denied requests against the limit too, so a client that keeps trying stays
    /// locked out (`sliding_log`, `sliding_window` and `fixed_window` only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    count_denied: bool,
    /// Shadow mode for this limit alone: counted and reported (`shadow_denied`), never denying.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    shadow: bool,
    /// Whether identities may be given their own numbers at run time (`PUT /v1/limits`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    settable: bool,
    /// Hot keys: take units from the store in batches and spend them in this process
    /// (`token_bucket`, `gcra` and `fixed_window`; a rule's only limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    batch: Option<Batches>,
    /// The limit applies only to requests for which this holds; others are not counted by it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    when: Option<Condition>,
    /// Other outcomes for some requests, tried in order; the first whose `when` holds decides.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = [])))]
    overrides: Vec<Override>,
    /// Address-valued attributes of `by` counted by network: attribute → prefix lengths. `ip`
    /// is counted by address for IPv4 and by /64 for IPv6 unless named here.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = {})))]
    group: BTreeMap<String, AddressGroup>,
}

impl TryFrom<LimitFields> for Limit {
    type Error = ModelError;
    fn try_from(f: LimitFields) -> Result<Limit, ModelError> {
        let period = f.period()?;
        let algorithm = match (&period, f.algorithm) {
            (Some(_), None) => Algorithm::FixedWindow,
            (_, algorithm) => algorithm.unwrap_or_default(),
        };
        let rate = if let Some(period) = &period {
            if f.rate.is_some() {
                return Err(ModelError::new(
                    "rate",
                    "a quota counts per period: write `quota: N` and `period`, not a rate",
                ));
            }
            let count = f
                .quota
                .ok_or_else(|| ModelError::new("quota", "missing: write e.g. `quota: 10000`"))?;
            Rate::new(count, period.longest())
                .map_err(|e| ModelError::new("quota", e.message.replace("the count", "quota")))?
        } else if algorithm.holds_leases() {
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
                        "`max_leases` and `lease` belong to concurrency limits; {algorithm} takes a `rate`"
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
            period,
            over: f.over,
            notify: f.notify,
            algorithm,
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

fn is_deny(over: &Over) -> bool {
    *over == Over::Deny
}

impl LimitFields {
    /// The quota's period from `period`, `timezone` and `anchor`; none without a `period`.
    fn period(&self) -> Result<Option<Period>, ModelError> {
        let Some(unit) = self.period else {
            for (field, written) in [
                ("quota", self.quota.is_some()),
                ("timezone", self.timezone.is_some()),
                ("anchor", self.anchor.is_some()),
            ] {
                if written {
                    return Err(ModelError::new(
                        field,
                        "belongs to a quota: write `period: day | week | month | year` too",
                    ));
                }
            }
            return Ok(None);
        };
        let mut period = Period::new(unit);
        if let Some(zone) = &self.timezone {
            period = period
                .in_zone(zone)
                .map_err(|e| ModelError::new("timezone", e.to_string()))?;
        }
        if let Some(anchor) = self.anchor {
            period = period
                .anchored(anchor)
                .map_err(|e| ModelError::new("anchor", e.to_string()))?;
        }
        Ok(Some(period))
    }
}

impl From<Limit> for LimitFields {
    fn from(l: Limit) -> LimitFields {
        let leases = l.algorithm.holds_leases();
        let quota = l.period.is_some();
        LimitFields {
            name: l.name,
            by: l.by,
            rate: (!leases && !quota).then_some(l.rate),
            algorithm: (!quota).then_some(l.algorithm),
            quota: quota.then_some(l.rate.count()),
            period: l.period.as_ref().map(Period::unit),
            timezone: l
                .period
                .as_ref()
                .filter(|p| p.zone() != "UTC")
                .map(|p| p.zone().to_string()),
            anchor: l
                .period
                .as_ref()
                .filter(|p| p.anchor() != 1)
                .map(Period::anchor),
            over: l.over,
            notify: l.notify,
            max_leases: leases.then_some(l.rate.count()),
            lease: leases.then_some(l.rate.window()),
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
