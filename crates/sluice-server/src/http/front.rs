//! What answers each request a connection reads: the decision routes (`POST /v1/check`,
//! `POST /v1/peek`) at once, everything else through the router.
//!
//! The decision routes carry nearly all of a busy service's traffic. Through the router, each
//! of their requests paid for route matching, a map of request extensions (allocated per
//! request), a boxed service and axum's extractor chain: about a fifth of the service's own
//! instructions per request, and half of its allocations. Here the same code answers them
//! ([`routes::answer`](super::routes)) from the same extractions (the `view` query, the body
//! under [`MAX_BODY_BYTES`](super::error::MAX_BODY_BYTES)) under the same `request_timeout`, so the
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
use tokio::time::Instant;
use tower::ServiceExt;

use super::caller_deadline;
use super::deadline::Budget;
use super::latency::RouteTimer;
use super::routes;
use crate::state::AppState;

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
    /// A decision's wait for its store ends well within `timeout` on its own.
    store_bounded: bool,
    /// The store is a remote one: a caller's deadline can spare it a call.
    remote: bool,
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
        let store_bounded = store_bounded(state.limiter.options().timeout, timeout);
        let remote = !state.limiter.store().in_process();
        Front {
            router,
            decisions: Some(Decisions {
                state,
                timeout,
                store_bounded,
                remote,
            }),
        }
    }

    /// Answers one request from `peer`.
    pub(crate) fn call(
        &self,
        mut request: Request<Incoming>,
        peer: SocketAddr,
    ) -> impl Future<Output = Result<Response, Infallible>> + Send + use<> {
        if let (Some(decisions), Some(mode)) = (&self.decisions, decision_route(&request)) {
            let start = RouteTimer::start();
            let state = decisions.state.clone();
            let (budget, store_bounded) = (Budget::new(decisions.timeout), decisions.store_bounded);
            // A decision on an in-process store is always made: no deadline to read, no wait
            // in the service to measure.
            let arrived = decisions.remote.then(Instant::now);
            let deadline = arrived.and_then(|at| caller_deadline::deadline(request.headers(), at));
            return Either::Left(async move {
                let answer = routes::answer_request(&state, request, mode, budget, store_bounded);
                let response = caller_deadline::scoped(arrived, deadline, answer).await;
                // The state holds the timers: cloning its `Arc` is all a request pays.
                state.decision_timers[usize::from(mode == Mode::Peek)].record(start);
                Ok(response)
            });
        }
        request.extensions_mut().insert(ConnectInfo(peer));
        // Read here, where the connection hands the request over: a gRPC call's own task may
        // wait its turn on the runtime before it first runs.
        request
            .extensions_mut()
            .insert(caller_deadline::Arrived(Instant::now()));
        Either::Right(self.router.clone().oneshot(request.map(Body::new)))
    }
}

/// Whether a decision's wait for its store, cut at `store_timeout` by the limiter, ends well
/// within `request_timeout`: a check makes at most two store calls in turn (the decision, then a
/// reservation's), so twice the store's timeout must leave room.
fn store_bounded(store_timeout: Duration, request_timeout: Duration) -> bool {
    store_timeout.saturating_mul(2) < request_timeout
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
    use crate::config::{Config, Format};
    use axum::body::Bytes;
    use http::{HeaderMap, StatusCode};
    use http_body_util::{BodyExt, Full};
    use hyper::body::Body as _;

    use super::*;
    use crate::store_url;

    const RULES: &str = "headers: both\nrules:\n  login: { message: slow down, limits: [ { by: [user], rate: 2/1h } ] }\n";

    async fn state() -> Arc<AppState> {
        let config = Config::parse(RULES, Format::Yaml).expect("a valid config");
        let store = store_url::open("memory://", &config.store)
            .await
            .expect("a memory store");
        AppState::new(config, None, &store, None).expect("a state")
    }

    /// A response with what depends on the time of the decision left out, and its length (which
    /// hyper writes as `content-length` from the body's exact size when no header gives it).
    async fn seen(response: Response) -> (StatusCode, HeaderMap, serde_json::Value) {
        let (mut parts, body) = response.into_parts();
        let length = body.size_hint().exact();
        let bytes = body.collect().await.expect("a body").to_bytes();
        assert_eq!(
            length,
            Some(bytes.len() as u64),
            "the body's length is known"
        );
        if let Some(header) = parts.headers.remove(http::header::CONTENT_LENGTH) {
            assert_eq!(header.to_str().ok(), Some(bytes.len().to_string().as_str()));
        }
        let mut body = serde_json::from_slice(&bytes).unwrap_or(serde_json::Value::Null);
        forget_times(&mut body);
        let mut headers = parts.headers;
        for timed in ["ratelimit", "x-ratelimit-reset", "retry-after"] {
            headers.remove(timed);
        }
        (parts.status, headers, body)
    }

    fn forget_times(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.retain(|key, _| !key.ends_with("_ms"));
                map.values_mut().for_each(forget_times);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(forget_times),
            _ => {}
        }
    }

    /// The same requests, in the same order, to two services on two fresh stores: answered
    /// directly on one, through the router on the other. Every answer is the same.
    #[tokio::test]
    async fn decision_routes_answer_as_the_router_does() {
        let (direct, routed) = (state().await, state().await);
        let router = super::super::router(routed.clone());
        let check = r#"{"rule": "login", "attributes": {"user": "u1"}}"#;
        let too_large = format!(r#"{{"rule": "login", "pad": "{}"}}"#, "x".repeat(70_000));
        let cases: Vec<(&str, String)> = vec![
            ("/v1/check", check.into()),
            ("/v1/peek", check.into()),
            ("/v1/check?view=compact", check.into()),
            ("/v1/check?view=headers", check.into()),
            ("/v1/check", check.into()),
            ("/v1/peek?view=compact", check.into()),
            ("/v1/check?view=bogus", check.into()),
            ("/v1/check?view=full&x=1", check.into()),
            ("/v1/check", String::new()),
            ("/v1/check", " \n ".into()),
            ("/v1/peek", "{not json".into()),
            (
                "/v1/check",
                r#"{"rule": "nope", "attributes": {"user": "u1"}}"#.into(),
            ),
            ("/v1/check", r#"{"rule": "login", "attributes": {}}"#.into()),
            (
                "/v1/check",
                r#"{"rule": "login", "attributes": {"user": "u2"}, "cost": 3}"#.into(),
            ),
            ("/v1/check", too_large),
        ];
        for (uri, body) in cases {
            let request = || {
                Request::builder()
                    .method(Method::POST)
                    .uri(uri)
                    .body(Full::new(Bytes::from(body.clone())))
                    .expect("a valid request")
            };
            let mode = decision_route(&request()).expect("a decision route");
            let budget = Budget::new(Duration::from_secs(10));
            let answered = routes::answer_request(&direct, request(), mode, budget, true).await;
            let routed = router
                .clone()
                .oneshot(request().map(Body::new))
                .await
                .expect("infallible");
            let (answered, routed) = (seen(answered).await, seen(routed).await);
            assert_eq!(answered, routed, "POST {uri} {:.60}", body);
        }
    }

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

    #[test]
    fn a_store_is_bounded_when_twice_its_timeout_is_under_the_request_timeout() {
        let ms = Duration::from_millis;
        assert!(store_bounded(ms(50), ms(10_000)));
        assert!(store_bounded(ms(249), ms(500)));
        assert!(!store_bounded(ms(250), ms(500)));
        assert!(!store_bounded(ms(5_000), ms(500)));
        assert!(!store_bounded(Duration::MAX, ms(500)));
    }
}
