//! `Rate`: how many units per window, parsed from `"100/1m"`.
//!
//! The window may drop a count of one and spell its unit out: `5/s`, `5/second`, `5/1s` and
//! `5/1 second` are the same rate; so are `100/m`, `100/min`, `100/minute` and `100/1m` (likewise
//! `h`/`hour`, `d`/`day`, plurals accepted). A rate is always written back in the short form.
//!
//! A rate is the pair (count, window). The count may change on a live rule without resetting
//! counters; the window is part of a limit's identity (see [`crate::model::Limit::id`]).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ModelError, format_duration, parse_duration};

/// The largest count a rate may carry. Counts above it are refused: the exact algorithms
/// keep per-unit state (sliding log) or integer arithmetic that must stay within 2^53 in Lua.
pub const MAX_COUNT: u64 = 10_000_000;

/// The longest window a rate may carry (one year).
pub const MAX_WINDOW: Duration = Duration::from_secs(366 * 86_400);

/// `count` units per `window`, valid by construction: its fields are read through
/// [`count`](Rate::count) and [`window`](Rate::window) and set only by [`Rate::new`] or parsing,
/// which refuse a zero count, a count above [`MAX_COUNT`] and a window outside 1 ms to 366 days.
///
/// ```
/// use sluice::model::Rate;
/// let rate: Rate = "100/1m".parse().unwrap();
/// assert_eq!(rate.count(), 100);
/// assert_eq!(rate.window().as_secs(), 60);
/// assert!("0/1m".parse::<Rate>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rate {
    count: u64,
    window: Duration,
}

impl Rate {
    /// Builds a validated rate.
    pub fn new(count: u64, window: Duration) -> Result<Rate, ModelError> {
        if count == 0 {
            return Err(ModelError::new(
                "rate",
                "the count must be greater than zero",
            ));
        }
        if count > MAX_COUNT {
            return Err(ModelError::new(
                "rate",
                format!("the count {count} is above the maximum of {MAX_COUNT}"),
            ));
        }
        if window.is_zero() || window.as_millis() == 0 {
            return Err(ModelError::new("rate", "the window must be at least 1ms"));
        }
        if window > MAX_WINDOW {
            return Err(ModelError::new("rate", "the window must not exceed 366d"));
        }
        Ok(Rate { count, window })
    }

    /// A rate for a limit's constructor whose arguments are not checked until the limit is
    /// ([`Limit::validate`](super::Limit::validate) refuses what [`Rate::new`] refuses), so that
    /// the constructor stays infallible.
    pub(crate) const fn unvalidated(count: u64, window: Duration) -> Rate {
        Rate { count, window }
    }

    /// Units admitted per window: at least 1, at most [`MAX_COUNT`].
    pub const fn count(&self) -> u64 {
        self.count
    }

    /// The window's length: at least 1 ms, at most [`MAX_WINDOW`].
    pub const fn window(&self) -> Duration {
        self.window
    }

    /// The window in the unit every algorithm computes in.
    pub fn window_us(&self) -> super::Micros {
        self.window.into()
    }
}

impl FromStr for Rate {
    type Err = ModelError;

    fn from_str(text: &str) -> Result<Rate, ModelError> {
        let (count, window) = text.trim().split_once('/').ok_or_else(|| {
            ModelError::new(
                "rate",
                format!("`{text}` must look like `100/1m` (count/window)"),
            )
        })?;
        let count: u64 = count.trim().parse().map_err(|_| {
            ModelError::new(
                "rate",
                format!("`{text}`: the count `{count}` is not a positive whole number"),
            )
        })?;
        let window = parse_duration(&short_window(window))
            .map_err(|e| ModelError::new("rate", format!("`{text}`: {}", e.message)))?;
        Rate::new(count, window)
    }
}

/// A rate's window in the short form [`parse_duration`] reads: `s` → `1s`, `10 minutes` → `10m`.
/// Text it does not recognise is passed on unchanged, for `parse_duration` to explain.
fn short_window(window: &str) -> String {
    let window = window.trim();
    let digits = window
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(window.len());
    let (number, unit) = window.split_at(digits);
    let short = match unit.trim_start() {
        "ms" | "millisecond" | "milliseconds" => "ms",
        "s" | "sec" | "secs" | "second" | "seconds" => "s",
        "m" | "min" | "mins" | "minute" | "minutes" => "m",
        "h" | "hr" | "hrs" | "hour" | "hours" => "h",
        "d" | "day" | "days" => "d",
        // An unknown unit with no count gets one, so the error names the unit, not the count.
        other if number.is_empty() && !other.is_empty() => return format!("1{other}"),
        _ => return window.to_string(),
    };
    let number = if number.is_empty() { "1" } else { number };
    format!("{number}{short}")
}

impl TryFrom<String> for Rate {
    type Error = ModelError;
    fn try_from(text: String) -> Result<Rate, ModelError> {
        text.parse()
    }
}

impl From<Rate> for String {
    fn from(rate: Rate) -> String {
        rate.to_string()
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.count, format_duration(self.window))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_design_examples() {
        for (text, count, secs) in [
            ("100/1m", 100, 60),
            ("2/90s", 2, 90),
            ("3/30m", 3, 1800),
            ("10/1h", 10, 3600),
            ("1000/1d", 1000, 86_400),
        ] {
            let rate: Rate = text.parse().unwrap();
            assert_eq!((rate.count, rate.window.as_secs()), (count, secs), "{text}");
            assert_eq!(rate.to_string(), text);
        }
    }

    #[test]
    fn accepts_a_bare_or_spelt_out_unit() {
        for (texts, secs) in [
            (
                &[
                    "5/s",
                    "5/sec",
                    "5/second",
                    "5/seconds",
                    "5/1 second",
                    "5/1s",
                ][..],
                1,
            ),
            (&["5/m", "5/min", "5/minute", "5/minutes", "5/1min"][..], 60),
            (&["5/h", "5/hr", "5/hour", "5/hours"][..], 3600),
            (&["5/d", "5/day", "5/days", "5/1 day"][..], 86_400),
            (&["5/10 minutes", "5/10min", "5/10m"][..], 600),
        ] {
            for text in texts {
                let rate: Rate = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
                assert_eq!((rate.count, rate.window.as_secs()), (5, secs), "{text}");
            }
        }
        assert_eq!("5/second".parse::<Rate>().unwrap().to_string(), "5/1s");
        assert_eq!("5/ms".parse::<Rate>().unwrap().window.as_millis(), 1);
    }

    #[test]
    fn rejects_bad_rates_naming_the_field() {
        for bad in [
            "0/1m",
            "-1/1m",
            "10/0s",
            "10",
            "abc/1m",
            "10/1w",
            "99999999999/1s",
            "10/400d",
            "10/",
            "10/week",
            "10/0 seconds",
            "10/secondss",
        ] {
            let err = bad.parse::<Rate>().unwrap_err();
            assert_eq!(err.field, "rate", "{bad}");
        }
    }
}
