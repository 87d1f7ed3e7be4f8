//! Between a request and the cache: which limits of a rule may have their denials cached
//! (invariant 4 of the [module docs](super)), and answering or recording a whole request.

use super::{DenialCache, Mark};
use crate::algorithm::{LimitOutcome, LimitStep};
use crate::store::{LimitCall, StoreReply};

/// Which limits of a rule (by position) may have their denials cached: see invariant 4.
pub fn cacheable_limits(steps: &[LimitStep]) -> Vec<bool> {
    let leaves_trace = steps
        .iter()
        .any(|s| s.params.count_denied || s.penalty.is_some());
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let others_clean = steps
                .iter()
                .enumerate()
                .all(|(j, o)| j == i || o.block_us.is_none());
            // A concurrency limit's denial ends whenever a lease is released: no time is known.
            !leaves_trace && !s.shadow && others_clean && !s.algorithm.holds_leases()
        })
        .collect()
}

impl DenialCache {
    /// The outcomes of a request answered from the cache, if one of its limits that may be
    /// cached (`cacheable[i]`, from [`cacheable_limits`]) is known to deny it now. Only that
    /// limit is consulted: the others are reported allowed, with nothing known to remain.
    pub fn answer(&self, calls: &[LimitCall], cacheable: &[bool]) -> Option<Vec<LimitOutcome>> {
        let (hit, outcome) = calls
            .iter()
            .zip(cacheable)
            .enumerate()
            .filter(|(_, (_, cacheable))| **cacheable)
            .find_map(|(i, (call, _))| Some((i, self.lookup(&call.key, call.step.cost)?)))?;
        let not_consulted = LimitOutcome::unanswered(true);
        Some(
            (0..calls.len())
                .map(|i| if i == hit { outcome } else { not_consulted })
                .collect(),
        )
    }

    /// Records the denials in a store's reply to `calls` (sent after `mark` was taken).
    pub fn record(&self, mark: Mark, calls: &[LimitCall], cacheable: &[bool], reply: &StoreReply) {
        for ((call, outcome), cacheable) in calls.iter().zip(&reply.outcomes).zip(cacheable) {
            if *cacheable && !outcome.allowed {
                self.insert(mark, &call.key, &call.step, outcome, reply.now_us);
            }
        }
    }
}
