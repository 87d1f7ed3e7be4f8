//! What a check would touch, without making it: the state keys of a rule for some attributes
//! (on Redis, `RedisStore::command_for` gives the command one decision sends).
//!
//! Keys resolve attributes exactly as a check does (same fallback, escaping and errors), so what
//! they name is what a check reads and writes.

use crate::error::Error;
use crate::store::LimitKey;

use super::{Attributes, Check, Limiter};

impl Limiter {
    /// The state keys a check of `rule` for these attributes reads and writes: one per limit, in
    /// the rule's order. For looking at (or clearing) a limit's state in the store by hand.
    ///
    /// `Err` is bad input, as for a check (unknown rule, missing attribute).
    ///
    /// ```
    /// use sluice::{Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
    ///
    /// let limiter = Limiter::builder(MemoryStore::new())
    ///     .rule("login", Rule::new(vec![Limit::new(&["ip"], "5/1m".parse()?, Algorithm::Gcra)]))
    ///     .build()?;
    /// let keys = limiter.keys("login", &[("ip", "203.0.113.9")])?;
    /// assert_eq!(keys[0].to_string(), "login:ip-gcra-1m:ip=203.0.113.9");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn keys(
        &self,
        rule: &str,
        attrs: &(impl Attributes + ?Sized),
    ) -> Result<Vec<LimitKey>, Error> {
        Ok(self
            .calls(rule, attrs, Check::ONE)?
            .into_iter()
            .map(|call| call.key)
            .collect())
    }
}
