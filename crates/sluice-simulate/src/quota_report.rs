//! The report's part for quotas: one table per quota limit, a row per calendar period the run
//! overlapped, numbering the resets it crossed, with each period's start in the quota's zone and
//! in UTC, its length (a day of 23 or 25 hours shows), what it admitted and the most one identity
//! used of the quota.

use super::quota::QuotaSummary;
use super::tally::Summary;

/// The columns of a quota's table.
pub(crate) const HEADER: [&str; 8] = [
    "reset",
    "period begins (local)",
    "begins (UTC)",
    "length",
    "offered",
    "admitted",
    "most to one identity",
    "quota reached (local)",
];

/// The title of a quota limit's table.
pub(crate) fn title(s: &Summary, quota: &QuotaSummary) -> String {
    let resets = quota.resets().count();
    format!(
        "quota {} {}: {} — {resets} reset{} in the run; compared with an exact count per identity \
         and period",
        s.subject,
        s.limit_id,
        quota.describe(),
        if resets == 1 { "" } else { "s" }
    )
}

/// A row per period; resets numbered from 1, the period the run began in marked `start`.
pub(crate) fn rows(quota: &QuotaSummary) -> Vec<[String; 8]> {
    let mut reset = 0;
    quota
        .periods
        .iter()
        .map(|p| {
            let number = if p.reset {
                reset += 1;
                reset.to_string()
            } else {
                "start".to_string()
            };
            [
                number,
                p.start_local.clone(),
                p.start_utc.clone(),
                p.length.clone(),
                p.offered.to_string(),
                p.admitted.to_string(),
                format!("{} of {}", p.most_to_one, quota.quota),
                p.quota_reached.clone().unwrap_or_default(),
            ]
        })
        .collect()
}

/// What the quota columns of the main table mean, for `report.md`.
pub(crate) const LEGEND: &str = "- For a quota (a limit per calendar period), the window is the \
     period holding each request, not a sliding one: *peak* is the most admitted to one identity \
     within a period, *beyond exact* admissions past the quota within a period, *missed* denials \
     of requests that fitted within it, and the *rate error* is measured against an exact count \
     per identity and period. Its own table lists every period the run overlapped and the resets \
     it crossed.\n";
