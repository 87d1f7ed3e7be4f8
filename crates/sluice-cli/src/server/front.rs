//! What answers each request a connection reads: the decision routes (`POST /v1/check`,
//! `POST /v1/peek`) at once, everything else through the router.
//!
//! The decision routes carry nearly all of a busy service's traffic. Through the router, each
//! of their requests paid for route matching, a map of request extensions (allocated per
//! request), a boxed service and axum's extractor chain: about a fifth of the service's own
//! instructions per request, and half of its allocations. Here the same code answers them
//! ([`routes::answer`](super::routes)) from the same extractions (the `view` query, the body
//! under [`MAX_BODY_BYTES`](super::MAX_BODY_BYTES)) under the same `request_timeout`, so the
//! answers are the router's. Any other method or path, and every request of a service without
//! decision routes (the gRPC listener), goes to the router, which still routes the decision
//! paths too (their other methods get its 405).

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use futures::future::Either;
use http::{Method, Request};
use hyper::body::Incoming;
use sluice::algorithm::Mode;
use tower::ServiceExt;

use super::AppState;
use super::deadline::DeadlineFuture;
use super::routes;

/// The service of every connection of one listener. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Front {
    router: Router,
    decisions: Option<Decisions>,
}

/// What the decision routes need to answer without the router.
#[derive(Clone)]
struct Decisions {
    state: Arc<AppState>,
    timeout: Duration,
}

impl Front {
    /// Every request goes to `router`.
    pub(crate) fn router(router: Router) -> Front {
        Front {
            router,
            decisions: None,
        }
    }

    /// The decision routes are answered from `state` within `timeout`; the rest goes to
    /// `router`, which applies its own deadline.
    pub(crate) fn with_decisions(router: Router, state: Arc<AppState>, timeout: Duration) -> Front {
        Front {
            router,
            decisions: Some(Decisions { state, timeout }),
        }
    }

    /// Answers one request from `peer`.
    pub(crate) fn call(
        &self,
        mut request: Request<Incoming>,
        peer: SocketAddr,
    ) -> impl Future<Output = Result<Response, Infallible>> + Send + use<> {
        if let (Some(decisions), Some(mode)) = (&self.decisions, decision_route(&request)) {
            let state = decisions.state.clone();
            let answer = async move {
                Ok(routes::answer_request(&state, request.map(Body::new), mode).await)
            };
            return Either::Left(DeadlineFuture::new(answer, decisions.timeout));
        }
        request.extensions_mut().insert(ConnectInfo(peer));
        Either::Right(self.router.clone().oneshot(request.map(Body::new)))
    }
}

/// The mode of a decision route, or `None` for any other request.
fn decision_route<B>(request: &Request<B>) -> Option<Mode> {
    if request.method() != Method::POST {
        return None;
    }
    match request.uri().path() {
        "/v1/check" => Some(Mode::Apply),
        "/v1/peek" => Some(Mode::Peek),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, uri: &str) -> Request<()> {
        Request::builder()
            .method(method)
            .uri(uri)
            .body(())
            .expect("a valid request")
    }

    #[test]
    fn only_posts_to_the_decision_paths_are_decision_routes() {
        let cases = [
            (Method::POST, "/v1/check", Some(Mode::Apply)),
            (Method::POST, "/v1/peek?view=compact", Some(Mode::Peek)),
            (
                Method::POST,
                "http://example.test/v1/check",
                Some(Mode::Apply),
            ),
            (Method::GET, "/v1/check", None),
            (Method::PUT, "/v1/peek", None),
            (Method::POST, "/v1/check/", None),
            (Method::POST, "/v1/checks", None),
            (Method::POST, "/V1/check", None),
            (Method::POST, "/v1/release", None),
        ];
        for (method, uri, mode) in cases {
            assert_eq!(
                decision_route(&request(method.clone(), uri)),
                mode,
                "{method} {uri}"
            );
        }
    }
}
