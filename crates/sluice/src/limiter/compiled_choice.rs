//! A rule's conditions and overrides, compiled once with the rule: its `when`, and each limit's
//! `when` and overrides, each override's numbers made a [`CompiledLimit`] of their own with the
//! base limit's id (so the counter is the same whatever the tier).
//!
//! Plain data, held by the compiled rule; choosing among it per request is `choice`'s. It exists
//! only for rules that use a condition or an override.

use super::compiled_condition::CompiledCondition;
use super::compiled_limit::{CompiledLimit, compile_limit};
use crate::model::{OverrideOutcome, Rule};

/// A rule's conditions and overrides, compiled.
#[derive(Debug)]
pub(crate) struct Choice {
    /// The rule's `when`.
    pub(super) when: Option<CompiledCondition>,
    /// One per limit of the rule, in its order.
    pub(super) limits: Vec<LimitChoice>,
}

/// One limit's `when` and overrides, compiled.
#[derive(Debug)]
pub(super) struct LimitChoice {
    pub(super) when: Option<CompiledCondition>,
    /// Each override's `when`, and what it makes of the limit, in order.
    pub(super) overrides: Vec<(CompiledCondition, Tier)>,
}

/// What an override makes of its limit.
#[derive(Debug)]
pub(super) enum Tier {
    Numbers(CompiledLimit),
    Unlimited,
    Deny(String),
}

impl Choice {
    /// The choice of a rule whose limits compiled to `base`, when it uses conditions or
    /// overrides: each override's numbers become a limit of their own, under the base limit's id.
    pub(crate) fn new(rule: &Rule, base: &[CompiledLimit]) -> Option<Box<Choice>> {
        if !rule.is_conditional() {
            return None;
        }
        let limits = rule
            .limits
            .iter()
            .zip(base)
            .map(|(limit, compiled)| LimitChoice {
                when: limit.when.as_ref().map(CompiledCondition::new),
                overrides: limit
                    .overrides
                    .iter()
                    .map(|o| {
                        let tier = match &o.outcome {
                            OverrideOutcome::Unlimited => Tier::Unlimited,
                            OverrideOutcome::Deny(message) => Tier::Deny(message.clone()),
                            OverrideOutcome::Numbers { .. } => {
                                let numbers = limit.overridden(o).unwrap_or_else(|| limit.clone());
                                let mut tier = compile_limit(&numbers);
                                tier.id = compiled.id.clone();
                                Tier::Numbers(tier)
                            }
                        };
                        (CompiledCondition::new(&o.when), tier)
                    })
                    .collect(),
            })
            .collect();
        Some(Box::new(Choice {
            when: rule.when.as_ref().map(CompiledCondition::new),
            limits,
        }))
    }
}
