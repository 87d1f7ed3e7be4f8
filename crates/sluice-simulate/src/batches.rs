//! Hot keys in the simulator: each rule whose limit can take batches, replayed again across
//! `--nodes` nodes that take their units in batches from one shared store, beside the exact path,
//! so that what the batches change (README, "Hot keys": the over- and under-admission bounds)
//! shows in the same report and plots.
//!
//! A rule is replayed with batches when it has one limit of an algorithm that takes batches and
//! a capacity of at least 2; `max` is capped at that capacity. Its row is labelled
//! `<rule>+batches`. Batches whose hold time has passed go back when their identity is next
//! asked about, or earlier when the limiter's background task runs: the amount given back may
//! differ by the units that drained meanwhile from one run to the next, never the bound.

use std::sync::Arc;
use std::time::Duration;

use sluice::model::{Batches, batch_refusal};
use sluice::{Limiter, ManualClock, MemoryStore, Rule};

use crate::error::SimulateError;

/// The label of a rule's row with batches.
pub fn label(rule: &str) -> String {
    format!("{rule}+batches")
}

/// The rules that can take batches, given batches of up to `max` units held for `hold`.
pub fn rules(rules: &[(String, Rule)], max: u64, hold: Duration) -> Vec<(String, Rule)> {
    rules
        .iter()
        .filter_map(|(name, rule)| {
            let [limit] = rule.limits.as_slice() else {
                return None;
            };
            let capacity = limit.capacity();
            if batch_refusal(limit.algorithm).is_some() || capacity < 2 || limit.count_denied {
                return None;
            }
            let mut limit = limit.clone();
            limit.batch = Some(Batches::new(max.clamp(2, capacity), hold));
            let mut rule = rule.clone();
            rule.limits = vec![limit];
            Some((name.clone(), rule))
        })
        .collect()
}

/// `nodes` limiters deciding `rules` on one shared memory store.
pub fn fleet(
    rules: &[(String, Rule)],
    nodes: usize,
    clock: &ManualClock,
) -> Result<Vec<Limiter>, SimulateError> {
    let clock = Arc::new(clock.clone());
    let store = Arc::new(MemoryStore::with_clock(clock.clone()));
    (0..nodes.max(1))
        .map(|_| {
            Ok(Limiter::builder(store.clone())
                .clock(clock.clone())
                .rules(rules.iter().cloned())
                .build()?)
        })
        .collect()
}
