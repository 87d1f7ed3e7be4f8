//! [`SimulateError`]: why a simulation could not run, or its files could not be written.
//!
//! Messages read as the start of a chain (`cannot open trace.csv: <cause>`), so a caller that
//! prints the sources after it gets the whole reason.

use std::error::Error as StdError;

use sluice_server::config::ConfigError;

/// Why a simulation could not run or write its report.
#[derive(Debug, thiserror::Error)]
pub enum SimulateError {
    /// The rule file does not load or validate.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The limiter refused the rules, or a decision failed outside the simulated outage.
    #[error(transparent)]
    Limiter(#[from] sluice::Error),
    /// The arguments or a trace ask for something the simulator cannot replay.
    #[error("{0}")]
    Invalid(String),
    /// A file could not be read, parsed or written.
    #[error("{what}")]
    Failed {
        /// What was being done, naming the file or line.
        what: String,
        /// What went wrong.
        #[source]
        source: Box<dyn StdError + Send + Sync>,
    },
    /// A trace could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// A CSV trace's row does not parse.
    #[error(transparent)]
    Csv(#[from] csv::Error),
    /// A plot could not be drawn.
    #[error("drawing a plot: {0}")]
    Plot(String),
    /// The report could not be written as JSON.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// Names what was being done when a file operation failed.
pub(crate) trait Context<T> {
    /// The error, as [`SimulateError::Failed`] with `what()` as its message.
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, SimulateError>;
}

impl<T, E: StdError + Send + Sync + 'static> Context<T> for Result<T, E> {
    fn with_context<S: Into<String>>(self, what: impl FnOnce() -> S) -> Result<T, SimulateError> {
        self.map_err(|source| SimulateError::Failed {
            what: what().into(),
            source: Box::new(source),
        })
    }
}
