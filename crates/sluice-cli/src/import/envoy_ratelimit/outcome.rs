//! What one descriptor of an envoyproxy/ratelimit file means for a request that reaches it:
//! how its `value` matches ([`ValueMatch`]) and what its `rate_limit` decides ([`Outcome`]).
//!
//! Units are envoyproxy/ratelimit's, whose windows start at multiples of their length since the
//! epoch, as Sluice's fixed windows do: second, minute, hour, day, week (7 days), month (30 days)
//! and year (365 days), in any case.

use std::time::Duration;

use sluice::model::{MAX_COUNT, Rate};

use super::config::Node;
use crate::import::document::join;
use crate::import::report::Report;

/// How a descriptor's `value` picks request values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueMatch {
    /// No value: any value (tried after the specific ones).
    Any,
    /// This value exactly (tried first).
    Exact(String),
    /// A value ending in `*`: values starting with the rest (tried after exact values, in the
    /// file's order).
    Prefix(String),
    /// A `*` elsewhere in the value: a pattern Sluice's matchers cannot state.
    Glob,
}

impl ValueMatch {
    /// The match a descriptor's value makes.
    pub fn of(value: &str) -> ValueMatch {
        match value.find('*') {
            None if value.is_empty() => ValueMatch::Any,
            None => ValueMatch::Exact(value.to_string()),
            Some(at) if at == value.len() - 1 => ValueMatch::Prefix(value[..at].to_string()),
            Some(_) => ValueMatch::Glob,
        }
    }
}

/// What a descriptor's `rate_limit` decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// No `rate_limit` (or an unusable one): a request that stops here is not limited.
    NoLimit,
    /// `unlimited: true` (or a shadow limit of 0): always OK.
    Unlimited,
    /// `requests_per_unit: 0`: always over the limit.
    Deny {
        /// Its unit, as a window.
        window: Duration,
    },
    /// A limit.
    Rate {
        /// The rate.
        rate: Rate,
        /// `shadow_mode`.
        shadow: bool,
    },
}

/// The message a `requests_per_unit: 0` is refused with.
pub const DENY_MESSAGE: &str = "over limit (0 requests per unit)";

/// A unit's window.
pub fn window(unit: &str) -> Option<Duration> {
    let secs = match unit.to_ascii_lowercase().as_str() {
        "second" => 1,
        "minute" => 60,
        "hour" => 3_600,
        "day" => 86_400,
        "week" => 7 * 86_400,
        "month" => 30 * 86_400,
        "year" => 365 * 86_400,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

impl Outcome {
    /// The outcome of `node`'s `rate_limit`, reporting what cannot be carried over.
    pub fn of(node: &Node, report: &mut Report) -> Outcome {
        let Some(limit) = &node.rate_limit else {
            return Outcome::NoLimit;
        };
        let at = join(&node.path, "rate_limit");
        let window = limit.unit.as_deref().and_then(window);
        if limit.unlimited {
            if window.is_some() {
                report.lose(&node.file, &join(&at, "unit"), "a unit beside `unlimited: true`: envoyproxy/ratelimit refuses it; imported as unlimited");
            }
            return Outcome::Unlimited;
        }
        let Some(window) = window else {
            let unit = limit.unit.as_deref().unwrap_or("");
            report.lose(
                &node.file,
                &join(&at, "unit"),
                format!("`{unit}` is not a unit (second, minute, hour, day, week, month, year): envoyproxy/ratelimit refuses it; the limit is left out"),
            );
            return Outcome::NoLimit;
        };
        let unit = limit
            .unit
            .as_deref()
            .unwrap_or_default()
            .to_ascii_lowercase();
        if matches!(unit.as_str(), "week" | "month" | "year") {
            report.note(
                &node.file,
                &join(&at, "unit"),
                format!(
                    "`{unit}` is {} days counted from the epoch in envoyproxy/ratelimit, not a calendar {unit}, and is imported as such; for calendar {unit}s write a quota (`quota: N, period: {unit}`)",
                    window.as_secs() / 86_400
                ),
            );
        }
        let count = limit.requests_per_unit;
        if count == 0 {
            if node.shadow {
                report.lose(&node.file, &at, "a limit of 0 in shadow mode is always OK: imported as `unlimited`, which counts nothing");
                return Outcome::Unlimited;
            }
            return Outcome::Deny { window };
        }
        if count > MAX_COUNT {
            report.lose(
                &node.file,
                &join(&at, "requests_per_unit"),
                format!("{count} is above the {MAX_COUNT} a Sluice rate may count; imported as {MAX_COUNT}"),
            );
        }
        match Rate::new(count.min(MAX_COUNT), window) {
            Ok(rate) => Outcome::Rate {
                rate,
                shadow: node.shadow,
            },
            Err(e) => {
                report.lose(&node.file, &at, format!("{}; left out", e.message));
                Outcome::NoLimit
            }
        }
    }

    /// The window it counts in, if it counts.
    pub fn window(&self) -> Option<Duration> {
        match self {
            Outcome::Deny { window } => Some(*window),
            Outcome::Rate { rate, .. } => Some(rate.window()),
            Outcome::NoLimit | Outcome::Unlimited => None,
        }
    }

    /// Whether it is decided in shadow mode.
    pub fn shadow(&self) -> bool {
        matches!(self, Outcome::Rate { shadow: true, .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_match_as_envoyproxy_ratelimit_reads_them() {
        assert_eq!(ValueMatch::of(""), ValueMatch::Any);
        assert_eq!(ValueMatch::of("pro"), ValueMatch::Exact("pro".into()));
        assert_eq!(ValueMatch::of("/api/*"), ValueMatch::Prefix("/api/".into()));
        assert_eq!(ValueMatch::of("*"), ValueMatch::Prefix(String::new()));
        assert_eq!(ValueMatch::of("/api/*/x"), ValueMatch::Glob);
        assert_eq!(ValueMatch::of("a*b*"), ValueMatch::Glob);
        assert_eq!(window("MONTH"), Some(Duration::from_secs(2_592_000)));
        assert_eq!(window("fortnight"), None);
    }
}
