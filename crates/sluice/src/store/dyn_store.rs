//! `DynStore`: the object-safe form of [`Store`], so that the limiter can hold any store as
//! `Arc<dyn DynStore>`. Implemented for every [`Store`] by forwarding each operation and boxing
//! its future; nothing here decides anything.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use super::{
    BlocksCursor, BlocksPage, GiveBackCall, KeyRef, LeaseCall, LimitCall, LimitKey, ReserveCall,
    RuntimeEntry, SettleCall, Store, StoreError, StoreReply,
};
use crate::algorithm::{LimitOutcome, LimitStep, Mode, RuntimeNumbers};
use crate::model::{Micros, Period};

/// A boxed, sendable future: what [`DynStore`] returns so that stores can be held as
/// `Arc<dyn DynStore>`.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// The object-safe form of [`Store`], implemented for every store: the same operations, each
/// returning a [`BoxFuture`]. Hold stores as `Arc<dyn DynStore>`; implement [`Store`].
pub trait DynStore: Send + Sync + fmt::Debug + 'static {
    /// See [`Store::name`].
    fn name(&self) -> &'static str;
    /// See [`Store::in_process`].
    fn in_process(&self) -> bool;
    /// See [`Store::decide`].
    fn decide<'a>(
        &'a self,
        calls: &'a [LimitCall],
        mode: Mode,
    ) -> BoxFuture<'a, Result<StoreReply, StoreError>>;
    /// See [`Store::decide_one_now`].
    fn decide_one_now(
        &self,
        key: KeyRef<'_>,
        step: &LimitStep,
        mode: Mode,
    ) -> Option<Result<(Micros, LimitOutcome), StoreError>>;
    /// See [`Store::reset`].
    fn reset<'a>(&'a self, keys: &'a [LimitKey]) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`Store::block`].
    fn block<'a>(
        &'a self,
        key: &'a LimitKey,
        duration: Duration,
    ) -> BoxFuture<'a, Result<Micros, StoreError>>;
    /// See [`Store::unblock`].
    fn unblock<'a>(&'a self, key: &'a LimitKey) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// See [`Store::blocks`].
    fn blocks<'a>(
        &'a self,
        rule: &'a str,
        cursor: &'a BlocksCursor,
    ) -> BoxFuture<'a, Result<BlocksPage, StoreError>>;
    /// See [`Store::ping`].
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>>;
    /// See [`Store::release`].
    fn release<'a>(
        &'a self,
        leases: &'a [LeaseCall],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>>;
    /// See [`Store::renew`].
    fn renew<'a>(
        &'a self,
        leases: &'a [LeaseCall],
    ) -> BoxFuture<'a, Result<Vec<Option<Micros>>, StoreError>>;
    /// See [`Store::reserve`].
    fn reserve<'a>(
        &'a self,
        reservations: &'a [ReserveCall],
    ) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`Store::settle`].
    fn settle<'a>(
        &'a self,
        settlements: &'a [SettleCall],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>>;
    /// See [`Store::give_back`].
    fn give_back<'a>(&'a self, calls: &'a [GiveBackCall]) -> BoxFuture<'a, Result<(), StoreError>>;
    /// See [`Store::set_runtime`].
    fn set_runtime<'a>(
        &'a self,
        key: &'a LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static Period>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
    /// See [`Store::runtime`].
    fn runtime<'a>(
        &'a self,
        key: &'a LimitKey,
    ) -> BoxFuture<'a, Result<Option<RuntimeNumbers>, StoreError>>;
    /// See [`Store::runtime_entries`].
    fn runtime_entries<'a>(
        &'a self,
        rule: &'a str,
        limit_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<RuntimeEntry>, StoreError>>;
    /// See [`Store::remove_runtime`].
    fn remove_runtime<'a>(
        &'a self,
        key: &'a LimitKey,
        period: Option<&'static Period>,
    ) -> BoxFuture<'a, Result<bool, StoreError>>;
}

impl<S: Store> DynStore for S {
    fn name(&self) -> &'static str {
        Store::name(self)
    }
    fn in_process(&self) -> bool {
        Store::in_process(self)
    }
    fn decide<'a>(
        &'a self,
        calls: &'a [LimitCall],
        mode: Mode,
    ) -> BoxFuture<'a, Result<StoreReply, StoreError>> {
        Box::pin(Store::decide(self, calls, mode))
    }
    fn decide_one_now(
        &self,
        key: KeyRef<'_>,
        step: &LimitStep,
        mode: Mode,
    ) -> Option<Result<(Micros, LimitOutcome), StoreError>> {
        Store::decide_one_now(self, key, step, mode)
    }
    fn reset<'a>(&'a self, keys: &'a [LimitKey]) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(Store::reset(self, keys))
    }
    fn block<'a>(
        &'a self,
        key: &'a LimitKey,
        duration: Duration,
    ) -> BoxFuture<'a, Result<Micros, StoreError>> {
        Box::pin(Store::block(self, key, duration))
    }
    fn unblock<'a>(&'a self, key: &'a LimitKey) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::unblock(self, key))
    }
    fn blocks<'a>(
        &'a self,
        rule: &'a str,
        cursor: &'a BlocksCursor,
    ) -> BoxFuture<'a, Result<BlocksPage, StoreError>> {
        Box::pin(Store::blocks(self, rule, cursor))
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        Box::pin(Store::ping(self))
    }
    fn release<'a>(
        &'a self,
        leases: &'a [LeaseCall],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>> {
        Box::pin(Store::release(self, leases))
    }
    fn renew<'a>(
        &'a self,
        leases: &'a [LeaseCall],
    ) -> BoxFuture<'a, Result<Vec<Option<Micros>>, StoreError>> {
        Box::pin(Store::renew(self, leases))
    }
    fn reserve<'a>(
        &'a self,
        reservations: &'a [ReserveCall],
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(Store::reserve(self, reservations))
    }
    fn settle<'a>(
        &'a self,
        settlements: &'a [SettleCall],
    ) -> BoxFuture<'a, Result<Vec<bool>, StoreError>> {
        Box::pin(Store::settle(self, settlements))
    }
    fn give_back<'a>(&'a self, calls: &'a [GiveBackCall]) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(Store::give_back(self, calls))
    }
    fn set_runtime<'a>(
        &'a self,
        key: &'a LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
        period: Option<&'static Period>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::set_runtime(self, key, numbers, max_entries, period))
    }
    fn runtime<'a>(
        &'a self,
        key: &'a LimitKey,
    ) -> BoxFuture<'a, Result<Option<RuntimeNumbers>, StoreError>> {
        Box::pin(Store::runtime(self, key))
    }
    fn runtime_entries<'a>(
        &'a self,
        rule: &'a str,
        limit_id: &'a str,
    ) -> BoxFuture<'a, Result<Vec<RuntimeEntry>, StoreError>> {
        Box::pin(Store::runtime_entries(self, rule, limit_id))
    }
    fn remove_runtime<'a>(
        &'a self,
        key: &'a LimitKey,
        period: Option<&'static Period>,
    ) -> BoxFuture<'a, Result<bool, StoreError>> {
        Box::pin(Store::remove_runtime(self, key, period))
    }
}
