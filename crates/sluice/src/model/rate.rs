//! `Rate`: how many units per window, parsed from `"100/1m"`.
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

/// `count` units per `window`.
///
/// ```
/// use sluice::model::Rate;
/// let rate: Rate = "100/1m".parse().unwrap();
/// assert_eq!(rate.count, 100);
/// assert_eq!(rate.window.as_secs(), 60);
/// assert!("0/1m".parse::<Rate>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rate {
    /// Units admitted per window.
    pub count: u64,
    /// The window length.
    pub window: Duration,
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
        let window = parse_duration(window).map_err(|e| ModelError::new("rate", e.message))?;
        Rate::new(count, window)
    }
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
        ] {
            let err = bad.parse::<Rate>().unwrap_err();
            assert_eq!(err.field, "rate", "{bad}");
        }
    }
}
