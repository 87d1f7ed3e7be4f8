//! The Redis store's administrative operations: reset, block, unblock and the listing of blocks.
//!
//! None of them is on the decision path. Every key of one identity shares a slot, so a reset is
//! one `DEL` per identity; listings scan the readable block keys (`…:b`) of every primary and
//! keep only blocks still in force at the store's now, one page at a time.

use std::time::{Duration, Instant};

use super::{RedisStore, keys, store_error};
use crate::model::Micros;
use crate::store::{BlockEntry, BlocksCursor, BlocksPage, LimitKey, StoreError};
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
    ) -> Result<Micros, StoreError> {
        let mut conn = self.inner.conn.clone();
        self.inner
            .scripts
            .block
            .key(self.key(key, Part::Counter))
            .key(self.key(key, Part::Block))
            .arg(self.client_now_arg())
            .arg(Micros::from(duration))
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

    /// One page of the blocks of `rule`: `SCAN` batches of the server, or of each Cluster
    /// primary in turn, until the page holds `cursor.count` entries or the store's
    /// [`list_budget`](super::RedisOptions::list_budget) has passed (at least one batch is read). The cursor is `<primary index>:<SCAN cursor>`. A value that is not a block end
    /// (corrupt or foreign data) is skipped and counted, never an error.
    pub(super) async fn blocks_page(
        &self,
        rule: &str,
        cursor: &BlocksCursor,
    ) -> Result<BlocksPage, StoreError> {
        let started = Instant::now();
        let pattern = keys::block_pattern(&self.inner.prefix, rule);
        let conn = &self.inner.conn;
        let targets: Vec<Option<(String, u16)>> = if conn.is_cluster() {
            let mut nodes = conn.cluster_primaries().await.map_err(store_error)?;
            nodes.sort();
            nodes.into_iter().map(Some).collect()
        } else {
            vec![None]
        };
        let (mut node, mut scan) = match &cursor.after {
            None => (0, 0),
            Some(text) => parse_cursor(text)
                .ok_or_else(|| StoreError::permanent(super::NAME, "not a listing cursor"))?,
        };
        let now = self.now_us().await?;
        let mut page = BlocksPage::default();
        while node < targets.len() {
            let mut cmd = redis::cmd("SCAN");
            cmd.arg(scan)
                .arg("MATCH")
                .arg(&pattern)
                .arg("COUNT")
                .arg(1000);
            let reply = match &targets[node] {
                Some((host, port)) => conn.on_node(cmd, host, *port).await,
                None => cmd.query_async(&mut conn.clone()).await,
            };
            let (next, batch): (u64, Vec<String>) = reply
                .and_then(|v| redis::from_redis_value(v).map_err(Into::into))
                .map_err(store_error)?;
            self.read_blocks(rule, &batch, now, &mut page).await?;
            if next == 0 {
                node += 1;
                scan = 0;
            } else {
                scan = next;
            }
            if page.entries.len() >= cursor.count.max(1)
                || started.elapsed() >= self.inner.list_budget
            {
                break;
            }
        }
        if node < targets.len() {
            page.next = Some(format!("{node}:{scan}"));
        }
        page.entries.sort_by(|a, b| a.key.cmp(&b.key));
        Ok(page)
    }

    /// Reads the block ends of `found` keys into `page`, skipping what is not one.
    async fn read_blocks(
        &self,
        rule: &str,
        found: &[String],
        now: Micros,
        page: &mut BlocksPage,
    ) -> Result<(), StoreError> {
        if found.is_empty() {
            return Ok(());
        }
        let mut conn = self.inner.conn.clone();
        let values: Vec<Option<String>> = if conn.is_cluster() {
            let gets = found.iter().map(|key| {
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
            for key in found {
                pipe.cmd("GET").arg(key);
            }
            pipe.query_async(&mut conn).await.map_err(store_error)?
        };
        for (key, value) in found.iter().zip(values) {
            let Some(value) = value else {
                continue; // expired between SCAN and GET
            };
            match (
                value.parse::<u64>().map(Micros::new),
                keys::parse_block_key(&self.inner.prefix, rule, key),
            ) {
                (Ok(until), Some(k)) => {
                    if until > now {
                        page.entries.push(BlockEntry {
                            key: k,
                            until_us: until,
                        });
                    }
                }
                _ => page.skipped += 1,
            }
        }
        Ok(())
    }
}

/// The default [`list_budget`](super::RedisOptions::list_budget).
pub const LIST_BUDGET: Duration = Duration::from_millis(500);

/// `<primary index>:<SCAN cursor>`.
fn parse_cursor(text: &str) -> Option<(usize, u64)> {
    let (node, scan) = text.split_once(':')?;
    Some((node.parse().ok()?, scan.parse().ok()?))
}
