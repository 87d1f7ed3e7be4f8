//! Every metric the library records, with its kind, unit and help text.
//!
//! The library records through the `metrics` facade, which knows a metric's help and unit only
//! when it is described to the recorder in force. [`describe_metrics`] describes all of them;
//! a program installs its recorder, then calls it once (the service does, so every family on
//! `/metrics` has its `# HELP`). Invariant: [`METRICS`] names every metric the library records
//! (a test reads the sources and fails on a name missing here), and each name ends with its
//! unit (`_seconds`) or, for counters, `_total`.

use metrics::Unit;

/// What kind of metric a [`MetricDoc`] describes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MetricKind {
    /// Only goes up.
    Counter,
    /// A value that goes up and down.
    Gauge,
    /// A distribution of samples in buckets.
    Histogram,
}

/// One metric: its name, kind, unit and help text (the `# HELP` line).
#[derive(Debug, Clone, Copy)]
pub struct MetricDoc {
    /// The metric's name, as recorded.
    pub name: &'static str,
    /// Counter, gauge or histogram.
    pub kind: MetricKind,
    /// What one unit of its value is.
    pub unit: Unit,
    /// What it counts or measures, and its labels.
    pub help: &'static str,
}

const fn doc(name: &'static str, kind: MetricKind, unit: Unit, help: &'static str) -> MetricDoc {
    MetricDoc {
        name,
        kind,
        unit,
        help,
    }
}

use MetricKind::{Counter, Gauge, Histogram};

/// The metrics the library records.
pub const METRICS: &[MetricDoc] = &[
    doc(
        "sluice_decisions_total",
        Counter,
        Unit::Count,
        "Decisions by rule and outcome (allowed, denied, shadow_denied: allowed only because a shadow limit or rule denied)",
    ),
    doc(
        "sluice_limit_denials_total",
        Counter,
        Unit::Count,
        "Limits that denied a decision, by rule, limit id and outcome (denied, or shadow_denied for a limit or rule in shadow mode); one decision counts once per limit that denied it",
    ),
    doc(
        "sluice_store_latency_seconds",
        Histogram,
        Unit::Seconds,
        "Time of each decision's store call, by store (memory, redis)",
    ),
    doc(
        "sluice_store_errors_total",
        Counter,
        Unit::Count,
        "Store calls that failed or timed out, by store",
    ),
    doc(
        "sluice_store_request_errors_total",
        Counter,
        Unit::Count,
        "Store calls that failed for their request alone (a script or type error, not the connection), by store",
    ),
    doc(
        "sluice_shed_decisions_total",
        Counter,
        Unit::Count,
        "Decisions answered by their rule's fail policy without waiting for the store, because as many as the in-flight bound allows were already waiting, by store",
    ),
    doc(
        "sluice_deadline_decisions_total",
        Counter,
        Unit::Count,
        "Decisions answered by their rule's fail policy because the caller's deadline passed, by store and when: `before` the store was asked (it was not), or `waiting` for its answer",
    ),
    doc(
        "sluice_degraded_decisions_total",
        Counter,
        Unit::Count,
        "Decisions made by the rule's fail policy because the store could not answer, by rule",
    ),
    doc(
        "sluice_denial_cache_hits_total",
        Counter,
        Unit::Count,
        "Decisions answered by the denial cache without asking the store, by rule",
    ),
    doc(
        "sluice_denial_cache_entries",
        Gauge,
        Unit::Count,
        "Denials held by the denial cache",
    ),
    doc(
        "sluice_denial_cache_evictions_total",
        Counter,
        Unit::Count,
        "Denials dropped from the full denial cache",
    ),
    doc(
        "sluice_denial_cache_invalidations_total",
        Counter,
        Unit::Count,
        "Denial cache invalidations by kind (a reset, unblock or rules change, here or on another node)",
    ),
    doc(
        "sluice_settlements_total",
        Counter,
        Unit::Count,
        "Reservations settled, by rule and whether the reservation was still held",
    ),
    doc(
        "sluice_lease_releases_total",
        Counter,
        Unit::Count,
        "Leases released, by rule and whether the lease was still held",
    ),
    doc(
        "sluice_block_listing_skipped_total",
        Counter,
        Unit::Count,
        "Entries skipped while listing blocks (unreadable or of another key shape)",
    ),
    doc(
        "sluice_redis_give_back_failures_total",
        Counter,
        Unit::Count,
        "Units a multi-slot Redis Cluster decision could not give back after another slot denied",
    ),
    doc(
        "sluice_batch_units_held",
        Gauge,
        Unit::Count,
        "Units this node holds in hot-key batches (taken from the store, not yet spent or given back), by rule",
    ),
    doc(
        "sluice_batch_units_taken_total",
        Counter,
        Unit::Count,
        "Units taken from the store in hot-key batches, by rule",
    ),
    doc(
        "sluice_batch_units_given_back_total",
        Counter,
        Unit::Count,
        "Units of hot-key batches given back to the store unspent (the batch's hold ended, the rule changed, the node stopped), by rule",
    ),
    doc(
        "sluice_batch_decisions_total",
        Counter,
        Unit::Count,
        "Decisions answered from a held hot-key batch without a store call, by rule",
    ),
    doc(
        "sluice_batch_takes_total",
        Counter,
        Unit::Count,
        "Hot-key batches asked of the store, by rule and result (granted, or refused: the store had too little left or could not answer)",
    ),
    doc(
        "sluice_batch_give_back_failures_total",
        Counter,
        Unit::Count,
        "Give-backs of hot-key batch units the store could not take (those units stay counted until they drain or their window ends)",
    ),
    doc(
        "sluice_memory_evictions_total",
        Counter,
        Unit::Count,
        "Expired keys the memory store evicted to make room",
    ),
    doc(
        "sluice_memory_refused_keys_total",
        Counter,
        Unit::Count,
        "New keys the full memory store refused (their decisions are denied)",
    ),
];

/// Describes every metric in `metrics` (help text and unit) to the recorder in force.
pub fn describe(metrics: &[MetricDoc]) {
    for m in metrics {
        match m.kind {
            MetricKind::Counter => metrics::describe_counter!(m.name, m.unit, m.help),
            MetricKind::Gauge => metrics::describe_gauge!(m.name, m.unit, m.help),
            MetricKind::Histogram => metrics::describe_histogram!(m.name, m.unit, m.help),
        }
    }
}

/// Describes every metric of the library ([`METRICS`]) to the recorder in force: call it once
/// after installing a recorder.
pub fn describe_metrics() {
    describe(METRICS);
}

/// The names of the metrics recorded in Rust source text: each `counter!`, `gauge!` or
/// `histogram!` call's first argument, when it is a string literal. For tests that hold a
/// crate's sources to its catalog.
pub fn recorded_names(source: &str) -> Vec<&str> {
    let mut names = Vec::new();
    for kind in ["counter", "gauge", "histogram"] {
        let call = format!("{kind}!(");
        for (at, _) in source.match_indices(&call) {
            let rest = source[at + call.len()..].trim_start();
            if let Some(literal) = rest.strip_prefix('"')
                && let Some(end) = literal.find('"')
            {
                names.push(&literal[..end]);
            }
        }
    }
    names
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sources(dir: &std::path::Path, into: &mut Vec<(String, String)>) {
        for entry in std::fs::read_dir(dir).expect("the sources are readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                sources(&path, into);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let text = std::fs::read_to_string(&path).expect("a source file");
                into.push((path.display().to_string(), text));
            }
        }
    }

    /// A metric recorded anywhere in the library has its help and unit in the catalog.
    #[test]
    fn every_recorded_metric_is_in_the_catalog() {
        let mut files = Vec::new();
        sources(
            &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
            &mut files,
        );
        let mut seen = 0;
        for (path, text) in &files {
            for name in recorded_names(text) {
                seen += 1;
                assert!(
                    METRICS.iter().any(|m| m.name == name),
                    "{path} records `{name}`, which METRICS does not describe"
                );
            }
        }
        assert!(seen >= METRICS.len(), "the scan found the recorded metrics");
    }

    #[test]
    fn names_carry_their_unit() {
        for m in METRICS {
            match (m.kind, m.unit) {
                (MetricKind::Counter, _) => assert!(m.name.ends_with("_total"), "{}", m.name),
                (_, Unit::Seconds) => assert!(m.name.ends_with("_seconds"), "{}", m.name),
                (_, Unit::Count) => {}
                (_, unit) => panic!("{}: unit {unit:?} has no naming rule here", m.name),
            }
            assert!(!m.help.is_empty());
        }
    }

    #[test]
    fn names_are_read_from_multi_line_calls() {
        let text = "metrics::counter!(\n    \"a_total\",\n \"rule\" => r)\nhistogram!(\"b_seconds\")\ncounter!(name)";
        assert_eq!(recorded_names(text), ["a_total", "b_seconds"]);
    }
}
