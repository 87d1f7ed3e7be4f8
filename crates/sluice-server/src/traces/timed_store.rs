//! The store as decisions see it while traces are on: the same store, with the time of each
//! call added up for the decision's span.
//!
//! The time goes to the task of the decision being traced ([`timing`] scopes it): the store's
//! futures are polled by that task, so a task-local counter needs no locking, and a call made
//! outside a traced decision (an admin reset, a lease release) adds to nothing. The wrapper is
//! only built when traces are on; with traces off the limiter holds the store itself.

use std::cell::Cell;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice::DynStore;
use sluice::algorithm::{LimitOutcome, LimitStep, Mode, RuntimeNumbers};
use sluice::model::{Micros, Period};
use sluice::store::BoxFuture;
use sluice::store::{
    BlocksCursor, BlocksPage, GiveBackCall, KeyRef, LeaseCall, LimitCall, LimitKey, ReserveCall,
    RuntimeEntry, SettleCall, StoreError, StoreReply,
};

tokio::task_local! {
    static STORE_TIME: Cell<Duration>;
}

/// Runs `decision`, returning its output and the time its store calls took.
pub async fn timing<F: Future>(decision: F) -> (F::Output, Duration) {
    STORE_TIME
        .scope(Cell::new(Duration::ZERO), async {
            let output = decision.await;
            (output, STORE_TIME.with(Cell::get))
        })
        .await
}

fn add(since: Instant) {
    let _ = STORE_TIME.try_with(|t| t.set(t.get() + since.elapsed()));
}

/// A store whose decision calls are timed for the traced decision that makes them.
#[derive(Debug)]
pub struct TimedStore(pub Arc<dyn DynStore>);

impl TimedStore {
    /// `store`, timed.
    pub fn wrap(store: Arc<dyn DynStore>) -> Arc<dyn DynStore> {
        Arc::new(TimedStore(store))
    }
}

impl DynStore for TimedStore {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn in_process(&self) -> bool {
        self.0.in_process()
    }

    fn decide<'a>(
        &'a self,
        calls: &'a [LimitCall],
        mode: Mode,
    ) -> BoxFuture<'a, Result<StoreReply, StoreError>> {
        Box::pin(async move {
            let since = Instant::now();
            let reply = self.0.decide(calls, mode).await;
            add(since);
            reply
        })
    }

    fn decide_one_now(
        &self,
        key: KeyRef<'_>,
        step: &LimitStep,
        mode: Mode,
    ) -> Option<Result<(Micros, LimitOutcome), StoreError>> {
        let since = Instant::now();
        let answer = self.0.decide_one_now(key, step, mode);
        add(since);
        answer
    }

    fn reset<'a>(&'a self, keys: &'a [LimitKey]) -> BoxFuture<'a, Result<(), StoreError>> {
        self.0.reset(keys)
    }

    fn block<'a>(
        &'a self,
        key: &'a LimitKey,
        duration: Duration,
    ) -> BoxFuture<'a, Result<Micros, StoreError>> {
        self.0.block(key, duration)
    }

    fn unblock<'a>(&'a self, key: &'a LimitKey) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.unblock(key)
    }

    fn blocks<'a>(
        &'a self,
        rule: &'a str,
        cursor: &'a BlocksCursor,
    ) -> BoxFuture<'a, Result<BlocksPage, StoreError>> {
        self.0.blocks(rule, cursor)
    }

    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.0.ping()
    }

    fn release<'a>(
        &'a self,
        leases: &'a [LeaseCall],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>> {
        self.0.release(leases)
    }

    fn renew<'a>(
        &'a self,
        leases: &'a [LeaseCall],
    ) -> BoxFuture<'a, Result<Vec<Option<Micros>>, StoreError>> {
        self.0.renew(leases)
    }

    fn reserve<'a>(
        &'a self,
        reservations: &'a [ReserveCall],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let since = Instant::now();
            let reply = self.0.reserve(reservations).await;
            add(since);
            reply
        })
    }

    fn settle<'a>(
        &'a self,
        settlements: &'a [SettleCall],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>> {
        self.0.settle(settlements)
    }

    fn give_back<'a>(&'a self, calls: &'a [GiveBackCall]) -> BoxFuture<'a, Result<(), StoreError>> {
        // A batch that ended is given back by the decision that found it ended: its time counts
        // for that decision.
        Box::pin(async move {
            let since = Instant::now();
            let reply = self.0.give_back(calls).await;
            add(since);
            reply
        })
    }

    fn set_runtime<'a>(
        &'a self,
        key: &'a LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static Period>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.set_runtime(key, numbers, max_entries, period)
    }

    fn runtime<'a>(
        &'a self,
        key: &'a LimitKey,
    ) -> BoxFuture<'a, Result<Option<RuntimeNumbers>, StoreError>> {
        self.0.runtime(key)
    }

    fn runtime_entries<'a>(
        &'a self,
        rule: &'a str,
        limit_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<RuntimeEntry>, StoreError>> {
        self.0.runtime_entries(rule, limit_id)
    }

    fn remove_runtime<'a>(
        &'a self,
        key: &'a LimitKey,
        period: Option<&'static Period>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.0.remove_runtime(key, period)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice::MemoryStore;

    #[tokio::test]
    async fn store_time_goes_to_the_traced_decision_only() {
        let store = TimedStore::wrap(Arc::new(MemoryStore::new()));
        // Outside a traced decision, a call adds to nothing (and does not fail).
        store.ping().await.expect("a memory store answers");
        let ((), time) = timing(async {
            store.decide(&[], Mode::Apply).await.expect("an empty call");
        })
        .await;
        assert!(time > Duration::ZERO, "the store call was timed");
        let ((), nothing) = timing(async {}).await;
        assert_eq!(nothing, Duration::ZERO);
    }

    #[tokio::test]
    async fn run_time_limits_reach_the_store() {
        let store = TimedStore::wrap(Arc::new(MemoryStore::new()));
        let key = LimitKey {
            rule: "api".into(),
            limit_id: "customer".into(),
            identity: "customer=42".into(),
        };
        let numbers = RuntimeNumbers::counts(5, 6);
        assert!(store.set_runtime(&key, numbers, 10, None).await.unwrap());
        assert_eq!(store.runtime(&key).await.unwrap(), Some(numbers));
        let listed = store.runtime_entries("api", "customer").await.unwrap();
        assert_eq!(listed.len(), 1);
        assert!(store.remove_runtime(&key, None).await.unwrap());
        assert_eq!(store.runtime(&key).await.unwrap(), None);
    }
}
