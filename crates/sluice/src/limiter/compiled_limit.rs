//! One limit of a rule, compiled: its id, whose counter it is, and its algorithm's parameters in
//! the algorithms' units (µs), computed once when its rule is compiled.
//!
//! Plain data, read by every check: it knows nothing of the compiled rule, choices, keys or
//! decisions, so that everything that reads it sits above it.

use crate::algorithm::LeaseToken;
use crate::algorithm::{LimitStep, Params, PenaltyParams};
use std::sync::Arc;

use crate::model::{AddressGroup, Algorithm, Limit, Micros, Name, Notify, Over, Period, Threshold};

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
    penalty: Option<PenaltyParams>,
    shadow: bool,
    /// Whether identities may have numbers set at run time: the store looks them up, and a
    /// cost is checked against the identity's capacity there rather than the file's here.
    pub(crate) settable: bool,
    /// A quota's `notify`: the thresholds its decisions report crossing (see `crossings`).
    pub(crate) notify: Option<CompiledNotify>,
}

/// A quota's `notify`, compiled: its thresholds and webhook.
#[derive(Debug, Clone)]
pub(crate) struct CompiledNotify {
    pub(crate) at: Box<[Threshold]>,
    pub(crate) webhook: Arc<str>,
}

impl From<&Notify> for CompiledNotify {
    fn from(n: &Notify) -> CompiledNotify {
        CompiledNotify {
            at: n.at.clone().into_boxed_slice(),
            webhook: Arc::from(n.webhook.as_str()),
        }
    }
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

/// One limit's id, identity dimensions and algorithm parameters.
pub(crate) fn compile_limit(l: &Limit) -> CompiledLimit {
    let admits_over = l.over == Over::Allow;
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
            count: l.rate.count(),
            window_us: l.rate.window_us(),
            capacity: l.capacity(),
            // Past itself, a quota that admits counts as `count_denied` does (what passes).
            count_denied: l.count_denied || admits_over,
            period: l.period.as_ref().map(Period::interned),
            admits_over,
        },
        block_us: l.block.map(Micros::from),
        penalty: l.penalty.map(|p| PenaltyParams {
            warn_after: p.warn_after.into(),
            ban_after: p.ban_after.into(),
            ban_us: p.ban.into(),
            memory_us: p.memory.into(),
        }),
        shadow: l.shadow || admits_over,
        settable: l.settable,
        notify: l.notify.as_ref().map(CompiledNotify::from),
    }
}
