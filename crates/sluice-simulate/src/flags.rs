//! Parsers of the command line's values that are more than a number or a duration: a span of
//! the run (`--store-down FROM..TO`) and the hold of a batch (`--batch-hold`, 1ms to 1h).

use std::time::Duration;

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
