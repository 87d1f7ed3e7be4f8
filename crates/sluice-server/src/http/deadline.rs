//! `request_timeout`: a request that has not been answered this long after its head is answered
//! 408 instead (a slow body, a store that stalls past its own timeout); on the gRPC port, with
//! the same status as a gRPC error (`DEADLINE_EXCEEDED`, code `timeout`: [`DeadlineLayer::grpc`]).
//!
//! Most decisions are answered at their first poll (a memory store, a denial from the cache), so
//! the timer is armed only when a request is still pending after it: such a request costs the
//! runtime's timer nothing. The deadline counts from that first poll, which runs as soon as the
//! head is read.
//!
//! A decision that waits for a remote store is already under a timer: the limiter's
//! `store.timeout`, past which the fail policy answers. When that bound is well within
//! `request_timeout`, the decision routes arm no second timer for that wait
//! ([`Budget::within`] with `arm` false); a timer armed earlier (a body that was slow to come)
//! still runs, so the response never comes later than the deadline would have it.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::http::Request;
use axum::response::{IntoResponse, Response};
use tokio::time::Sleep;
use tower::{Layer, Service};

/// Wraps a service so that each request gets `timeout` (see the module docs).
#[derive(Debug, Clone, Copy)]
pub struct DeadlineLayer {
    timeout: Duration,
    answer: fn() -> Response,
}

impl DeadlineLayer {
    /// Answers a request past `timeout` with 408 and the JSON error body.
    pub fn new(timeout: Duration) -> DeadlineLayer {
        DeadlineLayer {
            timeout,
            answer: timed_out,
        }
    }

    /// Answers a gRPC call past `timeout` with its error status (`DEADLINE_EXCEEDED`).
    pub fn grpc(timeout: Duration) -> DeadlineLayer {
        DeadlineLayer {
            timeout,
            answer: grpc_timed_out,
        }
    }
}

impl<S> Layer<S> for DeadlineLayer {
    type Service = Deadline<S>;

    fn layer(&self, inner: S) -> Deadline<S> {
        Deadline {
            inner,
            timeout: self.timeout,
            answer: self.answer,
        }
    }
}

/// The service [`DeadlineLayer`] makes.
#[derive(Debug, Clone)]
pub struct Deadline<S> {
    inner: S,
    timeout: Duration,
    answer: fn() -> Response,
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
        let mut future = DeadlineFuture::new(self.inner.call(request), self.timeout);
        future.answer = self.answer;
        future
    }
}

/// The time one request has: `timeout` from its first wait, on a timer armed then.
#[derive(Debug)]
pub struct Budget {
    // Boxed: a timer is several cache lines, and the request's future, moved whole on its way
    // into the connection, would carry them even when never armed.
    timer: Option<Pin<Box<Sleep>>>,
    timeout: Duration,
}

impl Budget {
    pub fn new(timeout: Duration) -> Budget {
        Budget {
            timer: None,
            timeout,
        }
    }

    /// Whether the time is up, arming the timer first if it is not yet (the caller waits).
    fn poll_spent(&mut self, cx: &mut Context<'_>) -> bool {
        let timeout = self.timeout;
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        timer.as_mut().poll(cx).is_ready()
    }

    /// `work`'s output, or `None` once the time is up. A wait of `work` arms the timer only
    /// when `arm` is true; a timer armed before counts either way.
    pub async fn within<F: Future>(&mut self, work: F, arm: bool) -> Option<F::Output> {
        let mut work = std::pin::pin!(work);
        std::future::poll_fn(|cx| {
            if let Poll::Ready(output) = work.as_mut().poll(cx) {
                return Poll::Ready(Some(output));
            }
            if (arm || self.timer.is_some()) && self.poll_spent(cx) {
                return Poll::Ready(None);
            }
            Poll::Pending
        })
        .await
    }
}

fn timeout_error() -> crate::api_error::ApiError {
    crate::api_error::ApiError::new(
        crate::api_error::ErrorCode::Timeout,
        "the request was not answered within `request_timeout`",
    )
}

/// The answer to a request whose time is up.
pub fn timed_out() -> Response {
    timeout_error().into_response()
}

/// The answer to a gRPC call whose time is up: its status, in the trailers-only form.
pub fn grpc_timed_out() -> Response {
    timeout_error().to_status().into_http()
}

pin_project_lite::pin_project! {
    /// A request's response, or 408 once its timer (armed at the first pending poll) fires.
    pub struct DeadlineFuture<F> {
        #[pin]
        inner: F,
        budget: Budget,
        answer: fn() -> Response,
    }
}

impl<F> DeadlineFuture<F> {
    /// `inner`, or 408 once it has been pending for `timeout`.
    pub fn new(inner: F, timeout: Duration) -> DeadlineFuture<F> {
        DeadlineFuture {
            inner,
            budget: Budget::new(timeout),
            answer: timed_out,
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
        if this.budget.poll_spent(cx) {
            return Poll::Ready(Ok((this.answer)()));
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use std::future::pending;

    use super::*;

    const TIMEOUT: Duration = Duration::from_secs(1);

    /// Whether `within` is still waiting after ten times the budget's timeout.
    async fn still_waiting<F: Future>(within: F) -> bool {
        tokio::time::timeout(TIMEOUT * 10, within).await.is_err()
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_that_arms_the_timer_ends_at_the_timeout() {
        let mut budget = Budget::new(TIMEOUT);
        let started = tokio::time::Instant::now();
        assert_eq!(budget.within(pending::<()>(), true).await, None);
        assert_eq!(started.elapsed(), TIMEOUT);
    }

    #[tokio::test(start_paused = true)]
    async fn work_done_without_waiting_arms_nothing() {
        let mut budget = Budget::new(TIMEOUT);
        assert_eq!(budget.within(async { 7 }, true).await, Some(7));
        assert!(budget.timer.is_none());
        assert!(still_waiting(budget.within(pending::<()>(), false)).await);
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_left_unarmed_is_not_cut() {
        let mut budget = Budget::new(TIMEOUT);
        assert!(still_waiting(budget.within(pending::<()>(), false)).await);
        assert!(budget.timer.is_none());
    }

    /// A slow body arms the timer; the store's wait that follows counts against the same
    /// deadline, armed or not.
    #[tokio::test(start_paused = true)]
    async fn a_timer_armed_before_keeps_counting() {
        let mut budget = Budget::new(TIMEOUT);
        let started = tokio::time::Instant::now();
        let slow = tokio::time::sleep(TIMEOUT / 4);
        assert_eq!(budget.within(slow, true).await, Some(()));
        assert_eq!(budget.within(pending::<()>(), false).await, None);
        assert_eq!(started.elapsed(), TIMEOUT);
    }
}
