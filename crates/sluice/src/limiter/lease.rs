//! Leases of concurrency limits as their holders see them: the lease id a decision carries, and
//! [`Limiter::release`] / [`Limiter::renew`].
//!
//! A check admitted by a rule with concurrency limits takes one lease on each of them, all under
//! one token, and its decision carries the lease id, which names everything needed to find the
//! lease again with no other state:
//!
//! `<token>:<units>:<rule>:<limit id>:<identity>[:<limit id>:<identity>…]`
//!
//! the token (22 URL-safe base64 characters, 128 random bits), the units held (the check's
//! cost), the rule, then each concurrency limit that took the lease and the identity it counted.
//! No part can contain `:` (rule names, limit ids and escaped identities never do), so an id has
//! one reading. Holding an id is what allows releasing or renewing the lease; guessing one is
//! guessing 128 random bits. Ids are at most [`MAX_LEASE_LEN`] bytes: a rule whose ids could be
//! longer is refused when it is compiled. A text that is not such an id, or names a limit the
//! rule does not have, is an [`Error::InvalidLease`] and the store is not asked.
//!
//! A lease lives where its check was decided: in the store, or, when the store was down and the
//! rule's fail policy is `local`, in this node's local store. Both operations look in the local
//! store first, then ask the store under the limiter's timeout. A store error is returned as
//! [`Error::Store`]: the lease then ends by itself at its expiry.

use std::future::Future;

use super::Limiter;
use super::compile::{CompiledLimit, CompiledRule};
use super::keys::MAX_PLAIN_LEN;
use crate::algorithm::concurrency::LeaseToken;
use crate::error::Error;
use crate::model::{MAX_COUNT, Micros, ModelError};
use crate::store::{LeaseCall, LimitCall, LimitKey, Store, StoreError};

/// The longest lease id.
pub const MAX_LEASE_LEN: usize = 1024;

/// A fresh token: 128 bits from the thread's cryptographically secure generator.
pub(crate) fn new_token() -> LeaseToken {
    LeaseToken(rand::random())
}

/// The lease id of `calls` (the concurrency limits that took the lease), held under `token`.
pub(crate) fn lease_id<'a>(
    rule: &str,
    token: LeaseToken,
    units: u64,
    calls: impl Iterator<Item = &'a LimitCall>,
) -> String {
    let mut id = format!("{token}:{units}:{rule}");
    for call in calls {
        id.push(':');
        id.push_str(&call.key.limit_id);
        id.push(':');
        id.push_str(&call.key.identity);
    }
    id
}

/// Refuses a rule whose lease ids could be longer than [`MAX_LEASE_LEN`]: the longest identity a
/// limit can have is its longest attribute names with values of [`MAX_PLAIN_LEN`] bytes.
pub(crate) fn check_length(rule: &str, limits: &[CompiledLimit]) -> Result<(), ModelError> {
    let mut longest = LeaseToken::TEXT_LEN + 1 + MAX_COUNT.to_string().len() + 1 + rule.len();
    for limit in limits.iter().filter(|l| l.holds_leases()) {
        let identity = if limit.by.is_empty() {
            1
        } else {
            limit
                .by
                .iter()
                .map(|by| by.iter().map(|a| a.len()).max().unwrap_or(0) + 2)
                .sum::<usize>()
                + limit.by.len() * MAX_PLAIN_LEN
        };
        longest += 2 + limit.id.len() + identity;
    }
    if longest > MAX_LEASE_LEN {
        return Err(ModelError::new(
            "limits",
            format!(
                "its lease ids could reach {longest} bytes, above {MAX_LEASE_LEN}: use fewer \
                 concurrency limits, or shorter names"
            ),
        ));
    }
    Ok(())
}

/// A lease id taken apart, every part checked. Reservation ids have the same shape (see
/// [`super::reservation`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) struct LeaseId<'a> {
    pub(super) token: LeaseToken,
    pub(super) units: u64,
    pub(super) rule: &'a str,
    pub(super) limits: Vec<(&'a str, &'a str)>,
}

fn invalid(reason: String) -> Error {
    Error::InvalidLease { reason }
}

fn parse(text: &str) -> Result<LeaseId<'_>, Error> {
    parse_id(text, "lease", invalid)
}

/// Parses an id of `kind` (`lease` or `reservation`), refused as `invalid` says.
pub(super) fn parse_id<'a>(
    text: &'a str,
    kind: &str,
    invalid: fn(String) -> Error,
) -> Result<LeaseId<'a>, Error> {
    if text.len() > MAX_LEASE_LEN {
        return Err(invalid(format!(
            "{} bytes long; {kind} ids are at most {MAX_LEASE_LEN}",
            text.len()
        )));
    }
    let mut parts = text.split(':');
    let shape = || {
        invalid(format!(
            "not a {kind} id: expected `<token>:<units>:<rule>:<limit>:<identity>…`"
        ))
    };
    let token = parts
        .next()
        .and_then(|t| t.parse::<LeaseToken>().ok())
        .ok_or_else(shape)?;
    let units = parts
        .next()
        .filter(|u| !u.is_empty() && u.len() <= 8 && u.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|u| u.parse::<u64>().ok())
        .filter(|&u| (1..=MAX_COUNT).contains(&u))
        .ok_or_else(shape)?;
    let rule = parts.next().ok_or_else(shape)?;
    let mut limits = Vec::new();
    while let Some(limit) = parts.next() {
        let identity = parts.next().ok_or_else(shape)?;
        limits.push((limit, identity));
    }
    if limits.is_empty() {
        return Err(shape());
    }
    Ok(LeaseId {
        token,
        units,
        rule,
        limits,
    })
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
            let plain = !value.is_empty()
                && value.len() <= MAX_PLAIN_LEN
                && value.bytes().all(|b| {
                    b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'+' | b'-')
                });
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
            "sluice_lease_releases_total",
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
    use super::*;

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
