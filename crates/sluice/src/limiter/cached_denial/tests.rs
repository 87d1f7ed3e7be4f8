//! The cached-denial path against the general path, on a store outside the process (the only
//! kind for which a limiter keeps a denial cache).

use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::clock::ManualClock;
use crate::model::{Algorithm, Limit, Micros, Penalty};
use crate::store::{BlocksCursor, BlocksPage, LimitCall, LimitKey, StoreError, StoreReply};
use crate::{MemoryStore, Rule, Store};

/// The memory store, as if it ran in another process: the limiter then keeps a denial cache.
#[derive(Debug)]
struct Elsewhere(MemoryStore);

impl Store for Elsewhere {
    fn name(&self) -> &'static str {
        "elsewhere"
    }
    async fn decide(&self, calls: &[LimitCall], mode: Mode) -> Result<StoreReply, StoreError> {
        self.0.decide(calls, mode).await
    }
    async fn reset(&self, keys: &[LimitKey]) -> Result<(), StoreError> {
        self.0.reset(keys).await
    }
    async fn block(&self, key: &LimitKey, duration: Duration) -> Result<Micros, StoreError> {
        self.0.block(key, duration).await
    }
    async fn unblock(&self, key: &LimitKey) -> Result<bool, StoreError> {
        self.0.unblock(key).await
    }
    async fn blocks(&self, rule: &str, cursor: &BlocksCursor) -> Result<BlocksPage, StoreError> {
        self.0.blocks(rule, cursor).await
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

fn limiter(clock: &ManualClock) -> Limiter {
    let rate = |text: &str| text.parse().expect("a valid rate");
    let penalty = Penalty {
        warn_after: 1,
        ban_after: 3,
        ban: Duration::from_secs(5),
        memory: Duration::from_secs(60),
    };
    let mut shadow = Rule::new(vec![Limit::new(&["user"], rate("2/1s"), Algorithm::Gcra)]);
    shadow.shadow = true;
    let rules = [
        (
            "by_user",
            Rule::new(vec![Limit::new(&["user"], rate("3/1s"), Algorithm::Gcra)]),
        ),
        (
            "fallback",
            Rule::new(vec![Limit::new(
                &["member|session", "ip"],
                rate("2/2s"),
                Algorithm::FixedWindow,
            )]),
        ),
        (
            "blocks",
            Rule::new(vec![
                Limit::new(&["user"], rate("2/1s"), Algorithm::TokenBucket)
                    .with_block(Duration::from_secs(3)),
            ]),
        ),
        (
            "bans",
            Rule::new(vec![
                Limit::new(&["user"], rate("2/1s"), Algorithm::Gcra).with_penalty(penalty),
            ]),
        ),
        (
            "two",
            Rule::new(vec![
                Limit::new(&["user"], rate("2/1s"), Algorithm::Gcra),
                Limit::new(&["user"], rate("5/1m"), Algorithm::FixedWindow),
            ]),
        ),
        ("shadow", shadow),
    ];
    let clock: Arc<dyn crate::Clock> = Arc::new(clock.clone());
    let store = Elsewhere(MemoryStore::with_clock(clock.clone()));
    let mut builder = Limiter::builder(store).clock(clock);
    for (name, rule) in rules {
        builder = builder.rule(name, rule);
    }
    builder.build().expect("valid rules")
}

/// Every check the cache answers here gets the decision the general path gives, on a store and
/// a cache in the same state at the same time; the rest it leaves to the general path.
#[test]
fn denies_as_the_general_path_does() {
    let clock = ManualClock::at_2026();
    let (fast, general) = (limiter(&clock), limiter(&clock));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let long = "x".repeat(2000);
    let attrs: [&[(&str, &str)]; 6] = [
        &[("user", "u1")],
        &[("user", "a b:c,d=e")],
        &[("session", "s1"), ("ip", "10.0.0.1")],
        &[("member", ""), ("ip", "10.0.0.2")],
        &[("user", long.as_str())],
        &[],
    ];
    let checks = [
        Check::ONE,
        Check::ONE,
        Check::cost(2),
        Check::ONE.peek(),
        Check::cost(9),
    ];
    let names = [
        "by_user", "fallback", "blocks", "bans", "two", "shadow", "none",
    ];
    let mut answered = 0;
    for i in 0..3000usize {
        let (name, attrs, check) = (
            names[i / 20 % names.len()],
            attrs[i / 140 % attrs.len()],
            checks[i % checks.len()],
        );
        let general_answer = runtime.block_on(general.decide_in_store(name, attrs, check));
        match fast.cached_denial(name, attrs, check) {
            Some(denied) => {
                assert_eq!(
                    Ok(denied),
                    general_answer,
                    "check {i}: {name} {attrs:?} {check:?}"
                );
                answered += 1;
            }
            None => assert_eq!(
                runtime.block_on(fast.decide_in_store(name, attrs, check)),
                general_answer,
                "check {i}: {name} {attrs:?} {check:?}"
            ),
        }
        clock.advance(Duration::from_millis(23));
    }
    assert!(answered > 200, "answered {answered} of 3000");
}

#[test]
fn a_check_goes_to_the_store_until_it_denies_then_to_the_cache() {
    let clock = ManualClock::at_2026();
    let limiter = limiter(&clock);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a runtime");
    let user = [("user", "u1")];
    for _ in 0..3 {
        assert!(
            limiter
                .cached_denial("by_user", &user, Check::ONE)
                .is_none()
        );
        let d = runtime.block_on(limiter.check("by_user", &user)).unwrap();
        assert!(d.allowed);
    }
    let d = runtime.block_on(limiter.check("by_user", &user)).unwrap();
    assert!(!d.allowed);
    assert_eq!(d.reason, None, "the store denied it");
    let d = limiter
        .cached_denial("by_user", &user, Check::ONE)
        .expect("answered by the cache");
    assert!(!d.allowed);
    assert_eq!(d.reason.as_deref(), Some(CACHED));
    // Another identity is not denied by this one's entry.
    assert!(
        limiter
            .cached_denial("by_user", &[("user", "u2")], Check::ONE)
            .is_none()
    );
}
