//! Human durations as written in rule files: `50ms`, `120s`, `30m`, `1h`, `1d`.
//!
//! The parser accepts exactly one integer followed by one unit. Zero is rejected here because
//! no rule field has a meaning for a zero duration, and a value that does not fit in a `u64` of
//! milliseconds is an error rather than a silent wrap.

use std::time::Duration;

use super::ModelError;

/// Parses `"<integer><unit>"` with unit `ms`, `s`, `m`, `h` or `d`.
///
/// ```
/// use std::time::Duration;
/// assert_eq!(sluice::model::parse_duration("30m").unwrap(), Duration::from_secs(1800));
/// assert!(sluice::model::parse_duration("0s").is_err());
/// ```
pub fn parse_duration(text: &str) -> Result<Duration, ModelError> {
    let text = text.trim();
    let digits_end = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(digits_end);
    if number.is_empty() {
        return Err(ModelError::new(
            "duration",
            format!("`{text}` must start with a whole number, as in `30s` or `15m`"),
        ));
    }
    let amount: u64 = number
        .parse()
        .map_err(|_| ModelError::new("duration", format!("`{text}` is too large")))?;
    let unit_ms: u64 = match unit {
        "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        "" => {
            return Err(ModelError::new(
                "duration",
                format!("`{text}` needs a unit: ms, s, m, h or d"),
            ));
        }
        other => {
            return Err(ModelError::new(
                "duration",
                format!("`{text}` has unknown unit `{other}`; use ms, s, m, h or d"),
            ));
        }
    };
    if amount == 0 {
        return Err(ModelError::new(
            "duration",
            format!("`{text}` must be greater than zero"),
        ));
    }
    let ms = amount
        .checked_mul(unit_ms)
        .ok_or_else(|| ModelError::new("duration", format!("`{text}` is too large")))?;
    Ok(Duration::from_millis(ms))
}

/// Formats a duration in the largest unit that divides it, the inverse of [`parse_duration`].
pub fn format_duration(duration: Duration) -> String {
    let ms = duration.as_millis();
    for (unit, size) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1_000),
    ] {
        if ms >= size && ms.is_multiple_of(size) {
            return format!("{}{unit}", ms / size);
        }
    }
    format!("{ms}ms")
}

/// Serde adapter for duration fields written as strings.
pub(crate) mod serde_text {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&super::format_duration(*d))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let text = String::deserialize(d)?;
        super::parse_duration(&text).map_err(|e| serde::de::Error::custom(e.message))
    }

    /// The same for `Option<Duration>`.
    pub mod option {
        use std::time::Duration;

        use serde::{Deserialize, Deserializer, Serializer};

        pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
            match d {
                Some(d) => s.serialize_str(&super::super::format_duration(*d)),
                None => s.serialize_none(),
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
            match Option::<String>::deserialize(d)? {
                Some(text) => super::super::parse_duration(&text)
                    .map(Some)
                    .map_err(|e| serde::de::Error::custom(e.message)),
                None => Ok(None),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_unit() {
        assert_eq!(parse_duration("50ms").unwrap(), Duration::from_millis(50));
        assert_eq!(parse_duration("120s").unwrap(), Duration::from_secs(120));
        assert_eq!(parse_duration("30m").unwrap(), Duration::from_secs(1800));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("1d").unwrap(), Duration::from_secs(86_400));
    }

    #[test]
    fn rejects_zero_negative_unknown_and_overflow() {
        for bad in [
            "0s",
            "-1s",
            "5",
            "5w",
            "m",
            "",
            "99999999999999999999s",
            "18446744073709551615d",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad} should be rejected");
        }
    }

    #[test]
    fn formats_back() {
        for text in ["50ms", "90s", "30m", "1h", "1d", "1500ms"] {
            assert_eq!(format_duration(parse_duration(text).unwrap()), text);
        }
    }
}
