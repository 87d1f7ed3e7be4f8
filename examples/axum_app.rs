//! An axum app protected by Sluice: one line per route.
//!
//! Run it (memory store, port 3000 on 127.0.0.1):
//!
//! ```text
//! cargo run -p sluice-ratelimit --example axum_app --features tower,redis
//! ```
//!
//! then try `curl -i -X POST http://127.0.0.1:3000/login` six times (the sixth is a 429 and the
//! address is blocked for 15 minutes), `curl -i http://127.0.0.1:3000/employees/42` six times
//! within 10 s (the sixth says 查询太快啦,喝杯茶再来), and `curl -i http://127.0.0.1:3000/api`.
//!
//! Environment:
//! - `PORT`: the port to listen on (default 3000), always on 127.0.0.1;
//! - `SLUICE_STORE`: `memory://` (the default) or `redis://host:port/db` to share limits between
//!   nodes through Redis;
//! - `SLUICE_TRUSTED_PROXIES`: comma-separated networks of the proxies in front
//!   (`10.0.0.0/8,::1/128`). None by default, so `X-Forwarded-For` is ignored and clients are
//!   counted by their TCP address.
//! - `RUST_LOG`: log filter (default `info`; degraded decisions are logged at `info`).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::Router;
use axum::extract::Path;
use axum::routing::{get, post};
use ipnet::IpNet;
use sluice::middleware::{ClientIp, PathParam, SluiceLayer};
use sluice::model::{Algorithm, Limit};
use sluice::store::redis::RedisStore;
use sluice::store::url::{StoreKind, StoreUrl, redact};
use sluice::{DynStore, Limiter, MemoryStore, Rule};

/// The message for too many employee lookups (a rule's `message` can be any text).
pub const EMPLOYEE_MESSAGE: &str = "查询太快啦,喝杯茶再来";

/// The rules of this app.
pub fn rules() -> anyhow::Result<Vec<(String, Rule)>> {
    let mut login = Rule::new(vec![
        Limit::new(&["ip"], "5/1m".parse()?, Algorithm::SlidingLog)
            .with_block(Duration::from_secs(15 * 60)),
    ]);
    login.message = Some("too many login attempts; try again later".into());
    let mut employee = Rule::new(vec![Limit::new(
        &["id"],
        "5/10s".parse()?,
        Algorithm::SlidingLog,
    )]);
    employee.message = Some(EMPLOYEE_MESSAGE.into());
    let api = Rule::new(vec![
        Limit::new(&["ip"], "10/1s".parse()?, Algorithm::TokenBucket).with_burst(20),
    ]);
    Ok(vec![
        ("login".into(), login),
        ("employee".into(), employee),
        ("api".into(), api),
    ])
}

/// The routes, each limited by its rule.
pub fn app(limiter: &Limiter, trusted_proxies: Vec<IpNet>) -> Router {
    let client_ip = ClientIp::new("ip").trust(trusted_proxies);
    Router::new()
        .route(
            "/login",
            post(login).layer(SluiceLayer::new(limiter, "login").extract(client_ip.clone())),
        )
        .route(
            "/employees/{id}",
            get(employee)
                .layer(SluiceLayer::new(limiter, "employee").extract(PathParam::new("id"))),
        )
        .route(
            "/api",
            get(api).layer(SluiceLayer::new(limiter, "api").extract(client_ip)),
        )
}

async fn login() -> &'static str {
    "welcome\n"
}

async fn employee(Path(id): Path<u64>) -> String {
    format!("employee {id}\n")
}

async fn api() -> &'static str {
    "{\"ok\":true}\n"
}

/// The store named by `SLUICE_STORE`.
async fn store(url: Option<&str>) -> anyhow::Result<Arc<dyn DynStore>> {
    let url = StoreUrl::parse(url.unwrap_or("memory://"))?;
    Ok(match url.kind {
        StoreKind::Memory => Arc::new(MemoryStore::new()),
        StoreKind::Redis => Arc::new(
            RedisStore::connect(url.url, Default::default())
                .await
                .with_context(|| format!("connecting to {}", redact(url.url)))?,
        ),
        kind => anyhow::bail!("this app cannot open a store of kind {kind:?}"),
    })
}

fn trusted_proxies(list: Option<&str>) -> anyhow::Result<Vec<IpNet>> {
    list.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<IpNet>()
                .with_context(|| format!("SLUICE_TRUSTED_PROXIES: `{s}` is not a network"))
        })
        .collect()
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let store_url = std::env::var("SLUICE_STORE").ok();
    let store = store(store_url.as_deref()).await?;
    let limiter = Limiter::builder(store).rules(rules()?).build()?;
    let proxies = trusted_proxies(std::env::var("SLUICE_TRUSTED_PROXIES").ok().as_deref())?;
    let port: u16 = match std::env::var("PORT") {
        Ok(p) => p.parse().with_context(|| format!("PORT `{p}`"))?,
        Err(_) => 3000,
    };
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, port))
        .await
        .with_context(|| format!("binding 127.0.0.1:{port}"))?;
    tracing::info!(
        addr = %listener.local_addr()?,
        store = limiter.store().name(),
        trusted_proxies = ?proxies,
        "listening"
    );
    axum::serve(
        listener,
        app(&limiter, proxies).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .with_graceful_shutdown(async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
