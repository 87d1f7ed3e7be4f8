//! The `Store` trait: where limit state lives, deciding one request atomically.
//!
//! A store holds, per [`LimitKey`], the [`KeyState`](crate::algorithm::KeyState) of the pure
//! algorithms and runs [`step::decide`](crate::algorithm::step::decide) (or its Lua restatement)
//! as one atomic step over all the limits of a request. Stores differ only in where state lives
//! and which clock they read; the semantics are the same, checked by one conformance suite.
//!
//! An `Err` from a store is an infrastructure failure (the limiter's fail policy takes over), never
//! a denial.
//!
//! # Layout
//! - `mod.rs` (this file): the [`Store`] trait and what it is handed and answers ([`LimitKey`],
//!   [`KeyRef`], [`LimitCall`], [`LeaseCall`], [`ReserveCall`], [`SettleCall`], [`GiveBackCall`],
//!   [`StoreReply`], [`BlocksCursor`], [`BlocksPage`], [`RuntimeEntry`], [`StoreError`]);
//! - `dyn_store`: [`DynStore`], the object-safe form the limiter holds;
//! - [`memory`]: [`MemoryStore`](memory::MemoryStore), state in this process (sharded, capped);
//! - `redis` (feature `redis`): the Redis store, one server, Sentinel or Cluster;
//! - [`invalidation`]: how a change on one node reaches every node's denial cache;
//! - [`url`]: store URLs, recognised in one place.

mod dyn_store;
pub mod invalidation;
pub mod memory;
#[cfg(feature = "redis")]
pub mod redis;
pub mod url;

use std::fmt;
use std::future::Future;
use std::time::Duration;

use crate::algorithm::{LeaseToken, LimitOutcome, LimitStep, Mode, RuntimeNumbers};
use crate::model::{Micros, Name, Period};
pub use dyn_store::{BoxFuture, DynStore};

/// The state of one limit for one identity: rule, limit id, escaped identity.
///
/// Every part is made of safe characters (see `limiter::identity`), so stores may join them
/// with `:` without ambiguity.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LimitKey {
    /// The rule's name (interned by the compiled rule: cloning a key does not copy it).
    pub rule: Name,
    /// The limit's id within the rule (likewise).
    pub limit_id: Name,
    /// The escaped identity, e.g. `member=m1` or `*` for a global limit.
    pub identity: String,
}

impl fmt::Display for LimitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.rule, self.limit_id, self.identity)
    }
}

/// The parts of a key, borrowed: what a request looks a key up by when it has no [`LimitKey`]
/// of its own (see [`Store::decide_one_now`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyRef<'a> {
    /// The rule's name.
    pub rule: &'a str,
    /// The limit's id.
    pub limit_id: &'a str,
    /// The escaped identity.
    pub identity: &'a str,
}

impl<'a> From<&'a LimitKey> for KeyRef<'a> {
    fn from(key: &'a LimitKey) -> KeyRef<'a> {
        KeyRef {
            rule: &key.rule,
            limit_id: &key.limit_id,
            identity: &key.identity,
        }
    }
}

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

/// An active block or ban.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockEntry {
    /// The blocked key.
    pub key: LimitKey,
    /// When it ends (since the epoch).
    pub until_us: Micros,
}

/// Which part of a listing of blocks to return.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlocksCursor {
    /// Where the previous page stopped ([`BlocksPage::next`]); `None` for the first page.
    pub after: Option<String>,
    /// About how many entries to return: a store may return a few more (a Redis `SCAN` batch
    /// is taken whole) or fewer (a page cut short by the listing's time budget).
    pub count: usize,
}

/// One page of a listing of blocks.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlocksPage {
    /// The blocks and bans in force found in this page.
    pub entries: Vec<BlockEntry>,
    /// Where the next page starts; `None` when the listing is complete.
    pub next: Option<String>,
    /// Block values that could not be read (corrupt or foreign data) and were left out.
    pub skipped: u64,
}

/// Why a store could not answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{store} store: {message}")]
pub struct StoreError {
    /// Which store.
    pub store: &'static str,
    /// What happened.
    pub message: String,
    /// Whether retrying later may succeed (connection lost, timeout), as opposed to a bug or a
    /// misconfiguration (script error, wrong type).
    pub transient: bool,
}

impl StoreError {
    /// A failure that may go away (connection, timeout).
    pub fn transient(store: &'static str, message: impl Into<String>) -> StoreError {
        StoreError {
            store,
            message: message.into(),
            transient: true,
        }
    }

    /// A failure that will not go away by retrying.
    pub fn permanent(store: &'static str, message: impl Into<String>) -> StoreError {
        StoreError {
            store,
            message: message.into(),
            transient: false,
        }
    }
}

/// Where limit state lives. Every method is one atomic step in the store.
///
/// Implement it with plain `async fn`s; the limiter holds any store as `Arc<dyn DynStore>`
/// (implemented for every `Store`), so a store outside this crate needs nothing else. See
/// "Adding a store" in the crate docs.
pub trait Store: Send + Sync + fmt::Debug + 'static {
    /// A short name for logs and metrics (`memory`, `redis`).
    fn name(&self) -> &'static str;

    /// Whether the store lives in this process and answers at once. The limiter then calls it
    /// without a deadline or breaker (no timer per decision, no Tokio timer needed).
    fn in_process(&self) -> bool {
        false
    }

    /// Decides one request over its limits, atomically (see [`crate::algorithm::decide`]): one
    /// outcome per call, in call order. The calls name distinct keys: the limiter adds up parts
    /// of a request that count on the same key into one call before asking (see
    /// [`Limiter::check_all`](crate::Limiter::check_all)).
    fn decide(
        &self,
        calls: &[LimitCall],
        mode: Mode,
    ) -> impl Future<Output = Result<StoreReply, StoreError>> + Send;

    /// Decides a one-limit request at once, without a future, if this store can: one that lives
    /// in this process answers here (the limiter's check that allocates nothing), and returns
    /// its time (since the epoch) and the outcome. `None`, the default, sends the request to
    /// [`Store::decide`].
    fn decide_one_now(
        &self,
        key: KeyRef<'_>,
        step: &LimitStep,
        mode: Mode,
    ) -> Option<Result<(Micros, LimitOutcome), StoreError>> {
        let _ = (key, step, mode);
        None
    }

    /// Forgets the counters, blocks and violations of these keys.
    fn reset(&self, keys: &[LimitKey]) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Blocks a key for `duration` from the store's now (never shortening a longer block).
    /// Returns the block's end (since the epoch).
    fn block(
        &self,
        key: &LimitKey,
        duration: Duration,
    ) -> impl Future<Output = Result<Micros, StoreError>> + Send;

    /// Lifts a block or ban on a key; its violations are forgotten too. Returns whether one was
    /// in force.
    fn unblock(&self, key: &LimitKey) -> impl Future<Output = Result<bool, StoreError>> + Send;

    /// One page of the blocks and bans in force for a rule. Pages are bounded in size and in
    /// time; following `next` to the end lists every block that lasted through the listing.
    fn blocks(
        &self,
        rule: &str,
        cursor: &BlocksCursor,
    ) -> impl Future<Output = Result<BlocksPage, StoreError>> + Send;

    /// Checks that the store answers (for readiness probes).
    fn ping(&self) -> impl Future<Output = Result<(), StoreError>> + Send;

    /// Ends leases of concurrency limits (see [`crate::algorithm::release`]): for each,
    /// whether it was still in force. A lease that expired or was released already changes
    /// nothing. Each lease is its own atomic step. A store without concurrency limits may keep
    /// this default, which refuses.
    fn release(
        &self,
        leases: &[LeaseCall],
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send {
        let (_, refused) = (leases, no_leases(Store::name(self)));
        async move { Err(refused) }
    }

    /// Extends leases to [`LeaseCall::lease_us`] from the store's now: for each, its new end
    /// (since the epoch), or `None` when it is no longer in force (it is not taken again).
    fn renew(
        &self,
        leases: &[LeaseCall],
    ) -> impl Future<Output = Result<Vec<Option<Micros>>, StoreError>> + Send {
        let (_, refused) = (leases, no_leases(Store::name(self)));
        async move { Err(refused) }
    }

    /// Remembers reservations until they are settled or their time is up. A store without
    /// reservations may keep this default, which refuses.
    fn reserve(
        &self,
        reservations: &[ReserveCall],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let (_, refused) = (reservations, no_reservations(Store::name(self)));
        async move { Err(refused) }
    }

    /// Settles reservations (see [`crate::algorithm::settle`]): for each, whether it was still
    /// remembered; it is forgotten in the same atomic step as its limit is charged or given back,
    /// so a reservation settles at most once.
    fn settle(
        &self,
        settlements: &[SettleCall],
    ) -> impl Future<Output = Result<Vec<bool>, StoreError>> + Send {
        let (_, refused) = (settlements, no_reservations(Store::name(self)));
        async move { Err(refused) }
    }

    /// Gives back units that batches took and did not spend (see [`GiveBackCall`]); each call
    /// is its own atomic step. A store without batches may keep this default, which refuses (the
    /// units then stay counted until the state drains or its window ends).
    fn give_back(
        &self,
        calls: &[GiveBackCall],
    ) -> impl Future<Output = Result<(), StoreError>> + Send {
        let (_, refused) = (calls, no_give_back(Store::name(self)));
        async move { Err(refused) }
    }

    /// Sets an identity's run-time numbers on a settable limit, which every later decision of
    /// that key applies (see [`RuntimeNumbers`]). `Ok(false)`, changing nothing, when
    /// the limit already holds `max_entries` other identities' numbers. A store without
    /// run-time limits may keep this default, which refuses.
    ///
    /// `period` is the limit's own (a quota's, as the rule file writes it). When the change
    /// moves the identity's billing day, the count of its current period (under the day it had)
    /// becomes the count of the period the new day gives at that instant, in the same atomic
    /// step: what was used this month is kept.
    fn set_runtime(
        &self,
        key: &LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static Period>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let (_, _, _, _, refused) = (
            key,
            numbers,
            max_entries,
            period,
            no_runtime(Store::name(self)),
        );
        async move { Err(refused) }
    }

    /// The run-time numbers of one key, if set.
    fn runtime(
        &self,
        key: &LimitKey,
    ) -> impl Future<Output = Result<Option<RuntimeNumbers>, StoreError>> + Send {
        let (_, refused) = (key, no_runtime(Store::name(self)));
        async move { Err(refused) }
    }

    /// Every identity's run-time numbers on one limit of a rule (at most the `max_entries` the
    /// sets were bounded by), in no particular order.
    fn runtime_entries(
        &self,
        rule: &str,
        limit_id: &str,
    ) -> impl Future<Output = Result<Vec<RuntimeEntry>, StoreError>> + Send {
        let (_, _, refused) = (rule, limit_id, no_runtime(Store::name(self)));
        async move { Err(refused) }
    }

    /// Removes one key's run-time numbers: its decisions go back to the limit's. Returns whether
    /// some were set. A billing day of its own goes back to `period`'s (the limit's) as
    /// [`Store::set_runtime`] moves one: the count of the current period is kept.
    fn remove_runtime(
        &self,
        key: &LimitKey,
        period: Option<&'static Period>,
    ) -> impl Future<Output = Result<bool, StoreError>> + Send {
        let (_, _, refused) = (key, period, no_runtime(Store::name(self)));
        async move { Err(refused) }
    }
}

fn no_give_back(store: &'static str) -> StoreError {
    StoreError::permanent(store, "this store cannot give units back")
}

/// One identity's run-time numbers on a limit, as a listing returns them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuntimeEntry {
    /// The escaped identity.
    pub identity: String,
    /// Its numbers.
    pub numbers: RuntimeNumbers,
}

fn no_runtime(store: &'static str) -> StoreError {
    StoreError::permanent(store, "this store keeps no run-time limits")
}

fn no_reservations(store: &'static str) -> StoreError {
    StoreError::permanent(store, "this store keeps no reservations")
}

fn no_leases(store: &'static str) -> StoreError {
    StoreError::permanent(store, "this store keeps no leases (concurrency limits)")
}
