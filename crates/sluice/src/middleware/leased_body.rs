//! [`LeasedBody`]: a response body that holds the request's lease (concurrency limits) until the
//! response is done.
//!
//! The middleware wraps every response body it passes on; when the rule took a lease, the body
//! carries its [`LeaseGuard`], released as soon as the body has sent its last frame (or failed),
//! or when it is dropped unfinished (the client went away, the server gave up). So a streamed
//! download holds its place until its last byte, and no path out of a handler leaks one. Bodies
//! without a lease pass through unchanged, at no cost but a `None`.

use std::pin::Pin;
use std::task::{Context, Poll};

use http_body::{Body, Frame, SizeHint};

use crate::limiter::LeaseGuard;

/// A response body and, while the response is not done, the lease it holds.
#[derive(Debug)]
pub struct LeasedBody<B> {
    inner: B,
    guard: Option<LeaseGuard>,
}

impl<B> LeasedBody<B> {
    /// A body holding no lease.
    pub fn new(inner: B) -> LeasedBody<B> {
        LeasedBody { inner, guard: None }
    }

    /// A body that releases `guard`'s lease once done.
    pub fn holding(inner: B, guard: Option<LeaseGuard>) -> LeasedBody<B> {
        LeasedBody { inner, guard }
    }

    /// Whether the body still holds a lease.
    pub fn holds_lease(&self) -> bool {
        self.guard.is_some()
    }

    /// The wrapped body (the lease, if still held, is released).
    pub fn into_inner(self) -> B {
        self.inner
    }
}

impl<B: From<String>> From<String> for LeasedBody<B> {
    fn from(text: String) -> LeasedBody<B> {
        LeasedBody::new(B::from(text))
    }
}

impl<B: Body + Unpin> Body for LeasedBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.inner).poll_frame(cx);
        let done = match &polled {
            Poll::Ready(None | Some(Err(_))) => true,
            Poll::Ready(Some(Ok(_))) => this.inner.is_end_stream(),
            Poll::Pending => false,
        };
        if done {
            // Dropping the guard releases the lease.
            this.guard = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
