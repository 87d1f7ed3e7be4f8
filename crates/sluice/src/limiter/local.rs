//! The `local` fail policy: while the store cannot be asked, this node decides on its own memory
//! store, each limit cut to this node's share of it ([`Options::nodes`](super::Options::nodes)).
//!
//! Invariants:
//! - with `nodes` = 1 (the default) the local store decides the rule's own numbers, so one node
//!   admits what the store would have;
//! - with `nodes` = N, each limit's count and burst are divided by N, rounded down and never below
//!   one unit ([`Params::share`](crate::algorithm::Params::share)): N nodes cut off together
//!   admit at most the limit between them per window (N units when the limit is below N), where
//!   each deciding the whole limit would admit N times it;
//! - the local store keys its state as the store does, so one identity is one local counter,
//!   whichever path degraded to it.

use std::borrow::Cow;

use super::Limiter;
use crate::algorithm::{LimitStep, Mode};
use crate::store::{LimitCall, StoreError, StoreReply};

impl Limiter {
    /// The local store's decision of `calls`, on this node's share of each limit. An error when
    /// the local store is full of live keys and cannot count a new identity.
    pub(super) fn decide_locally(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> Result<StoreReply, StoreError> {
        self.inner
            .local
            .decide_now(&shares(calls, self.inner.options.nodes), mode)
    }
}

/// `calls` with each limit cut to one of `nodes` nodes' share.
fn shares(calls: &[LimitCall], nodes: std::num::NonZeroU32) -> Cow<'_, [LimitCall]> {
    if nodes.get() == 1 {
        return Cow::Borrowed(calls);
    }
    Cow::Owned(
        calls
            .iter()
            .map(|call| LimitCall {
                key: call.key.clone(),
                step: LimitStep {
                    params: call.step.params.share(nodes),
                    ..call.step
                },
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use std::num::NonZeroU32;
    use std::sync::Arc;

    use crate::model::{Algorithm, FailPolicy, Limit};
    use crate::store::{BlocksCursor, BlocksPage, LimitKey};
    use crate::{ManualClock, Micros, Options, Rule, Store};

    use super::*;

    /// A store every call of which fails, as a store cut off by a partition.
    #[derive(Debug)]
    struct Unreachable;

    fn cut_off() -> StoreError {
        StoreError::transient("unreachable", "partitioned")
    }

    impl Store for Unreachable {
        fn name(&self) -> &'static str {
            "unreachable"
        }
        async fn decide(&self, _: &[LimitCall], _: Mode) -> Result<StoreReply, StoreError> {
            Err(cut_off())
        }
        async fn reset(&self, _: &[LimitKey]) -> Result<(), StoreError> {
            Err(cut_off())
        }
        async fn block(&self, _: &LimitKey, _: std::time::Duration) -> Result<Micros, StoreError> {
            Err(cut_off())
        }
        async fn unblock(&self, _: &LimitKey) -> Result<bool, StoreError> {
            Err(cut_off())
        }
        async fn blocks(&self, _: &str, _: &BlocksCursor) -> Result<BlocksPage, StoreError> {
            Err(cut_off())
        }
        async fn ping(&self) -> Result<(), StoreError> {
            Err(cut_off())
        }
    }

    /// `nodes` limiters, each on a store it cannot reach, told that `nodes` nodes share the limit.
    fn fleet(algorithm: Algorithm, rate: &str, nodes: u32) -> Vec<Limiter> {
        let clock = Arc::new(ManualClock::at_2026());
        let mut limit = Limit::new(&["id"], rate.parse().unwrap(), algorithm);
        limit.burst = None;
        let mut rule = Rule::new(vec![limit]);
        rule.fail = Some(FailPolicy::Local);
        (0..nodes)
            .map(|_| {
                Limiter::builder(Unreachable)
                    .clock(clock.clone())
                    .options(Options {
                        nodes: NonZeroU32::new(nodes).unwrap(),
                        ..Options::default()
                    })
                    .rule("api", rule.clone())
                    .build()
                    .unwrap()
            })
            .collect()
    }

    async fn admitted(fleet: &[Limiter], asks_per_node: usize) -> usize {
        let mut admitted = 0;
        for node in fleet {
            for _ in 0..asks_per_node {
                let d = node.check("api", &[("id", "tenant")]).await.unwrap();
                assert!(d.degraded, "every decision is the fail policy's");
                admitted += usize::from(d.allowed);
            }
        }
        admitted
    }

    #[tokio::test]
    async fn four_nodes_cut_off_admit_the_limit_between_them_not_four_times_it() {
        for algorithm in [
            Algorithm::FixedWindow,
            Algorithm::SlidingLog,
            Algorithm::SlidingWindow,
            Algorithm::Gcra,
            Algorithm::TokenBucket,
        ] {
            let fleet = fleet(algorithm, "100/1m", 4);
            assert_eq!(admitted(&fleet, 100).await, 100, "{algorithm:?}");
        }
    }

    #[tokio::test]
    async fn one_node_by_default_decides_the_whole_limit() {
        let fleet = fleet(Algorithm::FixedWindow, "100/1m", 1);
        assert_eq!(admitted(&fleet, 150).await, 100);
    }

    #[tokio::test]
    async fn a_limit_below_the_fleet_still_admits_one_unit_per_node() {
        let fleet = fleet(Algorithm::FixedWindow, "3/1m", 5);
        assert_eq!(admitted(&fleet, 10).await, 5);
    }
}
