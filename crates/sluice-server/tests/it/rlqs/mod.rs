//! Envoy's Rate Limit Quota Service against a fleet of simulated proxies ([`proxy`]), on real
//! Sluice servers sharing a real Redis (started here on a free port), all on one manual clock.
//!
//! The bound checked in every window of the limit (`W`, sliding, one tick apart): the fleet
//! admits at most `L + U(a) + E`, where `U(a)` adds up, over the token buckets in force when the
//! window opens, one interval's fill and the burst (what a proxy may spend from draws made before
//! the window), and `E` the fills of the assignments of proxies whose stream broke in the window
//! (with `assignment_ttl = 2 × report_interval` a broken proxy fills one interval more than was
//! drawn for it). The book's "Rate Limit Quota Service" derives it.

mod proxy;

use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use proxy::{Applied, Proxy};
use sluice::ManualClock;
use sluice::store::redis::{RedisOptions, RedisStore};
use sluice_server::AppState;
use sluice_server::config::{Config, Format};
use sluice_server::gateway::rlqs::fair_share::max_min;
use sluice_server::gateway::serve_grpc;
use sluice_server::store_url::OpenedStore;
use sluice_test_support::RedisServer;
use tokio::task::JoinHandle;

/// The limit shared by the fleet: 2000 per 10 s, exact in every window (a sliding log).
const LIMIT: u64 = 2000;
const WINDOW_INTERVALS: usize = 10;
/// Report interval 1 s, simulated in ticks of 100 ms.
const TICKS: u64 = 10;
const INTERVAL: Duration = Duration::from_secs(1);
/// The steady pool of one interval: 90 % of 2000 × 1 s / 10 s.
const POOL: u64 = 180;

/// The rules every server of these tests serves. The store's timeout is long enough that a
/// draw on a busy machine is not taken for a store that is down.
fn config() -> String {
    "store: { clock: local, prefix: rlqs, timeout: 500ms }
rules:
  shared:
    limits:
      - { by: [tenant], rate: 2000/10s, algorithm: sliding_log }
envoy:
  edge:
    - { descriptor: [tenant], rule: shared }
    - { descriptor: [team], rule: shared, attributes: { team: tenant } }
rlqs: { report_interval: 1s, assignment_ttl: 2s }
"
    .to_string()
}

/// One Sluice server's gRPC port, serving until aborted.
struct Server {
    url: String,
    state: Arc<AppState>,
    serving: JoinHandle<std::io::Result<()>>,
}

async fn server(redis: &RedisServer, clock: &Arc<ManualClock>, text: &str) -> Server {
    let config = Config::parse(text, Format::Yaml).unwrap();
    let options = RedisOptions {
        prefix: "rlqs".into(),
        clock: Some(clock.clone()),
        ..RedisOptions::default()
    };
    let store = RedisStore::connect(&redis.url(), options).await.unwrap();
    let channel = store.channel();
    let opened = OpenedStore {
        store: Arc::new(store),
        memory: None,
        channel: Some(Arc::new(channel)),
    };
    let state = AppState::with_clock(config, None, &opened, None, clock.clone()).unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let serving = tokio::spawn(serve_grpc(listener, state.clone(), std::future::pending()));
    Server {
        url,
        state,
        serving,
    }
}

/// The fleet, its demands and what it admitted, tick by tick.
struct Fleet {
    clock: Arc<ManualClock>,
    proxies: Vec<Proxy>,
    /// Requests each proxy offers per interval; `None` once it is gone.
    demand: Vec<Option<u64>>,
    /// Admitted by the whole fleet in each tick.
    admitted: Vec<u64>,
    /// `U`: fill and burst of the buckets in force at the start of each tick.
    in_force: Vec<u64>,
    /// `E` added at each tick (streams broken then).
    broken: Vec<u64>,
}

impl Fleet {
    fn new(clock: Arc<ManualClock>, servers: &[&Server], demand: Vec<u64>) -> Fleet {
        let proxies = (0..demand.len())
            .map(|i| {
                let server = servers[i % servers.len()].url.clone();
                Proxy::new(&format!("proxy-{i}"), clock.clone(), server, "tenant", "t1")
            })
            .collect();
        Fleet {
            clock,
            proxies,
            demand: demand.into_iter().map(Some).collect(),
            admitted: Vec::new(),
            in_force: Vec::new(),
            broken: Vec::new(),
        }
    }

    /// One report interval: the ticks' traffic, then every live proxy's report.
    async fn interval(&mut self) {
        for tick in 0..TICKS {
            let units = self
                .proxies
                .iter()
                .zip(&self.demand)
                .filter(|(_, d)| d.is_some())
                .map(|(p, _)| p.exposure())
                .sum();
            self.in_force.push(units);
            self.broken.push(0);
            self.clock.advance(INTERVAL / TICKS as u32);
            let mut admitted = 0;
            for (proxy, demand) in self.proxies.iter_mut().zip(&self.demand) {
                let Some(demand) = *demand else { continue };
                // `demand` requests spread evenly over the interval's ticks.
                let n = demand * (tick + 1) / TICKS - demand * tick / TICKS;
                for _ in 0..n {
                    admitted += u64::from(proxy.request().await);
                }
            }
            self.admitted.push(admitted);
        }
        let live = self
            .proxies
            .iter_mut()
            .zip(&self.demand)
            .filter(|(_, d)| d.is_some())
            .map(|(p, _)| p.report());
        join_all(live).await;
    }

    /// A proxy whose stream breaks now: it keeps its assignment until the TTL.
    fn break_stream(&mut self, i: usize) {
        let units = self.proxies[i].units();
        *self.broken.last_mut().unwrap() += units;
        self.proxies[i].break_stream();
    }

    /// A proxy that goes away now.
    fn kill(&mut self, i: usize) {
        self.break_stream(i);
        self.demand[i] = None;
    }

    /// Checks `L + U(a) + E` in every window; returns the most admitted in one window.
    fn check_bound(&self) -> u64 {
        let w = WINDOW_INTERVALS * TICKS as usize;
        let mut most = 0;
        for start in 0..self.admitted.len() {
            let end = (start + w).min(self.admitted.len());
            let admitted: u64 = self.admitted[start..end].iter().sum();
            let broken: u64 = self.broken[start..end].iter().sum();
            let bound = LIMIT + self.in_force[start] + broken;
            assert!(
                admitted <= bound,
                "window from tick {start}: admitted {admitted} > bound {bound}"
            );
            most = most.max(admitted);
        }
        most
    }
}

/// 4 heavy proxies asking 10 × what each of 16 light ones asks.
fn skewed() -> Vec<u64> {
    let mut demand = vec![50; 4];
    demand.extend([5; 16]);
    demand
}

fn units(applied: Option<&Applied>) -> u64 {
    match applied {
        Some(Applied::Bucket { per_fill, .. }) => u64::from(*per_fill),
        _ => 0,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_proxies_share_by_demand_within_the_bound() {
    let redis = RedisServer::start();
    let clock = Arc::new(ManualClock::at_2026());
    let one = server(&redis, &clock, &config()).await;
    let mut fleet = Fleet::new(clock.clone(), &[&one], skewed());

    for _ in 0..15 {
        fleet.interval().await;
    }
    // Max-min: the light proxies get what they ask, the heavy ones split the rest.
    let fair = max_min(POOL, &skewed());
    assert_eq!(fair[..4], [25; 4]);
    for (i, proxy) in fleet.proxies.iter().enumerate() {
        assert_eq!(units(proxy.assignments.last()), fair[i], "{}", proxy.name);
    }

    // A light proxy's demand rises: its next report (one interval) brings its new share.
    fleet.demand[10] = Some(50);
    fleet.interval().await;
    let mut risen = skewed();
    risen[10] = 50;
    let fair = max_min(POOL, &risen);
    assert_eq!(units(fleet.proxies[10].assignments.last()), fair[10]);
    assert!(fair[10] > 5);

    // A heavy proxy goes away: within its TTL its share moves to the other heavy ones.
    for _ in 0..4 {
        fleet.interval().await;
    }
    fleet.kill(0);
    for _ in 0..3 {
        fleet.interval().await;
    }
    let mut left = risen.clone();
    left[0] = 0;
    let fair = max_min(POOL, &left);
    for (proxy, fair) in fleet.proxies.iter().zip(&fair).take(4).skip(1) {
        assert_eq!(units(proxy.assignments.last()), *fair, "{}", proxy.name);
    }
    for _ in 0..10 {
        fleet.interval().await;
    }
    let most = fleet.check_bound();
    println!("most admitted in a window: {most} (limit {LIMIT}, pool {POOL} per interval)");
    assert_eq!(one.state.rlqs.demands.buckets(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_and_restarting_a_server_mid_run_keeps_the_bound() {
    let redis = RedisServer::start();
    let clock = Arc::new(ManualClock::at_2026());
    let a = server(&redis, &clock, &config()).await;
    let b = server(&redis, &clock, &config()).await;
    let mut fleet = Fleet::new(clock.clone(), &[&a, &b], skewed());
    for _ in 0..12 {
        fleet.interval().await;
    }
    // Server b dies: its connections drop. Its proxies keep their assignments until the TTL
    // and reconnect to server a when they next report.
    b.serving.abort();
    let _ = b.serving.await;
    for i in (1..fleet.proxies.len()).step_by(2) {
        fleet.break_stream(i);
        fleet.proxies[i].server = a.url.clone();
    }
    for _ in 0..12 {
        fleet.interval().await;
    }
    // Every proxy is served again, by the server left.
    for proxy in &fleet.proxies {
        assert!(units(proxy.assignments.last()) > 0, "{}", proxy.name);
    }
    assert_eq!(a.state.rlqs.streams(), fleet.proxies.len());
    // Server b comes back (a new process: it knows no demand); half the fleet moves to it.
    // Each server splits the interval's allowance among its own proxies and the store grants
    // the draws in the order they come, so which proxies the limit leaves short varies; what is
    // checked is that every proxy is answered by its new server and the bound.
    let b = server(&redis, &clock, &config()).await;
    for i in (1..fleet.proxies.len()).step_by(2) {
        fleet.break_stream(i);
        fleet.proxies[i].server = b.url.clone();
    }
    let answered: Vec<usize> = fleet.proxies.iter().map(|p| p.assignments.len()).collect();
    for _ in 0..12 {
        fleet.interval().await;
    }
    for (proxy, before) in fleet.proxies.iter().zip(answered) {
        assert_eq!(proxy.assignments.len(), before + 12, "{}", proxy.name);
    }
    assert_eq!(b.state.rlqs.streams(), fleet.proxies.len() / 2);
    let most = fleet.check_bound();
    println!("most admitted in a window: {most} (limit {LIMIT})");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_abandons_uncovered_buckets_and_reassigns_the_others_at_once() {
    let redis = RedisServer::start();
    let clock = Arc::new(ManualClock::at_2026());
    let dir = std::env::temp_dir().join(format!("sluice-rlqs-reload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("sluice.yaml");
    std::fs::write(&path, config()).unwrap();
    let config_read = Config::load(&path).unwrap();
    let options = RedisOptions {
        prefix: "rlqs".into(),
        clock: Some(clock.clone()),
        ..RedisOptions::default()
    };
    let store = RedisStore::connect(&redis.url(), options).await.unwrap();
    let opened = OpenedStore {
        channel: Some(Arc::new(store.channel())),
        store: Arc::new(store),
        memory: None,
    };
    let state = AppState::with_clock(
        config_read,
        Some(path.clone()),
        &opened,
        None,
        clock.clone(),
    )
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(serve_grpc(listener, state.clone(), std::future::pending()));

    let mut kept = Proxy::new("kept", clock.clone(), url.clone(), "tenant", "t1");
    let mut dropped = Proxy::new("dropped", clock.clone(), url, "team", "t2");
    for proxy in [&mut kept, &mut dropped] {
        proxy.request().await;
        assert!(!proxy.unassigned(), "{}", proxy.name);
    }
    // Buckets by team are no longer covered; by tenant, at half the rate.
    let changed = config().replace("2000/10s", "1000/10s").replace(
        "    - { descriptor: [team], rule: shared, attributes: { team: tenant } }\n",
        "",
    );
    std::fs::write(&path, changed).unwrap();
    let reloaded = sluice_server::reload::reload(&state, true);
    assert!(
        matches!(reloaded, sluice_server::reload::Reloaded::Applied),
        "{reloaded:?}"
    );
    // Both hear at once, without reporting.
    kept.pushed().await;
    dropped.pushed().await;
    assert!(!kept.unassigned());
    assert_eq!(kept.assignments.len(), 2);
    assert!(dropped.unassigned(), "the uncovered bucket is abandoned");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_reports_are_refused_with_a_status_and_change_nothing() {
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
    use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
        BucketId, RateLimitQuotaUsageReports,
    };
    use futures::StreamExt;

    let redis = RedisServer::start();
    let clock = Arc::new(ManualClock::at_2026());
    let one = server(&redis, &clock, &config()).await;
    let usage = |bucket: &[(&str, &str)]| BucketQuotaUsage {
        bucket_id: Some(BucketId {
            bucket: bucket
                .iter()
                .map(|&(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        }),
        num_requests_allowed: 1,
        ..BucketQuotaUsage::default()
    };
    let good = usage(&[("tenant", "t1")]);
    let long = "x".repeat(2048);
    let many: Vec<BucketQuotaUsage> = (0..5000)
        .map(|i| usage(&[("tenant", &format!("t{i}"))]))
        .collect();
    let cases = [
        (
            "no domain",
            RateLimitQuotaUsageReports {
                domain: String::new(),
                bucket_quota_usages: vec![good.clone()],
            },
            tonic::Code::InvalidArgument,
        ),
        (
            "an empty bucket id",
            RateLimitQuotaUsageReports {
                domain: "edge".into(),
                bucket_quota_usages: vec![good.clone(), usage(&[])],
            },
            tonic::Code::InvalidArgument,
        ),
        (
            "a bucket id too long",
            RateLimitQuotaUsageReports {
                domain: "edge".into(),
                bucket_quota_usages: vec![good.clone(), usage(&[("tenant", &long)])],
            },
            tonic::Code::InvalidArgument,
        ),
        (
            "too many buckets",
            RateLimitQuotaUsageReports {
                domain: "edge".into(),
                bucket_quota_usages: many,
            },
            tonic::Code::ResourceExhausted,
        ),
    ];
    for (what, message, code) in cases {
        let mut client = RateLimitQuotaServiceClient::connect(one.url.clone())
            .await
            .unwrap();
        let mut answers = client
            .stream_rate_limit_quotas(
                futures::stream::iter([message]).chain(futures::stream::pending()),
            )
            .await
            .unwrap()
            .into_inner();
        let status = answers.message().await.expect_err(what);
        assert_eq!(status.code(), code, "{what}: {status:?}");
        assert_eq!(
            one.state.rlqs.demands.buckets(),
            0,
            "{what} changed nothing"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_that_hangs_gets_no_units_assigned_and_the_fleet_falls_to_its_expired_behaviour() {
    let redis = RedisServer::start();
    let clock = Arc::new(ManualClock::at_2026());
    let one = server(&redis, &clock, &config()).await;
    let mut fleet = Fleet::new(clock.clone(), &[&one], skewed());
    for _ in 0..12 {
        fleet.interval().await;
    }
    let assigned: Vec<usize> = fleet.proxies.iter().map(|p| p.assignments.len()).collect();
    // The store stops answering: reports are acknowledged, but nothing new is assigned.
    redis.pause();
    for _ in 0..4 {
        fleet.interval().await;
    }
    for (proxy, before) in fleet.proxies.iter().zip(&assigned) {
        assert_eq!(proxy.assignments.len(), *before, "{}", proxy.name);
        assert_eq!(
            proxy.in_force(),
            Applied::Deny,
            "{} is on its expired behaviour",
            proxy.name
        );
    }
    let ticks = fleet.admitted.len();
    // Past the TTL (two intervals) the fleet admits nothing: its expired behaviour is DENY_ALL.
    assert_eq!(fleet.admitted[ticks - 20..].iter().sum::<u64>(), 0);
    redis.resume();
    for _ in 0..12 {
        fleet.interval().await;
    }
    for proxy in &fleet.proxies {
        assert!(
            units(proxy.assignments.last()) > 0,
            "{} is served again",
            proxy.name
        );
    }
    let most = fleet.check_bound();
    println!("most admitted in a window: {most} (limit {LIMIT})");
}

/// The connection's idle and head timeouts apply to requests waiting for their answer; a quota
/// stream is answered at once and then lives on, quiet between reports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_outlives_the_connection_timeouts() {
    let redis = RedisServer::start();
    let clock = Arc::new(ManualClock::at_2026());
    let text = format!(
        "{}server: {{ header_read_timeout: 100ms, keep_alive_timeout: 100ms }}\n",
        config()
    );
    let one = server(&redis, &clock, &text).await;
    let mut proxy = Proxy::new("quiet", clock.clone(), one.url.clone(), "tenant", "t1");
    proxy.request().await;
    // Several times both timeouts, in real time: the connection's watchdog runs on it.
    tokio::time::sleep(Duration::from_millis(500)).await;
    clock.advance(INTERVAL);
    proxy.report().await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    proxy.report().await;
    assert_eq!(
        proxy.assignments.len(),
        3,
        "every report answered on the one stream"
    );
    assert_eq!(proxy.opened, 1, "the first stream is still the one open");
    assert_eq!(one.state.rlqs.streams(), 1);
}
