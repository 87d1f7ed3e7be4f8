//! Leases of concurrency limits as their holders see them: [`Limiter::release`] and
//! [`Limiter::renew`] of the lease id a decision carries (its shape: `lease_id`).
//!
//! Holding an id is what allows releasing or renewing the lease; guessing one is guessing 128
//! random bits. A text that is not such an id, or names a limit the rule does not have, is an
//! [`Error::InvalidLease`] and the store is not asked.
//!
//! A lease lives where its check was decided: in the store, or, when the store was down and the
//! rule's fail policy is `local`, in this node's local store. Both operations look in the local
//! store first, then ask the store under the limiter's timeout. A store error is returned as
//! [`Error::Store`]: the lease then ends by itself at its expiry.

use std::future::Future;

use super::Limiter;
use super::compile::CompiledRule;
use super::compiled_limit::CompiledLimit;
use super::identity::is_plain;
use super::lease_id::{LeaseId, parse_id};
use crate::error::Error;
use crate::metric_catalog::names;
use crate::model::Micros;
use crate::store::{LeaseCall, LimitKey, Store, StoreError};

fn invalid(reason: String) -> Error {
    Error::InvalidLease { reason }
}

fn parse(text: &str) -> Result<LeaseId<'_>, Error> {
    parse_id(text, "lease", invalid)
}

/// Whether `identity` is one that `limit` builds: its attribute names, in order, and escaped
/// values (plain, or `~` and a hex SHA-1).
fn identity_of(limit: &CompiledLimit, identity: &str) -> bool {
    if limit.by.is_empty() {
        return identity == "*";
    }
    let parts: Vec<&str> = identity.split(',').collect();
    parts.len() == limit.by.len()
        && parts.iter().zip(&limit.by).all(|(part, by)| {
            let Some((name, value)) = part.split_once('=') else {
                return false;
            };
            let plain = !value.is_empty() && is_plain(value);
            let hashed = value.len() == 41
                && value.starts_with('~')
                && value[1..]
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
            by.iter().any(|a| a == name) && (plain || hashed)
        })
}

/// The limits an id names, each with the key of the identity it counted: every limit must be one
/// of `rule`'s that `accepts` (a `kind` limit, for the error), and every identity one that limit
/// builds.
pub(super) fn named_limits<'r>(
    rule: &'r CompiledRule,
    id: &LeaseId<'_>,
    accepts: impl Fn(&CompiledLimit) -> bool,
    kind: &str,
    invalid: fn(String) -> Error,
) -> Result<Vec<(&'r CompiledLimit, LimitKey)>, Error> {
    id.limits
        .iter()
        .map(|&(limit_id, identity)| {
            let limit = rule
                .limits
                .iter()
                .find(|l| accepts(l) && &*l.id == limit_id)
                .ok_or_else(|| {
                    invalid(format!(
                        "rule `{}` has no {kind} limit `{limit_id}`",
                        rule.name
                    ))
                })?;
            if !identity_of(limit, identity) {
                return Err(invalid(format!(
                    "`{identity}` is not an identity of limit `{limit_id}`"
                )));
            }
            let key = LimitKey {
                rule: rule.name.clone(),
                limit_id: limit.id.clone(),
                identity: identity.to_string(),
            };
            Ok((limit, key))
        })
        .collect()
}

impl Limiter {
    /// Ends a lease (the `lease` of an admitted decision) before it expires, freeing its units
    /// on every concurrency limit that took it. Returns whether it was still held: releasing a
    /// lease twice, or one that expired, changes nothing and returns `false`.
    ///
    /// `Err` is a text that is not a lease id of the rules in force ([`Error::InvalidLease`],
    /// [`Error::UnknownRule`]), or the store failing ([`Error::Store`]).
    ///
    /// ```
    /// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
    /// use std::time::Duration;
    /// use sluice::{Limiter, MemoryStore, Rule, model::Limit};
    ///
    /// let limiter = Limiter::builder(MemoryStore::new())
    ///     .rule("export", Rule::new(vec![Limit::concurrency(&["tenant"], 1, Duration::from_secs(60))]))
    ///     .build()?;
    /// let tenant = [("tenant", "t1")];
    /// let first = limiter.check("export", &tenant).await?;
    /// assert!(!limiter.check("export", &tenant).await?.allowed, "one export at a time");
    /// assert!(limiter.release(first.lease.as_deref().unwrap()).await?);
    /// assert!(limiter.check("export", &tenant).await?.allowed);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// # }).unwrap();
    /// ```
    pub async fn release(&self, lease: &str) -> Result<bool, Error> {
        let (rule, calls) = self.lease_calls(lease)?;
        // A lease lives where its check was decided: the store, or (degraded to `local`) the
        // local store, never both, since every check draws its own token.
        let local = Store::release(&self.inner.local, &calls).await?;
        let held = if local.contains(&true) {
            true
        } else {
            let held = self.bounded(self.inner.store.release(&calls)).await?;
            held.contains(&true)
        };
        metrics::counter!(
            names::LEASE_RELEASES_TOTAL,
            "rule" => rule.name.to_string(),
            "held" => if held { "true" } else { "false" }
        )
        .increment(1);
        Ok(held)
    }

    /// Extends a lease by its limits' `lease` duration from now. Returns its new end (epoch ms,
    /// the earliest over its limits), or `None` when it is no longer held: it expired or was
    /// released, on every limit or on one of them (the others are released then, since the lease
    /// is gone as a whole). A lease that lapsed is never taken again: its units may be held by
    /// someone else by now, so the work should stop or check again.
    pub async fn renew(&self, lease: &str) -> Result<Option<u64>, Error> {
        let (_, calls) = self.lease_calls(lease)?;
        let local = Store::renew(&self.inner.local, &calls).await?;
        let ends = if local.iter().any(Option::is_some) {
            local
        } else {
            self.bounded(self.inner.store.renew(&calls)).await?
        };
        match ends.into_iter().collect::<Option<Vec<Micros>>>() {
            Some(ends) => Ok(ends.into_iter().min().map(Micros::as_millis)),
            None => {
                self.release(lease).await?;
                Ok(None)
            }
        }
    }

    /// The rule a lease id names, and its leases as store calls.
    fn lease_calls(
        &self,
        text: &str,
    ) -> Result<(std::sync::Arc<CompiledRule>, Vec<LeaseCall>), Error> {
        let id = parse(text)?;
        let rule = self.rule(id.rule)?;
        let calls = named_limits(&rule, &id, |l| l.holds_leases(), "concurrency", invalid)?
            .into_iter()
            .map(|(limit, key)| {
                if id.units > limit.capacity() && !limit.settable {
                    return Err(invalid(format!(
                        "{} units is more than limit `{}` ever holds",
                        id.units, limit.id
                    )));
                }
                Ok(LeaseCall {
                    key,
                    token: id.token,
                    units: id.units,
                    lease_us: limit.lease_us(),
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        Ok((rule, calls))
    }

    /// A store operation under the limiter's timeout (stores in this process answer at once).
    pub(super) async fn bounded<T>(
        &self,
        operation: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        let store = &self.inner.store;
        if store.in_process() {
            return operation.await;
        }
        let timeout = self.inner.options.timeout;
        tokio::time::timeout(timeout, operation)
            .await
            .unwrap_or_else(|_| {
                Err(StoreError::transient(
                    store.name(),
                    format!("no answer within {timeout:?}"),
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::super::lease_id::MAX_LEASE_LEN;
    use super::*;
    use crate::algorithm::LeaseToken;

    #[test]
    fn ids_parse_back_and_anything_else_is_refused() {
        let token = LeaseToken([7; 16]);
        let text = format!("{token}:2:export:jobs:tenant=t1:global:*");
        let id = parse(&text).unwrap();
        assert_eq!(
            id,
            LeaseId {
                token,
                units: 2,
                rule: "export",
                limits: vec![("jobs", "tenant=t1"), ("global", "*")],
            }
        );
        for bad in [
            String::new(),
            "x".to_string(),
            format!("{token}"),
            format!("{token}:1:export"),
            format!("{token}:1:export:jobs"),
            format!("{token}:0:export:jobs:tenant=t1"),
            format!("{token}:-1:export:jobs:tenant=t1"),
            format!("{token}:99999999:export:jobs:tenant=t1"),
            format!("{token}x:1:export:jobs:tenant=t1"),
            format!("{token}:1:export:jobs:{}", "a".repeat(MAX_LEASE_LEN)),
        ] {
            assert!(
                matches!(parse(&bad), Err(Error::InvalidLease { .. })),
                "{bad}"
            );
        }
    }
}
