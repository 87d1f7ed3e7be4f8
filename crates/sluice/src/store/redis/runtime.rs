//! Run-time numbers in Redis: each identity's at `{state key}:r`, in its own Cluster hash slot,
//! where the general decision (`lua/decide.lua`) reads them inside the same script that decides;
//! and a listing per limit ([`keys::runtime_index`]) that bounds how many identities a limit holds.
//!
//! A set records the identity in the listing (refused there, changing nothing, when the listing
//! is full: `lua/runtime_set.lua`), then writes the identity's key; a removal deletes the key,
//! then the listing's entry. On a Cluster the two live in different slots and are two calls: an
//! interrupted set leaves a listed entry that decisions do not apply yet, an interrupted removal a
//! listed entry they no longer apply; repeating the operation settles either. Decisions read the
//! identity's key alone, so what they apply is always one whole value.

use std::sync::LazyLock;

use redis::Script;

use super::{RedisStore, keys, store_error};
use crate::algorithm::RuntimeNumbers;
use crate::store::{LimitKey, RuntimeEntry, StoreError};
use keys::Part;

static SET: LazyLock<Script> = LazyLock::new(|| Script::new(include_str!("lua/runtime_set.lua")));

impl RedisStore {
    fn runtime_index_of(&self, key: &LimitKey) -> String {
        keys::runtime_index(&self.inner.prefix, &key.rule, &key.limit_id)
    }

    pub(super) async fn set_runtime_key(
        &self,
        key: &LimitKey,
        numbers: RuntimeNumbers,
        max_entries: usize,
    ) -> Result<bool, StoreError> {
        let mut conn = self.inner.conn.clone();
        let text = numbers.to_text();
        let listed: i64 = SET
            .key(self.runtime_index_of(key))
            .arg(&key.identity)
            .arg(&text)
            .arg(max_entries)
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)?;
        if listed != 1 {
            return Ok(false);
        }
        redis::cmd("SET")
            .arg(self.key(key, Part::Runtime))
            .arg(&text)
            .query_async::<()>(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(true)
    }

    pub(super) async fn runtime_of(
        &self,
        key: &LimitKey,
    ) -> Result<Option<RuntimeNumbers>, StoreError> {
        let mut conn = self.inner.conn.clone();
        let text: Option<String> = redis::cmd("GET")
            .arg(self.key(key, Part::Runtime))
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(text.as_deref().and_then(RuntimeNumbers::parse))
    }

    pub(super) async fn runtime_list(
        &self,
        rule: &str,
        limit_id: &str,
    ) -> Result<Vec<RuntimeEntry>, StoreError> {
        let mut conn = self.inner.conn.clone();
        let listed: Vec<(String, String)> = redis::cmd("HGETALL")
            .arg(keys::runtime_index(&self.inner.prefix, rule, limit_id))
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        // A value that is not numbers (foreign data) is left out rather than failing the listing.
        Ok(listed
            .into_iter()
            .filter_map(|(identity, text)| {
                let numbers = RuntimeNumbers::parse(&text)?;
                Some(RuntimeEntry { identity, numbers })
            })
            .collect())
    }

    pub(super) async fn remove_runtime_key(&self, key: &LimitKey) -> Result<bool, StoreError> {
        let mut conn = self.inner.conn.clone();
        let deleted: i64 = redis::cmd("DEL")
            .arg(self.key(key, Part::Runtime))
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        let unlisted: i64 = redis::cmd("HDEL")
            .arg(self.runtime_index_of(key))
            .arg(&key.identity)
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(deleted + unlisted > 0)
    }
}
