//! `Batches`: a limit's opt-in to hot-key batches, where a node takes units from the store in
//! batches and spends them in memory (see `limiter::held` for the mode itself).
//!
//! Invariants kept by [`Batches::validate`]: only on `token_bucket`, `gcra` and `fixed_window`
//! (the algorithms whose over- and under-admission under batches can be stated as a bound, see
//! README "Hot keys"); never with `count_denied` (a denial answered in memory could not be
//! counted); `max` between 2 and the limit's capacity; `hold` between 1 ms and 1 h; and (checked
//! by [`refuse_other_numbers`]) never with an override that replaces the limit's numbers nor on a
//! `settable` limit, whose numbers an identity may be given at run time.
//! `when` and the `unlimited` and `deny` overrides combine with batches: they are decided before
//! any unit is taken or spent, so the batches only ever serve requests under the limit's own
//! numbers.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{Algorithm, ModelError, Override, OverrideOutcome, serde_text};

/// How a limit takes its units in batches: `batch: { max: 200, hold: 500ms }` in a rule file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Batches {
    /// The most units one batch takes. The size adapts below it: it doubles while the node
    /// spends its batches before they end, halves when one ends unspent, and never takes more
    /// than half of what the store said was left, so near the limit it is one unit per decision.
    #[cfg_attr(feature = "schema", schemars(example = 200))]
    pub max: u64,
    /// How long a node may spend a batch (from when it asked for it); what is left then goes
    /// back to the store. On `fixed_window` a batch also ends with its window.
    #[serde(with = "serde_text", default = "default_hold")]
    #[cfg_attr(feature = "schema", schemars(with = "super::DurationText"))]
    pub hold: Duration,
}

fn default_hold() -> Duration {
    Duration::from_secs(1)
}

/// The longest `hold`: units held longer would shift the limit's windows by as much.
pub const MAX_HOLD: Duration = Duration::from_secs(3600);

impl Batches {
    /// Batches of at most `max` units, each spent within `hold`.
    pub fn new(max: u64, hold: Duration) -> Batches {
        Batches { max, hold }
    }

    /// Checks the invariants listed in the module docs, for a limit of `algorithm` whose
    /// largest request is `capacity` units.
    pub fn validate(
        &self,
        algorithm: Algorithm,
        capacity: u64,
        count_denied: bool,
    ) -> Result<(), ModelError> {
        if let Some(why) = refusal(algorithm) {
            return Err(ModelError::new(
                "batch",
                format!(
                    "{algorithm} cannot take batches: {why}; use token_bucket, gcra or fixed_window"
                ),
            ));
        }
        if count_denied {
            return Err(ModelError::new(
                "batch",
                "batches cannot count denials: a denial answered in memory never reaches the store",
            ));
        }
        if self.max < 2 || self.max > capacity {
            return Err(ModelError::new(
                "batch.max",
                format!(
                    "{} must be between 2 and the limit's capacity ({capacity})",
                    self.max
                ),
            ));
        }
        if self.hold < Duration::from_millis(1) || self.hold > MAX_HOLD {
            return Err(ModelError::new("batch.hold", "must be between 1ms and 1h"));
        }
        Ok(())
    }
}

/// Refuses other numbers than the limit's own on a limit with batches: overrides with numbers,
/// and `settable` (run-time numbers). Its batches are taken and spent at the limit's own numbers
/// (a batch's units, its give-back, its size near the limit), and an identity whose numbers
/// change would spend units taken under one set of numbers under another, for which no bound is
/// stated.
pub(super) fn refuse_other_numbers(
    overrides: &[Override],
    settable: bool,
) -> Result<(), ModelError> {
    if settable {
        return Err(ModelError::new(
            "settable",
            "a limit with batches takes its units at its own numbers: it cannot be settable \
             (run-time numbers per identity); drop `batch` or `settable`",
        ));
    }
    match overrides
        .iter()
        .position(|o| matches!(o.outcome, OverrideOutcome::Numbers { .. }))
    {
        None => Ok(()),
        Some(i) => Err(ModelError::new(
            format!("overrides[{i}]"),
            "a limit with batches takes its units at its own numbers: an override may be \
             `unlimited` or `deny`, not other numbers; write one rule per tier, each with its \
             `when` and its batches",
        )),
    }
}

/// Why an algorithm cannot take batches, or `None` when it can.
pub fn refusal(algorithm: Algorithm) -> Option<&'static str> {
    match algorithm {
        Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::FixedWindow => None,
        Algorithm::SlidingLog => Some(
            "it records when each request happened, and a batch would record all its units at \
             the moment it was taken; no bound tighter than the limit again per window holds",
        ),
        Algorithm::SlidingWindow => Some(
            "its count weighs the previous window by how much of it is still in view, so units \
             spent after the bucket they were counted in has rolled are weighed as if older; \
             no bound tighter than the limit again per window holds",
        ),
        Algorithm::LeakyBucket => Some(
            "it shapes: each admission is told its own delay when it is decided, which a unit \
             taken in advance cannot know",
        ),
        Algorithm::Concurrency => Some(
            "its units are leases held by requests until released, which cannot be taken ahead \
             of the requests that will hold them",
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bounded_algorithms_take_batches() {
        let b = Batches::new(10, Duration::from_millis(100));
        for algorithm in Algorithm::ALL {
            let r = b.validate(algorithm, 100, false);
            assert_eq!(r.is_ok(), refusal(algorithm).is_none(), "{algorithm}");
        }
        assert!(b.validate(Algorithm::FixedWindow, 100, true).is_err());
        assert!(b.validate(Algorithm::Gcra, 5, false).is_err());
        assert!(
            Batches::new(1, b.hold)
                .validate(Algorithm::Gcra, 5, false)
                .is_err()
        );
        assert!(
            Batches::new(2, Duration::ZERO)
                .validate(Algorithm::Gcra, 5, false)
                .is_err()
        );
    }
}
