//! The translation of envoyproxy/ratelimit files, checked on the model and through the rule
//! file's text: what is written reads back as exactly the rules and mapping translated.

use std::path::{Path, PathBuf};

use sluice::model::{Matcher, OverrideOutcome};
use sluice_server::config::{Config, Format};

use super::import;
use crate::import::report::Report;
use crate::import::rule_file::Imported;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/import")
        .join(name)
}

fn imported(names: &[&str]) -> (Imported, Report) {
    let mut report = Report::default();
    let files: Vec<PathBuf> = names.iter().map(|n| fixture(n)).collect();
    (import(&files, false, &mut report).unwrap(), report)
}

/// The text read back is the model written.
pub fn reads_back(imported: &Imported) -> Config {
    let config = Config::parse(&imported.to_yaml(), Format::Yaml)
        .unwrap_or_else(|e| panic!("{e}\n{}", imported.to_yaml()));
    assert_eq!(config.rules.len(), imported.rules.len());
    for r in &imported.rules {
        let read = config
            .rules
            .iter()
            .find(|(n, _)| *n == r.name)
            .map(|(_, rule)| rule);
        assert_eq!(read, Some(&r.rule), "{}", r.name);
    }
    for (domain, mappings) in &imported.envoy {
        assert_eq!(config.envoy.get(domain), Some(mappings), "{domain}");
    }
    assert_eq!(config.envoy.len(), imported.envoy.len());
    config
}

#[test]
fn every_fixture_reads_back_as_translated() {
    let (all, _) = imported(&["erl_edge.yaml", "erl_edge_more.yaml", "erl_other.yaml"]);
    reads_back(&all);
    let (shadowed, _) = {
        let mut report = Report::default();
        (
            import(&[fixture("erl_edge.yaml")], true, &mut report).unwrap(),
            report,
        )
    };
    assert!(shadowed.rules.iter().all(|r| r.rule.shadow));
    reads_back(&shadowed);
}

#[test]
fn values_are_overrides_first_refusals_and_allowlists() {
    let (all, _) = imported(&["erl_edge.yaml"]);
    let rule = &all
        .rules
        .iter()
        .find(|r| r.name == "edge.remote_address")
        .unwrap()
        .rule;
    let outcomes: Vec<&OverrideOutcome> = rule.limits[0]
        .overrides
        .iter()
        .map(|o| &o.outcome)
        .collect();
    assert!(
        matches!(
            outcomes[..],
            [OverrideOutcome::Unlimited, OverrideOutcome::Deny(_)]
        ),
        "{outcomes:?}"
    );
    // Another unit is its own limit, with a `when`, left out of the key's limit.
    let plan = &all
        .rules
        .iter()
        .find(|r| r.name == "edge.plan")
        .unwrap()
        .rule;
    assert_eq!(plan.limits.len(), 3);
    assert_eq!(
        plan.limits[1].when.as_ref().unwrap().0["plan"],
        Matcher::Equals("daily".into())
    );
    assert!(plan.limits[2].shadow);
    assert!(
        plan.limits
            .iter()
            .all(|l| l.count_denied && l.algorithm == sluice::model::Algorithm::FixedWindow)
    );
}

#[test]
fn what_is_lost_is_reported_with_file_and_path() {
    let (_, report) = imported(&["erl_edge.yaml", "erl_edge_more.yaml", "erl_other.yaml"]);
    let at = |path: &str, word: &str| {
        report
            .losses
            .iter()
            .any(|l| l.path == path && l.message.contains(word))
    };
    assert!(at(
        "descriptors[15].descriptors[0].rate_limit.replaces",
        "replaces specific_limit"
    ));
    assert!(at("descriptors[12]", "`*` before its end"));
    assert!(at("descriptors[13].detailed_metric", "metrics"));
    assert!(at("descriptors[13].value_to_metric", "metric"));
    assert!(at("descriptors[17].metadata", "metadata"));
    assert!(at("descriptors[0].quota_mode", "quota"));
    assert!(at("descriptors[1]", "same key and value"));
    assert!(at("descriptors[2].rate_limit.unit", "fortnight"));
    assert!(at("descriptors[5].ratelimit", "unknown key"));
    assert!(at("domain", "MERGE_DOMAIN_CONFIG"));
    assert!(at(
        "descriptors[19].rate_limit.requests_per_unit",
        "10000000"
    ));
    assert!(report.losses.iter().all(|l| l.file.ends_with(".yaml")));
}

#[test]
fn a_file_that_is_not_the_format_is_an_error() {
    let mut report = Report::default();
    assert!(import(&[fixture("limitador.yaml")], false, &mut report).is_err());
    assert!(import(&[fixture("missing.yaml")], false, &mut report).is_err());
}
