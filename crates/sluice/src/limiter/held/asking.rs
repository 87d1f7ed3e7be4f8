//! A batch being asked for, from the request that asks to its end, and the requests that wait
//! for it.
//!
//! Invariants: a batch being asked for always ends, recorded as taken, refused, or abandoned
//! when the request asking is dropped before the store answered (its [`Asking`] guard); every end
//! wakes the requests waiting for it; a wait lasts at most until its deadline.

use std::sync::Arc;

use tokio::sync::watch;

use super::Holdings;
use crate::store::LimitKey;

/// A batch being asked for: ends it as abandoned when dropped before the store answered (the
/// request asking was dropped mid-call), so the key can ask again and its waiters wake.
#[derive(Debug)]
pub(super) struct Asking {
    held: Arc<Holdings>,
    key: LimitKey,
    armed: bool,
}

impl Asking {
    pub(super) fn new(held: &Arc<Holdings>, key: &LimitKey) -> Asking {
        Asking {
            held: Arc::clone(held),
            key: key.clone(),
            armed: true,
        }
    }

    /// The store answered: the batch is recorded as taken or refused instead.
    pub(super) fn answered(mut self) {
        self.armed = false;
    }
}

impl Drop for Asking {
    fn drop(&mut self) {
        if self.armed {
            self.held.abandoned(&self.key);
        }
    }
}

/// Waits until the batch being asked for ends, or `deadline`; says whether it ended. Without a
/// Tokio runtime (no timer to bound the wait) it does not wait.
pub(super) async fn wait_for(
    mut landed: watch::Receiver<u64>,
    deadline: tokio::time::Instant,
) -> bool {
    if tokio::runtime::Handle::try_current().is_err() {
        return false;
    }
    matches!(
        tokio::time::timeout_at(deadline, landed.changed()).await,
        Ok(Ok(()))
    )
}
