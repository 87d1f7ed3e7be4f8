//! The key format's version, written where every release can read it: `{prefix}:format`.
//!
//! The names and values of a store's keys (the state formats in `keys`, the scripts that read
//! them) are format [`KEY_FORMAT`]. A store writes that number under `{prefix}:format` when it
//! first reaches Redis (`SET NX`: the first writer's format stands), so a later release that
//! changes the format can tell the keys under a prefix apart from its own, and a release that
//! finds a format newer than its own says so instead of misreading the keys.
//!
//! Invariants: the marker never expires, as the run-time numbers do not (it is a few bytes per
//! prefix, and a marker that expired would make old keys look new); nothing here runs on a
//! decision's path.

use super::{NAME, RedisStore, store_error};
use crate::store::StoreError;

/// The format of the keys this release writes.
pub const KEY_FORMAT: u32 = 1;

/// The marker's name under a prefix.
pub(super) fn marker_key(prefix: &str) -> String {
    format!("{prefix}:format")
}

impl RedisStore {
    /// The key format the store's prefix holds, writing this release's ([`KEY_FORMAT`]) when none
    /// is written yet. An error when Redis cannot be asked, or when the prefix holds a format
    /// this release cannot read (a newer one, or a value that is not a format).
    pub async fn key_format(&self) -> Result<u32, StoreError> {
        let mut conn = self.inner.conn.clone();
        let key = marker_key(&self.inner.prefix);
        let before: Option<String> = redis::cmd("SET")
            .arg(&key)
            .arg(KEY_FORMAT)
            .arg("NX")
            .arg("GET")
            .query_async(&mut conn)
            .await
            .map_err(store_error)?;
        let Some(text) = before else {
            return Ok(KEY_FORMAT);
        };
        match text.parse::<u32>() {
            Ok(format) if format <= KEY_FORMAT => Ok(format),
            _ => Err(StoreError::permanent(
                NAME,
                format!(
                    "the keys under `{}:` are in format {text:?}, written by a newer release; \
                     this release reads format {KEY_FORMAT} (upgrade it, or give it another \
                     prefix)",
                    self.inner.prefix
                ),
            )),
        }
    }

    /// Logs an error when [`RedisStore::key_format`] finds keys this release cannot read.
    pub(super) async fn check_key_format(&self) {
        match self.key_format().await {
            Ok(format) => tracing::debug!(format, "Redis key format"),
            Err(error) => tracing::error!(%error, "Redis holds keys of another format"),
        }
    }
}
