//! The Sluice decision service: the HTTP API over a [`sluice::Limiter`], its admin endpoints and
//! dashboard, the gateways that let proxies ask it (Envoy's rate-limit service over gRPC,
//! forward-auth), its rule files with hot reload, metrics, and bounds on connections.
//!
//! The `sluice` binary runs it with `sluice serve` ([`run`]); a program of its own can build an
//! [`AppState`] and [`serve`](fn@serve) it on a listener it bound, stopping it with a future it owns.
//!
//! ```no_run
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! use sluice_server::config::Config;
//! use sluice_server::{AppState, serve, shutdown_signal, store_url};
//!
//! let config = Config::load(std::path::Path::new("rules.yaml"))?;
//! let store = store_url::open(&config.store.url, &config.store).await?;
//! let state = AppState::new(config, None, &store, None)?;
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! serve(listener, state, shutdown_signal()).await?;
//! # Ok(()) }
//! ```
//!
//! # Layout
//! Dependencies point one way, from top to bottom:
//! - [`serve`](mod@serve): the assembly: the router of every route, the listeners, reload and
//!   housekeeping, and the `serve` lifecycle;
//! - [`gateway`]: Envoy's rate-limit service (gRPC, with health) and the forward-auth route;
//! - [`grpc`]: Sluice's own gRPC API, `sluice.v1`, beside Envoy's on the gRPC port;
//! - [`http`]: the HTTP API (check, peek, rules, health, metrics, leases, admin, the `/ui`
//!   dashboard and its assets), what answers before the router, and the connections with their
//!   cap and timeouts;
//! - [`reload`]: file watch and SIGHUP → parse → validate → swap;
//! - [`state`]: what every route shares: the limiter, the rules' version, settings fixed at start;
//! - [`metrics`]: the Prometheus recorder; [`topk`]: the most denied identities per rule;
//!   [`traces`]: OpenTelemetry spans of decisions, exported over OTLP when configured;
//! - [`decision_json`]: a decision written as JSON straight into the response body;
//! - [`store_url`]: a store opened from its URL and the file's `store` section;
//! - [`api_error`]: every error the service answers, with its stable code (HTTP and gRPC);
//! - [`ServeError`]: why the service could not start;
//! - [`config`]: rule files (YAML or TOML): the rules and every section of the service's
//!   settings (`server`, `reload`, `metrics`, `store`, `denial_cache`, `envoy`,
//!   `forward_auth`), with errors that name the line.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The crate's README (its page on the registry): its example is compiled as a doctest.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod api_error;
pub mod config;
pub mod decision_json;
mod error;
pub mod gateway;
pub mod grpc;
pub mod http;
pub mod metrics;
pub mod notifications;
pub mod reload;
pub mod serve;
pub mod state;
pub mod store_url;
pub mod topk;
pub mod traces;

pub use error::ServeError;
pub use serve::{
    DEFAULT_LISTEN, ServeOptions, Settings, router, run, serve, serve_with_grace, shutdown_signal,
};
pub use state::{AppState, Live};
