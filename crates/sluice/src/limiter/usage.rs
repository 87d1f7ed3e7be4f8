//! Reading what an identity has used of a rule's limits ([`Usage`]), consuming nothing: one
//! store call that looks (a peek of one unit), under the same deadline, bound and breaker as a
//! check, but never answered by a fail policy or the denial cache: a reading the store cannot
//! give is an error, not a guess.

use crate::algorithm::{Mode, fixed_window};
use crate::error::Error;
use crate::model::{Algorithm, LimitUsage, Usage};

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
        let calls = self.calls(rule, attrs, Check::ONE.peek())?;
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
            .map(|(call, outcome)| {
                let p = &call.step.params;
                let limit = outcome.runtime.map_or(p.capacity, |r| r.capacity);
                let remaining = outcome.remaining.min(limit);
                let window = (call.step.algorithm == Algorithm::FixedWindow)
                    .then(|| fixed_window::window_at(reply.now_us, p));
                LimitUsage {
                    id: call.key.limit_id.clone(),
                    limit,
                    used: limit - remaining,
                    remaining,
                    period_start_ms: window.map(|(start, _)| start.as_millis()),
                    period_end_ms: window.map(|(_, end)| end.as_millis()),
                    over: !outcome.allowed,
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
