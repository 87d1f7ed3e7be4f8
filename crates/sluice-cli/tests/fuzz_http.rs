//! Property-based fuzzing of the service's request decoding, through the real binary: any body
//! sent to `/v1/check` or `/v1/peek` gets an answer within a bounded time — a decision, or a 4xx
//! with a JSON error — never a server error, and the service keeps deciding afterwards.
//!
//! `SLUICE_FUZZ_CASES` cases (default 256); a longer run:
//! `SLUICE_FUZZ_CASES=100000 cargo test -p sluice-cli --test fuzz_http`.

mod common;

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
                let error = answer["error"].as_str().unwrap_or_default();
                prop_assert!(!error.is_empty() && error.len() < 1000, "{text}");
            }
            Ok(())
        })
        .unwrap();
    let after = runtime.block_on(server.check("employee", json!({ "id": "after" })));
    assert_eq!(after.status, 200, "{after:?}");
}
