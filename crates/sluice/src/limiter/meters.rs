//! The metrics every decision records, kept as registered handles.
//!
//! Registering a metric (building its key and labels, finding it in the recorder) costs more
//! than an in-memory decision and allocates, so each compiled rule keeps handles to its
//! `sluice_decisions_total` counters and the limiter to its `sluice_store_latency_seconds`
//! histogram. A handle belongs to the recorder it was registered with: when another recorder is
//! in force (one installed after the limiter was built, or a thread's local recorder), the
//! handles are registered again, so no decision is ever counted by the wrong recorder.
//!
//! A denial is also counted per limit that denied it (`sluice_limit_denials_total{rule, limit,
//! outcome}`), so a dashboard tells which limit of a rule does the denying. Its labels are the
//! rules and limit ids of the rule file, never anything from a request, so the series are
//! bounded by the configuration.

use std::fmt;
use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwapOption;
use metrics::{Counter, Histogram, Recorder};

use crate::metric_catalog::names;
use crate::model::{Decision, Name};

/// Handles registered with one recorder.
pub(crate) struct Registered<T> {
    /// The handles of the first recorder seen, which most programs keep for their whole life:
    /// reading them is one load.
    first: OnceLock<(usize, T)>,
    /// The handles of the latest other recorder.
    other: ArcSwapOption<(usize, T)>,
}

impl<T> Registered<T> {
    pub(crate) fn new() -> Registered<T> {
        Registered {
            first: OnceLock::new(),
            other: ArcSwapOption::empty(),
        }
    }

    /// Runs `f` on the handles of the recorder in force, registered by `register` if they are
    /// not yet.
    #[inline]
    fn with<R>(&self, register: impl FnOnce() -> T, f: impl FnOnce(&T) -> R) -> R {
        // The recorder's address tells recorders apart: the no-op one, the global one, a local one.
        let recorder = metrics::with_recorder(|r| r as *const dyn Recorder as *const () as usize);
        match self.first.get() {
            Some((first, handles)) if *first == recorder => return f(handles),
            Some(_) => {}
            None => {
                // Another thread may have set it meanwhile: these handles are as good, once.
                return match self.first.set((recorder, register())) {
                    Ok(()) => f(&self.first.get().expect("just set").1),
                    Err((_, mine)) => f(&mine),
                };
            }
        }
        if let Some(held) = self.other.load().as_deref()
            && held.0 == recorder
        {
            return f(&held.1);
        }
        let fresh = Arc::new((recorder, register()));
        self.other.store(Some(Arc::clone(&fresh)));
        f(&fresh.1)
    }
}

impl<T> fmt::Debug for Registered<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Registered")
    }
}

/// A rule's `sluice_decisions_total` counters, one per outcome.
pub(crate) struct DecisionCounters {
    allowed: Counter,
    denied: Counter,
    shadow_denied: Counter,
    over_quota: Counter,
}

/// A limit's `sluice_limit_denials_total` counters: denied, shadow_denied.
type LimitDenials = Registered<[Counter; 2]>;

/// The decisions counted for one rule.
#[derive(Debug)]
pub(crate) struct RuleMeters {
    rule: Name,
    counters: Registered<DecisionCounters>,
    /// Registered at the first hit: a rule on an in-process store has no denial cache.
    cache_hits: Registered<Counter>,
    /// Per limit of the rule, in order: its id and its denials, registered at its first.
    limits: Vec<(Name, LimitDenials)>,
}

impl RuleMeters {
    pub(crate) fn new(rule: Name, limits: impl IntoIterator<Item = Name>) -> RuleMeters {
        RuleMeters {
            rule,
            counters: Registered::new(),
            cache_hits: Registered::new(),
            limits: limits
                .into_iter()
                .map(|id| (id, Registered::new()))
                .collect(),
        }
    }

    fn register(&self) -> DecisionCounters {
        let rule = || self.rule.to_string();
        let decided = |outcome: &'static str| metrics::counter!(names::DECISIONS_TOTAL, "rule" => rule(), "outcome" => outcome);
        DecisionCounters {
            allowed: decided("allowed"),
            denied: decided("denied"),
            shadow_denied: decided("shadow_denied"),
            over_quota: decided("over_quota"),
        }
    }

    /// Counts a decision of this rule in `sluice_decisions_total{rule, outcome}`.
    #[inline]
    pub(crate) fn decided(&self, d: &Decision) {
        let mut any_denied = false;
        // The decision's limits are the rule's, in its order.
        for (i, l) in d.limits.iter().enumerate() {
            if !l.allowed && !l.over_quota {
                any_denied = true;
                self.limit_denied(i, d.shadow || l.shadow);
            }
        }
        self.count(d.allowed, d.shadow && any_denied, d.over_quota);
    }

    /// Counts the decision a rule of one limit gets from that limit's answer
    /// ([`Decision::of_limits`]) without it being built: whether the limit allowed, whether it
    /// is a shadow one, and whether it admitted past its quota (`over: allow`).
    #[inline]
    pub(crate) fn decided_one(
        &self,
        shadow: bool,
        allowed: bool,
        limit_shadow: bool,
        over_quota: bool,
    ) {
        let allowed_as_asked = allowed || over_quota;
        self.count(
            shadow || allowed_as_asked || limit_shadow,
            shadow && !allowed_as_asked,
            over_quota,
        );
        if !allowed_as_asked {
            self.limit_denied(0, shadow || limit_shadow);
        }
    }

    /// Counts a denial by the rule's `index`th limit in `sluice_limit_denials_total`.
    #[cold]
    fn limit_denied(&self, index: usize, shadow: bool) {
        let Some((id, denials)) = self.limits.get(index) else {
            return;
        };
        let register = || {
            let denied = |outcome: &'static str| {
                metrics::counter!(
                    names::LIMIT_DENIALS_TOTAL,
                    "rule" => self.rule.to_string(),
                    "limit" => id.to_string(),
                    "outcome" => outcome
                )
            };
            [denied("denied"), denied("shadow_denied")]
        };
        denials.with(register, |c| c[usize::from(shadow)].increment(1));
    }

    #[inline]
    fn count(&self, allowed: bool, shadow_denied: bool, over_quota: bool) {
        self.counters.with(
            || self.register(),
            |c| {
                let counter = match (allowed, shadow_denied, over_quota) {
                    (true, true, _) => &c.shadow_denied,
                    (true, false, true) => &c.over_quota,
                    (true, false, false) => &c.allowed,
                    (false, _, _) => &c.denied,
                };
                counter.increment(1);
            },
        );
    }

    /// Counts a decision of this rule answered by the denial cache in
    /// `sluice_denial_cache_hits_total{rule}`.
    pub(crate) fn cache_hit(&self) {
        let register =
            || metrics::counter!(names::DENIAL_CACHE_HITS_TOTAL, "rule" => self.rule.to_string());
        self.cache_hits.with(register, |c| c.increment(1));
    }
}

/// `sluice_store_latency_seconds{store}`: how long store calls take, read on the CPU counter
/// (timing every call with the OS clock costs more than an in-memory decision) that the system
/// clock advances with, so that a synchronous call can lend its start reading to the clock.
#[derive(Debug)]
pub(crate) struct StoreLatency {
    store: &'static str,
    counter: &'static quanta::Clock,
    histogram: Registered<Histogram>,
}

impl StoreLatency {
    pub(crate) fn new(store: &'static str) -> StoreLatency {
        StoreLatency {
            store,
            // The system clock's counter: a synchronous store call lends it its start reading.
            counter: crate::clock::counter(),
            histogram: Registered::new(),
        }
    }

    /// The start of a store call, to give [`StoreLatency::record`] when it ends.
    #[inline]
    pub(crate) fn start(&self) -> u64 {
        self.counter.raw()
    }

    /// Records one store call that started at `start`, and returns how long it took (ns).
    #[inline]
    pub(crate) fn record(&self, start: u64) -> u64 {
        let nanos = self.counter.delta_as_nanos(start, self.counter.raw());
        let register = || metrics::histogram!(names::STORE_LATENCY_SECONDS, "store" => self.store);
        self.histogram
            .with(register, |h| h.record(nanos as f64 / 1e9));
        nanos
    }
}
