//! `sluice_http_request_duration_seconds{route}`: the time from a request's head to its
//! response, per route.
//!
//! The label is the route's template as the router matched it (`/v1/blocks/{rule}`, a gRPC
//! service's `/envoy.service.ratelimit.v3.RateLimitService/{*rest}`), never the path a client
//! sent, and `unmatched` for whatever no route matched: the series are bounded by the routes of
//! the build. The decision routes, answered before the router (see `front`), keep their
//! histograms registered, so timing one costs two readings of the CPU counter and a sample.

use std::sync::OnceLock;

use axum::extract::{MatchedPath, Request};
use axum::middleware::Next;
use axum::response::Response;
use metrics::Histogram;

/// The label of a request no route matched.
pub const UNMATCHED: &str = "unmatched";

/// The counter requests are timed on (calibrated once per process).
fn counter() -> &'static quanta::Clock {
    static CLOCK: OnceLock<quanta::Clock> = OnceLock::new();
    CLOCK.get_or_init(quanta::Clock::new)
}

/// The histogram of one route, registered once.
#[derive(Clone)]
pub(crate) struct RouteTimer {
    route: &'static str,
    histogram: Histogram,
}

impl std::fmt::Debug for RouteTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RouteTimer")
            .field("route", &self.route)
            .finish()
    }
}

impl RouteTimer {
    /// Registers the histogram of `route` with the recorder in force.
    pub(crate) fn new(route: &'static str) -> RouteTimer {
        RouteTimer {
            route,
            histogram: metrics::histogram!("sluice_http_request_duration_seconds", "route" => route),
        }
    }

    /// A reading to give [`RouteTimer::record`] when the response is ready.
    #[inline]
    pub(crate) fn start() -> u64 {
        counter().raw()
    }

    /// Records one request that started at `start`.
    #[inline]
    pub(crate) fn record(&self, start: u64) {
        let clock = counter();
        let nanos = clock.delta_as_nanos(start, clock.raw());
        self.histogram.record(nanos as f64 / 1e9);
    }
}

/// Times a request a router answers, labelled by the route it matched: the router's layer
/// (`axum::middleware::from_fn(timed)`), after its routes are added.
pub async fn timed(request: Request, next: Next) -> Response {
    let start = RouteTimer::start();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or(UNMATCHED.to_string(), |m| m.as_str().to_string());
    let response = next.run(request).await;
    let clock = counter();
    let nanos = clock.delta_as_nanos(start, clock.raw());
    metrics::histogram!("sluice_http_request_duration_seconds", "route" => route)
        .record(nanos as f64 / 1e9);
    response
}
