//! The lease id a decision of a rule with concurrency limits carries, made, bounded and read
//! back:
//!
//! `<token>:<units>:<rule>:<limit id>:<identity>[:<limit id>:<identity>…]`
//!
//! the token (22 URL-safe base64 characters, 128 random bits), the units held (the check's
//! cost), the rule, then each concurrency limit that took the lease and the identity it counted.
//! No part can contain `:` (rule names, limit ids and escaped identities never do), so an id has
//! one reading. Ids are at most [`MAX_LEASE_LEN`] bytes: a rule whose ids could be longer is
//! refused when it is compiled ([`check_length`]). Reservation ids have the same shape.
//!
//! A check admitted by a rule with concurrency limits takes one lease on each of them, all under
//! one token ([`new_token`]), and its decision carries the id ([`lease_id`]), which names
//! everything needed to find the lease again with no other state.

use super::compiled_limit::CompiledLimit;
use super::identity::MAX_PLAIN_LEN;
use crate::algorithm::LeaseToken;
use crate::error::Error;
use crate::model::{MAX_COUNT, ModelError};
use crate::store::LimitCall;

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

/// A lease id taken apart, every part checked. Reservation ids have the same shape (see `reservation`).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LeaseId<'a> {
    pub(crate) token: LeaseToken,
    pub(crate) units: u64,
    pub(crate) rule: &'a str,
    pub(crate) limits: Vec<(&'a str, &'a str)>,
}

/// Parses an id of `kind` (`lease` or `reservation`), refused as `invalid` says.
pub(crate) fn parse_id<'a>(
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
