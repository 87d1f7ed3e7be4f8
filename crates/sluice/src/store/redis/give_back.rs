//! Units a batch did not spend, given back to Redis (see
//! [`GiveBackCall`](crate::store::GiveBackCall)): the cross-slot protocol's `lua/give_back.lua`,
//! one script call per limit (each names one key, so a Cluster routes it to its slot), all sent
//! at once. The script never takes off more than the units still weigh on the state, and leaves
//! a state behind a block marker alone.

use futures::future::try_join_all;

use super::codec;
use super::keys::{self, Part};
use super::{RedisStore, store_error};
use crate::store::{GiveBackCall, StoreError};

impl RedisStore {
    pub(super) async fn give_back_all(&self, calls: &[GiveBackCall]) -> Result<(), StoreError> {
        let script = &self.inner.scripts.give_back;
        let sends = calls.iter().map(|call| {
            let mut invocation = script.prepare_invoke();
            invocation
                .key(keys::key(&self.inner.prefix, &call.key, Part::Counter))
                .arg(self.client_now_arg())
                .arg(call.at_us.get())
                .arg(&codec::give_back_args(
                    call.algorithm,
                    &call.params,
                    call.units,
                    call.at_us,
                ));
            let mut conn = self.inner.conn.clone();
            async move {
                let _changed: i64 = invocation
                    .invoke_async(&mut conn)
                    .await
                    .map_err(store_error)?;
                Ok::<(), StoreError>(())
            }
        });
        try_join_all(sends).await?;
        Ok(())
    }
}
