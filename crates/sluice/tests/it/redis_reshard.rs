//! Resharding and a planned failover under load, on a Redis Cluster of the test's own: while 4
//! processes × 32 tasks decide on one key, its slot moves to another primary step by step
//! (`IMPORTING`/`MIGRATING`, the key moved by `MIGRATE`, then `SETSLOT … NODE` everywhere), and
//! then that primary's replica takes over with `CLUSTER FAILOVER`. Between the steps, the test
//! waits until the node that should answer has run decisions, so every state of the move is
//! decided through: on the old owner, through `ASK` on the new one, through `MOVED` after it, and
//! on the promoted replica.
//!
//! No decision fails (the workers' fail policy is `closed` and a degraded decision fails the
//! test) and the limit is exact: the workers admit exactly the units the limit has left, on the
//! one-limit script (`gcra`) and on the general function (`sliding_log`, whose denials it
//! decides).
#![cfg(feature = "redis")]

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use sluice::limiter::DenialCacheOptions;
use sluice::model::{Algorithm, Limit, Penalty};
use sluice::store::redis::{RedisOptions, RedisStore};
use sluice::{FailPolicy, Limiter, Options, Rule};
use sluice_test_support::{RedisCluster, member};

const PROCESSES: usize = 4;
const TASKS: usize = 32;
const LIMIT: u64 = 1000;
/// Decisions a node must run before the next step is taken.
const PROGRESS: u64 = 200;

/// The decisions' deadline: a planned failover holds the old primary's writes until the replica
/// has taken over, which on a loaded machine takes seconds.
const TIMEOUT: Duration = Duration::from_secs(10);

async fn limiter(url: &str, prefix: &str, algorithm: Algorithm) -> Limiter {
    let rate = format!("{LIMIT}/1d").parse().unwrap();
    limiter_of(url, prefix, Limit::new(&["ip"], rate, algorithm), TIMEOUT).await
}

/// A limiter whose rule `hammer` holds `limit`, with every decision asked of Redis (denials
/// too), and one that cannot be a failure.
async fn limiter_of(url: &str, prefix: &str, limit: Limit, timeout: Duration) -> Limiter {
    let store = RedisStore::connect(
        url,
        RedisOptions {
            prefix: prefix.to_string(),
            // As long as the decision's own deadline (as `sluice serve` sets it).
            response_timeout: timeout,
            ..RedisOptions::default()
        },
    )
    .await
    .expect("a valid URL");
    Limiter::builder(store)
        .rule("hammer", Rule::new(vec![limit]))
        .options(Options {
            fail: FailPolicy::Closed,
            timeout,
            denial_cache: DenialCacheOptions {
                enabled: false,
                ..DenialCacheOptions::default()
            },
            ..Options::default()
        })
        .build()
        .unwrap()
}

/// The decisions (scripts and function calls) the node on `port` has run.
fn decisions_on(port: u16) -> u64 {
    member::cli(port, &["INFO", "commandstats"])
        .lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_fcall:"))
        .filter_map(|l| {
            l.split("calls=")
                .nth(1)?
                .split(',')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// Waits until the node on `port` has run [`PROGRESS`] more decisions.
fn wait_for_decisions_on(port: u16, step: &str) {
    let from = decisions_on(port);
    assert!(
        sluice_test_support::wait_until(Duration::from_secs(30), || {
            decisions_on(port) >= from + PROGRESS
        }),
        "no decisions on {port} after {step}"
    );
}

/// The state key the limiter made under `prefix` (it made one), found on whichever primary.
fn key_under(cluster: &RedisCluster, prefix: &str) -> String {
    let pattern = format!("{prefix}*");
    cluster
        .primaries()
        .into_iter()
        .find_map(|port| {
            let keys = member::cli(port, &["--scan", "--pattern", &pattern]);
            sluice_test_support::decision_keys(&keys).into_iter().next()
        })
        .expect("the first decision made a key")
}

/// The slot of the key the limiter made under `prefix`, the primary serving it, and another
/// primary to move it to.
fn move_plan(cluster: &RedisCluster, prefix: &str) -> (u16, u16, u16) {
    let slot = cluster.slot_of(&key_under(cluster, prefix));
    let from = cluster.owner_of(slot).expect("a primary serves the slot");
    let to = *cluster
        .primaries()
        .iter()
        .find(|&&p| p != from)
        .expect("another primary");
    (slot, from, to)
}

fn test_name(function: &str) -> String {
    match module_path!().split_once("::") {
        Some((_, module)) => format!("{module}::{function}"),
        None => function.to_string(),
    }
}

fn spawn_workers(url: &str, prefix: &str, algorithm: Algorithm, stop: &Path) -> Vec<Child> {
    let exe = std::env::current_exe().expect("the test binary knows its path");
    (0..PROCESSES)
        .map(|_| {
            Command::new(&exe)
                .args(["--exact", &test_name("reshard_worker"), "--ignored"])
                .arg("--nocapture")
                .env("SLUICE_RESHARD_URL", url)
                .env("SLUICE_RESHARD_PREFIX", prefix)
                .env("SLUICE_RESHARD_ALGORITHM", algorithm.name())
                .env("SLUICE_RESHARD_STOP", stop)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the worker process starts")
        })
        .collect()
}

fn join_workers(workers: Vec<Child>) -> u64 {
    workers
        .into_iter()
        .map(|w| {
            let out = w.wait_with_output().expect("the worker runs");
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success(),
                "worker failed: {stdout}\n{}",
                String::from_utf8_lossy(&out.stderr)
            );
            stdout
                .lines()
                .find_map(|l| l.strip_prefix("admitted="))
                .unwrap_or_else(|| panic!("no count in worker output: {stdout}"))
                .trim()
                .parse::<u64>()
                .expect("a number")
        })
        .sum()
}

/// One run: the key's slot moves from its owner to another primary, then that primary's replica
/// takes over, all under the workers' load.
fn move_and_fail_over_under_load(cluster: &RedisCluster, algorithm: Algorithm) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let prefix = common::unique_prefix();
    let url = cluster.url();
    let first = runtime.block_on(async {
        let limiter = limiter(&url, &prefix, algorithm).await;
        limiter.check("hammer", &[("ip", "a")]).await.unwrap()
    });
    assert!(first.allowed && !first.degraded, "{first:?}");
    let (slot, from, to) = move_plan(cluster, &prefix);

    let stop: PathBuf = std::env::temp_dir().join(format!("sluice-reshard-stop-{prefix}"));
    let _ = std::fs::remove_file(&stop);
    let workers = spawn_workers(&url, &prefix, algorithm, &stop);
    let started = Instant::now();
    wait_for_decisions_on(from, "the workers started");
    cluster.begin_migration(slot, from, to);
    wait_for_decisions_on(from, "IMPORTING/MIGRATING");
    assert!(cluster.migrate_keys(slot, from, to) >= 1, "the key moved");
    wait_for_decisions_on(to, "MIGRATE (ASK)");
    cluster.finish_migration(slot, to);
    wait_for_decisions_on(to, "SETSLOT NODE (MOVED)");
    let replica = cluster.replica_of(to).expect("the new owner has a replica");
    cluster.planned_failover(replica);
    wait_for_decisions_on(replica, "CLUSTER FAILOVER");
    std::fs::write(&stop, b"").expect("the temp dir is writable");
    let admitted = join_workers(workers);
    let _ = std::fs::remove_file(&stop);
    println!(
        "{algorithm}: slot {slot} moved {from} → {to}, {replica} took over; {admitted} admitted \
         in {:?}",
        started.elapsed()
    );
    assert_eq!(admitted + 1, LIMIT, "{algorithm}: exactly the limit");
}

#[test]
fn slots_move_and_a_replica_takes_over_while_decisions_run() {
    let cluster = RedisCluster::start();
    for algorithm in [Algorithm::Gcra, Algorithm::SlidingLog] {
        move_and_fail_over_under_load(&cluster, algorithm);
    }
}

/// How many times the node on `port` has answered `TRYAGAIN`, from `INFO errorstats`.
fn try_again_answers(port: u16) -> u64 {
    member::cli(port, &["INFO", "errorstats"])
        .lines()
        .find_map(|l| l.strip_prefix("errorstat_TRYAGAIN:count="))
        .map_or(0, |n| n.trim().parse().expect("a count"))
}

/// A limit with a penalty names three keys in its general decision (state, block and
/// violations). While its slot is on the move, Redis answers such a call `TRYAGAIN` as long as one
/// of them is missing on the node asked (the block key does not exist until a block), so from the
/// moment the keys are migrated until the slot is handed over the decision cannot run. It asks
/// again until the move ends, within its deadline, and is decided by Redis: the test holds the
/// move until the node has answered `TRYAGAIN` more often than a fixed number of tries would
/// have allowed, then ends it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_on_a_moving_slot_waits_for_the_move_to_end() {
    const DEADLINE: Duration = Duration::from_secs(120);
    let cluster = RedisCluster::start();
    let prefix = common::unique_prefix();
    let mut limit = Limit::new(&["ip"], "1/1d".parse().unwrap(), Algorithm::SlidingLog);
    limit.penalty = Some(Penalty {
        warn_after: 100,
        ban_after: 100,
        ban: Duration::from_secs(60),
        memory: Duration::from_secs(3600),
    });
    let limiter = limiter_of(&cluster.url(), &prefix, limit, DEADLINE).await;
    let check = || limiter.check("hammer", &[("ip", "a")]);
    let first = check().await.unwrap();
    assert!(first.allowed && !first.degraded, "{first:?}");
    let denied = check().await.unwrap();
    assert!(!denied.allowed && !denied.degraded, "{denied:?}");

    let (slot, from, to) = move_plan(&cluster, &prefix);
    cluster.begin_migration(slot, from, to);
    assert!(cluster.migrate_keys(slot, from, to) >= 1, "the keys moved");
    let before = try_again_answers(to);
    let during = tokio::spawn({
        let limiter = limiter.clone();
        async move { limiter.check("hammer", &[("ip", "a")]).await.unwrap() }
    });
    // Held until the node has answered it `TRYAGAIN` 20 times (a decision that gave up earlier
    // has finished by then, and fails below).
    assert!(
        sluice_test_support::wait_until(DEADLINE, || {
            during.is_finished() || try_again_answers(to) >= before + 20
        }),
        "the decision asks the importing node"
    );
    cluster.finish_migration(slot, to);
    let d = during.await.unwrap();
    assert!(
        !d.allowed && !d.degraded,
        "decided by Redis after the move: {d:?}"
    );
    assert_eq!(d.violations, 2, "{d:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a worker process of slots_move_and_a_replica_takes_over_while_decisions_run"]
async fn reshard_worker() {
    let var = |name: &str| std::env::var(name).expect("run by the parent test");
    let algorithm: Algorithm = var("SLUICE_RESHARD_ALGORITHM").parse().expect("a name");
    let limiter = limiter(
        &var("SLUICE_RESHARD_URL"),
        &var("SLUICE_RESHARD_PREFIX"),
        algorithm,
    )
    .await;
    let stop = PathBuf::from(var("SLUICE_RESHARD_STOP"));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..TASKS {
        let (limiter, stop) = (limiter.clone(), stop.clone());
        tasks.spawn(async move {
            let (mut admitted, mut degraded, mut why) = (0u64, 0u64, None);
            while !stop.exists() {
                let d = limiter.check("hammer", &[("ip", "a")]).await.unwrap();
                admitted += u64::from(d.allowed);
                degraded += u64::from(d.degraded);
                if d.degraded && why.is_none() {
                    why = d.reason;
                }
            }
            (admitted, degraded, why)
        });
    }
    let (mut admitted, mut degraded, mut why) = (0, 0, None);
    while let Some(r) = tasks.join_next().await {
        let (a, d, w) = r.expect("no task panics");
        admitted += a;
        degraded += d;
        why = why.or(w);
    }
    assert_eq!(
        degraded, 0,
        "every decision came from Redis; the first degraded one: {why:?}"
    );
    println!("admitted={admitted}");
}
