//! A load of Envoy-like proxies on Sluice's Rate Limit Quota Service, for `scripts/rlqs-load`:
//! `STREAMS` streams, each reporting `BUCKETS` buckets of its own every `INTERVAL` seconds (spread
//! evenly over the interval, as a fleet's proxies are), for `SECONDS` seconds.
//!
//! ```text
//! cargo run --release -p sluice-ratelimit-server --example rlqs_load -- \
//!     127.0.0.1:8081 1000 100 5 60
//! ```
//!
//! Bucket ids are `{name: api, tenant: s<stream>b<bucket>}` of domain `edge`, as
//! `examples/envoy/sluice.rlqs.yaml` maps them. Prints one line of JSON: reports sent, answers
//! received, buckets answered, and the answers' latency (p50, p99, max) from when each report was
//! sent. A report whose answer does not come within the interval is counted late.

use std::time::{Duration, Instant};

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_client::RateLimitQuotaServiceClient;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_usage_reports::BucketQuotaUsage;
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{BucketId, RateLimitQuotaUsageReports};
use envoy_types::pb::google::protobuf::Duration as ProtoDuration;
use tokio::sync::mpsc;
use tonic::transport::Channel;

/// What one stream saw.
#[derive(Default)]
struct Seen {
    reports: u64,
    answers: u64,
    buckets: u64,
    late: u64,
    latencies: Vec<Duration>,
}

fn report(
    stream: usize,
    buckets: usize,
    interval: Duration,
    first: bool,
) -> RateLimitQuotaUsageReports {
    RateLimitQuotaUsageReports {
        domain: if first { "edge".into() } else { String::new() },
        bucket_quota_usages: (0..buckets)
            .map(|b| BucketQuotaUsage {
                bucket_id: Some(BucketId {
                    bucket: [
                        ("name".to_string(), "api".to_string()),
                        ("tenant".to_string(), format!("s{stream}b{b}")),
                    ]
                    .into(),
                }),
                time_elapsed: Some(ProtoDuration {
                    seconds: if first { 0 } else { interval.as_secs() as i64 },
                    nanos: 0,
                }),
                num_requests_allowed: if first { 0 } else { 20 + (b as u64 % 7) },
                num_requests_denied: u64::from(first),
            })
            .collect(),
    }
}

async fn run_stream(
    channel: Channel,
    stream: usize,
    buckets: usize,
    interval: Duration,
    offset: Duration,
    until: Instant,
) -> Seen {
    let mut seen = Seen::default();
    tokio::time::sleep(offset).await;
    let mut client = RateLimitQuotaServiceClient::new(channel);
    let (tx, rx) = mpsc::channel(4);
    let requests = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|report| (report, rx))
    });
    let Ok(response) = client.stream_rate_limit_quotas(requests).await else {
        return seen;
    };
    let mut answers = response.into_inner();
    let mut ticks = tokio::time::interval(interval);
    let mut first = true;
    while Instant::now() < until {
        ticks.tick().await;
        let sent = Instant::now();
        if tx
            .send(report(stream, buckets, interval, first))
            .await
            .is_err()
        {
            break;
        }
        first = false;
        seen.reports += 1;
        match tokio::time::timeout(interval, answers.message()).await {
            Ok(Ok(Some(answer))) => {
                seen.answers += 1;
                seen.buckets += answer.bucket_action.len() as u64;
                seen.latencies.push(sent.elapsed());
            }
            Ok(_) => break,
            Err(_) => seen.late += 1,
        }
    }
    seen
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [address, streams, buckets, interval, seconds] = args.as_slice() else {
        eprintln!("usage: rlqs_load HOST:PORT STREAMS BUCKETS INTERVAL_S SECONDS");
        std::process::exit(2);
    };
    let number = |s: &str| -> u64 { s.parse().expect("a number") };
    let (streams, buckets) = (number(streams) as usize, number(buckets) as usize);
    let interval = Duration::from_secs(number(interval));
    let until = Instant::now() + Duration::from_secs(number(seconds));
    // Streams share a few connections, as a fleet's proxies each have their own but a
    // generator on one core cannot open a thousand cheaply; HTTP/2 multiplexes them alike.
    let channels: Vec<Channel> = futures::future::join_all((0..8).map(|_| async {
        Channel::from_shared(format!("http://{address}"))
            .expect("an address")
            .connect()
            .await
            .expect("the server accepts")
    }))
    .await;
    let tasks: Vec<_> = (0..streams)
        .map(|s| {
            let offset = interval * s as u32 / streams as u32;
            tokio::spawn(run_stream(
                channels[s % channels.len()].clone(),
                s,
                buckets,
                interval,
                offset,
                until,
            ))
        })
        .collect();
    let mut all = Seen::default();
    for task in tasks {
        let seen = task.await.expect("a stream task");
        all.reports += seen.reports;
        all.answers += seen.answers;
        all.buckets += seen.buckets;
        all.late += seen.late;
        all.latencies.extend(seen.latencies);
    }
    all.latencies.sort();
    let at = |p: f64| {
        all.latencies
            .get(
                ((all.latencies.len() as f64 * p) as usize)
                    .min(all.latencies.len().saturating_sub(1)),
            )
            .map_or(0.0, |d| d.as_secs_f64() * 1e3)
    };
    println!(
        "{{\"streams\": {streams}, \"buckets_per_stream\": {buckets}, \"reports\": {}, \"answers\": {}, \"buckets_answered\": {}, \"late\": {}, \"p50_ms\": {:.2}, \"p99_ms\": {:.2}, \"max_ms\": {:.2}}}",
        all.reports,
        all.answers,
        all.buckets,
        all.late,
        at(0.5),
        at(0.99),
        all.latencies.last().map_or(0.0, |d| d.as_secs_f64() * 1e3),
    );
}
