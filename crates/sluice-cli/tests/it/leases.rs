//! Concurrency limits through the real binary: `/v1/check` hands out leases, `/v1/release` and
//! `/v1/renew` end and extend them, bad lease bodies get clear 4xx answers; on Redis, services
//! and `sluice check` share the leases.

use crate::common;

use common::{CONFIG, Server, TempDir, sluice};
use serde_json::json;
use sluice_test_support::RedisServer;

fn lease_body(lease: &str) -> String {
    json!({ "lease": lease }).to_string()
}

#[tokio::test]
async fn leases_are_taken_released_and_renewed() {
    let server = Server::start(CONFIG);
    let tenant = json!({ "tenant": "t1" });
    let first = server.check("jobs", tenant.clone()).await;
    assert_eq!(first.status, 200, "{first:?}");
    let lease = first.json["lease"].as_str().unwrap().to_string();
    assert_eq!(first.header("x-ratelimit-lease"), Some(lease.as_str()));
    assert!(first.json["lease_until_ms"].as_u64().unwrap() > 0);
    assert_eq!(first.header("ratelimit-policy"), Some("\"jobs\";q=2;w=30"));
    // The compact view and the headers view carry the lease too.
    let compact = server
        .post(
            "/v1/check?view=compact",
            &json!({ "rule": "jobs", "attributes": tenant }).to_string(),
        )
        .await;
    assert_eq!(compact.status, 200);
    let second = compact.json["lease"].as_str().unwrap().to_string();
    assert_ne!(second, lease);
    let denied = server.check("jobs", tenant.clone()).await;
    assert_eq!(denied.status, 429, "two leases held");
    assert_eq!(denied.header("x-ratelimit-lease"), None);
    assert!(denied.json.get("lease").is_none());

    let released = server.post("/v1/release", &lease_body(&lease)).await;
    assert_eq!(
        (released.status, &released.json),
        (200, &json!({ "released": true }))
    );
    let again = server.post("/v1/release", &lease_body(&lease)).await;
    assert_eq!(
        (again.status, &again.json),
        (200, &json!({ "released": false }))
    );
    // With `?view=headers` the lease is in its header alone.
    let bare = server
        .post(
            "/v1/check?view=headers",
            &json!({ "rule": "jobs", "attributes": tenant }).to_string(),
        )
        .await;
    assert_eq!(bare.status, 200);
    assert!(bare.header("x-ratelimit-lease").is_some_and(|l| l != lease));

    let renewed = server.post("/v1/renew", &lease_body(&second)).await;
    assert_eq!(renewed.status, 200);
    assert_eq!(renewed.json["renewed"], true);
    assert!(renewed.json["lease_until_ms"].as_u64().unwrap() > 0);
    let lapsed = server.post("/v1/renew", &lease_body(&lease)).await;
    assert_eq!(
        (lapsed.status, &lapsed.json),
        (200, &json!({ "renewed": false }))
    );
}

#[tokio::test]
async fn bad_lease_requests_are_refused_with_what_is_wrong() {
    let server = Server::start(CONFIG);
    let d = server.check("jobs", json!({ "tenant": "t1" })).await;
    let lease = d.json["lease"].as_str().unwrap().to_string();
    for path in ["/v1/release", "/v1/renew"] {
        for (body, status, says) in [
            ("", 400, "empty"),
            ("{", 400, "invalid JSON"),
            ("{}", 400, "lease"),
            (r#"{"lease": 7}"#, 400, "invalid JSON"),
            (r#"{"lease": "x", "extra": 1}"#, 400, "extra"),
            (r#"{"lease": "not a lease"}"#, 400, "invalid lease"),
        ] {
            let a = server.post(path, body).await;
            assert_eq!(a.status, status, "{path} {body}: {a:?}");
            assert!(a.error().contains(says), "{path} {body}: {}", a.error());
        }
        let unknown = lease.replace(":jobs:", ":nope:");
        let a = server.post(path, &lease_body(&unknown)).await;
        assert_eq!(a.status, 404, "{a:?}");
        let other_rule = lease.replace(":jobs:", ":employee:");
        let a = server.post(path, &lease_body(&other_rule)).await;
        assert_eq!(a.status, 400, "{a:?}");
        assert!(a.error().contains("no concurrency limit"), "{}", a.error());
    }
    // None of it released the lease: one place is still taken.
    let d = server.check("jobs", json!({ "tenant": "t1" })).await;
    assert_eq!(d.json["remaining"], 0, "{d:?}");
}

#[tokio::test]
async fn on_redis_services_and_sluice_check_share_leases() {
    let redis = RedisServer::start();
    let servers = [
        Server::start_on(CONFIG, &redis.url()),
        Server::start_on(CONFIG, &redis.url()),
    ];
    let tenant = json!({ "tenant": "t9" });
    let a = servers[0].check("jobs", tenant.clone()).await;
    let b = servers[1].check("jobs", tenant.clone()).await;
    assert_eq!((a.status, b.status), (200, 200));
    assert_eq!(servers[0].check("jobs", tenant.clone()).await.status, 429);
    // A lease taken through one service is released through the other.
    let lease = a.json["lease"].as_str().unwrap();
    let released = servers[1].post("/v1/release", &lease_body(lease)).await;
    assert_eq!(released.json["released"], true);

    let dir = TempDir::new();
    // A fresh process's first calls on a busy machine can take longer than the default 50 ms,
    // and a renewal or release has no fail policy to answer in its place.
    let config = dir.write(
        "sluice.yaml",
        &format!("store: {{ timeout: 5s }}\n{CONFIG}"),
    );
    let run = |args: &[&str]| {
        sluice()
            .args(["check", "--store", &redis.url(), "--config"])
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["jobs", "tenant=t9"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cli_lease = json["decision"]["lease"].as_str().unwrap().to_string();
    assert_eq!(servers[0].check("jobs", tenant.clone()).await.status, 429);
    let out = run(&["--renew", &cli_lease]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stdout).contains("\"renewed\":true"));
    let out = run(&["--release", &cli_lease]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        json!({ "released": true })
    );
    let out = run(&["--release", &cli_lease]);
    assert_eq!(out.status.code(), Some(1), "released twice: {out:?}");
    let out = run(&["--release", "not a lease"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("invalid lease"));
    assert_eq!(servers[0].check("jobs", tenant).await.status, 200);
}
