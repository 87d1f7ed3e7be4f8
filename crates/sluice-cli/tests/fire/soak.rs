//! A soak: the service on Redis under mixed traffic for a while, with a fault between them every
//! [`CYCLE`] (a fault proxy: delay, stall, reset, cut replies, blackhole, one byte at a time, in
//! turn, each for [`FAULT`]). Every second it samples the service's memory and open files, the
//! p99 of that second's decisions, how many fell to the fail policy, and how many units any
//! identity was admitted over its quota. At the end: nothing admitted over a quota (the quota
//! rule fails closed), memory and open files flat (within the outage test's tolerances), and
//! Redis deciding again after the last fault.
//!
//! 60 s here; `scripts/soak` runs it for longer (`SLUICE_SOAK_SECS`, 30 min by default) and plots
//! the samples it writes to `SLUICE_SOAK_CSV`.

use crate::common;

use std::collections::HashMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use common::Server;
use sluice_test_support::{Fault, FaultProxy, RedisServer};
use tokio::sync::Mutex;

const CYCLE: Duration = Duration::from_secs(8);
const FAULT: Duration = Duration::from_secs(3);
const CLIENTS: usize = 8;
/// Units each identity of the `quota` rule may have in a day; identities rotate so that most
/// run out.
const QUOTA: u64 = 20;
const IDENTITIES: u64 = 200;
const RSS_TOLERANCE_KB: u64 = 16 * 1024;
const FD_TOLERANCE: usize = 16;

/// The store timeout of [`CONFIG`]: far above what a healthy call takes on a loaded machine.
const TIMEOUT: Duration = Duration::from_secs(1);

const CONFIG: &str = "store: { timeout: 1s }
rules:
  api:
    fail: open
    limits: [ { by: [ip], rate: 50/1s, algorithm: gcra } ]
  quota:
    fail: closed
    limits: [ { by: [member], rate: 20/1d, algorithm: sliding_log } ]
  burst:
    fail: local
    limits: [ { by: [ip], rate: 100/10s, algorithm: token_bucket, burst: 20 } ]
";

fn faults() -> [Fault; 6] {
    [
        Fault::Delay(Duration::from_millis(250)),
        Fault::Stall,
        Fault::Reset,
        Fault::CutReply,
        Fault::Blackhole,
        Fault::Trickle(Duration::from_millis(20)),
    ]
}

fn soak_length() -> Duration {
    let secs = std::env::var("SLUICE_SOAK_SECS")
        .map_or(60, |s| s.parse().expect("SLUICE_SOAK_SECS is seconds"));
    Duration::from_secs(secs)
}

/// What the clients saw, shared with the sampler.
#[derive(Default)]
struct Seen {
    /// Latencies of the decisions that ended since the last sample (µs).
    latencies: Vec<u64>,
    degraded: u64,
    /// `quota` units admitted per member.
    admitted: HashMap<u64, u64>,
}

fn start_clients(server: &Arc<Server>, stop: &Arc<AtomicBool>, seen: &Arc<Mutex<Seen>>) {
    for client in 0..CLIENTS as u64 {
        let (server, stop, seen) = (server.clone(), stop.clone(), seen.clone());
        tokio::spawn(async move {
            let mut n = client;
            while !stop.load(Ordering::Relaxed) {
                n += CLIENTS as u64;
                let member = n / 3 % IDENTITIES;
                let (rule, attributes) = match n % 3 {
                    0 => (
                        "api",
                        serde_json::json!({ "ip": format!("10.0.0.{}", n % 50) }),
                    ),
                    1 => ("quota", serde_json::json!({ "member": member.to_string() })),
                    _ => (
                        "burst",
                        serde_json::json!({ "ip": format!("10.1.0.{}", n % 20) }),
                    ),
                };
                let started = Instant::now();
                let answer = server.check(rule, attributes).await;
                let took = started.elapsed().as_micros() as u64;
                assert!(answer.status == 200 || answer.status == 429, "{answer:?}");
                let mut seen = seen.lock().await;
                seen.latencies.push(took);
                seen.degraded += u64::from(answer.json["degraded"] == true);
                if rule == "quota" && answer.json["allowed"] == true {
                    *seen.admitted.entry(member).or_default() += 1;
                }
            }
        });
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_service_holds_under_mixed_traffic_and_recurring_faults() {
    let _turn = crate::ONE_AT_A_TIME.lock().await;
    let redis = RedisServer::start();
    let proxy = FaultProxy::start(redis.port());
    let server = Arc::new(Server::start_on(CONFIG, &proxy.redis_url()));
    let pid = server.pid();
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Seen::default()));
    start_clients(&server, &stop, &seen);
    let mut csv = std::env::var_os("SLUICE_SOAK_CSV").map(|path| {
        let mut file = std::fs::File::create(path).expect("SLUICE_SOAK_CSV can be written");
        let header = "second,fault,rss_kb,open_files,decisions,p99_us,degraded,over_quota";
        writeln!(file, "{header}").expect("the CSV takes a line");
        file
    });

    let started = Instant::now();
    let mut baseline: Option<(u64, usize)> = None;
    let (mut rss_max, mut fds_max, mut worst_p99) = (0, 0, 0);
    let mut second = 0u64;
    while started.elapsed() < soak_length() {
        second += 1;
        // The soak lasts real time: one sample a second, not a wait for a limiter's time.
        tokio::time::sleep_until((started + Duration::from_secs(second)).into()).await;
        let (rss, fds) = crate::resources(pid);
        let (mut latencies, degraded, over) = {
            let mut seen = seen.lock().await;
            let over: u64 = seen
                .admitted
                .values()
                .map(|&a| a.saturating_sub(QUOTA))
                .sum();
            let degraded = std::mem::take(&mut seen.degraded);
            (std::mem::take(&mut seen.latencies), degraded, over)
        };
        latencies.sort_unstable();
        let p99 = latencies
            .get(latencies.len() * 99 / 100)
            .copied()
            .unwrap_or(0);
        // The first full cycle warms the service up (connections, scripts, caches).
        if second == CYCLE.as_secs() {
            baseline = Some((rss, fds));
        }
        if second > CYCLE.as_secs() {
            (rss_max, fds_max) = (rss_max.max(rss), fds_max.max(fds));
        }
        worst_p99 = worst_p99.max(p99);
        if let Some(file) = csv.as_mut() {
            writeln!(
                file,
                "{second},{:?},{rss},{fds},{},{p99},{degraded},{over}",
                proxy.fault(),
                latencies.len()
            )
            .expect("the CSV takes a line");
        }
        assert_eq!(over, 0, "second {second}: admitted over a quota");
        // The next second's fault. Each cycle after the first: clean, then its fault until it
        // ends.
        let in_cycle = second % CYCLE.as_secs();
        let cycle = second / CYCLE.as_secs();
        let next = if cycle > 0 && in_cycle >= CYCLE.as_secs() - FAULT.as_secs() {
            faults()[(cycle as usize - 1) % faults().len()]
        } else {
            Fault::None
        };
        if proxy.fault() != next {
            proxy.set(next);
        }
    }
    proxy.set(Fault::None);
    stop.store(true, Ordering::Relaxed);

    let (rss_before, fds_before) = baseline.expect("the soak lasts more than one cycle");
    assert!(
        rss_max <= rss_before + RSS_TOLERANCE_KB,
        "RSS rose from {rss_before} kB to {rss_max} kB"
    );
    assert!(
        fds_max <= fds_before + FD_TOLERANCE,
        "open files rose from {fds_before} to {fds_max}"
    );
    // A second's p99 is at most a call cut at the timeout, and room for a loaded machine.
    assert!(
        worst_p99 <= (TIMEOUT + Duration::from_millis(500)).as_micros() as u64,
        "the worst second's p99 was {worst_p99} µs"
    );
    common::eventually(common::WITHIN, "Redis to decide again", || async {
        let answer = server
            .check("api", serde_json::json!({ "ip": "10.9.9.9" }))
            .await;
        (answer.json["degraded"] == false).then_some(())
    })
    .await;
    println!(
        "soak {:?}: RSS {rss_before}–{rss_max} kB, open files {fds_before}–{fds_max}, worst \
         second's p99 {worst_p99} µs, nothing over a quota",
        soak_length()
    );
}
