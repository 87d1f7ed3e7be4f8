//! The store is down: a fail-open route still answers 200, marked `X-RateLimit-Degraded: true`;
//! a fail-closed route answers 429, marked the same. Real HTTP against an in-process server.
#![cfg(feature = "tower")]

use sluice::Options;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use sluice::middleware::{PeerIp, SluiceLayer};
use sluice::model::{Algorithm, Limit};
use sluice::{FailPolicy, Limiter, Rule};

use crate::common;
use common::DownStore;

fn limiter(hangs: bool) -> Limiter {
    let by_ip = || Limit::new(&["ip"], "1/1m".parse().unwrap(), Algorithm::SlidingLog);
    let mut closed = Rule::new(vec![by_ip()]);
    closed.fail = Some(FailPolicy::Closed);
    Limiter::builder(DownStore {
        hangs,
        ..DownStore::default()
    })
    .options(Options {
        timeout: Duration::from_millis(20),
        ..Options::default()
    })
    .rule("open", Rule::new(vec![by_ip()]))
    .rule("closed", closed)
    .build()
    .unwrap()
}

async fn serve(limiter: &Limiter) -> String {
    let app = Router::new()
        .route(
            "/open",
            get(|| async { "business as usual" })
                .layer(SluiceLayer::new(limiter, "open").extract(PeerIp::new("ip"))),
        )
        .route(
            "/closed",
            get(|| async { "unreachable" })
                .layer(SluiceLayer::new(limiter, "closed").extract(PeerIp::new("ip"))),
        );
    common::serve(app).await
}

async fn check_degraded(hangs: bool) {
    let base = serve(&limiter(hangs)).await;
    let client = reqwest::Client::new();
    // The rule allows one request per minute; with the store down, every one passes.
    for _ in 0..3 {
        let r = client.get(format!("{base}/open")).send().await.unwrap();
        assert_eq!(r.status(), 200);
        assert_eq!(
            r.headers()
                .get("x-ratelimit-degraded")
                .map(|v| v.to_str().unwrap()),
            Some("true")
        );
        assert_eq!(r.text().await.unwrap(), "business as usual");
    }
    let r = client.get(format!("{base}/closed")).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(
        r.headers()
            .get("x-ratelimit-degraded")
            .map(|v| v.to_str().unwrap()),
        Some("true")
    );
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["degraded"], true);
}

#[tokio::test]
async fn a_failing_store_fails_open_and_says_so() {
    check_degraded(false).await;
}

#[tokio::test]
async fn a_store_that_never_answers_fails_open_after_the_deadline() {
    check_degraded(true).await;
}
