//! What one limit did over a simulation, measured against the exact sliding log.
//!
//! Every request offered to the limit's rule is recorded with the rule's answer (a request passes
//! only when every limit of its rule admits it, so that is what the backend behind the limit
//! sees) and the limit's own. Measured on the limit's own history, per identity:
//! - an admission *beyond exact* is one that leaves more than the limit admitted within a window
//!   of the limit's length, which an exact sliding log never does;
//! - a *missed* request is one the limit denied although it fitted within the limit given what had
//!   been admitted in the window, which an exact sliding log would have admitted.
//!
//! The largest number of units admitted to one identity within any window is the real burst a
//! backend sees. Alongside, an independent [`ExactSlidingLog`] decides the same requests on its
//! own: the difference between its admitted rate and the limit's is the rate error.
//!
//! A quota's window is its calendar period, not a length: for a quota limit every measure above
//! is taken per identity within the period holding the request, against the quota the decision
//! applied, and the reference is an exact count per period ([`QuotaTally`]).

use std::collections::HashMap;

use serde::Serialize;
use sluice::{Algorithm, Micros};

use super::quota::{QuotaSummary, QuotaTally};
use super::reference::ExactSlidingLog;
use super::series::Series;
use super::traffic::Attack;
use super::window::Window;

/// Identities with nothing left in their window are dropped this often (in requests).
const SWEEP_EVERY: u64 = 1 << 16;

/// How the attacker of the `attacker` pattern fared (ms from the attack's start and end).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct AttackTimes {
    /// From the attack's start to the attacker's first denial.
    pub first_denial_ms: Option<u64>,
    /// From the attack's end to the attacker's next admitted request.
    pub recovery_ms: Option<u64>,
}

/// Admissions within a span of interest (the store outage).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SpanStats {
    /// Start (from the start of the simulation).
    pub from_us: Micros,
    /// End.
    pub to_us: Micros,
    /// Units offered within the span.
    pub offered: u64,
    /// Units admitted within the span.
    pub admitted: u64,
    /// The most units admitted to one identity in one window ending within the span.
    pub peak: u64,
}

/// The counts of one limit. Units, unless named requests.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// The rule (or, in an outage, `policy/rule`).
    pub subject: String,
    /// The limit's id within its rule.
    pub limit_id: String,
    /// Its algorithm.
    pub algorithm: Algorithm,
    /// Units per window.
    pub limit: u64,
    /// Units that may pass at once (the burst of token bucket, GCRA, leaky bucket).
    pub capacity: u64,
    /// The window (ms).
    pub window_ms: u64,
    /// Requests offered.
    pub offered_requests: u64,
    /// Requests admitted.
    pub admitted_requests: u64,
    /// Requests denied.
    pub denied_requests: u64,
    /// Requests the rule could not decide (an attribute its limits need is missing).
    pub skipped_requests: u64,
    /// Units offered.
    pub offered: u64,
    /// Units admitted.
    pub admitted: u64,
    /// Units the exact sliding log admitted.
    pub exact_admitted: u64,
    /// The most units admitted to one identity within any window of the limit's length.
    pub peak_in_window: u64,
    /// When that peak was reached (ms from the start).
    pub peak_at_ms: u64,
    /// Requests admitted that left more than the limit admitted within one window.
    pub beyond_exact: u64,
    /// `beyond_exact` as a percentage of the requests offered.
    pub beyond_exact_pct: f64,
    /// Requests this limit denied that fitted within the limit given what the window held.
    pub missed: u64,
    /// `missed` as a percentage of the requests offered.
    pub missed_pct: f64,
    /// Mean absolute difference between the admitted and the exact rates (units/s, per bucket).
    pub mean_rate_error: f64,
    /// The attacker's times, under the `attacker` pattern.
    pub attacker: Option<AttackTimes>,
    /// Admissions during the store outage, when one was simulated.
    pub span: Option<SpanStats>,
    /// For a quota: its periods over the run, compared with an exact count per period (the
    /// measures above are then per period, not per sliding window).
    pub quota: Option<QuotaSummary>,
}

/// One request as a tally sees it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// Time from the start.
    pub at_us: Micros,
    /// The start, since the epoch (the simulated clock shows `start_us + at_us`).
    pub start_us: Micros,
    /// The limit's count for this identity, as the decision applied it (an override's).
    pub limit: u64,
    /// The requester's identity index (to follow the attacker).
    pub requester: u32,
    /// The limit's key for the requester (`ip=203.0.113.9`).
    pub identity: &'a str,
    /// Units asked for.
    pub cost: u64,
}

/// The running measurements of one limit.
#[derive(Debug)]
pub struct Tally {
    summary: Summary,
    window_us: Micros,
    reference: ExactSlidingLog,
    admitted_windows: HashMap<String, Window>,
    series: Series,
    attack: Option<Attack>,
    quota: Option<QuotaTally>,
}

/// The trailing window of `identity`, created when new (its key copied only then).
fn window_of<'a>(windows: &'a mut HashMap<String, Window>, identity: &str) -> &'a mut Window {
    if !windows.contains_key(identity) {
        windows.insert(identity.to_string(), Window::default());
    }
    windows.get_mut(identity).expect("inserted above")
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl Tally {
    /// A tally for one limit. `span`: a span to measure apart (the outage).
    pub fn new(
        subject: &str,
        limit: &sluice::Limit,
        bucket_us: Micros,
        attack: Option<Attack>,
        span: Option<(Micros, Micros)>,
    ) -> Tally {
        let window_us = limit.rate.window_us();
        Tally {
            summary: Summary {
                subject: subject.to_string(),
                limit_id: limit.id(),
                algorithm: limit.algorithm,
                limit: limit.rate.count(),
                capacity: limit.capacity(),
                window_ms: window_us.as_millis(),
                offered_requests: 0,
                admitted_requests: 0,
                denied_requests: 0,
                skipped_requests: 0,
                offered: 0,
                admitted: 0,
                exact_admitted: 0,
                peak_in_window: 0,
                peak_at_ms: 0,
                beyond_exact: 0,
                beyond_exact_pct: 0.0,
                missed: 0,
                missed_pct: 0.0,
                mean_rate_error: 0.0,
                attacker: attack.map(|_| AttackTimes::default()),
                span: span.map(|(from_us, to_us)| SpanStats {
                    from_us,
                    to_us,
                    ..SpanStats::default()
                }),
                quota: None,
            },
            window_us,
            reference: ExactSlidingLog::new(limit.rate.count(), window_us),
            admitted_windows: HashMap::new(),
            series: Series::new(bucket_us),
            attack,
            quota: limit
                .period
                .as_ref()
                .map(|period| QuotaTally::new(period, limit.rate.count())),
        }
    }

    /// Records one request of `identity` (the limit's key, e.g. `ip=1.2.3.4`): whether its rule
    /// admitted it, and whether this limit allowed it.
    pub fn record(&mut self, request: Request<'_>, admitted: bool, limit_allowed: bool) {
        let Request {
            at_us,
            start_us,
            limit,
            requester,
            identity,
            cost,
        } = request;
        let Tally {
            summary: s,
            window_us,
            reference,
            admitted_windows,
            series,
            attack,
            quota,
        } = self;
        if s.offered_requests.is_multiple_of(SWEEP_EVERY) {
            admitted_windows.retain(|_, w| w.advance(at_us, *window_us) > 0);
        }
        let b = series.bucket(at_us);
        s.offered_requests += 1;
        s.offered += cost;
        series.offered[b] += cost;
        // For a quota: the identity's count in the period holding the request, under the quota
        // the decision applied; else its count in the trailing window, under the limit.
        let (exact, mut in_window, limit) = match quota.as_mut() {
            Some(quota) => {
                let quota = quota.enter(start_us, start_us + at_us);
                let exact = quota.exact_admit(identity, cost, limit);
                (exact, quota.used(identity), limit)
            }
            None => {
                let exact = reference.admit(identity, at_us, cost);
                let in_window = window_of(admitted_windows, identity).advance(at_us, *window_us);
                (exact, in_window, s.limit)
            }
        };
        if exact {
            s.exact_admitted += cost;
            series.exact[b] += cost;
        }
        let fits = in_window + cost <= limit;
        if admitted && !fits {
            s.beyond_exact += 1;
        }
        if !limit_allowed && fits {
            s.missed += 1;
        }
        match quota.as_mut() {
            Some(quota) => quota.record(identity, start_us + at_us, cost, admitted, limit_allowed),
            None if admitted => window_of(admitted_windows, identity).add(at_us, cost),
            None => {}
        }
        if admitted {
            s.admitted_requests += 1;
            s.admitted += cost;
            series.admitted[b] += cost;
            in_window += cost;
            if in_window > s.peak_in_window {
                s.peak_in_window = in_window;
                s.peak_at_ms = at_us.as_millis();
            }
            series.peak[b] = series.peak[b].max(in_window);
        } else {
            s.denied_requests += 1;
            if quota.is_some() {
                // What the identity has used stays on the plot while the quota refuses.
                series.peak[b] = series.peak[b].max(in_window);
            }
        }
        if let Some(span) = s
            .span
            .as_mut()
            .filter(|span| (span.from_us..span.to_us).contains(&at_us))
        {
            span.offered += cost;
            if admitted {
                span.admitted += cost;
                span.peak = span.peak.max(in_window);
            }
        }
        let attacker = attack.filter(|a| a.identity == requester);
        if let (Some(attack), Some(times)) = (attacker, &mut s.attacker) {
            if !admitted && at_us >= attack.from_us && times.first_denial_ms.is_none() {
                times.first_denial_ms = Some((at_us - attack.from_us).as_millis());
            }
            if admitted && at_us >= attack.to_us && times.recovery_ms.is_none() {
                times.recovery_ms = Some((at_us - attack.to_us).as_millis());
            }
        }
    }

    /// The final counts and the time series of a run that lasted `run_us`.
    pub fn finish(mut self, skipped_requests: u64, run_us: Micros) -> (Summary, Series) {
        let s = &mut self.summary;
        s.quota = self.quota.map(|quota| quota.finish(run_us));
        s.skipped_requests = skipped_requests;
        s.beyond_exact_pct = pct(s.beyond_exact, s.offered_requests);
        s.missed_pct = pct(s.missed, s.offered_requests);
        s.mean_rate_error = self.series.mean_rate_error();
        (self.summary, self.series)
    }
}
