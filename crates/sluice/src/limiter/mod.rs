//! The `Limiter`: rule + attributes → keys → store → [`Decision`], with the fail policy.
//!
//! Rules are compiled once (validated, limit ids and algorithm parameters computed) and swapped
//! atomically by [`Limiter::set_rules`], so a reload never disturbs a check in flight. Each check
//! is one store call for all limits of the rule (all-or-nothing, see
//! [`step`](crate::algorithm::step)) under a deadline; when the store fails, times out or is being
//! skipped by the [`breaker`], the rule's [`FailPolicy`] decides and the decision is marked
//! `degraded`.

pub mod breaker;
pub mod denial_cache;
pub mod keys;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use arc_swap::ArcSwap;
// The CPU counter: timing every store call with the OS clock costs more than an in-memory decision.
use quanta::Instant;

use crate::algorithm::{LimitOutcome, LimitStep, Mode, Params, penalty};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::model::{Decision, FailPolicy, LimitDecision, MAX_COUNT, Rule, validate_rule_name};
use crate::store::memory::MemoryStore;
use crate::store::{LimitCall, LimitKey, Store, StoreError, StoreReply};
use breaker::Breaker;
pub use keys::Attributes;
use keys::IdentityError;

/// The largest cost a check accepts; anything above is a caller bug (HTTP 400).
pub const MAX_COST: u64 = MAX_COUNT;

/// Settings of a [`Limiter`].
#[derive(Debug, Clone)]
pub struct Options {
    /// Deadline for one store call.
    pub timeout: Duration,
    /// Fail policy of rules that set none.
    pub fail: FailPolicy,
    /// Longest attribute value accepted (bytes).
    pub max_attribute_len: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            timeout: Duration::from_millis(50),
            fail: FailPolicy::Open,
            max_attribute_len: 1024,
        }
    }
}

/// A rule ready to decide: validated, with each limit's parameters computed.
#[derive(Debug, Clone)]
pub struct CompiledRule {
    /// The rule's name.
    pub name: String,
    /// The rule as configured.
    pub rule: Rule,
    /// The name again, shared by every key built for this rule.
    shared_name: Arc<str>,
    limits: Vec<CompiledLimit>,
}

#[derive(Debug, Clone)]
struct CompiledLimit {
    id: Arc<str>,
    step: LimitStep,
    window_ms: u64,
}

impl CompiledRule {
    /// Validates and compiles a rule.
    pub fn new(name: &str, rule: Rule) -> Result<CompiledRule, Error> {
        let invalid = |error| Error::InvalidRule {
            rule: name.to_string(),
            error,
        };
        validate_rule_name(name).map_err(invalid)?;
        rule.validate().map_err(invalid)?;
        let limits = rule
            .limits
            .iter()
            .map(|l| CompiledLimit {
                id: l.id().into(),
                window_ms: l.rate.window.as_millis() as u64,
                step: LimitStep {
                    algorithm: l.algorithm,
                    params: Params {
                        limit: l.rate.count,
                        window_us: l.rate.window_us(),
                        capacity: l.capacity(),
                        count_denied: l.count_denied,
                    },
                    cost: 1,
                    block_us: l.block.map(|d| d.as_micros() as u64),
                    penalty: l.penalty.map(|p| penalty::Params {
                        warn_after: p.warn_after.into(),
                        ban_after: p.ban_after.into(),
                        ban_us: p.ban.as_micros() as u64,
                        memory_us: p.memory.as_micros() as u64,
                    }),
                    enforce: !l.shadow,
                },
            })
            .collect();
        Ok(CompiledRule {
            name: name.to_string(),
            shared_name: name.into(),
            rule,
            limits,
        })
    }
}

/// The compiled rules in force, by name.
pub type RuleBook = BTreeMap<String, Arc<CompiledRule>>;

/// An active block, as the admin API lists it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct BlockInfo {
    /// The limit's id.
    pub limit: String,
    /// The (escaped) identity.
    pub identity: String,
    /// When it ends (epoch ms).
    pub blocked_until_ms: u64,
}

/// Decides requests against named rules. Cheap to clone; clones share everything.
#[derive(Debug, Clone)]
pub struct Limiter {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    rules: ArcSwap<RuleBook>,
    store: Arc<dyn Store>,
    local: MemoryStore,
    breaker: Breaker,
    options: Options,
    enabled: AtomicBool,
}

/// Builds a [`Limiter`].
#[derive(Debug)]
pub struct LimiterBuilder {
    store: Arc<dyn Store>,
    rules: Vec<(String, Rule)>,
    clock: Arc<dyn Clock>,
    options: Options,
}

impl LimiterBuilder {
    /// Adds a rule.
    pub fn rule(mut self, name: impl Into<String>, rule: Rule) -> Self {
        self.rules.push((name.into(), rule));
        self
    }

    /// Adds rules.
    pub fn rules(mut self, rules: impl IntoIterator<Item = (String, Rule)>) -> Self {
        self.rules.extend(rules);
        self
    }

    /// The clock for the breaker and the `local` fail policy (default: system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Replaces all options.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// The store call deadline.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.options.timeout = timeout;
        self
    }

    /// The default fail policy.
    pub fn fail(mut self, fail: FailPolicy) -> Self {
        self.options.fail = fail;
        self
    }

    /// Validates the rules and builds the limiter.
    pub fn build(self) -> Result<Limiter, Error> {
        let book = compile(self.rules)?;
        Ok(Limiter {
            inner: Arc::new(Inner {
                rules: ArcSwap::from_pointee(book),
                store: self.store,
                local: MemoryStore::with_clock(self.clock.clone()),
                breaker: Breaker::new(self.clock, self.options.timeout),
                options: self.options,
                enabled: AtomicBool::new(true),
            }),
        })
    }
}

fn compile(rules: impl IntoIterator<Item = (String, Rule)>) -> Result<RuleBook, Error> {
    let mut book = RuleBook::new();
    for (name, rule) in rules {
        let compiled = CompiledRule::new(&name, rule)?;
        book.insert(name, Arc::new(compiled));
    }
    Ok(book)
}

fn ms(us: u64) -> u64 {
    us.div_ceil(1000)
}

impl Limiter {
    /// Starts a limiter on a store.
    pub fn builder(store: impl Store) -> LimiterBuilder {
        Limiter::builder_arc(Arc::new(store))
    }

    /// Starts a limiter on a shared store.
    pub fn builder_arc(store: Arc<dyn Store>) -> LimiterBuilder {
        LimiterBuilder {
            store,
            rules: Vec::new(),
            clock: Arc::new(SystemClock),
            options: Options::default(),
        }
    }

    /// Checks and records a request of `cost` units (0 peeks: see [`Limiter::peek`]).
    ///
    /// `Ok` carries the decision whether allowed or denied; `Err` is bad input.
    pub async fn check(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        cost: u64,
    ) -> Result<Decision, Error> {
        self.decide(rule, attrs, cost, Mode::Apply).await
    }

    /// Answers as [`Limiter::check`] would for `cost` units (1 when 0), recording nothing.
    pub async fn peek(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        cost: u64,
    ) -> Result<Decision, Error> {
        self.decide(rule, attrs, cost, Mode::Peek).await
    }

    /// Replaces the rules atomically. Invalid rules are refused and the old ones stay.
    pub fn set_rules(&self, rules: impl IntoIterator<Item = (String, Rule)>) -> Result<(), Error> {
        let book = compile(rules)?;
        self.inner.rules.store(Arc::new(book));
        Ok(())
    }

    /// The rules in force.
    pub fn rules(&self) -> Arc<RuleBook> {
        self.inner.rules.load_full()
    }

    /// Turns the whole limiter on or off; off allows everything without asking the store.
    pub fn set_enabled(&self, enabled: bool) {
        self.inner.enabled.store(enabled, Ordering::Relaxed);
    }

    /// The limiter's options.
    pub fn options(&self) -> &Options {
        &self.inner.options
    }

    /// The store behind this limiter.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// Whether the store is currently being skipped after repeated failures.
    pub fn store_skipped(&self) -> bool {
        self.inner.breaker.is_open()
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

    /// Builds the keys of a rule for these attributes, with the attribute names each used.
    fn keys(
        &self,
        rule: &CompiledRule,
        attrs: &(impl Attributes + ?Sized),
    ) -> Vec<Result<(LimitKey, Vec<String>), Error>> {
        rule.rule
            .limits
            .iter()
            .zip(&rule.limits)
            .map(|(limit, compiled)| {
                let (identity, used) =
                    keys::identity(&limit.by, attrs, self.inner.options.max_attribute_len)
                        .map_err(|e| match e {
                            IdentityError::Missing(attribute) => Error::MissingAttribute {
                                rule: rule.name.clone(),
                                limit: compiled.id.to_string(),
                                attribute,
                            },
                            IdentityError::TooLong { attribute, len } => Error::AttributeTooLong {
                                attribute,
                                len,
                                max: self.inner.options.max_attribute_len,
                            },
                        })?;
                let key = LimitKey {
                    rule: rule.shared_name.clone(),
                    limit: compiled.id.clone(),
                    identity,
                };
                Ok((key, used))
            })
            .collect()
    }

    /// The store calls of one request, with the attribute names each limit's identity used.
    fn calls_of(
        &self,
        rule: &CompiledRule,
        attrs: &(impl Attributes + ?Sized),
        cost: u64,
    ) -> Result<(Vec<LimitCall>, Vec<Vec<String>>), Error> {
        let mut calls = Vec::with_capacity(rule.limits.len());
        let mut identities = Vec::with_capacity(rule.limits.len());
        for (key, compiled) in self.keys(rule, attrs).into_iter().zip(&rule.limits) {
            let (key, used) = key?;
            calls.push(LimitCall {
                key,
                step: LimitStep {
                    cost,
                    ..compiled.step
                },
            });
            identities.push(used);
        }
        Ok((calls, identities))
    }

    /// The store calls a check of `cost` units would make, without making them (for debugging,
    /// and for benchmarking a store's script on its own).
    pub fn calls(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        cost: u64,
    ) -> Result<Vec<LimitCall>, Error> {
        let rule = self.rule(rule)?;
        Ok(self.calls_of(&rule, attrs, cost)?.0)
    }

    async fn decide(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
        cost: u64,
        mode: Mode,
    ) -> Result<Decision, Error> {
        if !self.inner.enabled.load(Ordering::Relaxed) {
            return Ok(Decision::pass_through(name, "limiter disabled"));
        }
        let rule = self.rule(name)?;
        if !rule.rule.enabled {
            return Ok(Decision::pass_through(name, "rule disabled"));
        }
        if cost > MAX_COST {
            return Err(Error::InvalidCost {
                cost,
                max: MAX_COST,
            });
        }
        let (mode, cost) = if cost == 0 {
            (Mode::Peek, 1)
        } else {
            (mode, cost)
        };
        let (calls, identities) = self.calls_of(&rule, attrs, cost)?;
        if let Some(too_big) = rule
            .limits
            .iter()
            .find(|l| l.step.enforce && cost > l.step.params.capacity)
        {
            let mut d = self.assemble(&rule, &identities, &calls, None, false);
            d.reason = Some(format!(
                "cost {cost} exceeds the capacity {} of limit `{}`",
                too_big.step.params.capacity, too_big.id
            ));
            record_metrics(&d);
            return Ok(d);
        }
        let policy = rule.rule.fail.unwrap_or(self.inner.options.fail);
        let (reply, degraded) = match self.call_store(&calls, mode).await {
            Ok(reply) => (Some(reply), None),
            Err(error) => {
                tracing::debug!(rule = name, %error, "store unavailable; fail policy {policy:?}");
                metrics::counter!("sluice_degraded_decisions_total", "rule" => name.to_string())
                    .increment(1);
                let reply = match policy {
                    // A local store full of live keys cannot count this identity: deny it.
                    FailPolicy::Local => self.inner.local.decide_now(&calls, mode).ok(),
                    FailPolicy::Open | FailPolicy::Closed => None,
                };
                (reply, Some(error))
            }
        };
        let fallback = policy == FailPolicy::Open;
        let mut d = self.assemble(&rule, &identities, &calls, reply.as_ref(), fallback);
        if let Some(error) = degraded {
            d.degraded = true;
            d.reason = Some(format!("{error}; decided by fail policy `{policy:?}`").to_lowercase());
        }
        record_metrics(&d);
        Ok(d)
    }

    /// One store call under the deadline and the breaker.
    async fn call_store(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        let inner = &self.inner;
        if inner.store.in_process() {
            let started = Instant::now();
            let result = inner.store.decide(calls, mode).await;
            metrics::histogram!("sluice_store_latency_seconds", "store" => inner.store.name())
                .record(started.elapsed().as_secs_f64());
            return result;
        }
        if !inner.breaker.allow() {
            return Err(StoreError::transient(
                inner.store.name(),
                "skipped after repeated failures",
            ));
        }
        let started = Instant::now();
        let result = match tokio::time::timeout(
            inner.options.timeout,
            inner.store.decide(calls, mode),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(StoreError::transient(
                inner.store.name(),
                format!("no answer within {:?}", inner.options.timeout),
            )),
        };
        metrics::histogram!("sluice_store_latency_seconds", "store" => inner.store.name())
            .record(started.elapsed().as_secs_f64());
        match &result {
            Ok(_) => {
                if inner.breaker.success() {
                    tracing::info!(store = inner.store.name(), "store answers again");
                }
            }
            Err(error) => {
                metrics::counter!("sluice_store_errors_total", "store" => inner.store.name())
                    .increment(1);
                if inner.breaker.failure() {
                    tracing::warn!(store = inner.store.name(), %error, "store failing; skipping it for a while");
                } else if !error.transient {
                    tracing::error!(store = inner.store.name(), %error, "store error");
                }
            }
        }
        result
    }

    /// Builds the decision from the store's outcomes, or without any (fail open or closed, or a
    /// cost no limit can hold): then every limit answers `fallback` with nothing remaining.
    fn assemble(
        &self,
        rule: &CompiledRule,
        identities: &[Vec<String>],
        calls: &[LimitCall],
        reply: Option<&StoreReply>,
        fallback: bool,
    ) -> Decision {
        let limits: Vec<LimitDecision> = rule
            .limits
            .iter()
            .zip(identities)
            .zip(calls)
            .enumerate()
            .map(|(i, ((compiled, identity), call))| {
                let o = reply.map_or(
                    LimitOutcome {
                        allowed: fallback,
                        remaining: 0,
                        reset_after_us: 0,
                        retry_after_us: None,
                        delay_us: 0,
                        blocked_until_us: None,
                        violations: 0,
                        warning: false,
                    },
                    |r| r.outcomes[i],
                );
                LimitDecision {
                    id: compiled.id.to_string(),
                    identity: identity.clone(),
                    algorithm: compiled.step.algorithm,
                    allowed: o.allowed && call.step.cost <= compiled.step.params.capacity,
                    limit: compiled.step.params.capacity,
                    window_ms: compiled.window_ms,
                    remaining: o.remaining,
                    reset_after_ms: ms(o.reset_after_us),
                    retry_after_ms: o.retry_after_us.map(ms),
                    blocked_until_ms: o.blocked_until_us.map(ms),
                    violations: o.violations,
                    warning: o.warning,
                    delay_ms: ms(o.delay_us),
                    shadow: !compiled.step.enforce,
                }
            })
            .collect();
        let top = Decision::most_restrictive(&limits).cloned();
        let enforced_ok = limits.iter().all(|l| l.allowed || l.shadow);
        Decision {
            allowed: enforced_ok || rule.rule.shadow,
            rule: rule.name.clone(),
            limit: top.as_ref().map_or(0, |l| l.limit),
            remaining: top.as_ref().map_or(0, |l| l.remaining),
            reset_after_ms: top.as_ref().map_or(0, |l| l.reset_after_ms),
            retry_after_ms: if enforced_ok {
                None
            } else {
                top.as_ref().and_then(|l| l.retry_after_ms)
            },
            blocked_until_ms: limits.iter().filter_map(|l| l.blocked_until_ms).max(),
            violations: limits.iter().map(|l| l.violations).max().unwrap_or(0),
            warning: limits.iter().any(|l| l.warning),
            degraded: false,
            shadow: rule.rule.shadow,
            delay_ms: limits.iter().map(|l| l.delay_ms).max().unwrap_or(0),
            reason: None,
            limits,
        }
    }

    /// The keys of the limits of `rule` that these attributes resolve; limits whose attributes
    /// are missing are skipped, and it is an error only if none resolves.
    fn admin_keys(
        &self,
        name: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<Vec<LimitKey>, Error> {
        let rule = self.rule(name)?;
        let mut first_error = None;
        let mut out = Vec::new();
        for key in self.keys(&rule, attrs) {
            match key {
                Ok((key, _)) => out.push(key),
                Err(e @ Error::AttributeTooLong { .. }) => return Err(e),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match (out.is_empty(), first_error) {
            (true, Some(e)) => Err(e),
            _ => Ok(out),
        }
    }

    /// Forgets the counters, blocks and violations of one identity under a rule.
    pub async fn reset(&self, rule: &str, attrs: &(impl Attributes + ?Sized)) -> Result<(), Error> {
        let keys = self.admin_keys(rule, attrs)?;
        self.inner.store.reset(&keys).await?;
        self.inner.local.reset(&keys).await?;
        Ok(())
    }

    /// Blocks one identity under a rule for `duration`. Returns the block's end (epoch ms).
    pub async fn block(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
        duration: Duration,
    ) -> Result<u64, Error> {
        let keys = self.admin_keys(rule, attrs)?;
        let mut until = 0;
        for key in &keys {
            until = until.max(
                self.inner
                    .store
                    .block(key, duration.as_micros() as u64)
                    .await?,
            );
        }
        Ok(ms(until))
    }

    /// Lifts a block or ban (and forgets violations). Returns whether one was in force.
    pub async fn unblock(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<bool, Error> {
        let keys = self.admin_keys(rule, attrs)?;
        let mut was = false;
        for key in &keys {
            was |= self.inner.store.unblock(key).await?;
        }
        Ok(was)
    }

    /// The blocks and bans in force under a rule.
    pub async fn blocks(&self, rule: &str) -> Result<Vec<BlockInfo>, Error> {
        self.rule(rule)?;
        Ok(self
            .inner
            .store
            .blocks(rule)
            .await?
            .into_iter()
            .map(|b| BlockInfo {
                limit: b.key.limit.to_string(),
                identity: b.key.identity,
                blocked_until_ms: ms(b.until_us),
            })
            .collect())
    }
}

fn record_metrics(d: &Decision) {
    let outcome = match (d.allowed, d.shadow && d.limits.iter().any(|l| !l.allowed)) {
        (true, true) => "shadow_denied",
        (true, false) => "allowed",
        (false, _) => "denied",
    };
    metrics::counter!("sluice_decisions_total", "rule" => d.rule.clone(), "outcome" => outcome)
        .increment(1);
}
