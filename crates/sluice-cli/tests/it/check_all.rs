//! `POST /v1/check-all` on the real binary, on memory and on Redis: several rules and several
//! identities decided all or nothing, the three views, the rate-limit headers of the part that
//! decided, leases of concurrency limits, repeated parts added up against one count, and bad parts that decide nothing, with their codes.

use crate::common;

use common::Server;
use serde_json::{Value, json};
use sluice_test_support::RedisServer;

pub const CONFIG: &str = "\
admin_token_env: SLUICE_ADMIN_TOKEN
rules:
  per_ip:
    limits:
      - { by: [ip], rate: 10/1m, algorithm: sliding_log }
  per_path:
    message: this path is busy
    limits:
      - { by: [path], rate: 1/1m, algorithm: sliding_log }
  jobs:
    limits:
      - { by: [tenant], algorithm: concurrency, max_leases: 1, lease: 30s }
  tenant_jobs:
    limits:
      - { by: [tenant], algorithm: concurrency, max_leases: 2, lease: 30s }
      - { by: [ip], rate: 10/1m, algorithm: sliding_log }
";

fn part(rule: &str, attributes: Value) -> Value {
    json!({ "rule": rule, "attributes": attributes })
}

async fn check_all(server: &Server, view: &str, parts: &[Value]) -> common::Answer {
    server
        .post(
            &format!("/v1/check-all{view}"),
            &json!({ "checks": parts }).to_string(),
        )
        .await
}

async fn remaining(server: &Server, rule: &str, attributes: Value) -> u64 {
    let body = json!({ "rule": rule, "attributes": attributes }).to_string();
    server.post("/v1/peek", &body).await.json["remaining"]
        .as_u64()
        .unwrap()
}

async fn all_or_nothing(server: Server) {
    let ip = part("per_ip", json!({ "ip": "203.0.113.9" }));
    let path = part("per_path", json!({ "path": "/a" }));
    let first = check_all(&server, "", &[ip.clone(), path.clone()]).await;
    assert_eq!(first.status, 200, "{first:?}");
    assert_eq!(first.json["allowed"], true);
    let decisions = first.json["decisions"].as_array().unwrap();
    assert_eq!(decisions.len(), 2);
    assert_eq!(
        (&decisions[0]["rule"], &decisions[1]["rule"]),
        (&json!("per_ip"), &json!("per_path"))
    );
    assert_eq!(decisions[1]["remaining"], 0);
    // The headers are those of the part with the fewest units left.
    assert!(
        first.header("ratelimit").unwrap().contains("r=0"),
        "{first:?}"
    );

    let second = check_all(&server, "", &[ip.clone(), path.clone()]).await;
    assert_eq!(second.status, 429, "{second:?}");
    assert_eq!(second.json["allowed"], false);
    assert_eq!(second.json["decisions"][0]["allowed"], true);
    assert_eq!(second.json["decisions"][1]["allowed"], false);
    assert_eq!(second.json["decisions"][1]["message"], "this path is busy");
    assert!(second.header("retry-after").is_some(), "{second:?}");
    assert_eq!(
        remaining(&server, "per_ip", json!({ "ip": "203.0.113.9" })).await,
        9,
        "the denied request took nothing"
    );

    // One rule, several identities.
    let paths = [
        part("per_path", json!({ "path": "/x" })),
        part("per_path", json!({ "path": "/y" })),
    ];
    let compact = check_all(&server, "?view=compact", &paths).await;
    assert_eq!(compact.status, 200, "{compact:?}");
    assert_eq!(
        compact.json,
        json!({ "allowed": true, "decisions": [
            { "allowed": true, "limit": 1, "remaining": 0, "reset_after_ms": compact.json["decisions"][0]["reset_after_ms"] },
            { "allowed": true, "limit": 1, "remaining": 0, "reset_after_ms": compact.json["decisions"][1]["reset_after_ms"] },
        ]})
    );
    let headers = check_all(&server, "?view=headers", &paths).await;
    assert_eq!(headers.status, 429);
    assert_eq!(headers.text, "");
    assert!(headers.header("retry-after").is_some());

    // Parts that cost 0 only look: 200, and the denial is in the body.
    let mut look = path.clone();
    look["cost"] = json!(0);
    let looked = check_all(&server, "", &[look]).await;
    assert_eq!(
        (looked.status, &looked.json["allowed"]),
        (200, &json!(false))
    );
}

#[tokio::test]
async fn a_check_all_is_all_or_nothing_on_memory() {
    all_or_nothing(Server::start(CONFIG)).await;
}

#[tokio::test]
async fn a_check_all_is_all_or_nothing_on_redis() {
    let redis = RedisServer::start();
    all_or_nothing(Server::start_on(CONFIG, &redis.url())).await;
}

#[tokio::test]
async fn a_check_all_that_passed_holds_its_leases() {
    let server = Server::start(CONFIG);
    let jobs = part("jobs", json!({ "tenant": "t1" }));
    let path = part("per_path", json!({ "path": "/a" }));
    let passed = check_all(&server, "", &[jobs.clone(), path.clone()]).await;
    assert_eq!(passed.status, 200, "{passed:?}");
    let lease = passed.json["decisions"][0]["lease"]
        .as_str()
        .expect("a lease")
        .to_string();
    // Denied by `per_path`: the one slot of `jobs` is not taken again.
    let released = server
        .post("/v1/release", &json!({ "lease": lease }).to_string())
        .await;
    assert_eq!(released.json, json!({ "released": true }));
    let denied = check_all(&server, "", &[jobs.clone(), path]).await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.json["decisions"][0].get("lease"), None);
    let alone = check_all(&server, "", &[jobs]).await;
    assert_eq!(alone.status, 200, "the slot is free: {alone:?}");
    assert!(alone.header("x-ratelimit-lease").is_some());
}

/// Copies of one part are one request for their summed cost, never each judged on its own.
async fn repeated_parts_add_up(server: Server) {
    let ip = json!({ "ip": "198.51.100.4" });
    let nine = json!({ "rule": "per_ip", "attributes": ip, "cost": 9 });
    assert_eq!(
        server.post("/v1/check", &nine.to_string()).await.status,
        200
    );
    let copies = vec![part("per_ip", ip.clone()); 3];
    let denied = check_all(&server, "", &copies).await;
    assert_eq!(denied.status, 429, "3 copies with 1 left: {denied:?}");
    assert_eq!(remaining(&server, "per_ip", ip.clone()).await, 1);
    let mut three = json!({ "rule": "per_path", "attributes": { "path": "/r" }, "cost": 3 });
    assert_eq!(
        check_all(&server, "", &[three.clone(), three.clone()])
            .await
            .status,
        429
    );
    three["cost"] = json!(1);
    assert_eq!(
        check_all(&server, "", &[three.clone(), three]).await.status,
        429,
        "2 of 1"
    );
    // Two copies on a concurrency limit of one: one lease of two units does not fit.
    let jobs = part("jobs", json!({ "tenant": "t9" }));
    let two = check_all(&server, "", &[jobs.clone(), jobs.clone()]).await;
    assert_eq!(two.status, 429, "{two:?}");
    assert_eq!(two.json["decisions"][0].get("lease"), None);
    assert_eq!(check_all(&server, "", &[jobs]).await.status, 200);
}

#[tokio::test]
async fn repeated_parts_add_up_on_memory() {
    repeated_parts_add_up(Server::start(CONFIG)).await;
}

#[tokio::test]
async fn repeated_parts_add_up_on_redis() {
    let redis = RedisServer::start();
    repeated_parts_add_up(Server::start_on(CONFIG, &redis.url())).await;
}

#[tokio::test]
async fn bad_parts_decide_nothing_and_say_which() {
    let server = Server::start(CONFIG);
    let ip = part("per_ip", json!({ "ip": "203.0.113.9" }));
    let cases = [
        (
            vec![ip.clone(), part("nope", json!({}))],
            404,
            "unknown_rule",
            "checks[1]",
        ),
        (
            vec![ip.clone(), part("per_path", json!({}))],
            400,
            "missing_attribute",
            "checks[1]",
        ),
        (
            vec![
                ip.clone(),
                json!({ "rule": "per_ip", "attributes": { "ip": "1" }, "cost": -1 }),
            ],
            400,
            "bad_cost",
            "checks[1]",
        ),
        (
            vec![json!({ "rule": "per_ip", "attributes": { "ip": "1" }, "cost": 10_000_001 })],
            400,
            "bad_cost",
            "checks[0]",
        ),
        (
            vec![json!({ "rule": "per_ip", "attributes": { "ip": "1" }, "reserve": true })],
            400,
            "bad_batch",
            "checks[0]",
        ),
        (
            vec![
                part("tenant_jobs", json!({ "tenant": "t", "ip": "1" })),
                part("tenant_jobs", json!({ "tenant": "t", "ip": "2" })),
            ],
            400,
            "bad_batch",
            "checks[1]",
        ),
        (vec![], 400, "bad_batch", "1 to 64"),
        (vec![ip.clone(); 65], 400, "bad_batch", "65 parts"),
    ];
    for (parts, status, code, says) in cases {
        let a = check_all(&server, "", &parts).await;
        assert_eq!((a.status, a.code()), (status, code), "{a:?}");
        assert!(a.error().contains(says), "{a:?}");
    }
    let a = server.post("/v1/check-all", r#"{"checks": 3}"#).await;
    assert_eq!(a.code(), "bad_json");
    let a = server
        .post("/v1/check-all?view=all", r#"{"checks": []}"#)
        .await;
    assert_eq!(a.code(), "bad_query");
    assert_eq!(
        remaining(&server, "per_ip", json!({ "ip": "203.0.113.9" })).await,
        10,
        "nothing was decided"
    );
}
