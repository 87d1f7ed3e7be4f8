//! Rules whose limits live in different Redis Cluster slots: the cross-slot protocol.
//!
//! One script call can only touch one slot, so a request whose limits have different hash tags
//! (a rule limiting by `member` and by `ip`) cannot be decided in one atomic step on a Cluster.
//! Such a request is decided like this:
//!
//! 1. its limits are grouped by slot, and the groups are taken in ascending slot order;
//! 2. each group is decided by the ordinary decision script, consuming (all-or-nothing within the
//!    group, as everywhere);
//! 3. as soon as a group denies (or fails), the groups already decided give back what they
//!    consumed (`lua/give_back.lua`, one call per group, in parallel; a concurrency limit
//!    releases the lease it took, `lua/lease.lua`), and the groups not yet
//!    asked are only looked at (peek), so that the answer still carries every limit's numbers.
//!
//! Why it never admits more than a limit allows: every limit is consumed by its own atomic
//! script before the request is admitted, exactly as if the request were alone; a give-back only
//! returns units of a request that was denied, and never more than that request still weighs on
//! the state (see the script). Concurrent requests see the consumed units until they are given
//! back, so they can only be denied more, never admitted more.
//!
//! What it costs:
//! - a request that another slot denies holds units on the earlier slots for one round trip (the
//!   time between its consume and its give-back); a concurrent request near the limit may be
//!   denied meanwhile: brief under-admission, never over-admission;
//! - if the give-back cannot run (the node dies or times out between the two steps), those units
//!   stay consumed until the state expires by itself: under-admission for at most one window. It
//!   is logged and counted (`sluice_redis_give_back_failures_total`);
//! - the violations and blocks of limits in groups after the denying one are not recorded (they
//!   were only looked at), where a one-slot decision would have recorded them;
//! - a denied request costs one round trip per group asked plus one give-back per group that
//!   consumed; an admitted one costs one round trip per group, made one after the other.
//!
//! When every limit of a request shares a slot (the common case: limits counted by the same
//! identity, or a single limit) it stays one script call. On a single server or behind sentinels
//! every request is one call whatever its limits.

use std::collections::BTreeMap;

use futures::future::join_all;

use super::codec;
use super::keys::{self, Part};
use super::source::{self, PRELUDE, whole};
use super::{RedisStore, slot, store_error};
use crate::algorithm::{LimitOutcome, Mode};
use crate::metric_catalog::names;
use crate::model::Micros;
use crate::store::{LeaseCall, LimitCall, StoreError, StoreReply};

/// The give-back script: the prelude, then `lua/give_back.lua` with each algorithm's
/// `give_back` section (see `source::with_sections`).
pub(super) fn give_back_text() -> String {
    let driver = source::with_sections(include_str!("lua/give_back.lua"), source::GIVE_BACK);
    whole(&format!("{PRELUDE}{driver}"))
}

/// The indices of `calls`, grouped by the slot of their keys, in ascending slot order.
pub fn groups(prefix: &str, calls: &[LimitCall]) -> Vec<Vec<usize>> {
    let mut by_slot: BTreeMap<u16, Vec<usize>> = BTreeMap::new();
    for (i, call) in calls.iter().enumerate() {
        let key = keys::key(prefix, &call.key, Part::Counter);
        by_slot
            .entry(slot::of_key(key.as_bytes()))
            .or_default()
            .push(i);
    }
    by_slot.into_values().collect()
}

/// Whether a group's decision lets the request pass: every enforcing limit allowed it.
fn passes(calls: &[LimitCall], group: &[usize], outcomes: &[LimitOutcome]) -> bool {
    group
        .iter()
        .zip(outcomes)
        .all(|(&i, o)| o.allowed || calls[i].step.shadow)
}

impl RedisStore {
    /// Decides `calls` over several slots (see the module docs).
    pub(super) async fn decide_across_slots(
        &self,
        calls: &[LimitCall],
        groups: &[Vec<usize>],
        mode: Mode,
    ) -> Result<StoreReply, StoreError> {
        let subset = |group: &[usize]| group.iter().map(|&i| calls[i].clone()).collect::<Vec<_>>();
        let mut outcomes: Vec<Option<LimitOutcome>> = vec![None; calls.len()];
        let mut now_us = None;
        let mut record = |group: &[usize], reply: StoreReply, outcomes: &mut Vec<_>| {
            now_us.get_or_insert(reply.now_us);
            for (&i, o) in group.iter().zip(reply.outcomes) {
                outcomes[i] = Some(o);
            }
        };
        let mut asked = 0;
        let mut denied = false;
        // Groups that consumed: their calls' indices and the time they consumed at.
        let mut consumed: Vec<(Vec<usize>, Micros)> = Vec::new();
        let mut failure = None;
        if mode == Mode::Apply {
            for group in groups {
                asked += 1;
                match self.decide_calls(&subset(group), Mode::Apply).await {
                    Ok(reply) => {
                        let pass = passes(calls, group, &reply.outcomes);
                        let took: Vec<usize> = group
                            .iter()
                            .zip(&reply.outcomes)
                            .filter(|(_, o)| o.allowed)
                            .map(|(&i, _)| i)
                            .collect();
                        let at = reply.now_us;
                        record(group, reply, &mut outcomes);
                        if !pass {
                            denied = true;
                            break;
                        }
                        consumed.push((took, at));
                    }
                    Err(e) => {
                        failure = Some(e);
                        break;
                    }
                }
            }
        }
        if denied || failure.is_some() {
            // A settable limit gives back under the numbers it consumed under.
            let decided: Vec<LimitCall>;
            let calls: &[LimitCall] = if outcomes.iter().flatten().any(|o| o.runtime.is_some()) {
                decided = calls
                    .iter()
                    .zip(&outcomes)
                    .map(|(c, o)| LimitCall {
                        key: c.key.clone(),
                        step: o
                            .and_then(|o| o.runtime)
                            .map_or(c.step, |n| n.apply(&c.step)),
                    })
                    .collect();
                &decided
            } else {
                calls
            };
            let given = join_all(
                consumed
                    .iter()
                    .map(|(took, at)| self.give_back(calls, took, *at)),
            )
            .await;
            for ((took, _), result) in consumed.iter().zip(given) {
                match result {
                    Ok(()) => {
                        for &i in took {
                            if let Some(o) = outcomes[i].as_mut() {
                                returned(o, &calls[i]);
                            }
                        }
                    }
                    Err(error) => {
                        metrics::counter!(names::REDIS_GIVE_BACK_FAILURES_TOTAL).increment(1);
                        tracing::warn!(%error, limits = took.len(), "give-back failed; the units stay consumed until they expire");
                    }
                }
            }
        }
        if let Some(error) = failure {
            return Err(error);
        }
        // Peek: every group at once. Apply, denied: the groups not asked, only looked at.
        let rest = &groups[asked..];
        let peeked = join_all(
            rest.iter()
                .map(|g| async move { self.decide_calls(&subset(g), Mode::Peek).await }),
        )
        .await;
        for (group, reply) in rest.iter().zip(peeked) {
            record(group, reply?, &mut outcomes);
        }
        let outcomes = outcomes
            .into_iter()
            .map(|o| o.ok_or_else(|| StoreError::permanent("redis", "a limit got no outcome")))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(StoreReply {
            now_us: now_us.unwrap_or_default(),
            outcomes,
        })
    }

    /// Gives back the units that the calls `took` consumed at `at` (all on one slot).
    async fn give_back(
        &self,
        calls: &[LimitCall],
        took: &[usize],
        at: Micros,
    ) -> Result<(), StoreError> {
        // A concurrency limit gives its units back by releasing the lease it took.
        let (leases, took): (Vec<usize>, Vec<usize>) = took.iter().partition(|&&i| {
            calls[i].step.algorithm.holds_leases() && calls[i].step.lease.is_some()
        });
        if !leases.is_empty() {
            let leases: Vec<LeaseCall> = leases
                .iter()
                .map(|&i| LeaseCall {
                    key: calls[i].key.clone(),
                    token: calls[i].step.lease.unwrap_or_default(),
                    units: calls[i].step.cost,
                    lease_us: calls[i].step.params.window_us,
                })
                .collect();
            self.release_leases(&leases).await?;
        }
        if took.is_empty() {
            return Ok(());
        }
        let script = &self.inner.scripts.give_back;
        let mut invocation = script.prepare_invoke();
        invocation.arg(self.client_now_arg());
        invocation.arg(at.get());
        for &i in &took {
            let call = &calls[i];
            invocation.key(keys::key(&self.inner.prefix, &call.key, Part::Counter));
            let step = &call.step;
            invocation.arg(&codec::give_back_args(
                step.algorithm,
                &step.params,
                step.cost,
                at,
            ));
        }
        let mut conn = self.inner.conn.clone();
        let _changed: i64 = invocation
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(())
    }
}

/// A given-back limit reports the units it got back as remaining again.
fn returned(o: &mut LimitOutcome, call: &LimitCall) {
    let p = &call.step.params;
    o.remaining = o
        .remaining
        .saturating_add(call.step.cost)
        .min(p.capacity.max(p.count));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_declares_its_arguments_per_limit_and_its_table() {
        let text = give_back_text();
        let declared = text.lines().next().expect("the constants");
        assert!(declared.contains("GIVE_BACK_ARGS"), "{declared}");
        assert!(text.contains("local GIVE_BACKS = { "));
    }
}
