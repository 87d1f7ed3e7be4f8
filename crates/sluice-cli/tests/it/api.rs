//! The decision API of the real binary: /v1/check, /v1/peek, /v1/rules, health and metrics.

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{CONFIG, Server};
use serde_json::json;

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[tokio::test]
async fn check_allows_then_denies_with_rate_limit_headers() {
    let server = Server::start(CONFIG);
    for i in 0..5u64 {
        let a = server.check("employee", json!({ "id": "42" })).await;
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(a.json["allowed"], true);
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
        assert!(a.header("x-ratelimit-reset").is_some());
        assert_eq!(a.header("retry-after"), None);
        assert!(a.json.get("message").is_none());
    }
    let denied = server.check("employee", json!({ "id": "42" })).await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.json["allowed"], false);
    assert_eq!(denied.json["message"], "slow down");
    let retry_ms = denied.json["retry_after_ms"].as_u64().unwrap();
    assert!(retry_ms > 0 && retry_ms <= 10_000, "{retry_ms}");
    let retry_after: u64 = denied.header("retry-after").unwrap().parse().unwrap();
    assert_eq!(retry_after, retry_ms.div_ceil(1000));
    assert_eq!(denied.header("x-ratelimit-remaining"), Some("0"));
    // Another identity has its own counter.
    let other = server.check("employee", json!({ "id": 43 })).await;
    assert_eq!(other.status, 200);
}

#[tokio::test]
async fn peek_and_cost_zero_consume_nothing() {
    let server = Server::start(CONFIG);
    for _ in 0..10 {
        let a = server
            .post("/v1/peek", r#"{"rule":"employee","attributes":{"id":"p"}}"#)
            .await;
        assert_eq!(
            (a.status, a.json["remaining"].as_u64()),
            (200, Some(5)),
            "{a:?}"
        );
        assert!(a.header("ratelimit").is_some());
        let a = server
            .post(
                "/v1/check",
                r#"{"rule":"employee","attributes":{"id":"p"},"cost":0}"#,
            )
            .await;
        assert_eq!(
            (a.status, a.json["remaining"].as_u64()),
            (200, Some(5)),
            "{a:?}"
        );
    }
    let a = server
        .post(
            "/v1/check",
            r#"{"rule":"employee","attributes":{"id":"p"},"cost":5}"#,
        )
        .await;
    assert_eq!((a.status, a.json["remaining"].as_u64()), (200, Some(0)));
    let a = server
        .post("/v1/peek", r#"{"rule":"employee","attributes":{"id":"p"}}"#)
        .await;
    assert_eq!((a.status, a.json["allowed"].as_bool()), (200, Some(false)));
    assert!(a.header("retry-after").is_some());
    // Above a limit's capacity: denied with a reason, never admitted.
    let a = server
        .post(
            "/v1/check",
            r#"{"rule":"employee","attributes":{"id":"q"},"cost":6}"#,
        )
        .await;
    assert_eq!(a.status, 429);
    assert!(
        a.json["reason"].as_str().unwrap().contains("capacity"),
        "{a:?}"
    );
}

#[tokio::test]
async fn multi_limit_rules_block_locks_shaping_and_disabled_rules() {
    let server = Server::start(CONFIG);
    // member AND ip: the member limit (2) denies first.
    for _ in 0..2 {
        let a = server
            .check("pair", json!({ "member": "m", "ip": "1.1.1.1" }))
            .await;
        assert_eq!(a.status, 200);
    }
    let a = server
        .check("pair", json!({ "member": "m", "ip": "1.1.1.1" }))
        .await;
    assert_eq!(a.status, 429);
    assert_eq!(a.json["limit"], 2);
    let policy = a.header("ratelimit-policy").unwrap();
    assert!(
        policy.contains("\"pair.member-sliding_log-2m\";q=2;w=120"),
        "{policy}"
    );
    assert!(
        policy.contains("\"pair.ip-sliding_log-2m\";q=3;w=120"),
        "{policy}"
    );

    // Block lock: once denied, blocked for 15 minutes, with the end as epoch ms.
    let before = now_ms();
    for _ in 0..2 {
        assert_eq!(
            server
                .check("login", json!({ "ip": "9.9.9.9" }))
                .await
                .status,
            200
        );
    }
    let a = server.check("login", json!({ "ip": "9.9.9.9" })).await;
    assert_eq!(a.status, 429);
    let until = a.json["blocked_until_ms"]
        .as_u64()
        .expect("blocked_until_ms is set");
    assert!(
        until >= before + 15 * 60_000 && until <= now_ms() + 15 * 60_000 + 1000,
        "{until}"
    );

    // Leaky bucket: admitted with a shaping delay as the queue fills.
    let mut delays = Vec::new();
    for _ in 0..5 {
        let a = server.check("shaping", json!({ "tenant": "t" })).await;
        assert_eq!(a.status, 200);
        delays.push(a.json["delay_ms"].as_u64().unwrap());
    }
    assert!(
        delays.windows(2).all(|w| w[0] <= w[1]) && delays[4] > 0,
        "{delays:?}"
    );

    // Disabled rule: allowed without counting.
    for _ in 0..3 {
        let a = server.check("off", json!({ "id": "x" })).await;
        assert_eq!(
            (a.status, a.json["reason"].as_str()),
            (200, Some("rule disabled"))
        );
    }
}

#[tokio::test]
async fn rules_health_readiness_and_metrics() {
    let server = Server::start(CONFIG);
    let rules = server.get("/v1/rules").await;
    assert_eq!(rules.status, 200);
    let version = sha1_smol::Sha1::from(CONFIG.as_bytes())
        .digest()
        .to_string();
    assert_eq!(rules.json["version"], version);
    let loaded = rules.json["loaded_at_ms"].as_u64().unwrap();
    assert!(loaded <= now_ms() && loaded + 60_000 > now_ms());
    assert_eq!(
        rules.json["source"].as_str().unwrap(),
        server.config.display().to_string()
    );
    assert_eq!(
        rules.json["rules"]["employee"]["limits"][0]["rate"],
        "5/10s"
    );
    assert_eq!(rules.json["rules"]["login"]["limit_ids"][0], "per_ip");
    assert_eq!(rules.json["rules"]["off"]["enabled"], false);
    assert_eq!(rules.json["rules"].as_object().unwrap().len(), 7);
    assert_eq!(rules.json["rules"]["jobs"]["limits"][0]["max_leases"], 2);
    assert_eq!(rules.json["rules"]["jobs"]["limits"][0]["lease"], "30s");

    let health = server.get("/healthz").await;
    assert_eq!((health.status, &health.json["status"]), (200, &json!("ok")));
    let ready = server.get("/readyz").await;
    assert_eq!(ready.status, 200);
    assert_eq!(ready.json["store"], "memory");

    for _ in 0..7 {
        server.check("employee", json!({ "id": "noisy" })).await;
    }
    server.check("employee", json!({ "id": "quiet" })).await;
    let metrics = server.get("/metrics").await;
    assert_eq!(metrics.status, 200);
    assert!(
        metrics
            .header("content-type")
            .unwrap()
            .starts_with("text/plain")
    );
    let text = &metrics.text;
    assert!(
        text.contains("sluice_decisions_total{rule=\"employee\",outcome=\"allowed\"} 6"),
        "{text}"
    );
    assert!(
        text.contains("sluice_decisions_total{rule=\"employee\",outcome=\"denied\"} 2"),
        "{text}"
    );
    assert!(text.contains("sluice_store_latency_seconds"), "{text}");
    assert!(
        text.contains("sluice_config_reloads_total{result=\"error\"} 0"),
        "{text}"
    );
    // Identities are hashed by default: printf %s id=noisy | sha1sum | cut -c1-12
    assert!(
        text.contains(
            "sluice_top_denied_identities{rule=\"employee\",identity=\"dab54fc33b31\"} 2"
        ),
        "{text}"
    );
    assert!(!text.contains("noisy"), "{text}");
    assert!(!text.contains("quiet"), "{text}");
}

/// `metrics.top_denied` shows identities raw, or no series at all.
#[tokio::test]
async fn top_denied_identities_can_be_raw_or_off() {
    for (setting, shown) in [("raw", true), ("off", false)] {
        let config = format!("metrics:\n  top_denied: {setting}\n{CONFIG}");
        let server = Server::start(&config);
        for _ in 0..6 {
            server.check("employee", json!({ "id": "noisy" })).await;
        }
        let text = server.get("/metrics").await.text;
        let series = "sluice_top_denied_identities{rule=\"employee\",identity=\"id=noisy\"} 1";
        assert_eq!(text.contains(series), shown, "{setting}: {text}");
        assert_eq!(
            text.contains("sluice_top_denied"),
            shown,
            "{setting}: {text}"
        );
    }
}

#[tokio::test]
async fn bad_input_is_a_json_4xx_naming_the_problem() {
    let server = Server::start(CONFIG);
    let long = "x".repeat(2000);
    let big = format!(
        r#"{{"rule":"employee","attributes":{{"id":"{}"}}}}"#,
        "y".repeat(70_000)
    );
    let cases: Vec<(&str, String, u16, &str)> = vec![
        (
            "malformed JSON",
            r#"{"rule": "employee","#.into(),
            400,
            "invalid JSON",
        ),
        ("not an object", "[1,2]".into(), 400, "invalid JSON"),
        ("empty body", String::new(), 400, "empty"),
        (
            "rule of the wrong type",
            r#"{"rule": 5}"#.into(),
            400,
            "invalid type",
        ),
        (
            "missing rule",
            r#"{"attributes": {}}"#.into(),
            400,
            "missing field `rule`",
        ),
        (
            "unknown field",
            r#"{"rule": "employee", "atributes": {}}"#.into(),
            400,
            "unknown field `atributes`",
        ),
        (
            "attributes of the wrong type",
            r#"{"rule": "employee", "attributes": ["id"]}"#.into(),
            400,
            "invalid type",
        ),
        (
            "attribute value object",
            r#"{"rule": "employee", "attributes": {"id": {"a": 1}}}"#.into(),
            400,
            "attribute `id`",
        ),
        (
            "unknown rule",
            r#"{"rule": "nope", "attributes": {}}"#.into(),
            404,
            "unknown rule `nope`",
        ),
        (
            "missing attribute",
            r#"{"rule": "employee", "attributes": {"ip": "1.1.1.1"}}"#.into(),
            400,
            "needs attribute `id`",
        ),
        (
            "negative cost",
            r#"{"rule": "employee", "attributes": {"id": "1"}, "cost": -1}"#.into(),
            400,
            "`cost`",
        ),
        (
            "fractional cost",
            r#"{"rule": "employee", "attributes": {"id": "1"}, "cost": 1.5}"#.into(),
            400,
            "`cost`",
        ),
        (
            "cost as text",
            r#"{"rule": "employee", "attributes": {"id": "1"}, "cost": "1"}"#.into(),
            400,
            "`cost`",
        ),
        (
            "huge cost",
            r#"{"rule": "employee", "attributes": {"id": "1"}, "cost": 1000000000000}"#.into(),
            400,
            "cost 1000000000000 is above the maximum",
        ),
        (
            "absurd cost",
            r#"{"rule": "employee", "attributes": {"id": "1"}, "cost": 1e300}"#.into(),
            400,
            "`cost`",
        ),
        (
            "identity too long",
            format!(r#"{{"rule": "employee", "attributes": {{"id": "{long}"}}}}"#),
            400,
            "2000 bytes long",
        ),
        ("body too large", big, 413, "larger than 65536 bytes"),
    ];
    for (what, body, status, needle) in cases {
        for path in ["/v1/check", "/v1/peek"] {
            let a = server.post(path, &body).await;
            assert_eq!(a.status, status, "{what} on {path}: {a:?}");
            assert!(
                a.error().contains(needle),
                "{what} on {path}: {}",
                a.error()
            );
            let code = match what {
                "unknown rule" => "unknown_rule",
                "missing attribute" => "missing_attribute",
                "attribute value object" | "identity too long" => "bad_attribute",
                "body too large" => "body_too_large",
                w if w.contains("cost") => "bad_cost",
                _ => "bad_json",
            };
            assert_eq!(a.code(), code, "{what} on {path}: {a:?}");
        }
    }
    let a = server
        .post("/v1/check", r#"{"rule": "nope", "attributes": {}}"#)
        .await;
    assert_eq!(a.json["error"]["rule"], "nope", "the rule it is about");
    let a = server
        .post("/v1/check", r#"{"rule": "employee", "attributes": {}}"#)
        .await;
    assert_eq!(a.json["error"]["attribute"], "id", "{a:?}");
    assert!(
        a.json["error"]["limit_id"]
            .as_str()
            .unwrap()
            .starts_with("id-")
    );
    let a = server.post("/v1/check?view=tiny", "{}").await;
    assert_eq!((a.status, a.code()), (400, "bad_query"));
    let a = server.get("/v1/nothing").await;
    assert_eq!(a.status, 404);
    assert_eq!(a.code(), "not_found");
    assert!(a.error().contains("/v1/nothing"));
    let a = server.get("/v1/check").await;
    assert_eq!(a.status, 405);
    assert_eq!(a.code(), "method_not_allowed");
    assert!(a.error().contains("GET"));
    // The server is still fine.
    assert_eq!(
        server.check("employee", json!({ "id": "ok" })).await.status,
        200
    );
}

#[tokio::test]
async fn header_style_and_the_global_switch_come_from_the_file() {
    let legacy = format!("headers: legacy\n{CONFIG}");
    let server = Server::start(&legacy);
    let a = server.check("employee", json!({ "id": "1" })).await;
    assert_eq!(a.header("ratelimit"), None);
    assert_eq!(a.header("ratelimit-policy"), None);
    assert_eq!(a.header("x-ratelimit-limit"), Some("5"));

    let off = format!("headers: none\nenabled: false\n{CONFIG}");
    let server = Server::start(&off);
    for _ in 0..10 {
        let a = server.check("employee", json!({ "id": "1" })).await;
        assert_eq!(a.status, 200);
        assert_eq!(a.json["reason"], "limiter disabled");
        assert_eq!(a.header("x-ratelimit-limit"), None);
    }
    assert_eq!(server.get("/v1/rules").await.json["enabled"], false);
}

/// A client that needs less than the full decision asks for it: `?view=compact` (the most
/// restrictive limit's numbers) or `?view=headers` (an empty body). The default is the full
/// decision, and an unknown view is a 400 that decides nothing.
#[tokio::test]
async fn check_and_peek_can_answer_in_less() {
    let server = Server::start(CONFIG);
    let body = json!({ "rule": "employee", "attributes": { "id": "7" } }).to_string();
    let full = server.post("/v1/check", &body).await;
    assert_eq!(full.header("content-type"), Some("application/json"));
    assert!(full.json["limits"].is_array(), "{full:?}");

    let compact = server.post("/v1/check?view=compact", &body).await;
    assert_eq!(compact.status, 200);
    assert_eq!(
        compact.json,
        json!({ "allowed": true, "limit": 5, "remaining": 3, "reset_after_ms": compact.json["reset_after_ms"] })
    );
    assert_eq!(compact.header("x-ratelimit-remaining"), Some("3"));

    let peek = server.post("/v1/peek?view=headers", &body).await;
    assert_eq!((peek.status, peek.text.as_str()), (200, ""));
    assert_eq!(
        peek.header("x-ratelimit-remaining"),
        Some("3"),
        "a peek consumes nothing"
    );
    assert_eq!(peek.header("content-type"), None);

    for _ in 0..3 {
        server.post("/v1/check?view=headers", &body).await;
    }
    let denied = server.post("/v1/check?view=compact", &body).await;
    assert_eq!(denied.status, 429);
    assert_eq!(denied.json["allowed"], false);
    assert_eq!(denied.json["message"], "slow down");
    assert!(
        denied.json["retry_after_ms"].as_u64().is_some(),
        "{denied:?}"
    );
    let bare = server.post("/v1/check?view=headers", &body).await;
    assert_eq!((bare.status, bare.text.as_str()), (429, ""));
    assert!(bare.header("retry-after").is_some());

    let other = json!({ "rule": "employee", "attributes": { "id": "8" } }).to_string();
    let bad = server.post("/v1/check?view=tiny", &other).await;
    assert_eq!(bad.status, 400, "{bad:?}");
    let fresh = server.post("/v1/peek", &other).await;
    assert_eq!(
        fresh.json["remaining"], 5,
        "the refused request consumed nothing"
    );
}
