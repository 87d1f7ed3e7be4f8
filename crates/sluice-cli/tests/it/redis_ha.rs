//! The real binary beyond one plain Redis: `sluice serve`, `check` and `bench` on a Redis Cluster
//! and behind sentinels; a served Redis demoted by `REPLICAOF` (degraded decisions, `/readyz`
//! 503) and promoted back (exact again within a back-off); `rediss://` with certificates made by the test and
//! a password that never shows in logs, errors or `/v1/rules`.

use crate::common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use common::{CONFIG, Server, TempDir, WITHIN, eventually, sluice};
use serde_json::json;
use sluice_test_support::{RedisCluster, RedisSentinel, RedisServer, TlsFiles, TlsRedis};

/// The shared rules with the given `store` lines. The store timeout (1 s) is far above what a
/// healthy call takes on a loaded machine: a decision the test expects from Redis is never
/// degraded by a slow moment, and the failures these tests cause (a demoted server, a refused
/// password or certificate) answer at once.
fn config(store: &str) -> String {
    format!("store:\n  timeout: 1s\n{store}{CONFIG}")
}

/// A prefix of its own, so tests sharing a cluster keep apart.
fn prefix(name: &str) -> String {
    format!("  prefix: {name}-{}\n", std::process::id())
}

/// Five admitted, then denied: counted exactly in the store, never degraded.
async fn employee_is_exact(server: &Server, id: &str) {
    for i in 0..5u64 {
        let a = server.check("employee", json!({ "id": id })).await;
        assert_eq!(a.status, 200, "{a:?}");
        assert_eq!(a.json["degraded"], false, "{a:?}");
        assert_eq!(a.json["remaining"], 4 - i);
    }
    let denied = server.check("employee", json!({ "id": id })).await;
    assert_eq!(denied.status, 429, "{denied:?}");
    assert_eq!(denied.json["degraded"], false);
}

/// Waits until `/readyz` answers 200 (the store connected).
async fn ready(server: &Server) {
    eventually(WITHIN, "ready", || async {
        (server.get("/readyz").await.status == 200).then_some(())
    })
    .await;
}

/// The two-limit rule (`member` and `ip` in different slots on a Cluster): all or nothing.
async fn pair_is_all_or_nothing(server: &Server) {
    let check = |ip: &'static str| server.check("pair", json!({ "member": "m1", "ip": ip }));
    assert_eq!(check("1.1.1.1").await.status, 200);
    assert_eq!(check("1.1.1.1").await.status, 200);
    let denied = check("2.2.2.2").await;
    assert_eq!(
        denied.status, 429,
        "the member limit (2) denies: {denied:?}"
    );
    // The IP limit of 2.2.2.2 lost nothing to the denial: its 3 units go to other members.
    let other = |n: &'static str| server.check("pair", json!({ "member": n, "ip": "2.2.2.2" }));
    assert_eq!(other("m2").await.status, 200);
    assert_eq!(other("m3").await.status, 200);
    assert_eq!(other("m4").await.status, 200);
    assert_eq!(other("m5").await.status, 429, "the IP limit is 3");
}

#[tokio::test]
async fn serve_on_a_cluster_url_answers_checks() {
    let cluster = RedisCluster::shared();
    let server = Server::start_on(&config(&prefix("serve")), &cluster.url());
    ready(&server).await;
    employee_is_exact(&server, "42").await;
    pair_is_all_or_nothing(&server).await;
    let ready = server.get("/readyz").await;
    assert_eq!(ready.status, 200, "{ready:?}");
}

#[tokio::test]
async fn serve_on_a_sentinel_url_answers_checks() {
    let set = RedisSentinel::shared();
    let server = Server::start_on(&config(&prefix("serve")), &set.url());
    ready(&server).await;
    employee_is_exact(&server, "42").await;
    pair_is_all_or_nothing(&server).await;
    assert_eq!(server.get("/readyz").await.status, 200);
}

#[test]
fn check_and_bench_take_cluster_and_sentinel_urls() {
    let dir = TempDir::new();
    let file = dir.write("sluice.yaml", &config(&prefix("check")));
    for url in [RedisCluster::shared().url(), RedisSentinel::shared().url()] {
        let out = sluice()
            .args(["check", "--store", &url, "--config"])
            .arg(&file)
            .args(["pair", "member=c1", "ip=9.9.9.9"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(json["decision"]["degraded"], false, "{json}");
        let out = sluice()
            .args(["bench", "--store", &url, "--duration", "1s", "--json"])
            .args(["--concurrency", "4", "--keys", "100"])
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert!(
            report["decisions_per_sec"].as_f64().unwrap() > 0.0,
            "{report}"
        );
        assert_eq!(report["errors"], 0, "{report}");
    }
    let out = sluice()
        .args([
            "check",
            "--store",
            "redis+cluster://:hunter2@a:1/4",
            "--config",
        ])
        .arg(&file)
        .args(["pair", "member=c1", "ip=9.9.9.9"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(stderr.contains("no databases"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "{stderr}");
}

/// `/readyz` status, and whether a fresh identity's decision on `employee` is degraded.
async fn state(server: &Server) -> (u16, bool) {
    static PROBE: AtomicU32 = AtomicU32::new(0);
    let probe = PROBE.fetch_add(1, Ordering::Relaxed);
    let ready = server.get("/readyz").await.status;
    let a = server
        .check("employee", json!({ "id": format!("p{probe}") }))
        .await;
    assert!(a.status == 200 || a.status == 429, "{a:?}");
    (ready, a.json["degraded"] == true)
}

#[tokio::test]
async fn a_demoted_redis_degrades_and_is_not_ready_until_promoted_again() {
    let redis = RedisServer::start();
    let other = RedisServer::start();
    let server = Server::start_on(&config(""), &redis.url());
    ready(&server).await;
    employee_is_exact(&server, "before").await;
    assert_eq!(state(&server).await, (200, false));

    let port = other.port().to_string();
    assert_eq!(redis.cli(&["REPLICAOF", "127.0.0.1", &port]), "OK");
    let started = Instant::now();
    eventually(WITHIN, "degraded and not ready", || async {
        (state(&server).await == (503, true)).then_some(())
    })
    .await;
    eprintln!(
        "REPLICAOF: degraded and not ready after {:?}",
        started.elapsed()
    );

    assert_eq!(redis.cli(&["REPLICAOF", "NO", "ONE"]), "OK");
    let promoted = Instant::now();
    eventually(WITHIN, "exact and ready again", || async {
        (state(&server).await == (200, false)).then_some(())
    })
    .await;
    let recovered = promoted.elapsed();
    eprintln!("REPLICAOF NO ONE: exact and ready again after {recovered:?}");
    // Within the breaker's longest back-off (0.5 s) and a probe, with room for a loaded machine:
    // well under the seconds a fixed reconnection schedule would take.
    assert!(recovered < Duration::from_secs(3), "{recovered:?}");
    employee_is_exact(&server, "after").await;
}

/// A generated password with an unencoded `/`, `?`, `#` or `@` ends the URL's authority early:
/// the URL is refused, and the refusal shows none of the password.
#[test]
fn a_store_url_that_does_not_parse_never_shows_its_password() {
    let dir = TempDir::new();
    let config = dir.write("sluice.yaml", CONFIG);
    for url in [
        "redis://:pa/ss-x7@127.0.0.1:1/0",
        "redis://:pa?ss-x7@127.0.0.1:1",
        "redis://:pa#ss-x7@127.0.0.1:1",
        "redis//:pa-ss-x7@127.0.0.1:1",
    ] {
        let out = sluice()
            .args(["serve", "--listen", "127.0.0.1:0", "--config"])
            .arg(&config)
            .args(["--store", url])
            .env_remove("SLUICE_ADMIN_TOKEN")
            .output()
            .unwrap();
        let shown = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.status.success(), "{url}: {shown}");
        assert!(!shown.contains("ss-x7"), "{url}: {shown}");
    }
}

#[tokio::test]
async fn rediss_with_a_private_ca_a_client_certificate_and_a_hidden_password() {
    const PASSWORD: &str = "s3cret-pw-42";
    let files = TlsFiles::generate();
    let redis = TlsRedis::start(&files, true);
    assert_eq!(redis.cli(&["CONFIG", "SET", "requirepass", PASSWORD]), "OK");
    let tls = format!(
        "  tls:\n    ca_file: {}\n    cert_file: {}\n    key_file: {}\n",
        files.ca.display(),
        files.client_cert.display(),
        files.client_key.display()
    );
    let url = |password: &str| format!("rediss://:{password}@localhost:{}/", redis.tls_port());
    let server = Server::start_on(&config(&tls), &url(PASSWORD));
    ready(&server).await;
    employee_is_exact(&server, "42").await;
    let rules = server.get("/v1/rules").await;
    assert!(!rules.json.to_string().contains(PASSWORD));
    assert!(!server.log().join("\n").contains(PASSWORD));
    drop(server);

    // A wrong password and a CA that did not sign the server: degraded, and no secret shown.
    for (store, password) in [
        (tls.clone(), "wrong-pw-17"),
        (
            tls.replace(
                &files.ca.display().to_string(),
                &files.other_ca.display().to_string(),
            ),
            PASSWORD,
        ),
    ] {
        let server = Server::start_on(&config(&store), &url(password));
        let a = server.check("employee", json!({ "id": "1" })).await;
        assert_eq!(a.json["degraded"], true, "{a:?}");
        let ready = server.get("/readyz").await;
        assert_eq!(ready.status, 503, "{ready:?}");
        let shown = format!("{}\n{}", server.log().join("\n"), ready.json);
        assert!(!shown.contains(password), "{shown}");
    }
}
