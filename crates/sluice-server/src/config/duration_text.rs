//! Durations in the file written as text (`30s`, `150ms`), read and written with the library's
//! own parser and formatter, so a rule file and a rule's own durations take the same spellings.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serializer};
use sluice::model::{format_duration, parse_duration};

/// Writes the duration as text (`30s`).
pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&format_duration(*d))
}

/// Reads a duration written as text; a zero, unknown unit or overflow is an error.
pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let text = String::deserialize(d)?;
    parse_duration(&text).map_err(|e| serde::de::Error::custom(e.message))
}

/// The same for `Option<Duration>` (absent or null is `None`).
pub mod option {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};
    use sluice::model::{format_duration, parse_duration};

    /// Writes the duration as text, or nothing.
    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        match d {
            Some(d) => s.serialize_str(&format_duration(*d)),
            None => s.serialize_none(),
        }
    }

    /// Reads a duration written as text, or nothing.
    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        match Option::<String>::deserialize(d)? {
            Some(text) => parse_duration(&text)
                .map(Some)
                .map_err(|e| serde::de::Error::custom(e.message)),
            None => Ok(None),
        }
    }
}
