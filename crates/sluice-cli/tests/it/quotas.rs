//! Quotas through the binary over HTTP, on the memory store and on a real `redis-server`: a
//! daily quota in a zone far from UTC counts until that zone's midnight, a monthly one until its
//! anchor day, the rule listing shows them as they were written, and a period the binary cannot
//! read is refused at start-up naming its field. (Month ends, 29 February and daylight-saving
//! days are decided with an injected clock by the conformance suite, on every store.)

use crate::common;

use std::time::{SystemTime, UNIX_EPOCH};

use common::{Server, TempDir, sluice};
use serde_json::json;
use sluice::model::{Period, PeriodUnit};
use sluice_test_support::RedisServer;

const CONFIG: &str = "\
rules:
  plan:
    limits:
      - { by: [tenant], quota: 3, period: day, timezone: Pacific/Auckland }
  billing:
    limits:
      - by: [tenant]
        quota: 1000
        period: month
        anchor: 31
        overrides:
          - { when: { plan: pro }, quota: 100000 }
  metered:
    limits:
      - { by: [tenant], quota: 1, period: month, over: allow }
";

/// `text` as one query-string value.
fn urlencoding(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

/// Milliseconds from `now_ms` to the end of the period of `period` that holds it.
fn left_ms(period: &Period, now_ms: u64) -> u64 {
    let end = period
        .bounds_at(sluice::Micros::new(now_ms * 1000))
        .end
        .as_millis();
    end - now_ms
}

async fn quotas(server: &Server) {
    let auckland = Period::new(PeriodUnit::Day)
        .in_zone("Pacific/Auckland")
        .unwrap();
    let before = now_ms();
    for remaining in [2, 1, 0] {
        let a = server.check("plan", json!({ "tenant": "t1" })).await;
        assert_eq!(
            (a.status, a.json["remaining"].as_u64()),
            (200, Some(remaining)),
            "{a:?}"
        );
    }
    let denied = server.check("plan", json!({ "tenant": "t1" })).await;
    let after = now_ms();
    assert_eq!(denied.status, 429, "{denied:?}");
    // The wait runs to Auckland's next midnight, as the clocks read before and after.
    let retry_ms = denied.json["retry_after_ms"].as_u64().unwrap();
    let (most, least) = (left_ms(&auckland, before), left_ms(&auckland, after));
    assert!(
        least.saturating_sub(1000) <= retry_ms && retry_ms <= most + 1000,
        "{retry_ms} ms, expected between {least} and {most}"
    );
    assert!(retry_ms <= 25 * 3_600_000);
    // Another tenant has its own quota.
    let other = server.check("plan", json!({ "tenant": "t2" })).await;
    assert_eq!(other.status, 200);

    // Usage, read without consuming: the day in Auckland, used up.
    let t1 = format!(
        "/v1/usage?rule=plan&attributes={}",
        urlencoding(&json!({ "tenant": "t1" }).to_string())
    );
    let usage = server.get(&t1).await;
    assert_eq!(usage.status, 200, "{usage:?}");
    let limit = &usage.json["limits"][0];
    assert_eq!(
        (
            &limit["id"],
            &limit["limit"],
            &limit["used"],
            &limit["remaining"],
            &limit["over"]
        ),
        (
            &json!("tenant-quota-day"),
            &json!(3),
            &json!(3),
            &json!(0),
            &json!(true)
        ),
        "{usage:?}"
    );
    let at = usage.json["at_ms"].as_u64().unwrap();
    let bounds = auckland.bounds_at(sluice::Micros::new(at * 1000));
    assert_eq!(limit["period_start_ms"], bounds.start.as_millis());
    assert_eq!(limit["period_end_ms"], bounds.end.as_millis());
    assert_eq!(
        server.get(&t1).await.json["limits"][0]["used"],
        3,
        "reading consumed nothing"
    );
    let other = server
        .get("/v1/usage?rule=plan&attributes=%7B%22tenant%22%3A%22t2%22%7D")
        .await;
    assert_eq!(
        (
            &other.json["limits"][0]["used"],
            &other.json["limits"][0]["over"]
        ),
        (&json!(1), &json!(false))
    );
    // Bad input is a clear error and reads nothing.
    for (query, status, code) in [
        ("/v1/usage?rule=nope&attributes=%7B%7D", 404, "unknown_rule"),
        ("/v1/usage?rule=plan", 400, "missing_attribute"),
        ("/v1/usage?rule=plan&attributes=%5B1%5D", 400, "bad_query"),
        ("/v1/usage?attributes=%7B%7D", 400, "bad_query"),
    ] {
        let answer = server.get(query).await;
        assert_eq!(
            (answer.status, answer.code()),
            (status, code),
            "{query}: {answer:?}"
        );
    }
    // The command line reads the same, and says by its exit code that the tenant is over.
    let out = tokio::process::Command::from(sluice())
        .args(["usage", "--url", &server.url(""), "plan", "tenant=t1"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let printed: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(printed["limits"][0]["used"], 3);
    let out = tokio::process::Command::from(sluice())
        .args(["usage", "--url", &server.url(""), "plan", "tenant=t2"])
        .output()
        .await
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // A month from the 31st: on the 30-day months and February it begins on their last day.
    let billing = Period::new(PeriodUnit::Month).anchored(31).unwrap();
    let before = now_ms();
    let a = server.check("billing", json!({ "tenant": "t1" })).await;
    let after = now_ms();
    assert_eq!((a.status, a.json["remaining"].as_u64()), (200, Some(999)));
    let reset_ms = a.json["reset_after_ms"].as_u64().unwrap();
    assert!(
        left_ms(&billing, after).saturating_sub(1000) <= reset_ms
            && reset_ms <= left_ms(&billing, before) + 1000,
        "{reset_ms}"
    );

    // The pro plan's quota, on the same count.
    let pro = server
        .check("billing", json!({ "tenant": "t1", "plan": "pro" }))
        .await;
    assert_eq!(
        (
            pro.status,
            pro.json["limit"].as_u64(),
            pro.json["remaining"].as_u64()
        ),
        (200, Some(100_000), Some(99_998)),
        "{pro:?}"
    );

    // Past a quota that admits past itself: admitted, marked, counted for billing.
    let first = server.check("metered", json!({ "tenant": "t1" })).await;
    assert_eq!((first.status, first.json.get("over_quota")), (200, None));
    assert_eq!(first.header("sluice-over-quota"), None);
    for used in 2..=3 {
        let over = server.check("metered", json!({ "tenant": "t1" })).await;
        assert_eq!(over.status, 200, "{over:?}");
        assert_eq!(over.json["over_quota"], true);
        assert_eq!(over.json["limits"][0]["over_quota"], true);
        assert_eq!(over.json["limits"][0]["shadow"], false);
        assert_eq!(over.header("sluice-over-quota"), Some("true"));
        let read = server
            .get("/v1/usage?rule=metered&attributes=%7B%22tenant%22%3A%22t1%22%7D")
            .await;
        assert_eq!(read.json["limits"][0]["used"], used, "{read:?}");
    }
    let series = "sluice_decisions_total{rule=\"metered\",outcome=\"over_quota\"} ";
    assert_eq!(server.metric(series).await, 2.0);

    // The rules in force, as written.
    let rules = server.get("/v1/rules").await;
    let plan = &rules.json["rules"]["plan"]["limits"][0];
    assert_eq!(plan["quota"], 3, "{rules:?}");
    assert_eq!(
        (&plan["period"], &plan["timezone"]),
        (&json!("day"), &json!("Pacific/Auckland"))
    );
    let billing = &rules.json["rules"]["billing"]["limits"][0];
    assert_eq!(billing["anchor"], 31);
    assert_eq!(billing["overrides"][0]["quota"], 100_000);
    assert_eq!(rules.json["rules"]["metered"]["limits"][0]["over"], "allow");
}

#[tokio::test]
async fn quotas_count_per_calendar_period_on_the_memory_store() {
    quotas(&Server::start(CONFIG)).await;
}

#[tokio::test]
async fn quotas_count_per_calendar_period_on_redis() {
    let redis = RedisServer::start();
    quotas(&Server::start_on(CONFIG, &redis.url())).await;
}

/// The book's free and pro plans (concepts/quotas.md), as written there.
#[tokio::test]
async fn the_books_plans_count_as_the_book_says() {
    let chapter = sluice_test_support::docs::chapter("concepts/quotas.md");
    let yaml = chapter
        .split("```yaml\n")
        .nth(1)
        .and_then(|s| s.split("```").next())
        .expect("the chapter's rule file");
    let server = Server::start(yaml);
    let free = server.check("api", json!({ "tenant": "t1" })).await;
    assert_eq!(
        (
            free.status,
            free.json["limit"].as_u64(),
            free.json["remaining"].as_u64()
        ),
        (200, Some(10_000), Some(9_999))
    );
    let month = Period::new(PeriodUnit::Month)
        .in_zone("Europe/Berlin")
        .unwrap()
        .anchored(15)
        .unwrap();
    let reset_ms = free.json["reset_after_ms"].as_u64().unwrap();
    let left = left_ms(&month, now_ms());
    assert!(
        reset_ms >= left && reset_ms <= left + 60_000,
        "{reset_ms} vs {left}"
    );
    let pro = json!({ "tenant": "t1", "plan": "pro" });
    let pro = server.check("api", pro).await;
    assert_eq!(
        (pro.json["limit"].as_u64(), pro.json["remaining"].as_u64()),
        (Some(1_000_000), Some(999_998)),
        "the month's use so far counts on the pro plan"
    );
    let export = server.check("exports", json!({ "member": "m1" })).await;
    assert_eq!(export.json["limit"], 500);
}

#[test]
fn a_period_the_binary_cannot_read_is_refused_naming_its_field() {
    let dir = TempDir::new();
    let path = dir.write(
        "bad.yaml",
        "rules:\n  plan:\n    limits:\n      - { by: [t], quota: 5, period: day, timezone: Mars/Olympus }\n",
    );
    let out = sluice().arg("validate").arg(&path).output().unwrap();
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        text.contains("limits[0].timezone") && text.contains("Mars/Olympus"),
        "{text}"
    );
}
