//! The Rust snippets of the docs (README.md and the book under `docs/src`), each the body of a
//! function here, word for word (after the `use` lines a snippet leaves out). Building the
//! examples compiles them; `tests/it/doc_snippets.rs` runs them and fails when a page no longer
//! shows them as written here.
//!
//! `cargo run -p sluice-ratelimit --example readme`

// Formatting would make these differ from the docs' text.
#![cfg_attr(rustfmt, rustfmt::skip)]

use std::error::Error;

/// "Using the library": a rule, a check, a cost and a peek.
pub async fn using_the_library() -> Result<(), Box<dyn Error>> {
    use sluice::{Check, Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};

    let limiter = Limiter::builder(MemoryStore::new())
        .rule("login", Rule::new(vec![Limit::new(&["ip"], "5/1m".parse()?, Algorithm::Gcra)]))
        .build()?;
    let attrs = [("ip", "203.0.113.9")];
    let decision = limiter.check("login", &attrs).await?;
    if !decision.allowed {
        // 429, Retry-After: decision.retry_after_ms
    }
    // A request worth 3 units, and the same question without consuming anything:
    limiter.check_with("login", &attrs, Check::cost(3)).await?;
    limiter.check_with("login", &attrs, Check::cost(3).peek()).await?;
    Ok(())
}

/// A concurrency limit's lease, released however the work ends.
pub async fn a_lease() -> Result<(), Box<dyn Error>> {
    use std::time::Duration;
    use sluice::{Limiter, MemoryStore, Rule, model::Limit};

    let limiter = Limiter::builder(MemoryStore::new())
        .rule("export", Rule::new(vec![Limit::concurrency(&["tenant"], 1, Duration::from_secs(600))]))
        .build()?;
    let decision = limiter.check("export", &[("tenant", "t1")]).await?;
    if let Some(lease) = decision.lease {
        let held = limiter.lease_guard(lease);   // released on drop
        // ... the export; if it may outlast 10 minutes, extend the lease:
        if let Some(lease) = held.lease() {
            limiter.renew(lease).await?;
        }
    }
    Ok(())
}

/// "Install": the library on Redis. Compiled, not run: it names the Redis a reader has, on the
/// default port.
#[allow(dead_code)]
#[cfg(feature = "redis")]
pub async fn install_with_redis() -> Result<(), Box<dyn Error>> {
    use sluice::model::{Algorithm, Limit};
    use sluice::store::redis::RedisStore;
    use sluice::{Limiter, Rule};

    let store = RedisStore::connect("redis://127.0.0.1:6379/0", Default::default()).await?;
    let limiter = Limiter::builder(store)
        .rule("login", Rule::new(vec![Limit::new(&["ip"], "5/1m".parse()?, Algorithm::Gcra)]))
        .build()?;
    let decision = limiter.check("login", &[("ip", "203.0.113.9")]).await?;
    drop(decision);
    Ok(())
}

#[allow(dead_code)] // The tests include this file for its functions.
#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    using_the_library().await?;
    a_lease().await?;
    println!("every README snippet ran");
    Ok(())
}
