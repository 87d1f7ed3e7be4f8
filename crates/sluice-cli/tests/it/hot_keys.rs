//! Hot keys with real processes on a real Redis: a node killed while it holds a batch loses
//! only the units it held (under-admission within the stated bound, never over the limit), and
//! a node that stops gracefully gives its units back.

use crate::common;

use std::time::Duration;

use common::{ADMIN_TOKEN, Server};
use reqwest::Method;
use serde_json::json;
use sluice_test_support::RedisServer;

/// One limit per algorithm that takes batches, 200 a day (nothing comes back during a test),
/// batches of up to 50 units held for an hour.
const CONFIG: &str = "\
admin_token_env: SLUICE_ADMIN_TOKEN
store:
  timeout: 1s
rules:
  gcra:
    limits:
      - { by: [], rate: 200/1d, algorithm: gcra, batch: { max: 50, hold: 1h } }
  token_bucket:
    limits:
      - { by: [], rate: 200/1d, algorithm: token_bucket, batch: { max: 50, hold: 1h } }
  fixed_window:
    limits:
      - { by: [], rate: 200/1d, algorithm: fixed_window, batch: { max: 50, hold: 1h } }
";

const RULES: [&str; 3] = ["gcra", "token_bucket", "fixed_window"];
const LIMIT: u64 = 200;
const MAX_BATCH: u64 = 50;

/// Checks `rule` on `node` `n` times; returns how many were admitted.
async fn admit(node: &Server, rule: &str, n: usize) -> u64 {
    let mut admitted = 0;
    for _ in 0..n {
        let answer = node.check(rule, json!({})).await;
        assert!(matches!(answer.status, 200 | 429), "{answer:?}");
        admitted += u64::from(answer.status == 200);
    }
    admitted
}

/// Admits on `rule` until the first denial; returns how many were admitted.
async fn drain(node: &Server, rule: &str) -> u64 {
    let mut admitted = 0;
    while node.check(rule, json!({})).await.status == 200 {
        admitted += 1;
        assert!(admitted <= 2 * LIMIT, "{rule}: never denies");
    }
    admitted
}

/// The units `node` holds in batches for `rule`, as `/v1/stats` reports them.
async fn held(node: &Server, rule: &str) -> u64 {
    let stats = node
        .admin(Method::GET, "/v1/stats", "", Some(ADMIN_TOKEN))
        .await;
    stats.json["rules"][rule]["batch"]["held"]
        .as_u64()
        .unwrap_or_else(|| panic!("{rule}: no batch figures in {}", stats.text))
}

#[tokio::test]
async fn a_node_killed_holding_batches_loses_only_what_it_held_and_never_exceeds_the_limit() {
    let redis = RedisServer::start();
    let mut doomed = Server::start_on(CONFIG, &redis.url());
    let survivor = Server::start_on(CONFIG, &redis.url());
    let mut before = Vec::new();
    for rule in RULES {
        // Batches doubling from 2 units: some held, not spent.
        assert_eq!(admit(&doomed, rule, 20).await, 20, "{rule}");
        assert_eq!(admit(&survivor, rule, 5).await, 5, "{rule}");
        before.push((held(&doomed, rule).await, held(&survivor, rule).await));
    }
    // /metrics shows the same units held, and the units taken.
    for (rule, (lost, _)) in RULES.into_iter().zip(&before) {
        let series = |name: &str| format!("{name}{{rule=\"{rule}\"}}");
        let gauge = doomed.metric(&series("sluice_batch_units_held")).await;
        assert_eq!(gauge, *lost as f64, "{rule}");
        let taken = doomed
            .metric(&series("sluice_batch_units_taken_total"))
            .await;
        assert_eq!(taken, (20 + lost) as f64, "{rule}");
    }
    doomed.signal("KILL");
    assert!(!doomed.wait_exit(Duration::from_secs(10)).success());
    for (rule, (lost, kept)) in RULES.into_iter().zip(before) {
        assert!(
            lost > 0 && lost <= MAX_BATCH,
            "{rule}: the killed node held {lost}"
        );
        let admitted = 20 + 5 + drain(&survivor, rule).await;
        // Never over the limit; under it by exactly what the dead node held, within the bound
        // of one batch per node that died.
        assert_eq!(admitted, LIMIT - lost, "{rule}: survivor held {kept}");
        assert!(admitted >= LIMIT - MAX_BATCH, "{rule}");
    }
}

#[tokio::test]
async fn a_node_that_stops_gives_its_batches_back() {
    let redis = RedisServer::start();
    let mut leaving = Server::start_on(CONFIG, &redis.url());
    let staying = Server::start_on(CONFIG, &redis.url());
    for rule in RULES {
        assert_eq!(admit(&leaving, rule, 20).await, 20, "{rule}");
        assert!(held(&leaving, rule).await > 0, "{rule}");
    }
    leaving.signal("TERM");
    assert!(leaving.wait_exit(Duration::from_secs(10)).success());
    // The log's last lines are read by another thread: wait for them.
    let said = |s: &Server| {
        s.log()
            .iter()
            .any(|l| l.contains("gave back the units held in batches"))
    };
    for _ in 0..100 {
        if said(&leaving) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(said(&leaving), "{:?}", leaving.log());
    for rule in RULES {
        assert_eq!(
            20 + drain(&staying, rule).await,
            LIMIT,
            "{rule}: every unit the stopped node did not spend came back"
        );
    }
}
