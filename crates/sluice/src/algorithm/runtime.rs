//! Numbers given to one identity of a limit at run time (see
//! [`RuntimeLimit`](crate::model::RuntimeLimit)), as the stores keep and apply them.
//!
//! A store reads them inside the decision's own atomic step (the Redis script reads the
//! identity's key, the memory store its table under the key's shard lock), so a decision sees
//! either the numbers before a change or after it, never a mix. They replace the limit's count
//! and capacity; the window, algorithm, block and penalty stay the limit's, so the identity's
//! counter carries over as it does when a rule file changes a count.

use super::{LimitStep, Params};

/// An identity's own count and capacity for one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuntimeNumbers {
    /// Units per window (for a concurrency limit, leases held at once).
    pub count: u64,
    /// The most units outstanding at once (the burst of a bucket algorithm, else the count).
    pub capacity: u64,
}

impl RuntimeNumbers {
    /// `step` with these numbers in place of the limit's.
    #[must_use]
    pub fn apply(self, step: &LimitStep) -> LimitStep {
        LimitStep {
            params: Params {
                count: self.count,
                capacity: self.capacity,
                ..step.params
            },
            ..*step
        }
    }

    /// The stored form, `"<count> <capacity>"` (what `lua/decide.lua` parses).
    pub fn to_text(self) -> String {
        format!("{} {}", self.count, self.capacity)
    }

    /// Parses the stored form; `None` for anything else (a foreign or corrupt value).
    pub fn parse(text: &str) -> Option<RuntimeNumbers> {
        let (count, capacity) = text.split_once(' ')?;
        let digits = |s: &str| {
            (!s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
                .filter(|&n| n > 0)
        };
        Some(RuntimeNumbers {
            count: digits(count)?,
            capacity: digits(capacity)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_parses_back_and_rejects_anything_else() {
        let n = RuntimeNumbers {
            count: 5000,
            capacity: 6000,
        };
        assert_eq!(RuntimeNumbers::parse(&n.to_text()), Some(n));
        for bad in [
            "", "5000", "5000 ", " 5000 1", "0 1", "1 0", "-1 2", "1e3 2", "1 2 3",
        ] {
            assert_eq!(RuntimeNumbers::parse(bad), None, "{bad:?}");
        }
    }
}
