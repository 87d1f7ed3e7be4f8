//! The metrics of one rule's hot-key batches (named in the library's metric catalog): units
//! held, taken and given back, decisions answered from a batch, and batches asked for.
//!
//! Invariant: the handles are made once per rule when it is compiled, so spending a unit costs
//! an atomic add, never a lookup by name.

use metrics::{Counter, Gauge};

use crate::metric_catalog::names;
use crate::model::Name;

/// The metric handles of one rule's batches.
#[derive(Debug)]
pub(super) struct HeldMeters {
    pub(super) held: Gauge,
    pub(super) taken: Counter,
    pub(super) given_back: Counter,
    pub(super) spent: Counter,
    pub(super) takes: Counter,
    pub(super) refused: Counter,
}

impl HeldMeters {
    pub(super) fn new(rule: &Name) -> HeldMeters {
        let rule = rule.to_string();
        HeldMeters {
            held: metrics::gauge!(names::BATCH_UNITS_HELD, "rule" => rule.clone()),
            taken: metrics::counter!(names::BATCH_UNITS_TAKEN_TOTAL, "rule" => rule.clone()),
            given_back: metrics::counter!(names::BATCH_UNITS_GIVEN_BACK_TOTAL, "rule" => rule.clone()),
            spent: metrics::counter!(names::BATCH_DECISIONS_TOTAL, "rule" => rule.clone()),
            takes: metrics::counter!(names::BATCH_TAKES_TOTAL, "rule" => rule.clone(), "result" => "granted"),
            refused: metrics::counter!(names::BATCH_TAKES_TOTAL, "rule" => rule, "result" => "refused"),
        }
    }
}
