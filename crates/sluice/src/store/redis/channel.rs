//! The invalidation channel on Redis pub/sub: `PUBLISH {prefix}:denial-cache <json>` from the
//! node that made an administrative change, one subscription per node delivering to its denial
//! cache.
//!
//! Freshness is confirmed with `PING` on the subscription connection itself: Redis answers in
//! order, so once the `PONG` arrives every message published before the `PING` reached the server
//! has been read — in particular every `PUBLISH` that had returned when the `PING` was sent; the
//! listener's clock, read just before sending the `PING`, is what is confirmed.
//! A `PING` unanswered within two heartbeats, or a dropped connection, ends the subscription;
//! a new one is attempted at once and then at growing intervals (up to 2 s), and each new
//! subscription first tells the listener to forget everything.

use std::sync::{Arc, Weak};
use std::time::Duration;

use futures::StreamExt;
use futures::future::FutureExt;
use redis::aio::{ConnectionManager, ConnectionManagerConfig, PubSubSink, PubSubStream};

use super::store_error;
use crate::store::invalidation::{Invalidation, InvalidationChannel, InvalidationListener};
use crate::store::{BoxFuture, StoreError};

/// Redis pub/sub carrying [`Invalidation`]s. Cheap to clone.
#[derive(Clone)]
pub struct RedisChannel {
    inner: Arc<Inner>,
}

struct Inner {
    client: redis::Client,
    name: String,
    publisher: ConnectionManager,
    timeout: Duration,
}

impl std::fmt::Debug for RedisChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisChannel")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl RedisChannel {
    /// The channel `{prefix}:denial-cache` on the Redis at `url` (connected lazily).
    pub fn new(url: &str, prefix: &str) -> Result<RedisChannel, StoreError> {
        let client = redis::Client::open(url)
            .map_err(|e| StoreError::permanent("redis", format!("invalid Redis URL: {e}")))?;
        let timeout = Duration::from_secs(1);
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(1);
        let publisher = ConnectionManager::new_lazy_with_config(client.clone(), config)
            .map_err(|e| StoreError::permanent("redis", format!("Redis client: {e}")))?;
        Ok(RedisChannel {
            inner: Arc::new(Inner {
                client,
                name: format!("{prefix}:denial-cache"),
                publisher,
                timeout,
            }),
        })
    }

    /// The Redis channel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

impl InvalidationChannel for RedisChannel {
    fn publish<'a>(
        &'a self,
        invalidation: &'a Invalidation,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = self.inner.publisher.clone();
            redis::cmd("PUBLISH")
                .arg(&self.inner.name)
                .arg(invalidation.encode())
                .query_async::<i64>(&mut conn)
                .await
                .map(drop)
                .map_err(store_error)
        })
    }

    fn subscribe(&self, listener: Weak<dyn InvalidationListener>, heartbeat: Duration) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("no Tokio runtime: the denial cache gets no invalidations");
            return;
        };
        let inner = self.inner.clone();
        runtime.spawn(async move {
            let mut backoff = Duration::ZERO;
            while listener.strong_count() > 0 {
                match inner.connect(&listener).await {
                    Ok((sink, stream)) => {
                        backoff = Duration::ZERO;
                        let error = inner.listen(&listener, sink, stream, heartbeat).await;
                        tracing::warn!(%error, channel = %inner.name, "invalidation subscription lost");
                    }
                    Err(error) => {
                        tracing::debug!(%error, channel = %inner.name, "cannot subscribe");
                    }
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).clamp(Duration::from_millis(50), Duration::from_secs(2));
            }
        });
    }
}

impl Inner {
    /// Subscribes; on success the listener has forgotten everything and is confirmed as of the
    /// moment the subscription was asked for.
    async fn connect(
        &self,
        listener: &Weak<dyn InvalidationListener>,
    ) -> Result<(PubSubSink, PubSubStream), StoreError> {
        let timed_out = || StoreError::transient("redis", "subscription timed out");
        let pubsub = tokio::time::timeout(self.timeout, self.client.get_async_pubsub())
            .await
            .map_err(|_| timed_out())?
            .map_err(store_error)?;
        let (mut sink, stream) = pubsub.split();
        let Some(as_of) = listener.upgrade().map(|l| l.now_us()) else {
            return Err(StoreError::transient("redis", "listener gone"));
        };
        tokio::time::timeout(self.timeout, sink.subscribe(&self.name))
            .await
            .map_err(|_| timed_out())?
            .map_err(store_error)?;
        let Some(l) = listener.upgrade() else {
            return Err(StoreError::transient("redis", "listener gone"));
        };
        l.apply(Invalidation::All);
        l.confirmed(as_of);
        tracing::debug!(channel = %self.name, "invalidation subscription up");
        Ok((sink, stream))
    }

    /// Delivers messages and confirms freshness until the subscription breaks or the listener is
    /// dropped; returns why it ended.
    async fn listen(
        &self,
        listener: &Weak<dyn InvalidationListener>,
        mut sink: PubSubSink,
        mut stream: PubSubStream,
        heartbeat: Duration,
    ) -> StoreError {
        let mut tick = tokio::time::interval(heartbeat);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                message = stream.next() => {
                    let Some(message) = message else {
                        return StoreError::transient("redis", "connection closed");
                    };
                    let Some(l) = listener.upgrade() else {
                        return StoreError::transient("redis", "listener gone");
                    };
                    l.apply(Invalidation::decode(message.get_payload_bytes()));
                }
                _ = tick.tick() => {
                    let Some(as_of) = listener.upgrade().map(|l| l.now_us()) else {
                        return StoreError::transient("redis", "listener gone");
                    };
                    match tokio::time::timeout(heartbeat * 2, sink.ping::<redis::Value>()).await {
                        Ok(Ok(_)) => {}
                        Ok(Err(error)) => return store_error(error),
                        Err(_) => return StoreError::transient("redis", "PING unanswered"),
                    }
                    let Some(l) = listener.upgrade() else {
                        return StoreError::transient("redis", "listener gone");
                    };
                    // Messages read before the PONG are already queued: apply them first.
                    while let Some(Some(message)) = stream.next().now_or_never() {
                        l.apply(Invalidation::decode(message.get_payload_bytes()));
                    }
                    l.confirmed(as_of);
                }
            }
        }
    }
}
