//! How a limit's numbers are chosen per request: its `when`, its `overrides` and its address
//! `group`s — the builders that set them and the checks [`Limit::validate`] makes of them.
//!
//! Invariants checked here: every condition is valid ([`Condition::validate`]); an override has
//! numbers valid for the limit's algorithm, in the limit's own window (the counter, named by the
//! limit id, carries over when a request's tier changes, and its state means the same under
//! either tier's numbers); a `deny` message is 1 to [`MAX_DENY_MESSAGE`] bytes; no override is
//! unreachable behind an earlier one; `group` names only attributes of `by`, with valid lengths.

use std::collections::BTreeMap;

use super::{
    AddressGroup, Condition, Limit, MAX_DENY_MESSAGE, ModelError, Override, OverrideOutcome, Rate,
};

impl Limit {
    /// Sets `when`: the limit applies only to requests for which it holds.
    pub fn when(mut self, condition: Condition) -> Limit {
        self.when = Some(condition);
        self
    }

    /// Appends an override (tried after those already set).
    pub fn with_override(mut self, o: Override) -> Limit {
        self.overrides.push(o);
        self
    }

    /// Groups the address-valued attribute `attribute` by `group`.
    pub fn with_group(mut self, attribute: &str, group: AddressGroup) -> Limit {
        self.group.insert(attribute.to_string(), group);
        self
    }

    /// Whether the limit uses a condition or overrides (checks of it then choose its numbers).
    pub fn is_conditional(&self) -> bool {
        self.when.is_some() || !self.overrides.is_empty()
    }

    /// The address groupings in force: `group`, plus the default one for `ip` when `by` names
    /// it and `group` does not.
    pub fn address_groups(&self) -> BTreeMap<String, AddressGroup> {
        let mut groups = self.group.clone();
        let counts_ip = self.by.iter().any(|b| {
            b.alternatives
                .iter()
                .any(|a| a == super::DEFAULT_ADDRESS_ATTRIBUTE)
        });
        if counts_ip {
            groups
                .entry(super::DEFAULT_ADDRESS_ATTRIBUTE.to_string())
                .or_insert(AddressGroup::DEFAULT);
        }
        groups
    }

    /// This limit with an override's numbers in place of its own; `None` for an override that
    /// does not replace numbers.
    pub fn overridden(&self, o: &Override) -> Option<Limit> {
        let OverrideOutcome::Numbers {
            rate,
            burst,
            max_leases,
            quota,
        } = &o.outcome
        else {
            return None;
        };
        let mut limit = self.clone();
        limit.when = None;
        limit.overrides = Vec::new();
        if let Some(rate) = rate {
            limit.rate = *rate;
        }
        // A count no rate can hold was refused when the rule was validated (`validate_override`).
        if let Some(rate) = max_leases
            .or(*quota)
            .and_then(|count| Rate::new(count, limit.rate.window()).ok())
        {
            limit.rate = rate;
        }
        if burst.is_some() {
            limit.burst = *burst;
        }
        Some(limit)
    }

    /// Checks `when`, `overrides` and `group` (see the module docs).
    pub(super) fn validate_choices(&self) -> Result<(), ModelError> {
        if let Some(when) = &self.when {
            when.validate().map_err(|e| e.within("when"))?;
        }
        for (i, o) in self.overrides.iter().enumerate() {
            let at = format!("overrides[{i}]");
            o.when
                .validate()
                .map_err(|e| e.within(&format!("{at}.when")))?;
            if let Some(j) = self.overrides[..i]
                .iter()
                .position(|earlier| o.when.implies(&earlier.when))
            {
                return Err(ModelError::new(
                    format!("{at}.when"),
                    format!(
                        "unreachable: every request it matches is matched first by \
                         overrides[{j}]; put the narrower override first"
                    ),
                ));
            }
            self.validate_outcome(o).map_err(|e| e.within(&at))?;
        }
        for (name, group) in &self.group {
            let counted = self
                .by
                .iter()
                .any(|b| b.alternatives.iter().any(|a| a == name));
            if !counted {
                return Err(ModelError::new(
                    format!("group.{name}"),
                    format!("`{name}` is not an attribute of this limit's `by`"),
                ));
            }
            group
                .validate()
                .map_err(|e| e.within(&format!("group.{name}")))?;
        }
        Ok(())
    }

    fn validate_outcome(&self, o: &Override) -> Result<(), ModelError> {
        match &o.outcome {
            OverrideOutcome::Unlimited => Ok(()),
            OverrideOutcome::Deny(message) => {
                if message.is_empty() || message.len() > MAX_DENY_MESSAGE {
                    return Err(ModelError::new(
                        "deny",
                        format!("the message is 1 to {MAX_DENY_MESSAGE} bytes"),
                    ));
                }
                Ok(())
            }
            OverrideOutcome::Numbers {
                rate,
                max_leases,
                quota,
                ..
            } => {
                let leases = self.algorithm.holds_leases();
                if self.period.is_some() && rate.is_some() {
                    return Err(ModelError::new(
                        "rate",
                        "a quota has no rate; override `quota`",
                    ));
                }
                if self.period.is_none() && quota.is_some() {
                    return Err(ModelError::new(
                        "quota",
                        "belongs to a quota's overrides (a limit with a `period`)",
                    ));
                }
                if leases && rate.is_some() {
                    return Err(ModelError::new(
                        "rate",
                        "a concurrency limit has no rate; override `max_leases`",
                    ));
                }
                if !leases && max_leases.is_some() {
                    return Err(ModelError::new(
                        "max_leases",
                        format!("{} takes a `rate`, not `max_leases`", self.algorithm),
                    ));
                }
                if let Some(rate) = rate
                    && rate.window() != self.rate.window()
                {
                    return Err(ModelError::new(
                        "rate",
                        format!(
                            "{rate} has another window than the limit's {}: an override keeps \
                             the window (and so the identity's counter); for another window \
                             write another limit with a `when`",
                            self.rate
                        ),
                    ));
                }
                if let Some(count) = max_leases.or(*quota) {
                    let field = if max_leases.is_some() {
                        "max_leases"
                    } else {
                        "quota"
                    };
                    Rate::new(count, self.rate.window())
                        .map_err(|e| ModelError::new(field, e.message))?;
                }
                let limit = self.overridden(o).unwrap_or_else(|| self.clone());
                limit.validate()
            }
        }
    }
}
