//! Property-based fuzzing of the service's request decoding, through the real binary: any body
//! sent to `/v1/check` or `/v1/peek` gets an answer within a bounded time — a decision, or a 4xx
//! with a JSON error — never a server error, and the service keeps deciding afterwards. Bodies of
//! `/v1/release`, `/v1/renew` and `/v1/settle` made from real ids with a few bytes changed end no
//! lease and settle no reservation.
//!
//! `SLUICE_FUZZ_CASES` cases (default 256); a longer run:
//! `SLUICE_FUZZ_CASES=100000 cargo test -p sluice-ratelimit-cli --test it fuzz_http::`.

use crate::common;

use std::time::{Duration, Instant};

use common::{CONFIG, Server};
use proptest::prelude::*;
use proptest::test_runner::{Config as ProptestConfig, TestRunner};
use serde_json::json;

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(256)
}

/// Valid bodies with a few bytes changed, JSON-looking text, and arbitrary bytes.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let valid = prop_oneof![
        Just(r#"{"rule":"employee","attributes":{"id":"42"}}"#),
        Just(r#"{"rule":"pair","attributes":{"member":"m1","ip":"203.0.113.9"},"cost":2}"#),
        Just(r#"{"rule":"login","attributes":{"ip":"::1"},"cost":0}"#),
    ];
    let mutated = (
        valid,
        prop::collection::vec(
            (any::<prop::sample::Index>(), any::<u8>(), any::<bool>()),
            1..5,
        ),
    )
        .prop_map(|(text, edits)| {
            let mut bytes = text.as_bytes().to_vec();
            for (at, byte, insert) in edits {
                let at = at.index(bytes.len() + 1);
                if insert || at == bytes.len() {
                    bytes.insert(at, byte);
                } else {
                    bytes[at] = byte;
                }
            }
            bytes
        });
    let jsonish = proptest::string::string_regex(
        r#"[{}\[\]":,0-9a-z\-.eE ]{0,40}|\{"rule":"[a-z]{0,8}","attributes":\{("[a-z]{0,4}":("[ -~]{0,8}"|[0-9.e\-]{1,30}|null|\[\]|\{\}),?){0,3}\}(,"cost":[0-9.e\-]{0,30})?\}"#,
    )
    .unwrap()
    .prop_map(String::into_bytes);
    prop_oneof![
        4 => mutated,
        4 => jsonish,
        1 => prop::collection::vec(any::<u8>(), 0..200),
    ]
}

#[test]
fn any_body_gets_a_decision_or_a_clear_refusal_and_never_a_server_error() {
    let server = Server::start(CONFIG);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut runner = TestRunner::new(ProptestConfig::with_cases(cases()));
    runner
        .run(&(body(), any::<bool>()), |(body, peek)| {
            let path = if peek { "/v1/peek" } else { "/v1/check" };
            let start = Instant::now();
            let (status, text) = runtime.block_on(async {
                let response = server
                    .http
                    .post(server.url(path))
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .expect("the service answers");
                (response.status().as_u16(), response.text().await.unwrap())
            });
            prop_assert!(start.elapsed() < Duration::from_secs(2));
            prop_assert!(
                matches!(status, 200 | 400 | 404 | 413 | 415 | 422 | 429),
                "{status} for {:?}: {text}",
                String::from_utf8_lossy(&body)
            );
            let answer: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| TestCaseError::fail(format!("not JSON ({e}): {text}")))?;
            if status >= 400 && status != 429 {
                let error = answer["error"]["message"].as_str().unwrap_or_default();
                prop_assert!(!error.is_empty() && error.len() < 1000, "{text}");
                let code = answer["error"]["code"].as_str().unwrap_or_default();
                prop_assert!(!code.is_empty(), "a code in {text}");
            }
            Ok(())
        })
        .unwrap();
    let after = runtime.block_on(server.check("employee", json!({ "id": "after" })));
    assert_eq!(after.status, 200, "{after:?}");
}

/// An id without its units (`<token>:<units>:<rule>:…` → `<token>:<rule>:…`).
fn without_units(id: &str) -> String {
    let mut parts: Vec<&str> = id.split(':').collect();
    if parts.len() > 2 {
        parts.remove(1);
    }
    parts.join(":")
}

/// `text` with one to four bytes replaced or inserted.
fn mutate(text: String) -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        (any::<prop::sample::Index>(), any::<u8>(), any::<bool>()),
        1..5,
    )
    .prop_map(move |edits| {
        let mut bytes = text.as_bytes().to_vec();
        for (at, byte, insert) in edits {
            let at = at.index(bytes.len() + 1);
            if insert || at == bytes.len() {
                bytes.insert(at, byte);
            } else {
                bytes[at] = byte;
            }
        }
        bytes
    })
}

/// Release, renew and settle bodies made from real ids with a few bytes changed: each gets an
/// answer (200, or a 4xx with a JSON error) within a bounded time, and none of them ends the
/// lease or settles the reservation that the unchanged ids name.
#[test]
fn any_lease_or_reservation_body_gets_an_answer_and_ends_nothing_else() {
    let config = format!(
        "{CONFIG}  tokens:\n    limits:\n      - {{ by: [member], rate: 1000/1h, algorithm: token_bucket }}\n"
    );
    let server = Server::start(&config);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let tenant = json!({ "tenant": "t1" });
    let lease = runtime.block_on(server.check("jobs", tenant.clone())).json["lease"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        runtime
            .block_on(server.check("jobs", tenant.clone()))
            .status,
        200
    );
    let reserve =
        json!({ "rule": "tokens", "attributes": { "member": "m1" }, "cost": 100, "reserve": true });
    let reservation = runtime
        .block_on(server.post("/v1/check", &reserve.to_string()))
        .json["reservation"]
        .as_str()
        .unwrap()
        .to_string();
    let bodies = [
        ("/v1/release", json!({ "lease": lease }).to_string()),
        ("/v1/renew", json!({ "lease": lease }).to_string()),
        (
            "/v1/settle",
            json!({ "reservation": reservation, "cost": 0 }).to_string(),
        ),
    ];
    let strategy = (0..bodies.len()).prop_flat_map(move |i| {
        let (path, body) = bodies[i].clone();
        mutate(body).prop_map(move |bytes| (path, bytes))
    });
    let mut runner = TestRunner::new(ProptestConfig::with_cases(cases()));
    runner
        .run(&strategy, |(path, body)| {
            // A change that leaves the id naming the same lease or reservation (spacing, an
            // escape, or its units, which are there to be read: the token and the limits find
            // it) is the real request.
            if let Ok(parsed) = serde_json::from_slice::<serde_json::Value>(&body) {
                let id = parsed.get("lease").or_else(|| parsed.get("reservation"));
                let id = id.and_then(|v| v.as_str()).map(without_units);
                prop_assume!(id.as_deref() != Some(without_units(&lease).as_str()));
                prop_assume!(id.as_deref() != Some(without_units(&reservation).as_str()));
            }
            let start = Instant::now();
            let (status, text) = runtime.block_on(async {
                let response = server
                    .http
                    .post(server.url(path))
                    .header("content-type", "application/json")
                    .body(body.clone())
                    .send()
                    .await
                    .expect("the service answers");
                (response.status().as_u16(), response.text().await.unwrap())
            });
            prop_assert!(start.elapsed() < Duration::from_secs(2));
            prop_assert!(
                matches!(status, 200 | 400 | 404 | 413 | 415 | 422),
                "{status} for {path} {:?}: {text}",
                String::from_utf8_lossy(&body)
            );
            let answer: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| TestCaseError::fail(format!("not JSON ({e}): {text}")))?;
            if status == 200 {
                prop_assert!(
                    answer == json!({ "released": false })
                        || answer == json!({ "renewed": false })
                        || answer == json!({ "settled": false }),
                    "{path} {:?}: {text}",
                    String::from_utf8_lossy(&body)
                );
            } else {
                let error = answer["error"]["message"].as_str().unwrap_or_default();
                prop_assert!(!error.is_empty() && error.len() < 1000, "{text}");
                let code = answer["error"]["code"].as_str().unwrap_or_default();
                prop_assert!(!code.is_empty(), "a code in {text}");
            }
            Ok(())
        })
        .unwrap();
    assert_eq!(
        runtime.block_on(server.check("jobs", tenant)).status,
        429,
        "both leases are still held"
    );
    let settled = runtime.block_on(server.post(
        "/v1/settle",
        &json!({ "reservation": reservation, "cost": 0 }).to_string(),
    ));
    assert_eq!(
        settled.json,
        json!({ "settled": true }),
        "not settled before"
    );
}
