//! `Verdict`: the compact answer to one check, for callers in the same process that act on it
//! at once.
//!
//! A [`Decision`] says everything about a check (each limit's numbers, blocks, leases, the
//! reason); building it is most of what an in-memory check costs beyond the store's own step. A
//! verdict keeps the three numbers a caller acts on: whether to go on, how long to wait if not,
//! and how many units are left. `Limiter::check` gives the full decision of the same check.
//!
//! Invariant: a check's verdict is [`Verdict::of`] its decision, whichever way it was made.

use super::Decision;

/// Whether a request may proceed, and the numbers to act on: the part of a [`Decision`] an
/// in-process caller reads on every request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Verdict {
    /// Whether the caller may proceed ([`Decision::allowed`]).
    pub allowed: bool,
    /// When denied: the earliest wait after which the same request could pass
    /// ([`Decision::retry_after_ms`]).
    pub retry_after_ms: Option<u64>,
    /// Units left in the most restrictive limit after this check ([`Decision::remaining`]).
    pub remaining: u64,
}

impl Verdict {
    /// The verdict a decision gives.
    #[inline]
    pub fn of(d: &Decision) -> Verdict {
        Verdict {
            allowed: d.allowed,
            retry_after_ms: d.retry_after_ms,
            remaining: d.remaining,
        }
    }
}
