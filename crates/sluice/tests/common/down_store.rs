//! A store that is down, to test fail policies without killing anything.

use std::future::pending;
use std::sync::atomic::{AtomicU64, Ordering};

use sluice::Store;
use sluice::algorithm::Mode;
use sluice::store::{BlockEntry, BoxFuture, LimitCall, LimitKey, StoreError, StoreReply};

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

    fn fail<'a, T: Send + 'a>(&'a self) -> BoxFuture<'a, Result<T, StoreError>> {
        if self.hangs {
            Box::pin(pending())
        } else {
            Box::pin(async { Err(StoreError::transient("down", "connection refused")) })
        }
    }
}

impl Store for DownStore {
    fn name(&self) -> &'static str {
        "down"
    }
    fn decide<'a>(
        &'a self,
        _calls: &'a [LimitCall],
        _mode: Mode,
    ) -> BoxFuture<'a, Result<StoreReply, StoreError>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.fail()
    }
    fn reset<'a>(&'a self, _keys: &'a [LimitKey]) -> BoxFuture<'a, Result<(), StoreError>> {
        self.fail()
    }
    fn block<'a>(&'a self, _key: &'a LimitKey, _d: u64) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.fail()
    }
    fn unblock<'a>(&'a self, _key: &'a LimitKey) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.fail()
    }
    fn blocks<'a>(&'a self, _rule: &'a str) -> BoxFuture<'a, Result<Vec<BlockEntry>, StoreError>> {
        self.fail()
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.fail()
    }
}
