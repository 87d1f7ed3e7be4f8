//! What one connection is doing, as its socket and its service see it: the [`Tracker`] the
//! watchdog of `connections` reads, the socket that feeds it ([`TrackedIo`]), and the guard that
//! marks a request's end ([`InFlight`]).
//!
//! **Fairness.** A connection yields to the others after each response: its next read first
//! returns `Pending` and wakes its own task, which the runtime then runs after the tasks already
//! waiting. Without that, a client that sends its next request as soon as it reads a response
//! (a load generator, a proxy on another core) was served request after request within one poll
//! of its task, up to the runtime's budget of 128, while every other connection on that worker
//! waited: the median latency fell, the 99th percentile rose by half or more. Every few dozen
//! responses, the thread gives its core to other threads as well ([`super::core_yield`]).

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use crate::config::ServerConfig;
use futures::task::AtomicWaker;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// No request in progress and no byte of one received.
const IDLE: u64 = u64::MAX;

/// What the watchdog orders a connection to do: keep serving, finish its requests in flight and
/// close (shutdown), or close now (a deadline passed).
const SERVE: u8 = 0;
pub(super) const DRAIN: u8 = 1;
pub(super) const CLOSE: u8 = 2;

/// What one connection is doing, in milliseconds since it opened.
pub(super) struct Tracker {
    opened: Instant,
    /// Requests whose head is complete and whose response is not yet produced.
    in_flight: AtomicUsize,
    /// When the first byte of the pending request head arrived, or [`IDLE`].
    head_started: AtomicU64,
    /// When the connection last became idle (opened, or its last response produced).
    idle_since: AtomicU64,
    /// The watchdog's order: [`SERVE`], [`DRAIN`] or [`CLOSE`].
    pub(super) order: AtomicU8,
    /// Wakes the connection's task to read a new order.
    pub(super) task: AtomicWaker,
    /// A response was produced since the connection last read: its next read yields first.
    answered: AtomicBool,
}

impl Tracker {
    pub(super) fn new() -> Tracker {
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

    pub(super) fn give(&self, order: u8) {
        self.order.store(order, Ordering::Release);
        self.task.wake();
    }

    fn now(&self) -> u64 {
        millis(self.opened.elapsed())
    }

    /// Bytes arrived: with no request in progress, they start a head.
    fn on_read(&self) {
        if self.in_flight.load(Ordering::Relaxed) == 0
            && self.head_started.load(Ordering::Relaxed) == IDLE
        {
            self.head_started.store(self.now(), Ordering::Relaxed);
        }
    }

    /// A request's head is complete: it is in flight until the returned guard drops.
    pub(super) fn request(self: &Arc<Tracker>) -> InFlight {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.head_started.store(IDLE, Ordering::Relaxed);
        InFlight(self.clone())
    }

    fn on_response(&self) {
        self.answered.store(true, Ordering::Relaxed);
        if self.in_flight.fetch_sub(1, Ordering::Relaxed) == 1 {
            self.idle_since.store(self.now(), Ordering::Relaxed);
        }
    }

    /// When the connection must be closed if nothing changes; `None` while a request runs.
    pub(super) fn deadline(&self, limits: &ServerConfig) -> Option<Instant> {
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
    pub(super) fn next_check(&self, limits: &ServerConfig) -> Instant {
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
pub(super) struct TrackedIo {
    inner: TcpStream,
    tracker: Arc<Tracker>,
}

impl TrackedIo {
    pub(super) fn new(inner: TcpStream, tracker: Arc<Tracker>) -> TrackedIo {
        TrackedIo { inner, tracker }
    }
}

impl AsyncRead for TrackedIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.tracker.answered.swap(false, Ordering::Relaxed) {
            super::core_yield::responded();
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
pub(super) struct InFlight(Arc<Tracker>);

pin_project_lite::pin_project! {
    /// The body of a response that is a long-lived stream (an RLQS stream): the request stays in
    /// flight until the body ends or is dropped, so the connection's idle and head timeouts do
    /// not cut a stream whose messages come every report interval.
    pub(super) struct StreamingBody {
        #[pin]
        body: axum::body::Body,
        in_flight: InFlight,
    }
}

impl StreamingBody {
    pub(super) fn new(body: axum::body::Body, in_flight: InFlight) -> StreamingBody {
        StreamingBody { body, in_flight }
    }
}

impl hyper::body::Body for StreamingBody {
    type Data = axum::body::Bytes;
    type Error = axum::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        self.project().body.poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.0.on_response();
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;
    use std::task::{Wake, Waker};

    use tokio::io::AsyncWriteExt;
    use tokio::net::TcpListener;

    use super::super::core_yield::sent_on_this_thread;
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
        let mut io = TrackedIo::new(server, tracker.clone());
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
            drop(tracker.request());
            let before = woken.0.load(Ordering::Relaxed);
            let sent = sent_on_this_thread();
            assert!(read(&mut io, &mut bytes).is_pending(), "yields first");
            assert_eq!(
                sent_on_this_thread(),
                sent + 1,
                "counts the response towards the thread's next yield of its core"
            );
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
