//! Sluice: a distributed rate limiter, exact under concurrency, honest when its store fails.
//!
//! Many app nodes share one limit through a store (Redis, or memory on a single node). Each
//! request is decided by one atomic step in the store, with the algorithm of the rule's limit.
//!
//! ```
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! use sluice::{Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
//!
//! let limiter = Limiter::builder(MemoryStore::new())
//!     .rule("employee", Rule::new(vec![
//!         Limit::new(&["id"], "5/10s".parse()?, Algorithm::SlidingLog),
//!     ]))
//!     .build()?;
//! for _ in 0..5 {
//!     assert!(limiter.check("employee", &[("id", "42")]).await?.allowed);
//! }
//! let sixth = limiter.check("employee", &[("id", "42")]).await?;
//! assert!(!sixth.allowed);
//! assert!(sixth.retry_after_ms.is_some());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! # }).unwrap();
//! ```
//!
//! # Layout
//! Dependencies point down, from the top of this list to the bottom, but for the exceptions
//! named after it:
//! - `middleware` (feature `tower`): tower/axum integration and the extractors of attributes;
//! - `limited`: the [`Limited`] error and the global limiter behind `#[sluice::limited]`
//!   (the attribute itself is feature `macros`);
//! - [`conformance`] (feature `conformance`): the behaviours every store must show, run against a
//!   store by `conformance_suite!`;
//! - [`limiter`]: rules → keys → store, fail policy, breaker, the denial cache and hot keys;
//! - [`store`]: the [`Store`] trait, [`MemoryStore`], and `store::redis` (feature `redis`);
//! - [`algorithm`]: the pure algorithms (time in, decision out) and the multi-limit step;
//! - [`model`]: rules, limits, rates, decisions, the algorithm registry; `clock`: injectable
//!   time ([`Clock`], [`ManualClock`], [`SystemClock`], on [`Micros`], from `model`); `metric_catalog`: every metric the library records,
//!   declared once (its name for the code that records it, its help and unit for the recorder).
//!
//! The exceptions: a [`model::Condition`] matches the [`Attributes`] of `limiter`, and a
//! [`RuntimeLimit`] converts to and from `algorithm`'s [`algorithm::RuntimeNumbers`]; and the
//! Redis store's `command_for` spells out the command a [`Limiter`] would send.
//!
//! # Adding an algorithm
//! 1. In `model/algorithm.rs`, add the variant to [`Algorithm`] (its doc comment is the rule-file
//!    reference's description) and its entry to the registry (`model::REGISTRY`), in the same
//!    position: its name, its code (the next number), its Lua source (`<name>.lua`) and which
//!    options it takes (`count_denied`, `burst`, `leases`, `settles`). Every list of algorithms,
//!    every code the Redis store sends or writes into its Lua, and the options' checks derive
//!    from the entry.
//! 2. Write the pure algorithm in `algorithm/<name>.rs` (`decide(state, now, params, cost, mode)
//!    -> Outcome`, with its state type) and declare it in `algorithm/mod.rs`. The compiler then
//!    points at each match that names every algorithm: `AlgoState` and `AlgoState::decide`
//!    (`algorithm/mod.rs`), how a settlement charges it (`algorithm/settle.rs`: `None` unless the
//!    registry says it settles), why it cannot take hot-key batches (`model/batch.rs`,
//!    `refusal`), the denial cache's float margin (`limiter/denial_cache/mod.rs`), how a
//!    one-limit Redis script learns the time (`store/redis/one_script.rs`) and where the Redis
//!    store finds the Lua source (`store/redis/source.rs`).
//! 3. Write its Lua source, `store/redis/lua/<name>.lua`, in the sections
//!    `store/redis/source.rs` describes: `--@@general`, restating the Rust as `<name>_look` and
//!    `<name>_record` (the general decision finds them by code); for a fast path, `--@@one` (its
//!    one-limit script, after `lua/one_head.lua`) with `--@@many` (its part of a rule script: the
//!    look, the line `--@record`, the record); `--@@give_back`, defining `<name>_give_back`
//!    (every algorithm but one that holds leases: it returns units a hot-key batch did not spend
//!    or a cross-slot request consumed, through `lua/give_back.lua`); and, if it settles,
//!    `--@@settle`, defining `<name>_settle` (through `lua/settle.lua`). Where it needs a constant
//!    Rust also reads or another algorithm's code, it names it as Rust does (`MARKER`,
//!    `CODE_<NAME>`): each script opens with the constants it names (`store/redis/constants.rs`),
//!    and never spells a bare code. Give its state format a row in the State formats table of
//!    `store/redis/keys.rs`.
//! 4. Add its behaviour to the conformance suite ([`conformance`]): at least one behaviour in
//!    `conformance/algorithms.rs` (or `blocks.rs`, `leases.rs`, `requests.rs`,
//!    `reservations.rs`) that names `Algorithm::<Variant>`; and a reference model in
//!    `algorithm/reference_models.rs`.
//! 5. Rewrite the generated files the new algorithm reaches: `crates/sluice/public-api.txt`
//!    (`scripts/public-api --bless`), the rule-file schema and reference
//!    (`SLUICE_BLESS=1 cargo test -p sluice-ratelimit-cli --test it schema`) and the OpenAPI
//!    document (`SLUICE_BLESS_OPENAPI=1 cargo test -p sluice-ratelimit-server --lib openapi`).
//!
//! The Redis store's unit test `every_algorithm_is_in_every_place_the_registry_names`
//! (`store/redis/source/tests.rs`) fails, naming each place the new algorithm is missing from
//! (its sections, the give-back and settle sections, the state formats table, the conformance
//! suite); `model/registry_tests.rs` checks the names, the codes and the look and record
//! functions. The conformance suite (run by `tests/it/conformance.rs`) and the differential
//! test (`tests/it/redis_differential.rs`) then run the new algorithm on every store.
//!
//! # Adding a store
//! Implement [`Store`] with plain `async fn`s; a store outside this crate needs nothing else.
//! Each method is one atomic step: [`Store::decide`] runs [`algorithm::decide`] (or a
//! restatement of it) over all the calls of a request at one instant and returns one outcome
//! per call, in call order; an `Err` is an infrastructure failure (say whether it is transient:
//! only transient ones feed the breaker), never a denial. Give the store to
//! [`Limiter::builder`]; the limiter holds it as `Arc<dyn DynStore>`. If the store is named by a
//! URL, add its scheme to [`store::url::StoreUrl`], the one place URLs are recognised. Then run
//! the conformance suite against it: with feature `conformance`, one line in a test file,
//! `sluice::conformance_suite!(my_store, async { Subject::new(store, clock) })`, runs every
//! behaviour every store of this crate passes (see [`conformance`]). Limits that take units in
//! batches (hot keys) give back what a node did not spend through [`Store::give_back`]; a store
//! that keeps its default refuses, and those units then stay counted until they drain. A store that lives in this
//! process can also answer a one-limit request synchronously in [`Store::decide_one_now`]: the
//! limiter then checks without a future and without allocating.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

/// The crate's README (its page on the registry): its example is compiled as a doctest.
#[cfg(all(doctest, feature = "redis"))]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

pub mod algorithm;
mod clock;
#[cfg(feature = "conformance")]
pub mod conformance;
mod error;
mod limited;
pub mod limiter;
mod metric_catalog;
#[cfg(feature = "tower")]
pub mod middleware;
pub mod model;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::Error;
pub use limited::{Limited, check_call, global_limiter, set_global_limiter};
pub use limiter::{
    Attributes, Check, Limiter, LimiterBuilder, Options, QuotaCrossing, RuntimeLimitInfo,
};
pub use model::{
    Algorithm, Decision, FailPolicy, Limit, LimitDecision, Micros, Rate, Rule, RuntimeLimit,
    Verdict,
};
#[cfg(feature = "macros")]
pub use sluice_macros::{limit, limited};
pub use store::memory::MemoryStore;
pub use store::{DynStore, Store, StoreError};

/// What `#[sluice::limited]` expands to; not an API of its own.
#[doc(hidden)]
pub mod __macro_support {
    pub use crate::limited::{check_call, hold_lease};
}
