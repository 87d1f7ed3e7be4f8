//! Rule compilation: a validated [`Rule`] turned, once, into what every check of it needs.
//!
//! A [`CompiledRule`] holds the rule as configured and, per limit, its id, its identity
//! dimensions and its algorithm parameters in the algorithms' units (µs). Checks only read it;
//! [`Limiter::set_rules`](super::Limiter::set_rules) swaps a whole [`RuleBook`] at once.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::choice::Choice;
use super::denial_cache::cacheable_limits;
use super::held::Holdings;
use super::meters::RuleMeters;

use crate::algorithm::concurrency::LeaseToken;
use crate::algorithm::{LimitStep, Params, penalty};
use crate::error::Error;
use crate::model::{AddressGroup, Algorithm, Limit, Micros, Name, Rule, validate_rule_name};

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
    /// Whether a check of its one limit may be decided on its own (no lease, no batches).
    pub(crate) direct: bool,
}

/// One limit of a compiled rule.
#[derive(Debug, Clone)]
pub(crate) struct CompiledLimit {
    /// The limit's id, shared by every key and decision of it.
    pub(crate) id: Name,
    /// Whose counter: per identity dimension, its attribute names in order of preference.
    pub(crate) by: Vec<Vec<Name>>,
    /// The address-valued attributes of `by` counted by network (usually `ip`, IPv6 by /64).
    pub(crate) groups: Box<[(Name, AddressGroup)]>,
    algorithm: Algorithm,
    params: Params,
    block_us: Option<Micros>,
    penalty: Option<penalty::Settings>,
    shadow: bool,
    /// Whether identities may have numbers set at run time: the store looks them up, and a
    /// cost is checked against the identity's capacity there rather than the file's here.
    pub(crate) settable: bool,
}

impl CompiledLimit {
    /// What to decide for a request of `cost` units, taking a lease under `lease` if this is a
    /// concurrency limit.
    pub(crate) fn step(&self, cost: u64, lease: Option<LeaseToken>) -> LimitStep {
        LimitStep {
            algorithm: self.algorithm,
            params: self.params,
            cost,
            block_us: self.block_us,
            penalty: self.penalty,
            shadow: self.shadow,
            lease: lease.filter(|_| self.algorithm.holds_leases()),
            settable: self.settable,
        }
    }

    /// The limit's algorithm and its numbers.
    pub(crate) fn meter(&self) -> (Algorithm, Params) {
        (self.algorithm, self.params)
    }

    /// The limit's algorithm.
    pub(crate) fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// Whether this limit holds leases.
    pub(crate) fn holds_leases(&self) -> bool {
        self.algorithm.holds_leases()
    }

    /// How long a lease of this limit lasts (its window; for a rate, the window), µs.
    pub(crate) fn lease_us(&self) -> Micros {
        self.params.window_us
    }

    /// The most units one request may be admitted for.
    pub(crate) fn capacity(&self) -> u64 {
        self.params.capacity
    }

    /// Whether this is a shadow limit: its denial is reported, never enforced.
    pub(crate) fn is_shadow(&self) -> bool {
        self.shadow
    }

    /// Whether the store is asked about a request of `units`: they fit the capacity, or the
    /// numbers may be set at run time (the store then checks them against the identity's).
    pub(crate) fn fits(&self, units: u64) -> bool {
        self.settable || units <= self.params.capacity
    }

    /// Whether a request of `units` can never pass this limit, known without the store: above
    /// the capacity of an enforcing limit whose numbers cannot be set at run time.
    pub(crate) fn refuses(&self, units: u64) -> bool {
        !self.shadow && !self.settable && units > self.params.capacity
    }
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
        let choice = Choice::new(&rule, &limits, compile_limit);
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
            super::lease::check_length(name, &limits).map_err(invalid)?;
        }
        let name = Name::interned(name);
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

/// One limit's id, identity dimensions and algorithm parameters.
fn compile_limit(l: &Limit) -> CompiledLimit {
    CompiledLimit {
        id: Name::interned(&l.id()),
        by: l
            .by
            .iter()
            .map(|b| b.alternatives.iter().map(|a| Name::interned(a)).collect())
            .collect(),
        groups: l
            .address_groups()
            .into_iter()
            .map(|(name, group)| (Name::interned(&name), group))
            .collect(),
        algorithm: l.algorithm,
        params: Params {
            count: l.rate.count,
            window_us: l.rate.window_us(),
            capacity: l.capacity(),
            count_denied: l.count_denied,
        },
        block_us: l.block.map(Micros::from),
        penalty: l.penalty.map(|p| penalty::Settings {
            warn_after: p.warn_after.into(),
            ban_after: p.ban_after.into(),
            ban_us: p.ban.into(),
            memory_us: p.memory.into(),
        }),
        shadow: l.shadow,
        settable: l.settable,
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
