//! `sluice_http_request_duration_seconds{route}`: the time from a request's head to its
//! response, per route.
//!
//! The label is the route's template as the router matched it (`/v1/auth/{rule}`, a gRPC
//! service's `/envoy.service.ratelimit.v3.RateLimitService/{*rest}`), never the path a client
//! sent, and `unmatched` for whatever no route matched: the series are bounded by the routes of
//! the build. The decision routes, answered before the router (see `front`), keep their
//! histograms registered, so timing one costs two readings of the CPU counter and a sample; the
//! router's routes find theirs in a map read without a lock.

use std::collections::HashMap;
use std::sync::OnceLock;

use arc_swap::ArcSwap;
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
    histogram: Histogram,
}

impl std::fmt::Debug for RouteTimer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RouteTimer")
    }
}

impl RouteTimer {
    /// Registers the histogram of `route` with the recorder in force.
    pub(crate) fn new(route: &'static str) -> RouteTimer {
        RouteTimer {
            histogram: metrics::histogram!(crate::metrics::REQUEST_DURATION, "route" => route),
        }
    }

    /// Registers the histogram of a route known only at run time (a router's match).
    fn new_owned(route: &str) -> RouteTimer {
        RouteTimer {
            histogram: metrics::histogram!(crate::metrics::REQUEST_DURATION, "route" => route.to_string()),
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
    let route = request.extensions().get::<MatchedPath>();
    let timer = timer_of(route.map_or(UNMATCHED, MatchedPath::as_str));
    let response = next.run(request).await;
    timer.record(start);
    response
}

/// The histograms registered so far, by route: a request finds its own with one hash lookup,
/// no lock and no allocation. Routes are those of the build, so the map stays small; a new one
/// copies it once.
type Timers = HashMap<Box<str>, RouteTimer, foldhash::fast::RandomState>;

fn timer_of(route: &str) -> RouteTimer {
    static TIMERS: OnceLock<ArcSwap<Timers>> = OnceLock::new();
    let timers = TIMERS.get_or_init(ArcSwap::default);
    if let Some(timer) = timers.load().get(route) {
        return timer.clone();
    }
    let timer = RouteTimer::new_owned(route);
    timers.rcu(|held| {
        let mut more = Timers::clone(held);
        more.entry(route.into()).or_insert_with(|| timer.clone());
        more
    });
    timer
}
