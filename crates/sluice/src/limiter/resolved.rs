//! One part of a [`Limiter::check_all`](super::Limiter::check_all) request, resolved: its rule
//! and store calls, or the answer given without the store. `check_all` makes it; `repeated` and
//! `check_all_cache` read it, below `check_all`.
//!
//! Invariant: a part with an `answer` asks the store nothing (its `calls` are empty).

use std::sync::Arc;

use super::choice::Picks;
use super::compile::CompiledRule;
use crate::model::Decision;
use crate::store::LimitCall;

/// A part resolved into its store calls, or answered without the store (a condition that does
/// not hold, an `unlimited` or `deny` override).
pub(super) struct Resolved {
    pub(super) rule: Arc<CompiledRule>,
    pub(super) picks: Option<Picks>,
    pub(super) calls: Vec<LimitCall>,
    /// Whether the part only looks (cost 0).
    pub(super) look: bool,
    pub(super) answer: Option<Decision>,
}

impl Resolved {
    /// Whether the part goes to the store in the step of looks (`true`) or of applies.
    pub(super) fn asks(&self, look: bool) -> bool {
        self.answer.is_none() && self.look == look
    }
}
