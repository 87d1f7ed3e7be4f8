//! The denial cache on [`Limiter::check_all`](super::Limiter::check_all)'s path: a part the
//! store has just denied answers the whole request without a store call, as it answers a check
//! (a banned client behind Envoy costs the store one call per ban, not one per request).
//!
//! Invariants (those of the cache, `denial_cache`, for a request of several parts):
//! - only parts that consume are answered, and only on limits their rule lets the cache answer
//!   for (`CompiledRule::cacheable`); looks, shadow rules and a request already denied before
//!   the store (a cost no limit holds) ask the store as before;
//! - answering changes nothing the store would have changed: the store would have denied the
//!   whole request, so it answers only when no other part has a limit whose denial leaves a
//!   trace (`count_denied`, `penalty`, `block`);
//! - the other parts are not consulted: they are reported allowed, with nothing known to remain
//!   (the cached part's denial is the request's);
//! - denials are recorded from the step that consumed (never from a look), for every part whose
//!   rule may cache them, under the call start taken before that store call.

use super::denial_cache::{CallStart, DenialCache, leaves_no_trace};
use super::resolved::Resolved;
use crate::algorithm::LimitOutcome;
use crate::store::StoreReply;

/// The part of `applies` the cache knows to be denied now and its outcomes, when answering it
/// changes nothing the store would have changed.
pub(super) fn answer(
    cache: &DenialCache,
    applies: &[&Resolved],
) -> Option<(usize, Vec<LimitOutcome>)> {
    if cache.is_empty() {
        return None;
    }
    let (hit, outcomes) = applies.iter().enumerate().find_map(|(i, r)| {
        if r.rule.cacheable.is_empty() || r.rule.definition.shadow {
            return None;
        }
        Some((i, cache.answer(&r.calls, &r.rule.cacheable)?))
    })?;
    let quiet = |r: &&Resolved| r.calls.iter().all(|c| leaves_no_trace(&c.step));
    let others_quiet = applies
        .iter()
        .enumerate()
        .all(|(i, r)| i == hit || quiet(r));
    others_quiet.then_some((hit, outcomes))
}

/// The replies of a request answered by the cache: `hit`'s outcomes for it, every other part's
/// limits not consulted.
pub(super) fn replies(
    all: &[&Resolved],
    hit: usize,
    outcomes: Vec<LimitOutcome>,
) -> Vec<Option<StoreReply>> {
    let mut outcomes = Some(outcomes);
    all.iter()
        .enumerate()
        .map(|(i, r)| {
            let outcomes = match i == hit {
                true => outcomes.take().unwrap_or_default(),
                false => vec![LimitOutcome::unanswered(true); r.calls.len()],
            };
            Some(StoreReply {
                now_us: crate::model::Micros::ZERO,
                outcomes,
            })
        })
        .collect()
}

/// Records the denials in the replies to a step that consumed (sent after `start`).
pub(super) fn remember(
    cache: &DenialCache,
    start: CallStart,
    group: &[&Resolved],
    replies: &[Option<StoreReply>],
) {
    for (r, reply) in group.iter().zip(replies) {
        if let (Some(reply), false, false) =
            (reply, r.rule.cacheable.is_empty(), r.rule.definition.shadow)
        {
            cache.record(start, &r.calls, &r.rule.cacheable, reply);
        }
    }
}
