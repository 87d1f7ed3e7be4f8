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
//!
//! On a monthly quota the identity's key is written by `lua/runtime_change.lua`, which also moves
//! the count to the period of a new billing day in the same script (the state key shares the slot):
//! the node sends the day it assumes the identity has and the two periods at its time, and is
//! told the day held (or Redis' time, when another period holds it) to try again, as decisions
//! are (see `anchors`).

use std::sync::LazyLock;

use redis::Script;

use super::{RedisStore, keys, store_error};
use crate::algorithm::RuntimeNumbers;
use crate::clock::{Clock, SystemClock};
use crate::model::{Micros, Period, PeriodUnit};
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
        period: Option<&'static Period>,
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
        self.change_runtime(key, Some(&text), numbers.anchor, period)
            .await?;
        Ok(true)
    }

    /// Writes (`Some`) or deletes (`None`) the identity's numbers, moving a monthly quota's count
    /// to the period of the billing day `day` (`None`: the limit's own) in the same script (any
    /// other limit's numbers are one plain `SET` or `DEL`).
    /// Returns what the script answers: 1 when set, whether a key was deleted when removing.
    async fn change_runtime(
        &self,
        key: &LimitKey,
        text: Option<&str>,
        day: Option<u8>,
        period: Option<&'static Period>,
    ) -> Result<i64, StoreError> {
        let mut conn = self.inner.conn.clone();
        let Some(period) = period.filter(|p| p.unit() == PeriodUnit::Month) else {
            // No billing day, no count to move: the key alone, as a plain command.
            let runtime = self.key(key, Part::Runtime);
            return match text {
                Some(text) => redis::cmd("SET")
                    .arg(runtime)
                    .arg(text)
                    .query_async::<()>(&mut conn)
                    .await
                    .map(|()| 1),
                None => redis::cmd("DEL").arg(runtime).query_async(&mut conn).await,
            }
            .map_err(store_error);
        };
        let state = keys::state_key(&self.inner.prefix, key);
        let own = period.anchor();
        let mut held = self.inner.anchors.get(&state).unwrap_or(own);
        let mut at = self.client_now().unwrap_or_else(|| SystemClock.now_us());
        // One try, one more with the day Redis holds, one more if Redis' time crossed an end.
        for _ in 0..3 {
            let old = period.with_anchor(held).bounds_at(at);
            let new = period.with_anchor(day.unwrap_or(own)).bounds_at(at);
            let mut call = self.inner.scripts.runtime_change.key(&state);
            call.key(self.key(key, Part::Runtime))
                .arg(self.client_now_arg())
                .arg(text.unwrap_or(""))
                .arg(held)
                .arg(own)
                .arg(old.start)
                .arg(old.end)
                .arg(new.start)
                .arg(new.end);
            let reply: Vec<i64> = call.invoke_async(&mut conn).await.map_err(store_error)?;
            match *reply.as_slice() {
                [done] => {
                    self.inner.anchors.note(state, day);
                    return Ok(done);
                }
                [now, day_held] => {
                    at = Micros::new(u64::try_from(now).unwrap_or_default());
                    held = u8::try_from(day_held).unwrap_or(own);
                }
                _ => break,
            }
        }
        Err(StoreError::transient(
            "redis",
            "the identity's billing day kept changing while its run-time limit was changed",
        ))
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

    pub(super) async fn remove_runtime_key(
        &self,
        key: &LimitKey,
        period: Option<&'static Period>,
    ) -> Result<bool, StoreError> {
        let mut conn = self.inner.conn.clone();
        let deleted = self.change_runtime(key, None, None, period).await?;
        let unlisted: i64 = redis::cmd("HDEL")
            .arg(self.runtime_index_of(key))
            .arg(&key.identity)
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        Ok(deleted + unlisted > 0)
    }
}
