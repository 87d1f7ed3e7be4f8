//! The files of `--out DIR`: `report.md`, `report.json`, and the plots as SVG and PNG.
//!
//! - `offered_admitted`: offered and admitted units per second (per minute, hour or day when
//!   fewer), per rule or algorithm, with the resets of the run's quota when it has one;
//! - `window_peak`: the most units admitted to one identity in a window of the limit's length,
//!   against the limit (limits other than quotas, which have their own);
//! - `window_edge` (comparing algorithms): the same for bursts on both sides of a window edge;
//! - `store_down` (with `--store-down`) or `partition` (with `--partition`): what each fail policy admitted across the nodes;
//! - `quota_<rule>` (per quota limit; `quota_<rule>_<limit>` when a rule has several): what the
//!   busiest identity had used of the quota over time, with a line at each reset labelled with
//!   the period's first day in the quota's zone.

use std::path::{Path, PathBuf};

use super::Simulation;
use super::plot::{self, Chart, Markers};
use super::quota::QuotaSummary;
use super::replay::Measured;
use crate::error::{Context, SimulateError};
use sluice::Micros;

/// Points per plotted series.
const POINTS: usize = 480;

fn seconds(i: usize, bucket_us: Micros) -> f64 {
    (i as u64 * bucket_us).as_secs_f64()
}

/// Units per second per bucket.
fn rate(values: &[u64], bucket_us: Micros) -> Vec<(f64, f64)> {
    let per_second = 1.0 / bucket_us.as_secs_f64();
    values
        .iter()
        .enumerate()
        .map(|(i, v)| (seconds(i, bucket_us), *v as f64 * per_second))
        .collect()
}

/// One limit per rule (the first): the admitted series is the rule's.
fn first_limits(measured: &[Measured]) -> Vec<&Measured> {
    let mut seen = std::collections::BTreeSet::new();
    measured
        .iter()
        .filter(|m| seen.insert(m.summary.subject.clone()))
        .collect()
}

fn offered_admitted(measured: &[Measured]) -> Chart {
    let rules = first_limits(measured);
    let mut lines = Vec::new();
    if let Some(first) = rules.first() {
        let s = first.series.downsampled(POINTS);
        lines.push(("offered".to_string(), rate(&s.offered, s.bucket_us)));
    }
    for m in &rules {
        let s = m.series.downsampled(POINTS);
        lines.push((m.summary.subject.clone(), rate(&s.admitted, s.bucket_us)));
    }
    let (scale, per) = rate_unit(&lines);
    for (_, points) in &mut lines {
        points.iter_mut().for_each(|p| p.1 *= scale);
    }
    // Where a quota resets explains where admissions start again; with one quota, its resets.
    let mut quotas = measured.iter().filter_map(|m| m.summary.quota.as_ref());
    let markers = match (quotas.next(), quotas.next()) {
        (Some(quota), None) => Some(resets(quota)),
        _ => None,
    };
    Chart {
        title: "Offered and admitted".into(),
        y_label: format!("units per {per}"),
        lines,
        markers,
        ..Chart::default()
    }
}

/// The unit that shows the highest of these per-second rates as at least 1 (a year of a
/// monthly quota is a few units an hour): its factor from per second, and its name.
fn rate_unit(lines: &[(String, Vec<(f64, f64)>)]) -> (f64, &'static str) {
    let top = lines
        .iter()
        .flat_map(|(_, points)| points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    [(60.0, "minute"), (3600.0, "hour"), (86400.0, "day")]
        .into_iter()
        .fold((1.0, "second"), |unit, (scale, name)| {
            if top * unit.0 < 1.0 && top > 0.0 {
                (scale, name)
            } else {
                unit
            }
        })
}

/// The peak-in-a-window chart; in % of each limit when the limits differ.
fn window_peak(measured: &[Measured], title: &str) -> Chart {
    let same_limit = measured
        .windows(2)
        .all(|w| w[0].summary.limit == w[1].summary.limit);
    let lines = measured
        .iter()
        .map(|m| {
            let s = m.series.downsampled(POINTS * 2);
            let scale = if same_limit {
                1.0
            } else {
                100.0 / m.summary.limit.max(1) as f64
            };
            let points = s
                .peak
                .iter()
                .enumerate()
                .map(|(i, v)| (seconds(i, s.bucket_us), *v as f64 * scale))
                .collect();
            let name = if m.summary.limit_id.is_empty()
                || measured.len() == first_limits(measured).len()
            {
                m.summary.subject.clone()
            } else {
                format!("{} {}", m.summary.subject, m.summary.limit_id)
            };
            (name, points)
        })
        .collect();
    let (limit, y_label) = match measured.first() {
        Some(m) if same_limit => (m.summary.limit as f64, "most units admitted in one window"),
        _ => (100.0, "most admitted in one window (% of the limit)"),
    };
    Chart {
        title: title.into(),
        y_label: y_label.into(),
        lines,
        limit: Some((limit, "limit".into())),
        ..Chart::default()
    }
}

/// The window-edge case, zoomed on its first edge: the admitted count of the trailing window,
/// which only grows within the view (nothing admitted expires before the next window).
fn window_edge(edge: &[Measured]) -> Chart {
    let mut chart = window_peak(edge, "A burst on both sides of a window edge");
    let Some(first) = edge.first() else {
        return chart;
    };
    let window_s = first.summary.window_ms as f64 / 1e3;
    let bucket_s = first.series.bucket_us.as_secs_f64();
    chart.lines = edge
        .iter()
        .zip(&chart.lines)
        .map(|(m, (name, _))| {
            let mut running = 0.0;
            let points = m
                .series
                .peak
                .iter()
                .enumerate()
                .filter_map(|(i, v)| {
                    running = f64::max(running, *v as f64);
                    let x = i as f64 * bucket_s;
                    (x >= 0.97 * window_s && x <= 1.03 * window_s).then_some((x, running))
                })
                .collect();
            (name.clone(), points)
        })
        .collect();
    chart.widen = true;
    chart
}

fn store_down(sim: &Simulation) -> Option<Chart> {
    let outage = sim.report.outage.as_ref()?;
    let rules = first_limits(&sim.outage);
    let rule = rules
        .first()?
        .summary
        .subject
        .split_once('/')?
        .1
        .to_string();
    let lines = rules
        .iter()
        .filter(|m| m.summary.subject.ends_with(&format!("/{rule}")))
        .map(|m| {
            let s = m.series.downsampled(POINTS);
            (m.summary.subject.clone(), rate(&s.admitted, s.bucket_us))
        })
        .collect();
    Some(Chart {
        title: if outage.cut_off >= outage.nodes {
            format!(
                "Store down, {} nodes: admitted by fail policy (rule {rule})",
                outage.nodes
            )
        } else {
            format!(
                "Partition, {} of {} nodes cut off: admitted by fail policy (rule {rule})",
                outage.cut_off, outage.nodes
            )
        },
        y_label: "units per second".into(),
        lines,
        span: Some((outage.from_s, outage.to_s, outage.span_label().into())),
        ..Chart::default()
    })
}

/// A quota's resets as a chart's markers.
fn resets(quota: &QuotaSummary) -> Markers {
    let at = quota
        .resets()
        .map(|p| {
            let x = p.start_ms.saturating_sub(quota.run_start_ms) as f64 / 1e3;
            (x, quota.day_label(p))
        })
        .collect();
    Markers {
        caption: "reset (local date)".into(),
        at,
    }
}

/// What the busiest identity had used of a quota over time. A bucket without a request holds
/// what was used before it, or nothing when a reset falls within it: what was used does not
/// change between requests, only at a reset.
fn used(m: &Measured, resets: &Markers) -> Vec<(f64, f64)> {
    let s = m.series.downsampled(POINTS * 2);
    let mut last = 0.0;
    s.peak
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let (from, to) = (seconds(i, s.bucket_us), seconds(i + 1, s.bucket_us));
            if *v > 0 {
                last = *v as f64;
            } else if resets.at.iter().any(|(x, _)| (from..to).contains(x)) {
                last = 0.0;
            }
            (from, last)
        })
        .collect()
}

/// One chart per quota limit, with its file's stem.
fn quotas(measured: &[Measured]) -> Vec<(String, Chart)> {
    measured
        .iter()
        .filter_map(|m| Some((m, m.summary.quota.as_ref()?)))
        .map(|(m, quota)| {
            let subject = &m.summary.subject;
            let several = measured
                .iter()
                .filter(|o| &o.summary.subject == subject && o.summary.quota.is_some())
                .count()
                > 1;
            let stem = match several {
                true => format!("quota_{subject}_{}", m.summary.limit_id),
                false => format!("quota_{subject}"),
            };
            let stem: String = stem
                .chars()
                .map(|c| match c {
                    'a'..='z' | 'A'..='Z' | '0'..='9' | '-' | '_' => c,
                    _ => '_',
                })
                .collect();
            let markers = resets(quota);
            let chart = Chart {
                title: format!("Quota {subject}: {}", quota.describe()),
                y_label: "units used in the period".into(),
                lines: vec![("the busiest identity".into(), used(m, &markers))],
                limit: Some((quota.quota as f64, "quota".into())),
                markers: Some(markers),
                ..Chart::default()
            };
            (stem, chart)
        })
        .collect()
}

/// Writes every file into `dir` (created if missing); returns their paths.
pub fn write(sim: &Simulation, dir: &Path) -> Result<Vec<PathBuf>, SimulateError> {
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut charts = vec![(
        "offered_admitted".to_string(),
        offered_admitted(&sim.measured),
    )];
    // A quota's window is its period, which its own chart shows with the resets.
    let windowed: Vec<Measured> = sim
        .measured
        .iter()
        .filter(|m| m.summary.quota.is_none())
        .cloned()
        .collect();
    if !windowed.is_empty() {
        charts.push((
            "window_peak".to_string(),
            window_peak(&windowed, "Most admitted in any window, against the limit"),
        ));
    }
    if !sim.edge.is_empty() {
        charts.push(("window_edge".to_string(), window_edge(&sim.edge)));
    }
    if let (Some(chart), Some(outage)) = (store_down(sim), &sim.report.outage) {
        charts.push((outage.span_label().replace(' ', "_"), chart));
    }
    charts.extend(quotas(&sim.measured));
    let mut files = Vec::new();
    for (stem, chart) in &charts {
        plot::write(chart, dir, stem)?;
        files.push(dir.join(format!("{stem}.svg")));
        files.push(dir.join(format!("{stem}.png")));
    }
    let plots: Vec<(String, &str)> = charts
        .iter()
        .map(|(stem, chart)| (format!("{stem}.svg"), chart.title.as_str()))
        .collect();
    let links: Vec<(&str, &str)> = plots.iter().map(|(f, t)| (f.as_str(), *t)).collect();
    let md = dir.join("report.md");
    std::fs::write(&md, sim.report.markdown(&links))
        .with_context(|| format!("cannot write {}", md.display()))?;
    let json = dir.join("report.json");
    std::fs::write(&json, serde_json::to_string_pretty(&sim.report)?)
        .with_context(|| format!("cannot write {}", json.display()))?;
    files.push(md);
    files.push(json);
    Ok(files)
}
