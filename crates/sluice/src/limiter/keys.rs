//! From a request's attributes to store keys: each limit's key (its rule, its id and the
//! identity `identity` builds) and the store calls of a check.

use super::Attributes;
use super::choice::{self, Picks};
use super::compile::CompiledRule;
use super::compiled_limit::CompiledLimit;
use super::identity::{IdentityError, identity};
use super::lease_id;
use super::options::Check;
use crate::algorithm::Mode;
use crate::error::Error;
use crate::store::{LimitCall, LimitKey};

/// The store key of one limit of `rule` for these attributes, or why it cannot be built.
pub(crate) fn limit_key(
    rule: &CompiledRule,
    limit: &CompiledLimit,
    attrs: &(impl Attributes + ?Sized),
    max_len: usize,
) -> Result<LimitKey, Error> {
    let identity = identity(&limit.by, &limit.groups, attrs, max_len)
        .map_err(|e| identity_error(rule, limit, e, max_len))?;
    Ok(LimitKey {
        rule: rule.name.clone(),
        limit_id: limit.id.clone(),
        identity,
    })
}

/// The check's error for an identity of `limit` that could not be built.
pub(crate) fn identity_error(
    rule: &CompiledRule,
    limit: &CompiledLimit,
    error: IdentityError,
    max_len: usize,
) -> Error {
    match error {
        IdentityError::Missing(attribute) => Error::MissingAttribute {
            rule: rule.name.to_string(),
            limit_id: limit.id.to_string(),
            attribute,
        },
        IdentityError::TooLong { attribute, len } => Error::AttributeTooLong {
            attribute,
            len,
            max: max_len,
        },
    }
}

/// The store calls of one check: one per limit of the rule (or, for a rule with conditions or
/// overrides, per limit `picks` chose, with its chosen numbers), in the rule's order. A check that
/// may take leases (on a rule with a concurrency limit, applied) draws one token for all of them.
pub(crate) fn calls(
    rule: &CompiledRule,
    picks: Option<&Picks>,
    attrs: &(impl Attributes + ?Sized),
    check: Check,
    max_len: usize,
) -> Result<Vec<LimitCall>, Error> {
    let token = (rule.leases && check.mode() == Mode::Apply).then(lease_id::new_token);
    choice::applied(rule, picks)
        .map(|limit| {
            Ok(LimitCall {
                key: limit_key(rule, limit, attrs, max_len)?,
                step: limit.step(check.units(), token),
            })
        })
        .collect()
}
