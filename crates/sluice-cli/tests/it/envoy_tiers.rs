//! Tiers at the edge: an envoyproxy/ratelimit-style config (`key: plan, value: pro` with its own
//! limit, `unlimited`, a refused value) written as one Sluice rule with overrides, its
//! descriptors mapped so that their values are the attributes the overrides read, decided by the
//! real binary over Envoy RLS; and an IPv6 `remote_address` counted by its /64.

use crate::common;
use crate::envoy::{ask, descriptor, grpc_client, request};

use common::Server;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;

/// The envoyproxy/ratelimit config this stands for:
/// ```yaml
/// domain: edge
/// descriptors:
///   - key: tenant
///     rate_limit: { unit: minute, requests_per_unit: 2 }
///     descriptors:
///       - { key: plan, value: pro, rate_limit: { unit: minute, requests_per_unit: 4 } }
///       - { key: plan, value: internal, rate_limit: { unlimited: true } }
///       - { key: plan, value: banned, rate_limit: { unit: minute, requests_per_unit: 0 } }
///   - key: remote_address
///     rate_limit: { unit: minute, requests_per_unit: 1 }
/// ```
const CONFIG: &str = "\
grpc_listen: 127.0.0.1:0
rules:
  plans:
    limits:
      - by: [tenant]
        rate: 2/1m
        algorithm: sliding_log
        overrides:
          - { when: { plan: banned }, deny: banned plan }
          - { when: { plan: internal }, unlimited: true }
          - { when: { plan: pro }, rate: 4/1m }
  per_ip:
    limits:
      - { by: [ip], rate: 1/1m, algorithm: sliding_log }
envoy:
  edge:
    - descriptor: [tenant, plan]
      rule: plans
    - descriptor: [tenant]
      rule: plans
    - descriptor: [remote_address]
      rule: per_ip
      attributes: { remote_address: ip }
";

#[tokio::test]
async fn descriptor_values_choose_the_override() {
    let server = Server::start(CONFIG);
    let mut client = grpc_client(&server).await;
    let plan = |tenant: &str, plan: &str| {
        request(
            "edge",
            vec![descriptor(&[("tenant", tenant), ("plan", plan)])],
        )
    };
    for _ in 0..4 {
        let answer = ask(&mut client, plan("t1", "pro")).await;
        assert_eq!(answer.overall_code(), Code::Ok);
        let limit = answer.statuses[0].current_limit.as_ref().expect("a limit");
        assert_eq!((limit.requests_per_unit, limit.unit()), (4, Unit::Minute));
    }
    assert_eq!(
        ask(&mut client, plan("t1", "pro")).await.overall_code(),
        Code::OverLimit
    );
    // No plan entry: the limit's own numbers.
    let free = || request("edge", vec![descriptor(&[("tenant", "t2")])]);
    for code in [Code::Ok, Code::Ok, Code::OverLimit] {
        let answer = ask(&mut client, free()).await;
        assert_eq!(answer.overall_code(), code);
        let limit = answer.statuses[0].current_limit.as_ref().expect("a limit");
        assert_eq!(limit.requests_per_unit, 2);
    }
    for _ in 0..5 {
        let answer = ask(&mut client, plan("t3", "internal")).await;
        assert_eq!(answer.overall_code(), Code::Ok);
        assert_eq!(answer.statuses[0].current_limit, None, "unlimited");
    }
    let banned = ask(&mut client, plan("t4", "banned")).await;
    assert_eq!(banned.overall_code(), Code::OverLimit);
}

#[tokio::test]
async fn an_ipv6_remote_address_is_counted_by_its_64() {
    let server = Server::start(CONFIG);
    let mut client = grpc_client(&server).await;
    let from = |ip: &str| request("edge", vec![descriptor(&[("remote_address", ip)])]);
    assert_eq!(
        ask(&mut client, from("2001:db8:7:8::1"))
            .await
            .overall_code(),
        Code::Ok
    );
    let same_64 = ask(&mut client, from("2001:db8:7:8:abcd::2")).await;
    assert_eq!(same_64.overall_code(), Code::OverLimit);
    assert_eq!(
        ask(&mut client, from("2001:db8:7:9::1"))
            .await
            .overall_code(),
        Code::Ok
    );
}
