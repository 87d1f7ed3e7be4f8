//! The Prometheus recorder behind `/metrics`.
//!
//! The library emits its metrics through the `metrics` facade (`sluice_decisions_total`,
//! `sluice_store_latency_seconds` (a histogram), `sluice_store_errors_total`,
//! `sluice_degraded_decisions_total`, `sluice_shed_decisions_total`, and the denial cache's `sluice_denial_cache_hits_total`,
//! `sluice_denial_cache_entries`, `sluice_denial_cache_evictions_total`,
//! `sluice_denial_cache_invalidations_total`); the service adds `sluice_config_reloads_total{result}`,
//! `sluice_store_in_flight` and `sluice_store_in_flight_limit` (read at scrape time) and,
//! rendered separately for bounded cardinality, the top denied identities (see `topk`). The
//! recorder is process-global and installed once; a second install (several servers in one test
//! process) reuses the first.

use std::sync::OnceLock;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// A handle to render and maintain the recorder.
pub type Handle = PrometheusHandle;

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

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
                .build_recorder();
            let handle = recorder.handle();
            if let Err(error) = metrics::set_global_recorder(recorder) {
                tracing::warn!(%error, "another metrics recorder is installed; /metrics will miss its metrics");
            }
            metrics::describe_counter!(
                "sluice_config_reloads_total",
                "Config reloads by result (ok: rules swapped; error: file refused, old rules kept; \
                 no_rules: a file without rules refused; unsettled: a file still changing, waited for)"
            );
            metrics::describe_counter!(
                "sluice_shed_decisions_total",
                "Decisions answered by their rule's fail policy without waiting for the store, \
                 because as many as store.in_flight allows were already waiting"
            );
            metrics::describe_gauge!(
                "sluice_store_in_flight",
                "Decisions waiting for the store when scraped"
            );
            metrics::describe_gauge!(
                "sluice_store_in_flight_limit",
                "How many decisions may wait for the store at once (store.in_flight; an adaptive \
                 bound as it stands)"
            );
            // Registered at zero so that dashboards and alerts see the series before any reload.
            for result in RELOAD_RESULTS {
                metrics::counter!("sluice_config_reloads_total", "result" => result).increment(0);
            }
            handle
        })
        .clone()
}

/// The bucket bounds of `sluice_store_latency_seconds` (the only histogram): from an
/// in-memory decision's microsecond to a store timeout's second.
pub const LATENCY_BUCKETS: [f64; 15] = [
    0.000_001, 0.000_01, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 0.25, 1.0,
];

/// The `result` labels of `sluice_config_reloads_total`.
pub const RELOAD_RESULTS: [&str; 4] = ["ok", "error", "no_rules", "unsettled"];

/// Counts one reload attempt by its result (one of [`RELOAD_RESULTS`]).
pub fn reload(result: &'static str) {
    metrics::counter!("sluice_config_reloads_total", "result" => result).increment(1);
}

/// The Prometheus text of every metric recorded through the facade.
pub fn render() -> String {
    install().render()
}
