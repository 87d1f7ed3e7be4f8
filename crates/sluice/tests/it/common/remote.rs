//! The memory store posing as a store in another process, so that the limiter treats it as
//! remote (a denial cache, the in-flight bound, the standing queue), counting the decisions
//! asked of it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use sluice::algorithm::Mode;
use sluice::store::{BlocksCursor, BlocksPage, LimitCall, LimitKey, StoreError, StoreReply};
use sluice::{MemoryStore, Micros, Store};

/// A memory store that says it is remote (the trait's default `in_process`: false).
#[derive(Debug, Default)]
pub struct Remote {
    store: MemoryStore,
    /// Decisions asked of it, shared with whoever keeps a clone.
    pub calls: Arc<AtomicUsize>,
}

impl Remote {
    /// `store`, seen as remote.
    pub fn new(store: MemoryStore) -> Remote {
        Remote {
            store,
            calls: Arc::default(),
        }
    }
}

impl Store for Remote {
    fn name(&self) -> &'static str {
        "remote"
    }
    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        Store::decide(&self.store, calls, mode).await
    }
    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        Store::reset(&self.store, keys).await
    }
    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        Store::block(&self.store, key, duration).await
    }
    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        Store::unblock(&self.store, key).await
    }
    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        Store::blocks(&self.store, rule, cursor).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Store::ping(&self.store).await
    }
}
