//! The tower service without HTTP: clones share one limit (state lives in the limiter, never
//! in a service), and a leaky bucket's shaping delay is waited out before the handler runs.
#![cfg(feature = "tower")]

use std::convert::Infallible;
use std::sync::Arc;

use http::{Request, Response};
use sluice::middleware::SluiceLayer;
use sluice::model::{Algorithm, Limit};
use sluice::{Limiter, ManualClock, MemoryStore, Rule};
use tower::{Layer, ServiceExt, service_fn};

fn limiter(clock: &ManualClock, limit: Limit) -> Limiter {
    Limiter::builder(MemoryStore::with_clock(Arc::new(clock.clone())))
        .rule("r", Rule::new(vec![limit]))
        .build()
        .unwrap()
}

fn handler() -> impl tower::Service<
    Request<String>,
    Response = Response<String>,
    Error = Infallible,
    Future = impl Send,
> + Clone {
    service_fn(|_req: Request<String>| async {
        Ok::<_, Infallible>(Response::new(format!("{:?}", tokio::time::Instant::now())))
    })
}

#[tokio::test]
async fn clones_of_a_service_share_one_limit() {
    let clock = ManualClock::at_2026();
    let limiter = limiter(
        &clock,
        Limit::new(&[], "3/1m".parse().unwrap(), Algorithm::SlidingLog),
    );
    let service = SluiceLayer::new(&limiter, "r").layer(handler());
    let mut statuses = Vec::new();
    for _ in 0..4 {
        // Each request through a fresh clone, as axum does.
        let r = service
            .clone()
            .oneshot(Request::new(String::new()))
            .await
            .unwrap();
        statuses.push(r.status().as_u16());
    }
    assert_eq!(statuses, [200, 200, 200, 429]);
}

#[tokio::test(start_paused = true)]
async fn a_shaping_delay_is_waited_out_before_the_handler() {
    let clock = ManualClock::at_2026();
    let limiter = limiter(
        &clock,
        Limit::new(&[], "2/1s".parse().unwrap(), Algorithm::LeakyBucket).with_burst(4),
    );
    let reached = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let seen = reached.clone();
    let service =
        SluiceLayer::new(&limiter, "r").layer(service_fn(move |_req: Request<String>| {
            let seen = seen.clone();
            async move {
                seen.lock().push(tokio::time::Instant::now());
                Ok::<_, Infallible>(Response::new(String::new()))
            }
        }));
    let start = tokio::time::Instant::now();
    for _ in 0..3 {
        let r = service
            .clone()
            .oneshot(Request::new(String::new()))
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers().get("x-ratelimit-delay-ms").is_none());
    }
    let waits: Vec<u128> = reached
        .lock()
        .iter()
        .map(|t| (*t - start).as_millis())
        .collect();
    // At 2 per second the queue drains every 500 ms: the 2nd waits 500 ms, the 3rd 1000 ms
    // (the manual clock does not move, so each delay counts from the same instant).
    assert_eq!(waits, [0, 500, 1500]);
}
