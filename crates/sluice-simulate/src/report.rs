//! The accuracy report: a table on the terminal, `report.md` and `report.json`.
//!
//! One row per limit: requests offered, admitted, denied; the most units admitted to one identity
//! in any window of the limit's length (the burst a backend really sees) against the limit;
//! admissions beyond an exact sliding log and denials it would not have made; the mean error of
//! the admitted rate; and, under the `attacker` pattern, the attacker's time to its first denial
//! and to recovery. With a store outage, a second table per fail policy. A quota is measured per
//! calendar period instead of per sliding window, and gets a table of its periods and resets
//! (`quota_report`).

use std::fmt::Write;

use serde::Serialize;

use super::quota_report;
use super::tally::Summary;

/// What was simulated.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    /// The traffic, in words (`pattern attacker: ...` or `trace FILE`).
    pub traffic: String,
    /// Requests replayed.
    pub requests: u64,
    /// Distinct identities.
    pub identities: usize,
    /// The simulated clock's start, as given (`2026-01-01T00:00:00Z`).
    pub start: String,
    /// Simulated time covered (seconds).
    pub simulated_s: f64,
    /// The command line that reproduces the run.
    pub command: String,
}

/// The store outage (or a partition) and what each fail policy admitted.
#[derive(Debug, Clone, Serialize)]
pub struct Outage {
    /// Nodes sharing the store.
    pub nodes: usize,
    /// The nodes that lost the store: all of them when it went down, one region's in a partition.
    pub cut_off: usize,
    /// `store.nodes`: `local` decided `1 / shares` of each limit on each node.
    pub shares: u32,
    /// Start of the outage (seconds from the start).
    pub from_s: f64,
    /// Its end.
    pub to_s: f64,
    /// One row per policy and limit; `subject` is `policy/rule`.
    pub limits: Vec<Summary>,
}

impl Outage {
    /// `store down from 3600 s to 5400 s, 3 nodes` or `partition from … s to … s: 2 of 4 nodes
    /// cut off from the store`, with `, local deciding 1/4 of each limit per node` when shared.
    pub fn title(&self) -> String {
        let what = if self.cut_off >= self.nodes {
            format!(
                "store down from {:.0} s to {:.0} s, {} nodes",
                self.from_s, self.to_s, self.nodes
            )
        } else {
            format!(
                "partition from {:.0} s to {:.0} s: {} of {} nodes cut off from the store",
                self.from_s, self.to_s, self.cut_off, self.nodes
            )
        };
        match self.shares {
            1 => what,
            n => format!("{what}, local deciding 1/{n} of each limit per node"),
        }
    }

    /// What the plots call the span: `store down` or `partition`.
    pub fn span_label(&self) -> &'static str {
        if self.cut_off >= self.nodes {
            "store down"
        } else {
            "partition"
        }
    }
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// What was simulated.
    pub setup: Setup,
    /// One row per limit.
    pub limits: Vec<Summary>,
    /// The outage, when one was simulated.
    pub outage: Option<Outage>,
}

fn percent(value: f64) -> String {
    format!("{value:.2} %")
}

fn attacker(s: &Summary) -> String {
    match s.attacker {
        None => String::new(),
        Some(times) => {
            let ms = |v: Option<u64>| {
                v.map_or("never".to_string(), |v| format!("{:.1}s", v as f64 / 1e3))
            };
            format!("{} / {}", ms(times.first_denial_ms), ms(times.recovery_ms))
        }
    }
}

const HEADER: [&str; 11] = [
    "rule",
    "rate",
    "algorithm",
    "offered",
    "admitted",
    "denied",
    "peak in a window",
    "beyond exact",
    "missed",
    "rate error /s",
    "attacker: 1st denial / recovery",
];

fn row(s: &Summary, several: bool) -> [String; 11] {
    // A quota's window is its calendar period, which no one length stands for.
    let rate = match &s.quota {
        Some(quota) => format!("{}/{}", s.limit, quota.period),
        None => format!("{}/{}", s.limit, format_ms(s.window_ms)),
    };
    let limit = if several {
        format!("{} {rate}", s.limit_id)
    } else {
        rate
    };
    let peak = format!(
        "{} ({:.2}× {})",
        s.peak_in_window,
        s.peak_in_window as f64 / s.limit.max(1) as f64,
        if s.quota.is_some() {
            "quota, in a period"
        } else {
            "limit"
        }
    );
    let skipped = if s.skipped_requests > 0 {
        format!(" ({} skipped)", s.skipped_requests)
    } else {
        String::new()
    };
    [
        s.subject.clone(),
        limit,
        s.algorithm.to_string(),
        format!("{}{skipped}", s.offered_requests),
        s.admitted_requests.to_string(),
        s.denied_requests.to_string(),
        peak,
        format!("{} ({})", s.beyond_exact, percent(s.beyond_exact_pct)),
        format!("{} ({})", s.missed, percent(s.missed_pct)),
        format!("{:.3}", s.mean_rate_error),
        attacker(s),
    ]
}

fn outage_row(s: &Summary) -> [String; 6] {
    let span = s.span.unwrap_or_default();
    [
        s.subject.clone(),
        format!("{}/{}", s.limit, format_ms(s.window_ms)),
        span.offered.to_string(),
        span.admitted.to_string(),
        span.peak.to_string(),
        format!("{:.2}×", span.peak as f64 / s.limit.max(1) as f64),
    ]
}

const OUTAGE_HEADER: [&str; 6] = [
    "policy/rule",
    "limit",
    "offered in outage",
    "admitted in outage",
    "peak in a window",
    "peak / limit",
];

/// `90000` → `90s`, `60000` → `1m`.
fn format_ms(ms: u64) -> String {
    sluice::model::format_duration(std::time::Duration::from_millis(ms))
}

/// `quota api …` → `Quota api …`.
fn upper_first(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |first| {
        first.to_uppercase().chain(chars).collect()
    })
}

/// Columns padded to their widest cell.
fn text_table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let padded: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c}{}", " ".repeat(w - c.chars().count())))
            .collect();
        let _ = writeln!(out, "{}", padded.join("  ").trim_end());
    };
    line(header.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

fn markdown_table<const N: usize>(header: [&str; N], rows: &[[String; N]]) -> String {
    let mut out = format!("| {} |\n|{}\n", header.join(" | "), " --- |".repeat(N));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    out
}

/// The rows of a table; limits are named only in rules that have several.
fn rows(limits: &[Summary]) -> Vec<[String; 11]> {
    limits
        .iter()
        .map(|s| {
            let several = limits.iter().filter(|o| o.subject == s.subject).count() > 1;
            row(s, several)
        })
        .collect()
}

impl Report {
    fn setup_line(&self) -> String {
        format!(
            "{} — {} request{} from {} identit{} over {:.0} s of simulated time from {}",
            self.setup.traffic,
            self.setup.requests,
            if self.setup.requests == 1 { "" } else { "s" },
            self.setup.identities,
            if self.setup.identities == 1 {
                "y"
            } else {
                "ies"
            },
            self.setup.simulated_s,
            self.setup.start
        )
    }

    /// Each quota limit's title and rows.
    fn quotas(&self) -> Vec<(String, Vec<[String; 8]>)> {
        self.limits
            .iter()
            .filter_map(|s| {
                let quota = s.quota.as_ref()?;
                Some((quota_report::title(s, quota), quota_report::rows(quota)))
            })
            .collect()
    }

    /// The report as terminal text.
    pub fn text(&self) -> String {
        let rows = rows(&self.limits);
        let mut out = format!("{}\n\n{}", self.setup_line(), text_table(HEADER, &rows));
        for (title, rows) in self.quotas() {
            let _ = write!(
                out,
                "\n{title}:\n{}",
                text_table(quota_report::HEADER, &rows)
            );
        }
        if let Some(outage) = &self.outage {
            let rows: Vec<_> = outage.limits.iter().map(outage_row).collect();
            let _ = write!(
                out,
                "\n{}:\n{}",
                outage.title(),
                text_table(OUTAGE_HEADER, &rows)
            );
        }
        out
    }

    /// The report as Markdown, linking the plots written beside it.
    pub fn markdown(&self, plots: &[(&str, &str)]) -> String {
        let rows = rows(&self.limits);
        let mut out = format!(
            "# Simulation\n\n{}.\n\n`{}`\n\n{}\n",
            self.setup_line(),
            self.setup.command,
            markdown_table(HEADER, &rows)
        );
        out.push_str(
            "- *peak in a window*: the most units admitted to one identity within any window of \
             the limit's length — the burst a backend really sees.\n\
             - *beyond exact*: admissions that left more than the limit admitted within one \
             window, which an exact sliding log never allows; *missed*: denials of requests that \
             fitted within the limit given what the window held, which an exact sliding log would \
             have admitted (percentages of the requests offered).\n\
             - *rate error*: mean absolute difference between the admitted rate and the exact \
             sliding log's, in units per second.\n",
        );
        let quotas = self.quotas();
        if !quotas.is_empty() {
            out.push_str(quota_report::LEGEND);
        }
        for (title, rows) in quotas {
            let _ = write!(
                out,
                "\n## {}\n\n{}",
                upper_first(&title),
                markdown_table(quota_report::HEADER, &rows)
            );
        }
        if let Some(outage) = &self.outage {
            let rows: Vec<_> = outage.limits.iter().map(outage_row).collect();
            let _ = write!(
                out,
                "\n## {}\n\n{}",
                upper_first(&outage.title()),
                markdown_table(OUTAGE_HEADER, &rows)
            );
        }
        if !plots.is_empty() {
            out.push_str("\n## Plots\n\n");
            for (file, title) in plots {
                let _ = writeln!(out, "![{title}]({file})\n");
            }
        }
        out
    }
}
