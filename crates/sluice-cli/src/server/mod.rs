//! The HTTP decision service: state, router, and the `serve` lifecycle.
//!
//! [`serve`] takes its listener and shutdown signal from the caller, so tests bind port 0 and
//! stop it themselves; [`run`] is `sluice serve`: load the file, open the store, bind, watch the
//! file, and stop gracefully on SIGTERM or Ctrl-C. The rules in force live in the [`Limiter`]
//! (swapped atomically on reload); what the service says about them (version, load time, header
//! style) lives in [`Live`], swapped with them.
//!
//! # Layout
//! - `routes`: check, peek, rules, health, metrics;
//! - `admin`: bearer-token guard, reset and blocks;
//! - `dashboard`: the `/ui` page and the admin read endpoints it uses (`/v1/stats`, block lifting);
//! - `connections`: the accept loop, its connection cap and the timeouts of stalled connections;
//! - `tracker`: what one connection is doing, and its yield after each response;
//! - `core_yield`: a worker thread's yield of its core every few dozen responses;
//! - `front`: what answers each request: the decision routes at once, the rest via the router;
//! - `deadline`: `request_timeout`, a 408 for a request not answered in time;
//! - `error`: JSON errors and body parsing (every client mistake is a 4xx with `{"error"}`);
//! - `request`: the bodies that name a rule and an identity, read in place;
//! - `reload`: file watch and SIGHUP → parse → validate → swap;
//! - `metrics`: the Prometheus recorder and the top denied identities (`topk`).

mod admin;
mod connections;
mod core_yield;
mod dashboard;
mod deadline;
pub(crate) mod error;
mod front;
mod leases;
pub mod metrics;
pub mod reload;
mod request;
mod routes;
pub mod topk;
mod tracker;

pub(crate) use connections::accept_loop;
pub(crate) use front::Front;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use arc_swap::ArcSwap;
use axum::Router;
use sluice::config::Config;
use sluice::model::HeaderStyle;
use sluice::{Limiter, MemoryStore};
use tokio::net::TcpListener;

use crate::cli::ServeArgs;
use crate::store_url::{self, OpenedStore, redact};
use deadline::DeadlineLayer;

/// Where the service listens when neither `--listen` nor `listen` says.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);

/// Largest request body accepted (bigger ones get 413).
pub const MAX_BODY_BYTES: usize = 64 * 1024;

/// What the service reports about the configuration in force; replaced whole on reload.
#[derive(Debug, Clone)]
pub struct Live {
    /// SHA-1 of the file in force.
    pub version: String,
    /// When it was loaded (epoch ms).
    pub loaded_at_ms: u64,
    /// Which rate-limit headers to send.
    pub headers: HeaderStyle,
    /// The config as loaded (settings that need a restart are compared against the first one).
    pub config: Config,
}

/// Everything a request handler needs.
#[derive(Debug)]
pub struct AppState {
    /// Decides requests; its rules are swapped on reload.
    pub limiter: Limiter,
    /// Version, load time, header style of the rules in force.
    pub live: ArcSwap<Live>,
    /// The rule file, when the rules came from one (reload reads it again).
    pub config_path: Option<PathBuf>,
    /// The config as it was at start: listen, store and admin settings are fixed to it.
    pub startup: Config,
    /// Bearer token for admin endpoints; `None` turns them off.
    admin_token: Option<String>,
    /// Top denied identities per rule.
    pub top_denied: topk::TopDenied,
    /// The store answers over the network: a decision waits for it.
    remote_store: bool,
}

impl AppState {
    /// Builds the state from a validated config and an opened store. `admin_token` comes from the
    /// environment variable the config names (read by the caller, so tests can pass one).
    pub fn new(
        config: Config,
        config_path: Option<PathBuf>,
        store: &OpenedStore,
        admin_token: Option<String>,
    ) -> anyhow::Result<Arc<AppState>> {
        let mut builder = Limiter::builder(store.store.clone()).options(config.limiter_options());
        if let Some(channel) = &store.channel {
            builder = builder.invalidation_channel(channel.clone());
        }
        let limiter = builder.build().context("building the limiter")?;
        limiter
            .set_rules(reload::rules_in_force(&config))
            .context("the rules do not compile")?;
        limiter.set_enabled(config.enabled);
        let live = Live {
            version: config.version.clone(),
            loaded_at_ms: now_ms(),
            headers: config.headers,
            config: config.clone(),
        };
        let top_denied = topk::TopDenied::new(topk::K, config.metrics.top_denied);
        Ok(Arc::new(AppState {
            limiter,
            live: ArcSwap::from_pointee(live),
            config_path,
            startup: config,
            admin_token: admin_token.filter(|t| !t.is_empty()),
            top_denied,
            remote_store: !store.store.in_process(),
        }))
    }

    /// Decides one request, and counts the identities of the limits that denied it in the
    /// top-denied tracker (a peek counts nothing).
    pub async fn decide(
        &self,
        rule: &str,
        attributes: &[(&str, impl AsRef<str>)],
        check: sluice::Check,
    ) -> Result<sluice::Decision, sluice::Error> {
        let decision = self.limiter.check_with(rule, attributes, check).await?;
        if check.mode() == sluice::algorithm::Mode::Apply
            && decision.limits.iter().any(|l| !l.allowed)
        {
            self.top_denied.record(&decision, attributes);
        }
        Ok(decision)
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// The service's routes over a state.
pub fn router(state: Arc<AppState>) -> Router {
    routes::router(state.clone())
        .merge(admin::router(state.clone()))
        .merge(leases::router(state.clone()))
        .merge(dashboard::router(state.clone()))
        .merge(crate::gateway::forward_auth::router(state))
}

/// Serves until `shutdown` completes, then finishes the requests in flight.
///
/// Connections are bounded by the `server` section of the config in force at start: a cap on
/// open connections and timeouts for stalled ones (see `connections`); each request has
/// `request_timeout` from its head to its response.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let address = listener.local_addr()?;
    let mut limits = state.startup.server.clone();
    limits.max_connections = connection_cap(limits.max_connections);
    tracing::info!(
        %address,
        max_connections = limits.max_connections,
        "listening on http://{address}"
    );
    let app = Front::with_decisions(
        router(state.clone()).layer(DeadlineLayer::new(limits.request_timeout)),
        state,
        limits.request_timeout,
    );
    let (stop, stopped) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        shutdown.await;
        let _ = stop.send(true);
    });
    connections::accept_loop(listener, app, limits, stopped).await?;
    tracing::info!("stopped");
    Ok(())
}

/// File descriptors kept for everything but client connections: the store's connections, the
/// rule file and its watch, logs.
const RESERVED_FDS: u64 = 64;

/// The connection cap actually used: `wanted`, unless the process's file-descriptor limit
/// cannot hold that many. The soft limit is first raised as far as the hard limit allows, since
/// many systems start processes with a soft limit of 1024.
fn connection_cap(wanted: usize) -> usize {
    let want_fds = wanted as u64 + RESERVED_FDS;
    let fds = match rlimit::increase_nofile_limit(want_fds) {
        Ok(fds) => fds,
        Err(error) => {
            tracing::warn!(%error, "cannot read or raise the file-descriptor limit");
            return wanted;
        }
    };
    let fit = usize::try_from(fds.saturating_sub(RESERVED_FDS)).unwrap_or(usize::MAX);
    if fit < wanted {
        tracing::warn!(
            max_connections = wanted,
            file_descriptors = fds,
            "the file-descriptor limit cannot hold max_connections; capping connections at {fit}"
        );
    }
    wanted.min(fit).max(1)
}

/// `sluice serve`.
pub async fn run(args: ServeArgs) -> anyhow::Result<()> {
    let prometheus = metrics::install();
    let config = Config::load(&args.config)?;
    let url = args
        .store
        .clone()
        .unwrap_or_else(|| config.store.url.clone());
    let store = store_url::open(&url, &config.store).await?;
    let admin_token = config
        .admin_token_env
        .as_ref()
        .and_then(|var| std::env::var(var).ok());
    let listen = args.listen.or(config.listen).unwrap_or(DEFAULT_LISTEN);
    let rules = config.rules.len();
    let version = config.version.clone();
    let state = AppState::new(config, Some(args.config.clone()), &store, admin_token)?;
    tracing::info!(
        config = %args.config.display(),
        store = %redact(&url),
        rules,
        version = %version,
        admin = if state.admin_token.is_some() { "on" } else { "off" },
        "rules loaded"
    );
    let listener = TcpListener::bind(listen)
        .await
        .with_context(|| format!("cannot listen on {listen}"))?;
    let _watch = reload::watch(state.clone())?;
    spawn_upkeep(store.memory.clone(), prometheus);
    let _grpc = crate::gateway::spawn_grpc(args.grpc_listen, &state).await?;
    serve(listener, state, shutdown_signal()).await?;
    Ok(())
}

/// Periodic housekeeping: drop expired memory-store entries, drain metric histograms.
fn spawn_upkeep(memory: Option<MemoryStore>, prometheus: metrics::Handle) {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(5));
        loop {
            tick.tick().await;
            if let Some(memory) = &memory {
                memory.sweep();
            }
            prometheus.run_upkeep();
        }
    });
}

/// Completes on SIGTERM or Ctrl-C.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
    };
    #[cfg(unix)]
    let term = async {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(error) => {
                tracing::warn!(%error, "cannot listen for SIGTERM");
                std::future::pending::<()>().await;
            }
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        () = ctrl_c => {},
        () = term => {},
    }
    tracing::info!("shutting down");
}
