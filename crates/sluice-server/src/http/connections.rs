//! Accepting connections under a cap, and closing the ones that stall.
//!
//! A client that opens connections and sends nothing, or half a request head, or a body that
//! never ends, must not starve real callers of file descriptors or tasks. So:
//! - at most `max_connections` are open at once; past that, new ones wait in the kernel's accept
//!   queue until one closes (no file descriptor is spent on them meanwhile);
//! - a connection with no request in progress is closed after `keep_alive_timeout` of silence
//!   (before its first request too);
//! - once the first byte of a request head arrives, the whole head must arrive within
//!   `header_read_timeout`;
//! - from a complete head to the response, a request has `request_timeout` (body reading
//!   included; 408 past it, `DEADLINE_EXCEEDED` on the gRPC port) — see [`super::deadline`];
//! - a response that is a long-lived stream (Envoy's RLQS, whose messages come every report
//!   interval) keeps its request in flight until the stream ends, so neither timeout cuts it;
//! - an HTTP/2 connection (gRPC, Envoy) carries at most [`MAX_STREAMS_PER_CONNECTION`] requests
//!   at once: more wait in the client, so stalled streams on one connection cannot take more
//!   than that many tasks;
//! - on shutdown the listener closes at once and the open connections get `shutdown_timeout` to
//!   finish the requests in flight; whatever is still open then is cut, so a stop is bounded.
//!
//! The state of a connection lives in a [`Tracker`](super::tracker) shared by its I/O (which sees bytes arrive)
//! and its service (which sees requests start and end). Those only store atomics: nothing wakes
//! anyone for them, since that would cost every request timer work. Instead a watchdog task
//! checks the tracker on a timer that can never miss a deadline (`Tracker::next_check`), and
//! orders the connection closed once its deadline has passed, or drained on shutdown. The
//! watchdog is a task of its own so that the connection's task, woken several times for every
//! request, polls no timer and no shutdown signal: it reads one atomic order instead.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use crate::config::ServerConfig;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::front::Front;
use super::tracker::{CLOSE, DRAIN, StreamingBody, TrackedIo, Tracker};

/// The most requests (HTTP/2 streams) one connection may have in progress at once, announced
/// in the connection's settings.
pub const MAX_STREAMS_PER_CONNECTION: u32 = 128;

/// Accepts connections until `shutdown` flips to true, then lets the open ones finish their
/// requests in flight, for at most `limits.shutdown_timeout`, and returns.
pub(crate) async fn accept_loop(
    listener: TcpListener,
    front: Front,
    limits: ServerConfig,
    mut shutdown: watch::Receiver<bool>,
) -> io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut builder = auto::Builder::new(TokioExecutor::new());
    // The tracker bounds header reading; hyper's own timer would also cut idle keep-alive
    // connections at the header timeout. Responses are small: copying the body behind the head
    // and sending one buffer costs less than a vectored write of two.
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(None)
        .writev(false);
    builder
        .http2()
        .max_concurrent_streams(MAX_STREAMS_PER_CONNECTION);
    let builder = Arc::new(builder);
    let limits = Arc::new(limits);
    let mut open = tokio::task::JoinSet::new();
    loop {
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.expect("the semaphore is never closed"),
            () = stopping(&mut shutdown) => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    // Out of file descriptors or a connection reset before accept: the listener
                    // itself is fine, so wait a little rather than spin.
                    tracing::warn!(%error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = stopping(&mut shutdown) => break,
        };
        let _ = stream.set_nodelay(true);
        let front = front.clone();
        let builder = builder.clone();
        let limits = limits.clone();
        let shutdown = shutdown.clone();
        open.spawn(async move {
            serve_connection(stream, peer, front, &builder, limits, shutdown).await;
            drop(permit);
        });
        // Reap finished connection tasks so the set does not grow.
        while open.try_join_next().is_some() {}
    }
    // Closing the listener refuses new connections at once; the open ones drain (hyper answers
    // the request in progress, then closes) for at most `shutdown_timeout`.
    drop(listener);
    let drained = tokio::time::timeout(limits.shutdown_timeout, async {
        while open.join_next().await.is_some() {}
    })
    .await;
    if drained.is_err() {
        tracing::warn!(
            connections = open.len(),
            shutdown_timeout = ?limits.shutdown_timeout,
            "requests still in flight at the shutdown timeout: closing their connections"
        );
        open.abort_all();
        while open.join_next().await.is_some() {}
    }
    Ok(())
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    front: Front,
    builder: &auto::Builder<TokioExecutor>,
    limits: Arc<ServerConfig>,
    shutdown: watch::Receiver<bool>,
) {
    let tracker = Arc::new(Tracker::new());
    let io = TrackedIo::new(stream, tracker.clone());
    let service_tracker = tracker.clone();
    let service =
        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            let guard = service_tracker.request();
            let streaming = request
                .uri()
                .path()
                .starts_with(crate::gateway::rlqs::STREAM_PATH_PREFIX);
            let response = front.call(request, peer);
            async move {
                let response = response.await;
                if streaming {
                    return response.map(|r| {
                        r.map(|body| axum::body::Body::new(StreamingBody::new(body, guard)))
                    });
                }
                drop(guard);
                response
            }
        });
    let connection = builder.serve_connection_with_upgrades(TokioIo::new(io), service);
    tokio::pin!(connection);
    let _watchdog = AbortOnDrop(tokio::spawn(watchdog(
        tracker.clone(),
        peer,
        limits,
        shutdown,
    )));
    let mut draining = false;
    let served = std::future::poll_fn(|cx| {
        // Registered before the order is read, so an order given meanwhile wakes this task.
        tracker.task.register(cx.waker());
        match tracker.order.load(Ordering::Acquire) {
            CLOSE => return Poll::Ready(Ok(())),
            DRAIN if !draining => {
                draining = true;
                connection.as_mut().graceful_shutdown();
            }
            _ => {}
        }
        connection.as_mut().poll(cx)
    })
    .await;
    if let Err(error) = served {
        tracing::debug!(%peer, %error, "connection ended with an error");
    }
}

/// Watches one connection: orders it closed once its deadline has passed, and drained when the
/// server shuts down (deadlines still apply while it drains).
async fn watchdog(
    tracker: Arc<Tracker>,
    peer: SocketAddr,
    limits: Arc<ServerConfig>,
    mut shutdown: watch::Receiver<bool>,
) {
    let mut draining = false;
    loop {
        let check = tracker.next_check(&limits);
        tokio::select! {
            () = tokio::time::sleep_until(check) => {
                if tracker.deadline(&limits).is_some_and(|d| d <= Instant::now()) {
                    tracing::debug!(%peer, "closing a stalled connection");
                    metrics::counter!(crate::metrics::CONNECTIONS_TIMED_OUT).increment(1);
                    tracker.give(CLOSE);
                    return;
                }
            }
            () = stopping(&mut shutdown), if !draining => {
                draining = true;
                tracker.give(DRAIN);
            }
        }
    }
}

/// Aborts a task when dropped: the watchdog ends with its connection, however that ends.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Completes once shutdown has been asked for.
async fn stopping(shutdown: &mut watch::Receiver<bool>) {
    // A closed channel means the server is going away too.
    let _ = shutdown.wait_for(|stop| *stop).await;
}
