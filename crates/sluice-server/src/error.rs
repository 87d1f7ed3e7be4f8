//! [`ServeError`]: why the service could not start (a bad rule file, a store that cannot be
//! opened, an address already in use). Once serving, failures are answers or log lines, not
//! errors of this type.
//!
//! Each message reads as the start of a chain (`cannot open the store at redis://…: <cause>`),
//! so a caller that prints the sources after it gets the whole reason.

use std::net::SocketAddr;
use std::path::PathBuf;

use sluice::StoreError;
use sluice::store::url::StoreUrlError;

use crate::config::ConfigError;

/// Why the service, or the store it names, could not be started.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    /// The rule file does not load or validate.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The store URL names no store this service knows.
    #[error(transparent)]
    StoreUrl(#[from] StoreUrlError),
    /// The store was named but does not answer (or refused the connection's settings).
    #[error("cannot open the store at {url}")]
    Store {
        /// The URL, with any password hidden.
        url: String,
        /// What the store said.
        #[source]
        source: StoreError,
    },
    /// The limiter refused the options or rules of a file that validated.
    #[error("{what}")]
    Limiter {
        /// What was being done.
        what: &'static str,
        /// Why the limiter refused.
        #[source]
        source: sluice::Error,
    },
    /// An address to listen on could not be bound.
    #[error("cannot listen {service}on {address}")]
    Listen {
        /// `""` for the HTTP service, `"for gRPC "` for the gateway.
        service: &'static str,
        /// The address asked for.
        address: SocketAddr,
        /// What the OS said.
        #[source]
        source: std::io::Error,
    },
    /// The rule file's directory cannot be watched for changes.
    #[error("cannot watch {}", dir.display())]
    Watch {
        /// The directory watched (editors replace files by rename, so the directory is watched).
        dir: PathBuf,
        /// What the watcher said.
        #[source]
        source: notify::Error,
    },
    /// The file watcher itself could not start.
    #[error("cannot start watching the config file")]
    Watcher(#[source] notify::Error),
    /// The OpenTelemetry environment asks for traces that cannot be exported.
    #[error("cannot export traces")]
    Traces(#[from] crate::traces::TracesError),
    /// Serving failed after start (the listener broke).
    #[error(transparent)]
    Io(#[from] std::io::Error),
}
