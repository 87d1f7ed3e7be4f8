//! `sluice simulate` over a year of a quota: the clock starts at a calendar instant (`--start`),
//! so periods meet real daylight-saving changes and leap years; the report lists every reset at
//! its local and UTC instant, no identity is admitted past the quota within a period, and the
//! quota's plot marks each reset with its local date. The instants below are written out by hand,
//! not computed with the library's calendar, so that they check it.

use std::path::{Path, PathBuf};

use indicatif::ProgressBar;
use sluice_cli::cli::{Cli, Command as Sub};
use sluice_simulate::quota::QuotaSummary;
use sluice_simulate::{Simulation, output, simulate};

/// A rule file with one quota limit per tenant, written where the test can read it.
fn rules(name: &str, limit: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("simulate-quota");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &path,
        format!("rules:\n  api:\n    limits:\n      - {{ by: [tenant], {limit} }}\n"),
    )
    .unwrap();
    path
}

async fn run(config: &Path, args: &[&str]) -> Simulation {
    let mut line = vec!["sluice", "simulate", "--config", config.to_str().unwrap()];
    line.extend_from_slice(args);
    let cli = <Cli as clap::Parser>::try_parse_from(line).expect("valid command line");
    let Sub::Simulate(args) = cli.command else {
        panic!("parsed as simulate");
    };
    simulate(&args, &ProgressBar::hidden()).await.unwrap()
}

fn quota(sim: &Simulation) -> &QuotaSummary {
    sim.report.limits[0]
        .quota
        .as_ref()
        .expect("a quota limit reports its periods")
}

/// The resets as `(local, UTC)`.
fn resets(quota: &QuotaSummary) -> Vec<(&str, &str)> {
    quota
        .resets()
        .map(|p| (p.start_local.as_str(), p.start_utc.as_str()))
        .collect()
}

/// No identity past the quota in any period, the wall hit in some, and the measures per period
/// agreeing with the exact count.
fn within_the_quota(sim: &Simulation) {
    let quota = quota(sim);
    for p in &quota.periods {
        assert!(p.most_to_one <= quota.quota, "{p:?}");
        assert_eq!(p.admitted, p.exact_admitted, "{p:?}");
    }
    assert!(
        quota.periods.iter().any(|p| p.quota_reached.is_some())
            && quota.periods.iter().any(|p| p.quota_reached.is_none()),
        "the traffic hits the quota in some periods only"
    );
    let row = &sim.report.limits[0];
    assert_eq!((row.beyond_exact, row.missed), (0, 0), "{row:?}");
    assert_eq!(row.peak_in_window, quota.quota);
    let admitted: u64 = quota.periods.iter().map(|p| p.admitted).sum();
    assert_eq!(admitted, row.admitted, "every admission is in one period");
}

#[tokio::test]
async fn a_year_of_a_quota_anchored_on_the_31st_in_berlin_resets_twelve_times_at_local_midnight() {
    let config = rules(
        "berlin",
        "quota: 1000, period: month, anchor: 31, timezone: Europe/Berlin",
    );
    let sim = run(
        &config,
        &[
            "--start",
            "2026-01-01T00:00:00Z",
            "--duration",
            "365d",
            "--rps",
            "0.0004",
        ],
    )
    .await;
    let quota = quota(&sim);
    assert_eq!(
        resets(quota),
        [
            ("2026-01-31 00:00 CET", "2026-01-30T23:00:00Z"),
            ("2026-02-28 00:00 CET", "2026-02-27T23:00:00Z"),
            ("2026-03-31 00:00 CEST", "2026-03-30T22:00:00Z"),
            ("2026-04-30 00:00 CEST", "2026-04-29T22:00:00Z"),
            ("2026-05-31 00:00 CEST", "2026-05-30T22:00:00Z"),
            ("2026-06-30 00:00 CEST", "2026-06-29T22:00:00Z"),
            ("2026-07-31 00:00 CEST", "2026-07-30T22:00:00Z"),
            ("2026-08-31 00:00 CEST", "2026-08-30T22:00:00Z"),
            ("2026-09-30 00:00 CEST", "2026-09-29T22:00:00Z"),
            ("2026-10-31 00:00 CET", "2026-10-30T23:00:00Z"),
            ("2026-11-30 00:00 CET", "2026-11-29T23:00:00Z"),
            ("2026-12-31 00:00 CET", "2026-12-30T23:00:00Z"),
        ]
    );
    // The run began within the period that began on 31 December 2025.
    assert_eq!(quota.periods[0].start_local, "2025-12-31 00:00 CET");
    assert!(!quota.periods[0].reset);
    // February is 28 days; the period into which the clocks go forward an hour shorter than
    // 31 days, the one they go back in an hour longer.
    let lengths: Vec<&str> = quota.periods.iter().map(|p| p.length.as_str()).collect();
    assert_eq!(
        lengths,
        [
            "31 d",
            "28 d",
            "30 d 23 h",
            "30 d",
            "31 d",
            "30 d",
            "31 d",
            "31 d",
            "30 d",
            "31 d 1 h",
            "30 d",
            "31 d",
            "31 d"
        ]
    );
    within_the_quota(&sim);
}

#[tokio::test]
async fn a_leap_year_in_new_york_resets_on_29_february() {
    let config = rules(
        "new-york",
        "quota: 1000, period: month, anchor: 31, timezone: America/New_York",
    );
    let sim = run(
        &config,
        &[
            "--start",
            "2028-01-01",
            "--duration",
            "366d",
            "--rps",
            "0.0004",
        ],
    )
    .await;
    assert_eq!(
        resets(quota(&sim)),
        [
            ("2028-01-31 00:00 EST", "2028-01-31T05:00:00Z"),
            ("2028-02-29 00:00 EST", "2028-02-29T05:00:00Z"),
            ("2028-03-31 00:00 EDT", "2028-03-31T04:00:00Z"),
            ("2028-04-30 00:00 EDT", "2028-04-30T04:00:00Z"),
            ("2028-05-31 00:00 EDT", "2028-05-31T04:00:00Z"),
            ("2028-06-30 00:00 EDT", "2028-06-30T04:00:00Z"),
            ("2028-07-31 00:00 EDT", "2028-07-31T04:00:00Z"),
            ("2028-08-31 00:00 EDT", "2028-08-31T04:00:00Z"),
            ("2028-09-30 00:00 EDT", "2028-09-30T04:00:00Z"),
            ("2028-10-31 00:00 EDT", "2028-10-31T04:00:00Z"),
            ("2028-11-30 00:00 EST", "2028-11-30T05:00:00Z"),
            ("2028-12-31 00:00 EST", "2028-12-31T05:00:00Z"),
        ]
    );
    within_the_quota(&sim);
}

#[tokio::test]
async fn a_daily_quota_in_berlin_has_one_day_of_23_hours_and_one_of_25_in_a_year() {
    let config = rules("daily", "quota: 34, period: day, timezone: Europe/Berlin");
    let sim = run(
        &config,
        &[
            "--start",
            "2026-01-01T00:00:00+01:00",
            "--duration",
            "365d",
            "--rps",
            "0.0004",
        ],
    )
    .await;
    let quota = quota(&sim);
    assert_eq!(quota.resets().count(), 364, "the run starts at a midnight");
    assert_eq!(quota.periods[0].start_local, "2026-01-01 00:00 CET");
    let days = |length: &str| -> Vec<&str> {
        quota
            .periods
            .iter()
            .filter(|p| p.length == length)
            .map(|p| p.start_local.as_str())
            .collect()
    };
    assert_eq!(days("23 h"), ["2026-03-29 00:00 CET"]);
    assert_eq!(days("25 h"), ["2026-10-25 00:00 CEST"]);
    assert_eq!(days("24 h").len(), 363);
    within_the_quota(&sim);
}

/// The texts an SVG draws, trimmed.
fn texts(svg: &str) -> Vec<String> {
    svg.split("<text")
        .skip(1)
        .filter_map(|t| {
            Some(
                t.split_once('>')?
                    .1
                    .split_once("</text>")?
                    .0
                    .trim()
                    .to_string(),
            )
        })
        .collect()
}

#[tokio::test]
async fn the_report_and_the_plot_show_each_reset() {
    let config = rules(
        "plot",
        "quota: 1000, period: month, anchor: 31, timezone: Europe/Berlin",
    );
    let sim = run(
        &config,
        &[
            "--start",
            "2028-01-01",
            "--duration",
            "366d",
            "--rps",
            "0.0004",
        ],
    )
    .await;
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("simulate-quota-out");
    let _ = std::fs::remove_dir_all(&dir);
    output::write(&sim, &dir).unwrap();
    let svg = std::fs::read_to_string(dir.join("quota_api.svg")).unwrap();
    let labels = texts(&svg);
    for day in [
        "Jan 31", "Feb 29", "Mar 31", "Apr 30", "May 31", "Jun 30", "Jul 31", "Aug 31", "Sep 30",
        "Oct 31", "Nov 30", "Dec 31",
    ] {
        assert!(
            labels.iter().any(|l| l == day),
            "{day} is marked: {labels:?}"
        );
    }
    assert!(
        labels.iter().any(|l| l == "reset (local date)"),
        "the legend names them"
    );
    let rates = texts(&std::fs::read_to_string(dir.join("offered_admitted.svg")).unwrap());
    assert!(
        rates.iter().any(|l| l == "Feb 29") && rates.iter().any(|l| l == "units per hour"),
        "the offered and admitted chart marks the resets too, per hour: {rates:?}"
    );
    let png = std::fs::read(dir.join("quota_api.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let md = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(md.contains("![Quota api: 1000 a month from the 31st, Europe/Berlin](quota_api.svg)"));
    assert!(md.contains("12 resets in the run"), "{md}");
    assert!(
        md.contains("| 2 | 2028-02-29 00:00 CET | 2028-02-28T23:00:00Z | 30 d 23 h |"),
        "{md}"
    );
    let text = sim.report.text();
    assert!(text.contains("compared with an exact count per identity and period"));
    assert!(text.contains("1000/month"), "{text}");
    assert!(
        !text.contains("31d1h"),
        "no sliding window stands for a month: {text}"
    );
}
