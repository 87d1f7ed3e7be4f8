//! The assembly of the service: the router of every HTTP route, the listeners, reload and
//! housekeeping, and the `serve` lifecycle.
//!
//! [`serve`] takes its listener and shutdown signal from the caller, so tests bind port 0 and
//! stop it themselves; [`run`] is `sluice serve`: load the file, open the store, bind, watch the
//! file, start the gRPC gateway when configured, and stop gracefully on SIGTERM or Ctrl-C.
//!
//! Settings given on the command line or in the environment win over the file, the file over the
//! defaults ([`ServeOptions::settings`]). A stop is bounded: the listener closes at once, and the
//! requests in flight get `shutdown_timeout` to finish before their connections are cut.

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

/// Serves until `shutdown` completes, then finishes the requests in flight within the file's
/// `server.shutdown_timeout`.
///
/// Connections are bounded by the `server` section of the config in force at start: a cap on
/// open connections and timeouts for stalled ones (see `http::connections`); each request has
/// `request_timeout` from its head to its response.
pub async fn serve(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let grace = state.startup.server.shutdown_timeout;
    serve_with_grace(listener, state, shutdown, grace).await
}

/// [`serve`], with the time the requests in flight get to finish once `shutdown` completes.
pub async fn serve_with_grace(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
    grace: Duration,
) -> std::io::Result<()> {
    let address = listener.local_addr()?;
    let mut limits = state.startup.server.clone();
    limits.shutdown_timeout = grace;
    limits.max_connections = connection_cap(limits.max_connections);
    tracing::info!(
        %address,
        max_connections = limits.max_connections,
        "listening on http://{address}"
    );
    let app = Front::with_decisions(
        router(state.clone())
            .layer(axum::middleware::from_fn_with_state(
                !state.limiter.store().in_process(),
                http::caller_deadline::middleware,
            ))
            .layer(DeadlineLayer::new(limits.request_timeout)),
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

/// What `sluice serve` is given on its command line or in its environment (the command line
/// parser puts a flag over its variable); each `Option` overrides the file.
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
    /// Time the requests in flight get to finish on SIGTERM or Ctrl-C, over the file's
    /// `server.shutdown_timeout`.
    pub shutdown_timeout: Option<Duration>,
}

/// The settings `sluice serve` runs with, each taken from the first that says: the command line
/// or environment ([`ServeOptions`]), the file, the default.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where the HTTP service listens.
    pub listen: SocketAddr,
    /// Where the Envoy rate-limit service listens, when it runs.
    pub grpc_listen: Option<SocketAddr>,
    /// The store's URL.
    pub store: String,
    /// Time the requests in flight get to finish on SIGTERM or Ctrl-C.
    pub shutdown_timeout: Duration,
}

impl ServeOptions {
    /// These options over `file` (whose own defaults fill what it does not say). The file's
    /// config itself is left as loaded: a reload compares its restart-only settings with it.
    pub fn settings(&self, file: &Config) -> Settings {
        Settings {
            listen: self.listen.or(file.listen).unwrap_or(DEFAULT_LISTEN),
            grpc_listen: self.grpc_listen.or(file.grpc_listen),
            store: self.store.clone().unwrap_or_else(|| file.store.url.clone()),
            shutdown_timeout: self
                .shutdown_timeout
                .unwrap_or(file.server.shutdown_timeout),
        }
    }
}

/// `sluice serve`: runs until SIGTERM or Ctrl-C, then stops accepting, gives the requests in
/// flight `shutdown_timeout` to finish, and returns.
pub async fn run(args: ServeOptions) -> Result<(), ServeError> {
    let stop = shutdown_signal();
    let stop_grpc = shutdown_signal();
    let prometheus = metrics::install();
    let config = Config::load(&args.config)?;
    let settings = args.settings(&config);
    let url = settings.store.clone();
    let store = store_url::open(&url, &config.store).await?;
    let admin_token = config
        .admin_token_env
        .as_ref()
        .and_then(|var| std::env::var(var).ok());
    let listen = settings.listen;
    let rules = config.rules.len();
    let version = config.version.clone();
    let traces = Traces::from_env()?;
    let notifications = config.notifications.clone();
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
    if let Some(crossings) = state.limiter.crossings() {
        crate::notifications::spawn(crossings, notifications);
    }
    spawn_upkeep(store.memory.clone(), prometheus);
    let grpc = spawn_grpc(settings.grpc_listen, &state, stop_grpc).await?;
    let grace = settings.shutdown_timeout;
    serve_with_grace(listener, state.clone(), stop, grace).await?;
    // The gRPC service heard the same signal and drains on its own; it gets the same bound.
    if let Some(mut grpc) = grpc
        && tokio::time::timeout(grace, &mut grpc).await.is_err()
    {
        tracing::warn!("gRPC requests still in flight at the shutdown timeout: cutting them");
        grpc.abort();
    }
    // Units this node took in batches and did not spend are the fleet's again.
    let given = state.limiter.give_back_batches().await;
    if given > 0 {
        tracing::info!(units = given, "gave back the units held in batches");
    }
    if let Some(traces) = traces {
        traces.shutdown(Duration::from_secs(5)).await;
    }
    Ok(())
}

/// Binds and starts the gRPC service when an address is configured; it stops on SIGTERM or
/// Ctrl-C with the HTTP service.
async fn spawn_grpc(
    address: Option<SocketAddr>,
    state: &Arc<AppState>,
    stop: impl Future<Output = ()> + Send + 'static,
) -> Result<Option<tokio::task::JoinHandle<()>>, ServeError> {
    let Some(address) = address else {
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
        if let Err(error) = gateway::serve_grpc(listener, state, stop).await {
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

/// Completes on SIGTERM or SIGINT (Ctrl-C).
///
/// The handlers are installed when this is called, not when the future is first polled: a signal
/// that arrives meanwhile (the service is still binding or opening its store) is kept, where it
/// would otherwise kill the process. Call it inside the Tokio runtime.
pub fn shutdown_signal() -> impl Future<Output = ()> + Send + 'static {
    #[cfg(unix)]
    let signals = {
        use tokio::signal::unix::{SignalKind, signal};
        [
            ("SIGTERM", signal(SignalKind::terminate())),
            ("SIGINT", signal(SignalKind::interrupt())),
        ]
    };
    async move {
        #[cfg(unix)]
        {
            let waits = signals.map(|(name, signal)| async move {
                match signal {
                    Ok(mut signal) => {
                        signal.recv().await;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "cannot listen for {name}");
                        std::future::pending::<()>().await;
                    }
                }
            });
            let [term, int] = waits;
            tokio::select! {
                () = term => {},
                () = int => {},
            }
        }
        #[cfg(not(unix))]
        if let Err(error) = tokio::signal::ctrl_c().await {
            tracing::warn!(%error, "cannot listen for Ctrl-C");
            std::future::pending::<()>().await;
        }
        tracing::info!("shutting down");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Format;

    fn options() -> ServeOptions {
        ServeOptions {
            config: PathBuf::from("sluice.yaml"),
            listen: None,
            grpc_listen: None,
            store: None,
            shutdown_timeout: None,
        }
    }

    #[test]
    fn the_defaults_fill_what_the_file_does_not_say() {
        let file = Config::parse("rules: {}\n", Format::Yaml).unwrap();
        let settings = options().settings(&file);
        assert_eq!(settings.listen, DEFAULT_LISTEN);
        assert_eq!(settings.grpc_listen, None);
        assert_eq!(settings.store, "memory://");
        assert_eq!(settings.shutdown_timeout, Duration::from_secs(10));
    }

    #[test]
    fn the_file_wins_over_the_defaults_and_the_options_over_the_file() {
        let text = "listen: 127.0.0.2:9000\ngrpc_listen: 127.0.0.2:9001\n\
                    store: { url: \"redis://127.0.0.1:6379/0\" }\n\
                    server: { shutdown_timeout: 3s }\nrules: {}\n";
        let file = Config::parse(text, Format::Yaml).unwrap();
        let from_file = options().settings(&file);
        assert_eq!(from_file.listen, "127.0.0.2:9000".parse().unwrap());
        assert_eq!(
            from_file.grpc_listen,
            Some("127.0.0.2:9001".parse().unwrap())
        );
        assert_eq!(from_file.store, "redis://127.0.0.1:6379/0");
        assert_eq!(from_file.shutdown_timeout, Duration::from_secs(3));
        let given = ServeOptions {
            listen: Some("0.0.0.0:8080".parse().unwrap()),
            grpc_listen: Some("0.0.0.0:8081".parse().unwrap()),
            store: Some("memory://".into()),
            shutdown_timeout: Some(Duration::from_millis(500)),
            ..options()
        }
        .settings(&file);
        assert_eq!(
            given,
            Settings {
                listen: "0.0.0.0:8080".parse().unwrap(),
                grpc_listen: Some("0.0.0.0:8081".parse().unwrap()),
                store: "memory://".into(),
                shutdown_timeout: Duration::from_millis(500),
            }
        );
    }
}
