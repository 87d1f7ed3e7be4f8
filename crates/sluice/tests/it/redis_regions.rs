//! One limit shared by nodes in two regions: two near their Redis, two far from it (each chunk
//! between them and Redis delayed 50 ms by a [`FaultProxy`], a 100 ms round trip), every node
//! taking its units in hot-key batches (`batch: {max: 50, hold: 1s}`) and told the fleet is four
//! nodes (`Options::nodes`, `store.nodes` in a rule file).
//!
//! - **Far from the store.** A far node answers from the units it holds, so most of its
//!   decisions wait for no round trip; the fleet's admissions stay within the limit plus the
//!   batches' bound (`docs/src/concepts/hot-keys.md`): at most `b + r·(T + H)` for a token
//!   bucket, and no fewer than the limit less the units held unspent (`N·K`).
//! - **A partition.** The far region loses Redis (a blackhole). Its nodes spend what they hold,
//!   then `fail: local` gives each its share (a quarter of the limit), while the near region keeps
//!   deciding through Redis: the fleet admits at most the limit plus the far region's shares,
//!   where nodes each deciding the whole limit would add the limit twice.
//!
//! The figures each run prints (decision latencies on the far nodes, store calls) are recorded
//! in the regions chapter of the book. Bounds here are counts, never durations.
#![cfg(feature = "redis")]

use crate::common;

use std::num::NonZeroU32;
use std::time::{Duration, Instant};

use sluice::model::{Algorithm, Batches, Limit};
use sluice::{FailPolicy, Limiter, Options, Rule};
use sluice_test_support::{Fault, FaultProxy, RedisServer};

/// The limit: 1,000 an hour, all of it available at once (the token bucket's burst).
const LIMIT: u64 = 1000;
const WINDOW: Duration = Duration::from_secs(3600);
const NODES: u32 = 4;
/// Each node's most held units (`K`) and how long it may spend a batch (`H`).
const MAX: u64 = 50;
const HOLD: Duration = Duration::from_secs(1);
/// Tasks per node, asking at once.
const TASKS: usize = 8;
const DELAY: Duration = Duration::from_millis(50);

/// A node: its limiter, in the near or the far region.
struct Node {
    limiter: Limiter,
    far: bool,
}

/// Two near nodes on Redis itself and two far ones through `far`, on one prefix.
async fn fleet(server: &RedisServer, far: &FaultProxy) -> Vec<Node> {
    let prefix = common::unique_prefix();
    let mut limit = Limit::new(
        &[],
        format!("{LIMIT}/{}s", WINDOW.as_secs()).parse().unwrap(),
        Algorithm::TokenBucket,
    )
    .with_batches(Batches::new(MAX, HOLD));
    limit.burst = Some(LIMIT);
    let mut rule = Rule::new(vec![limit]);
    rule.fail = Some(FailPolicy::Local);
    let mut nodes = Vec::new();
    for n in 0..NODES {
        let far_node = n >= NODES / 2;
        let url = if far_node {
            far.redis_url()
        } else {
            server.url()
        };
        let limiter = Limiter::builder(common::url_store(&url, None, &prefix).await)
            .options(Options {
                timeout: Duration::from_millis(400),
                nodes: NonZeroU32::new(NODES).unwrap(),
                ..Options::default()
            })
            .rule("provider", rule.clone())
            .build()
            .unwrap();
        nodes.push(Node {
            limiter,
            far: far_node,
        });
    }
    nodes
}

/// What one node's checks gave: admitted, degraded, and each decision's latency.
#[derive(Default)]
struct Tally {
    admitted: u64,
    degraded: u64,
    latencies: Vec<Duration>,
}

/// `per_task` checks from each of [`TASKS`] tasks on `node`.
async fn ask(node: &Limiter, per_task: usize) -> Tally {
    let mut tasks = Vec::new();
    for _ in 0..TASKS {
        let node = node.clone();
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            for _ in 0..per_task {
                let started = Instant::now();
                let d = node
                    .check("provider", &[] as &[(&str, &str)])
                    .await
                    .unwrap();
                tally.latencies.push(started.elapsed());
                tally.admitted += u64::from(d.allowed);
                tally.degraded += u64::from(d.degraded);
            }
            tally
        }));
    }
    let mut all = Tally::default();
    for task in tasks {
        let t = task.await.unwrap();
        all.admitted += t.admitted;
        all.degraded += t.degraded;
        all.latencies.extend(t.latencies);
    }
    all
}

/// Every node's tally, the nodes asking at once.
async fn round(nodes: &[Node], per_task: usize) -> Vec<Tally> {
    futures::future::join_all(nodes.iter().map(|n| ask(&n.limiter, per_task))).await
}

fn percentile(latencies: &mut [Duration], p: f64) -> Duration {
    latencies.sort();
    latencies[((latencies.len() as f64 * p) as usize).min(latencies.len() - 1)]
}

/// The most a token bucket admits over `elapsed` with batches held for `HOLD`: its burst, the
/// rate over the span and the hold (`b + r·(T + H)`), rounded up.
fn token_bucket_bound(elapsed: Duration) -> u64 {
    LIMIT + ((LIMIT as f64) * (elapsed + HOLD).as_secs_f64() / WINDOW.as_secs_f64()).ceil() as u64
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn far_nodes_answer_from_held_batches_and_the_fleet_keeps_the_limit() {
    let server = RedisServer::start();
    let far = FaultProxy::start(server.port());
    far.set(Fault::Delay(DELAY));
    let nodes = fleet(&server, &far).await;
    let calls_before = server.decision_calls();
    let started = Instant::now();

    // Below the limit: 4 nodes × 8 tasks × 25 checks = 800, every one admitted.
    let below = round(&nodes, 25).await;
    let asked: u64 = (NODES as u64) * (TASKS as u64) * 25;
    let admitted: u64 = below.iter().map(|t| t.admitted).sum();
    assert_eq!(admitted, asked, "below the limit every node admits");
    assert!(
        below.iter().all(|t| t.degraded == 0),
        "no decision waited past the timeout"
    );
    let calls = server.decision_calls() - calls_before;
    assert!(
        calls * 4 <= asked,
        "batches answer most decisions without the store: {calls} calls for {asked} decisions"
    );
    let mut far_latencies: Vec<Duration> = nodes
        .iter()
        .zip(&below)
        .filter(|(n, _)| n.far)
        .flat_map(|(_, t)| t.latencies.iter().copied())
        .collect();
    let round_trip = 2 * DELAY;
    let without_round_trip = far_latencies.iter().filter(|l| **l < round_trip).count();
    println!(
        "far nodes, below the limit: {} decisions, {without_round_trip} answered within one round \
         trip ({round_trip:?}), p50 {:?}, p99 {:?}; {calls} store calls for {asked} decisions",
        far_latencies.len(),
        percentile(&mut far_latencies, 0.5),
        percentile(&mut far_latencies, 0.99),
    );

    // Past the limit: 1,600 more asked, the fleet admits the limit and no more than the bound.
    let past = round(&nodes, 50).await;
    let elapsed = started.elapsed();
    let total: u64 = admitted + past.iter().map(|t| t.admitted).sum::<u64>();
    let bound = token_bucket_bound(elapsed);
    let unspent = u64::from(NODES) * MAX;
    println!(
        "past the limit: the fleet admitted {total} (bound {bound}, at least {})",
        LIMIT - unspent
    );
    assert!(total <= bound, "the fleet admitted {total}, above {bound}");
    assert!(
        total >= LIMIT - unspent,
        "the fleet admitted {total}: held units beyond K per node"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_region_cut_off_admits_its_share_while_the_other_keeps_deciding() {
    let server = RedisServer::start();
    let far = FaultProxy::start(server.port());
    let nodes = fleet(&server, &far).await;
    let started = Instant::now();

    // Before the partition: 4 nodes × 8 tasks × 10 checks = 320 admitted through Redis.
    let before: u64 = round(&nodes, 10).await.iter().map(|t| t.admitted).sum();
    assert_eq!(before, 320);

    // The far region loses Redis; everyone asks 8 × 100 more.
    far.set(Fault::Blackhole);
    let during = round(&nodes, 100).await;
    let elapsed = started.elapsed();
    let share = LIMIT / u64::from(NODES);
    for (node, tally) in nodes.iter().zip(&during) {
        println!(
            "{} node during the partition: admitted {}, degraded {}",
            if node.far { "far" } else { "near" },
            tally.admitted,
            tally.degraded
        );
        if node.far {
            // Held units (at most K, counted in Redis before the cut) and then its share.
            assert!(
                tally.admitted <= MAX + share + 1,
                "a far node admitted {} cut off: more than its held units and its share",
                tally.admitted
            );
            assert!(
                tally.admitted >= share,
                "a far node cut off decides its share locally"
            );
            assert!(tally.degraded > 0);
        } else {
            assert_eq!(
                tally.degraded, 0,
                "the near region keeps deciding through Redis"
            );
        }
    }
    let total = before + during.iter().map(|t| t.admitted).sum::<u64>();
    let far_shares = (u64::from(NODES) / 2) * share;
    let bound = token_bucket_bound(elapsed) + far_shares;
    println!(
        "the fleet admitted {total} across the partition: at most the limit's bound plus the far \
         region's shares, {bound} (each far node deciding the whole limit could add {} more)",
        (u64::from(NODES) / 2) * (LIMIT - share)
    );
    assert!(total <= bound, "the fleet admitted {total}, above {bound}");
    far.set(Fault::None);
}
