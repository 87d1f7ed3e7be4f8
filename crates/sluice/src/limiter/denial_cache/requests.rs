//! Between a request and the cache: which limits of a rule may have their denials cached
//! (invariant 4 of the [module docs](super)), and answering or recording a whole request.

use super::{CallStart, DenialCache};
use crate::algorithm::{LimitOutcome, LimitStep};
use crate::store::{LimitCall, StoreReply};

/// Which limits of a rule (by position) may have their denials cached: see invariant 4.
///
/// A limit whose own denials leave a trace (`count_denied`, `penalty`) may be cached only while
/// a block or ban of its own is in force, which answers alone and changes nothing: one with
/// neither a block nor a penalty never has one. Any other limit of the rule must leave no trace
/// when the request is denied, and start no block.
pub(crate) fn cacheable_limits(steps: &[LimitStep]) -> Vec<bool> {
    let quiet = leaves_no_trace;
    steps
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let others_quiet = steps.iter().enumerate().all(|(j, o)| j == i || quiet(o));
            let ever_blocked = s.block_us.is_some() || s.penalty.is_some();
            let own_trace = s.params.count_denied || s.penalty.is_some();
            // A concurrency limit's denial ends whenever a lease is released: no time is known.
            !s.shadow && others_quiet && (ever_blocked || !own_trace) && !s.algorithm.holds_leases()
        })
        .collect()
}

/// Whether a limit's part in a denied request leaves no trace in the store: it counts no denial,
/// no violation, and starts no block.
pub(crate) fn leaves_no_trace(s: &LimitStep) -> bool {
    !s.params.count_denied && s.penalty.is_none() && s.block_us.is_none()
}

impl DenialCache {
    /// The outcomes of a request answered from the cache, if one of its limits that may be
    /// cached (`cacheable[i]`, from [`cacheable_limits`]) is known to deny it now. Only that
    /// limit is consulted: the others are reported allowed, with nothing known to remain.
    pub(crate) fn answer(
        &self,
        calls: &[LimitCall],
        cacheable: &[bool],
    ) -> Option<Vec<LimitOutcome>> {
        let (hit, outcome) = calls
            .iter()
            .zip(cacheable)
            .enumerate()
            .filter(|(_, (_, cacheable))| **cacheable)
            .find_map(|(i, (call, _))| {
                Some((i, self.lookup((&call.key).into(), call.step.cost)?))
            })?;
        let not_consulted = LimitOutcome::unanswered(true);
        Some(
            (0..calls.len())
                .map(|i| if i == hit { outcome } else { not_consulted })
                .collect(),
        )
    }

    /// Records the denials in a store's reply to `calls` (sent after `start` was taken).
    pub(crate) fn record(
        &self,
        start: CallStart,
        calls: &[LimitCall],
        cacheable: &[bool],
        reply: &StoreReply,
    ) {
        for ((call, outcome), cacheable) in calls.iter().zip(&reply.outcomes).zip(cacheable) {
            if *cacheable && !outcome.allowed {
                self.insert(start, &call.key, &call.step, outcome, reply.now_us);
            }
        }
    }
}
