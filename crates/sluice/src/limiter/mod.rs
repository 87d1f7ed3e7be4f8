//! The `Limiter`: rule + attributes → keys → store → [`Decision`], with the fail policy.
//!
//! Rules are compiled once (validated, limit ids and algorithm parameters computed) and swapped
//! atomically by [`Limiter::set_rules`], so a reload never disturbs a check in flight. Each check
//! is one store call for all limits of the rule (all-or-nothing, see
//! [`step`](crate::algorithm::decide)) under a deadline; when the store fails, times out or is being
//! skipped by the breaker, the rule's [`FailPolicy`](crate::FailPolicy) decides and the decision
//! is marked `degraded`.
//!
//! # Layout
//! - `mod.rs` (this file): [`Limiter`] and its entry points;
//! - `options`: [`Options`] (the limiter's settings) and [`Check`] (one check's cost and mode);
//! - `builder`: [`LimiterBuilder`], the one way to make a limiter;
//! - `compile`: `CompiledRule`, a rule turned into per-limit algorithm parameters, plain data
//!   that everything deciding reads; `compiled_limit`: one limit of it; `compiled_choice`: its
//!   conditions and overrides; `compiled_condition`: a `when` made ready for checks;
//!   `choice`: which limits apply to a request and with which numbers (`when`, `overrides`);
//! - `identity`: attributes → escaped identities; `keys`: identities → store keys and calls;
//! - `decide`: the store call with deadline, breaker, fail policy, metrics, and the decision;
//!   [`deadline`]: the caller's deadline, past which a decision asks no store;
//!   [`standing_queue`]: the decisions that waited too long in a queue that stands, answered
//!   by the fail policy instead of asking the store;
//!   `at_once`: the same decision, allocation-free, for a one-limit rule on an in-process store;
//!   `answer`: each limit's part of a decision, a check's answer as asked (the full
//!   [`Decision`] or the compact [`Verdict`]) and a `deny` override's refusal, built in one
//!   place;
//! - `meters`: the per-decision metrics, kept as registered handles (every metric the library
//!   records is declared once in the crate's `metric_catalog`, [`describe_metrics`]);
//! - `check_all`: [`Limiter::check_all`], several rules ([`RuleCheck`]s) decided as one request;
//!   `resolved`: one of its parts, resolved into store calls or answered without the store;
//!   `repeated`: its parts that count on the same counter, added up into one call;
//!   `check_all_cache`: the denial cache on its path;
//! - `admin`: reset, block, unblock, the blocks in force ([`BlockList`], [`BlockInfo`]);
//! - `inspect`: [`Limiter::keys`], what a check would touch, without making it; `usage`:
//!   [`Limiter::usage`], what an identity has used of a rule's limits, read in one store call;
//! - `lease`: [`Limiter::release`] and [`Limiter::renew`] (concurrency limits); `lease_id`: the
//!   lease ids decisions carry, made, bounded and read back; `lease_guard`: [`LeaseGuard`], a
//!   lease released on drop;
//! - `reservation`: reserving a cost and [`Limiter::settle`];
//! - `held`: hot keys, units taken from the store in batches and spent here
//!   ([`Limiter::give_back_batches`], [`Limiter::held_units`]);
//! - `runtime`: run-time limits of settable limits ([`Limiter::set_runtime_limit`] and the
//!   others, [`RuntimeLimitInfo`]);
//! - `breaker`: skips a failing store for a while;
//! - `in_flight` ([`InFlightLimit`]): bounds the decisions waiting for a remote store at once,
//!   the excess is shed to the fail policy;
//! - `denial_cache` (`DenialCache`, [`DenialCacheOptions`]): on a remote store, answers
//!   requests the store already denied until they could pass; admin operations and rule changes
//!   clear it here at once and, through the builder's
//!   [`invalidation_channel`](LimiterBuilder::invalidation_channel), on other nodes. Its
//!   `requests` decides which limits of a rule it may answer; `cached_denial` is the decision
//!   it answers a one-limit rule with.

mod admin;
mod answer;
mod at_once;
mod breaker;
mod builder;
mod cached_denial;
mod check_all;
mod check_all_cache;
mod choice;
mod compile;
mod compiled_choice;
mod compiled_condition;
mod compiled_limit;
mod crossings;
pub mod deadline;
mod decide;
pub(crate) mod denial_cache;
mod held;
mod identity;
mod in_flight;
mod inspect;
mod keys;
mod lease;
mod lease_guard;
mod lease_id;
mod local;
mod meters;
mod options;
mod repeated;
mod reservation;
mod resolved;
mod runtime;
pub mod standing_queue;
mod usage;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use arc_swap::ArcSwap;

use crate::error::Error;
pub use crate::metric_catalog::{METRICS, MetricDoc, MetricKind, describe, describe_metrics};
use crate::model::{Decision, Rule, Verdict};
use crate::store::invalidation::{Invalidation, InvalidationChannel};
use crate::store::memory::MemoryStore;
use crate::store::{DynStore, LimitCall, LimitKey};
pub use admin::{BlockInfo, BlockList};
use breaker::Breaker;
pub use builder::{IntoDynStore, LimiterBuilder};
pub use check_all::RuleCheck;
#[cfg(feature = "tower")]
pub(crate) use choice::denial_message as denied_by_override;
pub(crate) use compile::{CompiledRule, RuleBook};
use crossings::Crossings;
pub use crossings::QuotaCrossing;
pub(crate) use denial_cache::DenialCache;
pub use denial_cache::DenialCacheOptions;
pub use held::HeldUnits;
pub use identity::Attributes;
use in_flight::InFlight;
pub use in_flight::{ADAPTIVE_REMOVED, InFlightLimit};
pub use lease_guard::LeaseGuard;
pub use lease_id::MAX_LEASE_LEN;
use meters::StoreLatency;
pub use options::{Check, DEFAULT_CROSSING_QUEUE, DEFAULT_MAX_RUNTIME_LIMITS, MAX_COST, Options};
pub use runtime::RuntimeLimitInfo;
pub use standing_queue::QueueLimit;
use standing_queue::StandingQueue;

/// Decides requests against named rules. Cheap to clone; clones share everything.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use sluice::{Check, Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
///
/// let limiter = Limiter::builder(MemoryStore::new())
///     .rule("export", Rule::new(vec![Limit::new(&["user"], "10/1h".parse()?, Algorithm::TokenBucket)]))
///     .build()?;
/// let attrs = [("user", "u1")];
/// assert!(limiter.check("export", &attrs).await?.allowed);
/// assert!(limiter.check_with("export", &attrs, Check::cost(9)).await?.allowed);
/// assert!(!limiter.check_with("export", &attrs, Check::cost(1).peek()).await?.allowed);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// # }).unwrap();
/// ```
#[derive(Debug, Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    rules: ArcSwap<RuleBook>,
    store: Arc<dyn DynStore>,
    latency: StoreLatency,
    local: MemoryStore,
    breaker: Breaker,
    in_flight: InFlight,
    queue: StandingQueue,
    options: Options,
    enabled: AtomicBool,
    denials: Option<Arc<DenialCache>>,
    channel: Option<Arc<dyn InvalidationChannel>>,
    clock: Arc<dyn crate::clock::Clock>,
    crossings: Crossings,
}

impl Limiter {
    /// Starts a limiter on a store: any [`Store`](crate::Store), or an `Arc<dyn DynStore>`
    /// shared with other parts of the program.
    pub fn builder(store: impl IntoDynStore) -> LimiterBuilder {
        LimiterBuilder::new(store.into_dyn_store())
    }

    /// Checks and records one unit: `limiter.check("login", &attrs).await?`.
    ///
    /// `Ok` carries the decision whether allowed or denied; `Err` is bad input (unknown rule,
    /// missing attribute).
    // Not `async fn`: the future is `decide`'s own, so the decision is not moved through one more
    // future on its way out (a few hundred bytes, a sizeable part of an in-memory check).
    pub fn check(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> impl Future<Output = Result<Decision, Error>> {
        self.decide(rule, attrs, Check::ONE)
    }

    /// Checks with another cost, or only peeks: `Check::cost(3)`, `Check::cost(3).peek()`.
    ///
    /// `Err` is bad input, including a cost above [`MAX_COST`].
    pub fn check_with(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> impl Future<Output = Result<Decision, Error>> {
        self.decide(rule, attrs, check)
    }

    /// Checks and records one unit, answering with the compact [`Verdict`]: whether to proceed,
    /// how long to wait if not, the units left. The same check as [`Limiter::check`], whose
    /// [`Decision`] says everything else (each limit's numbers, blocks, leases, the reason); on
    /// the memory store it costs a fraction of building that decision.
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use sluice::{Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
    ///
    /// let limiter = Limiter::builder(MemoryStore::new())
    ///     .rule("login", Rule::new(vec![Limit::new(&["ip"], "1/1m".parse()?, Algorithm::Gcra)]))
    ///     .build()?;
    /// let attrs = [("ip", "203.0.113.9")];
    /// assert!(limiter.verdict("login", &attrs).await?.allowed);
    /// let second = limiter.verdict("login", &attrs).await?;
    /// assert!(!second.allowed && second.retry_after_ms.is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub fn verdict(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> impl Future<Output = Result<Verdict, Error>> {
        self.decide(rule, attrs, Check::ONE)
    }

    /// [`Limiter::verdict`] with another cost, or only peeking ([`Limiter::check_with`]).
    pub fn verdict_with(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> impl Future<Output = Result<Verdict, Error>> {
        self.decide(rule, attrs, check)
    }

    /// The quota crossings this limiter's decisions find (see [`QuotaCrossing`]), for the first
    /// caller only: `None` once taken. Each rule limit with `notify` queues one crossing per
    /// identity, threshold and period, found in the decision's own store call; deliver them
    /// promptly, as a full queue drops new ones
    /// ([`Options::crossing_queue`](crate::Options::crossing_queue)). Queued crossings live in
    /// this process only: those not yet delivered when it ends are lost.
    pub fn crossings(&self) -> Option<tokio::sync::mpsc::Receiver<QuotaCrossing>> {
        self.inner.crossings.take()
    }

    /// The store calls a check would make, without making them.
    pub(crate) fn calls(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        check: Check,
    ) -> Result<Vec<LimitCall>, Error> {
        let rule = self.rule(rule)?;
        let picks = match rule.choice.as_deref().map(|c| c.select(&rule, attrs)) {
            Some(choice::Selection::Answer(_)) => return Ok(Vec::new()),
            Some(choice::Selection::Limits(picks)) => Some(picks),
            None => None,
        };
        keys::calls(
            &rule,
            picks.as_ref(),
            attrs,
            check,
            self.inner.options.max_attribute_len,
        )
    }

    /// Replaces the rules atomically. Invalid rules are refused and the old ones stay.
    ///
    /// Cached denials of the rules that changed are forgotten at once, here and (through the
    /// invalidation channel, in the background) on the other nodes.
    pub fn set_rules(&self, rules: impl IntoIterator<Item = (String, Rule)>) -> Result<(), Error> {
        let mut book = compile::compile(rules)?;
        held::carry_over(&self.inner.rules.load(), &mut book);
        let old = self.inner.rules.swap(Arc::new(book));
        let new = self.inner.rules.load();
        self.give_back_dropped(&old, &new);
        let changed: Vec<String> = old
            .iter()
            .filter(|(name, rule)| {
                new.get(*name)
                    .is_none_or(|n| n.definition != rule.definition)
            })
            .chain(new.iter().filter(|(name, _)| !old.contains_key(*name)))
            .map(|(name, _)| name.clone())
            .collect();
        if !changed.is_empty() {
            let invalidation = Invalidation::Rules(changed);
            if let Some(denials) = &self.inner.denials {
                denials.invalidate(&invalidation);
            }
            if let (Some(channel), Ok(runtime)) = (
                self.inner.channel.clone(),
                tokio::runtime::Handle::try_current(),
            ) {
                runtime.spawn(async move {
                    if let Err(error) = channel.publish(&invalidation).await {
                        tracing::warn!(%error, "could not publish the rule change to other nodes");
                    }
                });
            }
        }
        Ok(())
    }

    /// The denial cache, when the store is remote and the cache enabled.
    pub fn denial_cache(&self) -> Option<&DenialCache> {
        self.inner.denials.as_deref()
    }

    /// Forgets cached denials of `keys` here, then tells the other nodes.
    async fn invalidate(&self, keys: Vec<LimitKey>) -> Result<(), Error> {
        let invalidation = Invalidation::Keys(keys);
        if let Some(denials) = &self.inner.denials {
            denials.invalidate(&invalidation);
        }
        if let Some(channel) = &self.inner.channel {
            channel.publish(&invalidation).await?;
        }
        Ok(())
    }

    /// The rules in force.
    pub fn rules(&self) -> Arc<RuleBook> {
        self.inner.rules.load_full()
    }

    /// The message a rule gives denied requests, if it has one (the one lookup the middleware,
    /// the service and `#[sluice::limited]` share).
    pub fn message(&self, rule: &str) -> Option<String> {
        self.inner
            .rules
            .load()
            .get(rule)
            .and_then(|r| r.definition.message.clone())
    }

    /// Turns the whole limiter on or off; off allows everything without asking the store.
    pub fn set_enabled(&self, enabled: bool) {
        self.inner.enabled.store(enabled, Ordering::Relaxed);
    }

    /// The message a denied decision gives: a `deny` override's own, else the rule's `message`.
    pub fn denial_message(&self, d: &Decision) -> Option<String> {
        match choice::denial_message(d) {
            Some(message) => Some(message.to_string()),
            None => self.message(&d.rule),
        }
    }

    /// The limiter's options.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The store behind this limiter.
    pub fn store(&self) -> &Arc<dyn DynStore> {
        &self.inner.store
    }

    /// Whether the store is currently being skipped after repeated failures.
    pub fn store_skipped(&self) -> bool {
        self.inner.breaker.is_open()
    }

    /// Decisions waiting for the store now, and how many may ([`Options::in_flight`]). Zero
    /// waiting on an in-process store, which nothing waits for.
    pub fn store_in_flight(&self) -> (u32, u32) {
        (self.inner.in_flight.count(), self.inner.in_flight.bound())
    }

    fn rule(&self, name: &str) -> Result<Arc<CompiledRule>, Error> {
        self.inner
            .rules
            .load()
            .get(name)
            .cloned()
            .ok_or_else(|| Error::UnknownRule {
                rule: name.to_string(),
            })
    }
}
