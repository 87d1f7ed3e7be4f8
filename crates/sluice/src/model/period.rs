//! [`Period`]: the calendar period of a quota — a day, a week, a month or a year in a time zone,
//! a month starting on an anchor day — and where the period that holds a given time begins and
//! ends.
//!
//! Invariants:
//! - periods tile time: the period that holds `t` is `[start, end)` with `start <= t < end`, and
//!   the period that holds `end` begins at `end`, so no instant belongs to two periods or none;
//! - a day runs from one local midnight to the next in the period's zone, so it lasts 23 or 25
//!   hours across a daylight-saving change (where midnight does not exist, the day begins at its
//!   first instant);
//! - weeks begin on Monday (ISO 8601), years on 1 January;
//! - a month runs from its anchor day to the same day of the next month; an anchor past a
//!   month's end falls on that month's last day, and each period's bounds are computed from the
//!   anchor itself, never from the previous period's, so an anchor of 31 falls on 28 or 29
//!   February and on 31 March again.
//!
//! The zone database is the one bundled with the library (`jiff`'s), so a period's bounds do not
//! depend on the machine the store or the service runs on.

use std::fmt;
use std::str::FromStr;

use jiff::civil::Date;
use jiff::tz::TimeZone;
use jiff::{Timestamp, ToSpan};
use serde::{Deserialize, Serialize};

use super::Micros;

/// The length of a calendar period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum PeriodUnit {
    /// From local midnight to the next.
    Day,
    /// From Monday's local midnight to the next Monday's.
    Week,
    /// From the anchor day of a month to that of the next (the 1st unless anchored).
    Month,
    /// From 1 January to the next.
    Year,
}

impl PeriodUnit {
    /// The unit's name in rule files.
    pub fn name(self) -> &'static str {
        match self {
            PeriodUnit::Day => "day",
            PeriodUnit::Week => "week",
            PeriodUnit::Month => "month",
            PeriodUnit::Year => "year",
        }
    }
}

impl fmt::Display for PeriodUnit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Why a period cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PeriodError {
    /// The zone is not an IANA name the bundled database knows.
    #[error("unknown time zone {0:?} (an IANA name such as \"Europe/Berlin\" or \"UTC\")")]
    UnknownZone(String),
    /// An anchor day outside 1–31.
    #[error("anchor {0} is not a day of the month (1 to 31)")]
    AnchorOutOfRange(u8),
    /// An anchor on a period other than a month.
    #[error("anchor applies to a month only, not a {0}")]
    AnchorNeedsMonth(PeriodUnit),
}

/// A calendar period: its unit, its zone and, for a month, its anchor day.
///
/// Two periods are equal when their unit, zone name and anchor are.
#[derive(Clone)]
pub struct Period {
    unit: PeriodUnit,
    zone: TimeZone,
    zone_name: String,
    anchor: u8,
}

impl fmt::Debug for Period {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Period")
            .field("unit", &self.unit)
            .field("zone", &self.zone_name)
            .field("anchor", &self.anchor)
            .finish()
    }
}

impl PartialEq for Period {
    fn eq(&self, other: &Period) -> bool {
        (self.unit, &self.zone_name, self.anchor) == (other.unit, &other.zone_name, other.anchor)
    }
}

impl Eq for Period {}

impl std::hash::Hash for Period {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        (self.unit, &self.zone_name, self.anchor).hash(state);
    }
}

/// Where one period begins and ends, in microseconds since the epoch: `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeriodBounds {
    /// The period's first instant.
    pub start: Micros,
    /// The next period's first instant.
    pub end: Micros,
}

impl Period {
    /// A period of `unit` in UTC, a month anchored on the 1st.
    pub fn new(unit: PeriodUnit) -> Period {
        Period {
            unit,
            zone: TimeZone::UTC,
            zone_name: "UTC".to_string(),
            anchor: 1,
        }
    }

    /// The same period in the IANA zone `name` (`"Europe/Berlin"`).
    pub fn in_zone(mut self, name: &str) -> Result<Period, PeriodError> {
        self.zone = jiff::tz::db()
            .get(name)
            .map_err(|_| PeriodError::UnknownZone(name.to_string()))?;
        self.zone_name = name.to_string();
        Ok(self)
    }

    /// The same period starting on day `anchor` of each month (1–31; a month only).
    pub fn anchored(mut self, anchor: u8) -> Result<Period, PeriodError> {
        if self.unit != PeriodUnit::Month && anchor != 1 {
            return Err(PeriodError::AnchorNeedsMonth(self.unit));
        }
        if !(1..=31).contains(&anchor) {
            return Err(PeriodError::AnchorOutOfRange(anchor));
        }
        self.anchor = anchor;
        Ok(self)
    }

    /// The unit.
    pub fn unit(&self) -> PeriodUnit {
        self.unit
    }

    /// The zone's IANA name.
    pub fn zone(&self) -> &str {
        &self.zone_name
    }

    /// The anchor day (1 unless a month was anchored).
    pub fn anchor(&self) -> u8 {
        self.anchor
    }

    /// The one copy of this period the process keeps, which algorithm parameters point to (they
    /// are `Copy`). Distinct periods are few (a unit, an IANA zone and an anchor day), so the
    /// copies kept are bounded however often rules are reloaded.
    pub fn interned(&self) -> &'static Period {
        self.kept(self.anchor)
    }

    /// The kept copy of this period anchored on `anchor` (valid for its unit), made on first use.
    /// A copy already kept is found without cloning this one (a decision of an identity with its
    /// own billing day asks for it).
    fn kept(&self, anchor: u8) -> &'static Period {
        static KEPT: std::sync::Mutex<Vec<&'static Period>> = std::sync::Mutex::new(Vec::new());
        let mut kept = KEPT
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let same =
            |p: &Period| (p.unit, &p.zone_name, p.anchor) == (self.unit, &self.zone_name, anchor);
        if let Some(period) = kept.iter().find(|p| same(p)) {
            return period;
        }
        let period: &'static Period = Box::leak(Box::new(Period {
            anchor,
            ..self.clone()
        }));
        kept.push(period);
        period
    }

    /// The kept copy ([`Period::interned`]) of this period starting on day `anchor` instead: an
    /// identity's own billing day. A period that is not a month, or an anchor outside 1–31
    /// (which a stored entry never holds, see [`RuntimeNumbers`](crate::algorithm::RuntimeNumbers)),
    /// keeps its own.
    pub fn with_anchor(&'static self, anchor: u8) -> &'static Period {
        if anchor == self.anchor || self.unit != PeriodUnit::Month || !(1..=31).contains(&anchor) {
            return self;
        }
        // The last one asked on this thread, so that steady decisions of identities with their
        // own day do not all take the kept copies' lock.
        type Recent = Option<(&'static Period, u8, &'static Period)>;
        thread_local!(static RECENT: std::cell::Cell<Recent> = const { std::cell::Cell::new(None) });
        if let Some((base, day, period)) = RECENT.get()
            && std::ptr::eq(base, self)
            && day == anchor
        {
            return period;
        }
        let period = self.kept(anchor);
        RECENT.set(Some((self, anchor, period)));
        period
    }

    /// The longest a period of this unit lasts, which stands for its window where one length is
    /// asked for (a limit's id, `RateLimit-Policy`): a day of 25 hours, a week of 7 days and an
    /// hour, a month of 31 days and an hour, a year of 366 days and an hour.
    pub fn longest(&self) -> std::time::Duration {
        const HOUR: u64 = 3600;
        const DAY: u64 = 24 * HOUR;
        std::time::Duration::from_secs(match self.unit {
            PeriodUnit::Day => DAY + HOUR,
            PeriodUnit::Week => 7 * DAY + HOUR,
            PeriodUnit::Month => 31 * DAY + HOUR,
            PeriodUnit::Year => 366 * DAY + HOUR,
        })
    }

    /// The period that holds `now` (microseconds since the epoch). Saturates at the ends of the
    /// calendar the zone database covers (years -9999 to 9999), far past any clock.
    pub fn bounds_at(&self, now: Micros) -> PeriodBounds {
        let instant = Timestamp::from_microsecond(now.get().min(i64::MAX as u64) as i64)
            .unwrap_or(Timestamp::MAX);
        let today = instant.to_zoned_datetime(self.zone.clone()).date();
        let first = self.first_day_holding(today);
        let next = self.first_day_after(first);
        PeriodBounds {
            start: self.midnight(first),
            end: self.midnight(next),
        }
    }

    /// The first day of the period that holds the day `today`.
    fn first_day_holding(&self, today: Date) -> Date {
        match self.unit {
            PeriodUnit::Day => today,
            PeriodUnit::Week => {
                let back = today.weekday().to_monday_zero_offset();
                today.checked_sub(i64::from(back).days()).unwrap_or(today)
            }
            PeriodUnit::Month => {
                let this_month = self.anchor_in(today.year(), today.month());
                if this_month <= today {
                    this_month
                } else {
                    let previous = today.first_of_month().checked_sub(1.day()).unwrap_or(today);
                    self.anchor_in(previous.year(), previous.month())
                }
            }
            PeriodUnit::Year => today.first_of_year(),
        }
    }

    /// The first day of the period after the one that begins on `first`.
    fn first_day_after(&self, first: Date) -> Date {
        let next = match self.unit {
            PeriodUnit::Day => first.checked_add(1.day()),
            PeriodUnit::Week => first.checked_add(1.week()),
            PeriodUnit::Month => first
                .first_of_month()
                .checked_add(1.month())
                .map(|month| self.anchor_in(month.year(), month.month())),
            PeriodUnit::Year => first.first_of_year().checked_add(1.year()),
        };
        next.unwrap_or(Date::MAX)
    }

    /// The anchor day in a month: the anchor, or the month's last day when it has fewer days.
    fn anchor_in(&self, year: i16, month: i8) -> Date {
        let first = Date::new(year, month, 1).unwrap_or(Date::MAX);
        let day = self.anchor.min(first.days_in_month() as u8) as i8;
        first.with().day(day).build().unwrap_or(first)
    }

    /// The first instant of `day` in the zone (midnight, or the end of a gap that swallows it).
    fn midnight(&self, day: Date) -> Micros {
        let start = day
            .to_zoned_datetime(self.zone.clone())
            .and_then(|zoned| zoned.start_of_day())
            .map(|zoned| zoned.timestamp().as_microsecond())
            .unwrap_or(i64::MAX);
        Micros::new(start.max(0) as u64)
    }
}

impl FromStr for PeriodUnit {
    type Err = String;
    fn from_str(text: &str) -> Result<PeriodUnit, String> {
        match text {
            "day" => Ok(PeriodUnit::Day),
            "week" => Ok(PeriodUnit::Week),
            "month" => Ok(PeriodUnit::Month),
            "year" => Ok(PeriodUnit::Year),
            other => Err(format!(
                "unknown period {other:?} (day, week, month or year)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Microseconds since the epoch of a civil time in a zone, e.g. `at("2026-03-29T01:30", "Europe/Berlin")`.
    fn at(civil: &str, zone: &str) -> Micros {
        let time: jiff::civil::DateTime = civil.parse().unwrap();
        let zoned = time.in_tz(zone).unwrap();
        Micros::new(zoned.timestamp().as_microsecond() as u64)
    }

    /// A period's bounds as civil times in its zone, to read them as a person would.
    fn civil(period: &Period, now: Micros) -> (String, String) {
        let show = |t: Micros| {
            Timestamp::from_microsecond(t.get() as i64)
                .unwrap()
                .to_zoned_datetime(period.zone.clone())
                .strftime("%Y-%m-%d %H:%M")
                .to_string()
        };
        let bounds = period.bounds_at(now);
        (show(bounds.start), show(bounds.end))
    }

    fn month(anchor: u8) -> Period {
        Period::new(PeriodUnit::Month).anchored(anchor).unwrap()
    }

    #[test]
    fn a_month_runs_from_its_anchor_to_the_same_day_of_the_next() {
        let period = month(15);
        assert_eq!(
            civil(&period, at("2026-11-29T12:00", "UTC")),
            ("2026-11-15 00:00".into(), "2026-12-15 00:00".into())
        );
        // Before the anchor, the period began in the month before.
        assert_eq!(
            civil(&period, at("2026-01-14T23:59", "UTC")),
            ("2025-12-15 00:00".into(), "2026-01-15 00:00".into())
        );
        // The anchor's first instant opens the new period.
        assert_eq!(
            civil(&period, at("2026-01-15T00:00", "UTC")),
            ("2026-01-15 00:00".into(), "2026-02-15 00:00".into())
        );
    }

    #[test]
    fn an_anchor_past_a_months_end_falls_on_its_last_day_and_comes_back() {
        let period = month(31);
        let resets: Vec<(String, String)> = [
            "2027-01-31T08:00",
            "2027-02-28T08:00",
            "2027-03-31T08:00",
            "2027-04-30T08:00",
        ]
        .iter()
        .map(|t| civil(&period, at(t, "UTC")))
        .collect();
        assert_eq!(
            resets,
            [
                ("2027-01-31 00:00".into(), "2027-02-28 00:00".into()),
                ("2027-02-28 00:00".into(), "2027-03-31 00:00".into()),
                ("2027-03-31 00:00".into(), "2027-04-30 00:00".into()),
                ("2027-04-30 00:00".into(), "2027-05-31 00:00".into()),
            ]
        );
        // In a leap year, February's last day is the 29th.
        assert_eq!(
            civil(&period, at("2028-02-29T00:00", "UTC")).0,
            "2028-02-29 00:00"
        );
        assert_eq!(
            civil(&period, at("2028-02-28T23:59", "UTC")).0,
            "2028-01-31 00:00"
        );
    }

    #[test]
    fn a_day_follows_its_zone_across_daylight_saving() {
        let berlin = Period::new(PeriodUnit::Day)
            .in_zone("Europe/Berlin")
            .unwrap();
        let hours = |t: &str| {
            let b = berlin.bounds_at(at(t, "Europe/Berlin"));
            (b.end - b.start).get() / 3_600_000_000
        };
        assert_eq!(hours("2026-03-29T12:00"), 23, "spring forward");
        assert_eq!(hours("2026-10-25T12:00"), 25, "fall back");
        assert_eq!(hours("2026-11-29T12:00"), 24);
        assert_eq!(
            civil(&berlin, at("2026-03-29T01:30", "Europe/Berlin")),
            ("2026-03-29 00:00".into(), "2026-03-30 00:00".into())
        );
    }

    #[test]
    fn a_day_whose_midnight_does_not_exist_begins_at_its_first_instant() {
        // Santiago moved its clocks from 00:00 to 01:00 on 2026-09-06.
        let santiago = Period::new(PeriodUnit::Day)
            .in_zone("America/Santiago")
            .unwrap();
        let bounds = santiago.bounds_at(at("2026-09-06T12:00", "America/Santiago"));
        assert_eq!(bounds.start, at("2026-09-06T01:00", "America/Santiago"));
        assert_eq!(
            santiago.bounds_at(bounds.start - Micros::new(1)).end,
            bounds.start
        );
    }

    #[test]
    fn weeks_begin_on_monday_and_years_on_the_first_of_january() {
        let week = Period::new(PeriodUnit::Week);
        // 2026-11-29 is a Sunday.
        assert_eq!(
            civil(&week, at("2026-11-29T23:00", "UTC")),
            ("2026-11-23 00:00".into(), "2026-11-30 00:00".into())
        );
        let year = Period::new(PeriodUnit::Year).in_zone("Asia/Tokyo").unwrap();
        assert_eq!(
            civil(&year, at("2027-01-01T00:30", "Asia/Tokyo")),
            ("2027-01-01 00:00".into(), "2028-01-01 00:00".into())
        );
    }

    #[test]
    fn periods_tile_time_over_a_year_of_every_unit() {
        let periods = [
            Period::new(PeriodUnit::Day)
                .in_zone("Europe/Berlin")
                .unwrap(),
            Period::new(PeriodUnit::Week)
                .in_zone("America/New_York")
                .unwrap(),
            month(31).in_zone("Australia/Lord_Howe").unwrap(),
            month(29).in_zone("America/Santiago").unwrap(),
            Period::new(PeriodUnit::Year)
                .in_zone("Pacific/Apia")
                .unwrap(),
        ];
        for period in &periods {
            let mut t = at("2026-01-01T00:00", "UTC");
            let stop = at("2028-01-01T00:00", "UTC");
            while t < stop {
                let bounds = period.bounds_at(t);
                assert!(bounds.start <= t && t < bounds.end, "{period:?} at {t:?}");
                assert_eq!(period.bounds_at(bounds.end).start, bounds.end, "{period:?}");
                assert_eq!(
                    period.bounds_at(bounds.end - Micros::new(1)),
                    bounds,
                    "{period:?}"
                );
                t = bounds.end;
            }
        }
    }

    #[test]
    fn bad_periods_are_refused_with_the_reason() {
        assert_eq!(
            Period::new(PeriodUnit::Day)
                .in_zone("Mars/Olympus")
                .unwrap_err(),
            PeriodError::UnknownZone("Mars/Olympus".into())
        );
        assert_eq!(
            Period::new(PeriodUnit::Month).anchored(32).unwrap_err(),
            PeriodError::AnchorOutOfRange(32)
        );
        assert_eq!(
            Period::new(PeriodUnit::Month).anchored(0).unwrap_err(),
            PeriodError::AnchorOutOfRange(0)
        );
        assert_eq!(
            Period::new(PeriodUnit::Week).anchored(3).unwrap_err(),
            PeriodError::AnchorNeedsMonth(PeriodUnit::Week)
        );
        assert_eq!(
            "fortnight".parse::<PeriodUnit>().unwrap_err(),
            "unknown period \"fortnight\" (day, week, month or year)"
        );
    }
}
