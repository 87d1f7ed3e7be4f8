//! Several rules decided as one request, all-or-nothing: [`Limiter::check_all`].
//!
//! A gateway may ask about several things at once (Envoy sends one descriptor per rate-limit
//! action of a route). The request passes only if every part passes, and a denied request
//! consumes nothing in any part: all the limits of all the parts go to the store in one atomic
//! step, exactly as the limits of one rule do.
//!
//! Invariants:
//! - parts that count on the same counter (the same rule, limit and identity) are one request on
//!   it: their costs are added up and judged once against the one count (see `repeated`), so
//!   repeating a part never admits more than asking once for the sum;
//! - on a remote store, a consuming part the denial cache knows to be denied answers the whole
//!   request without a store call (see `check_all_cache`), and the denials of a step that consumed
//!   fill the cache, as a check's do;
//! - a part of cost 0 only looks (as [`Limiter::peek`]) but can still deny the request; such
//!   parts are asked first, in a step that changes nothing, and a denial there turns the rest
//!   into a look too;
//! - a shadow rule's limits never deny the other parts;
//! - a limit that cannot hold its part's cost is never sent it, as in a check (`decide`): an
//!   enforcing one denies the request before the store is asked to consume, a shadow one answers
//!   denied without the store (which would count its denial, a violation or a block);
//! - a part on a rule with a concurrency limit gets its `lease` only when the whole request
//!   passed (a denied request took no lease anywhere);
//! - when the store cannot answer, each part gets its own rule's fail policy (`open` allows,
//!   `closed` denies, `local` decides on this node's memory store, all local parts in one step,
//!   consuming nothing if a `closed` part denies);
//! - a request of one part (not a look) on a rule whose limit takes batches is decided as a
//!   check of that rule, so it may spend a held batch; with several parts every limit goes to
//!   the store in the one atomic step.

use crate::algorithm::Mode;
use crate::error::Error;
use crate::metric_catalog::names;
use crate::model::{Decision, FailPolicy};
use crate::store::{LimitCall, StoreError, StoreReply};

use super::choice::Selection;
use super::crossings::{self, QuotaCrossing};
use super::decide::{CACHED, attach_lease, decision, degraded_reason, fits};
use super::denial_cache::DenialCache;
use super::resolved::Resolved;
use super::{Attributes, Check, CompiledRule, Limiter, MAX_COST, check_all_cache, keys, repeated};

/// One part of a request decided by [`Limiter::check_all`].
#[derive(Debug, Clone, Copy)]
pub struct RuleCheck<'a, A: ?Sized> {
    /// The rule.
    pub rule: &'a str,
    /// The identity values for that rule.
    pub attrs: &'a A,
    /// Units to consume (0 looks).
    pub cost: u64,
}

impl Limiter {
    /// Decides several parts as one request: allowed only if every part is, and a denial consumes
    /// nothing anywhere (see the module docs). Returns one decision per part, in order; the
    /// request is allowed when all of them are. Parts that count on the same counter (the same
    /// rule and identity) are added up and judged once: two parts of cost 1 are one of cost 2,
    /// and each gets that one answer (the same lease, on a concurrency limit).
    ///
    /// `Err` is bad input in any part (unknown rule, missing attribute, absurd cost, parts on one
    /// counter that cannot be added up: [`Error::ConflictingParts`]): nothing is decided then.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use sluice::limiter::RuleCheck;
    /// use sluice::{Check, Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
    ///
    /// let limiter = Limiter::builder(MemoryStore::new())
    ///     .rule("per_ip", Rule::new(vec![Limit::new(&["ip"], "10/1m".parse()?, Algorithm::Gcra)]))
    ///     .rule("per_path", Rule::new(vec![Limit::new(&["path"], "1/1m".parse()?, Algorithm::Gcra)]))
    ///     .build()?;
    /// let ip = [("ip", "203.0.113.9")];
    /// let path = [("path", "/a")];
    /// let both = [
    ///     RuleCheck { rule: "per_ip", attrs: &ip[..], cost: 1 },
    ///     RuleCheck { rule: "per_path", attrs: &path[..], cost: 1 },
    /// ];
    /// assert!(limiter.check_all(&both).await?.iter().all(|d| d.allowed));
    /// let again = limiter.check_all(&both).await?;
    /// assert!(again[0].allowed && !again[1].allowed);
    /// // The denied request took nothing from `per_ip`: 9 of 10 left, not 8.
    /// let left = limiter.check_with("per_ip", &ip, Check::ONE.peek()).await?.remaining;
    /// assert_eq!(left, 9);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn check_all<A: Attributes + ?Sized>(
        &self,
        parts: &[RuleCheck<'_, A>],
    ) -> Result<Vec<Decision>, Error> {
        let mut resolved: Vec<Option<Resolved>> = Vec::with_capacity(parts.len());
        for part in parts {
            resolved.push(self.resolve(part)?);
        }
        repeated::merge(&mut resolved)?;
        // A request of one part is that rule's own check: on a rule with batches it may then be
        // answered from a held batch (a gateway's one descriptor on a hot key).
        if let ([part], [Some(one)]) = (parts, resolved.as_slice())
            && one.rule.held.is_some()
            && part.cost > 0
        {
            return Ok(vec![
                self.decide(part.rule, part.attrs, Check::cost(part.cost))
                    .await?,
            ]);
        }
        if !self
            .inner
            .enabled
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            return Ok(parts
                .iter()
                .map(|p| Decision::pass_through(p.rule, "limiter disabled"))
                .collect());
        }
        // A cost no limit can hold denies the request before the store is asked to consume.
        // So does a part a `deny` override refuses.
        let too_big = resolved.iter().flatten().any(|r| {
            r.answer.as_ref().is_some_and(|d| !d.allowed)
                || r.calls.iter().any(|c| {
                    !c.step.shadow
                        && !c.step.settable
                        && !r.look
                        && c.step.cost > c.step.params.capacity
                })
        });
        let looks: Vec<&Resolved> = resolved.iter().flatten().filter(|r| r.asks(true)).collect();
        let applies: Vec<&Resolved> = resolved
            .iter()
            .flatten()
            .filter(|r| r.asks(false))
            .collect();

        let all: Vec<&Resolved> = looks.iter().chain(&applies).copied().collect();
        let mut replies: Vec<Option<StoreReply>> = Vec::new();
        let mut failure: Option<StoreError> = None;
        let mut denied = too_big;
        let denials = self.inner.denials.as_deref();
        // A part the denial cache knows to be denied answers the whole request.
        let mut cached = None;
        if let Some((hit, outcomes)) = denials
            .filter(|_| !denied)
            .and_then(|c| check_all_cache::answer(c, &applies))
        {
            let hit = looks.len() + hit;
            replies = check_all_cache::replies(&all, hit, outcomes);
            all[hit].rule.meters.cache_hit();
            cached = Some(hit);
        }
        let groups = [(&looks, Mode::Peek), (&applies, Mode::Apply)];
        for (group, mode) in groups.into_iter().filter(|_| cached.is_none()) {
            if group.is_empty() {
                continue;
            }
            let mode = if denied { Mode::Peek } else { mode };
            let (calls, at) = repeated::unique(group);
            let start = denials
                .filter(|_| mode == Mode::Apply)
                .map(DenialCache::call_start);
            match self.call_store_fitting(&calls, mode).await {
                Ok(reply) => {
                    denied |= denies(&calls, &reply);
                    let split = split(&reply, group, &at);
                    // As in a check: outcomes the store did not give are not cached.
                    let all_fit = calls.iter().all(fits);
                    if let (Some(cache), Some(start), true) = (denials, start, all_fit) {
                        check_all_cache::remember(cache, start, group, &split);
                    }
                    replies.extend(split);
                }
                Err(error) => {
                    failure = Some(error);
                    break;
                }
            }
        }
        let mut degraded = None;
        if let Some(error) = failure {
            replies = self.fail_policies(&all, &error);
            degraded = Some(error);
        }
        let mut decided: Vec<(Decision, Option<StoreReply>)> = all
            .iter()
            .zip(replies)
            .enumerate()
            .map(|(i, (r, reply))| {
                let policy = self.policy(&r.rule);
                let fallback = policy == FailPolicy::Open;
                let mut d = decision(
                    &r.rule,
                    r.picks.as_ref(),
                    &r.calls,
                    reply.as_ref(),
                    fallback,
                );
                if cached == Some(i) {
                    d.reason = Some(CACHED.to_string());
                }
                if let Some(error) = &degraded {
                    d.degraded = true;
                    d.reason = Some(degraded_reason(error, policy));
                }
                r.rule.meters.decided(&d);
                (d, reply)
            })
            .collect();
        // Only a request that passed took the leases of its concurrency limits: a denied one
        // was asked as a look, or consumed nothing in its atomic step.
        if decided.iter().all(|(d, _)| d.allowed) {
            for ((d, reply), r) in decided.iter_mut().zip(&all) {
                if !r.look {
                    attach_lease(d, &r.calls, reply.as_ref());
                }
            }
            if degraded.is_none() {
                self.queue_crossings(&all, &decided);
            }
        }
        let mut decided = decided.into_iter().map(|(d, _)| d);
        // Back to the callers' order: looks were decided first.
        let kind = |i: usize, look: bool| resolved[i].as_ref().is_some_and(|r| r.asks(look));
        let mut by_part: Vec<Option<Decision>> = resolved
            .iter()
            .map(|r| {
                let answer = r.as_ref()?.answer.clone()?;
                r.as_ref()?.rule.meters.decided(&answer);
                Some(answer)
            })
            .collect();
        for i in (0..parts.len())
            .filter(|&i| kind(i, true))
            .chain((0..parts.len()).filter(|&i| kind(i, false)))
        {
            by_part[i] = decided.next();
        }
        Ok(by_part
            .into_iter()
            .zip(parts)
            .map(|(d, p)| d.unwrap_or_else(|| Decision::pass_through(p.rule, "rule disabled")))
            .collect())
    }

    /// Queues the quota crossings of an applied request's parts; parts that count on one counter
    /// share its answer (see `repeated`), and its crossings are queued once.
    fn queue_crossings(&self, all: &[&Resolved], decided: &[(Decision, Option<StoreReply>)]) {
        let mut found: Vec<QuotaCrossing> = Vec::new();
        for (r, (_, reply)) in all.iter().zip(decided) {
            if let (false, true, Some(reply)) = (r.look, r.rule.notifies, reply) {
                for crossing in crossings::found(&r.rule, r.picks.as_ref(), &r.calls, reply) {
                    if !found.contains(&crossing) {
                        found.push(crossing);
                    }
                }
            }
        }
        for crossing in found {
            self.inner.crossings.queue(crossing);
        }
    }

    /// A part's store calls, or `None` when its rule is disabled.
    fn resolve<A: Attributes + ?Sized>(
        &self,
        part: &RuleCheck<'_, A>,
    ) -> Result<Option<Resolved>, Error> {
        let rule = self.rule(part.rule)?;
        if part.cost > MAX_COST {
            return Err(Error::InvalidCost {
                cost: part.cost,
                max: MAX_COST,
            });
        }
        if !rule.definition.enabled {
            return Ok(None);
        }
        let check = Check::cost(part.cost.max(1));
        let picks = match rule.choice.as_deref().map(|c| c.select(&rule, part.attrs)) {
            None => None,
            Some(Selection::Limits(picks)) => Some(picks),
            Some(Selection::Answer(answer)) => {
                return Ok(Some(Resolved {
                    rule,
                    picks: None,
                    calls: Vec::new(),
                    look: part.cost == 0,
                    answer: Some(*answer),
                }));
            }
        };
        let mut calls = keys::calls(
            &rule,
            picks.as_ref(),
            part.attrs,
            check,
            self.inner.options.max_attribute_len,
        )?;
        if rule.definition.shadow {
            for call in &mut calls {
                call.step.shadow = true;
            }
        }
        Ok(Some(Resolved {
            rule,
            picks,
            calls,
            look: part.cost == 0,
            answer: None,
        }))
    }

    fn policy(&self, rule: &CompiledRule) -> FailPolicy {
        rule.definition.fail.unwrap_or(self.inner.options.fail)
    }

    /// The replies the fail policies give when the store could not answer.
    fn fail_policies(&self, all: &[&Resolved], error: &StoreError) -> Vec<Option<StoreReply>> {
        let closed = all
            .iter()
            .any(|r| self.policy(&r.rule) == FailPolicy::Closed);
        let local: Vec<&Resolved> = all
            .iter()
            .filter(|r| self.policy(&r.rule) == FailPolicy::Local)
            .copied()
            .collect();
        for r in all {
            tracing::debug!(rule = %r.rule.name, %error, "store unavailable; fail policy {:?}", self.policy(&r.rule));
            metrics::counter!(names::DEGRADED_DECISIONS_TOTAL, "rule" => r.rule.name.to_string())
                .increment(1);
        }
        let mut local_replies = Vec::new();
        let mut denied = closed;
        for look in [true, false] {
            let group: Vec<&Resolved> = local.iter().filter(|r| r.look == look).copied().collect();
            if group.is_empty() {
                continue;
            }
            let mode = if look || denied {
                Mode::Peek
            } else {
                Mode::Apply
            };
            let (calls, at) = repeated::unique(&group);
            match self.decide_locally(&calls, mode) {
                Ok(reply) => {
                    denied |= denies(&calls, &reply);
                    local_replies.extend(split(&reply, &group, &at));
                }
                // A local store full of live keys cannot count these identities: deny them.
                Err(_) => {
                    denied = true;
                    local_replies.extend(group.iter().map(|_| None));
                }
            }
        }
        // `all` lists looks first, as the loop above does.
        let mut local_replies = local_replies.into_iter();
        all.iter()
            .map(|r| match self.policy(&r.rule) {
                FailPolicy::Local => local_replies.next().flatten(),
                FailPolicy::Open | FailPolicy::Closed => None,
            })
            .collect()
    }
}

/// Whether an enforcing limit in a reply denied.
fn denies(calls: &[LimitCall], reply: &StoreReply) -> bool {
    calls
        .iter()
        .zip(&reply.outcomes)
        .any(|(c, o)| !c.step.shadow && !o.allowed)
}

/// One reply per part, each with the outcomes of its counters (`at`: where each call of each
/// part is among the calls asked, see [`repeated::unique`]).
fn split(reply: &StoreReply, group: &[&Resolved], at: &[usize]) -> Vec<Option<StoreReply>> {
    let mut at = at.iter();
    group
        .iter()
        .map(|r| {
            let outcomes = at.by_ref().take(r.calls.len());
            Some(StoreReply {
                now_us: reply.now_us,
                outcomes: outcomes
                    .filter_map(|&k| reply.outcomes.get(k).copied())
                    .collect(),
            })
        })
        .collect()
}
