//! `Algorithm`: the names of the algorithms a limit can use, and what each one supports.
//!
//! The algorithms themselves live in `crate::algorithm` (pure Rust) and beside the Redis store
//! (Lua); this is the one list of their names, used by rule files, keys and errors.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ModelError;

/// The algorithm a limit uses. See `crate::algorithm` for each one's semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum Algorithm {
    /// Exact: the time of every admitted unit within the window.
    SlidingLog,
    /// Approximate: sub-window buckets; never admits more than the limit in any window.
    SlidingWindow,
    /// Exact per aligned window; up to twice the limit across a window edge.
    FixedWindow,
    /// Exact: a bucket of `burst` tokens refilled at the rate.
    TokenBucket,
    /// Exact: generic cell rate algorithm, one timestamp per key. The default.
    #[default]
    Gcra,
    /// Exact: a queue drained at the rate; admits with a delay until the queue is full.
    LeakyBucket,
}

impl Algorithm {
    /// Every algorithm, in documentation order.
    pub const ALL: [Algorithm; 6] = [
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::FixedWindow,
        Algorithm::TokenBucket,
        Algorithm::Gcra,
        Algorithm::LeakyBucket,
    ];

    /// The name used in config files and keys.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::SlidingLog => "sliding_log",
            Algorithm::SlidingWindow => "sliding_window",
            Algorithm::FixedWindow => "fixed_window",
            Algorithm::TokenBucket => "token_bucket",
            Algorithm::Gcra => "gcra",
            Algorithm::LeakyBucket => "leaky_bucket",
        }
    }

    /// Whether "a denied request counts too" has a meaning: only for algorithms that count events.
    pub fn supports_count_denied(self) -> bool {
        matches!(
            self,
            Algorithm::SlidingLog | Algorithm::SlidingWindow | Algorithm::FixedWindow
        )
    }

    /// Whether the algorithm takes a `burst` (a capacity different from the rate's count).
    pub fn supports_burst(self) -> bool {
        matches!(
            self,
            Algorithm::TokenBucket | Algorithm::Gcra | Algorithm::LeakyBucket
        )
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for Algorithm {
    type Err = ModelError;
    fn from_str(s: &str) -> Result<Algorithm, ModelError> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                ModelError::new(
                    "algorithm",
                    format!(
                        "unknown algorithm `{s}`; expected one of {}",
                        names.join(", ")
                    ),
                )
            })
    }
}
