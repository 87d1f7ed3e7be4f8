//! What a new user meets first: `validate` reporting every mistake of a file at once (text and
//! JSON), empty files, counts in words, `check` naming the rules there are and printing its
//! error once, a decision made without the store exiting 3, and the example rule file read by
//! a reader.

use crate::common;

use std::path::PathBuf;

use common::{CONFIG, TempDir, sluice};
use sluice_test_support::RedisServer;

/// Four mistakes in one rule, one in another, a misspelt section and a rule written twice.
const MISTAKES: &str = "\
stor:
  url: memory://
rules:
  login:
    limits:
      - by: [ip]
        rate: 5/1m
        algorithm: sliding_lg
        block: 10
      - { by: [ip], rate: 5/s, algorithm: token_bucket, burst: -3, rtae: 1 }
  api:
    limits:
      - { by: [ip], rate: 100/second, algorithm: gcar }
  login:
    limits: []
";

#[test]
fn validate_reports_every_mistake_once_with_line_and_column() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", MISTAKES);
    let out = sluice().arg("validate").arg(&path).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("error: "))
        .collect();
    let expected = [
        "rules.yaml:1:1: field `stor`: unknown field `stor`",
        "rules.yaml:8:20: rule `login`: field `limits[0].algorithm`: unknown variant `sliding_lg`",
        "rules.yaml:9:16: rule `login`: field `limits[0].block`: `10` needs a unit",
        "rules.yaml:10:64: rule `login`: field `limits[1].burst`: expected a whole number, 0 or more, found `-3`",
        "rules.yaml:10:68: rule `login`: field `limits[1].rtae`: unknown field `rtae`",
        "rules.yaml:13:50: rule `api`: field `limits[0].algorithm`: unknown variant `gcar`",
        "rules.yaml:14:3: rule `login`: rule `login` is defined twice (first on line 4)",
    ];
    assert_eq!(errors.len(), expected.len(), "{stderr}");
    for (line, expected) in errors.iter().zip(expected) {
        assert!(line.contains(expected), "expected `{expected}` in `{line}`");
    }
    for (line, meant) in [(0, "store"), (1, "sliding_log"), (4, "rate"), (5, "gcra")] {
        assert!(
            errors[line].ends_with(&format!("(did you mean `{meant}`?)")),
            "{}",
            errors[line]
        );
    }
    assert!(stderr.ends_with("rules.yaml: 7 errors\n"), "{stderr}");
    assert!(!stderr.contains("duration"), "{stderr}");
    assert!(!stderr.contains("DuplicateKeyPolicy"), "{stderr}");
}

#[test]
fn validate_reports_as_json_for_ci() {
    let dir = TempDir::new();
    let path = dir.write("rules.yaml", MISTAKES);
    let out = sluice()
        .args(["validate", "--format", "json"])
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(report["valid"], false);
    let errors = report["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 7, "{report:#}");
    let second = &errors[1];
    assert_eq!(
        (
            &second["line"],
            &second["column"],
            &second["rule"],
            &second["field"]
        ),
        (
            &serde_json::json!(8),
            &serde_json::json!(20),
            &serde_json::json!("login"),
            &serde_json::json!("limits[0].algorithm")
        )
    );
    assert_eq!(second["suggestion"], "sliding_log");
    assert_eq!(errors[2]["suggestion"], serde_json::Value::Null);

    let good = dir.write("good.yaml", CONFIG);
    let out = sluice()
        .args(["validate", "--format", "json"])
        .arg(&good)
        .env("SLUICE_ADMIN_TOKEN", "t")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["valid"], true);
    assert_eq!(report["errors"], serde_json::json!([]));
    assert!(
        report["rules"]
            .as_array()
            .unwrap()
            .contains(&"employee".into())
    );
}

#[test]
fn an_empty_file_is_refused_and_no_rules_warns() {
    let dir = TempDir::new();
    let empty = dir.write("empty.yaml", "# to do\n");
    let out = sluice().arg("validate").arg(&empty).output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("the file is empty"));
    assert!(out.stdout.is_empty());

    let none = dir.write("none.yaml", "rules: {}\n");
    let out = sluice().arg("validate").arg(&none).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains(": ok: 0 rules, 0 limits, "));
    assert!(String::from_utf8_lossy(&out.stderr).contains("warning: the file has no rules"));
}

#[test]
fn check_names_the_rules_there_are_and_prints_its_error_once() {
    let dir = TempDir::new();
    let config = dir.write("sluice.yaml", CONFIG);
    let out = sluice()
        .args(["check", "--config"])
        .arg(&config)
        .args(["employe", "id=42"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.matches("unknown rule `employe`").count(),
        1,
        "{stderr}"
    );
    assert!(
        stderr.contains("(did you mean `employee`?); the file has 7 rules: bucket, employee, "),
        "{stderr}"
    );
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_decision_the_store_did_not_make_exits_3() {
    let dir = TempDir::new();
    let config = dir.write(
        "sluice.yaml",
        "store:\n  timeout: 1s\nrules:\n  open:\n    fail: open\n    limits:\n      - { by: [id], rate: 5/1m }\n",
    );
    let redis = RedisServer::start();
    let check = || {
        sluice()
            .args(["check", "--store", &redis.url(), "--config"])
            .arg(&config)
            .args(["open", "id=1"])
            .output()
            .unwrap()
    };
    let out = check();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    redis.pause();
    let out = check();
    redis.resume();
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (&json["decision"]["allowed"], &json["decision"]["degraded"]),
        (&true.into(), &true.into())
    );
    let help = sluice().args(["check", "--help"]).output().unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("3  degraded: the store did not answer"),
        "{help}"
    );
}

#[test]
fn the_example_labels_each_rule_for_a_reader() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/sluice.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let rules = text.split_once("\nrules:\n").unwrap().1;
    let keys: Vec<&str> = rules
        .lines()
        .filter(|l| l.starts_with("  ") && !l.starts_with("   ") && !l.trim().is_empty())
        .collect();
    assert!(keys.len() >= 10, "{keys:?}");
    for key in keys {
        let (_, label) = key
            .split_once(" # ")
            .unwrap_or_else(|| panic!("no label: {key}"));
        let words: Vec<&str> = label.split_whitespace().collect();
        assert!(words.len() >= 4, "a label says what the rule shows: {key}");
        assert!(
            !words
                .windows(2)
                .any(|w| w[0] == "seed" && w[1].trim_end_matches(':').parse::<u32>().is_ok()),
            "a label names what the rule shows, not where it came from: {key}"
        );
    }
}
