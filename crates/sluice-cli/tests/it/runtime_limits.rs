//! Run-time limits through the real binary: `/v1/limits` over HTTP on memory and Redis (two
//! services on one Redis see a change at once), and `sluice limits` against a running service.

use crate::common;

use common::{ADMIN_TOKEN, Server, sluice};
use reqwest::Method;
use serde_json::{Value, json};
use sluice_test_support::RedisServer;

const CONFIG: &str = "\
admin_token_env: SLUICE_ADMIN_TOKEN
rules:
  api:
    limits:
      - { by: [customer], rate: 2/1h, algorithm: sliding_log, settable: true }
  login:
    limits:
      - { by: [ip], rate: 2/1h, algorithm: gcra }
";

/// How many of `n` checks for `customer` pass.
async fn admitted(server: &Server, customer: &str, n: usize) -> usize {
    let mut passed = 0;
    for _ in 0..n {
        let a = server.check("api", json!({ "customer": customer })).await;
        assert!(matches!(a.status, 200 | 429), "{a:?}");
        passed += usize::from(a.status == 200);
    }
    passed
}

async fn limits(server: &Server, method: Method, body: Value) -> common::Answer {
    server
        .admin(method, "/v1/limits", &body.to_string(), Some(ADMIN_TOKEN))
        .await
}

async fn listed(server: &Server, query: &str) -> Value {
    let a = server
        .admin(
            Method::GET,
            &format!("/v1/limits{query}"),
            "",
            Some(ADMIN_TOKEN),
        )
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    a.json["limits"].clone()
}

/// Sets, reads, lists and removes customer 42's limit on `server`, and sees decisions follow.
async fn set_follow_list_remove(server: &Server) {
    assert_eq!(admitted(server, "7", 3).await, 2);
    let set = json!({ "rule": "api", "attributes": { "customer": "42" }, "rate": "5/1h" });
    let a = limits(server, Method::PUT, set).await;
    assert_eq!(a.status, 200, "{a:?}");
    assert_eq!(
        a.json,
        json!({ "rule": "api", "limit": "customer-sliding_log-1h", "identity": "customer=42",
                "rate": "5/1h" })
    );
    assert_eq!(admitted(server, "42", 5).await, 5);
    let denied = server.check("api", json!({ "customer": "42" })).await;
    assert_eq!((denied.status, &denied.json["limit"]), (429, &json!(5)));
    // Others keep the file's numbers.
    assert_eq!(admitted(server, "7", 1).await, 0);
    let entry = json!({ "rule": "api", "limit": "customer-sliding_log-1h",
                        "identity": "customer=42", "rate": "5/1h" });
    assert_eq!(listed(server, "").await, json!([entry.clone()]));
    assert_eq!(listed(server, "?rule=api").await, json!([entry.clone()]));
    let one = r#"?rule=api&attributes=%7B%22customer%22%3A%2242%22%7D"#;
    assert_eq!(listed(server, one).await, json!([entry]));
    let other = r#"?rule=api&attributes=%7B%22customer%22%3A%227%22%7D"#;
    assert_eq!(listed(server, other).await, json!([]));

    // Bad input is refused with a reason and changes nothing.
    for (body, status, code, says) in [
        (
            json!({ "rule": "api", "attributes": { "customer": "42" }, "rate": "9/1m" }),
            400,
            "invalid_runtime_limit",
            "per 1h",
        ),
        (
            json!({ "rule": "api", "attributes": { "customer": "42" }, "rate": "lots" }),
            400,
            "bad_json",
            "rate",
        ),
        (
            json!({ "rule": "api", "attributes": { "customer": "42" }, "rate": "9/1h", "burst": 10 }),
            400,
            "invalid_runtime_limit",
            "burst",
        ),
        (
            json!({ "rule": "api", "attributes": { "ip": "1" }, "rate": "9/1h" }),
            400,
            "missing_attribute",
            "customer",
        ),
        (
            json!({ "rule": "login", "attributes": { "ip": "1" }, "rate": "9/1h" }),
            400,
            "invalid_runtime_limit",
            "settable: true",
        ),
        (
            json!({ "rule": "nope", "attributes": { "ip": "1" }, "rate": "9/1h" }),
            404,
            "unknown_rule",
            "nope",
        ),
        (
            json!({ "rule": "api", "attributes": { "customer": "42" }, "rate": "9/1h", "x": 1 }),
            400,
            "bad_json",
            "x",
        ),
    ] {
        let a = limits(server, Method::PUT, body.clone()).await;
        assert_eq!((a.status, a.code()), (status, code), "{body}: {a:?}");
        assert!(a.error().contains(says), "{body}: {}", a.error());
    }
    let a = server
        .admin(Method::PUT, "/v1/limits", r#"{"rule":"api"}"#, None)
        .await;
    assert_eq!(a.status, 401);
    assert_eq!(listed(server, "").await.as_array().unwrap().len(), 1);
    assert_eq!(admitted(server, "42", 1).await, 0);

    // `/v1/rules` says which limits take run-time limits.
    let rules = server.get("/v1/rules").await.json;
    assert!(rules.to_string().contains(r#""settable":true"#), "{rules}");

    let remove = json!({ "rule": "api", "attributes": { "customer": "42" } });
    let a = limits(server, Method::DELETE, remove.clone()).await;
    assert_eq!(a.json, json!({ "rule": "api", "removed": true }));
    let a = limits(server, Method::DELETE, remove).await;
    assert_eq!(a.json, json!({ "rule": "api", "removed": false }));
    assert_eq!(listed(server, "").await, json!([]));
    let denied = server.check("api", json!({ "customer": "42" })).await;
    assert_eq!((denied.status, &denied.json["limit"]), (429, &json!(2)));
}

#[tokio::test]
async fn run_time_limits_over_http_on_memory() {
    set_follow_list_remove(&Server::start(CONFIG)).await;
}

#[tokio::test]
async fn a_full_limit_refuses_new_identities_with_a_409_and_keeps_changing_known_ones() {
    let config = format!("{CONFIG}runtime_limits: {{ max_per_limit: 1 }}\n");
    let server = Server::start(&config);
    let set = |customer: &str, rate: &str| json!({ "rule": "api", "attributes": { "customer": customer }, "rate": rate });
    assert_eq!(
        limits(&server, Method::PUT, set("42", "5/1h")).await.status,
        200
    );
    let a = limits(&server, Method::PUT, set("7", "5/1h")).await;
    assert_eq!((a.status, a.code()), (409, "runtime_limits_full"), "{a:?}");
    assert_eq!(a.json["error"]["limit_id"], "customer-sliding_log-1h");
    assert_eq!(listed(&server, "").await.as_array().unwrap().len(), 1);
    assert_eq!(admitted(&server, "7", 3).await, 2);
    assert_eq!(
        limits(&server, Method::PUT, set("42", "6/1h")).await.status,
        200
    );
}

#[tokio::test]
async fn run_time_limits_over_http_on_redis_reach_every_service_at_once() {
    let redis = RedisServer::start();
    let (a, b) = (
        Server::start_on(CONFIG, &redis.url()),
        Server::start_on(CONFIG, &redis.url()),
    );
    set_follow_list_remove(&a).await;
    // `b` denies customer 9 (and its denial cache would remember it), then `a` raises the limit:
    // `b`'s next decision follows.
    assert_eq!(admitted(&b, "9", 3).await, 2);
    let set = json!({ "rule": "api", "attributes": { "customer": "9" }, "rate": "4/1h" });
    assert_eq!(limits(&a, Method::PUT, set).await.status, 200);
    assert_eq!(admitted(&b, "9", 3).await, 2);
    assert_eq!(listed(&b, "?rule=api").await.as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn the_limits_command_sets_reads_lists_and_removes() {
    let server = Server::start(CONFIG);
    let run = |args: &[&str], token: &str| {
        let out = sluice()
            .args(["limits", "--url", &server.base])
            .args(args)
            .env("SLUICE_ADMIN_TOKEN", token)
            .env_remove("SLUICE_URL")
            .output()
            .expect("the sluice binary runs");
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        (out.status.code(), stdout, stderr)
    };
    let (code, out, _) = run(
        &["set", "api", "--rate", "3/1h", "customer=42"],
        ADMIN_TOKEN,
    );
    assert_eq!(code, Some(0));
    assert!(out.contains(r#""rate": "3/1h""#), "{out}");
    assert_eq!(admitted(&server, "42", 4).await, 3);
    let (code, out, _) = run(&["get", "api", "customer=42"], ADMIN_TOKEN);
    assert_eq!(code, Some(0));
    assert!(out.contains("customer=42"), "{out}");
    let (code, _, _) = run(&["get", "api", "customer=7"], ADMIN_TOKEN);
    assert_eq!(code, Some(1));
    let (code, out, _) = run(&["list"], ADMIN_TOKEN);
    assert_eq!(code, Some(0));
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["limits"].as_array().unwrap().len(), 1);
    let (code, _, err) = run(
        &["set", "api", "--rate", "3/1m", "customer=42"],
        ADMIN_TOKEN,
    );
    assert_eq!(code, Some(2));
    assert!(
        err.contains("400") && err.contains("invalid_runtime_limit") && err.contains("per 1h"),
        "{err}"
    );
    let (code, _, err) = run(&["list"], "wrong");
    assert_eq!(code, Some(2));
    assert!(err.contains("401"), "{err}");
    let (code, out, _) = run(&["remove", "api", "customer=42"], ADMIN_TOKEN);
    assert_eq!(code, Some(0));
    assert!(out.contains(r#""removed": true"#), "{out}");
    let (code, _, _) = run(&["remove", "api", "customer=42"], ADMIN_TOKEN);
    assert_eq!(code, Some(1));
}
