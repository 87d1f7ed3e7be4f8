//! Run-time limits: an identity's own numbers on a settable limit of a rule, set, read, listed
//! and removed while the limiter runs (the admin API's `/v1/limits`).
//!
//! They live in the store, so every node sharing it applies a change from its next decision on,
//! and the store reads them inside the decision's own atomic step (see
//! [`crate::algorithm::runtime`]). A change is checked as the rule file's numbers are
//! ([`RuntimeLimit::numbers`]); a bad one is an error and changes nothing. It is also made on
//! the local store the `local` fail policy decides on, so this node keeps applying it while the
//! store is down. Denials of settable limits are never cached (see `compile`), so no node keeps
//! denying on a cached denial after a limit is raised.

use serde::Serialize;

use super::compile::CompiledRule;
use super::compiled_limit::CompiledLimit;
use super::{Attributes, Limiter, keys};
use crate::error::Error;
use crate::model::{Limit, Period, RuntimeLimit};
use crate::store::{LimitKey, Store};

/// One identity's run-time limit, as the admin API shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct RuntimeLimitInfo {
    /// The limit's id (`"limit"` in the admin API's JSON).
    #[serde(rename = "limit")]
    pub limit_id: String,
    /// The (escaped) identity.
    pub identity: String,
    /// Its numbers, as they would be set.
    #[serde(flatten)]
    pub set: RuntimeLimit,
}

impl Limiter {
    /// The settable limit `limit` (an id) of `rule`, or its only settable limit when `None`,
    /// with its definition.
    fn settable<'r>(
        &self,
        rule: &'r CompiledRule,
        limit: Option<&str>,
    ) -> Result<(&'r CompiledLimit, &'r Limit), Error> {
        let invalid = |reason: String| Error::InvalidRuntimeLimit {
            rule: rule.name.to_string(),
            reason,
        };
        let settable: Vec<usize> = (0..rule.limits.len())
            .filter(|&i| rule.limits[i].settable)
            .collect();
        let ids = || {
            settable
                .iter()
                .map(|&i| format!("`{}`", rule.limits[i].id))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let index = match limit {
            Some(id) => {
                let i = rule
                    .limits
                    .iter()
                    .position(|l| &*l.id == id)
                    .ok_or_else(|| invalid(format!("no limit `{id}`")))?;
                if !rule.limits[i].settable {
                    return Err(invalid(format!(
                        "limit `{id}` takes no run-time limits: write `settable: true` on it in \
                         the rule file"
                    )));
                }
                i
            }
            None => match settable.as_slice() {
                [i] => *i,
                [] => {
                    return Err(invalid(
                        "no limit takes run-time limits: write `settable: true` on one in the \
                         rule file"
                            .to_string(),
                    ));
                }
                _ => {
                    return Err(invalid(format!(
                        "several limits take run-time limits ({}): say which with `limit`",
                        ids()
                    )));
                }
            },
        };
        Ok((&rule.limits[index], &rule.definition.limits[index]))
    }

    /// The key of `attrs` on a settable limit of `rule`.
    fn runtime_key(
        &self,
        rule: &CompiledRule,
        limit: &CompiledLimit,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<LimitKey, Error> {
        keys::limit_key(rule, limit, attrs, self.inner.options.max_attribute_len)
    }

    /// Sets the run-time limit of one identity on a settable limit of `rule` (`limit`: its id,
    /// or `None` for the rule's only settable one). From the next decision on, every node
    /// decides that identity with these numbers; its counter carries over, and a new billing day
    /// of a monthly quota keeps what the identity used in its current period.
    ///
    /// `Err` when the limit is unknown or not settable, the numbers are refused as a rule file
    /// would refuse them, an attribute is missing, or the limit already holds
    /// [`Options::max_runtime_limits`](crate::Options::max_runtime_limits) other identities.
    pub async fn set_runtime_limit(
        &self,
        rule: &str,
        limit: Option<&str>,
        attrs: &(impl Attributes + ?Sized),
        set: &RuntimeLimit,
    ) -> Result<RuntimeLimitInfo, Error> {
        let compiled = self.rule(rule)?;
        let (target, definition) = self.settable(&compiled, limit)?;
        let numbers = set
            .numbers(definition)
            .map_err(|e| Error::InvalidRuntimeLimit {
                rule: rule.to_string(),
                reason: e.to_string(),
            })?;
        let key = self.runtime_key(&compiled, target, attrs)?;
        let max = self.inner.options.max_runtime_limits;
        let period = definition.period.as_ref().map(Period::interned);
        if !self
            .inner
            .store
            .set_runtime(&key, numbers, max, period)
            .await?
        {
            return Err(Error::RuntimeLimitsFull {
                rule: rule.to_string(),
                limit_id: target.id.to_string(),
                max,
            });
        }
        // The local store mirrors the change; it has room whenever the store had.
        Store::set_runtime(&self.inner.local, &key, numbers, usize::MAX, period).await?;
        Ok(RuntimeLimitInfo {
            limit_id: target.id.to_string(),
            identity: key.identity,
            set: RuntimeLimit::of(definition, numbers),
        })
    }

    /// The run-time limit of one identity on a settable limit of `rule`, if one is set.
    pub async fn runtime_limit(
        &self,
        rule: &str,
        limit: Option<&str>,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<Option<RuntimeLimitInfo>, Error> {
        let compiled = self.rule(rule)?;
        let (target, definition) = self.settable(&compiled, limit)?;
        let key = self.runtime_key(&compiled, target, attrs)?;
        Ok(self
            .inner
            .store
            .runtime(&key)
            .await?
            .map(|numbers| RuntimeLimitInfo {
                limit_id: target.id.to_string(),
                identity: key.identity,
                set: RuntimeLimit::of(definition, numbers),
            }))
    }

    /// Every run-time limit set on `rule`: on its limit `limit`, or on all its settable limits
    /// when `None`; ordered by limit, then identity.
    pub async fn runtime_limits(
        &self,
        rule: &str,
        limit: Option<&str>,
    ) -> Result<Vec<RuntimeLimitInfo>, Error> {
        let compiled = self.rule(rule)?;
        let targets: Vec<(&CompiledLimit, &Limit)> = match limit {
            Some(_) => vec![self.settable(&compiled, limit)?],
            None => compiled
                .limits
                .iter()
                .zip(&compiled.definition.limits)
                .filter(|(l, _)| l.settable)
                .collect(),
        };
        let mut out = Vec::new();
        for (target, definition) in targets {
            let mut entries = self.inner.store.runtime_entries(rule, &target.id).await?;
            entries.sort_by(|a, b| a.identity.cmp(&b.identity));
            out.extend(entries.into_iter().map(|e| RuntimeLimitInfo {
                limit_id: target.id.to_string(),
                identity: e.identity,
                set: RuntimeLimit::of(definition, e.numbers),
            }));
        }
        Ok(out)
    }

    /// Removes the run-time limit of one identity: its decisions follow the rule file's numbers
    /// again, and its billing day the rule's (keeping what it used this period). Returns whether
    /// one was set.
    pub async fn remove_runtime_limit(
        &self,
        rule: &str,
        limit: Option<&str>,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<bool, Error> {
        let compiled = self.rule(rule)?;
        let (target, definition) = self.settable(&compiled, limit)?;
        let key = self.runtime_key(&compiled, target, attrs)?;
        let period = definition.period.as_ref().map(Period::interned);
        let was = self.inner.store.remove_runtime(&key, period).await?;
        Store::remove_runtime(&self.inner.local, &key, period).await?;
        Ok(was)
    }
}
