//! Reading what an identity has used of a rule's limits ([`Usage`]), consuming nothing: one
//! store call that looks (a peek of one unit), under the same deadline, bound and breaker as a
//! check, but never answered by a fail policy or the denial cache: a reading the store cannot
//! give is an error, not a guess.

use crate::algorithm::{Mode, fixed_window};
use crate::error::Error;
use crate::model::{Algorithm, LimitUsage, MAX_COUNT, Usage};

use super::{Attributes, Check, Limiter};

impl Limiter {
    /// What the identity these attributes name has used of each of `rule`'s limits, in the
    /// store's time; nothing is consumed. `Err` is bad input (as for a check) or a store that
    /// could not be read.
    ///
    /// ```
    /// use sluice::{Limiter, MemoryStore, Rule, model::{Limit, Period, PeriodUnit}};
    ///
    /// let plan = Limit::quota(&["tenant"], 10_000, Period::new(PeriodUnit::Month));
    /// let limiter = Limiter::builder(MemoryStore::new()).rule("api", Rule::new(vec![plan])).build()?;
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// limiter.check("api", &[("tenant", "42")]).await?;
    /// let usage = limiter.usage("api", &[("tenant", "42")]).await?;
    /// assert_eq!((usage.limits[0].used, usage.limits[0].remaining), (1, 9_999));
    /// # Ok::<(), sluice::Error>(()) })?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub async fn usage(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<Usage, Error> {
        let mut calls = self.calls(rule, attrs, Check::ONE.peek())?;
        let own_limits: Vec<u64> = calls.iter().map(|c| c.step.params.capacity).collect();
        // A window's count is read as what a limit of the most units would leave: a quota that
        // admits past itself has counted past its own number, and `used` tells by how much.
        for call in &mut calls {
            if call.step.algorithm == Algorithm::FixedWindow {
                call.step.params.count = MAX_COUNT;
                call.step.params.capacity = MAX_COUNT;
            }
        }
        let rule = self.rule(rule)?.name.clone();
        if calls.is_empty() {
            let at_ms = self.inner.clock.now_us().as_millis();
            return Ok(Usage {
                rule,
                at_ms,
                limits: Vec::new(),
            });
        }
        let reply = self.call_store(&calls, Mode::Peek).await?;
        let limits = calls
            .iter()
            .zip(&reply.outcomes)
            .zip(&own_limits)
            .map(|((call, outcome), &own)| {
                let windowed = call.step.algorithm == Algorithm::FixedWindow;
                let (limit, used) = match outcome.runtime.and_then(|n| n.capacity) {
                    Some(capacity) => (capacity, capacity.saturating_sub(outcome.remaining)),
                    None if windowed => (own, MAX_COUNT.saturating_sub(outcome.remaining)),
                    None => (own, own.saturating_sub(outcome.remaining)),
                };
                // The period is the identity's: from its own billing day, when it has one.
                let step = outcome.runtime.map_or(call.step, |n| n.apply(&call.step));
                let window = windowed.then(|| fixed_window::window_at(reply.now_us, &step.params));
                LimitUsage {
                    id: call.key.limit_id.clone(),
                    limit,
                    used,
                    remaining: limit.saturating_sub(used),
                    period_start_ms: window.map(|(start, _)| start.as_millis()),
                    period_end_ms: window.map(|(_, end)| end.as_millis()),
                    over: used >= limit || outcome.blocked_until_us.is_some(),
                }
            })
            .collect();
        Ok(Usage {
            rule,
            at_ms: reply.now_us.as_millis(),
            limits,
        })
    }
}
