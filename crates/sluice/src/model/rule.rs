//! `Rule` and `Limit`: what to count, per which identity, with which algorithm.
//!
//! Invariants kept by [`Rule::validate`]: at least one limit; limit ids unique within a rule;
//! attribute names are `[a-z0-9_]` (they become part of store keys); `burst`, `block` and
//! `penalty` values are positive and consistent (`warn_after <= ban_after`); `count_denied` only on
//! the counting algorithms, where "count a denial" has a meaning.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Algorithm, FailPolicy, ModelError, Penalty, Rate, format_duration, serde_text};

/// One dimension of a limit's identity: the first of the alternatives the request carries.
///
/// Written `member|session|ip` in config: a logged-in user is counted by member, a guest by
/// session, an anonymous caller by IP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct By {
    /// Attribute names, in order of preference.
    pub alternatives: Vec<String>,
}

impl By {
    /// `a|b|c` split without checking the names; [`Limit::validate`] checks them.
    fn unchecked(text: &str) -> By {
        By {
            alternatives: text.split('|').map(|s| s.trim().to_string()).collect(),
        }
    }

    /// Parses `a|b|c`, checking each attribute name.
    pub fn parse(text: &str) -> Result<By, ModelError> {
        let by = By::unchecked(text);
        for name in &by.alternatives {
            if name.is_empty()
                || name.len() > 64
                || !name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
            {
                return Err(ModelError::new(
                    "by",
                    format!("`{text}`: attribute names are 1 to 64 characters of a-z, 0-9 and _"),
                ));
            }
        }
        Ok(by)
    }
}

impl TryFrom<String> for By {
    type Error = ModelError;
    fn try_from(text: String) -> Result<By, ModelError> {
        By::parse(&text)
    }
}

impl From<By> for String {
    fn from(by: By) -> String {
        by.alternatives.join("|")
    }
}

/// One limit of a rule: a rate over an identity, with an algorithm and optional extras.
///
/// ```
/// use sluice::model::{Algorithm, Limit};
/// let limit = Limit::new(&["ip"], "5/1m".parse().unwrap(), Algorithm::SlidingLog);
/// assert_eq!(limit.id(), "ip-sliding_log-1m");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Limit {
    /// Optional stable name; it replaces the derived id in store keys.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Identity dimensions; empty for one global counter.
    #[serde(default)]
    pub by: Vec<By>,
    /// Units per window.
    pub rate: Rate,
    /// The algorithm.
    #[serde(default)]
    pub algorithm: Algorithm,
    /// Capacity for token bucket, GCRA and leaky bucket; defaults to the rate's count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u64>,
    /// Block the identity this long once the limit denies.
    #[serde(
        default,
        with = "serde_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    pub block: Option<Duration>,
    /// Escalating punishment for repeated denials.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub penalty: Option<Penalty>,
    /// Count denied requests too (counting algorithms only).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub count_denied: bool,
    /// Evaluate and report, but never deny.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
}

impl Limit {
    /// A limit with no extras, for rules written in code.
    ///
    /// Attribute names are checked with the rest of the rule, when the limiter is built
    /// ([`Rule::validate`]): a bad name is an error there, never a panic here.
    pub fn new(by: &[&str], rate: Rate, algorithm: Algorithm) -> Limit {
        Limit {
            name: None,
            by: by.iter().map(|b| By::unchecked(b)).collect(),
            rate,
            algorithm,
            burst: None,
            block: None,
            penalty: None,
            count_denied: false,
            shadow: false,
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

    /// Sets `penalty`.
    pub fn with_penalty(mut self, penalty: Penalty) -> Limit {
        self.penalty = Some(penalty);
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
        format!(
            "{by}-{}-{}",
            self.algorithm.name(),
            format_duration(self.rate.window)
        )
    }

    /// The most units one request may ever be admitted for.
    pub fn capacity(&self) -> u64 {
        self.burst.unwrap_or(self.rate.count)
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
        Rate::new(self.rate.count, self.rate.window)?;
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
        let interval = self.rate.window_us().div_ceil(self.rate.count);
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

/// A named action to protect, with one or more limits that must all allow a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The limits; the request is allowed only if every one allows it.
    pub limits: Vec<Limit>,
    /// Off switch: a disabled rule allows everything without touching the store.
    #[serde(default = "default_true", skip_serializing_if = "Clone::clone")]
    pub enabled: bool,
    /// Evaluate, record and report, but always allow.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub shadow: bool,
    /// Fail policy for this rule; the limiter's default when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fail: Option<FailPolicy>,
    /// Message for denied requests (middleware and service responses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

fn default_true() -> bool {
    true
}

impl Rule {
    /// A rule with these limits and default settings.
    pub fn new(limits: Vec<Limit>) -> Rule {
        Rule {
            limits,
            enabled: true,
            shadow: false,
            fail: None,
            message: None,
        }
    }

    /// Checks every limit, and that limit ids are unique.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.limits.is_empty() {
            return Err(ModelError::new("limits", "a rule needs at least one limit"));
        }
        for (i, limit) in self.limits.iter().enumerate() {
            limit
                .validate()
                .map_err(|e| e.within(&format!("limits[{i}]")))?;
            let id = limit.id();
            if self.limits[..i].iter().any(|other| other.id() == id) {
                return Err(ModelError::new(
                    format!("limits[{i}]"),
                    format!(
                        "has the same id `{id}` as an earlier limit; give one of them a `name`"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Checks a rule name: it becomes part of store keys and URLs.
pub fn validate_rule_name(name: &str) -> Result<(), ModelError> {
    if name.is_empty()
        || name.len() > 128
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.')
    {
        // A refused name can be huge or hold control characters: it is not echoed whole.
        let shown = if name.len() > 128 {
            format!("a name of {} bytes", name.len())
        } else {
            format!("{name:?}")
        };
        return Err(ModelError::new(
            "rule",
            format!("{shown}: rule names are 1 to 128 characters of a-z, A-Z, 0-9, _, - and ."),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limit() -> Limit {
        Limit::new(&["ip"], "5/1m".parse().unwrap(), Algorithm::SlidingLog)
    }

    #[test]
    fn id_ignores_the_count_but_not_the_window() {
        let mut other = limit();
        other.rate = "50/1m".parse().unwrap();
        assert_eq!(limit().id(), other.id());
        other.rate = "5/2m".parse().unwrap();
        assert_ne!(limit().id(), other.id());
    }

    #[test]
    fn validation_names_the_field() {
        let mut l = limit();
        l.burst = Some(3);
        assert_eq!(l.validate().unwrap_err().field, "burst");
        let mut l = limit().with_penalty(Penalty {
            warn_after: 6,
            ban_after: 5,
            ban: Duration::from_secs(60),
            memory: Duration::from_secs(60),
        });
        assert_eq!(l.validate().unwrap_err().field, "penalty.warn_after");
        l.penalty = None;
        l.algorithm = Algorithm::Gcra;
        l.count_denied = true;
        assert_eq!(l.validate().unwrap_err().field, "count_denied");
        let rule = Rule::new(vec![limit(), limit()]);
        assert_eq!(rule.validate().unwrap_err().field, "limits[1]");
        let rule = Rule::new(vec![]);
        assert_eq!(rule.validate().unwrap_err().field, "limits");
        assert!(By::parse("Member").is_err());
        assert!(By::parse("member|").is_err());
        assert!(validate_rule_name("a:b").is_err());
        let bad = Limit::new(&["Member"], "5/1m".parse().unwrap(), Algorithm::Gcra);
        assert_eq!(bad.validate().unwrap_err().field, "by");
    }
}
