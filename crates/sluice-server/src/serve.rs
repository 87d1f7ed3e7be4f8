//! The assembly of the service: the router of every HTTP route, the listeners, reload and
//! housekeeping, and the `serve` lifecycle.
//!
//! [`serve`] takes its listener and shutdown signal from the caller, so tests bind port 0 and
//! stop it themselves; [`run`] is `sluice serve`: load the file, open the store, bind, watch the
//! file, start the gRPC gateway when configured, and stop gracefully on SIGTERM or Ctrl-C.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use sluice::MemoryStore;
use sluice::store::url::redact;
use tokio::net::TcpListener;

use crate::config::Config;
use crate::error::ServeError;
use crate::gateway::{self, forward_auth};
use crate::http::{self, DeadlineLayer, Front};
use crate::state::AppState;
use crate::traces::Traces;
use crate::{metrics, reload, store_url};

/// Where the service listens when neither `--listen` nor `listen` says.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);

/// The service's routes over a state.
pub fn router(state: Arc<AppState>) -> Router {
    http::router(state.clone())
        .merge(forward_auth::router(state))
        .layer(axum::middleware::from_fn(http::timed))
}

/// Serves until `shutdown` completes, then finishes the requests in flight.
///
/// Connections are bounded by the `server` section of the config in force at start: a cap on
/// open connections and timeouts for stalled ones (see `http::connections`); each request has
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
    http::accept_loop(listener, app, limits, stopped).await?;
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

/// What `sluice serve` is given on its command line; each `Option` overrides the file.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    /// The rule file; watched and reloaded on change and on SIGHUP.
    pub config: PathBuf,
    /// Address to listen on, over the file's `listen` (default [`DEFAULT_LISTEN`]).
    pub listen: Option<SocketAddr>,
    /// Address of the Envoy rate-limit service, over the file's `grpc_listen` (off when neither
    /// is set).
    pub grpc_listen: Option<SocketAddr>,
    /// Store URL, over the file's `store.url`.
    pub store: Option<String>,
}

/// `sluice serve`: runs until SIGTERM or Ctrl-C.
pub async fn run(args: ServeOptions) -> Result<(), ServeError> {
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
    let traces = Traces::from_env()?;
    let state = AppState::with_traces(
        config,
        Some(args.config.clone()),
        &store,
        admin_token,
        traces.clone(),
    )?;
    tracing::info!(
        config = %args.config.display(),
        store = %redact(&url),
        rules,
        version = %version,
        admin = if state.admin_enabled() { "on" } else { "off" },
        traces = if traces.is_some() { "on" } else { "off" },
        "rules loaded"
    );
    let listener = TcpListener::bind(listen)
        .await
        .map_err(|source| ServeError::Listen {
            service: "",
            address: listen,
            source,
        })?;
    let _watch = reload::watch(state.clone())?;
    spawn_upkeep(store.memory.clone(), prometheus);
    let _grpc = spawn_grpc(args.grpc_listen, &state).await?;
    serve(listener, state, shutdown_signal()).await?;
    if let Some(traces) = traces {
        traces.shutdown(Duration::from_secs(5)).await;
    }
    Ok(())
}

/// Binds and starts the gRPC service when an address is configured (`--grpc-listen` over
/// `grpc_listen`); it stops on SIGTERM or Ctrl-C with the HTTP service.
async fn spawn_grpc(
    flag: Option<SocketAddr>,
    state: &Arc<AppState>,
) -> Result<Option<tokio::task::JoinHandle<()>>, ServeError> {
    let Some(address) = flag.or(state.startup.grpc_listen) else {
        return Ok(None);
    };
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| ServeError::Listen {
            service: "for gRPC ",
            address,
            source,
        })?;
    let state = state.clone();
    Ok(Some(tokio::spawn(async move {
        if let Err(error) = gateway::serve_grpc(listener, state, shutdown_signal()).await {
            tracing::error!(%error, "the gRPC service stopped");
        }
    })))
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
