//! The library's error type. A denial is not an error: it is a [`Decision`](crate::Decision)
//! with `allowed: false`. Errors are bad input (a client error) or a store failure outside
//! `check` (admin operations).

use crate::model::ModelError;
use crate::store::StoreError;

/// What went wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// No rule by that name is configured.
    #[error("unknown rule `{rule}`")]
    UnknownRule {
        /// The name asked for.
        rule: String,
    },
    /// A limit counts per an attribute that the request does not carry.
    #[error("rule `{rule}` needs attribute `{attribute}` (limit `{limit_id}`)")]
    MissingAttribute {
        /// The rule.
        rule: String,
        /// The limit's id.
        limit_id: String,
        /// The attribute, or its alternatives (`member|session|ip`).
        attribute: String,
    },
    /// An attribute value is longer than the limiter accepts.
    #[error("attribute `{attribute}` is {len} bytes long; the maximum is {max}")]
    AttributeTooLong {
        /// The attribute.
        attribute: String,
        /// Its length.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// A cost that no limit could ever admit and that is surely a bug in the caller.
    #[error("cost {cost} is above the maximum of {max}")]
    InvalidCost {
        /// The cost asked for.
        cost: u64,
        /// The maximum accepted.
        max: u64,
    },
    /// A text given as a lease id is not one of the rules in force (malformed, too long, or
    /// naming a limit the rule has no concurrency limit by). Nothing was changed.
    #[error("invalid lease: {reason}")]
    InvalidLease {
        /// What is wrong with it.
        reason: String,
    },
    /// A reservation asked of a rule that cannot settle one, or a text given as a reservation id
    /// that is not one of the rules in force. Nothing was changed.
    #[error("invalid reservation: {reason}")]
    InvalidReservation {
        /// What is wrong with it.
        reason: String,
    },
    /// A run-time limit that cannot be set, read or removed as asked: an unknown or
    /// non-settable limit, or numbers a rule file would refuse. Nothing was changed.
    #[error("rule `{rule}`: {reason}")]
    InvalidRuntimeLimit {
        /// The rule.
        rule: String,
        /// What is wrong, and what would be right.
        reason: String,
    },
    /// A limit already holds the most run-time limits it may; nothing was changed.
    #[error(
        "rule `{rule}`, limit `{limit_id}`: already {max} identities have run-time limits, the \
         most allowed; remove some first"
    )]
    RuntimeLimitsFull {
        /// The rule.
        rule: String,
        /// The limit's id.
        limit_id: String,
        /// The bound ([`Options::max_runtime_limits`](crate::Options::max_runtime_limits)).
        max: usize,
    },
    /// Two parts of one [`Limiter::check_all`](crate::Limiter::check_all) request count the same
    /// identity of a rule in ways that cannot be added up into one request: with different
    /// numbers (overrides matched other attributes), or on a concurrency limit without being the
    /// same identity on every limit of the rule. Nothing was decided.
    #[error("parts {first} and {second} count the same identity of rule `{rule}` {reason}")]
    ConflictingParts {
        /// The rule.
        rule: String,
        /// The first of the two parts (from 0, in the request's order).
        first: usize,
        /// The second.
        second: usize,
        /// Why they cannot be added up.
        reason: &'static str,
    },
    /// A rule failed validation.
    #[error("rule `{rule}`: {error}")]
    InvalidRule {
        /// The rule.
        rule: String,
        /// What is wrong.
        error: ModelError,
    },
    /// The store failed during an operation that has no fail policy (admin operations).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl Error {
    /// Whether the caller is at fault (HTTP 4xx) rather than the infrastructure.
    pub fn is_client_error(&self) -> bool {
        !matches!(self, Error::Store(_))
    }
}
