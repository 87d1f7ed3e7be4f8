//! The multi-process set-ups come up healthy, and their members can be killed, paused and
//! brought back: what the store tests build on.

use std::time::Duration;

use sluice_test_support::{Members, RedisCluster, RedisSentinel, TlsFiles, TlsRedis};

#[test]
fn a_cluster_serves_every_slot_and_fails_over_a_killed_primary() {
    let mut cluster = RedisCluster::start();
    assert_eq!(cluster.primaries().len(), 3);
    assert_eq!(cluster.nodes().len(), 6);
    assert!(cluster.url().starts_with("redis+cluster://127.0.0.1:"));
    assert_eq!(cluster.cli_any(&["SET", "{a}k", "v"]), "OK");
    let primary = cluster
        .primary_of("{a}k")
        .expect("a primary serves the slot");
    // Replication is asynchronous: the write must reach the replica before its primary dies.
    assert_eq!(cluster.cli(primary, &["WAIT", "1", "5000"]), "1");
    cluster.kill(primary);
    assert!(
        cluster.wait_healthy(Duration::from_secs(20)),
        "a replica takes over"
    );
    let new_primary = cluster.primary_of("{a}k").unwrap();
    assert_ne!(new_primary, primary);
    assert_eq!(cluster.cli(new_primary, &["GET", "{a}k"]), "v");
    cluster.restart(primary);
    assert!(cluster.wait_healthy(Duration::from_secs(20)), "it rejoins");
    assert_eq!(cluster.nodes().len(), 6);
}

#[test]
fn sentinels_promote_the_replica_of_a_paused_primary() {
    let mut set = RedisSentinel::start();
    let primary = set.primary().expect("the sentinels know the primary");
    assert_eq!(set.server_ports()[0], primary);
    set.pause(primary);
    assert!(
        sluice_test_support::wait_until(Duration::from_secs(20), || set.primary() != Some(primary)),
        "the sentinels fail over"
    );
    set.resume(primary);
    assert!(
        set.wait_settled(Duration::from_secs(20)),
        "the old primary comes back as a replica"
    );
    assert_ne!(set.primary(), Some(primary));
    assert_eq!(set.replica(), Some(primary));
}

#[test]
fn a_tls_server_answers_with_the_certificates_made_here() {
    let files = TlsFiles::generate();
    let server = TlsRedis::start(&files, true);
    assert_eq!(server.cli(&["PING"]), "PONG");
    let path = |p: &std::path::Path| p.display().to_string();
    let tls_cli = |extra: &[String]| {
        let out = std::process::Command::new("redis-cli")
            .args([
                "--tls",
                "-h",
                "localhost",
                "-p",
                &server.tls_port().to_string(),
            ])
            .args(["--cacert", &path(&files.ca)])
            .args(extra)
            .arg("PING")
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    };
    assert_eq!(
        tls_cli(&[
            "--cert".into(),
            path(&files.client_cert),
            "--key".into(),
            path(&files.client_key)
        ]),
        "PONG"
    );
    assert_ne!(
        tls_cli(&[]),
        "PONG",
        "a client without a certificate is refused"
    );
}
