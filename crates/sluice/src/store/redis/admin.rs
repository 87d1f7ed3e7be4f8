//! The Redis store's administrative operations: reset, block, unblock and the listing of blocks.
//!
//! None of them is on the decision path. Every key of one identity shares a slot, so a reset is
//! one `DEL` per identity; listings scan the readable block keys (`…:b`) of every primary and
//! keep only blocks still in force at the store's now.

use std::time::Duration;

use super::{RedisStore, keys, store_error};
use crate::clock::micros;
use crate::store::{BlockEntry, LimitKey, StoreError};
use keys::Part;

impl RedisStore {
    pub(super) async fn reset_keys(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        if keys.is_empty() {
            return Ok(());
        }
        let mut conn = self.inner.conn.clone();
        if conn.is_cluster() {
            // One DEL per identity (its keys share a slot), each routed to its node.
            let deletes = keys.iter().map(|key| {
                let mut conn = conn.clone();
                let names = keys::all(&self.inner.prefix, key);
                async move {
                    redis::cmd("DEL")
                        .arg(names.as_slice())
                        .query_async::<()>(&mut conn)
                        .await
                }
            });
            for result in futures::future::join_all(deletes).await {
                result.map_err(store_error)?;
            }
            return Ok(());
        }
        // One DEL per identity: its keys share a slot.
        let mut pipe = redis::pipe();
        for key in keys {
            pipe.del(keys::all(&self.inner.prefix, key).as_slice())
                .ignore();
        }
        pipe.query_async::<()>(&mut conn).await.map_err(store_error)
    }

    pub(super) async fn block_key(
        &self,
        key: &LimitKey,
        duration: Duration,
    ) -> Result<u64, StoreError> {
        let mut conn = self.inner.conn.clone();
        self.inner
            .scripts
            .block
            .key(self.key(key, Part::Counter))
            .key(self.key(key, Part::Block))
            .arg(self.client_now_arg())
            .arg(micros(duration))
            .arg(self.inner.min_ttl_us)
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)
    }

    pub(super) async fn unblock_key(&self, key: &LimitKey) -> Result<bool, StoreError> {
        let mut conn = self.inner.conn.clone();
        let was: i64 = self
            .inner
            .scripts
            .unblock
            .key(self.key(key, Part::Counter))
            .key(self.key(key, Part::Block))
            .key(self.key(key, Part::Violations))
            .arg(self.client_now_arg())
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(was == 1)
    }

    /// Every key matching `pattern`: one `SCAN` over the server, or over each Cluster primary.
    async fn scan(&self, pattern: &str) -> Result<Vec<String>, StoreError> {
        let conn = &self.inner.conn;
        let nodes = conn.cluster_primaries().await.map_err(store_error)?;
        let targets: Vec<Option<(String, u16)>> = if conn.is_cluster() {
            nodes.into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        let mut found = Vec::new();
        for target in targets {
            let mut cursor: u64 = 0;
            loop {
                let mut cmd = redis::cmd("SCAN");
                cmd.arg(cursor)
                    .arg("MATCH")
                    .arg(pattern)
                    .arg("COUNT")
                    .arg(1000);
                let reply = match &target {
                    Some((host, port)) => conn.on_node(cmd, host, *port).await,
                    None => cmd.query_async(&mut conn.clone()).await,
                };
                let (next, batch): (u64, Vec<String>) = reply
                    .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
                    .map_err(store_error)?;
                found.extend(batch);
                if next == 0 {
                    break;
                }
                cursor = next;
            }
        }
        Ok(found)
    }

    pub(super) async fn blocks_of(&self, rule: &str) -> Result<Vec<BlockEntry>, StoreError> {
        let pattern = keys::block_pattern(&self.inner.prefix, rule);
        let mut conn = self.inner.conn.clone();
        let mut found = self.scan(&pattern).await?;
        found.sort();
        found.dedup();
        let now = self.now_us().await?;
        let mut out = Vec::new();
        for chunk in found.chunks(500) {
            let values: Vec<Option<u64>> = if conn.is_cluster() {
                let gets = chunk.iter().map(|key| {
                    let mut conn = conn.clone();
                    async move { redis::cmd("GET").arg(key).query_async(&mut conn).await }
                });
                futures::future::join_all(gets)
                    .await
                    .into_iter()
                    .collect::<Result<_, _>>()
                    .map_err(store_error)?
            } else {
                let mut pipe = redis::pipe();
                for key in chunk {
                    pipe.get(key);
                }
                pipe.query_async(&mut conn).await.map_err(store_error)?
            };
            for (key, until) in chunk.iter().zip(values) {
                let (Some(until), Some(k)) =
                    (until, keys::parse_block_key(&self.inner.prefix, rule, key))
                else {
                    continue;
                };
                if until > now {
                    out.push(BlockEntry {
                        key: k,
                        until_us: until,
                    });
                }
            }
        }
        out.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(out)
    }
}
