//! The middleware over real HTTP: an axum server on 127.0.0.1:0, driven by reqwest, time from a
//! `ManualClock` so windows are crossed without sleeping.
#![cfg(feature = "tower")]

use std::sync::Arc;
use std::time::Duration;

use axum::extract::Request;
use axum::middleware::Next;
use axum::routing::get;
use axum::{Extension, Router};
use sluice::middleware::{
    ClientIp, Header, PathParam, QueryParam, RequestAttributes, Shaping, SluiceLayer,
};
use sluice::model::{Algorithm, Limit};
use sluice::{Decision, Limiter, ManualClock, MemoryStore, Rule};

use crate::common;
use common::serve;

const TEA: &str = "查询太快啦,喝杯茶再来";

fn limit(by: &[&str], rate: &str, algorithm: Algorithm) -> Limit {
    Limit::new(by, rate.parse().unwrap(), algorithm)
}

fn limiter(clock: &ManualClock) -> Limiter {
    let mut employee = Rule::new(vec![limit(&["id"], "5/10s", Algorithm::SlidingLog)]);
    employee.message = Some(TEA.to_string());
    Limiter::builder(MemoryStore::with_clock(Arc::new(clock.clone())))
        .rule("employee", employee)
        .rule(
            "login",
            Rule::new(vec![
                limit(&["ip"], "5/1m", Algorithm::SlidingLog)
                    .with_block(Duration::from_secs(15 * 60)),
            ]),
        )
        .rule(
            "transfer",
            Rule::new(vec![
                limit(&["member"], "2/1m", Algorithm::SlidingLog),
                limit(&["ip"], "10/1m", Algorithm::SlidingLog),
            ]),
        )
        .rule(
            "search",
            Rule::new(vec![limit(&["user"], "1/1m", Algorithm::FixedWindow)]),
        )
        .rule(
            "keyed",
            Rule::new(vec![limit(&["api_key"], "1/1m", Algorithm::Gcra)]),
        )
        .rule(
            "queue",
            Rule::new(vec![
                limit(&[], "1/1s", Algorithm::LeakyBucket).with_burst(3),
            ]),
        )
        .build()
        .unwrap()
}

async fn echo(
    Extension(decision): Extension<Decision>,
    Extension(RequestAttributes(attrs)): Extension<RequestAttributes>,
) -> String {
    let attrs: Vec<String> = attrs.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{} left; {}", decision.remaining, attrs.join(","))
}

#[derive(Clone)]
struct Member(String);

impl std::fmt::Display for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Stands in for authentication: `x-user: NAME` becomes a `Member` extension.
async fn auth(mut request: Request, next: Next) -> axum::response::Response {
    let user = request
        .headers()
        .get("x-user")
        .and_then(|v| v.to_str().ok())
        .map(|s| Member(s.to_string()));
    if let Some(user) = user {
        request.extensions_mut().insert(user);
    }
    next.run(request).await
}

fn app(limiter: &Limiter) -> Router {
    Router::new()
        .route(
            "/employees/{id}",
            get(echo).layer(SluiceLayer::new(limiter, "employee").extract(PathParam::new("id"))),
        )
        .route(
            "/login",
            get(echo).layer(SluiceLayer::new(limiter, "login").extract(ClientIp::new("ip"))),
        )
        .route(
            "/transfer",
            get(echo)
                .layer(
                    SluiceLayer::new(limiter, "transfer")
                        .extract((
                            sluice::middleware::Extension::<Member>::new("member"),
                            ClientIp::new("ip"),
                        ))
                        .message("too many transfers"),
                )
                .layer(axum::middleware::from_fn(auth)),
        )
        .route(
            "/search",
            get(echo).layer(SluiceLayer::new(limiter, "search").extract(QueryParam::new("user"))),
        )
        .route(
            "/keyed",
            get(echo).layer(SluiceLayer::new(limiter, "keyed").extract(Header::new(
                "api_key",
                http::HeaderName::from_static("x-api-key"),
            ))),
        )
        .route(
            "/queue",
            get(echo).layer(SluiceLayer::new(limiter, "queue").shaping(Shaping::Expose)),
        )
        .route(
            "/nowhere",
            get(echo).layer(SluiceLayer::new(limiter, "no_such_rule")),
        )
}

fn header<'a>(r: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn seed_000_five_allowed_then_the_sixth_rejected_with_its_message() {
    let clock = ManualClock::at_2026();
    let base = serve(app(&limiter(&clock))).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/employees/42");
    for i in 0..5 {
        let r = client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200, "request {i}");
        assert_eq!(r.text().await.unwrap(), format!("{} left; id=42", 4 - i));
    }
    clock.advance(Duration::from_secs(3));
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "content-type"), Some("application/json"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], TEA);
    assert_eq!(body["rule"], "employee");
    assert_eq!(body["retry_after_ms"], 7_000);
    assert_eq!(body["blocked_until_ms"], serde_json::Value::Null);
    assert_eq!(body["warning"], false);
    // Another employee is counted apart.
    let r = client
        .get(format!("{base}/employees/43"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    clock.advance(Duration::from_secs(7));
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200, "allowed again once the window has passed");
}

#[tokio::test]
async fn headers_on_allowed_and_denied_responses() {
    let clock = ManualClock::at_2026();
    let base = serve(app(&limiter(&clock))).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/employees/7");
    let first = client.get(&url).send().await.unwrap();
    assert_eq!(
        header(&first, "ratelimit-policy"),
        Some("\"employee\";q=5;w=10")
    );
    assert_eq!(header(&first, "ratelimit"), Some("\"employee\";r=4;t=10"));
    assert_eq!(header(&first, "x-ratelimit-limit"), Some("5"));
    assert_eq!(header(&first, "x-ratelimit-remaining"), Some("4"));
    assert_eq!(header(&first, "x-ratelimit-reset"), Some("10"));
    assert_eq!(header(&first, "retry-after"), None);
    assert_eq!(header(&first, "x-ratelimit-degraded"), None);
    for _ in 0..4 {
        client.get(&url).send().await.unwrap();
    }
    clock.advance(Duration::from_millis(2_500));
    let denied = client.get(&url).send().await.unwrap();
    assert_eq!(denied.status(), 429);
    assert_eq!(
        header(&denied, "ratelimit-policy"),
        Some("\"employee\";q=5;w=10")
    );
    assert_eq!(header(&denied, "ratelimit"), Some("\"employee\";r=0;t=8"));
    assert_eq!(header(&denied, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(header(&denied, "x-ratelimit-reset"), Some("8"));
    assert_eq!(header(&denied, "retry-after"), Some("8"), "7.5 s rounds up");
}

#[tokio::test]
async fn login_blocks_for_fifteen_minutes_after_the_limit() {
    let clock = ManualClock::at_2026();
    let base = serve(app(&limiter(&clock))).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/login");
    for _ in 0..5 {
        let r = client.get(&url).send().await.unwrap();
        assert_eq!(r.status(), 200);
    }
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 429);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], "rate limit exceeded", "the default message");
    let until = body["blocked_until_ms"].as_u64().unwrap();
    assert_eq!(until, 1_767_225_600_000 + 15 * 60 * 1000);
    clock.advance(Duration::from_secs(60));
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 429, "the window has passed but the block holds");
    assert_eq!(header(&r, "retry-after"), Some("840"));
    clock.advance(Duration::from_secs(14 * 60));
    let r = client.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn member_from_auth_and_ip_together_with_the_layers_message() {
    let clock = ManualClock::at_2026();
    let base = serve(app(&limiter(&clock))).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/transfer");
    let anonymous = client.get(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), 400);
    let body: serde_json::Value = anonymous.json().await.unwrap();
    let error = body["error"].as_str().unwrap();
    assert!(error.contains("`member`"), "{error}");
    for _ in 0..2 {
        let r = client
            .get(&url)
            .header("x-user", "m1")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().ends_with("member=m1,ip=127.0.0.1"));
    }
    let r = client
        .get(&url)
        .header("x-user", "m1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], "too many transfers", "the layer's message");
    let r = client
        .get(&url)
        .header("x-user", "m2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
}

#[tokio::test]
async fn query_and_header_attributes() {
    let clock = ManualClock::at_2026();
    let base = serve(app(&limiter(&clock))).await;
    let client = reqwest::Client::new();
    let r = client
        .get(format!("{base}/search?user=a%20b&x=1"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "0 left; user=a b");
    let r = client
        .get(format!("{base}/search?user=a+b"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429, "the same user, decoded alike");
    let r = client
        .get(format!("{base}/search?user=c"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client.get(format!("{base}/search")).send().await.unwrap();
    assert_eq!(r.status(), 400);

    let keyed = format!("{base}/keyed");
    let r = client
        .get(&keyed)
        .header("x-api-key", "k1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .get(&keyed)
        .header("x-api-key", "k1")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 429);
    let r = client
        .get(&keyed)
        .header("x-api-key", "k2")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let r = client
        .get(&keyed)
        .header("x-api-key", http::HeaderValue::from_bytes(b"\xff").unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        400,
        "a header that is not text is the client's fault"
    );
    let r = client
        .get(&keyed)
        .header("x-api-key", "k".repeat(2000))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400, "an oversized identity is refused");
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["error"].as_str().unwrap().contains("api_key"),
        "{body}"
    );
}

#[tokio::test]
async fn shaping_delay_is_exposed_when_asked() {
    let clock = ManualClock::at_2026();
    let base = serve(app(&limiter(&clock))).await;
    let client = reqwest::Client::new();
    let url = format!("{base}/queue");
    let first = client.get(&url).send().await.unwrap();
    assert_eq!(header(&first, "x-ratelimit-delay-ms"), None);
    let second = client.get(&url).send().await.unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(header(&second, "x-ratelimit-delay-ms"), Some("1000"));
}

#[tokio::test]
async fn a_route_naming_an_unknown_rule_answers_500_not_a_panic() {
    let clock = ManualClock::at_2026();
    let base = serve(app(&limiter(&clock))).await;
    let r = reqwest::get(format!("{base}/nowhere")).await.unwrap();
    assert_eq!(r.status(), 500);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(body["error"].as_str().unwrap().contains("no_such_rule"));
}

#[tokio::test]
async fn path_parameters_need_the_layer_inside_the_router() {
    use tower::Layer;
    let clock = ManualClock::at_2026();
    let limiter = limiter(&clock);
    let layer = SluiceLayer::new(&limiter, "employee").extract(PathParam::new("id"));
    // `Router::layer` wraps each route after routing: parameters are known.
    let inside = Router::new()
        .route("/employees/{id}", get(echo))
        .layer(layer.clone());
    let base = serve(inside).await;
    let r = reqwest::get(format!("{base}/employees/1")).await.unwrap();
    assert_eq!(r.text().await.unwrap(), "4 left; id=1");
    // Wrapping a router from outside runs before routing: a clear 500, not a global key.
    let outside = Router::new().fallback_service(
        layer.layer(Router::new().route("/employees/{id}", get(|| async { "ok" }))),
    );
    let base = serve(outside).await;
    let r = reqwest::get(format!("{base}/employees/1")).await.unwrap();
    assert_eq!(r.status(), 500);
    let body: serde_json::Value = r.json().await.unwrap();
    assert!(
        body["error"]
            .as_str()
            .unwrap()
            .contains("inside the router"),
        "{body}"
    );
}

#[cfg(feature = "macros")]
#[sluice::limit(rule = "employee", key = id, limiter = limiter)]
async fn lookup(limiter: &Limiter, id: u32) -> Result<String, sluice::Limited> {
    Ok(format!("employee {id}"))
}

/// A handler that calls a `#[sluice::limit]` function answers like the middleware when denied.
#[cfg(feature = "macros")]
#[tokio::test]
async fn limited_from_the_attribute_is_an_axum_response() {
    use axum::extract::{Path, State};
    let clock = ManualClock::at_2026();
    let app = Router::new()
        .route(
            "/lookup/{id}",
            get(
                |State(limiter): State<Limiter>, Path(id): Path<u32>| async move {
                    lookup(&limiter, id).await
                },
            ),
        )
        .with_state(limiter(&clock));
    let base = serve(app).await;
    for _ in 0..5 {
        let r = reqwest::get(format!("{base}/lookup/3")).await.unwrap();
        assert_eq!(r.text().await.unwrap(), "employee 3");
    }
    let r = reqwest::get(format!("{base}/lookup/3")).await.unwrap();
    assert_eq!(r.status(), 429);
    assert_eq!(header(&r, "retry-after"), Some("10"));
    assert_eq!(header(&r, "x-ratelimit-limit"), Some("5"));
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"], TEA);
}
