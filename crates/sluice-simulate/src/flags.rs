//! Parsers of the command line's values that are more than a number or a duration: a span of
//! the run (`--store-down FROM..TO`), the hold of a batch (`--batch-hold`, 1ms to 1h) and the
//! calendar instant the simulated clock starts at (`--start`).

use std::time::Duration;

use sluice::Micros;

/// Parses `--batch-hold` (a duration, 1ms to 1h).
pub(crate) fn parse_hold(text: &str) -> Result<Duration, String> {
    let hold = sluice::model::parse_duration(text).map_err(|e| e.message)?;
    if hold < Duration::from_millis(1) || hold > sluice::model::MAX_HOLD {
        return Err(format!("`{text}`: between 1ms and 1h"));
    }
    Ok(hold)
}

/// Parses `FROM..TO` (two durations, FROM before TO).
pub fn parse_span(text: &str) -> Result<(Duration, Duration), String> {
    let (from, to) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not FROM..TO (e.g. 10m..20m)"))?;
    let parse = |t: &str| sluice::model::parse_duration(t).map_err(|e| e.message);
    let (from, to) = (parse(from)?, parse(to)?);
    if from >= to {
        return Err(format!("`{text}`: FROM must come before TO"));
    }
    Ok((from, to))
}

/// The simulated clock's first instant, in UTC (`2026-01-01T00:00:00Z`) and in microseconds
/// since the epoch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Start {
    /// The instant in UTC, for the report.
    pub text: String,
    /// The instant.
    pub us: Micros,
}

/// Parses `--start`: an RFC 3339 instant (`2026-01-01T00:00:00Z`, `2026-03-27T00:00:00+01:00`)
/// or a date, meaning its midnight in UTC (`2028-01-01`). An instant needs its offset: a civil
/// time alone would depend on the machine's zone. The epoch at the earliest, as the clocks count
/// from it.
pub fn parse_start(text: &str) -> Result<Start, String> {
    let instant = match text.parse::<jiff::Timestamp>() {
        Ok(instant) => instant,
        // `strptime`, not `parse`: the latter would take the date of a civil time and drop its
        // hours, and a time without its offset is ambiguous.
        Err(_) => jiff::civil::Date::strptime("%Y-%m-%d", text)
            .and_then(|date| date.to_zoned_datetime(jiff::tz::TimeZone::UTC))
            .map(|zoned| zoned.timestamp())
            .map_err(|_| {
                format!(
                    "`{text}` is not an instant with its offset (2026-01-01T00:00:00Z, \
                     2026-03-27T00:00:00+01:00) nor a date (2028-01-01)"
                )
            })?,
    };
    let us = u64::try_from(instant.as_microsecond())
        .map_err(|_| format!("`{text}`: the simulated clock starts in 1970 at the earliest"))?;
    Ok(Start {
        text: instant.to_string(),
        us: Micros::new(us),
    })
}

#[cfg(test)]
mod tests {
    use super::{Micros, parse_start};

    #[test]
    fn a_start_is_an_instant_with_its_offset_or_a_date_in_utc() {
        let new_year = Micros::new(1_767_225_600_000_000);
        assert_eq!(parse_start("2026-01-01T00:00:00Z").unwrap().us, new_year);
        assert_eq!(parse_start("2026-01-01").unwrap().us, new_year);
        let start = parse_start("2026-01-01T01:00:00+01:00").unwrap();
        assert_eq!(
            (start.us, start.text.as_str()),
            (new_year, "2026-01-01T00:00:00Z")
        );
        assert!(parse_start("2026-01-01T00:00:00").is_err(), "no offset");
        assert!(parse_start("1969-12-31T00:00:00Z").is_err());
        assert!(parse_start("next tuesday").is_err());
    }
}
