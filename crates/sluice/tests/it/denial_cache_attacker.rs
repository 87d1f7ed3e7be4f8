//! The denial cache decides nothing the store would not: an attacker replayed on one manual clock
//! through a limiter that asks the store every time, and through one whose cache answers the
//! denials it already knows, is admitted at the same moments, told the same waits, blocks and
//! violations, and recovers at the same time once it stops.
//!
//! The limits that matter are those whose denials leave a trace in the store (a block lock, a
//! penalty, `count_denied`): a cached answer must neither skip what the store would count nor
//! repeat an answer the store would no longer give. Both limiters run on the memory store, made
//! to look remote so that the limiter gives it a cache; the same trace runs on Redis, whose scripts
//! decide on a path of their own.

use std::sync::Arc;
use std::time::Duration;

use crate::common::remote::Remote;
use sluice::limiter::DenialCacheOptions;
use sluice::model::{Algorithm, Limit, Penalty};
use sluice::store::DynStore;
use sluice::{Check, Clock, Limiter, ManualClock, MemoryStore, Micros, Options, Rule};

const ATTACKER: [(&str, &str); 1] = [("ip", "203.0.113.9")];

/// The attack: from 60 s to 240 s, five requests a second; before and after, one every 7 s.
const ATTACK_MS: (u64, u64) = (60_000, 240_000);

/// When each request is sent (ms from the start). Every request costs one unit: a denial cached
/// at one cost answers a larger one with the smaller one's wait, a documented lower bound.
fn attacker() -> Vec<u64> {
    let mut trace = Vec::new();
    let mut at = 0;
    while at < 600_000 {
        trace.push(at);
        at += if (ATTACK_MS.0..ATTACK_MS.1).contains(&at) {
            200
        } else {
            7_000
        };
    }
    trace
}

/// What a client is told, without the `reason` (a cached answer says it is one).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Told {
    at_ms: u64,
    allowed: bool,
    remaining: u64,
    reset_after_ms: u64,
    retry_after_ms: Option<u64>,
    blocked_until_ms: Option<u64>,
    violations: u64,
    warning: bool,
}

/// A limiter deciding `rule` (as `name`) on `store`, with the cache on or off.
fn limiter(
    store: Arc<dyn DynStore>,
    clock: &ManualClock,
    name: &str,
    rule: &Rule,
    cache: bool,
) -> Limiter {
    let limiter = Limiter::builder(store)
        .clock(Arc::new(clock.clone()))
        .rule(name, rule.clone())
        .options(Options {
            denial_cache: DenialCacheOptions {
                enabled: cache,
                // No invalidation channel: entries then live this long at most.
                max_stale: Duration::from_secs(3600),
                ..DenialCacheOptions::default()
            },
            // Every decision is the store's, however busy the machine: none may degrade.
            timeout: Duration::from_secs(5),
            ..Options::default()
        })
        .build()
        .expect("valid rule");
    assert_eq!(limiter.denial_cache().is_some(), cache);
    limiter
}

/// The trace's decisions of rule `name`, from the clock's `start`, and how many of them came
/// with a reason (in this trace, only the cache's answers do).
async fn replay(
    limiter: &Limiter,
    name: &str,
    clock: &ManualClock,
    start: Micros,
    trace: &[u64],
) -> (Vec<Told>, usize) {
    let mut told = Vec::with_capacity(trace.len());
    let mut cached = 0;
    for &at_ms in trace {
        clock.set_us(start + Micros::from_millis(at_ms));
        let d = limiter
            .check_with(name, &ATTACKER, Check::ONE)
            .await
            .expect("decided");
        cached += usize::from(d.reason.is_some());
        told.push(Told {
            at_ms,
            allowed: d.allowed,
            remaining: d.remaining,
            reset_after_ms: d.reset_after_ms,
            retry_after_ms: d.retry_after_ms,
            blocked_until_ms: d.blocked_until_ms,
            violations: d.violations,
            warning: d.warning,
        });
    }
    (told, cached)
}

/// One rule replayed without the cache and with it: the decisions of each, and how many the
/// cache answered.
struct Replayed {
    name: String,
    may_cache: bool,
    asked: (Vec<Told>, usize),
    cached: (Vec<Told>, usize),
}

impl Replayed {
    /// What differs, if anything; panics if the attacker never recovers or recovers at another
    /// time (the figure the simulator reports).
    fn difference(&self) -> Option<String> {
        let Replayed { name, .. } = self;
        let ((asked, none), (cached, hits)) = (&self.asked, &self.cached);
        assert_eq!(
            *none, 0,
            "{name}: without the cache, every decision is the store's"
        );
        assert!(
            recovery_ms(asked).is_some(),
            "{name}: the attacker recovers"
        );
        assert_eq!(recovery_ms(asked), recovery_ms(cached), "{name}");
        if (*hits > 0) != self.may_cache {
            return Some(format!("{name}: the cache answered {hits} of its denials"));
        }
        let (without, with) = asked.iter().zip(cached).find(|(a, c)| a != c)?;
        Some(format!(
            "{name}: the store told\n  {without:?}\nthe cache\n  {with:?}"
        ))
    }
}

fn assert_same(replayed: &[Replayed]) {
    let differences: Vec<String> = replayed.iter().filter_map(Replayed::difference).collect();
    assert!(differences.is_empty(), "{}", differences.join("\n"));
}

/// From the attack's end to the attacker's next admitted request.
fn recovery_ms(told: &[Told]) -> Option<u64> {
    told.iter()
        .find(|t| t.at_ms >= ATTACK_MS.1 && t.allowed)
        .map(|t| t.at_ms - ATTACK_MS.1)
}

/// Every way a denial can leave a trace, on the exact algorithms and GCRA; and whether the cache
/// may answer some of the attacker's denials.
fn rules() -> Vec<(String, Rule, bool)> {
    let penalty = Penalty {
        warn_after: 3,
        ban_after: 5,
        ban: Duration::from_secs(30),
        memory: Duration::from_secs(600),
    };
    // Violations forgotten in the middle of the ban: the store stops reporting them then.
    let forgetful = Penalty {
        warn_after: 1,
        ban_after: 2,
        ban: Duration::from_secs(120),
        memory: Duration::from_secs(20),
    };
    let block = Duration::from_secs(30);
    let mut rules = Vec::new();
    for algorithm in [
        Algorithm::SlidingLog,
        Algorithm::SlidingWindow,
        Algorithm::FixedWindow,
        Algorithm::Gcra,
    ] {
        let plain = Limit::new(&["ip"], "10/1m".parse().unwrap(), algorithm);
        let mut limits = vec![
            ("plain", plain.clone(), true),
            ("block", plain.clone().with_block(block), true),
            ("penalty", plain.clone().with_penalty(penalty), true),
            // Its bans outlast the violations: the store is asked while it reports some.
            (
                "forgetful penalty",
                plain.clone().with_penalty(forgetful),
                true,
            ),
            (
                "penalty and block",
                plain
                    .clone()
                    .with_penalty(penalty)
                    .with_block(Duration::from_secs(5)),
                true,
            ),
        ];
        if algorithm != Algorithm::Gcra {
            let mut counting = plain.clone();
            counting.count_denied = true;
            limits.push(("count_denied", counting.clone(), false));
            limits.push(("count_denied and block", counting.with_block(block), true));
        }
        for (what, limit, cached) in limits {
            rules.push((
                format!("{algorithm}, {what}"),
                Rule::new(vec![limit]),
                cached,
            ));
        }
    }
    rules
}

#[tokio::test]
async fn an_attacker_is_told_the_same_and_recovers_as_soon_with_the_cache_as_without() {
    let trace = attacker();
    let mut replayed = Vec::new();
    for (name, rule, may_cache) in rules() {
        let run = async |cache| {
            let clock = ManualClock::at_2026();
            let store = Arc::new(Remote::new(MemoryStore::with_clock(Arc::new(
                clock.clone(),
            ))));
            let limiter = limiter(store, &clock, "login", &rule, cache);
            replay(&limiter, "login", &clock, clock.now_us(), &trace).await
        };
        let asked = run(false).await;
        let cached = run(true).await;
        replayed.push(Replayed {
            name,
            may_cache,
            asked,
            cached,
        });
    }
    assert_same(&replayed);
}

/// The same on Redis, whose scripts answer blocks and count violations on their own path: each
/// rule twice on one server, under two names (so two sets of keys), from the same instant.
#[cfg(all(feature = "redis", feature = "conformance"))]
#[tokio::test]
async fn on_redis_too() {
    let h = crate::common::Harness::redis().await;
    let start = h.clock.now_us();
    let trace = attacker();
    let mut replayed = Vec::new();
    for (i, (name, rule, may_cache)) in rules().into_iter().enumerate() {
        let run = async |cache| {
            let rule_name = format!("r{i}-{cache}");
            let limiter = limiter(h.store.clone(), &h.clock, &rule_name, &rule, cache);
            replay(&limiter, &rule_name, &h.clock, start, &trace).await
        };
        let asked = run(false).await;
        let cached = run(true).await;
        replayed.push(Replayed {
            name,
            may_cache,
            asked,
            cached,
        });
    }
    assert_same(&replayed);
}
