//! Reservations as their holders see them: a check that reserves an estimated cost, the
//! reservation id its decision carries, and [`Limiter::settle`], which charges the actual cost
//! once it is known (see [`crate::algorithm::settle`] for the arithmetic and the algorithms).
//!
//! The id has the shape of a lease id (see [`super::lease`]):
//! `<token>:<estimate>:<rule>:<limit id>:<identity>[:<limit id>:<identity>…]`, naming every limit
//! that consumed the estimate. The store remembers each reservation under its token with the
//! estimate and the decision time, so an id cannot make a settlement give back more than the
//! check took, and a settlement forgets it in the same atomic step: a reservation settles once.
//!
//! A reservation can be settled while its limits still feel the estimate: for each limit, the
//! time it takes to refill from empty (`capacity × window / count`), at least its window; the
//! decision's `reservation_until_ms` is the earliest of these. A reservation never settled keeps
//! its estimate. Like a lease, a reservation lives where its check was decided: in the store, or,
//! degraded to `local`, in this node's local store, which settling looks at first.

use super::Limiter;
use super::compile::CompiledRule;
use super::compiled_limit::CompiledLimit;
use super::lease::named_limits;
use super::lease_id::{self, MAX_LEASE_LEN, parse_id};
use crate::algorithm::LimitStep;
use crate::error::Error;
use crate::metric_catalog::names;
use crate::model::limit::MAX_EXACT;
use crate::model::{Decision, Micros};
use crate::store::{DynStore, LimitCall, ReserveCall, SettleCall, Store, StoreReply};

fn invalid(reason: String) -> Error {
    Error::InvalidReservation { reason }
}

/// Refuses a reservation on a rule with a limit that cannot settle.
pub(super) fn check_rule(rule: &CompiledRule) -> Result<(), Error> {
    match rule.limits.iter().find(|l| !l.meter().0.settles()) {
        Some(limit) => Err(invalid(format!(
            "rule `{}`: limit `{}` is {}; reservations settle on token_bucket and gcra limits only",
            rule.name,
            limit.id,
            limit.meter().0
        ))),
        None => Ok(()),
    }
}

/// How long a reservation on a limit can be settled: the time the limit takes to refill from
/// empty, at least its window.
fn settle_within_us(step: &LimitStep) -> Micros {
    let p = &step.params;
    p.time_to_drain(p.capacity as f64).max(p.window_us)
}

impl Limiter {
    /// Remembers the reservation of an admitted check on every limit that consumed its units,
    /// in `store`, and gives the decision its id. A store that cannot remember it leaves the
    /// decision without one: the estimate then stands.
    pub(super) async fn reserve_for(
        &self,
        d: &mut Decision,
        calls: &[LimitCall],
        reply: &StoreReply,
        store: &dyn DynStore,
    ) {
        let consumed: Vec<&LimitCall> = calls
            .iter()
            .zip(&reply.outcomes)
            .filter(|(c, o)| {
                o.allowed && (c.step.settable || c.step.cost <= c.step.params.capacity)
            })
            .map(|(c, _)| c)
            .collect();
        let Some(first) = consumed.first() else {
            return;
        };
        let token = lease_id::new_token();
        let id = lease_id::lease_id(&d.rule, token, first.step.cost, consumed.iter().copied());
        if id.len() > MAX_LEASE_LEN {
            tracing::warn!(rule = %d.rule, "a reservation id would exceed {MAX_LEASE_LEN} bytes; none taken");
            return;
        }
        let reservations: Vec<ReserveCall> = consumed
            .iter()
            .map(|c| ReserveCall {
                key: c.key.clone(),
                token,
                estimate: c.step.cost,
                at_us: reply.now_us,
                for_us: settle_within_us(&c.step),
            })
            .collect();
        let remembered = if store.in_process() {
            store.reserve(&reservations).await
        } else {
            self.bounded(store.reserve(&reservations)).await
        };
        if let Err(error) = remembered {
            tracing::warn!(rule = %d.rule, %error, "the reservation could not be remembered; its estimate stands");
            return;
        }
        d.reservation = Some(id);
        d.reservation_until_ms = reservations
            .iter()
            .map(|r| reply.now_us.saturating_add(r.for_us).as_millis())
            .min();
    }

    /// Settles a reservation (the `reservation` of a decision checked with
    /// [`Check::reserve`](super::Check::reserve)) at the request's actual cost: the difference
    /// from the estimate is given back or charged on every limit that consumed it, as if the
    /// request had cost `actual` from the start. Returns whether it was settled: a reservation
    /// settled already, or out of time, changes nothing and returns `false` (its estimate stands).
    ///
    /// `Err` is a text that is not a reservation id of the rules in force
    /// ([`Error::InvalidReservation`], [`Error::UnknownRule`]), an absurd cost
    /// ([`Error::InvalidCost`]), or the store failing ([`Error::Store`]).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use sluice::{Check, Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
    ///
    /// let limiter = Limiter::builder(MemoryStore::new())
    ///     .rule("llm", Rule::new(vec![Limit::new(&["user"], "1000/1h".parse()?, Algorithm::TokenBucket)]))
    ///     .build()?;
    /// let user = [("user", "u1")];
    /// let d = limiter.check_with("llm", &user, Check::cost(500).reserve()).await?;
    /// assert_eq!(d.remaining, 500);
    /// // The call used 120 tokens: 380 go back.
    /// assert!(limiter.settle(d.reservation.as_deref().unwrap(), 120).await?);
    /// assert_eq!(limiter.check_with("llm", &user, Check::cost(1).peek()).await?.remaining, 880);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn settle(&self, reservation: &str, actual: u64) -> Result<bool, Error> {
        let id = parse_id(reservation, "reservation", invalid)?;
        let rule = self.rule(id.rule)?;
        let settles = |l: &CompiledLimit| l.meter().0.settles();
        let calls = named_limits(&rule, &id, settles, "token_bucket or gcra", invalid)?
            .into_iter()
            .map(|(limit, key)| {
                let (algorithm, params) = limit.meter();
                // Lua numbers are exact below 2^53: the charge in µs of a GCRA must stay there.
                let max = MAX_EXACT / params.emission_interval_us().get().max(1);
                if actual >= max {
                    return Err(Error::InvalidCost { cost: actual, max });
                }
                Ok(SettleCall {
                    key,
                    token: id.token,
                    algorithm,
                    params,
                    actual,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let local = Store::settle(&self.inner.local, &calls).await?;
        let settled = if local.contains(&true) {
            true
        } else {
            self.bounded(self.inner.store.settle(&calls))
                .await?
                .contains(&true)
        };
        metrics::counter!(
            names::SETTLEMENTS_TOTAL,
            "rule" => rule.name.to_string(),
            "settled" => if settled { "true" } else { "false" }
        )
        .increment(1);
        Ok(settled)
    }
}
