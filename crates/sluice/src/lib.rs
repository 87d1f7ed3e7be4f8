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
//! Dependencies point one way, from top to bottom:
//! - `middleware` (feature `tower`): tower/axum integration and identity extractors;
//! - `limited`: the [`Limited`] error and the global limiter behind `#[sluice::limited]`
//!   (the attribute itself is feature `macros`);
//! - [`limiter`]: rules → keys → store, fail policy and breaker;
//! - [`store`]: the [`Store`] trait, [`MemoryStore`], and `store::redis` (feature `redis`);
//! - [`algorithm`]: the pure algorithms (time in, decision out) and the multi-limit step;
//! - [`model`]: rules, limits, rates, decisions, the algorithm registry; [`clock`]: injectable
//!   time; `metric_catalog`: every metric the library records, declared once (its name for the
//!   code that records it, its help and unit for the recorder).
//!
//! # Adding an algorithm
//! 1. Add the variant to [`Algorithm`] and its entry to the registry (`model::REGISTRY`), in the same
//!    position: its name, its code (the next number), its Lua source (`<name>.lua`) and which
//!    options it takes (`count_denied`, `burst`, leases, settling). Every list of algorithms,
//!    every code the Redis store sends or writes into its Lua, and the options' checks derive
//!    from the entry.
//! 2. Write the pure algorithm in `algorithm/<name>.rs` (`decide(state, now, params, cost, mode)
//!    -> Outcome`, with its state type). The compiler then points at each match that names every
//!    algorithm: `AlgoState` and `AlgoState::decide` (`algorithm/mod.rs`), the denial cache's
//!    float margin (`limiter/denial_cache`), how a one-limit Redis script learns the time
//!    (`store/redis/one_script.rs`) and where the Redis store finds the Lua source
//!    (`store/redis/source.rs`).
//! 3. Write its Lua source, `store/redis/lua/<name>.lua`: a `--@@general` section restating the
//!    Rust as `<name>_look` and `<name>_record` (the general decision lists them by code), and,
//!    for a fast path, a `--@@one` section (its one-limit script, after `lua/one_head.lua`) with
//!    a `--@@many` section (its part of a rule script: the look, `--@record`, the record). Where
//!    it needs a shared constant or another algorithm's code, write `${NAME}` (see
//!    `store/redis/source.rs`). Add its branch to `lua/give_back.lua` (unless it holds leases)
//!    and, if it settles, to `lua/settle.lua`, matching `${CODE_<NAME>}`; give its state format a
//!    row in `store/redis/keys.rs`.
//! 4. Add its behaviour to the conformance suite ([`conformance`]).
//!
//! The Redis store's unit test `every_algorithm_is_in_every_place_the_registry_names` fails,
//! naming each place the new algorithm is missing from (its sections, the give-back and settle
//! scripts, the state formats, the conformance suite); `model/registry_tests.rs` checks the
//! names and codes. The conformance suite (run by `tests/it/conformance.rs`) and the differential
//! test (`tests/it/redis_differential.rs`) then run the new algorithm on every store.
//!
//! # Adding a store
//! Implement [`Store`] with plain `async fn`s; a store outside this crate needs nothing else.
//! Each method is one atomic step: [`Store::decide`] runs [`algorithm::step`] (or a
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
pub mod clock;
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
pub use limited::{Limited, check_call, global_limiter, hold_lease, set_global_limiter};
pub use limiter::{Attributes, Check, Limiter, LimiterBuilder, Options, RuntimeLimitInfo};
pub use model::{
    Algorithm, Decision, FailPolicy, Limit, LimitDecision, Micros, Rate, Rule, RuntimeLimit,
    Verdict,
};
#[cfg(feature = "macros")]
pub use sluice_macros::{limit, limited};
pub use store::memory::MemoryStore;
pub use store::{DynStore, Store, StoreError};
