//! `Algorithm`: the algorithms a limit can use, what each one supports, and their registry —
//! the one table that says, for each algorithm, its name, its wire code and its Lua files.
//!
//! The algorithms themselves live in `crate::algorithm` (pure Rust, module `<name>`) and in one
//! Lua source each beside the Redis store (`lua/<name>.lua`). Everything else derives from
//! [`REGISTRY`]: [`Algorithm::ALL`], names in config files and keys, which options each takes,
//! the codes the Redis store sends and writes into its Lua (the general decision's
//! `LOOKS`/`RECORDS` tables, the give-back and settle scripts), the error listing the known
//! names. The registry is crate-private (codes and Lua files are the stores' business, not the
//! API's). Matches on [`Algorithm`] name every variant, so the compiler points at each one; the
//! Redis store's tests name each place a new algorithm is missing from. See "Adding an
//! algorithm" in the crate docs.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::ModelError;

/// One algorithm as every layer knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Entry {
    /// The variant.
    pub algorithm: Algorithm,
    /// Its name in config files and keys; also the Rust module `crate::algorithm::<name>` and
    /// the Lua functions `<name>_look` and `<name>_record` of the decision script.
    pub name: &'static str,
    /// The number the Redis decision script receives (1-based index of its tables).
    pub wire_code: u8,
    /// The Lua source restating the Rust module, in `src/store/redis/lua/`: `<name>.lua`.
    pub lua_file: &'static str,
    /// Whether "a denied request counts too" has a meaning: the algorithm counts events.
    pub count_denied: bool,
    /// Whether the algorithm takes a `burst` (a capacity different from the rate's count).
    pub burst: bool,
    /// Whether the limit holds leases rather than a rate.
    pub leases: bool,
    /// Whether a reservation on it can be settled (see [`crate::algorithm::settle`]).
    pub settles: bool,
}

/// Every algorithm, in declaration and wire-code order.
pub(crate) const REGISTRY: [Entry; 7] = [
    Entry {
        algorithm: Algorithm::SlidingLog,
        name: "sliding_log",
        wire_code: 1,
        lua_file: "sliding_log.lua",
        count_denied: true,
        burst: false,
        leases: false,
        settles: false,
    },
    Entry {
        algorithm: Algorithm::SlidingWindow,
        name: "sliding_window",
        wire_code: 2,
        lua_file: "sliding_window.lua",
        count_denied: true,
        burst: false,
        leases: false,
        settles: false,
    },
    Entry {
        algorithm: Algorithm::FixedWindow,
        name: "fixed_window",
        wire_code: 3,
        lua_file: "fixed_window.lua",
        count_denied: true,
        burst: false,
        leases: false,
        settles: false,
    },
    Entry {
        algorithm: Algorithm::TokenBucket,
        name: "token_bucket",
        wire_code: 4,
        lua_file: "token_bucket.lua",
        count_denied: false,
        burst: true,
        leases: false,
        settles: true,
    },
    Entry {
        algorithm: Algorithm::Gcra,
        name: "gcra",
        wire_code: 5,
        lua_file: "gcra.lua",
        count_denied: false,
        burst: true,
        leases: false,
        settles: true,
    },
    Entry {
        algorithm: Algorithm::LeakyBucket,
        name: "leaky_bucket",
        wire_code: 6,
        lua_file: "leaky_bucket.lua",
        count_denied: false,
        burst: true,
        leases: false,
        settles: false,
    },
    Entry {
        algorithm: Algorithm::Concurrency,
        name: "concurrency",
        wire_code: 7,
        lua_file: "concurrency.lua",
        count_denied: false,
        burst: false,
        leases: true,
        settles: false,
    },
];

/// How a limit counts; `gcra` when a limit names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
    /// Exact: a queue drained at the rate; admits with a delay until the queue is full. An
    /// admitted decision carries `delay_ms`, how long the caller should wait before acting so
    /// that requests leave at the rate (0 while the queue is empty); `burst` is the queue's
    /// length.
    LeakyBucket,
    /// Exact: at most `max_leases` units held at once by leases, each released by its holder or
    /// expiring after the limit's `lease` duration. A count of work in progress, not a rate.
    Concurrency,
}

impl Algorithm {
    /// Every algorithm, in documentation and wire-code order.
    pub const ALL: [Algorithm; REGISTRY.len()] = {
        let mut all = [Algorithm::Gcra; REGISTRY.len()];
        let mut i = 0;
        while i < REGISTRY.len() {
            all[i] = REGISTRY[i].algorithm;
            i += 1;
        }
        all
    };

    /// This algorithm's registry entry.
    pub(crate) fn entry(self) -> &'static Entry {
        // The registry lists the variants in declaration order (checked by a test below).
        &REGISTRY[self as usize]
    }

    /// The name used in config files, keys, Rust modules and Lua functions.
    pub fn name(self) -> &'static str {
        self.entry().name
    }

    /// The number the Redis decision script knows this algorithm by.
    #[cfg(any(feature = "redis", test))]
    pub(crate) fn wire_code(self) -> u8 {
        self.entry().wire_code
    }

    /// Whether "a denied request counts too" has a meaning: only for algorithms that count events.
    pub fn supports_count_denied(self) -> bool {
        self.entry().count_denied
    }

    /// Whether the algorithm takes a `burst` (a capacity different from the rate's count).
    pub fn supports_burst(self) -> bool {
        self.entry().burst
    }

    /// Whether the limit holds leases (`limit` and `lease` in rule files) rather than a rate.
    pub fn holds_leases(self) -> bool {
        self.entry().leases
    }

    /// Whether a reservation on this algorithm can be settled (see
    /// [`crate::algorithm::settle`]): the draining meters, whose one level a settlement can
    /// lower or raise with the same effect whenever it comes.
    pub fn settles(self) -> bool {
        self.entry().settles
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
                ModelError::new(
                    "algorithm",
                    format!(
                        "unknown algorithm `{s}`; expected one of {}",
                        REGISTRY.map(|e| e.name).join(", ")
                    ),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_registry_follows_the_declaration_order() {
        for (i, entry) in REGISTRY.iter().enumerate() {
            assert_eq!(entry.algorithm as usize, i, "{}", entry.name);
            assert_eq!(usize::from(entry.wire_code), i + 1, "{}", entry.name);
            assert_eq!(entry.lua_file, format!("{}.lua", entry.name));
            assert_eq!(entry.name.parse::<Algorithm>(), Ok(entry.algorithm));
            assert_eq!(
                serde_json::to_string(&entry.algorithm).unwrap(),
                format!("\"{}\"", entry.name)
            );
        }
    }
}
