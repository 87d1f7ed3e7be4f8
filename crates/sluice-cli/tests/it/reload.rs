//! Hot reload of the real binary: in-place writes, atomic renames, refused edits, SIGHUP, and
//! graceful stop on SIGTERM.

use crate::common;

use std::time::Duration;

use common::{CONFIG, Options, Server, WITHIN, eventually, version_of, wait_for_version};
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
    // Within a second on a quiet machine; the bound leaves room for a loaded one and still fails
    // a reload that waits for a poll or a restart.
    assert!(took < Duration::from_secs(5), "applied after {took:?}");
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

/// A file caught half-written can still be valid (here a burst cut from 200 to 20). It is read
/// again after `reload.quiet`; as it changed meanwhile, the wait starts over, and only the
/// finished file is ever put in force.
#[tokio::test]
async fn a_file_caught_half_written_is_never_applied() {
    let config = format!(
        "reload:\n  quiet: 1s\n{CONFIG}  burst:\n    limits:\n      - {{ by: [ip], rate: 100/1m, algorithm: token_bucket, burst: 200 }}\n"
    );
    let server = Server::start(&config);
    let ok = "sluice_config_reloads_total{result=\"ok\"}";
    let unsettled = "sluice_config_reloads_total{result=\"unsettled\"}";
    let half = config.replace("burst: 200", "burst: 20");
    std::fs::write(&server.config, &half).unwrap();
    eventually(WITHIN, "the change is seen", || async {
        server
            .log()
            .iter()
            .any(|l| l.contains("applying it once it has read the same"))
            .then_some(())
    })
    .await;
    // The writer finishes within the quiet time.
    let finished = config.replace("burst: 200", "burst: 250");
    std::fs::write(&server.config, &finished).unwrap();
    wait_for_version(&server, &version_of(&finished)).await;
    assert_eq!(
        server.metric(ok).await,
        1.0,
        "only the finished file was applied"
    );
    assert!(server.metric(unsettled).await >= 1.0);
    let a = server.check("burst", json!({ "ip": "1.2.3.4" })).await;
    assert_eq!(a.json["limit"].as_u64(), Some(250), "{a:?}");
}

/// A file without rules would remove every limit: refused and counted, unless it says so.
#[tokio::test]
async fn a_file_without_rules_is_refused_unless_it_says_so() {
    let server = Server::start(CONFIG);
    let refused = "sluice_config_reloads_total{result=\"no_rules\"}";
    std::fs::write(&server.config, "admin_token_env: SLUICE_ADMIN_TOKEN\n").unwrap();
    eventually(WITHIN, "the refusal", || async {
        (server.metric(refused).await >= 1.0).then_some(())
    })
    .await;
    assert_eq!(
        server.check("employee", json!({ "id": "42" })).await.status,
        200,
        "the rules in force stay"
    );
    let meant = "admin_token_env: SLUICE_ADMIN_TOKEN\nreload:\n  allow_no_rules: true\n";
    std::fs::write(&server.config, meant).unwrap();
    wait_for_version(&server, &version_of(meant)).await;
    assert_eq!(
        server.check("employee", json!({ "id": "42" })).await.status,
        404
    );
    assert_eq!(server.metric(refused).await, 1.0);
}

/// The server's own log written into the watched directory (`serve 2>> dir/sluice.log`): each
/// log line is a change in the directory, so a reload pass that logged before finding the file
/// as it was would feed itself forever. The file in force, or one already refused, is read
/// quietly: each real change is logged once, refused once, applied once.
#[tokio::test]
async fn a_log_file_beside_the_config_does_not_feed_the_watcher() {
    let server = Server::start_with(
        CONFIG,
        "sluice.yaml",
        Options {
            log_file: Some("sluice.log"),
            ..Options::default()
        },
    );
    let changed = |server: &Server| {
        server
            .log()
            .iter()
            .filter(|l| l.contains("config file changed"))
            .count()
    };
    // A window of several watch passes (debounce + quiet) in which nothing may be logged.
    let stays_quiet = |server: &Server, count: usize| {
        let deadline = std::time::Instant::now() + Duration::from_millis(1500);
        while std::time::Instant::now() < deadline {
            assert_eq!(changed(server), count, "{:#?}", server.log());
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let errors = "sluice_config_reloads_total{result=\"error\"}";

    std::fs::write(&server.config, CONFIG.replace("rate: 5/10s", "rate: 0/10s")).unwrap();
    eventually(WITHIN, "the refusal", || async {
        (server.metric(errors).await >= 1.0).then_some(())
    })
    .await;
    stays_quiet(&server, 1);
    assert_eq!(server.metric(errors).await, 1.0, "refused once");

    let fixed = CONFIG.replace("rate: 5/10s", "rate: 6/10s");
    std::fs::write(&server.config, &fixed).unwrap();
    wait_for_version(&server, &version_of(&fixed)).await;
    stays_quiet(&server, 2);
    let log = std::fs::read_to_string(server.dir.path().join("sluice.log")).unwrap();
    assert!(
        log.contains("config reloaded"),
        "the log file is written: {log}"
    );
}
