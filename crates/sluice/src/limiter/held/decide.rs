//! The decision of a limit with batches: from a held batch when it covers the request, else
//! from the batch already being asked for (waiting for it), else from a new batch asked of the
//! store, else by the exact path (the general decision, which the caller then makes). Also the
//! give-backs: of a batch that ended, of every batch (the node stops), of the batches of rules
//! that changed (a reload), and the background task that gives back batches whose hold time has
//! passed.
//!
//! Invariants: a request that finds nothing held while a batch for its key is on its way waits
//! for that batch rather than calling the store too (a burst on a cold key costs one call); a
//! batch being asked for is always ended (`asking`), so no key is left waiting on a request that
//! was dropped.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::asking::{Asking, wait_for};
use super::{Holdings, Took};
use crate::algorithm::{LimitOutcome, Mode};
use crate::clock::Clock;
use crate::limiter::choice::Picks;
use crate::limiter::compile::{CompiledRule, RuleBook};
use crate::limiter::decide::decision;
use crate::limiter::{Check, Limiter};
use crate::metric_catalog::names;
use crate::model::{Algorithm, Decision, Micros};
use crate::store::{DynStore, GiveBackCall, LimitCall, StoreError, StoreReply};

/// What the batch mode made of a request.
#[derive(Debug)]
pub(in crate::limiter) enum Answer {
    /// Decided (and counted in the rule's metrics); boxed, as the other answers are small.
    Decided(Box<Decision>),
    /// To be decided by the exact path.
    Exact,
    /// The store could not be asked: the exact path's fail policy answers with this error.
    Failed(StoreError),
}

/// Units held, given back and taken for one rule, as this process counts them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldUnits {
    /// The rule.
    pub rule: String,
    /// Units held now (taken, not spent, not given back).
    pub held: u64,
    /// Units given back since the process started.
    pub given_back: u64,
    /// Units taken in batches since the process started.
    pub taken: u64,
}

impl Limiter {
    /// Decides a request of a rule whose limit takes batches (see the module docs).
    pub(in crate::limiter) async fn decide_held(
        &self,
        rule: &CompiledRule,
        held: &Arc<Holdings>,
        picks: Option<&Picks>,
        calls: &[LimitCall],
        check: Check,
    ) -> Answer {
        let [call] = calls else {
            return Answer::Exact;
        };
        if check.mode() != Mode::Apply || check.reserves() {
            return Answer::Exact;
        }
        let cost = call.step.cost;
        let timeout = self.inner.options.timeout;
        let mut deadline = None;
        loop {
            let now = self.inner.clock.now_us();
            let mut step = held.spend(&call.key, cost, now);
            // Made before any await: a request dropped from here on still ends its batch.
            let asking = step.take.map(|k| (k, Asking::new(held, &call.key)));
            self.sweep(held);
            if !step.give_back.is_empty() {
                let calls = std::mem::take(&mut step.give_back);
                give_back(&*self.inner.store, held, calls, timeout).await;
            }
            if let Some(spent) = step.spent {
                let outcome = LimitOutcome {
                    remaining: spent.remaining,
                    reset_after_us: spent.reset_after_us,
                    ..LimitOutcome::unanswered(true)
                };
                // The batch being spent runs low: the next one is asked for now, once per batch.
                if let Some((k, asking)) = asking {
                    let _ = self.take(held, call, k, 0, now, asking).await;
                }
                return Answer::Decided(Box::new(counted(rule, picks, calls, now, outcome)));
            }
            if let Some(landed) = step.wait {
                // A batch for this key is on its way: wait for it instead of calling the store
                // too, then look again; past the store's timeout, the exact path.
                let until = *deadline.get_or_insert_with(|| tokio::time::Instant::now() + timeout);
                if wait_for(landed, until).await {
                    continue;
                }
                return Answer::Exact;
            }
            let Some((k, asking)) = asking else {
                return Answer::Exact;
            };
            return match self.take(held, call, k, cost, now, asking).await {
                Ok(Some(o)) => Answer::Decided(Box::new(counted(rule, picks, calls, o.1, o.0))),
                Ok(None) => Answer::Exact,
                Err(error) => Answer::Failed(error),
            };
        }
    }

    /// Asks the store for a batch of `k` units for `call`'s key, `cost` of them spent at once by
    /// the request asking. Returns that request's outcome and the store's time when granted,
    /// `None` when refused.
    async fn take(
        &self,
        held: &Holdings,
        call: &LimitCall,
        k: u64,
        cost: u64,
        now: Micros,
        asking: Asking,
    ) -> Result<Option<(LimitOutcome, Micros)>, StoreError> {
        // The batch changes nothing when refused: no block, no violation (count_denied is
        // refused with batches). The exact path then decides the request with them.
        let mut take = call.clone();
        take.step.cost = k;
        take.step.block_us = None;
        take.step.penalty = None;
        let reply = match self
            .call_store(std::slice::from_ref(&take), Mode::Apply)
            .await
        {
            Ok(reply) => reply,
            Err(error) => {
                asking.answered();
                held.refused(&call.key, None);
                return Err(error);
            }
        };
        asking.answered();
        let Some(o) = reply.outcomes.first().filter(|o| o.allowed) else {
            held.refused(&call.key, reply.outcomes.first().map(|o| o.remaining));
            return Ok(None);
        };
        // Counted from when the batch was asked for: the store counted it later than that, so a
        // unit is never spent more than `hold` after the store counted it.
        let mut until_us = now.saturating_add(held.hold_us());
        if held.algorithm == Algorithm::FixedWindow {
            until_us = until_us.min(now.saturating_add(o.reset_after_us));
        }
        held.taken(
            &call.key,
            Took {
                k,
                cost,
                at_us: reply.now_us,
                until_us,
                left: o.remaining,
                reset_after_us: o.reset_after_us,
            },
        );
        let outcome = LimitOutcome {
            remaining: o.remaining.saturating_add(k - cost),
            ..*o
        };
        Ok(Some((outcome, reply.now_us)))
    }

    /// Starts the task that gives back batches whose hold time has passed, once per rule (on
    /// the current Tokio runtime; without one, batches end when their identity is next asked
    /// about or the node stops).
    fn sweep(&self, held: &Arc<Holdings>) {
        if held.sweeping.swap(true, Ordering::Relaxed) {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            held.sweeping.store(false, Ordering::Relaxed);
            return;
        };
        let weak = Arc::downgrade(held);
        let store = Arc::clone(&self.inner.store);
        let clock: Arc<dyn Clock> = Arc::clone(&self.inner.clock);
        let timeout = self.inner.options.timeout;
        let period = Duration::from(held.hold_us() / 2).max(Duration::from_millis(5));
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                // The rule's batches are gone (a reload, the limiter dropped): nothing to watch.
                let Some(held) = weak.upgrade() else {
                    return;
                };
                let calls = held.end_batches(clock.now_us(), false);
                if !calls.is_empty() {
                    give_back(&*store, &held, calls, timeout).await;
                }
            }
        });
    }

    /// Gives back every unit this process holds in batches, for every rule: call it before the
    /// process stops (the service does on shutdown). Returns the units given back. Units the
    /// store could not take back (it is down) stay counted until they drain or their window
    /// ends: under-admission, never over.
    pub async fn give_back_batches(&self) -> u64 {
        let book = self.inner.rules.load_full();
        let now = self.inner.clock.now_us();
        let mut given = 0;
        for held in book.values().filter_map(|r| r.held.as_ref()) {
            let calls = held.end_batches(now, true);
            given += give_back(&*self.inner.store, held, calls, self.inner.options.timeout).await;
        }
        given
    }

    /// Units held, given back and taken, per rule with batches.
    pub fn held_units(&self) -> Vec<HeldUnits> {
        let book = self.inner.rules.load();
        book.iter()
            .filter_map(|(name, rule)| {
                let (held, given_back, taken) = rule.held.as_ref()?.totals();
                Some(HeldUnits {
                    rule: name.clone(),
                    held,
                    given_back,
                    taken,
                })
            })
            .collect()
    }

    /// After a reload: gives back, in the background, the batches of `old` rules that `new` did
    /// not carry over (the rule changed or went away).
    pub(in crate::limiter) fn give_back_dropped(&self, old: &RuleBook, new: &RuleBook) {
        let dropped: Vec<Arc<Holdings>> = old
            .iter()
            .filter_map(|(name, rule)| {
                let held = rule.held.as_ref()?;
                let kept = new
                    .get(name)
                    .and_then(|r| r.held.as_ref())
                    .is_some_and(|h| Arc::ptr_eq(h, held));
                (!kept).then(|| Arc::clone(held))
            })
            .collect();
        if dropped.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!(
                "no runtime to give back the batches of changed rules; they stay counted until they drain"
            );
            return;
        };
        let store = Arc::clone(&self.inner.store);
        let now = self.inner.clock.now_us();
        let timeout = self.inner.options.timeout;
        runtime.spawn(async move {
            for held in dropped {
                let calls = held.end_batches(now, true);
                give_back(&*store, &held, calls, timeout).await;
            }
        });
    }
}

/// Carries the batches of rules whose definition did not change into the new book, so that a
/// reload that leaves a rule alone does not end its batches.
pub(in crate::limiter) fn carry_over(old: &RuleBook, new: &mut RuleBook) {
    for (name, rule) in new.iter_mut() {
        let Some(before) = old.get(name) else {
            continue;
        };
        if before.definition != rule.definition {
            continue;
        }
        if let (Some(held), Some(rule)) = (&before.held, Arc::get_mut(rule)) {
            rule.held = Some(Arc::clone(held));
        }
    }
}

/// Records what an exact decision said was left, so the next batch is sized from it.
pub(in crate::limiter) fn observe(
    held: &Holdings,
    calls: &[LimitCall],
    reply: Option<&StoreReply>,
) {
    if let ([call], Some(reply)) = (calls, reply)
        && let Some(o) = reply.outcomes.first()
    {
        held.observe(&call.key, o.remaining);
    }
}

/// The decision of a request admitted from a batch, counted in the rule's metrics.
fn counted(
    rule: &CompiledRule,
    picks: Option<&Picks>,
    calls: &[LimitCall],
    now_us: Micros,
    o: LimitOutcome,
) -> Decision {
    let reply = StoreReply {
        now_us,
        outcomes: vec![o],
    };
    let d = decision(rule, picks, calls, Some(&reply), false);
    rule.meters.decided(&d);
    d
}

/// Gives `calls` back to `store`; returns the units it took back.
async fn give_back(
    store: &dyn DynStore,
    held: &Holdings,
    calls: Vec<GiveBackCall>,
    timeout: Duration,
) -> u64 {
    if calls.is_empty() {
        return 0;
    }
    let units: u64 = calls.iter().map(|c| c.units).sum();
    let result = if store.in_process() {
        store.give_back(&calls).await
    } else {
        tokio::time::timeout(timeout, store.give_back(&calls))
            .await
            .unwrap_or_else(|_| {
                Err(StoreError::transient(
                    store.name(),
                    format!("no answer within {timeout:?}"),
                ))
            })
    };
    match result {
        Ok(()) => {
            held.gave_back(units);
            units
        }
        Err(error) => {
            metrics::counter!(names::BATCH_GIVE_BACK_FAILURES_TOTAL).increment(1);
            tracing::warn!(%error, units, "could not give back a batch's units; they stay counted until they drain or their window ends");
            0
        }
    }
}
