//! The real binary on a real `redis-server` (started per test on a free port): decisions whose
//! counters live in Redis, two services sharing one limit, the fail policies while Redis is down
//! and the recovery after it comes back, admin operations, and hot reload keeping live counters.
//!
//! Waits poll with deadlines; the only durations asserted are upper bounds (how long a decision
//! may take while the store is down).

use crate::common;

use std::time::{Duration, Instant};

use common::{
    ADMIN_TOKEN, Answer, CONFIG, Server, WITHIN, eventually, version_of, wait_for_version,
};
use reqwest::Method;
use serde_json::json;
use sluice_test_support::RedisServer;
use tokio::task::JoinSet;

/// The `store.timeout` of [`config`]: far above what a healthy call takes on a loaded machine,
/// so that a decision the test expects from Redis is never degraded by a slow moment.
const STORE_TIMEOUT: Duration = Duration::from_secs(1);

/// What a decision may take beyond the store timeout while Redis is down: HTTP on loopback and a
/// debug build on a busy machine, nowhere near the minutes a wait for a stopped Redis would take.
const MARGIN: Duration = Duration::from_secs(4);

/// How long recovery may take once Redis is back: the breaker's longest back-off is 0.5 s; the
/// rest is room for a loaded machine. A bound on waiting, not on how fast recovery is.
const RECOVERY: Duration = Duration::from_secs(60);

/// Rules added to the shared test rules: one per fail policy, and one for concurrent checks.
const MORE_RULES: &str = "  fail_open:
    fail: open
    limits:
      - { by: [id], rate: 2/1m, algorithm: sliding_log }
  fail_closed:
    fail: closed
    limits:
      - { by: [id], rate: 2/1m, algorithm: sliding_log }
  fail_local:
    fail: local
    limits:
      - { by: [id], rate: 2/1m, algorithm: sliding_log }
  tenant:
    limits:
      - { by: [tenant], rate: 10/1m, algorithm: gcra }
";

/// The shared test rules and [`MORE_RULES`], with a store timeout of [`STORE_TIMEOUT`].
fn config() -> String {
    format!(
        "store:\n  timeout: {}ms\n{CONFIG}{MORE_RULES}",
        STORE_TIMEOUT.as_millis()
    )
}

/// The name of a limit's state key in Redis (see `sluice::store::redis::KeyNames`).
fn state_key(rule: &str, limit: &str, identity: &str) -> String {
    let key = sluice::store::LimitKey {
        rule: rule.into(),
        limit_id: limit.into(),
        identity: identity.into(),
    };
    sluice::store::redis::KeyNames::new("sluice", &key).state
}

/// The keys under `pattern` with their PTTL (ms), sorted.
fn keys(redis: &RedisServer, pattern: &str) -> Vec<(String, i64)> {
    let mut names =
        sluice_test_support::decision_keys(&redis.cli(&["--scan", "--pattern", pattern]));
    names.sort();
    names
        .into_iter()
        .map(|name| {
            let ttl = redis.cli(&["PTTL", &name]);
            let ttl = ttl
                .parse()
                .unwrap_or_else(|_| panic!("PTTL {name} answered {ttl:?}"));
            (name, ttl)
        })
        .collect()
}

/// A check that must answer within the store timeout plus [`MARGIN`], with a decision (never a
/// 5xx or a client error) that says it was degraded.
async fn degraded_check(server: &Server, rule: &str, id: &str) -> Answer {
    let started = Instant::now();
    let a = server.check(rule, json!({ "id": id })).await;
    let took = started.elapsed();
    assert!(
        took < STORE_TIMEOUT + MARGIN,
        "{rule}: answered after {took:?}"
    );
    assert!(a.status == 200 || a.status == 429, "{rule}: {a:?}");
    assert_eq!(a.json["degraded"], true, "{rule}: {a:?}");
    let reason = a.json["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("fail policy"), "{rule}: {a:?}");
    a
}

/// Polls `fail_closed` with fresh identities until Redis decides again (allowed, not degraded);
/// every answer meanwhile is a decision, never a 5xx.
async fn wait_for_redis_decisions(server: &Server) {
    let mut probe = 0;
    eventually(RECOVERY, "decisions from Redis again", || {
        probe += 1;
        let id = format!("probe-{probe}");
        async move {
            let a = server.check("fail_closed", json!({ "id": id })).await;
            assert!(a.status == 200 || a.status == 429, "{a:?}");
            (a.status == 200 && a.json["degraded"] == false).then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn decisions_are_counted_in_redis_with_expiring_keys() {
    let redis = RedisServer::start();
    let server = Server::start_on(&config(), &redis.url());
    for i in 0..5u64 {
        let a = server.check("employee", json!({ "id": "42" })).await;
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(a.json["degraded"], false);
        assert_eq!(a.json["remaining"], 4 - i);
        assert_eq!(a.header("ratelimit-policy"), Some("\"employee\";q=5;w=10"));
        assert_eq!(
            a.header("ratelimit"),
            Some(format!("\"employee\";r={};t=10", 4 - i).as_str())
        );
        assert_eq!(a.header("x-ratelimit-limit"), Some("5"));
        assert_eq!(
            a.header("x-ratelimit-remaining"),
            Some((4 - i).to_string().as_str())
        );
        assert_eq!(a.header("retry-after"), None);
    }
    let denied = server.check("employee", json!({ "id": "42" })).await;
    assert_eq!(denied.status, 429, "{denied:?}");
    assert_eq!(denied.json["degraded"], false);
    assert_eq!(denied.json["message"], "slow down");
    let retry_ms = denied.json["retry_after_ms"].as_u64().unwrap();
    assert!(retry_ms > 0 && retry_ms <= 10_000, "{retry_ms}");
    let retry_after: u64 = denied.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(retry_after, retry_ms.div_ceil(1000));
    assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));

    // The counter is in Redis, under the documented layout, and expires by itself within the
    // window.
    let found = keys(&redis, "sluice:*");
    assert_eq!(found.len(), 1, "{found:?}");
    let (name, ttl) = &found[0];
    assert_eq!(name, &state_key("employee", "id-sliding_log-10s", "id=42"));
    assert!(*ttl > 0 && *ttl <= 10_000, "PTTL {ttl}");
    assert_eq!(
        redis.cli(&["ZCARD", name]),
        "5",
        "one member per admitted request"
    );

    assert_eq!(server.get("/readyz").await.json["store"], "redis");
}

#[tokio::test]
async fn two_services_on_one_redis_share_one_limit() {
    let redis = RedisServer::start();
    let config = config();
    let servers = [
        Server::start_on(&config, &redis.url()),
        Server::start_on(&config, &redis.url()),
    ];
    // Alternating: each service sees what the other consumed.
    let mut admitted = 0;
    for i in 0..12usize {
        let a = servers[i % 2]
            .check("employee", json!({ "id": "shared" }))
            .await;
        assert_eq!(a.json["degraded"], false, "{a:?}");
        if i < 5 {
            assert_eq!(
                (a.status, a.json["remaining"].as_u64()),
                (200, Some(4 - i as u64))
            );
            admitted += 1;
        } else {
            assert_eq!(a.status, 429, "request {i}: {a:?}");
        }
    }
    assert_eq!(admitted, 5);

    // Concurrently: 40 requests, half through each service, for a limit of 10.
    let mut tasks = JoinSet::new();
    for i in 0..40usize {
        let server = &servers[i % 2];
        let http = server.http.clone();
        let url = server.url("/v1/check");
        tasks.spawn(async move {
            let body = json!({ "rule": "tenant", "attributes": { "tenant": "t1" } });
            let response = http
                .post(url)
                .body(body.to_string())
                .send()
                .await
                .expect("the server answers");
            let status = response.status().as_u16();
            let json: serde_json::Value = response.json().await.expect("a JSON decision");
            assert_eq!(json["degraded"], false, "{json}");
            status
        });
    }
    let mut statuses = Vec::new();
    while let Some(status) = tasks.join_next().await {
        statuses.push(status.expect("the request task completes"));
    }
    assert_eq!(statuses.iter().filter(|&&s| s == 200).count(), 10);
    assert_eq!(statuses.iter().filter(|&&s| s == 429).count(), 30);
}

#[tokio::test]
async fn redis_down_follows_each_fail_policy_then_recovers() {
    let mut redis = RedisServer::start();
    let server = Server::start_on(&config(), &redis.url());
    for rule in ["fail_open", "fail_closed", "fail_local"] {
        let a = server.check(rule, json!({ "id": "before" })).await;
        assert_eq!((a.status, a.json["degraded"].as_bool()), (200, Some(false)));
    }
    assert_eq!(server.get("/readyz").await.status, 200);

    redis.stop();
    // Open: allowed, whatever the limit says.
    for _ in 0..4 {
        let a = degraded_check(&server, "fail_open", "o").await;
        assert_eq!(a.status, 200, "{a:?}");
    }
    // Closed: denied.
    for _ in 0..3 {
        let a = degraded_check(&server, "fail_closed", "c").await;
        assert_eq!(a.status, 429, "{a:?}");
        assert_eq!(a.json["allowed"], false);
    }
    // Local: this node's in-memory limiter counts, per identity (2 per minute).
    for expected in [200, 200, 429] {
        let a = degraded_check(&server, "fail_local", "l").await;
        assert_eq!(a.status, expected, "{a:?}");
    }
    let a = degraded_check(&server, "fail_local", "other").await;
    assert_eq!(a.status, 200, "{a:?}");

    let ready = server.get("/readyz").await;
    assert_eq!(ready.status, 503, "{ready:?}");
    assert_eq!(ready.json["status"], "unavailable");
    assert_eq!(ready.json["store"], "redis");
    // Admin operations need the store: a JSON 503, not a hang.
    let listed = server
        .admin(Method::GET, "/v1/blocks?rule=login", "", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(listed.status, 503, "{listed:?}");
    assert!(listed.error().contains("redis"), "{listed:?}");
    assert!(
        server
            .metric("sluice_degraded_decisions_total{rule=\"fail_closed\"}")
            .await
            >= 3.0
    );

    redis.restart();
    eventually(RECOVERY, "/readyz to answer 200", || async {
        (server.get("/readyz").await.status == 200).then_some(())
    })
    .await;
    wait_for_redis_decisions(&server).await;
    for expected in [200, 200, 429] {
        let a = server.check("fail_local", json!({ "id": "after" })).await;
        assert_eq!(
            (a.status, a.json["degraded"].as_bool()),
            (expected, Some(false)),
            "{a:?}"
        );
    }
    let found = keys(
        &redis,
        &state_key("fail_local", "id-sliding_log-1m", "id=after"),
    );
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].1 > 0, "{found:?}");
}

#[tokio::test]
async fn a_redis_slower_than_the_timeout_is_not_waited_for() {
    let redis = RedisServer::start();
    let server = Server::start_on(&config(), &redis.url());
    let a = server.check("fail_closed", json!({ "id": "warm" })).await;
    assert_eq!((a.status, a.json["degraded"].as_bool()), (200, Some(false)));

    // Redis is stopped (SIGSTOP) until resumed: connected, but slower than any deadline.
    redis.pause();
    for id in ["s1", "s2", "s3", "s4"] {
        let a = degraded_check(&server, "fail_closed", id).await;
        assert_eq!(a.status, 429, "{a:?}");
        let a = degraded_check(&server, "fail_open", id).await;
        assert_eq!(a.status, 200, "{a:?}");
    }
    let started = Instant::now();
    assert_eq!(server.get("/readyz").await.status, 503);
    assert!(started.elapsed() < STORE_TIMEOUT + MARGIN, "/readyz waited");

    redis.resume();
    wait_for_redis_decisions(&server).await;
}

/// With a store timeout longer than the request's, the request's deadline cuts a decision
/// that waits for Redis: 408, as for a body that never comes.
#[tokio::test]
async fn a_store_slower_than_the_request_timeout_gets_a_408() {
    let redis = RedisServer::start();
    // The store would wait 30 s for the stopped Redis: an answer within 15 s came from the
    // request's deadline.
    let config =
        format!("server:\n  request_timeout: 500ms\nstore:\n  timeout: 30s\n{CONFIG}{MORE_RULES}");
    let server = Server::start_on(&config, &redis.url());
    let a = server.check("fail_closed", json!({ "id": "warm" })).await;
    assert_eq!(a.status, 200, "{a:?}");

    redis.pause();
    let started = Instant::now();
    let a = server.check("fail_closed", json!({ "id": "paused" })).await;
    let took = started.elapsed();
    redis.resume();
    assert_eq!(a.status, 408, "{a:?}");
    assert_eq!(a.code(), "timeout");
    assert!(took < Duration::from_secs(15), "answered after {took:?}");
}

/// A `store.timeout` longer than a second is the deadline of a decision: no shorter deadline of
/// the connection cuts it (a planned failover holds a primary's writes for seconds).
#[tokio::test]
async fn a_store_timeout_above_a_second_is_waited_for_in_full() {
    let redis = RedisServer::start();
    let config = format!("store:\n  timeout: 3s\n{CONFIG}{MORE_RULES}");
    let server = Server::start_on(&config, &redis.url());
    let a = server.check("fail_closed", json!({ "id": "warm" })).await;
    assert_eq!((a.status, a.json["degraded"].as_bool()), (200, Some(false)));

    redis.pause();
    let started = Instant::now();
    let a = server.check("fail_closed", json!({ "id": "paused" })).await;
    let took = started.elapsed();
    redis.resume();
    assert_eq!((a.status, a.json["degraded"].as_bool()), (429, Some(true)));
    // A lower bound: a loaded machine can only make the answer later.
    assert!(
        took >= Duration::from_millis(2900),
        "cut before the store timeout: answered after {took:?}"
    );
}

#[tokio::test]
async fn a_service_starts_while_redis_is_down_and_picks_it_up() {
    let mut redis = RedisServer::start();
    redis.stop();
    let server = Server::start_on(&config(), &redis.url());
    let a = degraded_check(&server, "fail_closed", "early").await;
    assert_eq!(a.status, 429, "{a:?}");
    assert_eq!(server.get("/readyz").await.status, 503);

    redis.restart();
    wait_for_redis_decisions(&server).await;
    assert_eq!(server.get("/readyz").await.status, 200);
}

#[tokio::test]
async fn admin_operations_act_on_redis_for_every_service() {
    let redis = RedisServer::start();
    let config = config();
    let a = Server::start_on(&config, &redis.url());
    let b = Server::start_on(&config, &redis.url());
    let token = Some(ADMIN_TOKEN);
    let ip = json!({ "ip": "203.0.113.9" });

    // A denial by the limit blocks the identity for 15 minutes, in Redis.
    for _ in 0..2 {
        assert_eq!(a.check("login", ip.clone()).await.status, 200);
    }
    let denied = a.check("login", ip.clone()).await;
    assert_eq!(denied.status, 429, "{denied:?}");
    let until = denied.json["blocked_until_ms"].as_u64().unwrap();
    let block_key = "sluice:login:per_ip:{ip=203.0.113.9}:b";
    let ttl: i64 = redis.cli(&["PTTL", block_key]).parse().unwrap();
    assert!(
        ttl > 14 * 60 * 1000 && ttl <= 15 * 60 * 1000,
        "block PTTL {ttl}"
    );
    // The other service sees the block and lists it.
    let blocked = b.check("login", ip.clone()).await;
    assert_eq!(
        (blocked.status, blocked.json["blocked_until_ms"].as_u64()),
        (429, Some(until))
    );
    let listed = b
        .admin(Method::GET, "/v1/blocks?rule=login", "", token)
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");
    assert_eq!(
        listed.json,
        json!({ "blocks": [{
            "rule": "login",
            "limit": "per_ip",
            "identity": "ip=203.0.113.9",
            "blocked_until_ms": until,
        }], "next": null, "skipped": 0 })
    );

    // Lifting it through one service removes it from Redis for both.
    let body = json!({ "rule": "login", "attributes": ip }).to_string();
    let lifted = a.admin(Method::DELETE, "/v1/blocks", &body, token).await;
    assert_eq!(lifted.json, json!({ "rule": "login", "unblocked": true }));
    assert_eq!(redis.cli(&["EXISTS", block_key]), "0");
    let listed = b
        .admin(Method::GET, "/v1/blocks?rule=login", "", token)
        .await;
    assert_eq!(
        listed.json,
        json!({ "blocks": [], "next": null, "skipped": 0 })
    );

    // The counter is still full; a reset forgets every key of the identity.
    let state = state_key("login", "per_ip", "ip=203.0.113.9");
    assert_eq!(keys(&redis, &state).len(), 1);
    let reset = b.admin(Method::POST, "/v1/reset", &body, token).await;
    assert_eq!(reset.json, json!({ "rule": "login", "reset": true }));
    assert_eq!(keys(&redis, "sluice:login:*"), vec![]);
    assert_eq!(keys(&redis, &format!("{state}*")), vec![]);
    let again = a.check("login", ip.clone()).await;
    assert_eq!(
        (again.status, again.json["remaining"].as_u64()),
        (200, Some(1))
    );

    // A block set by hand through one service holds on the other.
    let block = json!({ "rule": "employee", "attributes": { "id": "7" }, "duration": "15m" });
    let set = a
        .admin(Method::POST, "/v1/blocks", &block.to_string(), token)
        .await;
    assert_eq!(set.status, 200, "{set:?}");
    let until = set.json["blocked_until_ms"].as_u64().unwrap();
    let blocked = b.check("employee", json!({ "id": "7" })).await;
    assert_eq!(
        (blocked.status, blocked.json["blocked_until_ms"].as_u64()),
        (429, Some(until))
    );
    let all = b.admin(Method::GET, "/v1/blocks", "", token).await;
    assert_eq!(all.json["blocks"][0]["rule"], "employee", "{all:?}");
    assert_eq!(all.json["blocks"].as_array().map(Vec::len), Some(1));
}

#[tokio::test]
async fn a_reload_keeps_the_live_redis_counters() {
    let redis = RedisServer::start();
    // A one-minute window, so the test's own pace cannot let counted requests expire.
    let config = config().replace("rate: 5/10s", "rate: 5/1m");
    let server = Server::start_on(&config, &redis.url());
    for _ in 0..3 {
        assert_eq!(
            server.check("employee", json!({ "id": "42" })).await.status,
            200
        );
    }
    let before = keys(&redis, "sluice:*");
    assert_eq!(before.len(), 1, "{before:?}");

    // Lowered to 4: the 3 counted requests count against it.
    let lowered = config.replace("rate: 5/1m", "rate: 4/1m");
    std::fs::write(&server.config, &lowered).unwrap();
    wait_for_version(&server, &version_of(&lowered)).await;
    let a = server.check("employee", json!({ "id": "42" })).await;
    assert_eq!(
        (
            a.status,
            a.json["limit"].as_u64(),
            a.json["remaining"].as_u64()
        ),
        (200, Some(4), Some(0)),
        "{a:?}"
    );
    assert_eq!(
        server.check("employee", json!({ "id": "42" })).await.status,
        429
    );

    // Raised to 6: the same 4 still count, 2 more pass.
    let raised = config.replace("rate: 5/1m", "rate: 6/1m");
    std::fs::write(&server.config, &raised).unwrap();
    wait_for_version(&server, &version_of(&raised)).await;
    for remaining in [1, 0] {
        let a = server.check("employee", json!({ "id": "42" })).await;
        assert_eq!(
            (a.status, a.json["remaining"].as_u64()),
            (200, Some(remaining)),
            "{a:?}"
        );
    }
    assert_eq!(
        server.check("employee", json!({ "id": "42" })).await.status,
        429
    );
    let after = keys(&redis, "sluice:*");
    assert_eq!(
        after.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        before.iter().map(|(k, _)| k).collect::<Vec<_>>(),
        "the same key before and after"
    );
    assert_eq!(redis.cli(&["ZCARD", &after[0].0]), "6");
}

/// A Redis whose `maxmemory-policy` may evict live counters gets a warning at start-up; one that
/// cannot gets none.
#[tokio::test]
async fn an_eviction_policy_that_can_drop_live_counters_is_warned_about() {
    let redis = RedisServer::start();
    redis.cli(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]);
    let server = Server::start_on(CONFIG, &redis.url());
    eventually(WITHIN, "the warning", || async {
        server
            .log()
            .iter()
            .any(|l| l.contains("maxmemory-policy allkeys-lru may evict live rate-limit counters"))
            .then_some(())
    })
    .await;

    let quiet = RedisServer::start();
    quiet.cli(&["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]);
    let server = Server::start_on(CONFIG, &quiet.url());
    eventually(WITHIN, "the check", || async {
        server
            .log()
            .iter()
            .any(|l| l.contains("maxmemory-policy cannot evict live counters"))
            .then_some(())
    })
    .await;
    assert!(
        !server.log().iter().any(|l| l.contains("may evict")),
        "{:?}",
        server.log()
    );
}
