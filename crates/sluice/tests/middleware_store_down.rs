//! The store is down: a fail-open route still answers 200, marked `X-RateLimit-Degraded: true`;
//! a fail-closed route answers 429, marked the same. Real HTTP against an in-process server.
#![cfg(feature = "tower")]

use std::future::pending;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use sluice::algorithm::Mode;
use sluice::middleware::{PeerIp, SluiceLayer};
use sluice::model::{Algorithm, Limit};
use sluice::store::{BlockEntry, BoxFuture, LimitCall, LimitKey, StoreReply};
use sluice::{FailPolicy, Limiter, Rule, Store, StoreError};

/// A store that is down: every call fails at once, or never answers.
#[derive(Debug)]
struct DownStore {
    hangs: bool,
}

impl DownStore {
    fn fail<'a, T: Send + 'a>(&'a self) -> BoxFuture<'a, Result<T, StoreError>> {
        if self.hangs {
            Box::pin(pending())
        } else {
            Box::pin(async { Err(StoreError::transient("down", "connection refused")) })
        }
    }
}

impl Store for DownStore {
    fn name(&self) -> &'static str {
        "down"
    }
    fn decide<'a>(
        &'a self,
        _calls: &'a [LimitCall],
        _mode: Mode,
    ) -> BoxFuture<'a, Result<StoreReply, StoreError>> {
        self.fail()
    }
    fn reset<'a>(&'a self, _keys: &'a [LimitKey]) -> BoxFuture<'a, Result<(), StoreError>> {
        self.fail()
    }
    fn block<'a>(&'a self, _key: &'a LimitKey, _d: u64) -> BoxFuture<'a, Result<u64, StoreError>> {
        self.fail()
    }
    fn unblock<'a>(&'a self, _key: &'a LimitKey) -> BoxFuture<'a, Result<bool, StoreError>> {
        self.fail()
    }
    fn blocks<'a>(&'a self, _rule: &'a str) -> BoxFuture<'a, Result<Vec<BlockEntry>, StoreError>> {
        self.fail()
    }
    fn ping(&self) -> BoxFuture<'_, Result<(), StoreError>> {
        self.fail()
    }
}

fn limiter(hangs: bool) -> Limiter {
    let by_ip = || Limit::new(&["ip"], "1/1m".parse().unwrap(), Algorithm::SlidingLog);
    let mut closed = Rule::new(vec![by_ip()]);
    closed.fail = Some(FailPolicy::Closed);
    Limiter::builder(DownStore { hangs })
        .timeout(Duration::from_millis(20))
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
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            app.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
    });
    format!("http://{addr}")
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
