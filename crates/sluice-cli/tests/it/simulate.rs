//! `sluice simulate` on known cases: the numbers each algorithm must give, and the files it
//! writes.

use std::path::PathBuf;
use std::process::Command;

use indicatif::ProgressBar;
use sluice_cli::cli::{Cli, Command as Sub};
use sluice_simulate::tally::Summary;
use sluice_simulate::{Simulation, simulate};

async fn run(args: &[&str]) -> Simulation {
    let mut line = vec!["sluice", "simulate"];
    line.extend_from_slice(args);
    let cli = <Cli as clap::Parser>::try_parse_from(line).expect("valid command line");
    let Sub::Simulate(args) = cli.command else {
        panic!("parsed as simulate");
    };
    simulate(&args, &ProgressBar::hidden()).await.unwrap()
}

fn limit<'a>(sim: &'a Simulation, subject: &str) -> &'a Summary {
    sim.report
        .limits
        .iter()
        .chain(sim.report.outage.iter().flat_map(|o| &o.limits))
        .find(|s| s.subject == subject)
        .unwrap_or_else(|| panic!("no row for {subject}"))
}

#[tokio::test]
async fn across_a_window_edge_the_fixed_window_admits_twice_the_limit_and_exact_ones_never_exceed_it()
 {
    let sim = run(&[
        "--rate",
        "10/1m",
        "--pattern",
        "window-edge",
        "--duration",
        "1h",
    ])
    .await;
    let fixed = limit(&sim, "fixed_window");
    assert_eq!(fixed.peak_in_window, 20, "2× the limit across the edge");
    assert!(fixed.beyond_exact > 0);
    for exact in [
        "sliding_log",
        "sliding_window",
        "token_bucket",
        "gcra",
        "leaky_bucket",
    ] {
        let s = limit(&sim, exact);
        assert_eq!(s.peak_in_window, 10, "{exact}");
        assert_eq!(s.beyond_exact, 0, "{exact}");
    }
    let log = limit(&sim, "sliding_log");
    assert_eq!((log.missed, log.admitted), (0, log.exact_admitted));
    assert_eq!(
        sim.edge.len(),
        6,
        "the edge case is run at the compared rate"
    );
}

#[tokio::test]
async fn the_sliding_log_is_the_exact_reference_and_the_sliding_window_stays_within_its_bound() {
    let sim = run(&[
        "--rate",
        "20/1m",
        "--pattern",
        "identities",
        "--identities",
        "8",
        "--rps",
        "1.5",
        "--duration",
        "2h",
        "--algorithms",
        "sliding_log,sliding_window",
    ])
    .await;
    let log = limit(&sim, "sliding_log");
    assert!(log.denied_requests > 1000, "the traffic is above the limit");
    assert_eq!((log.beyond_exact, log.missed), (0, 0));
    assert_eq!(log.admitted, log.exact_admitted);
    assert_eq!(log.mean_rate_error, 0.0);

    let window = limit(&sim, "sliding_window");
    assert_eq!(
        window.beyond_exact, 0,
        "never more than the limit in any window"
    );
    assert!(window.peak_in_window <= 20);
    // A unit counts at most 10 % of a window longer than in the exact log, so the sliding window
    // admits at least what an exact log with a window 10 % longer would.
    let longer = run(&[
        "--rate",
        "20/66s",
        "--pattern",
        "identities",
        "--identities",
        "8",
        "--rps",
        "1.5",
        "--duration",
        "2h",
        "--algorithms",
        "sliding_log",
    ])
    .await;
    let bound = limit(&longer, "sliding_log").admitted;
    assert!(
        window.admitted >= bound && window.admitted <= log.admitted,
        "{} within [{bound}, {}]",
        window.admitted,
        log.admitted
    );
}

#[tokio::test]
async fn gcra_admits_exactly_its_burst_then_the_rate() {
    // 10 requests a second for 10 minutes against 10/1m with a burst of 5: five pass at once,
    // then one every 6 s.
    let sim = run(&[
        "--rate",
        "10/1m",
        "--burst",
        "5",
        "--algorithms",
        "gcra,token_bucket",
        "--rps",
        "10",
        "--duration",
        "10m",
    ])
    .await;
    for name in ["gcra", "token_bucket"] {
        let s = limit(&sim, name);
        assert_eq!(s.admitted_requests, 5 + 99, "{name}");
        assert_eq!(
            s.peak_in_window,
            5 + 9,
            "{name}: the burst and 9 more within a minute"
        );
    }
}

#[tokio::test]
async fn the_attacker_is_denied_quickly_and_recovers_and_fail_policies_differ_while_the_store_is_down()
 {
    let sim = run(&[
        "--rate",
        "10/1m",
        "--algorithms",
        "sliding_log",
        "--pattern",
        "attacker",
        "--identities",
        "5",
        "--rps",
        "0.05",
        "--attack-rps",
        "5",
        "--attack",
        "10m..20m",
        "--duration",
        "30m",
        "--store-down",
        "12m..14m",
        "--nodes",
        "3",
    ])
    .await;
    let times = limit(&sim, "sliding_log").attacker.unwrap();
    assert!(times.first_denial_ms.unwrap() < 10_000, "{times:?}");
    assert!(times.recovery_ms.unwrap() < 60_000, "{times:?}");

    let open = limit(&sim, "open/sliding_log").span.unwrap();
    let closed = limit(&sim, "closed/sliding_log").span.unwrap();
    let local = limit(&sim, "local/sliding_log").span.unwrap();
    assert_eq!(open.admitted, open.offered, "open admits everything");
    assert!(open.peak > 30);
    assert_eq!(closed.admitted, 0, "closed admits nothing");
    // Each of the 3 nodes admits up to the limit on its own; a window that straddles the start
    // of the outage also holds what the shared store admitted just before.
    assert!(
        local.peak > 10 && local.peak <= 10 + 3 * 10,
        "local: each node up to the limit, {}",
        local.peak
    );
}

/// A partition: the attacker's requests spread over 4 nodes, 2 of which lose the store for 2
/// minutes while the other 2 keep deciding through it.
async fn partition(shares: bool) -> Simulation {
    let mut args = vec![
        "--rate",
        "10/1m",
        "--algorithms",
        "sliding_log",
        "--pattern",
        "attacker",
        "--identities",
        "5",
        "--rps",
        "0.05",
        "--attack-rps",
        "5",
        "--attack",
        "10m..20m",
        "--duration",
        "30m",
        "--partition",
        "12m..14m",
        "--nodes",
        "4",
    ];
    if shares {
        args.push("--shares");
    }
    run(&args).await
}

#[tokio::test]
async fn a_region_cut_off_adds_its_share_to_the_limit_not_the_limit_again() {
    let sim = partition(true).await;
    let outage = sim.report.outage.as_ref().unwrap();
    assert_eq!((outage.nodes, outage.cut_off, outage.shares), (4, 2, 4));
    assert!(
        outage
            .title()
            .starts_with("partition from 720 s to 840 s: 2 of 4 nodes cut off")
    );
    let closed = limit(&sim, "closed/sliding_log").span.unwrap();
    let local = limit(&sim, "local/sliding_log").span.unwrap();
    // The near region decides through the store as before: closed only refuses the far one's.
    assert!(closed.admitted > 0 && closed.peak <= 10, "{closed:?}");
    // Each cut-off node adds its share, 10 / 4 = 2, to what the store admits.
    assert!(local.peak > 10 && local.peak <= 10 + 2 * 2, "{local:?}");

    // Each deciding the whole limit, the two cut-off nodes add up to the limit each.
    let whole = partition(false).await;
    let local = limit(&whole, "local/sliding_log").span.unwrap();
    assert!(
        local.peak > 10 + 2 * 2 && local.peak <= 10 + 2 * 10,
        "{local:?}"
    );
}

fn out_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[test]
fn traces_in_csv_and_json_lines_give_the_same_report_and_files_are_well_formed() {
    let dir = out_dir("simulate-trace");
    std::fs::create_dir_all(&dir).unwrap();
    let mut csv = String::from("time,ip,cost\n");
    let mut jsonl = String::new();
    for i in 0..600u64 {
        let t = 1_767_225_600.0 + i as f64 * 0.25;
        let ip = format!("10.0.0.{}", i % 3);
        let cost = 1 + i % 2;
        csv.push_str(&format!("{t},{ip},{cost}\n"));
        jsonl.push_str(&format!(
            "{{\"time\": {t}, \"attributes\": {{\"ip\": \"{ip}\"}}, \"cost\": {cost}}}\n"
        ));
    }
    std::fs::write(dir.join("trace.csv"), csv).unwrap();
    std::fs::write(dir.join("trace.jsonl"), jsonl).unwrap();
    let config = dir.join("rules.yaml");
    std::fs::write(
        &config,
        "rules:\n  api:\n    limits:\n      - by: [ip]\n        rate: 12/10s\n        algorithm: sliding_log\n",
    )
    .unwrap();
    let mut reports = Vec::new();
    for trace in ["trace.csv", "trace.jsonl"] {
        let out = dir.join(format!("out-{trace}"));
        let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
            .arg("simulate")
            .arg("--config")
            .arg(&config)
            .arg("--trace")
            .arg(dir.join(trace))
            .arg("--out")
            .arg(&out)
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        assert!(stdout.contains("api"), "{stdout}");
        let json: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("report.json")).unwrap())
                .unwrap();
        let row = &json["limits"][0];
        assert_eq!(row["offered_requests"], 600);
        assert_eq!(row["beyond_exact"], 0);
        assert_eq!(row["missed"], 0);
        assert_eq!(row["admitted"], row["exact_admitted"]);
        let md = std::fs::read_to_string(out.join("report.md")).unwrap();
        assert!(md.contains("| api |"), "{md}");
        for stem in ["offered_admitted", "window_peak"] {
            assert!(md.contains(&format!("({stem}.svg)")));
            let svg = std::fs::read_to_string(out.join(format!("{stem}.svg"))).unwrap();
            assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
            assert!(svg.contains("<text"), "labels are drawn");
            let png = std::fs::read(out.join(format!("{stem}.png"))).unwrap();
            assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
            assert_eq!(&png[16..24], &[0, 0, 3, 192, 0, 0, 2, 28], "960 × 540");
        }
        reports.push(row.clone());
    }
    assert_eq!(reports[0], reports[1]);

    std::fs::write(dir.join("back.csv"), "time,ip\n5,a\n4,a\n").unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["simulate", "--trace"])
        .arg(dir.join("back.csv"))
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("line 3: time goes backwards"), "{stderr}");
}

#[tokio::test]
async fn batches_across_nodes_stay_within_the_stated_bounds_beside_the_exact_path() {
    // One hot key at 3× a limit of 100/s for a minute, 4 nodes, batches of up to 20 held 1 s.
    let sim = run(&[
        "--rate",
        "100/1s",
        "--algorithms",
        "gcra,token_bucket,fixed_window,sliding_log",
        "--pattern",
        "steady",
        "--identities",
        "1",
        "--rps",
        "300",
        "--duration",
        "60s",
        "--batches",
        "20",
        "--nodes",
        "4",
    ])
    .await;
    assert!(
        !sim.report
            .limits
            .iter()
            .any(|s| s.subject == "sliding_log+batches"),
        "sliding_log takes no batches"
    );
    let (rate, burst, hold_s, nodes, max) = (100, 100, 1, 4, 20);
    for algorithm in ["gcra", "token_bucket"] {
        let exact = limit(&sim, algorithm);
        let batched = limit(&sim, &format!("{algorithm}+batches"));
        // b + r·T exactly, plus at most min(r·H, N·K).
        let bound = burst + rate * 60 + (rate * hold_s).min(nodes * max);
        assert!(batched.admitted <= bound, "{algorithm}: {batched:?}");
        assert!(
            exact.admitted <= burst + rate * 60,
            "{algorithm}: {exact:?}"
        );
        assert!(
            batched.admitted + nodes * max >= exact.admitted,
            "{algorithm}: under by at most N·K: {} vs {}",
            batched.admitted,
            exact.admitted
        );
    }
    let exact = limit(&sim, "fixed_window");
    let batched = limit(&sim, "fixed_window+batches");
    assert!(
        batched.admitted <= exact.admitted,
        "never more than L per window: {} vs {}",
        batched.admitted,
        exact.admitted
    );
    assert!(batched.admitted + nodes * max * 60 >= exact.admitted);
}
