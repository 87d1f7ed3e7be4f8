//! The memory store's block listing: the blocks in force of one rule, a page at a time, in key
//! order (the cursor is the last `limit:identity` of the previous page). Every shard is read under
//! its own lock in turn; a block that ends meanwhile may still be listed, as on Redis.

use super::{MemoryStore, SHARDS};
use crate::store::{BlockEntry, BlocksCursor, BlocksPage};

impl MemoryStore {
    pub(super) fn blocks_page(&self, rule: &str, cursor: &BlocksCursor) -> BlocksPage {
        let now = self.inner.clock.now_us();
        let mut out: Vec<BlockEntry> = Vec::new();
        for i in 0..SHARDS {
            out.extend(self.shard(i).entries().filter_map(|e| {
                let until = e.state.block().active(now)?;
                let key = e.key.limit_key();
                (&*key.rule == rule).then_some(BlockEntry {
                    key,
                    until_us: until,
                })
            }));
        }
        let position = |e: &BlockEntry| format!("{}:{}", e.key.limit_id, e.key.identity);
        out.sort_by_cached_key(position);
        if let Some(after) = &cursor.after {
            out.retain(|e| position(e).as_str() > after.as_str());
        }
        let count = cursor.count.max(1);
        let next = (out.len() > count).then(|| position(&out[count - 1]));
        out.truncate(count);
        BlocksPage {
            entries: out,
            next,
            skipped: 0,
        }
    }
}
