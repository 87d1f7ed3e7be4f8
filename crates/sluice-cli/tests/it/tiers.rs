//! Tiers and conditions as `examples/sluice.yaml` writes them, decided by the real binary over
//! HTTP on the memory store and on a real `redis-server`: plans by tier with the counter kept
//! across a tier change, an allowlist, a refused range with its own message, IPv6 clients counted
//! by their /64, a login limit that counts only POST /login, forward-auth headers as the
//! attributes the overrides read, and `/v1/rules` showing what the conditions test only to an
//! administrator.

use crate::common;

use common::{ADMIN_TOKEN, Answer, Server};
use serde_json::json;
use sluice_test_support::RedisServer;

const EXAMPLE: &str = include_str!("../../../../examples/sluice.yaml");

async fn login(server: &Server, method: &str, ip: &str) -> Answer {
    server
        .check(
            "login_form",
            json!({ "method": method, "path": "/login", "ip": ip }),
        )
        .await
}

async fn every_need(server: &Server) {
    // Tiers: the plan picks the numbers; the counter is the tenant's whatever its plan.
    for _ in 0..10 {
        let free = server
            .check("plans", json!({ "tenant": "t1", "ip": "198.51.100.7" }))
            .await;
        assert_eq!(
            (free.status, free.json["limit"].as_u64()),
            (200, Some(100)),
            "{free:?}"
        );
    }
    let pro = json!({ "tenant": "t1", "plan": "pro", "ip": "198.51.100.7" });
    let pro = server.check("plans", pro).await;
    assert_eq!(pro.json["limit"], 1000, "{pro:?}");
    assert!(
        pro.json["remaining"].as_u64().unwrap() < 995,
        "the 10 units used on the free plan still count (a fresh counter leaves 999, less what \
         refilled meanwhile, at most a few): {pro:?}"
    );
    let enterprise = json!({ "tenant": "t2", "plan": "enterprise", "ip": "198.51.100.8" });
    let enterprise = server.check("plans", enterprise).await;
    assert_eq!(enterprise.json["limit"], 20000, "the enterprise burst");
    assert_eq!(
        enterprise.json["limits"][0]["id"],
        pro.json["limits"][0]["id"]
    );

    // The allowlist: never limited, nothing counted, and the decision says why.
    for _ in 0..3 {
        let monitoring = json!({ "tenant": "monitoring", "ip": "198.51.100.9" });
        let answer = server.check("plans", monitoring).await;
        assert_eq!(answer.status, 200);
        assert_eq!(answer.json["limits"], json!([]), "{answer:?}");
        assert!(
            answer.json["reason"]
                .as_str()
                .unwrap()
                .contains("unlimited")
        );
    }

    // The refused range, IPv4 and IPv6, with its own message (before the rule's).
    for ip in ["203.0.113.50", "2001:db8:dead:1::5"] {
        let refused = json!({ "tenant": "t3", "plan": "pro", "ip": ip });
        let answer = server.check("plans", refused).await;
        assert_eq!(answer.status, 429, "{ip}: {answer:?}");
        assert_eq!(answer.json["message"], "this range is refused");
        assert_eq!(answer.json["limits"][0]["limit"], 0);
    }

    // A condition on one limit: writes under /api/ only.
    let read = json!({ "tenant": "t4", "ip": "198.51.100.10", "method": "GET", "path": "/api/x" });
    assert_eq!(
        server.check("plans", read).await.json["limits"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let write =
        json!({ "tenant": "t4", "ip": "198.51.100.10", "method": "POST", "path": "/api/x" });
    assert_eq!(
        server.check("plans", write).await.json["limits"]
            .as_array()
            .unwrap()
            .len(),
        2
    );

    // Only POST /login counts; other requests are allowed and say why.
    for _ in 0..8 {
        let get = login(server, "GET", "192.0.2.1").await;
        assert_eq!(get.status, 200);
        assert!(
            get.json["reason"]
                .as_str()
                .unwrap()
                .contains("`when` does not hold")
        );
    }
    for remaining in (0..5).rev() {
        let post = login(server, "POST", "192.0.2.1").await;
        assert_eq!(
            (post.status, post.json["remaining"].as_u64()),
            (200, Some(remaining))
        );
    }
    assert_eq!(login(server, "POST", "192.0.2.1").await.status, 429);

    // One /64 is one client, whichever address of it asks.
    for i in 0..5 {
        let ip = format!("2001:db8:1:2::{i:x}");
        assert_eq!(login(server, "POST", &ip).await.status, 200, "{ip}");
    }
    assert_eq!(
        login(server, "POST", "2001:db8:1:2:ffff::1").await.status,
        429
    );
    assert_eq!(
        login(server, "POST", "2001:db8:1:3::1").await.status,
        200,
        "another /64"
    );

    // Forward-auth: `X-Sluice-*` headers are attributes the overrides read.
    let auth = |tenant: &'static str, plan: &'static str| {
        server.send(
            server
                .http
                .get(server.url("/v1/auth/plans"))
                .header("x-sluice-tenant", tenant)
                .header("x-sluice-plan", plan),
        )
    };
    let answer = auth("t5", "pro").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.header("x-ratelimit-limit"), Some("1000"));
    let answer = auth("partner-a", "free").await;
    assert_eq!(answer.status, 200);
    assert_eq!(
        answer.header("x-ratelimit-limit"),
        None,
        "unlimited: no limit reported"
    );
}

#[tokio::test]
async fn every_need_of_the_example_on_the_memory_store() {
    every_need(&Server::start(EXAMPLE)).await;
}

#[tokio::test]
async fn every_need_of_the_example_on_redis() {
    let redis = RedisServer::start();
    let server = Server::start_on(EXAMPLE, &redis.url());
    every_need(&server).await;
    // Redis' work per decision: one script call for a tier, as for the limit's own numbers; none
    // for a refusal, an allowlisted tenant or a request the rule's condition leaves out.
    let cases = [
        ("plans", json!({ "tenant": "t6", "ip": "198.51.100.7" }), 1),
        (
            "plans",
            json!({ "tenant": "t6", "plan": "pro", "ip": "198.51.100.7" }),
            1,
        ),
        ("plans", json!({ "tenant": "t6", "ip": "203.0.113.1" }), 0),
        (
            "plans",
            json!({ "tenant": "monitoring", "ip": "198.51.100.7" }),
            0,
        ),
        (
            "login_form",
            json!({ "method": "GET", "path": "/login", "ip": "192.0.2.9" }),
            0,
        ),
    ];
    for (rule, attributes, calls) in cases {
        let before = script_calls(&redis);
        server.check(rule, attributes.clone()).await;
        assert_eq!(script_calls(&redis) - before, calls, "{rule} {attributes}");
    }
}

/// The script calls Redis has answered (`EVALSHA` and `EVAL`, failed ones included: a first call
/// may find its script not loaded yet and repeat itself, which only the first decision does).
fn script_calls(redis: &RedisServer) -> u64 {
    let stats = redis.cli(&["INFO", "commandstats"]);
    ["cmdstat_evalsha:", "cmdstat_eval:"]
        .iter()
        .filter_map(|prefix| stats.lines().find_map(|l| l.strip_prefix(prefix)))
        .filter_map(|line| line.split(',').find_map(|f| f.strip_prefix("calls=")))
        .map(|n| n.parse::<u64>().expect("a count"))
        .sum()
}

/// `/v1/rules` without the admin token names the attributes conditions test, not the values: an
/// allow-list of partners or a range that is refused is not for every caller to read.
#[tokio::test]
async fn rules_show_condition_values_only_to_an_administrator() {
    let server = Server::start(EXAMPLE);
    let public = server.get("/v1/rules").await;
    assert_eq!(public.status, 200);
    let text = public.json.to_string();
    for secret in ["partner-a", "203.0.113.0/24", "monitoring"] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    assert!(text.contains(r#""tenant":["***","***","***"]"#), "{text}");
    for token in [None, Some("wrong")] {
        let answer = server
            .admin(reqwest::Method::GET, "/v1/rules", "", token)
            .await;
        assert!(!answer.json.to_string().contains("partner-a"));
    }
    let admin = server
        .admin(reqwest::Method::GET, "/v1/rules", "", Some(ADMIN_TOKEN))
        .await;
    assert!(admin.json.to_string().contains("partner-a"), "{admin:?}");
}
