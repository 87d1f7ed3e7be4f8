//! The start-up check of Redis' eviction policy.
//!
//! With `maxmemory` reached, an `allkeys-*` policy lets Redis evict any key, a live counter
//! included: the identity it counted starts over and may get more than its limit. Sluice's keys
//! all carry an expiry, so `volatile-*` policies evict them too, but only before their time
//! when nothing else can go; `noeviction` refuses writes instead (decisions then degrade per the
//! fail policy). The check warns once at start-up; it never refuses to run, because the policy
//! may be chosen knowingly (a Redis used by Sluice alone, sized with room to spare).

use std::collections::HashMap;

use super::{RedisStore, store_error};
use crate::store::StoreError;

/// The policies under which Redis may evict a key that has not expired.
pub const RISKY_EVICTION_POLICIES: [&str; 3] = ["allkeys-lru", "allkeys-lfu", "allkeys-random"];

impl RedisStore {
    /// Redis' `maxmemory-policy` when it may evict live counters (see [`RISKY_EVICTION_POLICIES`]), on the server
    /// or, on a Cluster, on any primary; `None` when no node may. An error when `CONFIG GET` is
    /// refused (managed services often rename or forbid it).
    pub async fn eviction_risk(&self) -> Result<Option<String>, StoreError> {
        let conn = self.inner.conn.clone();
        let cmd = redis::cmd("CONFIG")
            .arg("GET")
            .arg("maxmemory-policy")
            .clone();
        let replies = if conn.is_cluster() {
            let mut replies = Vec::new();
            for (host, port) in conn.cluster_primaries().await.map_err(store_error)? {
                replies.push(conn.on_node(cmd.clone(), &host, port).await);
            }
            replies
        } else {
            vec![cmd.query_async(&mut conn.clone()).await]
        };
        for reply in replies {
            let config: HashMap<String, String> = reply
                .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
                .map_err(store_error)?;
            if let Some(policy) = config.get("maxmemory-policy")
                && RISKY_EVICTION_POLICIES.contains(&policy.as_str())
            {
                return Ok(Some(policy.clone()));
            }
        }
        Ok(None)
    }

    /// Logs a warning when [`RedisStore::eviction_risk`] finds a risky policy.
    pub(super) async fn warn_of_eviction(&self) {
        match self.eviction_risk().await {
            Ok(Some(policy)) => tracing::warn!(
                policy,
                "Redis maxmemory-policy {policy} may evict live rate-limit counters when memory \
                 runs out, letting identities start over; prefer volatile-ttl or noeviction"
            ),
            Ok(None) => tracing::info!("Redis maxmemory-policy cannot evict live counters"),
            Err(error) => {
                tracing::debug!(%error, "cannot read Redis maxmemory-policy");
            }
        }
    }
}
