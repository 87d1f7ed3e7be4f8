//! A billing day per identity through the binary, on the memory store and on a real
//! `redis-server`: `sluice limits set --anchor` moves one tenant's month to its own day over
//! `PUT /v1/limits`, keeping what it used; its decisions, `Retry-After` and `GET /v1/usage`
//! follow that day while other tenants keep the rule's; the listing shows the day; removing the
//! entry goes back to the rule's day, keeping the count. (Month ends and changes at a given
//! instant are decided with an injected clock by the conformance suite, on every store.)

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{ADMIN_TOKEN, Server, sluice};
use serde_json::{Value, json};
use sluice::model::{Period, PeriodUnit};
use sluice_test_support::RedisServer;

const CONFIG: &str = "\
admin_token_env: SLUICE_ADMIN_TOKEN
rules:
  plan:
    limits:
      - { by: [tenant], quota: 3, period: month, settable: true }
";

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// The month from day `anchor` that holds `at_ms`: its start and end, in ms.
fn month(anchor: u8, at_ms: u64) -> (u64, u64) {
    let period = Period::new(PeriodUnit::Month).anchored(anchor).unwrap();
    let bounds = period.bounds_at(sluice::Micros::new(at_ms * 1000));
    (bounds.start.as_millis(), bounds.end.as_millis())
}

/// Tenant `t`'s usage of the plan: (used, period start, period end, at), in ms.
async fn usage(server: &Server, t: &str) -> (u64, u64, u64, u64) {
    let a = server
        .get(&format!(
            "/v1/usage?rule=plan&attributes=%7B%22tenant%22%3A%22{t}%22%7D"
        ))
        .await;
    assert_eq!(a.status, 200, "{a:?}");
    let limit = &a.json["limits"][0];
    let number = |v: &Value| v.as_u64().unwrap();
    (
        number(&limit["used"]),
        number(&limit["period_start_ms"]),
        number(&limit["period_end_ms"]),
        number(&a.json["at_ms"]),
    )
}

/// `sluice limits <args>` against `server`: exit code, stdout, stderr.
fn limits(server: &Server, args: &[&str]) -> (Option<i32>, String, String) {
    let out = sluice()
        .args(["limits", "--url", &server.base])
        .args(args)
        .env("SLUICE_ADMIN_TOKEN", ADMIN_TOKEN)
        .env_remove("SLUICE_URL")
        .output()
        .expect("the sluice binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).to_string(),
        String::from_utf8_lossy(&out.stderr).to_string(),
    )
}

async fn billing_day(server: &Server) {
    for t in ["t1", "t2"] {
        for _ in 0..2 {
            let a = server.check("plan", json!({ "tenant": t })).await;
            assert_eq!(a.status, 200, "{a:?}");
        }
    }
    let (code, out, err) = limits(server, &["set", "plan", "--anchor", "15", "tenant=t1"]);
    assert_eq!(code, Some(0), "{err}");
    let set: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(
        set,
        json!({ "rule": "plan", "limit": "tenant-quota-month", "identity": "tenant=t1",
                "anchor": 15 }),
        "the day alone: the rule's quota keeps applying"
    );
    // What t1 used this month came along to the month from the 15th.
    let (used, start, end, at) = usage(server, "t1").await;
    assert_eq!((used, (start, end)), (2, month(15, at)));
    let (used, start, end, at) = usage(server, "t2").await;
    assert_eq!((used, (start, end)), (2, month(1, at)));

    let before = now_ms();
    let last = server.check("plan", json!({ "tenant": "t1" })).await;
    assert_eq!(
        (last.status, &last.json["limit"]),
        (200, &json!(3)),
        "{last:?}"
    );
    let denied = server.check("plan", json!({ "tenant": "t1" })).await;
    let after = now_ms();
    assert_eq!(denied.status, 429, "{denied:?}");
    let retry_ms = denied.json["retry_after_ms"].as_u64().unwrap();
    let (ends_by, ends_from) = (month(15, before).1 - before, month(15, after).1 - after);
    assert!(
        ends_from.saturating_sub(1000) <= retry_ms && retry_ms <= ends_by + 1000,
        "{retry_ms} ms to the 15th, expected between {ends_from} and {ends_by}"
    );
    let retry_after: u64 = denied.header("retry-after").unwrap().parse().unwrap();
    assert!(retry_after.abs_diff(retry_ms / 1000) <= 1, "{denied:?}");

    let (code, out, _) = limits(server, &["list", "plan"]);
    assert_eq!(code, Some(0));
    let list: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(list["limits"][0]["anchor"], 15, "{out}");
    let (code, _, err) = limits(server, &["set", "plan", "--anchor", "32", "tenant=t1"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("invalid_runtime_limit") && err.contains("anchor") && err.contains("1 to 31"),
        "{err}"
    );
    let (code, _, err) = limits(server, &["set", "plan", "--rate", "5/1d", "tenant=t1"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("takes `quota`"), "{err}");

    // Its own quota with its day, then back to the rule's day and quota: the count stays.
    let (code, out, err) = limits(
        server,
        &["set", "plan", "--quota", "5", "--anchor", "15", "tenant=t1"],
    );
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains(r#""quota": 5"#), "{out}");
    let a = server.check("plan", json!({ "tenant": "t1" })).await;
    assert_eq!((a.status, &a.json["remaining"]), (200, &json!(1)), "{a:?}");
    let (code, _, _) = limits(server, &["remove", "plan", "tenant=t1"]);
    assert_eq!(code, Some(0));
    let (used, start, end, at) = usage(server, "t1").await;
    assert_eq!((used, (start, end)), (4, month(1, at)));
    let (code, _, _) = limits(server, &["get", "plan", "tenant=t1"]);
    assert_eq!(code, Some(1));
}

#[tokio::test]
async fn a_tenant_bills_from_its_own_day_on_the_memory_store() {
    billing_day(&Server::start(CONFIG)).await;
}

#[tokio::test]
async fn a_tenant_bills_from_its_own_day_on_redis() {
    let redis = RedisServer::start();
    billing_day(&Server::start_on(CONFIG, &redis.url())).await;
}
