//! Admin endpoints of the real binary: bearer-token guard and reset / block / unblock / list.

use crate::common;

use common::{ADMIN_TOKEN, CONFIG, Options, Server};
use reqwest::Method;
use serde_json::json;

#[tokio::test]
async fn admin_routes_are_off_without_a_token() {
    let server = Server::start_with(
        CONFIG,
        "sluice.yaml",
        Options {
            admin_token: None,
            ..Options::default()
        },
    );
    for (method, path) in [
        (Method::GET, "/v1/blocks"),
        (Method::POST, "/v1/blocks"),
        (Method::DELETE, "/v1/blocks"),
        (Method::POST, "/v1/reset"),
    ] {
        let a = server.admin(method, path, "{}", Some("anything")).await;
        assert_eq!(a.status, 404, "{path}: {a:?}");
        assert_eq!(a.code(), "admin_disabled");
        assert!(
            a.error().contains("admin endpoints are off"),
            "{}",
            a.error()
        );
    }
    // Decisions still work.
    assert_eq!(
        server.check("employee", json!({ "id": "1" })).await.status,
        200
    );
}

#[tokio::test]
async fn admin_routes_need_the_right_bearer_token() {
    let server = Server::start(CONFIG);
    let a = server.admin(Method::GET, "/v1/blocks", "", None).await;
    assert_eq!(a.status, 401);
    assert_eq!(a.header("www-authenticate"), Some("Bearer"));
    assert_eq!(a.code(), "unauthorized");
    assert!(a.error().contains("Bearer"));
    let a = server
        .admin(Method::GET, "/v1/blocks", "", Some("wrong"))
        .await;
    assert_eq!(a.status, 401);
    assert!(a.error().contains("wrong admin token"));
    let a = server
        .admin(
            Method::POST,
            "/v1/reset",
            r#"{"rule":"login","attributes":{"ip":"1"}}"#,
            Some(&format!("{ADMIN_TOKEN}x")),
        )
        .await;
    assert_eq!(a.status, 401);
    let basic = server
        .send(
            server
                .http
                .get(server.url("/v1/blocks"))
                .basic_auth("admin", Some(ADMIN_TOKEN)),
        )
        .await;
    assert_eq!(basic.status, 401);
    let a = server
        .admin(Method::GET, "/v1/blocks", "", Some(ADMIN_TOKEN))
        .await;
    assert_eq!(a.status, 200);
    assert_eq!(a.json, json!({ "blocks": [], "next": null, "skipped": 0 }));
}

#[tokio::test]
async fn blocks_can_be_listed_lifted_set_and_identities_reset() {
    let server = Server::start(CONFIG);
    let token = Some(ADMIN_TOKEN);
    let ip = json!({ "ip": "203.0.113.9" });
    for _ in 0..2 {
        assert_eq!(server.check("login", ip.clone()).await.status, 200);
    }
    let denied = server.check("login", ip.clone()).await;
    assert_eq!(denied.status, 429);
    let until = denied.json["blocked_until_ms"].as_u64().unwrap();

    let listed = server
        .admin(Method::GET, "/v1/blocks?rule=login", "", token)
        .await;
    assert_eq!(listed.status, 200, "{listed:?}");
    let blocks = listed.json["blocks"].as_array().unwrap();
    assert_eq!(blocks.len(), 1, "{listed:?}");
    assert_eq!(blocks[0]["rule"], "login");
    assert_eq!(blocks[0]["limit"], "per_ip");
    assert_eq!(blocks[0]["blocked_until_ms"], until);
    let all = server.admin(Method::GET, "/v1/blocks", "", token).await;
    assert_eq!(all.json["blocks"].as_array().unwrap().len(), 1);

    let body = json!({ "rule": "login", "attributes": ip }).to_string();
    let lifted = server
        .admin(Method::DELETE, "/v1/blocks", &body, token)
        .await;
    assert_eq!(lifted.json, json!({ "rule": "login", "unblocked": true }));
    let again = server
        .admin(Method::DELETE, "/v1/blocks", &body, token)
        .await;
    assert_eq!(again.json["unblocked"], false);
    let listed = server
        .admin(Method::GET, "/v1/blocks?rule=login", "", token)
        .await;
    assert_eq!(
        listed.json,
        json!({ "blocks": [], "next": null, "skipped": 0 })
    );

    let reset = server.admin(Method::POST, "/v1/reset", &body, token).await;
    assert_eq!(reset.json, json!({ "rule": "login", "reset": true }));
    assert_eq!(server.check("login", ip.clone()).await.status, 200);

    let block = json!({ "rule": "employee", "attributes": { "id": "7" }, "duration": "15m" });
    let set = server
        .admin(Method::POST, "/v1/blocks", &block.to_string(), token)
        .await;
    assert_eq!(set.status, 200, "{set:?}");
    let until = set.json["blocked_until_ms"].as_u64().unwrap();
    let blocked = server.check("employee", json!({ "id": "7" })).await;
    assert_eq!(blocked.status, 429);
    assert_eq!(blocked.json["blocked_until_ms"], until);
}

#[tokio::test]
async fn bad_admin_input_is_a_json_4xx() {
    let server = Server::start(CONFIG);
    let token = Some(ADMIN_TOKEN);
    let cases = [
        (
            Method::POST,
            "/v1/blocks",
            r#"{"rule":"employee","attributes":{"id":"1"},"duration":"soon"}"#,
            400,
            "`duration`",
        ),
        (
            Method::POST,
            "/v1/blocks",
            r#"{"rule":"employee","attributes":{"id":"1"},"duration":"400d"}"#,
            400,
            "366d",
        ),
        (
            Method::POST,
            "/v1/blocks",
            r#"{"rule":"employee","attributes":{"id":"1"}}"#,
            400,
            "missing field `duration`",
        ),
        (
            Method::POST,
            "/v1/reset",
            r#"{"rule":"nope","attributes":{"id":"1"}}"#,
            404,
            "unknown rule",
        ),
        (
            Method::POST,
            "/v1/reset",
            r#"{"rule":"employee","attributes":{}}"#,
            400,
            "needs attribute `id`",
        ),
        (
            Method::DELETE,
            "/v1/blocks",
            "not json",
            400,
            "invalid JSON",
        ),
        (Method::GET, "/v1/blocks?rule=nope", "", 404, "unknown rule"),
        (
            Method::GET,
            "/v1/blocks?rulez=login",
            "",
            400,
            "query string",
        ),
    ];
    for (method, path, body, status, needle) in cases {
        let a = server.admin(method.clone(), path, body, token).await;
        assert_eq!(a.status, status, "{method} {path} {body}: {a:?}");
        assert!(a.error().contains(needle), "{method} {path}: {}", a.error());
    }
}

/// `GET /v1/blocks` is paged: `count` entries at most, and a `next` cursor that resumes the
/// listing (across rules too) until it is null.
#[tokio::test]
async fn the_blocks_listing_is_paged() {
    let server = Server::start(CONFIG);
    let token = Some(ADMIN_TOKEN);
    for (rule, attributes) in [
        ("employee", json!({ "id": "1" })),
        ("employee", json!({ "id": "2" })),
        ("login", json!({ "ip": "203.0.113.1" })),
        ("login", json!({ "ip": "203.0.113.2" })),
        ("login", json!({ "ip": "203.0.113.3" })),
    ] {
        let block = json!({ "rule": rule, "attributes": attributes, "duration": "15m" });
        let set = server
            .admin(Method::POST, "/v1/blocks", &block.to_string(), token)
            .await;
        assert_eq!(set.status, 200, "{set:?}");
    }
    let mut listed = Vec::new();
    let mut path = "/v1/blocks?count=2".to_string();
    let mut pages = 0;
    loop {
        let page = server.admin(Method::GET, &path, "", token).await;
        assert_eq!(page.status, 200, "{page:?}");
        let blocks = page.json["blocks"].as_array().unwrap();
        assert!(blocks.len() <= 2, "{page:?}");
        for b in blocks {
            listed.push(format!(
                "{}/{}",
                b["rule"].as_str().unwrap(),
                b["identity"].as_str().unwrap()
            ));
        }
        pages += 1;
        match page.json["next"].as_str() {
            Some(next) => {
                let next: String = next.replace(' ', "%20");
                path = format!("/v1/blocks?count=2&cursor={next}");
            }
            None => break,
        }
    }
    listed.sort();
    assert_eq!(
        listed,
        [
            "employee/id=1",
            "employee/id=2",
            "login/ip=203.0.113.1",
            "login/ip=203.0.113.2",
            "login/ip=203.0.113.3"
        ]
    );
    assert!(pages >= 3, "{pages} pages of at most 2");
    for bad in ["count=0", "count=1001", "cursor=nospace"] {
        let answer = server
            .admin(Method::GET, &format!("/v1/blocks?{bad}"), "", token)
            .await;
        assert_eq!(answer.status, 400, "{bad}: {answer:?}");
    }
}
