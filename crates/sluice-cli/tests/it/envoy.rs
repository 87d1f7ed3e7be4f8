//! Envoy's rate-limit service (RLS v3) on the real binary, driven by a gRPC client generated from
//! the same protos Envoy uses: allowed then over the limit, per-descriptor statuses decided
//! all-or-nothing, `hits_addend`, repeated descriptors adding up their hits, unknown domains and descriptors, headers, a store that is down
//! (per the rule's fail policy), exactness under concurrent calls, and gRPC health.

use crate::common;

use common::{Server, WITHIN, eventually};
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_client::RateLimitServiceClient;
use envoy_types::pb::envoy::service::ratelimit::v3::{RateLimitRequest, RateLimitResponse};
use envoy_types::pb::google::protobuf::UInt64Value;
use sluice_test_support::RedisServer;
use tonic::transport::Channel;

const CONFIG: &str = "\
grpc_listen: 127.0.0.1:0
rules:
  api:
    limits:
      - { by: [ip, path], rate: 3/1m, algorithm: sliding_log }
  per_ip:
    limits:
      - { by: [ip], rate: 10/1m, algorithm: sliding_log }
  per_path:
    limits:
      - { by: [path], rate: 1/1m, algorithm: sliding_log }
  concurrent:
    limits:
      - { by: [user], rate: 50/1h, algorithm: gcra }
  open_rule:
    fail: open
    limits:
      - { by: [user], rate: 5/1m }
  closed_rule:
    fail: closed
    limits:
      - { by: [user], rate: 5/1m }
envoy:
  edge:
    - descriptor: [remote_address, path]
      rule: api
      attributes: { remote_address: ip }
    - descriptor: [generic_key=ip, remote_address]
      rule: per_ip
      attributes: { remote_address: ip }
    - descriptor: [generic_key=path, path]
      rule: per_path
    - descriptor: [user]
      rule: concurrent
  store:
    - descriptor: [generic_key=open, user]
      rule: open_rule
    - descriptor: [generic_key=closed, user]
      rule: closed_rule
";

/// The gRPC address from the server's log line.
pub(crate) async fn grpc_client(server: &Server) -> RateLimitServiceClient<Channel> {
    let address = eventually(WITHIN, "the gRPC listener", || async {
        server.log().iter().find_map(|line| {
            line.split("Envoy rate-limit service (gRPC) on ")
                .nth(1)
                .map(|rest| {
                    rest.split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_string()
                })
        })
    })
    .await;
    RateLimitServiceClient::connect(format!("http://{address}"))
        .await
        .expect("the gRPC service accepts connections")
}

pub(crate) fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|&(key, value)| Entry {
                key: key.into(),
                value: value.into(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}

pub(crate) fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.into(),
        descriptors,
        hits_addend: 0,
    }
}

pub(crate) async fn ask(
    client: &mut RateLimitServiceClient<Channel>,
    r: RateLimitRequest,
) -> RateLimitResponse {
    client
        .should_rate_limit(r)
        .await
        .expect("a rate-limit answer")
        .into_inner()
}

fn header<'a>(response: &'a RateLimitResponse, name: &str) -> Option<&'a str> {
    response
        .response_headers_to_add
        .iter()
        .find(|h| h.key.eq_ignore_ascii_case(name))
        .map(|h| h.value.as_str())
}

#[tokio::test]
async fn allowed_until_the_limit_then_over_limit_with_numbers_and_headers() {
    let server = Server::start(CONFIG);
    let mut client = grpc_client(&server).await;
    let api = || {
        request(
            "edge",
            vec![descriptor(&[
                ("remote_address", "203.0.113.9"),
                ("path", "/a"),
            ])],
        )
    };
    for remaining in [2, 1, 0] {
        let answer = ask(&mut client, api()).await;
        assert_eq!(answer.overall_code(), Code::Ok);
        let status = &answer.statuses[0];
        assert_eq!(status.code(), Code::Ok);
        assert_eq!(status.limit_remaining, remaining);
        let limit = status
            .current_limit
            .as_ref()
            .expect("the limit is reported");
        assert_eq!((limit.requests_per_unit, limit.unit()), (3, Unit::Minute));
        assert!(limit.name.starts_with("api."), "{}", limit.name);
        let reset = status.duration_until_reset.expect("a reset time");
        assert!(reset.seconds > 0 && reset.seconds <= 60, "{reset:?}");
        assert_eq!(
            header(&answer, "RateLimit-Policy"),
            Some("\"api\";q=3;w=60")
        );
        assert_eq!(
            header(&answer, "X-RateLimit-Remaining"),
            Some(&*remaining.to_string())
        );
        assert_eq!(header(&answer, "Retry-After"), None);
    }
    let over = ask(&mut client, api()).await;
    assert_eq!(over.overall_code(), Code::OverLimit);
    assert_eq!(over.statuses[0].code(), Code::OverLimit);
    assert_eq!(over.statuses[0].limit_remaining, 0);
    let retry: u64 = header(&over, "Retry-After")
        .expect("Retry-After")
        .parse()
        .unwrap();
    assert!((1..=60).contains(&retry));
    // Another identity is untouched.
    let other = request(
        "edge",
        vec![descriptor(&[
            ("remote_address", "203.0.113.10"),
            ("path", "/a"),
        ])],
    );
    assert_eq!(ask(&mut client, other).await.overall_code(), Code::Ok);
}

#[tokio::test]
async fn descriptors_are_decided_all_or_nothing_with_one_status_each() {
    let server = Server::start(CONFIG);
    let mut client = grpc_client(&server).await;
    let both = || {
        request(
            "edge",
            vec![
                descriptor(&[("generic_key", "ip"), ("remote_address", "198.51.100.1")]),
                descriptor(&[("generic_key", "path"), ("path", "/hot")]),
                descriptor(&[("unmapped", "x")]),
            ],
        )
    };
    let first = ask(&mut client, both()).await;
    assert_eq!(first.overall_code(), Code::Ok);
    assert_eq!(first.statuses.len(), 3);
    assert_eq!(first.statuses[0].limit_remaining, 9);
    assert_eq!(first.statuses[1].limit_remaining, 0);
    // A descriptor that matches no rule is OK and reports no limit.
    assert_eq!(first.statuses[2].code(), Code::Ok);
    assert!(first.statuses[2].current_limit.is_none());

    let second = ask(&mut client, both()).await;
    assert_eq!(second.overall_code(), Code::OverLimit);
    let codes: Vec<Code> = second.statuses.iter().map(|s| s.code()).collect();
    assert_eq!(codes, [Code::Ok, Code::OverLimit, Code::Ok]);
    // The denied request consumed nothing: the per-ip descriptor still has 9 left.
    let mut look = descriptor(&[("generic_key", "ip"), ("remote_address", "198.51.100.1")]);
    look.hits_addend = Some(UInt64Value { value: 0 });
    let peeked = ask(&mut client, request("edge", vec![look])).await;
    assert_eq!(peeked.statuses[0].limit_remaining, 9);
}

#[tokio::test]
async fn repeated_descriptors_add_up_their_hits() {
    let server = Server::start(CONFIG);
    let mut client = grpc_client(&server).await;
    let per_ip = || descriptor(&[("generic_key", "ip"), ("remote_address", "192.0.2.8")]);
    let mut nine = request("edge", vec![per_ip()]);
    nine.hits_addend = 9;
    assert_eq!(ask(&mut client, nine).await.overall_code(), Code::Ok);
    let twice = ask(&mut client, request("edge", vec![per_ip(), per_ip()])).await;
    assert_eq!(twice.overall_code(), Code::OverLimit, "2 hits with 1 left");
    let once = ask(&mut client, request("edge", vec![per_ip()])).await;
    assert_eq!(once.overall_code(), Code::Ok, "the denial took nothing");
    assert_eq!(once.statuses[0].limit_remaining, 0);
}

#[tokio::test]
async fn hits_addend_is_the_cost_and_zero_only_looks() {
    let server = Server::start(CONFIG);
    let mut client = grpc_client(&server).await;
    let per_ip = || descriptor(&[("generic_key", "ip"), ("remote_address", "192.0.2.7")]);
    // Request-level hits_addend.
    let mut three = request("edge", vec![per_ip()]);
    three.hits_addend = 3;
    assert_eq!(ask(&mut client, three).await.statuses[0].limit_remaining, 7);
    // The descriptor's own hits_addend wins over the request's.
    let mut two = per_ip();
    two.hits_addend = Some(UInt64Value { value: 2 });
    let mut r = request("edge", vec![two]);
    r.hits_addend = 5;
    assert_eq!(ask(&mut client, r).await.statuses[0].limit_remaining, 5);
    // 0 looks.
    let mut zero = per_ip();
    zero.hits_addend = Some(UInt64Value { value: 0 });
    for _ in 0..3 {
        let answer = ask(&mut client, request("edge", vec![zero.clone()])).await;
        assert_eq!(answer.overall_code(), Code::Ok);
        assert_eq!(answer.statuses[0].limit_remaining, 5);
    }
    // More than is left is over the limit and takes nothing.
    let mut six = per_ip();
    six.hits_addend = Some(UInt64Value { value: 6 });
    assert_eq!(
        ask(&mut client, request("edge", vec![six]))
            .await
            .overall_code(),
        Code::OverLimit
    );
    let answer = ask(&mut client, request("edge", vec![zero])).await;
    assert_eq!(answer.statuses[0].limit_remaining, 5);
}

#[tokio::test]
async fn unknown_domains_are_ok_and_bad_requests_are_errors() {
    let server = Server::start(CONFIG);
    let mut client = grpc_client(&server).await;
    let unknown = request(
        "nowhere",
        vec![descriptor(&[("remote_address", "1.2.3.4"), ("path", "/")])],
    );
    let answer = ask(&mut client, unknown).await;
    assert_eq!(answer.overall_code(), Code::Ok);
    assert_eq!(answer.statuses.len(), 1);
    assert!(answer.response_headers_to_add.is_empty());

    let empty_domain = request("", vec![descriptor(&[("user", "u")])]);
    let error = client.should_rate_limit(empty_domain).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    let no_descriptors = request("edge", vec![]);
    let error = client.should_rate_limit(no_descriptors).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    // An empty value counts as absent: the rule cannot identify the caller.
    let empty_value = request("edge", vec![descriptor(&[("user", "")])]);
    let error = client.should_rate_limit(empty_value).await.unwrap_err();
    assert_eq!(error.code(), tonic::Code::InvalidArgument);
    assert!(error.message().contains("user"), "{}", error.message());
}

#[tokio::test]
async fn a_store_that_is_down_answers_by_each_rules_fail_policy() {
    let mut redis = RedisServer::start();
    let server = Server::start_on(CONFIG, &redis.url());
    let mut client = grpc_client(&server).await;
    let open = || {
        request(
            "store",
            vec![descriptor(&[("generic_key", "open"), ("user", "u1")])],
        )
    };
    let closed = || {
        request(
            "store",
            vec![descriptor(&[("generic_key", "closed"), ("user", "u1")])],
        )
    };
    assert_eq!(ask(&mut client, open()).await.overall_code(), Code::Ok);
    assert_eq!(ask(&mut client, closed()).await.overall_code(), Code::Ok);
    redis.stop();
    assert_eq!(ask(&mut client, open()).await.overall_code(), Code::Ok);
    assert_eq!(
        ask(&mut client, closed()).await.overall_code(),
        Code::OverLimit
    );
    // Both at once: the closed rule denies the request.
    let both = request(
        "store",
        vec![
            descriptor(&[("generic_key", "open"), ("user", "u1")]),
            descriptor(&[("generic_key", "closed"), ("user", "u1")]),
        ],
    );
    let answer = ask(&mut client, both).await;
    assert_eq!(answer.overall_code(), Code::OverLimit);
    assert_eq!(answer.statuses[0].code(), Code::Ok);
    assert_eq!(answer.statuses[1].code(), Code::OverLimit);
}

#[tokio::test]
async fn concurrent_calls_never_admit_more_than_the_limit() {
    let server = Server::start(CONFIG);
    let client = grpc_client(&server).await;
    let calls = (0..200).map(|_| {
        let mut client = client.clone();
        tokio::spawn(async move {
            let r = request("edge", vec![descriptor(&[("user", "hot")])]);
            ask(&mut client, r).await.overall_code() == Code::Ok
        })
    });
    let mut admitted = 0;
    for call in futures_join(calls).await {
        admitted += usize::from(call);
    }
    assert_eq!(admitted, 50);
}

async fn futures_join<T: Send + 'static>(
    handles: impl Iterator<Item = tokio::task::JoinHandle<T>>,
) -> Vec<T> {
    let handles: Vec<_> = handles.collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("the call task finishes"));
    }
    out
}

#[tokio::test]
async fn the_standard_grpc_health_service_answers_on_the_same_port() {
    use tonic_health::pb::health_check_response::ServingStatus;
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};

    let server = Server::start(CONFIG);
    let client = grpc_client(&server).await;
    drop(client);
    let address = server
        .log()
        .iter()
        .find_map(|l| {
            l.split("Envoy rate-limit service (gRPC) on ")
                .nth(1)
                .map(str::to_string)
        })
        .unwrap();
    let address = address.split_whitespace().next().unwrap().to_string();
    let channel = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut health = HealthClient::new(channel);
    for service in ["", "envoy.service.ratelimit.v3.RateLimitService"] {
        let answer = health
            .check(HealthCheckRequest {
                service: service.into(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(
            answer.status(),
            ServingStatus::Serving,
            "service `{service}`"
        );
    }
}

#[tokio::test]
async fn without_grpc_listen_there_is_no_grpc_listener() {
    let server = Server::start(&CONFIG.replace("grpc_listen: 127.0.0.1:0\n", ""));
    assert_eq!(server.get("/healthz").await.status, 200);
    assert!(
        !server.log().iter().any(|l| l.contains("gRPC")),
        "{:?}",
        server.log()
    );
}

#[test]
fn validate_names_the_field_of_a_bad_mapping() {
    let dir = common::TempDir::new();
    let cases = [
        (
            "rules:\n  a:\n    limits:\n      - { by: [ip], rate: 1/1s }\nenvoy:\n  edge:\n    - descriptor: [remote_address]\n      rule: b\n",
            "envoy.edge[0].rule",
        ),
        (
            "rules:\n  a:\n    limits:\n      - { by: [ip], rate: 1/1s }\nenvoy:\n  edge:\n    - descriptor: [remote_address]\n      rule: a\n",
            "envoy.edge[0].descriptor",
        ),
        (
            "rules:\n  a:\n    limits:\n      - { by: [ip], rate: 1/1s }\nenvoy:\n  edge:\n    - descriptor: [generic_key=a, remote_address]\n      rule: a\n      attributes: { generic_key: ip }\n",
            "envoy.edge[0].attributes.generic_key",
        ),
        (
            "rules:\n  a:\n    limits:\n      - { by: [ip], rate: 1/1s }\nforward_auth:\n  denied_status: 500\n",
            "forward_auth.denied_status",
        ),
        (
            "rules:\n  a:\n    limits:\n      - { by: [ip], rate: 1/1s }\nforward_auth:\n  client_ip: { trusted: [not-a-network] }\n",
            "client_ip",
        ),
    ];
    for (text, field) in cases {
        let path = dir.write("bad.yaml", text);
        let out = common::sluice()
            .arg("validate")
            .arg(&path)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string()
            + &String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains(field), "`{field}` not named in: {stderr}");
    }
    let good = dir.write(
        "good.yaml",
        "rules:\n  a:\n    limits:\n      - { by: [ip], rate: 1/1s }\nenvoy:\n  edge:\n    - descriptor: [generic_key=a, remote_address]\n      rule: a\n      attributes: { remote_address: ip }\n",
    );
    let out = common::sluice()
        .arg("validate")
        .arg(&good)
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
