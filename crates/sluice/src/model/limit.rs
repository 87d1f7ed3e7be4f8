//! `Limit`: one limit of a rule — a rate (or, for a concurrency limit, a number of leases) over
//! an identity, with an algorithm and optional block, penalty and burst.
//!
//! Invariants kept by [`Limit::validate`]: attribute names are `[a-z0-9_]` (they become part of
//! store keys); `burst`, `block` and `penalty` values are positive and consistent
//! (`warn_after <= ban_after`); `count_denied` only on the counting algorithms; the products the
//! algorithms form stay below [`MAX_EXACT`]. In rule files a limit is read through its file form
//! (`limit_fields`: `rate`, or `max_leases` and `lease` for a concurrency limit, or `quota` and
//! `period` for a quota; `limit`, the former spelling of `max_leases`, is still read). A quota
//! (a `period`) is a fixed window whose windows are calendar periods, and is not batched.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::limit_fields::LimitFields;
use super::{
    AddressGroup, Algorithm, Batches, By, Condition, ModelError, Notify, Over, Override, Penalty,
    Period, Rate, batch, format_duration,
};

/// One limit of a rule: a rate over an identity, with an algorithm and optional extras.
///
/// ```
/// use sluice::model::{Algorithm, Limit};
/// let limit = Limit::new(&["ip"], "5/1m".parse().unwrap(), Algorithm::SlidingLog);
/// assert_eq!(limit.id(), "ip-sliding_log-1m");
/// ```
///
/// A concurrency limit holds leases instead of counting a rate: in rule files it is written
/// `{ by: [tenant], algorithm: concurrency, max_leases: 3, lease: 30s }` (at most 3 leases held at
/// once per tenant, each expiring 30 s after it was taken or last renewed), and it keeps these
/// two numbers in `rate` (`count` = `max_leases`, `window` = `lease`), so every layer below reads one
/// shape:
/// ```
/// use std::time::Duration;
/// use sluice::model::Limit;
/// let limit = Limit::concurrency(&["tenant"], 3, Duration::from_secs(30));
/// assert_eq!((limit.rate.count(), limit.rate.window().as_secs()), (3, 30));
/// assert_eq!(limit.id(), "tenant-concurrency-30s");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "LimitFields", into = "LimitFields")]
pub struct Limit {
    /// Optional stable name; it replaces the derived id in store keys.
    pub name: Option<String>,
    /// Identity dimensions; empty for one global counter.
    pub by: Vec<By>,
    /// Units per window; for a concurrency limit, `max_leases` held at once, each for `lease`;
    /// for a quota, the quota and its [`Period::longest`].
    pub rate: Rate,
    /// A quota's calendar period: the count is per day, week, month or year in a zone, not per
    /// window (the algorithm is then `fixed_window`).
    pub period: Option<Period>,
    /// What a quota does past itself: refuse, or admit and mark the decision `over_quota`.
    pub over: Over,
    /// A quota's notice before the wall: the shares of it that send an event when reached.
    pub notify: Option<Notify>,
    /// The algorithm.
    pub algorithm: Algorithm,
    /// Capacity for token bucket, GCRA and leaky bucket; defaults to the rate's count.
    pub burst: Option<u64>,
    /// Block the identity this long once the limit denies.
    pub block: Option<Duration>,
    /// Escalating punishment for repeated denials.
    pub penalty: Option<Penalty>,
    /// Count denied requests too (counting algorithms only).
    pub count_denied: bool,
    /// Evaluate and report, but never deny.
    pub shadow: bool,
    /// Take units from the store in batches and spend them in this process (hot keys).
    pub batch: Option<Batches>,
    /// Whether identities may be given their own numbers at run time (see
    /// [`RuntimeLimit`](super::RuntimeLimit)); off, a decision never looks for them.
    pub settable: bool,
    /// The limit applies only to requests for which this holds.
    pub when: Option<Condition>,
    /// Other outcomes for the requests a condition picks out; the first that holds decides.
    pub overrides: Vec<Override>,
    /// Address-valued attributes of `by` counted by network; `ip` is grouped by
    /// [`AddressGroup::DEFAULT`] unless named here.
    pub group: BTreeMap<String, AddressGroup>,
}

impl Limit {
    /// A limit with no extras, for rules written in code.
    ///
    /// Attribute names are checked with the rest of the rule, when the limiter is built
    /// ([`Rule::validate`](crate::Rule::validate)): a bad name is an error there, never a panic here.
    pub fn new(by: &[&str], rate: Rate, algorithm: Algorithm) -> Limit {
        Limit {
            name: None,
            by: by.iter().map(|b| By::unchecked(b)).collect(),
            rate,
            period: None,
            over: Over::Deny,
            notify: None,
            algorithm,
            burst: None,
            block: None,
            penalty: None,
            count_denied: false,
            shadow: false,
            batch: None,
            settable: false,
            when: None,
            overrides: Vec::new(),
            group: BTreeMap::new(),
        }
    }

    /// A concurrency limit: at most `max_leases` held at once per identity, each lasting
    /// `lease` unless released or renewed. An out-of-range number is an error at `build()`.
    pub fn concurrency(by: &[&str], max_leases: u64, lease: Duration) -> Limit {
        Limit::new(
            by,
            Rate::unvalidated(max_leases, lease),
            Algorithm::Concurrency,
        )
    }

    /// A quota: `quota` units per calendar `period` per identity (a fixed window whose windows
    /// are the period's days, weeks, months or years).
    pub fn quota(by: &[&str], quota: u64, period: Period) -> Limit {
        let rate = Rate::unvalidated(quota, period.longest());
        Limit {
            period: Some(period),
            ..Limit::new(by, rate, Algorithm::FixedWindow)
        }
    }

    /// Sets `burst`.
    pub fn with_burst(mut self, burst: u64) -> Limit {
        self.burst = Some(burst);
        self
    }

    /// Sets `block`.
    pub fn with_block(mut self, block: Duration) -> Limit {
        self.block = Some(block);
        self
    }

    /// Lets identities be given their own numbers at run time (`settable: true`).
    pub fn settable(mut self) -> Limit {
        self.settable = true;
        self
    }

    /// Sets `penalty`.
    pub fn with_penalty(mut self, penalty: Penalty) -> Limit {
        self.penalty = Some(penalty);
        self
    }

    /// Sets `batch`: units taken from the store in batches (see [`Batches`]).
    pub fn with_batches(mut self, batch: Batches) -> Limit {
        self.batch = Some(batch);
        self
    }

    /// The limit's identity in store keys: its `name`, else `by`, algorithm and window.
    ///
    /// The count is deliberately absent, so changing `100/1m` to `200/1m` keeps live counters.
    pub fn id(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        let by = if self.by.is_empty() {
            "global".to_string()
        } else {
            self.by
                .iter()
                .map(|b| b.alternatives.join("|"))
                .collect::<Vec<_>>()
                .join(".")
        };
        if let Some(period) = &self.period {
            return format!("{by}-quota-{}", period.unit());
        }
        format!(
            "{by}-{}-{}",
            self.algorithm.name(),
            format_duration(self.rate.window())
        )
    }

    /// The most units one request may ever be admitted for.
    pub fn capacity(&self) -> u64 {
        self.burst.unwrap_or(self.rate.count())
    }

    /// Checks the invariants listed in the module docs.
    pub fn validate(&self) -> Result<(), ModelError> {
        if let Some(name) = &self.name
            && (name.is_empty()
                || name.len() > 64
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'))
        {
            return Err(ModelError::new(
                "name",
                format!("`{name}`: 1 to 64 characters of a-z, A-Z, 0-9, _ and -"),
            ));
        }
        Rate::new(self.rate.count(), self.rate.window())?;
        if self.over == Over::Allow && self.period.is_none() {
            return Err(ModelError::new(
                "over",
                "`over: allow` belongs to a quota (a limit with a `period`)",
            ));
        }
        if let Some(notify) = &self.notify {
            if self.period.is_none() {
                return Err(ModelError::new(
                    "notify",
                    "`notify` belongs to a quota (a limit with a `period`)",
                ));
            }
            notify.validate()?;
        }
        if self.period.is_some() {
            if self.algorithm != Algorithm::FixedWindow {
                return Err(ModelError::new(
                    "period",
                    format!(
                        "a quota counts in fixed windows, not with {}",
                        self.algorithm
                    ),
                ));
            }
            if self.batch.is_some() {
                return Err(ModelError::new(
                    "batch",
                    "a quota is not taken in batches (its periods are not one length)",
                ));
            }
        }
        if self.algorithm.holds_leases() && self.rate.count() > MAX_LEASES {
            return Err(ModelError::new(
                "max_leases",
                format!(
                    "{} leases is above the maximum of {MAX_LEASES} held at once",
                    self.rate.count()
                ),
            ));
        }
        for by in &self.by {
            By::parse(&String::from(by.clone()))?;
        }
        if let Some(burst) = self.burst {
            if !self.algorithm.supports_burst() {
                return Err(ModelError::new(
                    "burst",
                    format!(
                        "{} has no burst; use it with token_bucket, gcra or leaky_bucket",
                        self.algorithm
                    ),
                ));
            }
            if burst == 0 || burst > super::MAX_COUNT {
                return Err(ModelError::new(
                    "burst",
                    format!("{burst} must be between 1 and {}", super::MAX_COUNT),
                ));
            }
        }
        // The algorithms compute `capacity × interval` (GCRA's burst offset, the buckets' time to
        // drain a full bucket) in integer µs, exactly in Rust and in the Redis scripts' Lua
        // numbers: refuse rules where it reaches 2^53 (e.g. `burst: 10000000` on `1/30d`).
        let interval = self.rate.window_us().get().div_ceil(self.rate.count());
        if self
            .capacity()
            .checked_mul(interval)
            .is_none_or(|v| v >= MAX_EXACT)
        {
            return Err(ModelError::new(
                "burst",
                format!(
                    "{} units of {} µs each (the rate's interval) reach 2^53 µs: lower the \
                     burst or shorten the window",
                    self.capacity(),
                    interval
                ),
            ));
        }
        if self.count_denied && !self.algorithm.supports_count_denied() {
            return Err(ModelError::new(
                "count_denied",
                format!(
                    "{} cannot count denials; use it with sliding_log, sliding_window or fixed_window",
                    self.algorithm
                ),
            ));
        }
        if let Some(block) = self.block {
            check_duration("block", block)?;
        }
        if let Some(batch) = &self.batch {
            batch.validate(self.algorithm, self.capacity(), self.count_denied)?;
            batch::refuse_other_numbers(&self.overrides, self.settable)?;
        }
        self.validate_choices()?;
        if let Some(p) = &self.penalty {
            if p.ban_after == 0 {
                return Err(ModelError::new("penalty.ban_after", "must be at least 1"));
            }
            if p.warn_after > p.ban_after {
                return Err(ModelError::new(
                    "penalty.warn_after",
                    format!(
                        "{} is above ban_after ({}): the warning would never show",
                        p.warn_after, p.ban_after
                    ),
                ));
            }
            check_duration("penalty.ban", p.ban)?;
            check_duration("penalty.memory", p.memory)?;
        }
        Ok(())
    }
}

/// The most leases a concurrency limit may hold at once per identity: each is kept (one entry
/// of about 60 bytes in Redis) until released or expired.
pub const MAX_LEASES: u64 = 100_000;

/// The largest integer the algorithms' products may reach: Lua numbers are exact below it.
pub const MAX_EXACT: u64 = 1 << 53;

fn check_duration(field: &str, d: Duration) -> Result<(), ModelError> {
    if d.as_millis() == 0 {
        return Err(ModelError::new(field, "must be at least 1ms"));
    }
    if d > super::MAX_WINDOW {
        return Err(ModelError::new(field, "must not exceed 366d"));
    }
    Ok(())
}
