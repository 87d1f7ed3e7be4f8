//! Numbers given to one identity of a limit at run time (see
//! [`RuntimeLimit`](crate::model::RuntimeLimit)), as the stores keep and apply them.
//!
//! A store reads them inside the decision's own atomic step (the Redis script reads the
//! identity's key, the memory store its table under the key's shard lock), so a decision sees
//! either the numbers before a change or after it, never a mix. They replace the limit's count
//! and capacity, and on a monthly quota its billing day (`anchor`); the window, algorithm, block
//! and penalty stay the limit's, so the identity's counter carries over as it does when a rule
//! file changes a count.
//!
//! Invariants: `count` and `capacity` are both set or both `None` (an entry that sets only a
//! billing day, whose count keeps following the rule file); an entry sets at least one of them
//! or an anchor; an anchor is a day of the month (1–31).

use super::{LimitStep, Params};

/// An identity's own count, capacity and billing day for one limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RuntimeNumbers {
    /// Units per window (for a concurrency limit, leases held at once); `None`: the limit's.
    pub count: Option<u64>,
    /// The most units outstanding at once (the burst of a bucket algorithm, else the count);
    /// `None`: the limit's.
    pub capacity: Option<u64>,
    /// The day each month of a monthly quota begins on, for this identity; `None`: the limit's.
    pub anchor: Option<u8>,
}

impl RuntimeNumbers {
    /// A count and a capacity, the limit's billing day.
    pub fn counts(count: u64, capacity: u64) -> RuntimeNumbers {
        RuntimeNumbers {
            count: Some(count),
            capacity: Some(capacity),
            anchor: None,
        }
    }

    /// `step` with these numbers in place of the limit's (and a quota's month from the anchor).
    #[must_use]
    pub fn apply(self, step: &LimitStep) -> LimitStep {
        LimitStep {
            params: Params {
                count: self.count.unwrap_or(step.params.count),
                capacity: self.capacity.unwrap_or(step.params.capacity),
                period: match (step.params.period, self.anchor) {
                    (Some(period), Some(anchor)) => Some(period.with_anchor(anchor)),
                    (period, _) => period,
                },
                ..step.params
            },
            ..*step
        }
    }

    /// The stored form (what `lua/decide.lua` parses): `"<count> <capacity>"`, followed by
    /// `" <anchor>"` when a billing day is set; a count and capacity of `0 0` are the limit's.
    pub fn to_text(self) -> String {
        let (count, capacity) = (self.count.unwrap_or(0), self.capacity.unwrap_or(0));
        match self.anchor {
            Some(anchor) => format!("{count} {capacity} {anchor}"),
            None => format!("{count} {capacity}"),
        }
    }

    /// Parses the stored form; `None` for anything else (a foreign or corrupt value).
    pub fn parse(text: &str) -> Option<RuntimeNumbers> {
        let digits = |s: &str| {
            (!s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit()))
                .then(|| s.parse::<u64>().ok())
                .flatten()
        };
        let mut words = text.split(' ');
        let count = digits(words.next()?)?;
        let capacity = digits(words.next()?)?;
        let anchor = match words.next() {
            None => None,
            Some(word) => Some(digits(word).filter(|a| (1..=31).contains(a))? as u8),
        };
        if words.next().is_some() {
            return None;
        }
        let own = |n: u64| (n > 0).then_some(n);
        let numbers = RuntimeNumbers {
            count: own(count),
            capacity: own(capacity),
            anchor,
        };
        let whole = numbers.count.is_some() == numbers.capacity.is_some();
        let sets_something = numbers.count.is_some() || numbers.anchor.is_some();
        (whole && sets_something).then_some(numbers)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_parses_back_and_rejects_anything_else() {
        let n = RuntimeNumbers::counts(5000, 6000);
        assert_eq!(n.to_text(), "5000 6000");
        assert_eq!(RuntimeNumbers::parse(&n.to_text()), Some(n));
        let anchored = RuntimeNumbers {
            anchor: Some(15),
            ..n
        };
        assert_eq!(anchored.to_text(), "5000 6000 15");
        assert_eq!(RuntimeNumbers::parse(&anchored.to_text()), Some(anchored));
        let day_only = RuntimeNumbers {
            anchor: Some(31),
            ..RuntimeNumbers::default()
        };
        assert_eq!(day_only.to_text(), "0 0 31");
        assert_eq!(RuntimeNumbers::parse("0 0 31"), Some(day_only));
        for bad in [
            "", "5000", "5000 ", " 5000 1", "0 1", "1 0", "-1 2", "1e3 2", "1 2 3 4", "0 0",
            "1 2 0", "1 2 32", "1 2 ", "0 1 5",
        ] {
            assert_eq!(RuntimeNumbers::parse(bad), None, "{bad:?}");
        }
    }
}
