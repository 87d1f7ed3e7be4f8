//! Rule compilation: a validated [`Rule`] turned, once, into what every check of it needs.
//!
//! A [`CompiledRule`] holds the rule as configured, its limits (`compiled_limit`: each one's id,
//! identity dimensions and algorithm parameters in the algorithms' units, µs) and its conditions
//! and overrides (`compiled_choice`). It is plain data: checks only read it, and the modules
//! that choose, build keys and decide sit above it;
//! [`Limiter::set_rules`](super::Limiter::set_rules) swaps a whole [`RuleBook`] at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::compiled_choice::Choice;
use super::compiled_limit::{CompiledLimit, compile_limit};
use super::denial_cache::cacheable_limits;
use super::held::Holdings;
use super::lease_id::check_length;
use super::meters::RuleMeters;

use crate::algorithm::LimitStep;
use crate::error::Error;
use crate::model::{Name, Rule, validate_rule_name};

/// A rule ready to decide: validated, with each limit's parameters computed.
#[derive(Debug)]
pub struct CompiledRule {
    /// The rule's name, shared by every key and decision of this rule.
    pub name: Name,
    /// The rule as configured.
    pub definition: Rule,
    pub(crate) limits: Vec<CompiledLimit>,
    /// Which limits' denials the denial cache may answer (empty when none may).
    pub(crate) cacheable: Vec<bool>,
    /// Whether a limit of the rule holds leases (an admitted check then draws a lease token).
    pub(crate) leases: bool,
    /// The rule's conditions and overrides; `None` for a rule that uses neither.
    pub(crate) choice: Option<Box<Choice>>,
    /// Its decisions' counters.
    pub(crate) meters: RuleMeters,
    /// The batches of its limit, when it takes batches (hot keys, see `held`).
    pub(crate) held: Option<Arc<Holdings>>,
    /// Whether a limit of the rule notifies (`notify`): its applied decisions are read for
    /// quota crossings.
    pub(crate) notifies: bool,
    /// Whether a check of its one limit may be decided on its own (no lease, no batches).
    pub(crate) direct: bool,
}

impl CompiledRule {
    /// The rule's one limit, when a check of `units` is decided on it alone with nothing else to
    /// draw (no lease): a one-limit rule, enabled, and the units within the limit's capacity.
    pub(crate) fn sole_limit(&self, units: u64) -> Option<&CompiledLimit> {
        let [limit] = self.limits.as_slice() else {
            return None;
        };
        (self.direct && self.definition.enabled && limit.fits(units)).then_some(limit)
    }

    /// Validates and compiles a rule.
    pub fn new(name: &str, rule: Rule) -> Result<CompiledRule, Error> {
        let invalid = |error| Error::InvalidRule {
            rule: name.to_string(),
            error,
        };
        validate_rule_name(name).map_err(invalid)?;
        rule.validate().map_err(invalid)?;
        let limits: Vec<CompiledLimit> = rule.limits.iter().map(compile_limit).collect();
        let choice = Choice::new(&rule, &limits);
        let steps: Vec<LimitStep> = limits.iter().map(|l| l.step(1, None)).collect();
        let mut cacheable = cacheable_limits(&steps);
        // A run-time change can raise an identity's numbers at any moment, on any node: a
        // denial of a settable limit is never cached, so no node answers from a stale one.
        for (cacheable, limit) in cacheable.iter_mut().zip(&limits) {
            *cacheable &= !limit.settable;
        }
        // The cache remembers a denial by key, whatever numbers denied it: a rule whose numbers
        // are chosen per request is never answered from it.
        if !cacheable.contains(&true) || choice.is_some() {
            cacheable.clear();
        }
        let leases = limits.iter().any(CompiledLimit::holds_leases);
        if leases {
            check_length(name, &limits).map_err(invalid)?;
        }
        let name = Name::interned(name);
        let notifies = limits.iter().any(|l| l.notify.is_some());
        // Hot keys: a batched limit is its rule's only one (`Rule::validate`).
        let held = match (rule.limits.as_slice(), limits.as_slice()) {
            ([defined], [limit]) => defined.batch.map(|batches| {
                let (algorithm, params) = limit.meter();
                Arc::new(Holdings::new(&name, batches, algorithm, params))
            }),
            _ => None,
        };
        Ok(CompiledRule {
            direct: !leases && held.is_none(),
            notifies,
            held,
            meters: RuleMeters::new(name.clone(), limits.iter().map(|l| l.id.clone())),
            name,
            definition: rule,
            limits,
            cacheable,
            leases,
            choice,
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
