//! The dashboard in a real browser: headless Chromium loads `/ui` from a running `sluice serve`,
//! signs in with the admin token, shows the decision counts, a block counting down, and lifts it;
//! lists a run-time limit and removes it.
//! A screenshot is kept in `target/tmp/dashboard.png`.

use crate::common;

use std::time::{Duration, Instant};

use common::{ADMIN_TOKEN, Server};
use fantoccini::{Client, Locator};
use reqwest::Method;
use serde_json::json;
use sluice_test_support::Browser;

const CONFIG: &str = "\
admin_token_env: SLUICE_ADMIN_TOKEN
rules:
  login:
    limits:
      - { by: [ip], rate: 3/1m, algorithm: sliding_log, block: 10m }
  api:
    limits:
      - { by: [key], rate: 100/1s, algorithm: gcra, settable: true }
  report:
    limits:
      - { by: [tenant], algorithm: concurrency, max_leases: 3, lease: 10m }
  payments:
    limits:
      - { by: [], rate: 1000/1s, algorithm: gcra, batch: { max: 100, hold: 1h } }
";

/// Polls the text of the first element matching `css` until `done` accepts it (10 s at most).
async fn text_when(page: &Client, css: &str, done: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut last = String::from("(no element)");
    while Instant::now() < deadline {
        if let Ok(element) = page.find(Locator::Css(css)).await
            && let Ok(text) = element.text().await
        {
            if done(&text) {
                return text;
            }
            last = text;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("`{css}` never showed what was expected; last: {last:?}");
}

/// `m:ss` or `h:mm:ss`, as the countdown shows.
fn is_countdown(text: &str) -> bool {
    let parts: Vec<&str> = text.split(':').collect();
    (2..=3).contains(&parts.len())
        && parts
            .iter()
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

fn seconds(countdown: &str) -> u64 {
    countdown
        .split(':')
        .fold(0, |acc, p| acc * 60 + p.parse::<u64>().unwrap())
}

#[tokio::test]
async fn the_dashboard_shows_live_numbers_and_a_countdown_and_lifts_a_block_in_a_real_browser() {
    let server = Server::start(CONFIG);
    let page_answer = server.get("/ui").await;
    assert_eq!(page_answer.status, 200);
    let csp = page_answer.headers["content-security-policy"]
        .to_str()
        .unwrap();
    assert!(csp.contains("default-src 'none'") && csp.contains("connect-src 'self'"));
    assert_eq!(
        server
            .admin(Method::GET, "/v1/stats", "", None)
            .await
            .status,
        401
    );

    for i in 0..5 {
        let status = server
            .check("login", json!({ "ip": "203.0.113.9" }))
            .await
            .status;
        assert_eq!(status, if i < 3 { 200 } else { 429 });
    }
    for i in 0..7 {
        let answer = server
            .check("api", json!({ "key": format!("k{}", i % 2) }))
            .await;
        assert_eq!(answer.status, 200);
    }

    // A batch of 2, spent, then one of 2 taken ahead: 3 spent, 1 held.
    for _ in 0..3 {
        assert_eq!(server.check("payments", json!({})).await.status, 200);
    }
    let set = json!({ "rule": "api", "attributes": { "key": "k9" }, "rate": "500/1s" });
    let answer = server
        .admin(
            Method::PUT,
            "/v1/limits",
            &set.to_string(),
            Some(ADMIN_TOKEN),
        )
        .await;
    assert_eq!(answer.status, 200, "{answer:?}");

    let browser = Browser::start();
    let page = browser.session().await;
    page.goto(&server.url("/ui")).await.unwrap();

    // A wrong token is refused and the form says why.
    page.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys("not-the-token")
        .await
        .unwrap();
    page.find(Locator::Css("#login button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    text_when(&page, "#login-error", |t| t.contains("wrong admin token")).await;

    page.find(Locator::Css("#token"))
        .await
        .unwrap()
        .send_keys(ADMIN_TOKEN)
        .await
        .unwrap();
    page.find(Locator::Css("#login button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();

    // The numbers: totals per rule, from the server's own counters.
    text_when(&page, "#rules tr[data-rule=login] td.allowed", |t| t == "3").await;
    text_when(&page, "#rules tr[data-rule=login] td.denied", |t| t == "2").await;
    text_when(&page, "#rules tr[data-rule=api] td.allowed", |t| t == "7").await;
    text_when(&page, "#rules tr[data-rule=payments] td.held", |t| t == "1").await;
    text_when(&page, "#rules tr[data-rule=payments] td.given-back", |t| {
        t == "0"
    })
    .await;
    text_when(&page, "#rules tr[data-rule=api] td.held", |t| t == "–").await;
    text_when(&page, "#rules tr[data-rule=login] td.limits", |t| {
        t.contains("3/1m") && t.contains("sliding_log")
    })
    .await;
    text_when(&page, "#rules tr[data-rule=report] td.limits", |t| {
        t.contains("3 at once") && t.contains("per tenant")
    })
    .await;
    text_when(&page, "#store", |t| t.contains("memory healthy")).await;
    // The top denied identities are labelled as /metrics labels them: hashed by default.
    let hashed = &sha1_smol::Sha1::from("ip=203.0.113.9").digest().to_string()[..12];
    text_when(&page, "#top td.identity", |t| t == hashed).await;
    // Rates appear once two samples were taken.
    text_when(&page, "#rules tr[data-rule=login] td.allowed-rate", |t| {
        t.parse::<f64>().is_ok()
    })
    .await;

    // The block, counting down from 10 minutes.
    let block = "#blocks tr[data-rule=login] td.countdown";
    let first = text_when(&page, block, is_countdown).await;
    assert!((580..=600).contains(&seconds(&first)), "{first}");
    let later = text_when(&page, block, |t| is_countdown(t) && t != first).await;
    assert!(seconds(&later) < seconds(&first), "{first} then {later}");
    text_when(&page, "#blocks tr[data-rule=login] td.identity", |t| {
        t == "ip=203.0.113.9"
    })
    .await;

    let url = page.current_url().await.unwrap();
    assert!(
        !url.as_str().contains(ADMIN_TOKEN),
        "the token never goes into a URL"
    );
    let shot = page.screenshot().await.unwrap();
    assert_eq!(&shot[..4], b"\x89PNG");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("dashboard.png");
    std::fs::write(&path, &shot).unwrap();

    // Lifting the block from the page lifts it on the server. The page redraws its tables as it
    // refreshes, so a button found just before a redraw is gone by the click: find it again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clicked = match page.find(Locator::Css("#blocks button.lift")).await {
            Ok(button) => button.click().await.is_ok(),
            Err(_) => false,
        };
        if clicked {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the Lift button could not be clicked"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let listed = server
            .admin(Method::GET, "/v1/blocks", "", Some(ADMIN_TOKEN))
            .await;
        if listed.json["blocks"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the block is still listed: {}",
            listed.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    text_when(&page, "#no-blocks", |t| t == "None.").await;

    // Run-time limits: listed with their numbers, settable limits marked, and removable.
    text_when(&page, "#rules tr[data-rule=api] td.limits", |t| {
        t.contains("(settable)")
    })
    .await;
    text_when(&page, "#runtime tr[data-rule=api] td.identity", |t| {
        t == "key=k9"
    })
    .await;
    text_when(&page, "#runtime tr[data-rule=api] td.runtime-set", |t| {
        t == "500/1s"
    })
    .await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let clicked = match page.find(Locator::Css("#runtime button.remove")).await {
            Ok(button) => button.click().await.is_ok(),
            Err(_) => false,
        };
        let listed = server
            .admin(Method::GET, "/v1/limits", "", Some(ADMIN_TOKEN))
            .await;
        if listed.json["limits"].as_array().is_some_and(Vec::is_empty) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the run-time limit is still listed (clicked: {clicked}): {}",
            listed.text
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    text_when(&page, "#no-runtime", |t| t == "None.").await;
    let _ = page.close().await;
}
