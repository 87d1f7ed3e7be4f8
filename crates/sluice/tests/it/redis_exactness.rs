//! Exactness under contention: 4 OS processes × 32 tokio tasks hammer one key with limit 1,000
//! (`1000/1d`, so nothing refills during the test). The exact algorithms admit exactly 1,000 in
//! total, every time; `sliding_window` never more than its limit in a window. The same runs on a
//! single server (Redis, and Valkey), on a Redis Cluster and behind sentinels.
//!
//! A two-limit rule runs too: one member, two IPs; on one server and behind sentinels both limits
//! are decided in one call (of a script made for the rule), on the Cluster their keys are in
//! different slots (decided by the cross-slot protocol). Never more than either
//! limit is admitted; with `sliding_log` the units left in Redis afterwards are exactly the
//! admitted ones on every limit, so no give-back was lost or doubled.
//!
//! A concurrency limit of 5 leases is hammered the same way, each task asking until it got in
//! twice, holding its lease while it does some work (a Redis round trip), then releasing it: an
//! `INCR`/`DECR` counter around the work shows how many leases were held at once across all
//! processes, never above 5; releases let every task in, and nothing is held at the end.
//!
//! Reservations are hammered too: every task reserves 10 units of a `1000/1d` token bucket and
//! settles each admitted reservation at a cost from 0 to 10. The units charged never pass the
//! capacity, and the level Redis holds at the end is exactly what the settlements charged: no
//! give-back is lost or doubled between processes.
//!
//! Repeated parts of one `check_all` are hammered too: every request asks the two-limit rule for
//! the member on IP `a` twice and on IP `b` once, three units of the member's counter, two of
//! `a`'s, one of `b`'s. Repeated parts add up against one count, so never more than 300 requests
//! pass (`a`'s 600 binds) and, with `sliding_log`, Redis holds exactly the units they took.
//!
//! The parent test re-executes this test binary as the worker processes (the ignored test
//! `exactness_worker`, configured through environment variables); each prints its admitted count.
#![cfg(feature = "redis")]

use crate::common;

use sluice::Options;
use std::process::Command;
use std::time::Duration;

use sluice::model::{Algorithm, Limit};
use sluice::store::redis::RedisOptions;
use sluice::{FailPolicy, Limiter, Rule};
use sluice_test_support::{RedisCluster, RedisSentinel, RedisServer};

const PROCESSES: usize = 4;
const TASKS: usize = 32;
const ATTEMPTS_PER_TASK: usize = 12;
const LIMIT: u64 = 1000;
/// The per-IP limit of the two-limit rule: each IP gets half the attempts (768), so 600 binds on
/// each IP and the member's 1,000 binds overall.
const IP_LIMIT: u64 = 600;

/// Runs the workers on `url` under `prefix` and returns their summed counts per IP ("a", "b";
/// single-limit runs count everything under "a").
fn run_workers(url: &str, prefix: &str, rule: &str, algorithm: Algorithm) -> (u64, u64) {
    let outputs = worker_outputs(url, prefix, rule, algorithm);
    (
        outputs.iter().map(|o| count(o, "admitted_a=")).sum(),
        outputs.iter().map(|o| count(o, "admitted_b=")).sum(),
    )
}

/// Runs the workers and returns what each printed.
fn worker_outputs(url: &str, prefix: &str, rule: &str, algorithm: Algorithm) -> Vec<String> {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    let workers: Vec<_> = (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "redis_exactness::exactness_worker",
                    "--ignored",
                    "--nocapture",
                ])
                .env("SLUICE_EXACT_URL", url)
                .env("SLUICE_EXACT_PREFIX", prefix)
                .env("SLUICE_EXACT_RULE", rule)
                .env("SLUICE_EXACT_ALGORITHM", algorithm.name())
                .spawn_output()
        })
        .collect();
    workers
        .into_iter()
        .map(|worker| {
            let out = worker.join();
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "worker failed: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
        })
        .collect()
}

/// The number a worker printed after `name`.
fn count(stdout: &str, name: &str) -> u64 {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(name))
        .unwrap_or_else(|| panic!("no {name} in worker output: {stdout}"))
        .trim()
        .parse()
        .expect("a number")
}

/// A started child process whose output is collected on `join` (so workers run at once).
trait SpawnOutput {
    fn spawn_output(&mut self) -> Worker;
}

struct Worker(std::process::Child);

impl SpawnOutput for Command {
    fn spawn_output(&mut self) -> Worker {
        Worker(
            self.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("the worker process starts"),
        )
    }
}

impl Worker {
    fn join(self) -> std::process::Output {
        self.0.wait_with_output().expect("the worker process runs")
    }
}

fn single_limit_is_exact(url: &str) {
    for algorithm in Algorithm::ALL {
        let prefix = common::unique_prefix();
        let (admitted, _) = run_workers(url, &prefix, "hammer", algorithm);
        let attempts = (PROCESSES * TASKS * ATTEMPTS_PER_TASK) as u64;
        assert!(attempts > LIMIT);
        match algorithm {
            // Documented bound: never more than `limit` in any window (all requests fall in one).
            Algorithm::SlidingWindow => {
                assert!(admitted <= LIMIT && admitted > 0, "{algorithm}: {admitted}")
            }
            _ => assert_eq!(admitted, LIMIT, "{algorithm} on {url}"),
        }
    }
}

/// The two-limit rule; `units(key)` reads how many units a sliding log key holds.
fn two_limits_never_over_admit(url: &str, units: impl Fn(&str) -> u64) {
    for algorithm in [
        Algorithm::SlidingLog,
        Algorithm::Gcra,
        Algorithm::TokenBucket,
        Algorithm::FixedWindow,
    ] {
        let prefix = common::unique_prefix();
        let (a, b) = run_workers(url, &prefix, "pair", algorithm);
        assert!(a <= IP_LIMIT && b <= IP_LIMIT, "{algorithm}: {a} / {b}");
        assert!(a + b <= LIMIT, "{algorithm}: {}", a + b);
        // Under-admission is bounded: the give-backs of concurrent denials are brief.
        assert!(
            a + b >= LIMIT * 9 / 10,
            "{algorithm}: only {} admitted",
            a + b
        );
        if algorithm == Algorithm::SlidingLog {
            let [member, ip] = pair_limits(algorithm).map(|l| l.id());
            // Every request costs one unit: one member each.
            let key = |limit: &str, identity: &str| {
                sluice::store::redis::KeyNames::new(
                    &prefix,
                    &sluice::store::LimitKey {
                        rule: "pair".into(),
                        limit_id: limit.into(),
                        identity: identity.into(),
                    },
                )
                .state
            };
            assert_eq!(units(&key(&member, "member=m")), a + b, "member units");
            assert_eq!(units(&key(&ip, "ip=a")), a, "ip a units");
            assert_eq!(units(&key(&ip, "ip=b")), b, "ip b units");
        }
    }
}

/// The `repeated` rule (the two limits of `pair`), asked in requests of three parts; `entries(key)`
/// reads a sliding log key's members (`ZRANGE key 0 -1`).
///
/// With `exact_units` (one server: every request is one script) the logs hold exactly what the
/// admitted requests took. On a Cluster the three counters are in three slots, and a denied
/// request gives back the slots it consumed; concurrent give-backs on one `sliding_log` can each
/// remove the other's newest entry, so a few units may stay consumed (under-admission, never
/// over): there the logs hold at least what the admitted requests took.
fn repeated_parts_never_over_admit(url: &str, exact_units: bool, entries: impl Fn(&str) -> String) {
    // Each member is `<start>:<units>`, one per recorded request.
    let units = |key: &str| -> (u64, u64) {
        let members = entries(key);
        let units = members.lines().filter_map(|m| m.trim().rsplit(':').next());
        let units: Vec<u64> = units.filter_map(|u| u.parse().ok()).collect();
        (units.len() as u64, units.iter().sum())
    };
    for algorithm in [Algorithm::SlidingLog, Algorithm::Gcra] {
        let prefix = common::unique_prefix();
        let (admitted, _) = run_workers(url, &prefix, "repeated", algorithm);
        // IP `a` takes two units a request: 300 requests spend its 600.
        let most = IP_LIMIT / 2;
        assert!(
            admitted <= most,
            "{algorithm}: {admitted} requests admitted"
        );
        assert!(admitted >= most * 9 / 10, "{algorithm}: only {admitted}");
        if algorithm == Algorithm::SlidingLog {
            let [member, ip] = pair_limits(algorithm).map(|l| l.id());
            let key = |limit: &str, identity: &str| {
                sluice::store::redis::KeyNames::new(
                    &prefix,
                    &sluice::store::LimitKey {
                        rule: "repeated".into(),
                        limit_id: limit.into(),
                        identity: identity.into(),
                    },
                )
                .state
            };
            // One entry per admitted request on each counter, holding the units it added up.
            for (identity, per) in [("member=m", 3), ("ip=a", 2), ("ip=b", 1)] {
                let (held, units) = units(&key(if per == 3 { &member } else { &ip }, identity));
                assert_eq!(units, per * held, "{identity}: {per} units an entry");
                match exact_units {
                    true => assert_eq!(held, admitted, "{identity}"),
                    false => assert!(held >= admitted, "{identity}: {held} of {admitted}"),
                }
            }
        }
    }
}

fn pair_limits(algorithm: Algorithm) -> [Limit; 2] {
    [
        Limit::new(&["member"], "1000/1d".parse().unwrap(), algorithm),
        Limit::new(
            &["ip"],
            format!("{IP_LIMIT}/1d").parse().unwrap(),
            algorithm,
        ),
    ]
}

/// Leases held at once by the `leases` rule.
const LEASES: u64 = 5;
/// Times each task of the `leases` rule gets in (asking again at once when denied).
const TURNS: u64 = 2;

/// The `leases` rule: workers hold and release leases; never more than [`LEASES`] at once.
fn leases_never_exceed_the_limit(url: &str, held_at_end: impl Fn(&str) -> u64) {
    let prefix = common::unique_prefix();
    let outputs = worker_outputs(url, &prefix, "leases", Algorithm::Concurrency);
    let most = outputs.iter().map(|o| count(o, "most_held=")).max();
    let admitted: u64 = outputs.iter().map(|o| count(o, "admitted_a=")).sum();
    assert!(
        most.is_some_and(|m| (1..=LEASES).contains(&m)),
        "{most:?} held at once"
    );
    assert_eq!(
        admitted,
        (PROCESSES * TASKS) as u64 * TURNS,
        "releases let every task in, in turn"
    );
    let key = sluice::store::redis::KeyNames::new(
        &prefix,
        &sluice::store::LimitKey {
            rule: "leases".into(),
            limit_id: leases_limit().id().into(),
            identity: "*".into(),
        },
    )
    .state;
    assert_eq!(held_at_end(&key), 0, "every lease was released");
}

/// The `reserve` rule: the level left equals the sum of the settled costs.
fn reservations_stay_exact(url: &str, get: impl Fn(&str) -> String) {
    let prefix = common::unique_prefix();
    let outputs = worker_outputs(url, &prefix, "reserve", Algorithm::TokenBucket);
    let charged: u64 = outputs.iter().map(|o| count(o, "charged=")).sum();
    let admitted: u64 = outputs.iter().map(|o| count(o, "admitted_a=")).sum();
    assert!(
        admitted > LIMIT / 10,
        "settling gave units back: {admitted} admitted"
    );
    let key = sluice::store::redis::KeyNames::new(
        &prefix,
        &sluice::store::LimitKey {
            rule: "reserve".into(),
            limit_id: reserve_limit().id().into(),
            identity: "*".into(),
        },
    )
    .state;
    let state = get(&key);
    let level: f64 = state
        .strip_prefix('t')
        .and_then(|s| s.split(':').next())
        .and_then(|l| l.parse().ok())
        .unwrap_or_else(|| panic!("a token bucket state: {state}"));
    // 1000/1d refills about one unit in 86 s: the test runs well within that.
    assert!(charged <= LIMIT + 1, "{charged} charged");
    assert!(
        (level - charged as f64).abs() < 1.0,
        "the level {level} is what was charged, {charged}"
    );
}

fn reserve_limit() -> Limit {
    Limit::new(&[], "1000/1d".parse().unwrap(), Algorithm::TokenBucket)
}

fn leases_limit() -> Limit {
    Limit::concurrency(&[], LEASES, Duration::from_secs(86_400))
}

#[test]
fn four_processes_admit_exactly_the_limit() {
    exact_on_one_server(&RedisServer::start());
}

#[test]
fn four_processes_on_valkey_admit_exactly_the_limit() {
    exact_on_one_server(&RedisServer::start_valkey());
}

/// Every exactness run on one server, inspecting its keys with its own client.
fn exact_on_one_server(server: &RedisServer) {
    single_limit_is_exact(&server.url());
    leases_never_exceed_the_limit(&server.url(), |key| {
        server.cli(&["ZCARD", key]).parse().unwrap()
    });
    reservations_stay_exact(&server.url(), |key| server.cli(&["GET", key]));
    two_limits_never_over_admit(&server.url(), |key| {
        server.cli(&["ZCARD", key]).parse().unwrap()
    });
    repeated_parts_never_over_admit(&server.url(), true, |key| {
        server.cli(&["ZRANGE", key, "0", "-1"])
    });
}

#[test]
fn four_processes_on_a_cluster_admit_exactly_the_limit_even_across_slots() {
    let cluster = RedisCluster::shared();
    single_limit_is_exact(&cluster.url());
    leases_never_exceed_the_limit(&cluster.url(), |key| {
        cluster.cli_any(&["ZCARD", key]).parse().unwrap()
    });
    reservations_stay_exact(&cluster.url(), |key| cluster.cli_any(&["GET", key]));
    two_limits_never_over_admit(&cluster.url(), |key| {
        cluster.cli_any(&["ZCARD", key]).parse().unwrap()
    });
    repeated_parts_never_over_admit(&cluster.url(), false, |key| {
        cluster.cli_any(&["ZRANGE", key, "0", "-1"])
    });
}

#[test]
fn four_processes_behind_sentinels_admit_exactly_the_limit() {
    let set = RedisSentinel::shared();
    single_limit_is_exact(&set.url());
    let primary = set.primary().unwrap();
    leases_never_exceed_the_limit(&set.url(), |key| {
        sluice_test_support::member::cli(primary, &["ZCARD", key])
            .parse()
            .unwrap()
    });
    two_limits_never_over_admit(&set.url(), |key| {
        sluice_test_support::member::cli(primary, &["ZCARD", key])
            .parse()
            .unwrap()
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of the tests above"]
async fn exactness_worker() {
    let var = |name: &str| std::env::var(name).expect("run by the parent test");
    let algorithm: Algorithm = var("SLUICE_EXACT_ALGORITHM")
        .parse()
        .expect("an algorithm name");
    let store = sluice::store::redis::RedisStore::connect(
        &var("SLUICE_EXACT_URL"),
        RedisOptions {
            prefix: var("SLUICE_EXACT_PREFIX"),
            ..RedisOptions::default()
        },
    )
    .await
    .expect("a valid URL");
    let rule = var("SLUICE_EXACT_RULE");
    let limits = match rule.as_str() {
        "hammer" => vec![Limit::new(&[], "1000/1d".parse().unwrap(), algorithm)],
        "leases" => vec![leases_limit()],
        "reserve" => vec![reserve_limit()],
        _ => pair_limits(algorithm).to_vec(),
    };
    let limiter = Limiter::builder(store)
        .rule(&rule, Rule::new(limits))
        // A degraded decision would not be an answer from Redis: deny those and count them.
        .options(Options {
            fail: FailPolicy::Closed,
            timeout: Duration::from_secs(10),
            ..Options::default()
        })
        .build()
        .unwrap();
    if rule == "leases" {
        return hold_and_release(
            &limiter,
            &var("SLUICE_EXACT_URL"),
            &var("SLUICE_EXACT_PREFIX"),
        )
        .await;
    }
    if rule == "reserve" {
        return reserve_and_settle(&limiter).await;
    }
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let limiter = limiter.clone();
        let rule = rule.clone();
        let ip = if task % 2 == 0 { "a" } else { "b" };
        tasks.spawn(async move {
            let (mut admitted, mut degraded) = (0u64, 0u64);
            for _ in 0..ATTEMPTS_PER_TASK {
                let attrs = [("member", "m"), ("ip", ip)];
                let d = if rule == "repeated" {
                    repeated_request(&limiter).await
                } else {
                    limiter.check(&rule, &attrs).await.unwrap()
                };
                admitted += u64::from(d.allowed);
                degraded += u64::from(d.degraded);
            }
            (ip, admitted, degraded)
        });
    }
    let (mut a, mut b, mut degraded) = (0, 0, 0);
    while let Some(r) = tasks.join_next().await {
        let (ip, admitted, d) = r.expect("no task panics");
        if ip == "a" || rule == "hammer" || rule == "repeated" {
            a += admitted;
        } else {
            b += admitted;
        }
        degraded += d;
    }
    assert_eq!(degraded, 0, "every decision came from Redis");
    println!("admitted_a={a}\nadmitted_b={b}");
}

/// One request of the `repeated` rule: the member on IP `a` twice and on IP `b` once. Its
/// decision stands for the request's: allowed when every part is, degraded when any is.
async fn repeated_request(limiter: &Limiter) -> sluice::Decision {
    let (a, b) = (
        [("member", "m"), ("ip", "a")],
        [("member", "m"), ("ip", "b")],
    );
    let part = |attrs| sluice::limiter::RuleCheck {
        rule: "repeated",
        attrs,
        cost: 1,
    };
    let parts: [sluice::limiter::RuleCheck<'_, [(&str, &str)]>; 3] =
        [part(&a[..]), part(&a[..]), part(&b[..])];
    let decided = limiter.check_all(&parts).await.unwrap();
    let mut d = decided[0].clone();
    d.allowed = decided.iter().all(|d| d.allowed);
    d.degraded = decided.iter().any(|d| d.degraded);
    d
}

/// The `reserve` worker: reserves 10 units per attempt and settles each admitted one at a cost
/// from 0 to 10; prints how many were admitted and what the settlements charged.
async fn reserve_and_settle(limiter: &Limiter) {
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let limiter = limiter.clone();
        tasks.spawn(async move {
            let (mut admitted, mut charged) = (0u64, 0u64);
            for attempt in 0..ATTEMPTS_PER_TASK {
                let check = sluice::Check::cost(10).reserve();
                let d = limiter
                    .check_with("reserve", &[("member", "m")], check)
                    .await
                    .unwrap();
                assert!(!d.degraded, "every decision came from Redis");
                let Some(reservation) = d.reservation else {
                    continue;
                };
                let actual = ((task * 7 + attempt * 3) % 11) as u64;
                assert!(limiter.settle(&reservation, actual).await.unwrap());
                admitted += 1;
                charged += actual;
            }
            (admitted, charged)
        });
    }
    let (mut admitted, mut charged) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        let (a, c) = r.expect("no task panics");
        admitted += a;
        charged += c;
    }
    println!("admitted_a={admitted}\ncharged={charged}");
}

/// The `leases` worker: each admitted task counts itself in a shared Redis counter while it holds
/// its lease, and prints the most it saw.
async fn hold_and_release(limiter: &Limiter, url: &str, prefix: &str) {
    let conn = CounterConnection::open(url).await;
    let counter = format!("{prefix}:held");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let (limiter, mut conn, counter) = (limiter.clone(), conn.clone(), counter.clone());
        tasks.spawn(async move {
            let (mut admitted, mut most, mut degraded) = (0u64, 0i64, 0u64);
            while admitted < TURNS {
                let d = limiter.check("leases", &[("member", "m")]).await.unwrap();
                degraded += u64::from(d.degraded);
                let Some(lease) = d.lease.filter(|_| d.allowed) else {
                    tokio::task::yield_now().await;
                    continue;
                };
                admitted += 1;
                let held: i64 = redis::cmd("INCR")
                    .arg(&counter)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                most = most.max(held);
                let _: () = redis::cmd("PING").query_async(&mut conn).await.unwrap();
                let _: i64 = redis::cmd("DECR")
                    .arg(&counter)
                    .query_async(&mut conn)
                    .await
                    .unwrap();
                assert!(limiter.release(&lease).await.unwrap(), "the lease was held");
            }
            (admitted, most, degraded)
        });
    }
    let (mut admitted, mut most, mut degraded) = (0, 0, 0);
    while let Some(r) = tasks.join_next().await {
        let (a, m, d) = r.expect("no task panics");
        admitted += a;
        most = most.max(m);
        degraded += d;
    }
    assert_eq!(degraded, 0, "every decision came from Redis");
    println!("admitted_a={admitted}\nadmitted_b=0\nmost_held={most}");
}

/// The shared counter's connection: to the server of `url`, its Cluster, or the primary its
/// sentinels name.
#[derive(Clone)]
enum CounterConnection {
    One(redis::aio::MultiplexedConnection),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl CounterConnection {
    async fn open(url: &str) -> CounterConnection {
        use sluice::store::redis::{RedisUrl, Topology};
        let parsed = RedisUrl::parse(url).expect("a valid URL");
        let nodes: Vec<String> = parsed
            .nodes
            .iter()
            .map(|(host, port)| format!("redis://{host}:{port}"))
            .collect();
        let one = |url: String| async move {
            let client = redis::Client::open(url).expect("a client");
            let conn = client.get_multiplexed_async_connection().await;
            conn.expect("a connection")
        };
        match parsed.topology {
            Topology::Single => CounterConnection::One(one(url.to_string()).await),
            Topology::Cluster => {
                let client = redis::cluster::ClusterClient::new(nodes).expect("a client");
                let conn = client.get_async_connection().await.expect("a connection");
                CounterConnection::Cluster(conn)
            }
            Topology::Sentinel { master } => {
                let mut sentinel = one(nodes[0].clone()).await;
                let (host, port): (String, u16) = redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&master)
                    .query_async(&mut sentinel)
                    .await
                    .expect("the primary's address");
                CounterConnection::One(one(format!("redis://{host}:{port}")).await)
            }
            other => panic!("{other:?}: count this topology's commands"),
        }
    }
}

impl redis::aio::ConnectionLike for CounterConnection {
    fn req_packed_command<'a>(
        &'a mut self,
        cmd: &'a redis::Cmd,
    ) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            CounterConnection::One(c) => c.req_packed_command(cmd),
            CounterConnection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        cmd: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            CounterConnection::One(c) => c.req_packed_commands(cmd, offset, count),
            CounterConnection::Cluster(c) => c.req_packed_commands(cmd, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        0
    }
}
