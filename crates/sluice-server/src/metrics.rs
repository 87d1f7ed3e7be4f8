//! The Prometheus recorder behind `/metrics`, and the service's own metrics.
//!
//! The library records its metrics through the `metrics` facade and describes them
//! ([`sluice::limiter::METRICS`]); the service adds [`METRICS`]: config reloads, connections
//! closed for stalling, request latency per route (see `http::latency`), the Rate Limit Quota
//! Service's streams, reports, actions and units drawn, the decisions waiting
//! for the store and their bound (read at scrape time) and `sluice_build_info`; the top denied identities are rendered separately for bounded cardinality
//! (see `topk`). Every family on `/metrics` has its `# HELP` and `# TYPE`, and its name ends with
//! its unit. The recorder is process-global and installed once; a second install (several
//! servers in one test process) reuses the first.

use std::sync::OnceLock;

use metrics::Unit;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use sluice::limiter::{MetricDoc, MetricKind};

/// A handle to render and maintain the recorder.
pub type Handle = PrometheusHandle;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The metrics the service records (the library's are [`sluice::limiter::METRICS`]).
pub const METRICS: &[MetricDoc] = &[
    MetricDoc {
        name: CONFIG_RELOADS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        help: "Config reloads by result (ok: rules swapped; error: file refused, old rules kept; \
               no_rules: a file without rules refused; unsettled: a file still changing, waited for)",
    },
    MetricDoc {
        name: CONNECTIONS_TIMED_OUT,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        help: "Client connections closed because they stalled (a request head, body or response \
               not moving within the server section's timeouts)",
    },
    MetricDoc {
        name: REQUEST_DURATION,
        kind: MetricKind::Histogram,
        unit: Unit::Seconds,
        help: "Time from a request's head to its response, by route: the route's template \
               (/v1/check, /v1/auth/{rule}), a gRPC method, or `unmatched`",
    },
    MetricDoc {
        name: STORE_IN_FLIGHT,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        help: "Decisions waiting for the store when scraped",
    },
    MetricDoc {
        name: STORE_IN_FLIGHT_LIMIT,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        help: "How many decisions may wait for the store at once (store.in_flight)",
    },
    MetricDoc {
        name: NOTIFICATIONS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        help: "Quota notice events (notify) by result: delivered (a webhook answered 2xx), \
               retried (a try failed and another follows), abandoned (the last try failed)",
    },
    MetricDoc {
        name: RLQS_STREAMS,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        help: "Envoy Rate Limit Quota Service streams open on this server",
    },
    MetricDoc {
        name: RLQS_REPORTS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        help: "RLQS usage reports received, by result: answered, or refused (a bad report, which \
               ends its stream)",
    },
    MetricDoc {
        name: RLQS_ACTIONS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        help: "RLQS bucket actions, by action: allow_all, deny_all, token_bucket, abandon, or \
               unanswered (the units could not be drawn: the store did not answer)",
    },
    MetricDoc {
        name: RLQS_UNITS,
        kind: MetricKind::Counter,
        unit: Unit::Count,
        help: "Units drawn from the rules' limits for RLQS token bucket assignments, by rule",
    },
    MetricDoc {
        name: BUILD_INFO,
        kind: MetricKind::Gauge,
        unit: Unit::Count,
        help: "Always 1; its labels say which build serves: version, and commit when known",
    },
];

/// `sluice_top_denied_identities`: rendered at scrape time by `topk` rather than recorded
/// through the facade, so it is in neither catalog's recorder description, only here.
pub const TOP_DENIED: MetricDoc = MetricDoc {
    name: "sluice_top_denied_identities",
    kind: MetricKind::Gauge,
    unit: Unit::Count,
    help: "Denials of the K most denied identities per rule (metrics.top_denied; a Space-Saving \
           estimate, an upper bound); the identity hashed unless `metrics.top_denied: raw`",
};

/// The labels of every metric `/metrics` serves, by name: the one place they are written. The
/// book's metric reference is [`reference()`] (a test holds the book to it, and `/metrics` to
/// these labels).
pub const LABELS: &[(&str, &[&str])] = &[
    ("sluice_batch_decisions_total", &["rule"]),
    ("sluice_batch_give_back_failures_total", &[]),
    ("sluice_batch_takes_total", &["rule", "result"]),
    ("sluice_batch_units_given_back_total", &["rule"]),
    ("sluice_batch_units_held", &["rule"]),
    ("sluice_batch_units_taken_total", &["rule"]),
    ("sluice_block_listing_skipped_total", &[]),
    (BUILD_INFO, &["version", "commit"]),
    (CONFIG_RELOADS, &["result"]),
    (CONNECTIONS_TIMED_OUT, &[]),
    ("sluice_decisions_total", &["rule", "outcome"]),
    ("sluice_deadline_decisions_total", &["store", "when"]),
    ("sluice_degraded_decisions_total", &["rule"]),
    ("sluice_denial_cache_entries", &[]),
    ("sluice_denial_cache_evictions_total", &[]),
    ("sluice_denial_cache_hits_total", &["rule"]),
    ("sluice_denial_cache_invalidations_total", &["kind"]),
    (REQUEST_DURATION, &["route"]),
    ("sluice_lease_releases_total", &["rule", "held"]),
    ("sluice_limit_denials_total", &["rule", "limit", "outcome"]),
    ("sluice_memory_evictions_total", &[]),
    ("sluice_memory_refused_keys_total", &[]),
    (NOTIFICATIONS, &["result"]),
    ("sluice_queue_shed_decisions_total", &["store"]),
    ("sluice_quota_crossings_total", &["rule", "outcome"]),
    ("sluice_redis_give_back_failures_total", &[]),
    (RLQS_ACTIONS, &["action"]),
    (RLQS_REPORTS, &["result"]),
    (RLQS_STREAMS, &[]),
    (RLQS_UNITS, &["rule"]),
    ("sluice_settlements_total", &["rule", "settled"]),
    ("sluice_shed_decisions_total", &["store"]),
    ("sluice_store_errors_total", &["store"]),
    (STORE_IN_FLIGHT, &[]),
    (STORE_IN_FLIGHT_LIMIT, &[]),
    ("sluice_store_latency_seconds", &["store"]),
    ("sluice_store_request_errors_total", &["store"]),
    ("sluice_top_denied_identities", &["rule", "identity"]),
];

/// Every metric `/metrics` serves: the library's catalog, the service's, and the top denied
/// identities.
pub fn all() -> impl Iterator<Item = &'static MetricDoc> {
    sluice::limiter::METRICS
        .iter()
        .chain(METRICS)
        .chain(std::iter::once(&TOP_DENIED))
}

/// The labels of a metric `/metrics` serves, or `None` for a name it does not serve.
pub fn labels(name: &str) -> Option<&'static [&'static str]> {
    LABELS.iter().find(|(n, _)| *n == name).map(|(_, l)| *l)
}

/// The metric reference as a Markdown table, sorted by name: name, type, labels, and the help
/// text as `# HELP` gives it. The book's Operations chapter carries it word for word.
///
/// # Panics
/// When a metric has no entry in [`LABELS`], or [`LABELS`] names a metric no catalog has.
pub fn reference() -> String {
    let mut docs: Vec<&MetricDoc> = all().collect();
    docs.sort_by_key(|m| m.name);
    docs.dedup_by_key(|m| m.name);
    for (name, _) in LABELS {
        assert!(
            docs.iter().any(|m| m.name == *name),
            "LABELS names {name}, which no catalog describes"
        );
    }
    let mut out = String::from("| metric | type | labels | meaning |\n| --- | --- | --- | --- |\n");
    for m in docs {
        let labels = labels(m.name).unwrap_or_else(|| panic!("{} has no entry in LABELS", m.name));
        let labels = match labels {
            [] => "—".to_string(),
            some => some
                .iter()
                .map(|l| format!("`{l}`"))
                .collect::<Vec<_>>()
                .join(", "),
        };
        let kind = match m.kind {
            MetricKind::Counter => "counter",
            MetricKind::Gauge => "gauge",
            MetricKind::Histogram => "histogram",
        };
        let help = m.help.replace('|', "\\|");
        out.push_str(&format!("| `{}` | {kind} | {labels} | {help} |\n", m.name));
    }
    out
}

/// `sluice_config_reloads_total`, by `result`.
pub const CONFIG_RELOADS: &str = "sluice_config_reloads_total";
/// `sluice_connections_timed_out_total`.
pub const CONNECTIONS_TIMED_OUT: &str = "sluice_connections_timed_out_total";
/// `sluice_store_in_flight`, set at scrape time.
pub const STORE_IN_FLIGHT: &str = "sluice_store_in_flight";
/// `sluice_store_in_flight_limit`, set at scrape time.
pub const STORE_IN_FLIGHT_LIMIT: &str = "sluice_store_in_flight_limit";
/// `sluice_build_info`, always 1.
pub const BUILD_INFO: &str = "sluice_build_info";
/// `sluice_rlqs_streams`: RLQS streams open.
pub const RLQS_STREAMS: &str = "sluice_rlqs_streams";
/// `sluice_rlqs_reports_total`, by `result`.
pub const RLQS_REPORTS: &str = "sluice_rlqs_reports_total";
/// `sluice_rlqs_actions_total`, by `action`.
pub const RLQS_ACTIONS: &str = "sluice_rlqs_actions_total";
/// `sluice_rlqs_units_drawn_total`, by `rule`.
pub const RLQS_UNITS: &str = "sluice_rlqs_units_drawn_total";
/// Quota notice events by delivery result.
pub const NOTIFICATIONS: &str = "sluice_notifications_total";

/// The request-latency histogram's name.
pub const REQUEST_DURATION: &str = "sluice_http_request_duration_seconds";

/// The version and, when the build knew it, the commit of this build.
pub fn build_info() -> (&'static str, Option<&'static str>) {
    (
        env!("CARGO_PKG_VERSION"),
        option_env!("SLUICE_BUILD_COMMIT"),
    )
}

/// Installs the global recorder (once) and returns its handle.
pub fn install() -> Handle {
    HANDLE
        .get_or_init(|| {
            // Buckets, not the default summary: a histogram costs a few comparisons per
            // sample where a summary's sketch costs a thousand instructions, and histograms add
            // up across a fleet where quantiles do not.
            let recorder = PrometheusBuilder::new()
                .set_buckets(&LATENCY_BUCKETS)
                .expect("the buckets are not empty")
                // Counters end in `_total` and every name in its unit, whatever a caller names.
                .with_recommended_naming(true)
                .build_recorder();
            let handle = recorder.handle();
            if let Err(error) = metrics::set_global_recorder(recorder) {
                tracing::warn!(%error, "another metrics recorder is installed; /metrics will miss its metrics");
            }
            sluice::limiter::describe_metrics();
            sluice::limiter::describe(METRICS);
            // Registered at zero so that dashboards and alerts see the series before any reload.
            for result in RELOAD_RESULTS {
                metrics::counter!(CONFIG_RELOADS, "result" => result).increment(0);
            }
            let (version, commit) = build_info();
            let mut labels = vec![("version", version)];
            labels.extend(commit.map(|c| ("commit", c)));
            metrics::gauge!(BUILD_INFO, &labels).set(1.0);
            handle
        })
        .clone()
}

/// The bucket bounds of the latency histograms (store calls and requests): from an in-memory
/// decision's microsecond to a store timeout's second.
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.000_001, 0.000_01, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 1.0,
];

/// The `result` labels of `sluice_config_reloads_total`.
pub const RELOAD_RESULTS: [&str; 4] = ["ok", "error", "no_rules", "unsettled"];

/// Counts one reload attempt by its result (one of [`RELOAD_RESULTS`]).
pub fn reload(result: &'static str) {
    metrics::counter!(CONFIG_RELOADS, "result" => result).increment(1);
}

/// The Prometheus text of every metric recorded through the facade.
pub fn render() -> String {
    install().render()
}
