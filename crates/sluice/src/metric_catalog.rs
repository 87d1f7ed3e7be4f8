//! Every metric the library records, with its kind, unit and help text.
//!
//! The library records through the `metrics` facade, which knows a metric's help and unit only
//! when it is described to the recorder in force. [`describe_metrics`] describes all of them;
//! a program installs its recorder, then calls it once (the service does, so every family on
//! `/metrics` has its `# HELP`). Invariants: [`METRICS`] names every metric the library records
//! (the code records by the names `catalog!` declares beside each entry, never by a string of
//! its own), and each name ends with its unit (`_seconds`) or, for counters, `_total`.

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

/// Declares every metric once: its name, as a constant for the code that records it
/// ([`names`]), and its entry in [`METRICS`].
macro_rules! catalog {
    ($($id:ident: $name:literal, $kind:ident, $unit:ident, $help:literal;)*) => {
        /// The name of each metric of [`METRICS`], for the code that records it.
        pub(crate) mod names {
            $(pub(crate) const $id: &str = $name;)*
        }

        /// The metrics the library records.
        pub const METRICS: &[MetricDoc] = &[$(doc($name, $kind, Unit::$unit, $help),)*];
    };
}

catalog! {
    DECISIONS_TOTAL: "sluice_decisions_total", Counter, Count,
        "Decisions by rule and outcome (allowed, denied, shadow_denied: allowed only because a shadow limit or rule denied, over_quota: admitted past a quota with `over: allow`, overage to bill)";
    LIMIT_DENIALS_TOTAL: "sluice_limit_denials_total", Counter, Count,
        "Limits that denied a decision, by rule, limit id and outcome (denied, or shadow_denied for a limit or rule in shadow mode); one decision counts once per limit that denied it";
    STORE_LATENCY_SECONDS: "sluice_store_latency_seconds", Histogram, Seconds,
        "Time of each decision's store call, by store (memory, redis)";
    STORE_ERRORS_TOTAL: "sluice_store_errors_total", Counter, Count,
        "Store calls that failed or timed out, by store";
    STORE_REQUEST_ERRORS_TOTAL: "sluice_store_request_errors_total", Counter, Count,
        "Store calls that failed for their request alone (a script or type error, not the connection), by store";
    SHED_DECISIONS_TOTAL: "sluice_shed_decisions_total", Counter, Count,
        "Decisions answered by their rule's fail policy without waiting for the store, because as many as the in-flight bound allows were already waiting, by store";
    QUEUE_SHED_DECISIONS_TOTAL: "sluice_queue_shed_decisions_total", Counter, Count,
        "Decisions answered by their rule's fail policy without asking the store, because they had waited in a standing queue longer than its target (server.queue_target), by store";
    DEADLINE_DECISIONS_TOTAL: "sluice_deadline_decisions_total", Counter, Count,
        "Decisions answered by their rule's fail policy because the caller's deadline passed, by store and when: `before` the store was asked (it was not), or `waiting` for its answer";
    DEGRADED_DECISIONS_TOTAL: "sluice_degraded_decisions_total", Counter, Count,
        "Decisions made by the rule's fail policy because the store could not answer, by rule";
    DENIAL_CACHE_HITS_TOTAL: "sluice_denial_cache_hits_total", Counter, Count,
        "Decisions answered by the denial cache without asking the store, by rule";
    DENIAL_CACHE_ENTRIES: "sluice_denial_cache_entries", Gauge, Count,
        "Denials held by the denial cache";
    DENIAL_CACHE_EVICTIONS_TOTAL: "sluice_denial_cache_evictions_total", Counter, Count,
        "Denials dropped from the full denial cache";
    DENIAL_CACHE_INVALIDATIONS_TOTAL: "sluice_denial_cache_invalidations_total", Counter, Count,
        "Denial cache invalidations by kind (a reset, unblock or rules change, here or on another node)";
    SETTLEMENTS_TOTAL: "sluice_settlements_total", Counter, Count,
        "Reservations settled, by rule and whether the reservation was still held";
    LEASE_RELEASES_TOTAL: "sluice_lease_releases_total", Counter, Count,
        "Leases released, by rule and whether the lease was still held";
    BLOCK_LISTING_SKIPPED_TOTAL: "sluice_block_listing_skipped_total", Counter, Count,
        "Entries skipped while listing blocks (unreadable or of another key shape)";
    REDIS_GIVE_BACK_FAILURES_TOTAL: "sluice_redis_give_back_failures_total", Counter, Count,
        "Units a multi-slot Redis Cluster decision could not give back after another slot denied";
    BATCH_UNITS_HELD: "sluice_batch_units_held", Gauge, Count,
        "Units this node holds in hot-key batches (taken from the store, not yet spent or given back), by rule";
    BATCH_UNITS_TAKEN_TOTAL: "sluice_batch_units_taken_total", Counter, Count,
        "Units taken from the store in hot-key batches, by rule";
    BATCH_UNITS_GIVEN_BACK_TOTAL: "sluice_batch_units_given_back_total", Counter, Count,
        "Units of hot-key batches given back to the store unspent (the batch's hold ended, the rule changed, the node stopped), by rule";
    BATCH_DECISIONS_TOTAL: "sluice_batch_decisions_total", Counter, Count,
        "Decisions answered from a held hot-key batch without a store call, by rule";
    BATCH_TAKES_TOTAL: "sluice_batch_takes_total", Counter, Count,
        "Hot-key batches asked of the store, by rule and result (granted, or refused: the store had too little left or could not answer)";
    BATCH_GIVE_BACK_FAILURES_TOTAL: "sluice_batch_give_back_failures_total", Counter, Count,
        "Give-backs of hot-key batch units the store could not take (those units stay counted until they drain or their window ends)";
    QUOTA_CROSSINGS_TOTAL: "sluice_quota_crossings_total", Counter, Count,
        "Quota thresholds (`notify`) crossed by decisions, by rule and outcome: queued for delivery, or dropped because the queue was full";
    MEMORY_EVICTIONS_TOTAL: "sluice_memory_evictions_total", Counter, Count,
        "Expired keys the memory store evicted to make room";
    MEMORY_REFUSED_KEYS_TOTAL: "sluice_memory_refused_keys_total", Counter, Count,
        "New keys the full memory store refused (their decisions are denied)";
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_metric_is_declared_once() {
        let mut seen = std::collections::HashSet::new();
        for m in METRICS {
            assert!(seen.insert(m.name), "{} is declared twice", m.name);
        }
        assert_eq!(names::DECISIONS_TOTAL, METRICS[0].name);
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
}
