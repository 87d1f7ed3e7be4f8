//! The billing days this node has seen identities keep on settable monthly quotas, so that
//! steady traffic of an identity with its own day is decided in one call.
//!
//! A node cannot know an identity's billing day before the decision reads it (it lives in
//! `{state key}:r`, read inside the decision's own script). It sends the day it assumes with the
//! period that day gives; `lua/decide.lua` answers "moved", writing nothing, when the stored day
//! is another, and the node decides again with that one (`decision.rs`). This cache is only the
//! first guess, never the truth: a stale entry costs one more call, never a wrong decision.
//!
//! Invariants: only days other than the limit's own are kept (a miss assumes the limit's), and
//! at most [`MAX_ANCHORS`] of them: a full cache is emptied and fills again from the replies.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::keys;
use crate::model::{Period, PeriodUnit};
use crate::store::LimitCall;

/// The most identities' days a node keeps.
pub const MAX_ANCHORS: usize = 4096;

/// State key → the identity's own billing day.
#[derive(Debug, Default)]
pub struct Anchors {
    seen: Mutex<HashMap<String, u8>>,
}

/// The period of a call whose billing day the store reads: a settable monthly quota's.
pub fn month_of(call: &LimitCall) -> Option<&'static Period> {
    call.step
        .params
        .period
        .filter(|p| call.step.settable && p.unit() == PeriodUnit::Month)
}

impl Anchors {
    /// The day to assume for each call: the one last seen for its identity or the limit's own,
    /// for a settable monthly quota; `None` for any other limit. Empty (no allocation, no lock)
    /// when no call is a settable monthly quota.
    pub fn assumed(&self, prefix: &str, calls: &[LimitCall]) -> Vec<Option<u8>> {
        if !calls.iter().any(|call| month_of(call).is_some()) {
            return Vec::new();
        }
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        calls
            .iter()
            .map(|call| {
                let period = month_of(call)?;
                if seen.is_empty() {
                    return Some(period.anchor());
                }
                let key = keys::state_key(prefix, &call.key);
                Some(seen.get(&key).copied().unwrap_or(period.anchor()))
            })
            .collect()
    }

    /// The day one identity has now (from a decision that passed with it, or a change).
    pub fn saw(&self, prefix: &str, call: &LimitCall, day: u8) {
        let Some(period) = month_of(call) else { return };
        self.note(keys::state_key(prefix, &call.key), day, period.anchor());
    }

    /// Keeps `day` for `state_key`, or forgets it when it is the limit's own, `own`.
    pub fn note(&self, state_key: String, day: u8, own: u8) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        if day == own {
            if !seen.is_empty() {
                seen.remove(&state_key);
            }
            return;
        }
        if seen.len() >= MAX_ANCHORS && !seen.contains_key(&state_key) {
            seen.clear();
        }
        seen.insert(state_key, day);
    }

    /// The day last seen for `state_key`, if not the limit's own.
    pub fn get(&self, state_key: &str) -> Option<u8> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(state_key).copied()
    }
}
