//! The middleware on a rule with a concurrency limit, over real HTTP: the request's lease is held
//! while its response body streams, and released when the body is done or dropped unfinished (the
//! client went away). Bodies are fed through channels, so the test decides when each ends.
#![cfg(feature = "tower")]

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::routing::get;
use axum::{Extension, Router};
use http_body::Frame;
use sluice::middleware::{LeasedBody, SluiceLayer};
use sluice::model::Limit;
use sluice::{Check, Limiter, ManualClock, MemoryStore, Rule};
use tokio::sync::mpsc;
use tower::{Layer, ServiceExt, service_fn};

use crate::common;
use common::serve;

/// A body whose frames come from a channel; it ends when the sender is dropped.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;
    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b))))
    }
}

type Feeds = mpsc::UnboundedSender<mpsc::Sender<Bytes>>;

/// Each request's body is fed by a sender handed to the test.
async fn export(Extension(feeds): Extension<Feeds>) -> Body {
    let (tx, rx) = mpsc::channel(4);
    feeds.send(tx).expect("the test listens");
    Body::new(ChannelBody(rx))
}

fn limiter() -> Limiter {
    Limiter::builder(MemoryStore::with_clock(Arc::new(ManualClock::at_2026())))
        .rule(
            "export",
            Rule::new(vec![Limit::concurrency(&[], 1, Duration::from_secs(600))]),
        )
        .build()
        .unwrap()
}

/// Waits (yielding, never sleeping) until the lease was given back.
async fn until_free(limiter: &Limiter) {
    for _ in 0..100_000 {
        let d = limiter
            .check_with("export", &[("x", "x")], Check::ONE.peek())
            .await
            .unwrap();
        if d.remaining == 1 {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("the lease was never released");
}

async fn app(limiter: &Limiter) -> (String, mpsc::UnboundedReceiver<mpsc::Sender<Bytes>>) {
    let (feeds, fed) = mpsc::unbounded_channel();
    let app = Router::new()
        .route(
            "/export",
            get(export).layer(SluiceLayer::new(limiter, "export")),
        )
        .layer(axum::Extension(feeds));
    (serve(app).await, fed)
}

#[tokio::test]
async fn the_lease_is_held_until_the_body_is_done() {
    let limiter = limiter();
    let (base, mut fed) = app(&limiter).await;
    let client = reqwest::Client::new();
    let first = client.get(format!("{base}/export")).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let feed = fed.recv().await.unwrap();
    feed.send(Bytes::from("part 1, ")).await.unwrap();
    let second = client.get(format!("{base}/export")).send().await.unwrap();
    assert_eq!(second.status(), 429, "the first body is still streaming");
    feed.send(Bytes::from("part 2")).await.unwrap();
    drop(feed);
    assert_eq!(first.text().await.unwrap(), "part 1, part 2");
    until_free(&limiter).await;
    let third = client.get(format!("{base}/export")).send().await.unwrap();
    assert_eq!(third.status(), 200);
}

#[tokio::test]
async fn the_lease_is_released_when_the_client_goes_away() {
    let limiter = limiter();
    let (base, mut fed) = app(&limiter).await;
    let client = reqwest::Client::new();
    let first = client.get(format!("{base}/export")).send().await.unwrap();
    let feed = fed.recv().await.unwrap();
    feed.send(Bytes::from("part 1")).await.unwrap();
    drop(first);
    drop(client);
    // The server finds the connection closed when it next writes, and drops the body.
    let mut sent = 0;
    while feed.send(Bytes::from("more")).await.is_ok() {
        sent += 1;
        assert!(
            sent < 100_000,
            "the server kept the body of a closed connection"
        );
        tokio::task::yield_now().await;
    }
    until_free(&limiter).await;
    let again = reqwest::get(format!("{base}/export")).await.unwrap();
    assert_eq!(again.status(), 200);
}

#[tokio::test]
async fn without_http_the_body_holds_the_lease_until_dropped() {
    let limiter = limiter();
    let service = SluiceLayer::new(&limiter, "export").layer(service_fn(
        |_req: http::Request<String>| async {
            Ok::<_, Infallible>(http::Response::new("done".to_string()))
        },
    ));
    let response = service
        .clone()
        .oneshot(http::Request::new(String::new()))
        .await
        .unwrap();
    assert!(response.body().holds_lease());
    let denied = service
        .clone()
        .oneshot(http::Request::new(String::new()))
        .await
        .unwrap();
    assert_eq!(denied.status(), 429);
    assert!(!denied.body().holds_lease());
    let body: LeasedBody<String> = response.into_body();
    drop(body);
    until_free(&limiter).await;
}
