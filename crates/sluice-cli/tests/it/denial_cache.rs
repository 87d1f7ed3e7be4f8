//! `sluice serve` on a real Redis with the denial cache: denials answered without Redis and
//! counted in `/metrics`, an unblock on one service reaching the other's cache, the
//! `denial_cache` section of the config file, and a change to it needing a restart.
//!
//! Waits poll with deadlines, never a fixed sleep.

use crate::common;

use common::{ADMIN_TOKEN, Server, WITHIN, eventually, version_of, wait_for_version};
use reqwest::Method;
use serde_json::json;
use sluice_test_support::RedisServer;

const CONFIG: &str = "\
admin_token_env: SLUICE_ADMIN_TOKEN
denial_cache:
  max_entries: 1000
  max_stale: 2s
rules:
  login:
    limits:
      - { name: per_ip, by: [ip], rate: 1/1m, algorithm: gcra }
";

/// Waits until `servers` servers' caches are subscribed: a fresh subscription forgets what it
/// held.
async fn subscribed(redis: &RedisServer, servers: usize) {
    let servers = servers.to_string();
    eventually(WITHIN, "subscriptions", || async {
        let out = redis.cli(&["PUBSUB", "NUMSUB", "sluice:denial-cache"]);
        (out.lines().nth(1) == Some(servers.as_str())).then_some(())
    })
    .await;
}

#[tokio::test]
async fn denials_are_answered_without_redis_until_an_admin_lifts_them() {
    let redis = RedisServer::start();
    let a = Server::start_on(CONFIG, &redis.url());
    let b = Server::start_on(CONFIG, &redis.url());
    subscribed(&redis, 2).await;
    let ip = json!({ "ip": "203.0.113.9" });
    assert_eq!(a.check("login", ip.clone()).await.status, 200);
    let denied = a.check("login", ip.clone()).await;
    assert_eq!(denied.status, 429);
    let retry = denied.header("retry-after").map(str::to_string);
    let asked = redis.decision_calls();
    for _ in 0..10 {
        let cached = a.check("login", ip.clone()).await;
        assert_eq!(cached.status, 429);
        assert_eq!(cached.header("retry-after").map(str::to_string), retry);
    }
    assert_eq!(redis.decision_calls(), asked, "Redis was not asked");
    assert_eq!(
        a.metric("sluice_denial_cache_hits_total{rule=\"login\"}")
            .await,
        10.0
    );
    assert_eq!(a.metric("sluice_denial_cache_entries").await, 1.0);

    // An administrator lifts the denial through the other service.
    let body = json!({ "rule": "login", "attributes": ip }).to_string();
    let reset = b
        .admin(Method::POST, "/v1/reset", &body, Some(ADMIN_TOKEN))
        .await;
    assert_eq!(reset.status, 200, "{reset:?}");
    eventually(WITHIN, "A admits again", || async {
        (a.check("login", ip.clone()).await.status == 200).then_some(())
    })
    .await;
}

/// `/v1/check-all`, gRPC `CheckAll` and Envoy's RLS answer a denied identity from the cache
/// too: a ban at the edge costs Redis one call, not one per request.
#[tokio::test]
async fn batches_and_envoy_are_answered_without_redis() {
    use crate::envoy::{ask, descriptor, grpc_client, request};
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
    let config = format!(
        "grpc_listen: 127.0.0.1:0\n{CONFIG}envoy:\n  edge:\n    - descriptor: [remote_address]\n      \
         rule: login\n      attributes: {{ remote_address: ip }}\n"
    );
    let redis = RedisServer::start();
    let server = Server::start_on(&config, &redis.url());
    subscribed(&redis, 1).await;
    let part = json!({ "rule": "login", "attributes": { "ip": "203.0.113.9" } });
    let checks = json!({ "checks": [part] }).to_string();
    assert_eq!(server.post("/v1/check-all", &checks).await.status, 200);
    assert_eq!(server.post("/v1/check-all", &checks).await.status, 429);
    let asked = redis.decision_calls();
    let mut envoy = grpc_client(&server).await;
    for _ in 0..5 {
        let denied = server.post("/v1/check-all", &checks).await;
        assert_eq!(denied.status, 429, "{denied:?}");
        let edge = request(
            "edge",
            vec![descriptor(&[("remote_address", "203.0.113.9")])],
        );
        assert_eq!(ask(&mut envoy, edge).await.overall_code(), Code::OverLimit);
    }
    assert_eq!(redis.decision_calls(), asked, "Redis was not asked");
}

#[tokio::test]
async fn the_cache_section_is_checked_and_needs_a_restart() {
    let redis = RedisServer::start();
    let server = Server::start_on(CONFIG, &redis.url());
    let bad = CONFIG.replace("max_stale: 2s", "max_stale: 2m");
    let out = common::sluice()
        .arg("validate")
        .arg(server.dir.write("bad.yaml", &bad))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(stderr.contains("denial_cache.max_stale"), "{stderr}");

    let changed = CONFIG.replace("max_entries: 1000", "max_entries: 2000");
    std::fs::write(&server.config, &changed).unwrap();
    wait_for_version(&server, &version_of(&changed)).await;
    eventually(WITHIN, "the restart warning", || async {
        server
            .log()
            .iter()
            .any(|l| l.contains("denial_cache"))
            .then_some(())
    })
    .await;
}
