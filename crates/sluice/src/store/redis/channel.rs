//! The invalidation channel on Redis pub/sub: `PUBLISH {prefix}:denial-cache <json>` from the
//! node that made an administrative change, one subscription per node delivering to its denial
//! cache. [`RedisStore::channel`] makes one for a store: it publishes through the store's own
//! connection and subscribes with the store's TLS settings and credentials.
//!
//! Where it subscribes: the server of a `redis://` URL; on a Cluster, any of the seed nodes (Redis
//! Cluster forwards every `PUBLISH` to every node), the next one when a subscription breaks. On
//! Sentinel URLs it does not subscribe (the primary moves; the sentinels carry no data): the
//! denial cache then keeps each denial at most its `max_stale`.
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
use redis::aio::{PubSubSink, PubSubStream};
use redis::{ConnectionInfo, RedisResult};

use super::connection::node_info;
use super::url::{RedisUrl, Topology};
use super::{RedisStore, store_error};
use crate::store::invalidation::{Invalidation, InvalidationChannel, InvalidationListener};
use crate::store::{BoxFuture, StoreError};

/// Redis pub/sub carrying [`Invalidation`]s. Cheap to clone.
#[derive(Clone)]
pub struct RedisChannel {
    inner: Arc<Inner>,
}

struct Inner {
    store: RedisStore,
    name: String,
    timeout: Duration,
}

impl std::fmt::Debug for RedisChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisChannel")
            .field("name", &self.inner.name)
            .finish_non_exhaustive()
    }
}

impl RedisStore {
    /// The invalidation channel `{prefix}:denial-cache` of this store's deployment.
    pub fn channel(&self) -> RedisChannel {
        RedisChannel {
            inner: Arc::new(Inner {
                name: format!("{}:denial-cache", self.inner.prefix),
                timeout: self.inner.dial.connect_timeout,
                store: self.clone(),
            }),
        }
    }
}

impl RedisChannel {
    /// The Redis channel's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }
}

/// The nodes a channel may subscribe to, in the order it tries them.
pub(super) fn subscription_nodes(url: &RedisUrl) -> RedisResult<Vec<ConnectionInfo>> {
    match url.topology {
        Topology::Single | Topology::Cluster => url
            .nodes
            .iter()
            .map(|(host, port)| node_info(url, host, *port))
            .collect(),
        Topology::Sentinel { .. } => Ok(Vec::new()),
    }
}

impl InvalidationChannel for RedisChannel {
    fn publish<'a>(
        &'a self,
        invalidation: &'a Invalidation,
    ) -> BoxFuture<'a, Result<(), StoreError>> {
        Box::pin(async move {
            let mut conn = self.inner.store.inner.conn.clone();
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
        let nodes = self.inner.store.inner.subscribe_to.len();
        if nodes == 0 {
            tracing::info!(
                "no invalidation subscription on this deployment: cached denials live at most \
                 the denial cache's max_stale"
            );
            return;
        }
        let inner = self.inner.clone();
        runtime.spawn(async move {
            let mut backoff = Duration::ZERO;
            let mut node = 0;
            while listener.strong_count() > 0 {
                let result = inner.connect(&listener, node % nodes).await;
                node += 1;
                match result {
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
        node: usize,
    ) -> Result<(PubSubSink, PubSubStream), StoreError> {
        let timed_out = || StoreError::transient("redis", "subscription timed out");
        let store = &self.store.inner;
        let client = store
            .dial
            .client(store.subscribe_to[node].clone())
            .map_err(store_error)?;
        let pubsub = tokio::time::timeout(self.timeout, client.get_async_pubsub())
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
