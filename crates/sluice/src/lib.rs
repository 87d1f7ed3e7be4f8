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
//! - [`limited`]: the [`Limited`] error and the global limiter behind `#[sluice::limit]`
//!   (the attribute itself is feature `macros`);
//! - [`limiter`]: rules → keys → store, fail policy and breaker; `config` (feature `config`)
//!   reads rule files;
//! - [`store`]: the [`Store`] trait, [`MemoryStore`], and `store::redis` (feature `redis`);
//! - [`algorithm`]: the pure algorithms (time in, decision out) and the multi-limit step;
//! - [`model`]: rules, limits, rates, decisions; [`clock`]: injectable time.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

pub mod algorithm;
pub mod clock;
#[cfg(feature = "config")]
pub mod config;
mod error;
pub mod limited;
pub mod limiter;
#[cfg(feature = "tower")]
pub mod middleware;
pub mod model;
pub mod store;

pub use clock::{Clock, ManualClock, SystemClock};
pub use error::Error;
pub use limited::{Limited, check_call, global_limiter, set_global_limiter};
pub use limiter::{Attributes, Check, Limiter, LimiterBuilder, Options};
pub use model::{Algorithm, Decision, FailPolicy, Limit, LimitDecision, Rate, Rule};
#[cfg(feature = "macros")]
pub use sluice_macros::limit;
pub use store::memory::MemoryStore;
pub use store::{DynStore, Store, StoreError};
