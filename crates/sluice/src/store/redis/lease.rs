//! The Redis store's lease operations: release and renew the leases of concurrency limits
//! (`lua/lease.lua`, one script call per lease, all sent at once).
//!
//! A lease lives in its limit's state key, so each call touches one slot and a Cluster routes
//! it on its own; the calls of one release go out together on the multiplexed connection.

use futures::future::try_join_all;

use super::{RedisStore, keys, store_error};
use crate::model::Micros;
use crate::store::{LeaseCall, StoreError};

impl RedisStore {
    /// Runs `lua/lease.lua` on each lease: `op` is `release` or `renew`.
    async fn lease_op(&self, leases: &[LeaseCall], op: &str) -> Result<Vec<i64>, StoreError> {
        let calls = leases.iter().map(|lease| {
            let mut conn = self.inner.conn.clone();
            let mut invocation = self.inner.scripts.lease.prepare_invoke();
            invocation
                .key(keys::state_key(&self.inner.prefix, &lease.key))
                .arg(self.client_now_arg())
                .arg(self.inner.min_ttl_us)
                .arg(op)
                .arg(lease.token.to_string())
                .arg(lease.lease_us);
            async move { invocation.invoke_async::<i64>(&mut conn).await }
        });
        try_join_all(calls).await.map_err(store_error)
    }

    pub(super) async fn release_leases(
        &self,
        leases: &[LeaseCall],
    ) -> Result<Vec<bool>, StoreError> {
        let replies = self.lease_op(leases, "release").await?;
        Ok(replies.into_iter().map(|r| r == 1).collect())
    }

    pub(super) async fn renew_leases(
        &self,
        leases: &[LeaseCall],
    ) -> Result<Vec<Option<Micros>>, StoreError> {
        let replies = self.lease_op(leases, "renew").await?;
        Ok(replies
            .into_iter()
            .map(|r| u64::try_from(r).ok().map(Micros::new))
            .collect())
    }
}
