//! [`LeaseGuard`]: a lease released when the work it covers ends, however it ends.

use super::Limiter;
use crate::error::Error;

/// Releases a lease when dropped (or when [`LeaseGuard::release`] is called): hold it for as
/// long as the work the lease covers, so that an early return, an error or a panic gives the
/// place back at once rather than at the lease's expiry.
///
/// Dropping it spawns the release on the current Tokio runtime; outside one, the lease ends by
/// itself at its expiry (logged). A failed release is logged the same way.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use std::time::Duration;
/// use sluice::{Limiter, MemoryStore, Rule, model::Limit};
///
/// let limiter = Limiter::builder(MemoryStore::new())
///     .rule("export", Rule::new(vec![Limit::concurrency(&["tenant"], 1, Duration::from_secs(60))]))
///     .build()?;
/// let tenant = [("tenant", "t1")];
/// let d = limiter.check("export", &tenant).await?;
/// let guard = limiter.lease_guard(d.lease.clone().unwrap());
/// // ... the export runs ...
/// guard.release().await?;
/// assert!(limiter.check("export", &tenant).await?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug)]
#[must_use = "dropping the guard releases the lease at once"]
pub struct LeaseGuard {
    held: Option<(Limiter, String)>,
}

impl Limiter {
    /// A guard that releases `lease` when dropped.
    pub fn lease_guard(&self, lease: impl Into<String>) -> LeaseGuard {
        LeaseGuard {
            held: Some((self.clone(), lease.into())),
        }
    }
}

impl LeaseGuard {
    /// Releases the lease now, and says whether it was still held.
    pub async fn release(mut self) -> Result<bool, Error> {
        match self.held.take() {
            Some((limiter, lease)) => limiter.release(&lease).await,
            None => Ok(false),
        }
    }

    /// The lease id.
    pub fn lease(&self) -> Option<&str> {
        self.held.as_ref().map(|(_, lease)| lease.as_str())
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        let Some((limiter, lease)) = self.held.take() else {
            return;
        };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(%lease, "no runtime to release a lease on; it ends at its expiry");
            return;
        };
        runtime.spawn(async move {
            if let Err(error) = limiter.release(&lease).await {
                tracing::warn!(%lease, %error, "could not release a lease; it ends at its expiry");
            }
        });
    }
}
