//! A long store outage under steady load, through the real binary on Redis: the server paused
//! (`SIGSTOP`), a server that accepts connections and never answers (a blackhole between them),
//! and one that answers one byte at a time. Eight clients keep asking throughout. During the
//! outage every decision is answered by its rule's fail policy, 99 % of them within the store
//! timeout plus [`MARGIN`] and all within [`WORST`] more, and the service's memory and open files stay within [`RSS_TOLERANCE_KB`] and
//! [`FD_TOLERANCE`] of what they were before it; once the store is back, every decision started
//! [`RECOVERY`] after that is decided by the store, and nothing asked during the outage was counted
//! twice.
//!
//! The outage lasts 10 s here; `SLUICE_OUTAGE_SECS=180` runs the three-minute version. Each run
//! prints its figures (latency max and p99 during the outage, RSS and open files min–max, time to
//! the first decision by the store).

use crate::common;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::Server;
use sluice_test_support::{Fault, FaultProxy, RedisServer};
use tokio::sync::Mutex;

/// The store timeout: far above what a healthy call takes on a loaded machine, so that once the
/// store is back no decision of the store's is cut by a slow moment.
const TIMEOUT: Duration = Duration::from_secs(1);
/// Scheduling slack on a loaded two-core machine, on top of the store timeout: the bound on the
/// 99th percentile.
const MARGIN: Duration = Duration::from_millis(400);
/// The bound on the slowest answer: a stall of the service (a decision waiting on the store past
/// its timeout) would take seconds; a busy machine's scheduling takes this much at worst.
const WORST: Duration = Duration::from_millis(1500);
/// Decisions started this long after the store is back must all be the store's: the breaker's
/// longest back-off (0.5 s), a probe, and room for a loaded machine.
const RECOVERY: Duration = Duration::from_secs(3);
const RSS_TOLERANCE_KB: u64 = 16 * 1024;
const FD_TOLERANCE: usize = 16;
const CLIENTS: usize = 8;
/// Attempts the `counted` rule allows an identity: far above what one outage sends it.
const COUNTED: u64 = 100_000;

fn config() -> String {
    format!(
        "store: {{ timeout: {}ms }}
rules:
  open:
    fail: open
    limits: [ {{ by: [ip], rate: 1000000/1d, algorithm: gcra }} ]
  closed:
    fail: closed
    limits: [ {{ by: [ip], rate: 1000000/1d, algorithm: gcra }} ]
  counted:
    fail: open
    limits: [ {{ by: [ip], rate: {COUNTED}/1d, algorithm: sliding_log }} ]
",
        TIMEOUT.as_millis()
    )
}

fn outage() -> Duration {
    let secs = std::env::var("SLUICE_OUTAGE_SECS").map_or(10, |s| {
        s.parse()
            .expect("SLUICE_OUTAGE_SECS is a number of seconds")
    });
    Duration::from_secs(secs)
}

/// One decision as a client saw it.
#[derive(Debug, Clone, Copy)]
struct Seen {
    started: Instant,
    took: Duration,
    degraded: bool,
    allowed: bool,
    rule: &'static str,
}

/// Steady load: each client asks `open`, `closed` and `counted` in turn until stopped.
fn start_load(server: &Arc<Server>, stop: &Arc<AtomicBool>) -> Arc<Mutex<Vec<Seen>>> {
    let seen = Arc::new(Mutex::new(Vec::new()));
    for client in 0..CLIENTS {
        let (server, stop, seen) = (server.clone(), stop.clone(), seen.clone());
        tokio::spawn(async move {
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let rule = ["open", "closed", "counted"][(n % 3) as usize];
                // The `counted` rule is asked for one identity only, to count what it kept.
                let ip = match rule {
                    "counted" => "10.9.9.9".to_string(),
                    _ => format!("10.{client}.{}.{}", n / 250 % 250, n % 250),
                };
                let started = Instant::now();
                let answer = server.check(rule, serde_json::json!({ "ip": ip })).await;
                let took = started.elapsed();
                assert!(answer.status == 200 || answer.status == 429, "{answer:?}");
                seen.lock().await.push(Seen {
                    started,
                    took,
                    degraded: answer.json["degraded"] == true,
                    allowed: answer.json["allowed"] == true,
                    rule,
                });
                n += 1;
            }
        });
    }
    seen
}

/// Runs one outage, made by `begin` and ended by `end`, and checks every promise above.
async fn outage_under_load(name: &str, store_url: &str, begin: impl FnOnce(), end: impl FnOnce()) {
    let _turn = crate::ONE_AT_A_TIME.lock().await;
    let server = Arc::new(Server::start_on(&config(), store_url));
    let pid = server.pid();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = start_load(&server, &stop);

    // The outage and the phases around it last real seconds: these waits are its length, not
    // waits for a limiter's time. Warm: connections made, scripts loaded, caches filled.
    let warm_until = Instant::now() + Duration::from_millis(1500);
    while Instant::now() < warm_until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (rss_before, fds_before) = crate::resources(pid);

    begin();
    let began = Instant::now();
    let (mut rss, mut fds) = ((u64::MAX, 0u64), (usize::MAX, 0usize));
    while began.elapsed() < outage() {
        // Sampling interval of the process' resources, not a wait for the limiter's time.
        tokio::time::sleep(Duration::from_millis(250)).await;
        let (r, f) = crate::resources(pid);
        rss = (rss.0.min(r), rss.1.max(r));
        fds = (fds.0.min(f), fds.1.max(f));
    }
    // A decision that waited on the store can be answered by it the moment `end` has made it
    // answer again, before `end` returns: only what ended before `end` began was the outage's.
    let ending = Instant::now();
    end();
    let ended = Instant::now();
    let after_until = ended + RECOVERY + Duration::from_secs(2);
    while Instant::now() < after_until {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    stop.store(true, Ordering::Relaxed);
    let seen = seen.lock().await.clone();

    let during: Vec<Seen> = seen
        .iter()
        .filter(|s| s.started >= began + MARGIN && s.started + s.took <= ending)
        .copied()
        .collect();
    assert!(during.len() > 100, "{name}: {} decisions", during.len());
    let mut took: Vec<Duration> = during.iter().map(|s| s.took).collect();
    took.sort();
    let (p99, max) = (took[took.len() * 99 / 100], took[took.len() - 1]);
    for s in &during {
        assert!(s.degraded, "{name}: a decision during the outage: {s:?}");
        assert_eq!(s.allowed, s.rule != "closed", "{name}: policy of {s:?}");
    }
    assert!(p99 <= TIMEOUT + MARGIN, "{name}: p99 {p99:?}");
    assert!(max <= TIMEOUT + WORST, "{name}: slowest answer {max:?}");
    assert!(
        rss.1 <= rss_before + RSS_TOLERANCE_KB,
        "{name}: RSS {rss:?} kB against {rss_before} kB before"
    );
    assert!(
        fds.1 <= fds_before + FD_TOLERANCE,
        "{name}: open files {fds:?} against {fds_before} before"
    );

    let late: Vec<&Seen> = seen
        .iter()
        .filter(|s| s.started >= ended + RECOVERY)
        .collect();
    assert!(!late.is_empty(), "{name}: no decision after the outage");
    let degraded_late = late.iter().filter(|s| s.degraded).count();
    assert_eq!(degraded_late, 0, "{name}: degraded after recovery");
    let first_by_store = seen
        .iter()
        .filter(|s| s.started >= ended && !s.degraded)
        .map(|s| s.started + s.took - ended)
        .min()
        .expect("a decision by the store after the outage");

    // Every `counted` request went to the store at most once: what the identity has left is at
    // least the limit less every request ever sent for it.
    let sent = seen.iter().filter(|s| s.rule == "counted").count() as u64;
    let answer = server
        .check("counted", serde_json::json!({ "ip": "10.9.9.9" }))
        .await;
    let remaining = answer.json["remaining"].as_u64().expect("a decision");
    assert!(!answer.json["degraded"].as_bool().unwrap_or(true));
    assert!(
        remaining + 1 + sent >= COUNTED,
        "{name}: {sent} sent, {remaining} left: something was counted twice"
    );
    // And a new identity is counted once per request.
    for left in [COUNTED - 1, COUNTED - 2] {
        let answer = server
            .check("counted", serde_json::json!({ "ip": "10.8.8.8" }))
            .await;
        assert_eq!(answer.json["remaining"], left, "{name}: {answer:?}");
    }
    println!(
        "{name}: outage {:?}, {} decisions during it, latency p99 {p99:?} max {max:?}; \
         RSS {rss_before} kB before, {}–{} kB during; open files {fds_before} before, {}–{} \
         during; first decision by the store {first_by_store:?} after the end",
        outage(),
        during.len(),
        rss.0,
        rss.1,
        fds.0,
        fds.1,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis() {
    let redis = RedisServer::start();
    let url = redis.url();
    outage_under_load("paused", &url, || redis.pause(), || redis.resume()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_never_answers() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.port());
    outage_under_load(
        "never answers",
        &proxy.redis_url(),
        || proxy.set(Fault::Blackhole),
        || proxy.set(Fault::None),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_that_answers_one_byte_at_a_time() {
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.port());
    outage_under_load(
        "one byte at a time",
        &proxy.redis_url(),
        // Even the shortest reply (`:0\r\n`) takes twice the timeout.
        || proxy.set(Fault::Trickle(TIMEOUT / 2)),
        || proxy.set(Fault::None),
    )
    .await;
}
