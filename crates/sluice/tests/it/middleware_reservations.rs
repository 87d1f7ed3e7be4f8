//! The middleware reserving an estimated cost per request: a handler that knows what the request
//! really cost says so with `ActualCost` in its response, and the layer settles the reservation;
//! a handler that does not leaves the estimate charged.
#![cfg(feature = "tower")]

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use http::Request;
use sluice::middleware::{ActualCost, QueryParam, SluiceLayer};
use sluice::model::{Algorithm, Limit};
use sluice::{Check, Limiter, ManualClock, MemoryStore, Rule};
use tower::ServiceExt;

#[derive(serde::Deserialize)]
struct Used {
    used: Option<u64>,
}

/// A language-model call: it learns its cost (`?used=`) only once it has run.
async fn complete(Query(q): Query<Used>) -> Response {
    let mut response = "done".into_response();
    if let Some(used) = q.used {
        response.extensions_mut().insert(ActualCost(used));
    }
    response
}

async fn remaining(limiter: &Limiter) -> u64 {
    limiter
        .check_with("llm", &[("user", "u1")], Check::ONE.peek())
        .await
        .unwrap()
        .remaining
}

#[tokio::test]
async fn the_layer_settles_at_the_cost_the_handler_reports() {
    for algorithm in [Algorithm::TokenBucket, Algorithm::Gcra] {
        let limiter = Limiter::builder(MemoryStore::with_clock(Arc::new(ManualClock::at_2026())))
            .rule(
                "llm",
                Rule::new(vec![Limit::new(
                    &["user"],
                    "1000/1h".parse().unwrap(),
                    algorithm,
                )]),
            )
            .build()
            .unwrap();
        let app = Router::new().route(
            "/complete",
            get(complete).layer(
                SluiceLayer::new(&limiter, "llm")
                    .extract(QueryParam::new("user"))
                    .reserve(500),
            ),
        );
        let call = |uri: &str| {
            app.clone()
                .oneshot(Request::get(uri).body(Body::empty()).unwrap())
        };
        let response = call("/complete?user=u1&used=120").await.unwrap();
        assert_eq!(response.status(), 200);
        assert_eq!(
            remaining(&limiter).await,
            880,
            "{algorithm}: 380 of the 500 reserved came back"
        );
        call("/complete?user=u1").await.unwrap();
        assert_eq!(
            remaining(&limiter).await,
            380,
            "{algorithm}: no cost reported, the estimate stands"
        );
        assert_eq!(
            call("/complete?user=u1&used=1").await.unwrap().status(),
            429,
            "{algorithm}: 500 more do not fit"
        );
    }
}
