//! What the limiter hands a store for each kind of call (a decision's limits, a lease, a
//! reservation, its settlement, a batch's give-back), and the answer to a decision.
//!
//! Invariant: every call names its limit's state by [`LimitKey`]; times are the store's own
//! clock (microseconds since the epoch), so a call means the same on every node.

use super::LimitKey;
use crate::algorithm::concurrency::LeaseToken;
use crate::algorithm::{LimitOutcome, LimitStep};
use crate::model::Micros;

/// One limit of a request, as handed to a store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LimitCall {
    /// Whose state.
    pub key: LimitKey,
    /// What to decide.
    pub step: LimitStep,
}

/// One lease on one concurrency limit, as [`Store::release`] and [`Store::renew`] find it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseCall {
    /// The concurrency limit's state for the identity that took the lease.
    pub key: LimitKey,
    /// The token it is held under.
    pub token: LeaseToken,
    /// The units it holds (the cost of the request that took it).
    pub units: u64,
    /// How long a renewal makes it last from the store's now: the limit's `lease`.
    pub lease_us: Micros,
}

/// A reservation to remember on one limit, so that it can be settled once (see
/// [`crate::algorithm::settle`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReserveCall {
    /// The limit's state for the identity the reservation was admitted for.
    pub key: LimitKey,
    /// The token it is remembered under.
    pub token: LeaseToken,
    /// The units the check consumed.
    pub estimate: u64,
    /// The store's time of the decision that consumed them (since the epoch).
    pub at_us: Micros,
    /// How long it can be settled: afterwards it is forgotten and its estimate stands.
    pub for_us: Micros,
}

/// The settlement of one reservation on one limit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SettleCall {
    /// The limit's state for the identity the reservation was admitted for.
    pub key: LimitKey,
    /// The token it is remembered under.
    pub token: LeaseToken,
    /// The limit's algorithm now.
    pub algorithm: crate::model::Algorithm,
    /// The limit's numbers now.
    pub params: crate::algorithm::Params,
    /// What the request really cost.
    pub actual: u64,
}

/// Units a batch took on one limit and did not spend, to give back (see `limiter::held`).
///
/// The store removes `units` admitted at `at_us` from the limit's state, never by more than they
/// still weigh on it: on a draining state (`token_bucket`, `gcra`) they weigh `units` minus what
/// drained since `at_us`; on a `fixed_window` they weigh `units` while `at_us`'s window lasts and
/// nothing after. Other algorithms are left alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GiveBackCall {
    /// The limit's state for the identity the batch was taken for.
    pub key: LimitKey,
    /// The limit's algorithm.
    pub algorithm: crate::model::Algorithm,
    /// The limit's numbers.
    pub params: crate::algorithm::Params,
    /// The units to give back.
    pub units: u64,
    /// The store's time they are taken to have been admitted at (since the epoch).
    pub at_us: Micros,
}

/// A store's answer: the time it decided at and each limit's outcome, in call order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreReply {
    /// The store's clock at the decision (since the epoch).
    pub now_us: Micros,
    /// One outcome per call.
    pub outcomes: Vec<LimitOutcome>,
}
