//! Requests that find nothing held while a batch for their key is on its way wait for it instead
//! of calling the store themselves, and a batch whose asking request is dropped mid-call ends, so
//! the key asks again. Counted on a store that holds every call until it is let through.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use crate::algorithm::Mode;
use crate::model::{Algorithm, Batches, Limit, Micros, Rule};
use crate::store::StoreReply;
use crate::store::{BlocksCursor, BlocksPage, GiveBackCall, LimitCall, LimitKey, StoreError};
use crate::{Limiter, MemoryStore, Store};

/// A global limit has no attributes.
const NONE: &[(&str, &str)] = &[];

/// The memory store as if it ran in another process, answering decisions only once `open`.
#[derive(Debug, Clone)]
struct Gated(Arc<Gate>);

#[derive(Debug)]
struct Gate {
    store: MemoryStore,
    open: watch::Sender<bool>,
    calls: AtomicU64,
}

impl std::ops::Deref for Gated {
    type Target = Gate;
    fn deref(&self) -> &Gate {
        &self.0
    }
}

impl Store for Gated {
    fn name(&self) -> &'static str {
        "gated"
    }
    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
        self.store.decide(calls, mode).await
    }
    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        self.store.reset(keys).await
    }
    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        self.store.block(key, duration).await
    }
    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        self.store.unblock(key).await
    }
    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        self.store.blocks(rule, cursor).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
    async fn give_back(&self, calls: &[GiveBackCall]) -> Result<(), StoreError> {
        self.store.give_back(calls).await
    }
}

/// A closed store and a limiter with batches on one global key; a store timeout long enough
/// that no wait here ends by it.
fn gated() -> (Gated, Limiter) {
    let store = Gated(Arc::new(Gate {
        store: MemoryStore::new(),
        open: watch::Sender::new(false),
        calls: AtomicU64::new(0),
    }));
    let limit = Limit::new(&[], "100000/1s".parse().unwrap(), Algorithm::Gcra)
        .with_batches(Batches::new(100, Duration::from_secs(1)));
    let limiter = Limiter::builder(store.clone())
        .timeout(Duration::from_secs(60))
        .rule("hot", Rule::new(vec![limit]))
        .build()
        .unwrap();
    (store, limiter)
}

/// Lets every spawned task run until it waits (the test runtime has one thread).
async fn settle() {
    for _ in 0..100 {
        tokio::task::yield_now().await;
    }
}

fn check(limiter: &Limiter) -> tokio::task::JoinHandle<bool> {
    let limiter = limiter.clone();
    tokio::spawn(async move { limiter.check("hot", NONE).await.unwrap().allowed })
}

#[tokio::test]
async fn a_burst_on_a_cold_key_waits_for_the_batch_on_its_way() {
    let (store, limiter) = gated();
    let first = check(&limiter);
    settle().await;
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        1,
        "the first asks a batch"
    );
    let burst: Vec<_> = (0..20).map(|_| check(&limiter)).collect();
    settle().await;
    assert_eq!(
        store.calls.load(Ordering::SeqCst),
        1,
        "the others wait for that batch instead of calling the store"
    );
    store.open.send_replace(true);
    assert!(first.await.unwrap());
    for request in burst {
        assert!(request.await.unwrap(), "admitted");
    }
    // Batches doubling from 2 serve 21 requests: a handful of calls, not one per request.
    let calls = store.calls.load(Ordering::SeqCst);
    assert!(calls < 10, "{calls} store calls for 21 requests");
    let units = &limiter.held_units()[0];
    assert_eq!(units.taken - units.held - units.given_back, 21, "{units:?}");
}

#[tokio::test]
async fn a_batch_whose_request_is_dropped_ends_and_the_key_asks_again() {
    let (store, limiter) = gated();
    let first = check(&limiter);
    settle().await;
    assert_eq!(store.calls.load(Ordering::SeqCst), 1);
    first.abort();
    assert!(first.await.unwrap_err().is_cancelled());
    // The next request asks its own batch rather than waiting for one that will never come.
    let second = check(&limiter);
    settle().await;
    assert_eq!(store.calls.load(Ordering::SeqCst), 2);
    store.open.send_replace(true);
    assert!(second.await.unwrap());
}
