//! The store going down, or a partition cutting one region's nodes off from it: what the fail
//! policies admit across several nodes meanwhile.
//!
//! [`DownStore`] is the memory store, except that every call fails (as a lost connection would)
//! while the simulated clock is inside the outage. Each fail policy gets its own store and `N`
//! limiters on it, so `open`, `closed` and `local` are compared on the same requests: `open` admits
//! everything, `closed` nothing, and `local` up to the limit on each node (`N` times the limit in
//! all), or its share of it with `store.nodes` (`shares`), until the store is back. In a
//! partition only the cut-off nodes ask through the failing store; the others reach the same
//! state directly and keep deciding exactly.

use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::Duration;

use sluice::algorithm::Mode;
use sluice::store::{BlocksCursor, BlocksPage, LimitCall, LimitKey, StoreReply};
use sluice::{
    Clock, FailPolicy, Limiter, ManualClock, MemoryStore, Micros, Options, Rule, Store, StoreError,
};

use crate::error::SimulateError;

/// The fail policies, in the order reports show them.
pub const POLICIES: [FailPolicy; 3] = [FailPolicy::Open, FailPolicy::Closed, FailPolicy::Local];

/// The name of a policy in reports (as in config files).
pub fn policy_name(policy: FailPolicy) -> &'static str {
    match policy {
        FailPolicy::Open => "open",
        FailPolicy::Closed => "closed",
        FailPolicy::Local => "local",
        // A policy added to the library since; `POLICIES` lists the ones this simulator runs.
        _ => "other",
    }
}

/// A memory store that fails while the clock is within `[from_us, to_us)`.
#[derive(Debug)]
pub struct DownStore {
    inner: MemoryStore,
    clock: ManualClock,
    from_us: Micros,
    to_us: Micros,
}

impl DownStore {
    /// A store down from `from_us` to `to_us` (epoch µs, as the clock shows).
    pub fn new(clock: ManualClock, from_us: Micros, to_us: Micros) -> DownStore {
        DownStore {
            inner: MemoryStore::with_clock(Arc::new(clock.clone())),
            clock,
            from_us,
            to_us,
        }
    }

    fn check(&self) -> Result<(), StoreError> {
        if (self.from_us..self.to_us).contains(&self.clock.now_us()) {
            Err(StoreError::transient(
                "memory",
                "connection lost (simulated outage)",
            ))
        } else {
            Ok(())
        }
    }
}

impl Store for DownStore {
    fn name(&self) -> &'static str {
        "memory"
    }

    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        self.check()?;
        self.inner.decide(calls, mode).await
    }

    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        self.inner.reset(keys).await
    }

    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        self.inner.block(key, duration).await
    }

    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        self.inner.unblock(key).await
    }

    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        self.inner.blocks(rule, cursor).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.check()?;
        self.inner.ping().await
    }
}

/// Who loses the store, and how `local` divides a limit.
#[derive(Debug, Clone, Copy)]
pub struct Cut {
    /// Nodes in all.
    pub nodes: usize,
    /// The nodes that lose the store (the last ones): all of them when the store goes down, one
    /// region's in a partition.
    pub cut_off: usize,
    /// `store.nodes`: `local` decides `1 / shares` of each limit on each node.
    pub shares: NonZeroU32,
}

impl Cut {
    /// The store down for all `nodes`.
    pub fn store_down(nodes: usize, shares: NonZeroU32) -> Cut {
        Cut {
            nodes,
            cut_off: nodes,
            shares,
        }
    }

    /// A partition of `nodes`: the second half of them (at least one) cut off.
    pub fn partition(nodes: usize, shares: NonZeroU32) -> Cut {
        Cut {
            nodes,
            cut_off: nodes - nodes / 2,
            shares,
        }
    }
}

/// `cut.nodes` limiters deciding `rules` with `policy`, sharing one store that is down from
/// `from_us` to `to_us` for the last `cut.cut_off` of them.
pub fn fleet(
    rules: &[(String, Rule)],
    policy: FailPolicy,
    cut: Cut,
    clock: &ManualClock,
    (from_us, to_us): (Micros, Micros),
) -> Result<Vec<Limiter>, SimulateError> {
    let store = Arc::new(DownStore::new(clock.clone(), from_us, to_us));
    let nodes = cut.nodes.max(1);
    let reached = nodes - cut.cut_off.min(nodes);
    let rules: Vec<(String, Rule)> = rules
        .iter()
        .map(|(name, rule)| {
            let mut rule = rule.clone();
            rule.fail = Some(policy);
            (name.clone(), rule)
        })
        .collect();
    (0..nodes)
        .map(|n| {
            let builder = if n < reached {
                Limiter::builder(store.inner.clone())
            } else {
                Limiter::builder(store.clone())
            };
            Ok(builder
                .clock(Arc::new(clock.clone()))
                .options(Options {
                    nodes: cut.shares,
                    ..Options::default()
                })
                .rules(rules.clone())
                .build()?)
        })
        .collect()
}
