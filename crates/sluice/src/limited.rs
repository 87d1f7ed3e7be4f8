//! `Limited`: the error a rate-limited function returns, and the process-wide limiter that
//! `#[sluice::limited]` uses when it is given none.
//!
//! A denial is a value inside the limiter ([`Decision`]); it becomes an error only at the edge
//! of a function that must not run when denied. [`Limited`] carries the whole decision, so the
//! caller can still tell when to retry or show a countdown. Bad input to the check (a missing
//! attribute, an unknown rule) is [`Limited::Check`], never a panic.
//!
//! The global limiter is set at most once ([`set_global_limiter`]); setting it again is refused
//! rather than silently swapping the limiter under running code.

use std::sync::OnceLock;

use crate::error::Error;
use crate::limiter::{Attributes, Check, LeaseGuard, Limiter};
use crate::model::Decision;

/// Why a rate-limited function did not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Limited {
    /// The rule denied the call; the decision says when to retry.
    #[error("{}", denial_text(decision, message.as_deref()))]
    Denied {
        /// The limiter's answer.
        decision: Box<Decision>,
        /// The rule's message for denied requests, if it has one.
        message: Option<String>,
    },
    /// The check itself failed: unknown rule, missing attribute, absurd cost.
    #[error("rate limit check failed: {0}")]
    Check(#[from] Error),
    /// No limiter was given and none was set with [`set_global_limiter`].
    #[error(
        "no limiter: pass `limiter = ...` to #[sluice::limited] or call sluice::set_global_limiter"
    )]
    NoLimiter,
}

fn denial_text(d: &Decision, message: Option<&str>) -> String {
    let retry = d
        .retry_after_ms
        .map(|ms| format!("; retry after {ms} ms"))
        .unwrap_or_default();
    match message {
        Some(m) => format!("{m} (rule `{}`{retry})", d.rule),
        None => format!("rate limited by rule `{}`{retry}", d.rule),
    }
}

impl Limited {
    /// The decision, when the call was denied.
    pub fn decision(&self) -> Option<&Decision> {
        match self {
            Limited::Denied { decision, .. } => Some(decision),
            _ => None,
        }
    }
}

static GLOBAL: OnceLock<Limiter> = OnceLock::new();

/// Sets the limiter that `#[sluice::limited]` uses when it has no `limiter = ...` argument.
///
/// It can be set once per process; a second call returns the limiter it was given back.
pub fn set_global_limiter(limiter: Limiter) -> Result<(), Limiter> {
    GLOBAL.set(limiter)
}

/// The limiter set with [`set_global_limiter`], if any.
pub fn global_limiter() -> Option<&'static Limiter> {
    GLOBAL.get()
}

/// Checks one call against `rule` (usually [`Check::ONE`], or `Check::cost(n)`): `Ok` with the
/// decision when allowed.
///
/// `limiter` `None` means the global limiter. This is what `#[sluice::limited]` expands to, and is
/// usable by hand where an attribute does not fit.
pub async fn check_call(
    limiter: Option<&Limiter>,
    rule: &str,
    attrs: &(impl Attributes + ?Sized),
    check: Check,
) -> Result<Decision, Limited> {
    let limiter = match limiter {
        Some(l) => l,
        None => global_limiter().ok_or(Limited::NoLimiter)?,
    };
    let decision = limiter.check_with(rule, attrs, check).await?;
    if decision.allowed {
        Ok(decision)
    } else {
        let message = limiter.denial_message(&decision);
        Err(Limited::Denied {
            decision: Box::new(decision),
            message,
        })
    }
}

/// A guard on the lease of an allowed decision (rules with a concurrency limit), released when
/// dropped; `None` when the decision holds no lease. `limiter` `None` means the global limiter.
/// `#[sluice::limited]` holds it while the function body runs.
pub fn hold_lease(limiter: Option<&Limiter>, decision: Decision) -> Option<LeaseGuard> {
    let lease = decision.lease?;
    let limiter = match limiter {
        Some(limiter) => limiter,
        None => global_limiter()?,
    };
    Some(limiter.lease_guard(lease))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn without_a_limiter_the_call_fails_clearly() {
        // No unit test sets the global limiter, so this process has none.
        let e = check_call(None, "any", &[("id", "1")], Check::ONE)
            .await
            .unwrap_err();
        assert_eq!(e, Limited::NoLimiter);
        assert!(e.to_string().contains("set_global_limiter"));
    }
}
