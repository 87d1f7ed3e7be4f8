//! Differential test of the limiter's decision paths: one seeded random trace of requests, asked
//! of limiters that each decide it their own way, must be admitted alike.
//!
//! The paths, each a limiter on its own store, all on one manual clock (the stores' client clock
//! and the limiters' own, which the denial cache reads):
//! - `memory`: the memory store in this process. A rule of one limit is answered by `at_once`,
//!   a rule of several (and a cost some limit cannot hold) by the general path. Every other path
//!   is compared with it;
//! - `memory, check_all`: the same rules asked as one-part requests of `check_all` (`check_all`);
//! - `redis`: the Redis store without the denial cache: a rule of one limit is decided by its
//!   one-limit script, a rule of several by its rule script, a peek or a denial that blocks by
//!   the general decision;
//! - `redis, denial cache`: the same with the cache, which answers denials it already knows
//!   (`cached_denial` for a rule of one limit, the general path's cache for a rule of several);
//! - `redis, check_all, denial cache`: one-part `check_all` requests with the cache
//!   (`check_all_cache`).
//!
//! Each case draws four rules — a plain limit, a random one (block, penalty, burst,
//! `count_denied`, shadow), several plain limits and several random ones — over the five exact
//! algorithms (fixed window, sliding log, sliding window, GCRA, token bucket) and sometimes the
//! leaky bucket, every limit counted per `user`. Then a trace of ticks: the clock advances, and
//! one request is made (cost 1 to 3, or a peek), or one identity reset, or a burst of requests of
//! one rule at once (cost 1, a few identities). On Redis a burst shares script calls: Redis holds
//! its writes while the burst queues behind the first two calls (as in `redis_shared_calls`),
//! and on the `redis` path the test reads from Redis' command counts that the burst did share.
//!
//! What must agree is what the paths' contracts say is equal:
//! - every path admits the same requests, none of them degraded;
//! - a decision the store made is the same decision, field by field, on every path: the stores
//!   reply alike on a client clock (`redis_differential`), and `at_once`, `cached_denial` and
//!   `check_all` build the general path's decision from a reply. Except a one-part `check_all`
//!   whose cost an enforcing limit cannot hold: the general path refuses it before the store,
//!   `check_all` asks the store to look, so only its denial is compared;
//! - a decision the denial cache answered is a denial, and nothing more: its other limits are
//!   not consulted and its numbers are the store's last ones (`denial_cache`, invariants 3, 4);
//! - in a burst, one identity's requests are alike and are decided one after another in some
//!   order, so each identity gets the same decisions, in some order, on every path; where the
//!   denial cache may answer some of them, the same number admitted.
//!
//! Held batches (`batch` on a limit) are left out: they are approximate by design. A node counts
//! a batch's units in the store when the batch is granted and spends them later, so what held
//! units change is *when* a unit counts (`limiter::held`): which requests a limit admits then is
//! not the exact paths' answer, only bounded by it.
//!
//! Seeded: a failure prints its seed and replays exactly (`SLUICE_DIFF_SEED=<seed>`).
#![cfg(feature = "redis")]

use crate::common;

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use common::seeded::{Rng, seed};
use common::{CACHED, answered_in, url_store};
use sluice::algorithm::Mode;
use sluice::limiter::{DenialCacheOptions, IntoDynStore, RuleCheck};
use sluice::model::{Algorithm, Limit, Penalty, Rate};
use sluice::{Check, Decision, Error, Limiter, ManualClock, MemoryStore, Options, Rule};
use sluice_test_support::RedisServer;

/// Cases (each its own rules and limiters) and ticks per case.
const CASES: usize = 16;
const TICKS: usize = 150;

/// The identities, each the value of the one attribute every limit is counted by.
const USERS: [&str; 3] = ["u0", "u1", "u2"];

/// The algorithms with a one-limit and a rule script on Redis: decided exactly on every path.
const EXACT: [Algorithm; 5] = [
    Algorithm::FixedWindow,
    Algorithm::SlidingLog,
    Algorithm::SlidingWindow,
    Algorithm::Gcra,
    Algorithm::TokenBucket,
];

/// How far the clock moves between ticks: often not at all, so that requests meet at one instant.
const ADVANCES_MS: [u64; 9] = [0, 0, 0, 1, 100, 1_000, 3_000, 7_000, 61_000];

const fn secs(n: u64) -> Duration {
    Duration::from_secs(n)
}

/// Runs a command on the test's own connection to Redis: holding and letting go its writes,
/// reading its command counts (a `redis-cli` per command would cost more than the bursts).
async fn control<T: redis::FromRedisValue>(
    redis: &redis::aio::MultiplexedConnection,
    args: &[&str],
) -> T {
    let mut conn = redis.clone();
    let reply = redis::cmd(args[0])
        .arg(&args[1..])
        .query_async(&mut conn)
        .await;
    reply.unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// One way of deciding: a limiter on its own store, asked through `check_with` or `check_all`.
struct Path {
    name: &'static str,
    limiter: Limiter,
    check_all: bool,
    /// On Redis: a burst is asked concurrently, to share script calls.
    redis: bool,
    /// The denial cache may answer.
    cached: bool,
}

/// Asks `limiter` for one request of `user` on `rule`, as a check or as a one-part `check_all`
/// (whose cost 0 is a peek of one unit, as `Check::ONE.peek()`).
async fn ask(
    limiter: Limiter,
    check_all: bool,
    rule: &'static str,
    user: &'static str,
    check: Check,
) -> Result<Decision, Error> {
    let attrs = [("user", user)];
    if !check_all {
        return limiter.check_with(rule, &attrs, check).await;
    }
    let cost = match check.mode() {
        Mode::Peek => 0,
        Mode::Apply => check.units(),
    };
    let part = RuleCheck {
        rule,
        attrs: &attrs[..],
        cost,
    };
    Ok(limiter.check_all(&[part]).await?.remove(0))
}

fn limiter(store: impl IntoDynStore, clock: &ManualClock, rules: &Rules, cache: bool) -> Limiter {
    Limiter::builder(store)
        .rules(rules.iter().map(|r| (r.name.to_string(), r.rule.clone())))
        .clock(Arc::new(clock.clone()))
        .options(Options {
            // Generous: a busy machine must not turn a slow answer into a degraded one.
            timeout: secs(10),
            denial_cache: DenialCacheOptions {
                enabled: cache,
                // No invalidation channel: entries must outlive the trace's clock jumps.
                max_stale: secs(86_400),
                ..DenialCacheOptions::default()
            },
            ..Options::default()
        })
        .build()
        .expect("valid rules")
}

/// The paths of one case, the baseline (`memory`) first; each Redis store has its own keys.
async fn paths(server: &RedisServer, clock: &ManualClock, rules: &Rules) -> Vec<Path> {
    let mut paths = Vec::new();
    for (name, redis, check_all, cached) in [
        ("memory", false, false, false),
        ("memory, check_all", false, true, false),
        ("redis", true, false, false),
        ("redis, denial cache", true, false, true),
        ("redis, check_all, denial cache", true, true, true),
    ] {
        let limiter = if redis {
            let prefix = common::unique_prefix();
            let store = url_store(&server.url(), Some(clock.clone()), &prefix).await;
            limiter(store, clock, rules, cached)
        } else {
            limiter(
                MemoryStore::with_clock(Arc::new(clock.clone())),
                clock,
                rules,
                cached,
            )
        };
        paths.push(Path {
            name,
            limiter,
            check_all,
            redis,
            cached,
        });
    }
    paths
}

impl Path {
    /// One request of `user` on `rule`, on a future of its own (a burst spawns them).
    fn ask(
        &self,
        rule: &Drawn,
        user: &'static str,
        check: Check,
    ) -> impl Future<Output = Result<Decision, Error>> + Send + 'static {
        ask(self.limiter.clone(), self.check_all, rule.name, user, check)
    }

    /// Whether every request of a burst reaches Redis as a script call of its own spec (no
    /// cache answers one, no `check_all` merges them): the path whose script calls are counted.
    fn counts_script_calls(&self) -> bool {
        self.redis && !self.cached && !self.check_all
    }
}

/// A rule of the case, with what the test needs to know of it.
struct Drawn {
    name: &'static str,
    rule: Rule,
    /// Several limits.
    many: bool,
}

type Rules = Vec<Drawn>;

fn random_limit(rng: &mut Rng, i: usize, plain: bool) -> Limit {
    let algorithm = if !plain && rng.chance(10) {
        Algorithm::LeakyBucket
    } else {
        rng.pick(&EXACT)
    };
    let rate = Rate::new(
        rng.pick(&[1, 2, 3, 5, 10]),
        rng.pick(&[secs(1), secs(10), secs(60), secs(3600)]),
    )
    .unwrap();
    let mut limit = Limit::new(&["user"], rate, algorithm);
    // Two limits of a rule may share algorithm and window: a name tells their keys apart.
    limit.name = Some(format!("l{i}"));
    if plain {
        return limit;
    }
    if algorithm.supports_burst() && rng.chance(30) {
        limit = limit.with_burst(rng.pick(&[1, 2, 7]));
    }
    limit.count_denied = algorithm.supports_count_denied() && rng.chance(20);
    if rng.chance(20) {
        limit = limit.with_block(rng.pick(&[secs(1), secs(30)]));
    }
    if rng.chance(20) {
        limit = limit.with_penalty(Penalty {
            warn_after: rng.pick(&[0, 1, 2]),
            ban_after: rng.pick(&[2, 3, 5]),
            ban: rng.pick(&[secs(1), secs(30)]),
            memory: rng.pick(&[secs(10), secs(3600)]),
        });
    }
    limit.shadow = rng.chance(10);
    limit
}

/// A case's rules: `one_plain` and `many_plain` leave no trace when they deny, so the denial
/// cache answers them; `one` and `many` take any options.
fn random_rules(rng: &mut Rng) -> Rules {
    let (many_plain, many) = (2 + rng.below(2), 2 + rng.below(3));
    let mut drawn = |name, limits: u64, plain| Drawn {
        name,
        rule: Rule::new(
            (0..limits as usize)
                .map(|i| random_limit(rng, i, plain))
                .collect(),
        ),
        many: limits > 1,
    };
    vec![
        drawn("one_plain", 1, true),
        drawn("one", 1, false),
        drawn("many_plain", many_plain, true),
        drawn("many", many, false),
    ]
}

/// A rule's limits, briefly: `fixed_window 3/10s burst 7 block 30s penalty count_denied shadow`.
fn describe(rule: &Rule) -> String {
    let mut text = String::new();
    for l in &rule.limits {
        let _ = write!(
            text,
            "[{} {}/{:?}",
            l.algorithm,
            l.rate.count(),
            l.rate.window()
        );
        if let Some(burst) = l.burst {
            let _ = write!(text, " burst {burst}");
        }
        if let Some(block) = l.block {
            let _ = write!(text, " block {block:?}");
        }
        if let Some(p) = &l.penalty {
            let _ = write!(text, " penalty {p:?}");
        }
        for (set, word) in [(l.count_denied, " count_denied"), (l.shadow, " shadow")] {
            if set {
                text.push_str(word);
            }
        }
        text.push(']');
    }
    text
}

/// Whether every enforcing limit can hold the cost. Else the general path refuses the request
/// before the store, every limit unanswered, where `check_all` asks the store to look at the
/// limits that can hold it. (A shadow limit that cannot hold it answers denied without the
/// store on both.)
fn fits(rule: &Rule, cost: u64) -> bool {
    rule.limits.iter().all(|l| l.shadow || l.capacity() >= cost)
}

/// Whether a burst of `rule` goes to Redis as one-limit or rule script calls, which share.
fn scripted(rule: &Rule) -> bool {
    let many = rule.limits.len() > 1;
    rule.limits
        .iter()
        .all(|l| EXACT.contains(&l.algorithm) && !(many && l.count_denied))
}

fn is_cached(d: &Decision) -> bool {
    d.reason.as_deref() == Some(CACHED)
}

/// What the paths were seen doing over the whole test, so that a trace that never reached a
/// path cannot pass for one that agreed on it.
#[derive(Default)]
struct Seen {
    /// Denials answered by the cache, by path and by whether the rule has several limits.
    cached: BTreeMap<(&'static str, bool), u64>,
    /// Bursts on the `redis` path that shared script calls.
    shared: u64,
    /// Single requests the baseline admitted and denied.
    admitted: u64,
    denied: u64,
}

/// The trace's ticks for one case, run on every path.
struct Case {
    redis: redis::aio::MultiplexedConnection,
    clock: ManualClock,
    rules: Rules,
    paths: Vec<Path>,
    seed: u64,
    case: usize,
}

impl Case {
    fn context(&self, tick: usize, rule: &Drawn) -> String {
        format!(
            "seed {:#x} (SLUICE_DIFF_SEED), case {}, tick {tick}, rule `{}` {}",
            self.seed,
            self.case,
            rule.name,
            describe(&rule.rule)
        )
    }

    /// One request on every path: the same admission, and the same decision wherever the
    /// store made it.
    async fn one(
        &self,
        rule: &Drawn,
        user: &'static str,
        check: Check,
        context: &str,
        seen: &mut Seen,
    ) {
        let mut expected = None;
        for path in &self.paths {
            let got = path
                .ask(rule, user, check)
                .await
                .unwrap_or_else(|e| panic!("{}: {e}; {context}", path.name));
            assert!(
                !got.degraded,
                "`{}` degraded: {got:?}; {context}",
                path.name
            );
            let Some(expected) = &expected else {
                if got.allowed {
                    seen.admitted += 1;
                } else {
                    seen.denied += 1;
                }
                expected = Some(got);
                continue;
            };
            let what = match check.mode() {
                Mode::Peek => format!("{user}'s peek"),
                Mode::Apply => {
                    format!("{user}'s request of cost {}", check.units())
                }
            };
            assert_eq!(
                got.allowed, expected.allowed,
                "`{}` and `memory` admit {what} differently\n  {}: {got:?}\n  memory: {expected:?}\n  {context}",
                path.name, path.name
            );
            if is_cached(&got) {
                *seen.cached.entry((path.name, rule.many)).or_default() += 1;
                continue;
            }
            if path.check_all && !fits(&rule.rule, check.units()) {
                continue;
            }
            assert_eq!(
                &got, expected,
                "`{}` and `memory` decide {what} differently; {context}",
                path.name
            );
        }
    }

    /// Requests of `users` on `rule`, all at once, on every path: the same decisions for each
    /// identity in some order (the same number admitted where the cache may answer).
    async fn burst(&self, rule: &Drawn, users: &[&'static str], context: &str, seen: &mut Seen) {
        let mut expected = None;
        for path in &self.paths {
            let decisions = if path.redis {
                self.concurrently(path, rule, users, context, seen).await
            } else {
                let mut decisions = Vec::with_capacity(users.len());
                for &user in users {
                    let asked = path.ask(rule, user, Check::ONE);
                    decisions.push(
                        asked
                            .await
                            .unwrap_or_else(|e| panic!("{}: {e}; {context}", path.name)),
                    );
                }
                decisions
            };
            let mut by_user = BTreeMap::<&str, (usize, Vec<String>)>::new();
            for (user, d) in users.iter().zip(&decisions) {
                assert!(!d.degraded, "`{}` degraded: {d:?}; {context}", path.name);
                let (admitted, all) = by_user.entry(user).or_default();
                *admitted += usize::from(d.allowed);
                all.push(format!("{d:?}"));
            }
            for (_, all) in by_user.values_mut() {
                all.sort();
            }
            let Some(expected) = &expected else {
                expected = Some(by_user);
                continue;
            };
            let admitted = |m: &BTreeMap<&str, (usize, Vec<String>)>| {
                m.iter()
                    .map(|(u, (n, _))| (u.to_string(), *n))
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                admitted(&by_user),
                admitted(expected),
                "`{}` and `memory` admit a burst {users:?} differently (admitted per user); {context}",
                path.name
            );
            if !path.cached {
                assert_eq!(
                    &by_user, expected,
                    "`{}` and `memory` decide a burst {users:?} differently (per user: admitted, decisions); {context}",
                    path.name
                );
            }
        }
    }

    /// A burst on a Redis path: every request started while Redis holds its writes, so the
    /// first two calls wait in Redis and the rest queue behind them, then let go.
    async fn concurrently(
        &self,
        path: &Path,
        rule: &Drawn,
        users: &[&'static str],
        context: &str,
        seen: &mut Seen,
    ) -> Vec<Decision> {
        let measured = path.counts_script_calls() && scripted(&rule.rule) && users.len() >= 4;
        if measured {
            control::<()>(&self.redis, &["CONFIG", "RESETSTAT"]).await;
        }
        control::<()>(&self.redis, &["CLIENT", "PAUSE", "60000", "WRITE"]).await;
        let tasks: Vec<_> = users
            .iter()
            .map(|&user| {
                let asked = path.ask(rule, user, Check::ONE);
                tokio::spawn(asked)
            })
            .collect();
        // A current-thread runtime runs every task up to its wait before this one goes on.
        tokio::task::yield_now().await;
        control::<()>(&self.redis, &["CLIENT", "UNPAUSE"]).await;
        let mut decisions = Vec::with_capacity(tasks.len());
        for task in tasks {
            let d = task.await.expect("no panic");
            decisions.push(d.unwrap_or_else(|e| panic!("{}: {e}; {context}", path.name)));
        }
        if measured {
            // The first two calls alone, then the queue in calls of at most 64.
            let n = users.len();
            let stats: String = control(&self.redis, &["INFO", "commandstats"]).await;
            let calls = answered_in(&stats, "evalsha");
            let most = 2 + (n as u64 - 2).div_ceil(64);
            assert!(
                calls <= most,
                "a burst of {n} made {calls} script calls, more than {most}: it did not share; {context}"
            );
            seen.shared += 1;
        }
        decisions
    }

    async fn run(&self, rng: &mut Rng, seen: &mut Seen) {
        for tick in 0..TICKS {
            self.clock
                .advance(Duration::from_millis(rng.pick(&ADVANCES_MS)));
            let rule = &self.rules[rng.below(self.rules.len() as u64) as usize];
            let context = self.context(tick, rule);
            match rng.below(100) {
                0..4 => {
                    let user = rng.pick(&USERS);
                    for path in &self.paths {
                        let attrs = [("user", user)];
                        path.limiter
                            .reset(rule.name, &attrs)
                            .await
                            .unwrap_or_else(|e| panic!("{}: reset: {e}; {context}", path.name));
                    }
                }
                4..16 => {
                    let mut users: Vec<&'static str> = USERS[..1 + rng.below(3) as usize]
                        .iter()
                        .flat_map(|&u| std::iter::repeat_n(u, 2 + rng.below(7) as usize))
                        .collect();
                    for i in (1..users.len()).rev() {
                        users.swap(i, rng.below(i as u64 + 1) as usize);
                    }
                    self.burst(rule, &users, &context, seen).await;
                }
                _ => {
                    let user = rng.pick(&USERS);
                    let check = if rng.chance(15) {
                        Check::ONE.peek()
                    } else {
                        Check::cost(rng.pick(&[1, 1, 1, 2, 3]))
                    };
                    self.one(rule, user, check, &context, seen).await;
                }
            }
        }
    }
}

/// Every decision path — in process and on Redis, one limit and several, alone and in shared
/// calls, with the denial cache and without, checks and `check_all` — admits the same requests
/// of one random trace.
#[tokio::test]
async fn every_path_admits_the_same_requests() {
    let server = RedisServer::start();
    let seed = seed();
    let mut rng = Rng(seed ^ 0x9A75);
    let mut seen = Seen::default();
    let client = redis::Client::open(server.url()).expect("a valid URL");
    let redis = client.get_multiplexed_async_connection().await;
    let redis = redis.expect("Redis answers");
    for case in 0..CASES {
        let clock = ManualClock::at_2026();
        clock.advance(Duration::from_micros(rng.below(10_000_000)));
        let rules = random_rules(&mut rng);
        let paths = paths(&server, &clock, &rules).await;
        let case = Case {
            redis: redis.clone(),
            clock,
            rules,
            paths,
            seed,
            case,
        };
        case.run(&mut rng, &mut seen).await;
    }
    let context = format!("seed {seed:#x}");
    assert!(seen.admitted > 0 && seen.denied > 0, "{context}");
    assert!(seen.shared > 0, "no burst shared a script call; {context}");
    for path in ["redis, denial cache", "redis, check_all, denial cache"] {
        for many in [false, true] {
            assert!(
                seen.cached.get(&(path, many)).is_some_and(|&n| n > 0),
                "`{path}` never answered a rule of {} from its cache; {context}",
                if many { "several limits" } else { "one limit" }
            );
        }
    }
}
