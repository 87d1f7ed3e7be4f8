//! Hot reload of the real binary: in-place writes, atomic renames, refused edits, SIGHUP, and
//! graceful stop on SIGTERM.

mod common;

use std::time::Duration;

use common::{CONFIG, RELOAD_WITHIN as WITHIN, Server, eventually, version_of, wait_for_version};
use serde_json::json;

#[tokio::test]
async fn an_in_place_write_applies_and_counters_survive() {
    let server = Server::start(CONFIG);
    for _ in 0..3 {
        assert_eq!(
            server.check("employee", json!({ "id": "42" })).await.status,
            200
        );
    }
    let lowered = CONFIG.replace("rate: 5/10s", "rate: 4/10s");
    let started = std::time::Instant::now();
    std::fs::write(&server.config, &lowered).unwrap();
    wait_for_version(&server, &version_of(&lowered)).await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(1), "applied after {took:?}");
    // The 3 requests already counted still count against the new limit of 4.
    let a = server.check("employee", json!({ "id": "42" })).await;
    assert_eq!(
        (
            a.status,
            a.json["limit"].as_u64(),
            a.json["remaining"].as_u64()
        ),
        (200, Some(4), Some(0))
    );
    assert_eq!(
        server.check("employee", json!({ "id": "42" })).await.status,
        429
    );
    assert_eq!(
        server
            .metric("sluice_config_reloads_total{result=\"ok\"}")
            .await,
        1.0
    );
}

#[tokio::test]
async fn an_atomic_rename_is_seen_and_restart_only_settings_are_logged() {
    let server = Server::start(CONFIG);
    let added = format!(
        "{CONFIG}  extra:\n    limits:\n      - {{ by: [ip], rate: 1/1m }}\nstore:\n  timeout: 20ms\n"
    );
    let staged = server.dir.write("..sluice.yaml.tmp", &added);
    std::fs::rename(&staged, &server.config).unwrap();
    wait_for_version(&server, &version_of(&added)).await;
    let a = server.check("extra", json!({ "ip": "1.2.3.4" })).await;
    assert_eq!(a.status, 200, "{a:?}");
    let log = eventually(WITHIN, "the restart warning", || async {
        server
            .log()
            .into_iter()
            .find(|l| l.contains("need a restart"))
    })
    .await;
    assert!(log.contains("store.timeout"), "{log}");
}

#[tokio::test]
async fn a_bad_edit_keeps_the_old_rules_and_is_counted() {
    let server = Server::start(CONFIG);
    let old = server.get("/v1/rules").await.json["version"].clone();
    let broken = CONFIG.replace(
        "{ by: [id], rate: 5/10s, algorithm: sliding_log }",
        "{ by: [id], rate: 5/10s, algorithm: sliding_log, burst: 9 }",
    );
    assert_ne!(broken, CONFIG);
    std::fs::write(&server.config, &broken).unwrap();
    eventually(WITHIN, "the error count", || async {
        (server
            .metric("sluice_config_reloads_total{result=\"error\"}")
            .await
            >= 1.0)
            .then_some(())
    })
    .await;
    let line = server
        .log()
        .into_iter()
        .find(|l| l.contains("reload refused"))
        .expect("the refusal is logged");
    assert!(
        line.contains("sluice.yaml:6: rule `employee`: field `limits[0].burst`"),
        "{line}"
    );
    assert_eq!(server.get("/v1/rules").await.json["version"], old);
    for _ in 0..5 {
        assert_eq!(
            server.check("employee", json!({ "id": "1" })).await.status,
            200
        );
    }
    assert_eq!(
        server.check("employee", json!({ "id": "1" })).await.status,
        429
    );
    assert_eq!(
        server
            .metric("sluice_config_reloads_total{result=\"ok\"}")
            .await,
        0.0
    );

    // Fixing the file applies it.
    let fixed = CONFIG.replace("rate: 5/10s", "rate: 6/10s");
    std::fs::write(&server.config, &fixed).unwrap();
    wait_for_version(&server, &version_of(&fixed)).await;
    assert_eq!(
        server.check("employee", json!({ "id": "1" })).await.status,
        200
    );
}

#[tokio::test]
async fn sighup_reloads_and_sigterm_stops_gracefully() {
    let mut server = Server::start(CONFIG);
    let before = server.get("/v1/rules").await.json["loaded_at_ms"]
        .as_u64()
        .unwrap();
    server.signal("HUP");
    eventually(WITHIN, "the SIGHUP reload", || async {
        (server
            .metric("sluice_config_reloads_total{result=\"ok\"}")
            .await
            == 1.0)
            .then_some(())
    })
    .await;
    let rules = server.get("/v1/rules").await.json;
    assert_eq!(rules["version"], version_of(CONFIG));
    assert!(rules["loaded_at_ms"].as_u64().unwrap() >= before);
    assert!(server.log().iter().any(|l| l.contains("SIGHUP")));

    server.signal("TERM");
    let status = server.wait_exit(WITHIN);
    assert!(status.success(), "{status:?}");
    assert!(server.log().iter().any(|l| l.contains("stopped")));
}
