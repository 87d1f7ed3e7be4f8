//! The billing days this node has seen identities keep on settable monthly quotas, so that
//! steady traffic of an identity with its own day is decided in one call.
//!
//! A node cannot know an identity's billing day before the decision reads it (it lives in
//! `{state key}:r`, read inside the decision's own script). It sends the day it assumes the
//! identity keeps (none, unless seen) with the period that day gives; `lua/decide.lua` answers
//! with the day kept, writing nothing, when it is another, and the node decides again with that
//! one (`decision.rs`). This cache is only the first guess, never the truth: a stale entry costs
//! one more call, never a wrong decision.
//!
//! Invariants: only identities that keep a day are kept (a miss assumes none: the limit's own
//! day), and at most [`MAX_ANCHORS`] of them: a full cache is emptied and fills again from the
//! replies.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use super::keys;
use crate::model::{Period, PeriodUnit};
use crate::store::LimitCall;

/// The most identities' days a node keeps.
pub const MAX_ANCHORS: usize = 4096;

/// State key → the billing day the identity keeps.
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
    /// The day to assume each call's identity keeps: the one last seen, for a settable monthly
    /// quota; `None` for none (the limit's own day) and for every other limit. Empty (no
    /// allocation, no lock) when no call is a settable monthly quota.
    pub fn assumed(&self, prefix: &str, calls: &[LimitCall]) -> Vec<Option<u8>> {
        if !calls.iter().any(|call| month_of(call).is_some()) {
            return Vec::new();
        }
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        calls
            .iter()
            .map(|call| {
                month_of(call)?;
                if seen.is_empty() {
                    return None;
                }
                seen.get(&keys::state_key(prefix, &call.key)).copied()
            })
            .collect()
    }

    /// Keeps the day `state_key`'s identity keeps, or forgets it for `None`.
    pub fn note(&self, state_key: String, day: Option<u8>) {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        match day {
            None => {
                if !seen.is_empty() {
                    seen.remove(&state_key);
                }
            }
            Some(day) => {
                if seen.len() >= MAX_ANCHORS && !seen.contains_key(&state_key) {
                    seen.clear();
                }
                seen.insert(state_key, day);
            }
        }
    }

    /// The day last seen for `state_key`'s identity, if it keeps one.
    pub fn get(&self, state_key: &str) -> Option<u8> {
        let seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        seen.get(state_key).copied()
    }
}
