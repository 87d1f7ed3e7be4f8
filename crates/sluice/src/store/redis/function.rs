//! The general decision as a Redis function: `FCALL` of the [`Library`](super::script::Library),
//! loaded with `FUNCTION LOAD REPLACE` when the store connects, and again whenever a server says
//! it does not have it (a new node, a failover to a server that never had it, a `FUNCTION
//! FLUSH`). `FUNCTION LOAD` goes to every primary of a Cluster; replicas receive it from theirs.
//!
//! A server that refuses functions (before Redis 7, or an ACL without `FUNCTION`) gets the same
//! code as the script `Scripts::decide` (`EVALSHA`), from then on: the store remembers the refusal.

use std::sync::atomic::Ordering;

use redis::RedisError;

use super::{RedisStore, store_error};
use crate::store::StoreError;

/// Whether an error says the server lacks the function (and may load it).
fn missing(e: &RedisError) -> bool {
    e.to_string().contains("Function not found")
}

/// Whether an error says the server does not do functions at all.
fn refused(e: &RedisError) -> bool {
    let text = e.to_string();
    text.contains("unknown command") || text.contains("NOPERM") || text.contains("no permissions")
}

impl RedisStore {
    /// Loads the library. `Ok(false)`: the server refuses functions (remembered; scripts are
    /// used from then on).
    pub(super) async fn load_library(&self) -> Result<bool, StoreError> {
        let mut conn = self.inner.conn.clone();
        let loaded: Result<String, RedisError> = redis::cmd("FUNCTION")
            .arg("LOAD")
            .arg("REPLACE")
            .arg(&self.inner.scripts.library.source)
            .query_async(&mut conn)
            .await;
        match loaded {
            Ok(_) => Ok(true),
            Err(e) if refused(&e) => {
                if !self.inner.no_functions.swap(true, Ordering::Relaxed) {
                    tracing::warn!(error = %e, "Redis refuses functions; the general decision runs as a script");
                }
                Ok(false)
            }
            Err(e) => Err(store_error(e)),
        }
    }

    /// Runs the general decision: `FCALL`, loading the library when a server lacks it, or the
    /// script where functions are refused.
    pub(super) async fn call_general(
        &self,
        keys: &[String],
        args: &[String],
    ) -> Result<redis::Value, StoreError> {
        let mut conn = self.inner.conn.clone();
        if !self.inner.no_functions.load(Ordering::Relaxed) {
            let mut fcall = redis::cmd("FCALL");
            fcall
                .arg(&self.inner.scripts.library.function)
                .arg(keys.len())
                .arg(keys)
                .arg(args);
            match fcall.query_async(&mut conn).await {
                Ok(reply) => return Ok(reply),
                Err(e) if missing(&e) || refused(&e) => {
                    if self.load_library().await? {
                        return fcall.query_async(&mut conn).await.map_err(store_error);
                    }
                }
                Err(e) => return Err(store_error(e)),
            }
        }
        let mut invocation = self.inner.scripts.decide.prepare_invoke();
        for key in keys {
            invocation.key(key);
        }
        for arg in args {
            invocation.arg(arg);
        }
        invocation
            .invoke_async(&mut conn)
            .await
            .map_err(store_error)
    }
}
