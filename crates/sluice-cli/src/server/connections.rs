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
//!   included; 408 past it) — applied by the router's deadline layer, see [`super::deadline`].
//!
//! The state of a connection lives in a [`Tracker`] shared by its I/O (which sees bytes arrive)
//! and its service (which sees requests start and end). Those only store atomics: nothing wakes
//! anyone for them, since that would cost every request timer work. Instead a watchdog task
//! checks the tracker on a timer that can never miss a deadline ([`Tracker::next_check`]), and
//! orders the connection closed once its deadline has passed, or drained on shutdown. The
//! watchdog is a task of its own so that the connection's task, woken several times for every
//! request, polls no timer and no shutdown signal: it reads one atomic order instead.
//!
//! **Fairness.** A connection yields to the others after each response: its next read first
//! returns `Pending` and wakes its own task, which the runtime then runs after the tasks already
//! waiting. Without that, a client that sends its next request as soon as it reads a response
//! (a load generator, a proxy on another core) was served request after request within one poll
//! of its task, up to the runtime's budget of 128, while every other connection on that worker
//! waited: the median latency fell, the 99th percentile rose by half or more.

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use futures::task::AtomicWaker;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use sluice::config::ServerConfig;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::Front;

/// No request in progress and no byte of one received.
const IDLE: u64 = u64::MAX;

/// What the watchdog orders a connection to do: keep serving, finish its requests in flight and
/// close (shutdown), or close now (a deadline passed).
const SERVE: u8 = 0;
const DRAIN: u8 = 1;
const CLOSE: u8 = 2;

/// What one connection is doing, in milliseconds since it opened.
struct Tracker {
    opened: Instant,
    /// Requests whose head is complete and whose response is not yet produced.
    in_flight: AtomicUsize,
    /// When the first byte of the pending request head arrived, or [`IDLE`].
    head_started: AtomicU64,
    /// When the connection last became idle (opened, or its last response produced).
    idle_since: AtomicU64,
    /// The watchdog's order: [`SERVE`], [`DRAIN`] or [`CLOSE`].
    order: AtomicU8,
    /// Wakes the connection's task to read a new order.
    task: AtomicWaker,
    /// A response was produced since the connection last read: its next read yields first.
    answered: AtomicBool,
}

impl Tracker {
    fn new() -> Tracker {
        Tracker {
            opened: Instant::now(),
            in_flight: AtomicUsize::new(0),
            head_started: AtomicU64::new(IDLE),
            idle_since: AtomicU64::new(0),
            order: AtomicU8::new(SERVE),
            task: AtomicWaker::new(),
            answered: AtomicBool::new(false),
        }
    }

    fn give(&self, order: u8) {
        self.order.store(order, Ordering::Release);
        self.task.wake();
    }

    fn now(&self) -> u64 {
        sluice::clock::millis(self.opened.elapsed())
    }

    /// Bytes arrived: with no request in progress, they start a head.
    fn on_read(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.head_started.load(Ordering::Relaxed) == IDLE
        {
            self.head_started.store(self.now(), Ordering::Relaxed);
        }
    }

    fn on_request(&self) {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_started.store(IDLE, Ordering::Relaxed);
    }

    fn on_response(&self) {
        self.answered.store(true, Ordering::Relaxed);
        if self.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.idle_since.store(self.now(), Ordering::Relaxed);
        }
    }

    /// When the connection must be closed if nothing changes; `None` while a request runs.
    fn deadline(&self, limits: &ServerConfig) -> Option<Instant> {
        if self.in_flight.load(Ordering::Relaxed) > 0 {
            return None;
        }
        let ms = match self.head_started.load(Ordering::Relaxed) {
            IDLE => self.idle_since.load(Ordering::Relaxed) + millis(limits.keep_alive_timeout),
            started => started + millis(limits.header_read_timeout),
        };
        Some(self.opened + Duration::from_millis(ms))
    }

    /// When to look at the tracker next: its deadline, but no later than the shortest timeout
    /// from now. Every deadline that a change made in the meantime can set is a whole timeout
    /// after that change (a head starting, a response ending), so none is missed; and while a
    /// request runs (no deadline) the task still wakes now and then.
    fn next_check(&self, limits: &ServerConfig) -> Instant {
        let shortest = limits
            .header_read_timeout
            .min(limits.keep_alive_timeout)
            .max(Duration::from_millis(1));
        let horizon = Instant::now() + shortest;
        self.deadline(limits).map_or(horizon, |d| d.min(horizon))
    }
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX / 4)
}

/// A socket that tells its [`Tracker`] when bytes arrive.
struct TrackedIo {
    inner: TcpStream,
    tracker: Arc<Tracker>,
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.tracker.answered.swap(false, Ordering::Relaxed) {
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        let before = buf.filled().len();
        let poll = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before {
            self.tracker.on_read();
        }
        poll
    }
}

impl AsyncWrite for TrackedIo {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
}

/// Decrements the in-flight count when a request's future ends, however it ends.
struct InFlight(Arc<Tracker>);

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.on_response();
    }
}

/// Accepts connections until `shutdown` flips to true, then lets the open ones finish their
/// requests in flight and returns.
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
    drop(listener);
    while open.join_next().await.is_some() {}
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
    let io = TrackedIo {
        inner: stream,
        tracker: tracker.clone(),
    };
    let service_tracker = tracker.clone();
    let service =
        hyper::service::service_fn(move |request: http::Request<hyper::body::Incoming>| {
            service_tracker.on_request();
            let guard = InFlight(service_tracker.clone());
            let response = front.call(request, peer);
            async move {
                let response = response.await;
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
                    metrics::counter!("sluice_connections_timed_out_total").increment(1);
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::{Wake, Waker};

    use tokio::io::AsyncWriteExt;

    use super::*;

    struct CountingWaker(AtomicUsize);

    impl Wake for CountingWaker {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// After a response, the connection's next read gives way once, waking its own task so that
    /// the runtime polls it again after the tasks already waiting; then it reads as usual.
    #[tokio::test]
    async fn a_connection_yields_once_after_each_response() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("an address");
        let mut client = TcpStream::connect(address).await.expect("connect");
        let (server, _) = listener.accept().await.expect("accept");
        let tracker = Arc::new(Tracker::new());
        let mut io = TrackedIo {
            inner: server,
            tracker: tracker.clone(),
        };
        let woken = Arc::new(CountingWaker(AtomicUsize::new(0)));
        let waker = Waker::from(woken.clone());
        let mut cx = Context::from_waker(&waker);
        let mut bytes = [0u8; 64];
        let mut read = |io: &mut TrackedIo, bytes: &mut [u8]| {
            let mut buf = ReadBuf::new(bytes);
            let poll = Pin::new(io).poll_read(&mut cx, &mut buf);
            poll.map(|done| done.map(|()| buf.filled().len()))
        };

        for request in [
            &b"POST /v1/check HTTP/1.1\r\n\r\n"[..],
            b"GET /healthz HTTP/1.1\r\n\r\n",
        ] {
            client.write_all(request).await.expect("write");
            io.inner.readable().await.expect("readable");
            tracker.on_request();
            tracker.on_response();
            let before = woken.0.load(Ordering::Relaxed);
            assert!(read(&mut io, &mut bytes).is_pending(), "yields first");
            assert_eq!(
                woken.0.load(Ordering::Relaxed),
                before + 1,
                "and wakes itself"
            );
            match read(&mut io, &mut bytes) {
                Poll::Ready(Ok(n)) => assert_eq!(&bytes[..n], request),
                other => panic!("then reads what arrived: {other:?}"),
            }
        }
        // No response in between: nothing to give way for.
        client.write_all(b"x").await.expect("write");
        io.inner.readable().await.expect("readable");
        assert!(matches!(read(&mut io, &mut bytes), Poll::Ready(Ok(1))));
    }
}
