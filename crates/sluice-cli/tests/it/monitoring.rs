//! The monitoring files in `deploy/` name only metrics the binary exports: every series in the
//! Prometheus alert rules (`deploy/prometheus/sluice-rules.yaml`) and in every query of the
//! Grafana dashboard (`deploy/grafana/sluice-dashboard.json`) is one the service's metric
//! catalogs describe (`sluice_server::metrics::all`), a histogram's only through its `_bucket`,
//! `_sum` and `_count` series. The rules' behaviour is `promtool test rules`' job
//! (`scripts/test`); here each alert is held to having a test in which it fires and one in which
//! it stays quiet.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use serde_json::Value;
use sluice::limiter::MetricKind;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &str) -> String {
    let path = repo().join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path:?}: {e}"))
}

fn yaml(path: &str) -> Value {
    serde_saphyr::from_str(&read(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Every series name the binary exports: each catalog entry, a histogram as its three series.
fn exported_series() -> BTreeSet<String> {
    sluice_server::metrics::all()
        .flat_map(|m| match m.kind {
            MetricKind::Histogram => ["_bucket", "_sum", "_count"]
                .iter()
                .map(|suffix| format!("{}{suffix}", m.name))
                .collect::<Vec<_>>(),
            MetricKind::Counter | MetricKind::Gauge => vec![m.name.to_string()],
        })
        .collect()
}

/// The metric names a PromQL expression reads: its identifiers starting `sluice_`, outside
/// quoted strings (label values).
fn metric_names(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut quoted = None;
    let mut word = String::new();
    for c in expr.chars().chain(std::iter::once(' ')) {
        if let Some(q) = quoted {
            if c == q {
                quoted = None;
            }
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
            word.push(c);
            continue;
        }
        if word.starts_with("sluice_") {
            names.push(std::mem::take(&mut word));
        }
        word.clear();
        if matches!(c, '"' | '\'' | '`') {
            quoted = Some(c);
        }
    }
    names
}

/// Fails naming every expression that reads a metric the binary does not export, or none at all.
fn assert_exported(exprs: &[(String, String)]) {
    let exported = exported_series();
    let mut wrong = Vec::new();
    for (place, expr) in exprs {
        let names = metric_names(expr);
        if names.is_empty() {
            wrong.push(format!("{place}: names no Sluice metric: {expr}"));
        }
        for name in names {
            if !exported.contains(&name) {
                wrong.push(format!(
                    "{place}: `{name}` is not a series the binary exports"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Each alert rule's name and expression.
fn alerts() -> Vec<(String, String)> {
    let rules = yaml("deploy/prometheus/sluice-rules.yaml");
    let mut alerts = Vec::new();
    for group in rules["groups"].as_array().expect("groups") {
        for rule in group["rules"].as_array().expect("rules") {
            let name = rule["alert"].as_str().expect("alerting rules only");
            let expr = rule["expr"].as_str().expect("an expression");
            alerts.push((name.to_string(), expr.to_string()));
        }
    }
    alerts
}

#[test]
fn the_alert_rules_read_only_exported_metrics() {
    let alerts = alerts();
    for wanted in [
        "SluiceStoreUnreachable",
        "SluiceDegradedDecisions",
        "SluiceStoreBreakerOpen",
        "SluiceDecisionsShed",
        "SluiceReloadRefused",
        "SluiceDecisionLatencyHigh",
    ] {
        assert!(alerts.iter().any(|(n, _)| n == wanted), "no alert {wanted}");
    }
    assert_exported(&alerts);
}

#[test]
fn every_alert_fires_in_a_unit_test_and_stays_quiet_in_another() {
    let tests = yaml("deploy/prometheus/sluice-rules.test.yaml");
    let cases: Vec<&Value> = tests["tests"]
        .as_array()
        .expect("tests")
        .iter()
        .flat_map(|t| t["alert_rule_test"].as_array().expect("alert_rule_test"))
        .collect();
    for (alert, _) in alerts() {
        let expected = |fires: bool| {
            cases.iter().any(|c| {
                c["alertname"] == alert.as_str()
                    && c["exp_alerts"]
                        .as_array()
                        .is_some_and(|a| a.is_empty() != fires)
            })
        };
        assert!(expected(true), "{alert} fires in no test");
        assert!(expected(false), "{alert} stays quiet in no test");
    }
}

/// Every query of the dashboard: its panels' targets and its variables' queries.
fn dashboard_queries(dashboard: &Value) -> Vec<(String, String)> {
    let mut queries = Vec::new();
    for panel in dashboard["panels"].as_array().expect("panels") {
        let title = panel["title"].as_str().unwrap_or_default();
        if panel["type"] == "row" {
            continue;
        }
        let targets = panel["targets"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default();
        assert!(!targets.is_empty(), "panel `{title}` has no query");
        for target in targets {
            let expr = target["expr"]
                .as_str()
                .expect("Prometheus targets have an expr");
            queries.push((format!("panel `{title}`"), expr.to_string()));
        }
    }
    for variable in dashboard["templating"]["list"]
        .as_array()
        .expect("variables")
    {
        if variable["type"] == "query" {
            let name = variable["name"].as_str().unwrap_or_default();
            let query = &variable["query"];
            let query = query["query"].as_str().or(query.as_str()).expect("a query");
            queries.push((format!("variable `{name}`"), query.to_string()));
        }
    }
    queries
}

#[test]
fn every_dashboard_query_names_an_exported_metric() {
    let dashboard: Value =
        serde_json::from_str(&read("deploy/grafana/sluice-dashboard.json")).expect("JSON");
    let queries = dashboard_queries(&dashboard);
    assert_exported(&queries);
    // The subjects an operator looks for, each shown.
    let read: BTreeSet<String> = queries.iter().flat_map(|(_, q)| metric_names(q)).collect();
    for wanted in [
        "sluice_decisions_total",
        "sluice_limit_denials_total",
        "sluice_store_latency_seconds_bucket",
        "sluice_degraded_decisions_total",
        "sluice_store_errors_total",
        "sluice_shed_decisions_total",
        "sluice_config_reloads_total",
        "sluice_batch_decisions_total",
        "sluice_top_denied_identities",
    ] {
        assert!(read.contains(wanted), "the dashboard shows no {wanted}");
    }
}

#[test]
fn a_misspelt_or_bare_histogram_metric_is_caught() {
    let exported = exported_series();
    assert!(exported.contains("sluice_store_latency_seconds_count"));
    assert!(!exported.contains("sluice_store_latency_seconds"));
    assert_eq!(
        metric_names(r#"rate(sluice_decision_total{rule="sluice_x"}[5m]) / sluice_a:b"#),
        ["sluice_decision_total", "sluice_a:b"]
    );
    let caught = std::panic::catch_unwind(|| {
        assert_exported(&[("q".into(), "rate(sluice_decision_total[5m])".into())])
    });
    assert!(caught.is_err(), "a name the binary does not export fails");
}
