//! Notice before the wall: the quota thresholds a decision crosses ([`QuotaCrossing`]), found
//! from the store's answer to the decision itself and queued for whoever delivers them
//! ([`Limiter::crossings`]; the service posts them to each quota's webhook).
//!
//! Invariants:
//! - A crossing is read from the decision's own atomic store step: the count after it (the quota
//!   less what remains) and before it (less the cost). Each count a quota reaches is reached by
//!   one decision only, so one threshold of one identity in one period is crossed by one
//!   decision, on one node, whichever nodes share the store. A decision that counted nothing (a
//!   denial, a peek, the fail policy's answer) crosses nothing.
//! - Queueing never waits: a full queue drops the crossing and counts it
//!   (`sluice_quota_crossings_total{outcome="dropped"}`), so a slow receiver never slows a
//!   decision. The queue is bounded by [`Options::crossing_queue`](super::Options).
//! - A crossing's [`id`](QuotaCrossing::id) is a function of what was crossed (rule, limit,
//!   identity, threshold, quota, period), the same on every retry of its delivery. A count that
//!   goes back under a threshold within its period (a reservation settled for less, a Cluster's
//!   cross-slot give-back) and is counted past it again crosses it again, under the same id.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::mpsc;

use super::choice::{self, Picks};
use super::compile::CompiledRule;
use super::compiled_limit::CompiledLimit;
use crate::algorithm::{LimitOutcome, LimitStep};
use crate::metric_catalog::names;
use crate::model::{Micros, Name, PeriodBounds, Threshold};
use crate::store::{LimitCall, StoreReply};

/// One quota threshold reached by one decision.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct QuotaCrossing {
    /// The rule.
    pub rule: Name,
    /// The quota's limit id.
    pub limit_id: Name,
    /// The identity, as keys and the admin API write it (`tenant=42`).
    pub identity: String,
    /// The share of the quota reached.
    pub threshold: Threshold,
    /// The identity's quota (its run-time number when one is set).
    pub quota: u64,
    /// Units counted in the period after the decision.
    pub used: u64,
    /// The store's time at the decision.
    pub at: Micros,
    /// The period the decision counted in (from the identity's billing day when it has one).
    pub period: PeriodBounds,
    /// Where the quota's `notify` posts its events.
    pub webhook: Arc<str>,
}

impl QuotaCrossing {
    /// A crossing for examples and tests: half of tenant 42's monthly quota of 100 on rule
    /// `plan`, in May 2026 (UTC).
    #[doc(hidden)]
    pub fn example() -> QuotaCrossing {
        let at = Micros::new(1_779_278_400_000_000);
        QuotaCrossing {
            rule: Name::from("plan"),
            limit_id: Name::from("tenant-quota-month"),
            identity: "tenant=42".to_string(),
            threshold: Threshold::new(0.5).expect("a share"),
            quota: 100,
            used: 50,
            at,
            period: crate::model::Period::new(crate::model::PeriodUnit::Month).bounds_at(at),
            webhook: Arc::from("http://127.0.0.1:9/quota"),
        }
    }

    /// The event's id: the same for the same crossing, whoever sends it and however often.
    pub fn id(&self) -> String {
        let mut h = sha1_smol::Sha1::new();
        for part in [
            self.rule.as_ref(),
            self.limit_id.as_ref(),
            self.identity.as_str(),
            &self.threshold.share().to_string(),
            &self.quota.to_string(),
            &self.period.start.get().to_string(),
            &self.period.end.get().to_string(),
        ] {
            h.update(part.as_bytes());
            h.update(&[0]);
        }
        h.digest().to_string()
    }
}

/// The queue of crossings: its sender, and its receiver until someone takes it.
#[derive(Debug)]
pub(super) struct Crossings {
    sender: mpsc::Sender<QuotaCrossing>,
    receiver: Mutex<Option<mpsc::Receiver<QuotaCrossing>>>,
}

impl Crossings {
    pub(super) fn new(capacity: usize) -> Crossings {
        let (sender, receiver) = mpsc::channel(capacity.max(1));
        Crossings {
            sender,
            receiver: Mutex::new(Some(receiver)),
        }
    }

    /// The receiving end, for the first caller only.
    pub(super) fn take(&self) -> Option<mpsc::Receiver<QuotaCrossing>> {
        self.receiver.lock().take()
    }

    /// Queues `crossing` for delivery, or drops it when the queue is full.
    pub(super) fn queue(&self, crossing: QuotaCrossing) {
        let rule = crossing.rule.to_string();
        let outcome = match self.sender.try_send(crossing) {
            Ok(()) => "queued",
            Err(_) => "dropped",
        };
        metrics::counter!(names::QUOTA_CROSSINGS_TOTAL, "rule" => rule, "outcome" => outcome)
            .increment(1);
    }
}

/// The crossings of an applied decision of `rule` that the store answered with `reply`: for each
/// quota with `notify` that counted, each threshold between its count before and after.
pub(super) fn found(
    rule: &CompiledRule,
    picks: Option<&Picks>,
    calls: &[LimitCall],
    reply: &StoreReply,
) -> Vec<QuotaCrossing> {
    let mut out = Vec::new();
    // The request passed (every enforcing limit allowed it), so every limit counted it.
    let passed = calls
        .iter()
        .zip(&reply.outcomes)
        .all(|(c, o)| o.allowed || c.step.shadow);
    if !passed || reply.outcomes.len() != calls.len() {
        return out;
    }
    let applied = choice::applied(rule, picks);
    for ((call, limit), outcome) in calls.iter().zip(applied).zip(&reply.outcomes) {
        of_limit(
            &rule.name,
            limit,
            &call.step,
            &call.key.identity,
            outcome,
            reply.now_us,
            |c| out.push(c),
        );
    }
    out
}

/// The crossings of one limit that counted `step` for `identity` at the store's `now`, each
/// given to `found`. Nothing for a limit without `notify`, or past its quota (an `over: allow`
/// quota's denial, whose count is not told: every threshold is at most the quota, so none is
/// crossed there).
pub(super) fn of_limit(
    rule: &Name,
    limit: &CompiledLimit,
    step: &LimitStep,
    identity: &str,
    outcome: &LimitOutcome,
    now: Micros,
    mut found: impl FnMut(QuotaCrossing),
) {
    // The identity's own numbers, when it has some: its quota and its billing day.
    let step = outcome.runtime.map_or(*step, |own| own.apply(step));
    let (Some(notify), Some(period), true) = (&limit.notify, step.params.period, outcome.allowed)
    else {
        return;
    };
    let quota = step.params.count;
    let used = quota.saturating_sub(outcome.remaining);
    let before = used.saturating_sub(step.cost);
    for &threshold in notify.at.iter() {
        let mark = threshold.units_of(quota);
        if before < mark && mark <= used {
            found(QuotaCrossing {
                rule: rule.clone(),
                limit_id: limit.id.clone(),
                identity: identity.to_string(),
                threshold,
                quota,
                used,
                at: now,
                period: period.bounds_at(now),
                webhook: notify.webhook.clone(),
            });
        }
    }
}
