//! How a Redis client error becomes a [`StoreError`]: transient when retrying later may pass
//! (I/O, timeouts, dropped or refused connections, errors the client would retry), so that the
//! limiter's breaker and fail policy treat it as the store being away rather than broken.

use redis::{RedisError, RetryMethod};

use super::NAME;
use crate::store::StoreError;

/// Maps a client error: whatever may pass by retrying later is transient.
pub(super) fn store_error(e: RedisError) -> StoreError {
    let transient = e.is_io_error()
        || e.is_timeout()
        || e.is_connection_dropped()
        || e.is_connection_refusal()
        || !matches!(e.retry_method(), RetryMethod::NoRetry);
    StoreError {
        store: NAME,
        message: e.to_string(),
        transient,
    }
}
