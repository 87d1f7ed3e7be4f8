//! The caller's deadline: the instant after which nobody waits for a check's answer.
//!
//! A caller that gives up on a decision (Envoy after its rate-limit timeout, a client after its
//! `grpc-timeout`) fails open or closed on its side; a decision made for it after that is work
//! answered to nobody, and under overload it is what keeps the decisions somebody waits for in a
//! queue. [`within`] runs a future (one request's checks) under a deadline; the limiter reads it
//! where a decision would ask a remote store:
//!
//! - past the deadline, the store is not asked: the rule's fail policy answers at once, with
//!   `reason: "deadline"`;
//! - before it, the store call waits at most until the deadline (and never longer than
//!   `store.timeout`); a call cut short by the deadline answers the same way.
//!
//! Invariants: a decision answered for a deadline made no store call after the deadline had
//! passed; a deadline never feeds the breaker (the store did not fail, the caller left); an
//! in-process store is never skipped (its answer costs less than the fail policy's). Checks
//! outside [`within`] have no deadline and pay one task-local read on the remote path only.

use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

tokio::task_local! {
    static DEADLINE: Instant;
}

/// The reason a decision answered for a deadline carries.
pub const REASON: &str = "deadline";

/// Runs `checks` with `deadline` as the caller's deadline for every check it makes.
pub fn within<F: Future>(deadline: Instant, checks: F) -> impl Future<Output = F::Output> {
    DEADLINE.scope(deadline, checks)
}

/// The time left before the caller's deadline: `None` without one, zero once it has passed.
pub fn remaining() -> Option<Duration> {
    DEADLINE
        .try_with(|deadline| deadline.saturating_duration_since(Instant::now()))
        .ok()
}

/// Whether the caller's deadline has passed.
pub(crate) fn passed() -> bool {
    remaining().is_some_and(|left| left.is_zero())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_deadline_holds_inside_its_scope_only() {
        assert_eq!(remaining(), None);
        assert!(!passed());
        let deadline = Instant::now() + Duration::from_millis(30);
        within(deadline, async {
            assert_eq!(remaining(), Some(Duration::from_millis(30)));
            tokio::time::advance(Duration::from_millis(30)).await;
            assert_eq!(remaining(), Some(Duration::ZERO));
            assert!(passed());
        })
        .await;
        assert_eq!(remaining(), None);
    }
}
