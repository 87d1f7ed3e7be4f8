//! Rule compilation: a validated [`Rule`] turned, once, into what every check of it needs.
//!
//! A [`CompiledRule`] holds the rule as configured and, per limit, its id, its identity
//! dimensions and its algorithm parameters in the algorithms' units (µs). Checks only read it;
//! [`Limiter::set_rules`](super::Limiter::set_rules) swaps a whole [`RuleBook`] at once.

use super::denial_cache::cacheable_limits;
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::algorithm::{LimitStep, Params, penalty};
use crate::clock::micros;
use crate::error::Error;
use crate::model::{Algorithm, By, Rule, validate_rule_name};

/// A rule ready to decide: validated, with each limit's parameters computed.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    /// The rule's name, shared by every key built for this rule.
    pub name: Arc<str>,
    /// The rule as configured.
    pub definition: Rule,
    pub(crate) limits: Vec<CompiledLimit>,
    /// Which limits' denials the denial cache may answer (empty when none may).
    pub(crate) cacheable: Vec<bool>,
}

/// One limit of a compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct CompiledLimit {
    /// The limit's id, shared by every key built for it.
    pub(crate) id: Arc<str>,
    /// Whose counter: the identity dimensions.
    pub(crate) by: Vec<By>,
    algorithm: Algorithm,
    params: Params,
    block_us: Option<u64>,
    penalty: Option<penalty::Settings>,
    shadow: bool,
}

impl CompiledLimit {
    /// What to decide for a request of `cost` units.
    pub(crate) fn step(&self, cost: u64) -> LimitStep {
        LimitStep {
            algorithm: self.algorithm,
            params: self.params,
            cost,
            block_us: self.block_us,
            penalty: self.penalty,
            shadow: self.shadow,
        }
    }

    /// The most units one request may be admitted for.
    pub(crate) fn capacity(&self) -> u64 {
        self.params.capacity
    }

    /// Whether this is a shadow limit: its denial is reported, never enforced.
    pub(crate) fn is_shadow(&self) -> bool {
        self.shadow
    }
}

impl CompiledRule {
    /// Validates and compiles a rule.
    pub fn new(name: &str, rule: Rule) -> Result<CompiledRule, Error> {
        let invalid = |error| Error::InvalidRule {
            rule: name.to_string(),
            error,
        };
        validate_rule_name(name).map_err(invalid)?;
        rule.validate().map_err(invalid)?;
        let limits = rule
            .limits
            .iter()
            .map(|l| CompiledLimit {
                id: l.id().into(),
                by: l.by.clone(),
                algorithm: l.algorithm,
                params: Params {
                    count: l.rate.count,
                    window_us: l.rate.window_us(),
                    capacity: l.capacity(),
                    count_denied: l.count_denied,
                },
                block_us: l.block.map(micros),
                penalty: l.penalty.map(|p| penalty::Settings {
                    warn_after: p.warn_after.into(),
                    ban_after: p.ban_after.into(),
                    ban_us: micros(p.ban),
                    memory_us: micros(p.memory),
                }),
                shadow: l.shadow,
            })
            .collect::<Vec<CompiledLimit>>();
        let steps: Vec<LimitStep> = limits.iter().map(|l| l.step(1)).collect();
        let mut cacheable = cacheable_limits(&steps);
        if !cacheable.contains(&true) {
            cacheable.clear();
        }
        Ok(CompiledRule {
            name: name.into(),
            definition: rule,
            limits,
            cacheable,
        })
    }
}

/// The compiled rules in force, by name.
pub type RuleBook = BTreeMap<String, Arc<CompiledRule>>;

/// Compiles every rule, refusing the whole set if one is invalid.
pub(crate) fn compile(rules: impl IntoIterator<Item = (String, Rule)>) -> Result<RuleBook, Error> {
    let mut book = RuleBook::new();
    for (name, rule) in rules {
        let compiled = CompiledRule::new(&name, rule)?;
        book.insert(name, Arc::new(compiled));
    }
    Ok(book)
}
