//! A store that is down, to test fail policies without killing anything.

use std::future::pending;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use sluice::algorithm::Mode;
use sluice::store::{
    BlocksCursor, BlocksPage, LeaseCall, LimitCall, LimitKey, StoreError, StoreReply,
};
use sluice::{Micros, Store};

/// A store that is down: every call fails at once, or (with `hangs`) never answers.
#[derive(Debug, Default)]
pub struct DownStore {
    /// Never answer instead of failing.
    pub hangs: bool,
    /// Decisions asked of it.
    pub calls: AtomicU64,
}

impl DownStore {
    /// A store whose calls never complete.
    pub fn hanging() -> DownStore {
        DownStore {
            hangs: true,
            ..DownStore::default()
        }
    }

    /// Decisions asked so far.
    pub fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    async fn fail<T>(&self) -> Result<T, StoreError> {
        if self.hangs {
            pending().await
        } else {
            Err(StoreError::transient("down", "connection refused"))
        }
    }
}

impl Store for DownStore {
    fn name(&self) -> &'static str {
        "down"
    }
    async fn decide(&self, _calls: &[LimitCall], _mode: Mode) -> Result<StoreReply, StoreError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.fail().await
    }
    async fn reset(&self, _keys: &[LimitKey]) -> Result<(), StoreError> {
        self.fail().await
    }
    async fn block(&self, _key: &LimitKey, _for: Duration) -> Result<Micros, StoreError> {
        self.fail().await
    }
    async fn unblock(&self, _key: &LimitKey) -> Result<bool, StoreError> {
        self.fail().await
    }
    async fn blocks(&self, _rule: &str, _cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        self.fail().await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        self.fail().await
    }
    async fn release(&self, _leases: &[LeaseCall]) -> Result<Vec<bool>, StoreError> {
        self.fail().await
    }
    async fn renew(&self, _leases: &[LeaseCall]) -> Result<Vec<Option<Micros>>, StoreError> {
        self.fail().await
    }
}
