//! `Rule` and `By`: what to count (the rule's limits, see [`Limit`]) and per which identity.
//!
//! Invariants kept by [`Rule::validate`]: at least one limit, each valid ([`Limit::validate`]);
//! limit ids unique within a rule; attribute names are `[a-z0-9_]` (they become part of store
//! keys); rule names are safe in keys too ([`validate_rule_name`]).

use serde::{Deserialize, Serialize};

use super::{Condition, FailPolicy, Limit, ModelError};

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
    pub(super) fn unchecked(text: &str) -> By {
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

/// A named action to protect, with one or more limits that must all allow a request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The limits; the request is allowed only if every one allows it.
    pub limits: Vec<Limit>,
    /// Off switch: a disabled rule allows everything without touching the store, and its
    /// counters are left as they are until it is enabled again.
    #[serde(default = "default_true", skip_serializing_if = "Clone::clone")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = true)))]
    pub enabled: bool,
    /// Shadow mode, for trying a rule on live traffic: it is evaluated, counted and reported
    /// (outcome `shadow_denied` in decisions and metrics) but always allows.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = false)))]
    pub shadow: bool,
    /// What this rule does when the store cannot answer in time (`open`, `closed` or `local`);
    /// the file's top-level `fail` when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub fail: Option<FailPolicy>,
    /// The text of a denial: the `message` of the service's 429 body and of the middleware's
    /// response; a generic message when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    #[cfg_attr(feature = "schema", schemars(example = &"too many attempts, try again later"))]
    pub message: Option<String>,
    /// The rule applies only to requests for which this holds; others are allowed, counting
    /// nothing, with the reason said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "schema", schemars(extend("default" = null)))]
    pub when: Option<Condition>,
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
            when: None,
        }
    }

    /// Sets `when`: the rule applies only to requests for which it holds.
    pub fn when(mut self, condition: Condition) -> Rule {
        self.when = Some(condition);
        self
    }

    /// Whether the rule, or a limit of it, uses a condition or overrides.
    pub fn is_conditional(&self) -> bool {
        self.when.is_some() || self.limits.iter().any(Limit::is_conditional)
    }

    /// Checks every limit, and that limit ids are unique.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.limits.is_empty() {
            return Err(ModelError::new("limits", "a rule needs at least one limit"));
        }
        if let Some(when) = &self.when {
            when.validate().map_err(|e| e.within("when"))?;
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
            // Batches decide in memory what a multi-limit rule must decide all-or-nothing in the
            // store: a batched limit is its rule's only limit.
            if limit.batch.is_some() && self.limits.len() > 1 {
                return Err(ModelError::new(
                    format!("limits[{i}].batch"),
                    "a limit with batches must be its rule's only limit; put the others in \
                     another rule and check both (check_all)",
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
    use std::time::Duration;

    use super::*;
    use crate::model::{Algorithm, Penalty};

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
