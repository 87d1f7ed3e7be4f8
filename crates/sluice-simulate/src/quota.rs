//! A quota in the simulator: what each calendar period of a quota limit admitted, and the
//! resets the run crossed.
//!
//! A quota (a limit with a `period`) is a fixed window whose windows are calendar periods, so a
//! sliding log of the longest period's length is no reference for it: it would call every
//! admission after a reset "beyond exact". Its reference is an exact count per identity per
//! period, kept here beside the units the limit really admitted to each identity in the period.
//! Where periods begin comes from the library's own [`Period::bounds_at`], so the calendar (23
//! and 25 hour days, an anchor of 31 on 28 February) is written once.

use std::collections::HashMap;

use jiff::Timestamp;
use jiff::tz::TimeZone;
use serde::Serialize;
use sluice::Micros;
use sluice::model::{Period, PeriodBounds, PeriodUnit};

/// One period of a quota as the report shows it. Units, unless named otherwise.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PeriodRow {
    /// Its first instant, ms since the epoch.
    pub start_ms: u64,
    /// The next period's first instant.
    pub end_ms: u64,
    /// Its first instant in the quota's zone (`2026-02-28 00:00 CET`).
    pub start_local: String,
    /// Its first instant in UTC (`2026-02-27T23:00:00Z`).
    pub start_utc: String,
    /// How long it lasts (`28 d`, `30 d 23 h`, `23 h`).
    pub length: String,
    /// Whether it begins within the run, so the run crossed its reset (the first period began
    /// before the run, or as it started).
    pub reset: bool,
    /// Units offered within it.
    pub offered: u64,
    /// Units admitted within it.
    pub admitted: u64,
    /// Units an exact count per identity and period would have admitted.
    pub exact_admitted: u64,
    /// The most units admitted to one identity within it, to compare with the quota.
    pub most_to_one: u64,
    /// When the quota first refused a request within it, in the quota's zone.
    pub quota_reached: Option<String>,
}

/// A quota limit's periods over the run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct QuotaSummary {
    /// Units per period per identity (the limit's own; an override's is counted per decision).
    pub quota: u64,
    /// `day`, `week`, `month` or `year`.
    pub period: PeriodUnit,
    /// The day a month begins on.
    pub anchor: u8,
    /// The IANA zone the periods begin in.
    pub timezone: String,
    /// The run's start, ms since the epoch (the plots' time 0).
    pub run_start_ms: u64,
    /// Every period the run overlaps, in order.
    pub periods: Vec<PeriodRow>,
}

impl QuotaSummary {
    /// The periods that begin within the run: the resets it crossed.
    pub fn resets(&self) -> impl Iterator<Item = &PeriodRow> {
        self.periods.iter().filter(|p| p.reset)
    }

    /// The quota in words: `10000 a month from the 31st, Europe/Berlin`.
    pub fn describe(&self) -> String {
        let per = match self.period {
            PeriodUnit::Day => "a day".to_string(),
            PeriodUnit::Week => "a week from Monday".to_string(),
            PeriodUnit::Month => format!("a month from the {}", ordinal(self.anchor)),
            PeriodUnit::Year => "a year".to_string(),
        };
        format!("{} {per}, {}", self.quota, self.timezone)
    }

    /// A period's first day in the quota's zone, for a plot (`Feb 28`; with the time when the
    /// day began later than midnight, as where a zone skips midnight).
    pub fn day_label(&self, period: &PeriodRow) -> String {
        let zone = jiff::tz::db().get(&self.timezone).unwrap_or(TimeZone::UTC);
        let start = instant(Micros::from_millis(period.start_ms)).to_zoned_datetime(zone);
        let format = if (start.hour(), start.minute()) == (0, 0) {
            "%b %-d"
        } else {
            "%b %-d %H:%M"
        };
        start.strftime(format).to_string()
    }
}

/// `1st`, `2nd`, `3rd`, `4th`, … `31st`.
fn ordinal(day: u8) -> String {
    let suffix = match (day % 10, day % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{day}{suffix}")
}

/// What one period has seen so far.
#[derive(Debug, Clone)]
struct Counted {
    bounds: PeriodBounds,
    offered: u64,
    admitted: u64,
    exact_admitted: u64,
    most_to_one: u64,
    quota_reached: Option<Micros>,
}

/// The period in progress, with its per-identity counts.
#[derive(Debug)]
struct Open {
    counted: Counted,
    /// Units the limit admitted to each identity in the period.
    used: HashMap<String, u64>,
    /// Units the exact reference admitted to each identity in the period.
    exact: HashMap<String, u64>,
}

impl Open {
    fn new(bounds: PeriodBounds) -> Open {
        Open {
            counted: Counted {
                bounds,
                offered: 0,
                admitted: 0,
                exact_admitted: 0,
                most_to_one: 0,
                quota_reached: None,
            },
            used: HashMap::new(),
            exact: HashMap::new(),
        }
    }
}

/// The running counts of one quota limit, period by period.
#[derive(Debug)]
pub struct QuotaTally {
    period: Period,
    zone: TimeZone,
    quota: u64,
    start_us: Micros,
    open: Option<Open>,
    closed: Vec<Counted>,
}

impl QuotaTally {
    /// A tally of `quota` units per `period`.
    pub fn new(period: &Period, quota: u64) -> QuotaTally {
        QuotaTally {
            zone: jiff::tz::db().get(period.zone()).unwrap_or(TimeZone::UTC),
            period: period.clone(),
            quota,
            start_us: Micros::ZERO,
            open: None,
            closed: Vec::new(),
        }
    }

    /// Moves to the period holding `now_us` (since the epoch) in a run that started at
    /// `start_us`, closing the periods before it, those without traffic too.
    pub fn enter(&mut self, start_us: Micros, now_us: Micros) -> &mut QuotaTally {
        let open = self.open.get_or_insert_with(|| {
            self.start_us = start_us;
            Open::new(self.period.bounds_at(start_us))
        });
        while now_us >= open.counted.bounds.end {
            let next = Open::new(self.period.bounds_at(open.counted.bounds.end));
            if next.counted.bounds.start < open.counted.bounds.end {
                // The end of the calendar the zone database covers: nothing after it.
                break;
            }
            self.closed.push(std::mem::replace(open, next).counted);
        }
        self
    }

    /// Units the limit has admitted to `identity` in the current period.
    pub fn used(&self, identity: &str) -> u64 {
        self.open
            .as_ref()
            .and_then(|open| open.used.get(identity))
            .copied()
            .unwrap_or(0)
    }

    /// The exact reference's decision on `cost` units of `identity` in the current period, under
    /// the identity's quota `limit` (recorded when admitted).
    pub fn exact_admit(&mut self, identity: &str, cost: u64, limit: u64) -> bool {
        let Some(open) = self.open.as_mut() else {
            return false;
        };
        let used = count_of(&mut open.exact, identity);
        let admitted = *used + cost <= limit;
        if admitted {
            *used += cost;
            open.counted.exact_admitted += cost;
        }
        admitted
    }

    /// Records `cost` units of `identity` at `now_us` in the current period: whether its rule
    /// admitted them, and whether the quota allowed them.
    pub fn record(
        &mut self,
        identity: &str,
        now_us: Micros,
        cost: u64,
        admitted: bool,
        quota_allowed: bool,
    ) {
        let Some(open) = self.open.as_mut() else {
            return;
        };
        let counted = &mut open.counted;
        counted.offered += cost;
        if admitted {
            let used = count_of(&mut open.used, identity);
            *used += cost;
            counted.admitted += cost;
            counted.most_to_one = counted.most_to_one.max(*used);
        }
        if !quota_allowed && counted.quota_reached.is_none() {
            counted.quota_reached = Some(now_us);
        }
    }

    /// The periods of a run that lasted `run_us`, each one it overlaps.
    pub fn finish(mut self, run_us: Micros) -> QuotaSummary {
        let end = self.start_us + run_us;
        if self.open.is_some() {
            self.enter(self.start_us, end.saturating_sub(Micros::new(1)));
        }
        let mut counted = std::mem::take(&mut self.closed);
        counted.extend(self.open.take().map(|open| open.counted));
        let periods = counted
            .into_iter()
            .map(|c| self.row(c, self.start_us))
            .collect();
        QuotaSummary {
            quota: self.quota,
            period: self.period.unit(),
            anchor: self.period.anchor(),
            timezone: self.period.zone().to_string(),
            run_start_ms: self.start_us.as_millis(),
            periods,
        }
    }

    fn row(&self, c: Counted, start_us: Micros) -> PeriodRow {
        PeriodRow {
            start_ms: c.bounds.start.as_millis(),
            end_ms: c.bounds.end.as_millis(),
            start_local: self.local(c.bounds.start),
            start_utc: instant(c.bounds.start).to_string(),
            length: length(c.bounds.end - c.bounds.start),
            reset: c.bounds.start > start_us,
            offered: c.offered,
            admitted: c.admitted,
            exact_admitted: c.exact_admitted,
            most_to_one: c.most_to_one,
            quota_reached: c.quota_reached.map(|t| self.local(t)),
        }
    }

    /// `us` in the quota's zone, to the minute, with the zone's abbreviation.
    fn local(&self, us: Micros) -> String {
        instant(us)
            .to_zoned_datetime(self.zone.clone())
            .strftime("%Y-%m-%d %H:%M %Z")
            .to_string()
    }
}

/// The count of `identity`, created when new (its key copied only then, not per request).
fn count_of<'a>(counts: &'a mut HashMap<String, u64>, identity: &str) -> &'a mut u64 {
    if !counts.contains_key(identity) {
        counts.insert(identity.to_string(), 0);
    }
    counts.get_mut(identity).expect("inserted above")
}

fn instant(us: Micros) -> Timestamp {
    Timestamp::from_microsecond(us.get().min(i64::MAX as u64) as i64).unwrap_or(Timestamp::MAX)
}

/// `23 h`, `25 h`, `28 d`, `30 d 23 h`, `24 h 30 min` (whole minutes).
fn length(us: Micros) -> String {
    let minutes = us.get() / 60_000_000;
    let (days, hours, minutes) = (minutes / 1440, minutes / 60 % 24, minutes % 60);
    let mut parts = Vec::new();
    if days >= 2 {
        parts.push(format!("{days} d"));
        if hours > 0 {
            parts.push(format!("{hours} h"));
        }
    } else {
        parts.push(format!("{} h", days * 24 + hours));
    }
    if minutes > 0 {
        parts.push(format!("{minutes} min"));
    }
    parts.join(" ")
}

#[cfg(test)]
mod tests {
    use super::{Micros, Period, PeriodUnit, QuotaTally, length, ordinal};

    #[test]
    fn periods_without_traffic_are_listed_and_counts_start_again_at_each_reset() {
        let period = Period::new(PeriodUnit::Month)
            .anchored(31)
            .unwrap()
            .in_zone("Europe/Berlin")
            .unwrap();
        // 2026-01-01T00:00:00Z, 01:00 in Berlin.
        let start = Micros::new(1_767_225_600_000_000);
        let day = Micros::from_secs(86_400);
        let mut tally = QuotaTally::new(&period, 2);
        // Three requests in January, the third past the quota; one in April.
        for (days, allowed) in [(1, true), (2, true), (3, false), (100, true)] {
            let now = start + days * day;
            let quota = tally.enter(start, now);
            assert_eq!(quota.exact_admit("a", 1, 2), allowed, "day {days}");
            quota.record("a", now, 1, allowed, allowed);
        }
        let summary = tally.finish(120 * day);
        let rows: Vec<(&str, u64, u64, bool, bool)> = summary
            .periods
            .iter()
            .map(|p| {
                let reached = p.quota_reached.is_some();
                (
                    p.start_local.as_str(),
                    p.offered,
                    p.admitted,
                    reached,
                    p.reset,
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("2025-12-31 00:00 CET", 3, 2, true, false),
                ("2026-01-31 00:00 CET", 0, 0, false, true),
                ("2026-02-28 00:00 CET", 0, 0, false, true),
                ("2026-03-31 00:00 CEST", 1, 1, false, true),
                ("2026-04-30 00:00 CEST", 0, 0, false, true),
            ]
        );
        assert_eq!(summary.periods[0].most_to_one, 2);
        assert_eq!(summary.day_label(&summary.periods[2]), "Feb 28");
    }

    #[test]
    fn lengths_and_anchors_read_as_a_person_writes_them() {
        let hours = |h: u64| Micros::from_secs(h * 3600);
        assert_eq!(length(hours(23)), "23 h");
        assert_eq!(length(hours(25)), "25 h");
        assert_eq!(length(hours(28 * 24)), "28 d");
        assert_eq!(length(hours(31 * 24 - 1)), "30 d 23 h");
        assert_eq!(length(hours(24) + Micros::from_secs(1800)), "24 h 30 min");
        let days: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22, 23, 31]
            .into_iter()
            .map(ordinal)
            .collect();
        assert_eq!(
            days,
            [
                "1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd", "23rd", "31st"
            ]
        );
    }
}
