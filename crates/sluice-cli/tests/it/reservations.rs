//! Reserve, then settle, through the real binary: `/v1/check` with `"reserve": true` hands out a
//! reservation, `/v1/settle` charges the actual cost once; bad bodies get clear 4xx answers; on
//! Redis, services and `sluice check` share reservations.

use crate::common;

use common::{CONFIG, Server, TempDir, sluice};
use serde_json::json;
use sluice_test_support::RedisServer;

/// The tests' config with a rule that takes reservations.
fn config() -> String {
    format!(
        "{CONFIG}  tokens:\n    limits:\n      - {{ by: [member], rate: 1000/1h, algorithm: token_bucket }}\n"
    )
}

fn reserve(cost: u64) -> String {
    json!({ "rule": "tokens", "attributes": { "member": "m1" }, "cost": cost, "reserve": true })
        .to_string()
}

fn settle(reservation: &str, cost: u64) -> String {
    json!({ "reservation": reservation, "cost": cost }).to_string()
}

async fn remaining(server: &Server) -> u64 {
    let peek = server
        .post(
            "/v1/peek",
            &json!({ "rule": "tokens", "attributes": { "member": "m1" } }).to_string(),
        )
        .await;
    peek.json["remaining"].as_u64().unwrap()
}

#[tokio::test]
async fn reservations_are_settled_once_at_the_actual_cost() {
    let server = Server::start(&config());
    let d = server.post("/v1/check", &reserve(100)).await;
    assert_eq!(d.status, 200, "{d:?}");
    assert_eq!(d.json["remaining"], 900);
    let reservation = d.json["reservation"].as_str().unwrap().to_string();
    assert!(d.json["reservation_until_ms"].as_u64().unwrap() > 0);
    let settled = server.post("/v1/settle", &settle(&reservation, 30)).await;
    assert_eq!(
        (settled.status, &settled.json),
        (200, &json!({ "settled": true }))
    );
    assert_eq!(remaining(&server).await, 970, "70 back");
    let again = server.post("/v1/settle", &settle(&reservation, 0)).await;
    assert_eq!(again.json, json!({ "settled": false }), "twice");
    assert_eq!(remaining(&server).await, 970);

    // The compact view carries the reservation too.
    let compact = server.post("/v1/check?view=compact", &reserve(100)).await;
    let reservation = compact.json["reservation"].as_str().unwrap();
    let settled = server.post("/v1/settle", &settle(reservation, 150)).await;
    assert_eq!(settled.json["settled"], true);
    assert_eq!(
        remaining(&server).await,
        820,
        "100 reserved, then 50 more charged"
    );

    for (body, status, says) in [
        ("{".to_string(), 400, "invalid JSON"),
        (r#"{"reservation": "x"}"#.to_string(), 400, "cost"),
        (settle("not a reservation", 1), 400, "invalid reservation"),
        (
            settle(&reservation.replace(":tokens:", ":nope:"), 1),
            404,
            "nope",
        ),
    ] {
        let a = server.post("/v1/settle", &body).await;
        assert_eq!(a.status, status, "{body}: {a:?}");
        assert!(a.error().contains(says), "{body}: {}", a.error());
    }
    let mixed = server
        .post(
            "/v1/check",
            &json!({ "rule": "employee", "attributes": { "id": "1" }, "reserve": true })
                .to_string(),
        )
        .await;
    assert_eq!(mixed.status, 400, "{mixed:?}");
    assert!(
        mixed.error().contains("token_bucket and gcra"),
        "{}",
        mixed.error()
    );
}

#[tokio::test]
async fn on_redis_services_and_sluice_check_share_reservations() {
    let redis = RedisServer::start();
    let servers = [
        Server::start_on(&config(), &redis.url()),
        Server::start_on(&config(), &redis.url()),
    ];
    let d = servers[0].post("/v1/check", &reserve(400)).await;
    let reservation = d.json["reservation"].as_str().unwrap();
    let settled = servers[1]
        .post("/v1/settle", &settle(reservation, 100))
        .await;
    assert_eq!(
        settled.json["settled"], true,
        "settled through the other service"
    );
    assert_eq!(remaining(&servers[0]).await, 900);

    let dir = TempDir::new();
    let config = dir.write("sluice.yaml", &config());
    let run = |args: &[&str]| {
        sluice()
            .args(["check", "--store", &redis.url(), "--config"])
            .arg(&config)
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&["--reserve", "--cost", "500", "tokens", "member=m1"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let cli_reservation = json["decision"]["reservation"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(remaining(&servers[1]).await, 400);
    let out = run(&["--settle", &cli_reservation, "--cost", "200"]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap(),
        json!({ "settled": true })
    );
    assert_eq!(remaining(&servers[1]).await, 700);
    let out = run(&["--settle", &cli_reservation, "--cost", "1"]);
    assert_eq!(out.status.code(), Some(1), "settled twice: {out:?}");
}
