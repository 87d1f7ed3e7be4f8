//! The Redis store's reservations: remembered as `<state key>:r:<token>` (`"<estimate>:<decision
//! time>:<settle by>"`, µs on the decision clock; the key expires then too, with the store's
//! `min_ttl` as any key) and settled by
//! `lua/settle.lua`, one script call per limit, all sent at once.
//!
//! A reservation's key shares its limit's hash tag, so each settlement touches one slot and a
//! Cluster routes it on its own.

use futures::future::try_join_all;

use super::{RedisStore, keys, store_error};
use crate::algorithm::LeaseToken;
use crate::store::{LimitKey, ReserveCall, SettleCall, StoreError};

fn reservation_key(prefix: &str, key: &LimitKey, token: LeaseToken) -> String {
    format!("{}:r:{token}", keys::state_key(prefix, key))
}

impl RedisStore {
    pub(super) async fn reserve_all(&self, calls: &[ReserveCall]) -> Result<(), StoreError> {
        let sets = calls.iter().map(|call| {
            let mut conn = self.inner.conn.clone();
            let mut cmd = redis::cmd("SET");
            cmd.arg(reservation_key(&self.inner.prefix, &call.key, call.token))
                .arg(format!(
                    "{}:{}:{}",
                    call.estimate,
                    call.at_us.get(),
                    call.at_us.saturating_add(call.for_us).get()
                ))
                .arg("PX")
                .arg(
                    call.for_us
                        .max(self.inner.min_ttl_us)
                        .as_millis_ceil()
                        .max(1),
                );
            async move { cmd.query_async::<()>(&mut conn).await }
        });
        try_join_all(sets).await.map_err(store_error)?;
        Ok(())
    }

    pub(super) async fn settle_all(&self, calls: &[SettleCall]) -> Result<Vec<bool>, StoreError> {
        let settles = calls.iter().map(|call| {
            let mut conn = self.inner.conn.clone();
            let mut invocation = self.inner.scripts.settle.prepare_invoke();
            invocation
                .key(keys::state_key(&self.inner.prefix, &call.key))
                .key(reservation_key(&self.inner.prefix, &call.key, call.token))
                .arg(self.client_now_arg())
                .arg(self.inner.min_ttl_us)
                .arg(call.algorithm.wire_code())
                .arg(call.params.count)
                .arg(call.params.window_us)
                .arg(call.params.capacity)
                .arg(call.actual);
            async move { invocation.invoke_async::<i64>(&mut conn).await }
        });
        let replies = try_join_all(settles).await.map_err(store_error)?;
        Ok(replies.into_iter().map(|r| r == 1).collect())
    }
}
