//! nginx `auth_request` in front of a tiny app, asking the real `sluice` binary, with the config
//! shipped in `examples/nginx/` (only its ports changed): requests pass until the limit, then
//! 429 with `Retry-After` and the rate-limit headers; a forged `X-Forwarded-For` does not change
//! the client's identity; with Sluice stopped nginx fails open or closed as the file says.
//!
//! Clients connect from 127.0.0.2 and 127.0.0.3 (loopback too), so that nginx (trusted,
//! 127.0.0.1) and its clients (untrusted) are different addresses, as in production.

use crate::common;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use common::Server;
use sluice_test_support::Nginx;

const EXAMPLE_NGINX: &str = include_str!("../../../../examples/nginx/nginx.conf");
const EXAMPLE_RULES: &str = include_str!("../../../../examples/nginx/sluice.yaml");

/// The example's addresses, replaced by the test's.
const SLUICE: &str = "127.0.0.1:8080";
const APP: &str = "127.0.0.1:3000";
const NGINX: &str = "127.0.0.1:8000";

/// The example config with the test's ports; `fail` replaces the `$sluice_fail` default.
fn nginx_config(sluice: SocketAddr, app: SocketAddr, fail: &str, port: u16) -> String {
    for address in [SLUICE, APP, NGINX] {
        assert_eq!(
            EXAMPLE_NGINX.matches(address).count(),
            1,
            "{address} in nginx.conf"
        );
    }
    assert!(EXAMPLE_NGINX.contains("default open;"));
    EXAMPLE_NGINX
        .replace(SLUICE, &sluice.to_string())
        .replace(APP, &app.to_string())
        .replace(NGINX, &format!("127.0.0.1:{port}"))
        .replace("default open;", &format!("default {fail};"))
}

/// A tiny app that counts its requests.
async fn app() -> (SocketAddr, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counter = hits.clone();
    let router = axum::Router::new().fallback(move || {
        let counter = counter.clone();
        async move {
            counter.fetch_add(1, Ordering::SeqCst);
            "hello from the app"
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, router).await });
    (address, hits)
}

/// A client whose connections come from `127.0.0.N`.
fn client_from(n: u8) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, n)))
        .build()
        .unwrap()
}

fn sluice_address(server: &Server) -> SocketAddr {
    server.base.trim_start_matches("http://").parse().unwrap()
}

async fn get(client: &reqwest::Client, nginx: &Nginx, forged: Option<&str>) -> reqwest::Response {
    let mut request = client.get(format!("{}/orders", nginx.url()));
    if let Some(forged) = forged {
        request = request.header("x-forwarded-for", forged);
    }
    request.send().await.expect("nginx answers")
}

fn header<'a>(response: &'a reqwest::Response, name: &str) -> Option<&'a str> {
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

#[tokio::test]
async fn requests_pass_until_the_limit_then_429_with_the_headers() {
    let sluice = Server::start(EXAMPLE_RULES);
    let (app, hits) = app().await;
    let nginx = Nginx::start(|port| nginx_config(sluice_address(&sluice), app, "open", port));
    let client = client_from(2);
    for remaining in (0..5).rev() {
        let response = get(&client, &nginx, None).await;
        assert_eq!(response.status(), 200, "{}", nginx.error_log());
        assert_eq!(
            header(&response, "ratelimit-policy"),
            Some("\"api\";q=5;w=60")
        );
        assert_eq!(
            header(&response, "x-ratelimit-remaining"),
            Some(&*remaining.to_string())
        );
        assert_eq!(response.text().await.unwrap(), "hello from the app");
    }
    let denied = get(&client, &nginx, None).await;
    assert_eq!(denied.status(), 429);
    let retry: u64 = header(&denied, "retry-after").unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(
        header(&denied, "ratelimit-policy"),
        Some("\"api\";q=5;w=60")
    );
    assert!(header(&denied, "ratelimit").unwrap().contains("r=0"));
    assert_eq!(header(&denied, "x-ratelimit-limit"), Some("5"));
    assert_eq!(header(&denied, "x-ratelimit-remaining"), Some("0"));
    assert_eq!(
        hits.load(Ordering::SeqCst),
        5,
        "the app saw only the allowed requests"
    );
}

#[tokio::test]
async fn a_forged_x_forwarded_for_does_not_change_the_identity() {
    let sluice = Server::start(EXAMPLE_RULES);
    let (app, _) = app().await;
    let nginx = Nginx::start(|port| nginx_config(sluice_address(&sluice), app, "open", port));
    let client = client_from(2);
    for i in 0..5 {
        let forged = format!("198.51.100.{i}");
        assert_eq!(get(&client, &nginx, Some(&forged)).await.status(), 200);
    }
    // Had the forged entries counted, each would be a fresh identity.
    let response = get(&client, &nginx, Some("198.51.100.77, 203.0.113.1")).await;
    assert_eq!(response.status(), 429);
    // Another client (another address) has its own limit.
    assert_eq!(get(&client_from(3), &nginx, None).await.status(), 200);
}

#[tokio::test]
async fn with_sluice_stopped_nginx_fails_open_as_the_example_says() {
    let sluice = Server::start(EXAMPLE_RULES);
    let (app, hits) = app().await;
    let address = sluice_address(&sluice);
    let nginx = Nginx::start(|port| nginx_config(address, app, "open", port));
    let client = client_from(2);
    assert_eq!(get(&client, &nginx, None).await.status(), 200);
    drop(sluice);
    let response = get(&client, &nginx, None).await;
    assert_eq!(response.status(), 200, "{}", nginx.error_log());
    assert_eq!(header(&response, "ratelimit-policy"), None);
    assert_eq!(hits.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn with_sluice_stopped_and_fail_closed_nginx_answers_503() {
    let sluice = Server::start(EXAMPLE_RULES);
    let (app, hits) = app().await;
    let address = sluice_address(&sluice);
    let nginx = Nginx::start(|port| nginx_config(address, app, "closed", port));
    let client = client_from(2);
    assert_eq!(get(&client, &nginx, None).await.status(), 200);
    drop(sluice);
    let response = get(&client, &nginx, None).await;
    assert_eq!(response.status(), 503, "{}", nginx.error_log());
    assert_eq!(hits.load(Ordering::SeqCst), 1);
}
