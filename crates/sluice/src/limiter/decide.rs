//! One decision: rule lookup, the store call under its deadline and the breaker, the fail policy
//! when the store cannot answer, and the [`Decision`] built from each limit's outcome.
//!
//! Invariants: a store error never reaches the caller of a check (the rule's [`FailPolicy`]
//! answers, marked `degraded`); a cost above an enforcing limit's capacity is denied without
//! asking the store; every decision is counted in `sluice_decisions_total`. A one-limit check on
//! an in-process store is answered first by `at_once`, which gives the same decision without
//! allocating, and a one-limit check the denial cache can answer by `cached_denial`, which
//! gives the same decision without building store calls.

use std::sync::atomic::Ordering;

use super::answer::{Answer, limit_decision};
use super::choice::{self, Picks, Selection};
use super::compile::CompiledRule;
use super::denial_cache::DenialCache;
use super::identity::attribute_names;
use super::options::{Check, MAX_COST};
use super::{
    Attributes, Limiter, crossings, deadline, held, keys, lease_id, reservation, standing_queue,
};
use crate::algorithm::{LimitOutcome, Mode};
use crate::error::Error;
use crate::metric_catalog::names;
use crate::model::{Decision, FailPolicy, LimitDecisions, Micros};
use crate::store::{DynStore, LimitCall, StoreError, StoreReply};

impl Limiter {
    /// One check, answered as `A`: the full decision, or the verdict.
    pub(super) async fn decide<A: Answer>(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> Result<A, Error> {
        if let Some(answer) = self.at_once(name, attrs, check) {
            return answer;
        }
        // Boxed: the general path's future is large, and a check answered at once should not
        // carry (and move) it.
        Box::pin(async {
            match self.cached_denial(name, attrs, check) {
                Some(denied) => Ok(denied),
                None => self.decide_in_store(name, attrs, check).await,
            }
        })
        .await
        .map(A::of_decision)
    }

    /// The general path: any rule, any store.
    pub(super) async fn decide_in_store(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> Result<Decision, Error> {
        if !self.inner.enabled.load(Ordering::Relaxed) {
            return Ok(Decision::pass_through(name, "limiter disabled"));
        }
        let rule = self.rule(name)?;
        if !rule.definition.enabled {
            return Ok(Decision::pass_through(name, "rule disabled"));
        }
        let cost = check.units();
        if cost > MAX_COST {
            return Err(Error::InvalidCost {
                cost,
                max: MAX_COST,
            });
        }
        if check.reserves() {
            reservation::check_rule(&rule)?;
        }
        let picks = match rule.choice.as_deref().map(|c| c.select(&rule, attrs)) {
            None => None,
            Some(Selection::Limits(picks)) => Some(picks),
            Some(Selection::Answer(d)) => {
                rule.meters.decided(&d);
                return Ok(*d);
            }
        };
        let picks = picks.as_ref();
        let calls = keys::calls(
            &rule,
            picks,
            attrs,
            check,
            self.inner.options.max_attribute_len,
        )?;
        if let Some(too_big) = choice::applied(&rule, picks).find(|l| l.refuses(cost)) {
            let mut d = decision(&rule, picks, &calls, None, false);
            d.reason = Some(format!(
                "cost {cost} exceeds the capacity {} of limit `{}`",
                too_big.capacity(),
                too_big.id
            ));
            rule.meters.decided(&d);
            return Ok(d);
        }
        let denials = self
            .inner
            .denials
            .as_deref()
            .filter(|_| check.mode() == Mode::Apply && !rule.cacheable.is_empty());
        if let Some(outcomes) = denials.and_then(|c| c.answer(&calls, &rule.cacheable)) {
            let reply = StoreReply {
                now_us: Micros::ZERO,
                outcomes,
            };
            let mut d = decision(&rule, picks, &calls, Some(&reply), false);
            d.reason = Some(CACHED.to_string());
            rule.meters.cache_hit();
            rule.meters.decided(&d);
            return Ok(d);
        }
        // Hot keys: a limit with batches decides from them when it can.
        let mut failed = None;
        if let Some(held) = &rule.held {
            match self.decide_held(&rule, held, picks, &calls, check).await {
                held::Answer::Decided(d) => return Ok(*d),
                held::Answer::Exact => {}
                held::Answer::Failed(error) => failed = Some(error),
            }
        }
        let start = denials.map(DenialCache::call_start);
        let policy = rule.definition.fail.unwrap_or(self.inner.options.fail);
        // Outcomes answered for shadow limits that cannot hold the cost did not come from the
        // store: such a reply is not cached.
        let all_fit = calls.iter().all(fits);
        let stored = match failed {
            Some(error) => Err(error),
            None => self.call_store_fitting(&calls, check.mode()).await,
        };
        let (reply, degraded) = match stored {
            Ok(reply) => {
                if let (Some(denials), Some(start), true) = (denials, start, all_fit) {
                    denials.record(start, &calls, &rule.cacheable, &reply);
                }
                (Some(reply), None)
            }
            Err(error) => {
                tracing::debug!(rule = name, %error, "store unavailable; fail policy {policy:?}");
                metrics::counter!(names::DEGRADED_DECISIONS_TOTAL, "rule" => name.to_string())
                    .increment(1);
                let reply = match policy {
                    // A local store full of live keys cannot count this identity: deny it.
                    FailPolicy::Local => self.decide_locally(&calls, check.mode()).ok(),
                    FailPolicy::Open | FailPolicy::Closed => None,
                };
                (reply, Some(error))
            }
        };
        if let (Some(held), None) = (&rule.held, &degraded) {
            held::observe(held, &calls, reply.as_ref());
        }
        if let (true, None, Some(reply), Mode::Apply) =
            (rule.notifies, &degraded, reply.as_ref(), check.mode())
        {
            for crossing in crossings::found(&rule, picks, &calls, reply) {
                self.inner.crossings.queue(crossing);
            }
        }
        let fallback = policy == FailPolicy::Open;
        let mut d = decision(&rule, picks, &calls, reply.as_ref(), fallback);
        if rule.leases && check.mode() == Mode::Apply {
            attach_lease(&mut d, &calls, reply.as_ref());
        }
        if let (true, true, Some(reply)) = (check.reserves(), d.allowed, reply.as_ref()) {
            // Degraded to `local`, the local store consumed the units and remembers them.
            let store: &dyn DynStore = match degraded {
                Some(_) => &self.inner.local,
                None => &*self.inner.store,
            };
            self.reserve_for(&mut d, &calls, reply, store).await;
        }
        if let Some(error) = degraded {
            d.degraded = true;
            d.reason = Some(degraded_reason(&error, policy));
        }
        rule.meters.decided(&d);
        Ok(d)
    }

    /// The store call for the limits that can hold the cost: a shadow limit whose capacity is
    /// below the cost is checked as an enforced one is (the cost is never sent to the store, where
    /// it could overflow the algorithm's arithmetic) and answers as denied.
    pub(super) async fn call_store_fitting(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> Result<StoreReply, StoreError> {
        if calls.iter().all(fits) {
            return self.call_store(calls, mode).await;
        }
        let fitting: Vec<LimitCall> = calls.iter().filter(|c| fits(c)).cloned().collect();
        let mut reply = if fitting.is_empty() {
            StoreReply {
                now_us: Micros::ZERO,
                outcomes: Vec::new(),
            }
        } else {
            self.call_store(&fitting, mode).await?
        };
        let mut answered = reply.outcomes.into_iter();
        reply.outcomes = calls
            .iter()
            .map(|c| {
                let answer = if fits(c) { answered.next() } else { None };
                answer.unwrap_or_else(|| LimitOutcome::unanswered(false))
            })
            .collect();
        Ok(reply)
    }

    /// One store call under the deadline and the breaker.
    pub(super) async fn call_store(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> Result<StoreReply, StoreError> {
        let inner = &self.inner;
        if inner.store.in_process() {
            let started = inner.latency.start();
            let result = inner.store.decide(calls, mode).await;
            inner.latency.record(started);
            return result;
        }
        let caller_left = deadline::remaining();
        if caller_left.is_some_and(|left| left.is_zero()) {
            metrics::counter!(names::DEADLINE_DECISIONS_TOTAL, "store" => inner.store.name(), "when" => "before")
                .increment(1);
            return Err(StoreError::transient(
                inner.store.name(),
                "not asked: the caller's deadline had passed",
            ));
        }
        if let Some(sojourn) = inner.queue.shed_now() {
            metrics::counter!(names::QUEUE_SHED_DECISIONS_TOTAL, "store" => inner.store.name())
                .increment(1);
            tracing::trace!(?sojourn, "shed from a standing queue");
            return Err(StoreError::transient(
                inner.store.name(),
                standing_queue::SHED,
            ));
        }
        if !inner.breaker.allow() {
            return Err(StoreError::transient(
                inner.store.name(),
                "skipped after repeated failures",
            ));
        }
        let Some(permit) = inner.in_flight.enter(calls.len()) else {
            metrics::counter!(names::SHED_DECISIONS_TOTAL, "store" => inner.store.name())
                .increment(1);
            return Err(StoreError::transient(
                inner.store.name(),
                format!(
                    "shed: calls weighing {} limits already waiting",
                    inner.in_flight.bound()
                ),
            ));
        };
        // The caller's deadline, when it comes first, bounds the wait; running out of it says
        // nothing of the store, so it neither feeds the breaker nor counts as a store error.
        let (wait, for_caller) = match caller_left {
            Some(left) if left < inner.options.timeout => (left, true),
            _ => (inner.options.timeout, false),
        };
        let started = inner.latency.start();
        let result = tokio::time::timeout(wait, inner.store.decide(calls, mode)).await;
        inner.latency.record(started);
        drop(permit);
        let result = match result {
            Ok(result) => result,
            Err(_) if for_caller => {
                metrics::counter!(names::DEADLINE_DECISIONS_TOTAL, "store" => inner.store.name(), "when" => "waiting")
                    .increment(1);
                return Err(StoreError::transient(
                    inner.store.name(),
                    format!("no answer within the caller's deadline ({wait:?})"),
                ));
            }
            Err(_) => Err(StoreError::transient(
                inner.store.name(),
                format!("no answer within {:?}", inner.options.timeout),
            )),
        };
        match &result {
            Ok(_) => {
                if inner.breaker.success() {
                    tracing::info!(store = inner.store.name(), "store answers again");
                }
            }
            Err(error) => {
                metrics::counter!(names::STORE_ERRORS_TOTAL, "store" => inner.store.name())
                    .increment(1);
                // Only failures that may pass (connection lost, timeout, a busy or loading
                // server) feed the breaker. A deterministic error (a script error, a wrong type)
                // belongs to this request alone: the others must not be degraded by it.
                if !error.transient {
                    metrics::counter!(names::STORE_REQUEST_ERRORS_TOTAL, "store" => inner.store.name())
                        .increment(1);
                    tracing::error!(store = inner.store.name(), %error, "store error for one request");
                } else if inner.breaker.failure() {
                    tracing::warn!(store = inner.store.name(), %error, "store failing; skipping it for a while");
                }
            }
        }
        result
    }
}

/// Why a decision was made by the fail policy: the caller's deadline once it has passed (the
/// store's failure, if any, no longer matters to anyone), a standing queue it was shed from,
/// else the store's error.
pub(super) fn degraded_reason(error: &StoreError, policy: FailPolicy) -> String {
    if deadline::passed() {
        return deadline::REASON.to_string();
    }
    if error.message == standing_queue::SHED {
        return standing_queue::REASON.to_string();
    }
    format!("{error}; decided by fail policy `{policy:?}`").to_lowercase()
}

/// Whether the store is asked about a call: its cost fits the limit's capacity, or the limit's
/// numbers may be set at run time (the store then checks the cost against the identity's).
pub(super) fn fits(c: &LimitCall) -> bool {
    c.step.settable || c.step.cost <= c.step.params.capacity
}

/// The decision of `rule` from the store's reply (one outcome per call, in call order; one call
/// per limit of the rule), or without one (fail open or closed, or a cost no limit can hold):
/// then every limit answers `fallback` with nothing remaining.
pub(super) fn decision(
    rule: &CompiledRule,
    picks: Option<&Picks>,
    calls: &[LimitCall],
    reply: Option<&StoreReply>,
    fallback: bool,
) -> Decision {
    // A reply short of an outcome (a faulty store) leaves that limit unanswered, so denying.
    let unanswered = LimitOutcome::unanswered(fallback && reply.is_none());
    let outcomes = (0..calls.len()).map(|i| {
        reply
            .and_then(|reply| reply.outcomes.get(i))
            .unwrap_or(&unanswered)
    });
    let limits: LimitDecisions = calls
        .iter()
        .zip(choice::applied(rule, picks))
        .zip(outcomes)
        .map(|((call, limit), outcome)| {
            let names = attribute_names(&limit.by, &call.key.identity);
            limit_decision(limit, names, &call.step, outcome)
        })
        .collect();
    Decision::of_limits(rule.name.clone(), rule.definition.shadow, limits)
}

/// Gives an admitted decision the lease its concurrency limits took: those that allowed a
/// request that passed (every enforcing limit allowed it, so every limit recorded it).
pub(super) fn attach_lease(d: &mut Decision, calls: &[LimitCall], reply: Option<&StoreReply>) {
    let Some(reply) = reply else {
        return;
    };
    let pass = calls
        .iter()
        .zip(&reply.outcomes)
        .all(|(c, o)| o.allowed || c.step.shadow);
    let leased = || {
        calls
            .iter()
            .zip(&reply.outcomes)
            .filter(|(c, o)| o.allowed && c.step.lease.is_some() && fits(c))
            .map(|(c, _)| c)
    };
    let (Some(first), true) = (leased().next(), pass) else {
        return;
    };
    let token = first.step.lease.expect("filtered on a lease token");
    d.lease = Some(lease_id::lease_id(
        &d.rule,
        token,
        first.step.cost,
        leased(),
    ));
    // Rounded down: a holder never believes it holds a lease that has ended.
    d.lease_until_ms = leased()
        .map(|c| {
            reply
                .now_us
                .saturating_add(c.step.params.window_us)
                .as_millis()
        })
        .min();
}

/// The `reason` of a decision answered by the denial cache.
pub(crate) const CACHED: &str = "denied by the denial cache: the store denied this request and it \
cannot pass yet; limits other than the denying one were not consulted";
