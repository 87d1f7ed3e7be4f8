//! `RuntimeLimit`: an identity's own numbers for one limit, set while the service runs ("customer
//! 42: 5000/1m") on a limit written `settable: true`.
//!
//! Invariants: a run-time limit is checked exactly as the same numbers written in the rule file
//! would be ([`Limit::validate`]), against the limit it is set on; it replaces only the count and
//! the capacity (burst, or max_leases), so its window must be the limit's — the identity's counter
//! carries over, as it does when a rule file changes a count. A burst not given is the new count,
//! as in a rule file.
//!
//! On a quota the count is written `quota`, and a monthly quota also takes the identity's own
//! billing day, `anchor` (1–31), each without the other: `{"anchor": 15}` alone moves the
//! identity's month and keeps following the rule file's quota (the stored entry leaves the count
//! to the limit), `{"quota": 50000}` alone keeps the rule's billing day.

use serde::{Deserialize, Serialize};

use super::{Limit, ModelError, Period, PeriodUnit, Rate};
use crate::algorithm::RuntimeNumbers;

/// An identity's own numbers for a settable limit: `{"rate": "5000/1m", "burst": 6000}`, for a
/// concurrency limit `{"max_leases": 10}`, for a quota `{"quota": 50000}` and, on a monthly
/// one, `{"anchor": 15}` (the billing day), either or both.
///
/// ```
/// use sluice::model::{Algorithm, Limit, RuntimeLimit};
/// let limit = Limit::new(&["customer"], "100/1m".parse().unwrap(), Algorithm::Gcra).settable();
/// let set = RuntimeLimit::rate("5000/1m".parse().unwrap());
/// assert_eq!(set.numbers(&limit).unwrap().capacity, Some(5000));
/// assert!(RuntimeLimit::rate("5000/1h".parse().unwrap()).numbers(&limit).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RuntimeLimit {
    /// Units per window; the window must be the limit's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// Capacity of a bucket algorithm (token bucket, GCRA, leaky bucket); defaults to the count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// For a concurrency limit: leases held at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_leases: Option<u64>,
    /// For a quota, instead of `rate`: units per period.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<u64>,
    /// For a monthly quota: the day each of this identity's months begins on (1–31; past a
    /// month's end, its last day).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<u8>,
}

impl RuntimeLimit {
    /// A rate, with the burst defaulting to its count.
    pub fn rate(rate: Rate) -> RuntimeLimit {
        RuntimeLimit {
            rate: Some(rate),
            ..RuntimeLimit::default()
        }
    }

    /// Leases held at once, for a concurrency limit.
    pub fn max_leases(max_leases: u64) -> RuntimeLimit {
        RuntimeLimit {
            max_leases: Some(max_leases),
            ..RuntimeLimit::default()
        }
    }

    /// The numbers this sets on `limit`, checked as a rule file's would be; an error names the
    /// field and says what would be right.
    pub fn numbers(&self, limit: &Limit) -> Result<RuntimeNumbers, ModelError> {
        if !limit.settable {
            return Err(ModelError::new(
                "limit",
                format!(
                    "limit `{}` takes no run-time limits: write `settable: true` on it in the \
                     rule file",
                    limit.id()
                ),
            ));
        }
        if let Some(period) = &limit.period {
            return self.quota_numbers(limit, period);
        }
        for (field, set) in [
            ("quota", self.quota.is_some()),
            ("anchor", self.anchor.is_some()),
        ] {
            if set {
                return Err(ModelError::new(
                    field,
                    format!(
                        "`{field}` belongs to a settable quota{}; limit `{}` takes a `{}`",
                        if field == "anchor" {
                            " by the month"
                        } else {
                            ""
                        },
                        limit.id(),
                        if limit.algorithm.holds_leases() {
                            "max_leases"
                        } else {
                            "rate"
                        }
                    ),
                ));
            }
        }
        let mut effective = limit.clone();
        if limit.algorithm.holds_leases() {
            let Some(max_leases) = self.max_leases else {
                return Err(ModelError::new(
                    "max_leases",
                    "missing: a concurrency limit takes `max_leases` (held at once)",
                ));
            };
            if self.rate.is_some() || self.burst.is_some() {
                return Err(ModelError::new(
                    if self.rate.is_some() { "rate" } else { "burst" },
                    "a concurrency limit takes only `max_leases`",
                ));
            }
            effective.rate = Rate::new(max_leases, limit.rate.window())
                .map_err(|e| ModelError::new("max_leases", e.message))?;
        } else {
            if self.max_leases.is_some() {
                return Err(ModelError::new(
                    "max_leases",
                    format!(
                        "`max_leases` belongs to concurrency limits; {} takes a `rate`",
                        limit.algorithm
                    ),
                ));
            }
            let Some(rate) = self.rate else {
                return Err(ModelError::new(
                    "rate",
                    format!(
                        "missing: write e.g. `{}/{}`",
                        limit.rate.count(),
                        super::format_duration(limit.rate.window())
                    ),
                ));
            };
            if rate.window() != limit.rate.window() {
                let window = super::format_duration(limit.rate.window());
                return Err(ModelError::new(
                    "rate",
                    format!(
                        "`{rate}`: limit `{}` counts per {window}; give the rate per {window} \
                         (a new window would need new counters)",
                        limit.id()
                    ),
                ));
            }
            effective.rate = rate;
            effective.burst = self.burst;
        }
        effective.validate()?;
        Ok(RuntimeNumbers::counts(
            effective.rate.count(),
            effective.capacity(),
        ))
    }

    /// The numbers of a quota: its count (`quota`), its billing day (`anchor`, a month only),
    /// or both.
    fn quota_numbers(&self, limit: &Limit, period: &Period) -> Result<RuntimeNumbers, ModelError> {
        for (field, set) in [
            ("rate", self.rate.is_some()),
            ("burst", self.burst.is_some()),
            ("max_leases", self.max_leases.is_some()),
        ] {
            if set {
                return Err(ModelError::new(
                    field,
                    format!(
                        "limit `{}` is a quota: it takes `quota` (units per {}){}",
                        limit.id(),
                        period.unit(),
                        if period.unit() == PeriodUnit::Month {
                            " and `anchor` (the billing day)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
        }
        if let Some(anchor) = self.anchor {
            if period.unit() != PeriodUnit::Month {
                return Err(ModelError::new(
                    "anchor",
                    format!(
                        "limit `{}` counts per {}: a billing day belongs to a quota by the month",
                        limit.id(),
                        period.unit()
                    ),
                ));
            }
            if !(1..=31).contains(&anchor) {
                return Err(ModelError::new(
                    "anchor",
                    format!("{anchor} is not a day of the month (1 to 31)"),
                ));
            }
        }
        let Some(quota) = self.quota else {
            if self.anchor.is_none() {
                return Err(ModelError::new(
                    "quota",
                    format!(
                        "missing: write e.g. `quota: {}`{}",
                        limit.rate.count(),
                        if period.unit() == PeriodUnit::Month {
                            ", or the billing day alone, `anchor: 15`"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            return Ok(RuntimeNumbers {
                anchor: self.anchor,
                ..RuntimeNumbers::default()
            });
        };
        let mut effective = limit.clone();
        // The count is the rate's in the rule, and `quota` here.
        effective.rate = Rate::new(quota, limit.rate.window())
            .map_err(|e| ModelError::new("quota", e.message))?;
        effective.validate().map_err(|e| match e.field.as_str() {
            "rate" => ModelError::new("quota", e.message),
            _ => e,
        })?;
        Ok(RuntimeNumbers {
            anchor: self.anchor,
            ..RuntimeNumbers::counts(quota, effective.capacity())
        })
    }

    /// The run-time limit that sets `numbers` on `limit`, as listings show it.
    pub fn of(limit: &Limit, numbers: RuntimeNumbers) -> RuntimeLimit {
        if limit.period.is_some() {
            return RuntimeLimit {
                quota: numbers.count,
                anchor: numbers.anchor,
                ..RuntimeLimit::default()
            };
        }
        let count = numbers.count.unwrap_or(limit.rate.count());
        let capacity = numbers.capacity.unwrap_or(count);
        if limit.algorithm.holds_leases() {
            return RuntimeLimit::max_leases(count);
        }
        RuntimeLimit {
            // Numbers a store holds were valid when set; a count no rate can hold shows none.
            rate: Rate::new(count, limit.rate.window()).ok(),
            burst: (capacity != count).then_some(capacity),
            ..RuntimeLimit::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::model::Algorithm;

    fn gcra() -> Limit {
        Limit::new(&["customer"], "100/1m".parse().unwrap(), Algorithm::Gcra).settable()
    }

    #[test]
    fn numbers_are_checked_as_a_rule_file_checks_them() {
        let set = |rate: &str, burst: Option<u64>| RuntimeLimit {
            rate: Some(rate.parse().unwrap()),
            burst,
            ..RuntimeLimit::default()
        };
        let n = set("5000/1m", Some(6000)).numbers(&gcra()).unwrap();
        assert_eq!(n, RuntimeNumbers::counts(5000, 6000));
        assert_eq!(RuntimeLimit::of(&gcra(), n), set("5000/1m", Some(6000)));
        let error = set("5000/1h", None).numbers(&gcra()).unwrap_err();
        assert!(error.message.contains("per 1m"), "{error}");
        assert_eq!(
            set("5/1m", Some(0)).numbers(&gcra()).unwrap_err().field,
            "burst"
        );
        let sliding = Limit::new(&["c"], "5/1m".parse().unwrap(), Algorithm::SlidingLog).settable();
        assert_eq!(
            set("5/1m", Some(9)).numbers(&sliding).unwrap_err().field,
            "burst"
        );
        assert_eq!(
            RuntimeLimit::default().numbers(&gcra()).unwrap_err().field,
            "rate"
        );
        let fixed = Limit::new(&["c"], "5/1m".parse().unwrap(), Algorithm::Gcra);
        assert_eq!(
            set("5/1m", None).numbers(&fixed).unwrap_err().field,
            "limit"
        );
    }

    #[test]
    fn a_concurrency_limit_takes_max_leases_only() {
        let limit = Limit::concurrency(&["tenant"], 3, Duration::from_secs(30)).settable();
        let n = RuntimeLimit::max_leases(10).numbers(&limit).unwrap();
        assert_eq!(n, RuntimeNumbers::counts(10, 10));
        assert_eq!(RuntimeLimit::of(&limit, n), RuntimeLimit::max_leases(10));
        let too_many = RuntimeLimit::max_leases(super::super::limit::MAX_LEASES + 1);
        assert_eq!(too_many.numbers(&limit).unwrap_err().field, "max_leases");
        let rate = RuntimeLimit::rate("5/30s".parse().unwrap());
        assert!(rate.numbers(&limit).is_err());
        let anchor = RuntimeLimit {
            anchor: Some(15),
            ..RuntimeLimit::max_leases(10)
        };
        assert_eq!(anchor.numbers(&limit).unwrap_err().field, "anchor");
    }

    fn monthly() -> Limit {
        let period = Period::new(PeriodUnit::Month).anchored(1).unwrap();
        Limit::quota(&["tenant"], 10_000, period).settable()
    }

    fn set(quota: Option<u64>, anchor: Option<u8>) -> RuntimeLimit {
        RuntimeLimit {
            quota,
            anchor,
            ..RuntimeLimit::default()
        }
    }

    #[test]
    fn a_monthly_quota_takes_a_billing_day_alone_or_with_its_count() {
        let limit = monthly();
        let day = set(None, Some(15)).numbers(&limit).unwrap();
        // The count stays the rule file's: the entry says nothing of it.
        assert_eq!(
            (day.count, day.capacity, day.anchor),
            (None, None, Some(15))
        );
        assert_eq!(RuntimeLimit::of(&limit, day), set(None, Some(15)));
        let both = set(Some(50_000), Some(31)).numbers(&limit).unwrap();
        assert_eq!(
            (both.count, both.capacity, both.anchor),
            (Some(50_000), Some(50_000), Some(31))
        );
        assert_eq!(RuntimeLimit::of(&limit, both), set(Some(50_000), Some(31)));
        let count = set(Some(7), None).numbers(&limit).unwrap();
        assert_eq!(count, RuntimeNumbers::counts(7, 7));
    }

    #[test]
    fn a_billing_day_is_refused_where_it_means_nothing() {
        let field = |limit: &Limit, set: RuntimeLimit| set.numbers(limit).unwrap_err();
        for anchor in [0, 32] {
            let e = field(&monthly(), set(None, Some(anchor)));
            assert_eq!(e.field, "anchor");
            assert!(e.message.contains("1 to 31"), "{e}");
        }
        let daily = Limit::quota(&["t"], 5, Period::new(PeriodUnit::Day)).settable();
        let e = field(&daily, set(None, Some(15)));
        assert_eq!(e.field, "anchor");
        assert!(e.message.contains("by the month"), "{e}");
        let e = field(&gcra(), set(None, Some(15)));
        assert_eq!(e.field, "anchor");
        assert!(e.message.contains("takes a `rate`"), "{e}");
        assert_eq!(field(&gcra(), set(Some(5), None)).field, "quota");
        assert_eq!(field(&monthly(), set(None, None)).field, "quota");
        let rate = RuntimeLimit::rate("5/1m".parse().unwrap());
        assert_eq!(field(&monthly(), rate).field, "rate");
        let unsettable = Limit::quota(&["t"], 5, Period::new(PeriodUnit::Month));
        assert_eq!(field(&unsettable, set(None, Some(15))).field, "limit");
        assert_eq!(field(&monthly(), set(Some(0), Some(2))).field, "quota");
    }
}
