//! `sluice validate` and `sluice check`: exit codes and messages; `serve` refusing a bad file;
//! `sluice bench` stopping at the decisions asked for; a closed standard output ending the output
//! quietly.

use crate::common;

use std::path::PathBuf;

use common::{CONFIG, TempDir, sluice};

fn example() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/sluice.yaml")
}

#[test]
fn validate_accepts_the_example_and_summarises() {
    let out = sluice().arg("validate").arg(example()).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(stdout.contains(": ok: 18 rules (api, "), "{stdout}");
    assert!(stdout.contains("store memory://"), "{stdout}");
}

#[test]
fn validate_accepts_toml() {
    let dir = TempDir::new();
    let path = dir.write(
        "rules.toml",
        "[rules.login]\nlimits = [{ by = [\"ip\"], rate = \"5/1m\", algorithm = \"gcra\" }]\n",
    );
    let out = sluice().arg("validate").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains(": ok: 1 rule (login), 1 limit, "),
        "{stdout}"
    );
}

#[test]
fn validate_names_file_line_rule_and_field() {
    let dir = TempDir::new();
    let cases = [
        (
            CONFIG.replace(
                "rate: 2/1m, algorithm: sliding_window",
                "rate: 2/1m, algorithm: sliding_window, burst: 3",
            ),
            "sluice.yaml:9: rule `login`: field `limits[0].burst`: sliding_window has no burst",
        ),
        (
            CONFIG.replace("rate: 5/10s", "rate: 5/10w"),
            "sluice.yaml:6:27: rule `employee`: field `limits[0].rate`: `5/10w`: `10w` has unknown unit `w`",
        ),
        (
            CONFIG.replace("message: slow down", "mesage: slow down"),
            "sluice.yaml:4:5: rule `employee`: field `mesage`: unknown field",
        ),
        (
            "rules:\n  x:\n    limits: [\n".to_string(),
            "sluice.yaml:3:13: rule `x`: field `limits`: unclosed bracket",
        ),
        (
            CONFIG.replace(
                "rate: 5/10s, algorithm: sliding_log",
                "rate: 5/10s, algorithm: sliding_log, batch: { max: 2 }",
            ),
            "rule `employee`: field `limits[0].batch`: sliding_log cannot take batches: it \
             records when each request happened",
        ),
        (
            CONFIG.replace(
                "rate: 2/120s, algorithm: sliding_log }",
                "rate: 2/120s, algorithm: gcra, batch: { max: 2 } }",
            ),
            "rule `pair`: field `limits[0].batch`: a limit with batches must be its rule's only limit",
        ),
    ];
    for (text, expected) in cases {
        let path = dir.write("sluice.yaml", &text);
        let out = sluice().arg("validate").arg(&path).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(expected),
            "expected `{expected}` in {stderr}"
        );
        assert!(out.stdout.is_empty());
    }
    let out = sluice()
        .arg("validate")
        .arg(dir.path().join("missing.yaml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
}

#[test]
fn check_prints_the_decision_and_exits_by_outcome() {
    let dir = TempDir::new();
    let config = dir.write("sluice.yaml", CONFIG);
    let out = sluice()
        .args(["check", "--config"])
        .arg(&config)
        .args(["employee", "id=42"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], 200);
    assert_eq!(json["decision"]["allowed"], true);
    assert_eq!(json["decision"]["remaining"], 4);
    assert_eq!(json["headers"]["RateLimit-Policy"], "\"employee\";q=5;w=10");

    let out = sluice()
        .args(["check", "--cost", "6", "--config"])
        .arg(&config)
        .args(["employee", "id=42"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["status"], 429);
    assert!(json["headers"]["Retry-After"].is_string());

    let out = sluice()
        .args(["check", "--config"])
        .arg(&config)
        .args(["nope", "id=42"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown rule `nope`"));

    let out = sluice()
        .args(["check", "--config"])
        .arg(&config)
        .arg("employee")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs attribute `id`"));
}

#[test]
fn serve_refuses_a_bad_file_or_store() {
    let dir = TempDir::new();
    let bad = dir.write("bad.yaml", "rules:\n  x:\n    limits: []\n");
    let out = sluice()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&bad)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.yaml:2: rule `x`: field `limits`"));
    let good = dir.write("good.yaml", CONFIG);
    let out = sluice()
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            "mongodb://x",
            "--config",
        ])
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("expected memory://"));
}

/// `--decisions` ends a run at that many decisions, long before its `--duration`: runs at
/// different rates then leave each key with as many calls.
#[test]
fn bench_stops_after_the_decisions_asked_for() {
    let out = sluice()
        .args([
            "bench",
            "--store",
            "memory://",
            "--keys",
            "10",
            "--concurrency",
            "4",
        ])
        .args(["--decisions", "5000", "--duration", "10m", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    let made = ["allowed", "denied", "errors"].map(|k| report[k].as_u64().unwrap());
    assert_eq!(made.iter().sum::<u64>(), 5000, "{report}");
    assert!(report["duration_s"].as_f64().unwrap() < 600.0);
}

/// `--rate` opens the loop: decisions are made at the rate offered, not as fast as they are
/// answered, and the report says so.
#[test]
fn bench_at_a_fixed_rate_makes_the_decisions_offered() {
    let out = sluice()
        .args(["bench", "--store", "memory://", "--concurrency", "4"])
        .args(["--rate", "400", "--duration", "2s", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("a JSON report");
    assert_eq!(report["offered_per_sec"], 400.0, "{report}");
    let made: u64 = ["allowed", "denied", "errors"]
        .map(|k| report[k].as_u64().unwrap())
        .iter()
        .sum();
    // 800 are due in 2 s; a closed loop on the memory store makes hundreds of thousands.
    assert!((700..=810).contains(&made), "{made} decisions: {report}");
    let refused = sluice().args(["bench", "--rate", "0"]).output().unwrap();
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
}

/// A reader that goes away (`sluice simulate … | head`) ends the output quietly: the command
/// finishes with its own exit code, without a panic or an error.
#[test]
fn a_closed_standard_output_ends_the_output_quietly() {
    let mut child = sluice()
        .args(["simulate", "--config"])
        .arg(example())
        .args(["--duration", "1h"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the sluice binary runs");
    // The read end closes before the report is written (the simulation runs first).
    drop(child.stdout.take());
    let out = child.wait_with_output().expect("it ends");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
    assert!(
        !stderr.contains("panicked") && !stderr.contains("error"),
        "{stderr}"
    );
}
