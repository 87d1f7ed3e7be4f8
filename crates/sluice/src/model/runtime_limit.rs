//! `RuntimeLimit`: an identity's own numbers for one limit, set while the service runs ("customer
//! 42: 5000/1m") on a limit written `settable: true`.
//!
//! Invariants: a run-time limit is checked exactly as the same numbers written in the rule file
//! would be ([`Limit::validate`]), against the limit it is set on; it replaces only the count and
//! the capacity (burst, or max_leases), so its window must be the limit's — the identity's counter
//! carries over, as it does when a rule file changes a count. A burst not given is the new count,
//! as in a rule file.

use serde::{Deserialize, Serialize};

use super::{Limit, ModelError, Rate};
use crate::algorithm::RuntimeNumbers;

/// An identity's own numbers for a settable limit: `{"rate": "5000/1m", "burst": 6000}`, or for a
/// concurrency limit `{"max_leases": 10}`.
///
/// ```
/// use sluice::model::{Algorithm, Limit, RuntimeLimit};
/// let limit = Limit::new(&["customer"], "100/1m".parse().unwrap(), Algorithm::Gcra).settable();
/// let set = RuntimeLimit::rate("5000/1m".parse().unwrap());
/// assert_eq!(set.numbers(&limit).unwrap().capacity, 5000);
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
            effective.rate.count = max_leases;
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
                        limit.rate.count,
                        super::format_duration(limit.rate.window)
                    ),
                ));
            };
            if rate.window != limit.rate.window {
                let window = super::format_duration(limit.rate.window);
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
        Ok(RuntimeNumbers {
            count: effective.rate.count,
            capacity: effective.capacity(),
        })
    }

    /// The run-time limit that sets `numbers` on `limit`, as listings show it.
    pub fn of(limit: &Limit, numbers: RuntimeNumbers) -> RuntimeLimit {
        if limit.algorithm.holds_leases() {
            return RuntimeLimit::max_leases(numbers.count);
        }
        RuntimeLimit {
            rate: Some(Rate {
                count: numbers.count,
                window: limit.rate.window,
            }),
            burst: (numbers.capacity != numbers.count).then_some(numbers.capacity),
            max_leases: None,
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
            max_leases: None,
        };
        let n = set("5000/1m", Some(6000)).numbers(&gcra()).unwrap();
        assert_eq!((n.count, n.capacity), (5000, 6000));
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
        assert_eq!((n.count, n.capacity), (10, 10));
        assert_eq!(RuntimeLimit::of(&limit, n), RuntimeLimit::max_leases(10));
        let too_many = RuntimeLimit::max_leases(super::super::MAX_LEASES + 1);
        assert_eq!(too_many.numbers(&limit).unwrap_err().field, "max_leases");
        let rate = RuntimeLimit::rate("5/30s".parse().unwrap());
        assert!(rate.numbers(&limit).is_err());
    }
}
