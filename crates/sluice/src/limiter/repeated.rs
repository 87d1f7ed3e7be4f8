//! Parts of one [`Limiter::check_all`](super::Limiter::check_all) request that count on the same
//! counter (the same rule, limit and identity): one request on that counter, not several.
//!
//! Each part is resolved into its store calls on its own, so two parts naming the same identity
//! of a rule would each be judged against the state before the request, and together take more
//! than the limit allows. Instead, as envoyproxy/ratelimit adds up the hits of repeated
//! descriptors, the costs of every part that consumes on one counter are added up and the counter
//! is judged once, for the sum; each of those parts gets that one answer (the same `remaining`,
//! the same lease). Looks (cost 0) on one counter are one look.
//!
//! Invariants:
//! - after [`merge`], the calls on one key are equal in every part of a step that names it, so
//!   [`unique`] asks the store once per key and every part reads that key's outcome;
//! - parts whose calls on one counter differ in their numbers (overrides matched other
//!   attributes), or that share a concurrency counter without being the same identity on every
//!   limit (one lease id could not name what each holds), are refused: nothing is decided;
//! - a request without repeated counters is left as it was.

use std::collections::HashMap;

use super::resolved::Resolved;
use crate::algorithm::LimitStep;
use crate::error::Error;
use crate::store::{LimitCall, LimitKey};

/// Makes the calls of every counter named by several parts equal: in the step of applies, the
/// sum of their costs under the first part's lease token; in the step of looks, one look.
pub(super) fn merge(resolved: &mut [Option<Resolved>]) -> Result<(), Error> {
    for look in [true, false] {
        // The first call on each counter (part, call) and the units asked of it in all.
        let mut firsts: Vec<(usize, usize, u64)> = Vec::new();
        // For each later call on a counter already named: (part, call, index in `firsts`).
        let mut later: Vec<(usize, usize, usize)> = Vec::new();
        {
            let mut seen: HashMap<&LimitKey, usize> = HashMap::new();
            for (i, r) in resolved.iter().enumerate() {
                let Some(r) = r.as_ref().filter(|r| r.asks(look)) else {
                    continue;
                };
                for (j, call) in r.calls.iter().enumerate() {
                    let Some(&at) = seen.get(&call.key) else {
                        seen.insert(&call.key, firsts.len());
                        firsts.push((i, j, call.step.cost));
                        continue;
                    };
                    let (fi, fj, units) = &mut firsts[at];
                    let first = resolved[*fi].as_ref().expect("a part that asks");
                    conflict(first, *fi, r, i, &first.calls[*fj], call)?;
                    if !look {
                        *units = units.saturating_add(call.step.cost);
                    }
                    later.push((i, j, at));
                }
            }
        }
        if later.is_empty() {
            continue;
        }
        let merged: Vec<LimitStep> = firsts
            .iter()
            .map(|&(i, j, units)| {
                let step = resolved[i].as_ref().expect("a part that asks").calls[j].step;
                LimitStep {
                    cost: units,
                    ..step
                }
            })
            .collect();
        for (&(i, j, _), step) in firsts.iter().zip(&merged) {
            part_mut(resolved, i).calls[j].step = *step;
        }
        for (i, j, at) in later {
            part_mut(resolved, i).calls[j].step = merged[at];
        }
    }
    Ok(())
}

fn part_mut(resolved: &mut [Option<Resolved>], i: usize) -> &mut Resolved {
    resolved[i].as_mut().expect("a part that asks")
}

/// Refuses two calls on one counter that cannot be one request.
fn conflict(
    first: &Resolved,
    first_index: usize,
    other: &Resolved,
    other_index: usize,
    a: &LimitCall,
    b: &LimitCall,
) -> Result<(), Error> {
    let numbers = |s: &LimitStep| LimitStep {
        cost: 0,
        lease: None,
        ..*s
    };
    let reason = if numbers(&a.step) != numbers(&b.step) {
        "with different numbers (their overrides matched differently)"
    } else if a.step.lease.is_some() && !same_keys(&first.calls, &other.calls) {
        "on a concurrency limit, but not on every limit of the rule: one lease cannot hold both"
    } else {
        return Ok(());
    };
    Err(Error::ConflictingParts {
        rule: first.rule.name.to_string(),
        first: first_index,
        second: other_index,
        reason,
    })
}

fn same_keys(a: &[LimitCall], b: &[LimitCall]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(a, b)| a.key == b.key)
}

/// The calls of `group` with each counter once (merged by [`merge`], so its calls on one key
/// are equal), and for each call of each part in order, where its counter is among them.
pub(super) fn unique(group: &[&Resolved]) -> (Vec<LimitCall>, Vec<usize>) {
    let mut calls: Vec<LimitCall> = Vec::new();
    let mut at = Vec::new();
    let mut seen: HashMap<&LimitKey, usize> = HashMap::new();
    for call in group.iter().flat_map(|r| &r.calls) {
        let index = *seen.entry(&call.key).or_insert_with(|| {
            calls.push(call.clone());
            calls.len() - 1
        });
        debug_assert_eq!(calls[index], *call, "merged calls on one counter are equal");
        at.push(index);
    }
    (calls, at)
}
