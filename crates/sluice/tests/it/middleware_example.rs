//! The example app's routes and rules, served in-process on 127.0.0.1:0 with a manual clock.
#![cfg(all(feature = "tower", feature = "redis"))]

#[allow(dead_code)]
#[path = "../../../../examples/axum_app.rs"]
mod axum_app;

use std::sync::Arc;
use std::time::Duration;

use sluice::{Limiter, ManualClock, MemoryStore};

use crate::common;

async fn serve(clock: &ManualClock) -> String {
    let limiter = Limiter::builder(MemoryStore::with_clock(Arc::new(clock.clone())))
        .rules(axum_app::rules().unwrap())
        .build()
        .unwrap();
    let app = axum_app::app(&limiter, Vec::new());
    common::serve(app).await
}

#[tokio::test]
async fn login_is_five_per_minute_then_blocked_for_fifteen_minutes() {
    let clock = ManualClock::at_2026();
    let base = serve(&clock).await;
    let client = reqwest::Client::new();
    let login = format!("{base}/login");
    for i in 0..5 {
        // Forwarding headers are ignored: no proxy is trusted.
        let r = client
            .post(&login)
            .header("x-forwarded-for", format!("203.0.113.{i}"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = client.post(&login).send().await.unwrap();
    assert_eq!(r.status(), 429);
    clock.advance(Duration::from_secs(14 * 60 + 59));
    assert_eq!(client.post(&login).send().await.unwrap().status(), 429);
    clock.advance(Duration::from_secs(1));
    assert_eq!(client.post(&login).send().await.unwrap().status(), 200);
}

#[tokio::test]
async fn employees_answer_in_chinese_after_five_lookups_in_ten_seconds() {
    let clock = ManualClock::at_2026();
    let base = serve(&clock).await;
    let url = format!("{base}/employees/42");
    for _ in 0..5 {
        let r = reqwest::get(&url).await.unwrap();
        assert_eq!(r.text().await.unwrap(), "employee 42\n");
    }
    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(r.status(), 429);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], axum_app::EMPLOYEE_MESSAGE);
    clock.advance(Duration::from_secs(10));
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);
}

#[tokio::test]
async fn the_api_allows_a_burst_then_refills() {
    let clock = ManualClock::at_2026();
    let base = serve(&clock).await;
    let url = format!("{base}/api");
    for _ in 0..20 {
        assert_eq!(reqwest::get(&url).await.unwrap().status(), 200);
    }
    let r = reqwest::get(&url).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(r.headers()["retry-after"], "1");
    clock.advance(Duration::from_millis(100));
    assert_eq!(
        reqwest::get(&url).await.unwrap().status(),
        200,
        "one token back after 100 ms"
    );
    assert_eq!(reqwest::get(&url).await.unwrap().status(), 429);
}
