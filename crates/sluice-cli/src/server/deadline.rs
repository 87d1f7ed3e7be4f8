//! `request_timeout`: a request that has not been answered this long after its head is answered
//! 408 instead (a slow body, a store that stalls past its own timeout).
//!
//! Most decisions are answered at their first poll (a memory store, a denial from the cache), so
//! the timer is armed only when a request is still pending after it: such a request costs the
//! runtime's timer nothing. The deadline counts from that first poll, which runs as soon as the
//! head is read.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use tokio::time::Sleep;
use tower::{Layer, Service};

/// Wraps a service so that each request gets `timeout` (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    timeout: Duration,
}

impl DeadlineLayer {
    pub fn new(timeout: Duration) -> DeadlineLayer {
        DeadlineLayer { timeout }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            timeout: self.timeout,
        }
    }
}

/// The service [`DeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    timeout: Duration,
}

impl<S, B> Service<Request<B>> for Deadline<S>
where
    S: Service<Request<B>, Response = Response, Error = Infallible>,
{
    type Response = Response;
    type Error = Infallible;
    type Future = DeadlineFuture<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        DeadlineFuture::new(self.inner.call(request), self.timeout)
    }
}

pin_project_lite::pin_project! {
    /// A request's response, or 408 once its timer (armed at the first pending poll) fires.
    pub struct DeadlineFuture<F> {
        #[pin]
        inner: F,
        // Boxed: a timer is several cache lines, and the request's future, moved whole on its
        // way into the connection, would carry them even when never armed.
        timer: Option<Pin<Box<Sleep>>>,
        timeout: Duration,
    }
}

impl<F> DeadlineFuture<F> {
    /// `inner`, or 408 once it has been pending for `timeout`.
    pub fn new(inner: F, timeout: Duration) -> DeadlineFuture<F> {
        DeadlineFuture {
            inner,
            timer: None,
            timeout,
        }
    }
}

impl<F> Future for DeadlineFuture<F>
where
    F: Future<Output = Result<Response, Infallible>>,
{
    type Output = Result<Response, Infallible>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(response) = this.inner.poll(cx) {
            return Poll::Ready(response);
        }
        let timeout = *this.timeout;
        let timer = this
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Ok(StatusCode::REQUEST_TIMEOUT.into_response())),
            Poll::Pending => Poll::Pending,
        }
    }
}
