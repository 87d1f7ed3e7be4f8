//! Stalled connections cannot starve real callers: `sluice serve` caps open connections and
//! closes those that send half a request, a body that never ends, or nothing at all.
//!
//! 1,500 stalled connections need as many file descriptors in this test process as in the
//! server; the soft `RLIMIT_NOFILE` is raised here (the server raises its own at start-up).

// Its own binary: it raises the process's open-file limit, which every server it starts inherits.

#[path = "it/common/mod.rs"]
mod common;

use std::time::{Duration, Instant};

use common::Server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const CONFIG: &str = "\
server:
  header_read_timeout: 5s
  request_timeout: 5s
  keep_alive_timeout: 6s
rules:
  one:
    limits:
      - { by: [id], rate: 1000000/1h, algorithm: gcra }
";

const STALLED: usize = 1_500;

/// Opens a connection that stalls in one of three ways: half a head, a full head and half its
/// body, or nothing at all.
async fn stall(address: &str, kind: usize) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.expect("connects");
    let bytes: &[u8] = match kind % 3 {
        0 => b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Ty",
        1 => b"POST /v1/check HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"rule\"",
        _ => b"",
    };
    stream.write_all(bytes).await.expect("writes");
    stream
}

/// Reads until the server closes the connection; what it sent before closing.
async fn until_closed(mut stream: TcpStream) -> String {
    let mut seen = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return String::from_utf8_lossy(&seen).into_owned(),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stalled_connections_neither_starve_callers_nor_stay_open() {
    rlimit::increase_nofile_limit(STALLED as u64 * 2 + 256).expect("raises the soft limit");
    let server = Server::start(CONFIG);
    let address = server.base.trim_start_matches("http://").to_string();

    let mut stalled = Vec::with_capacity(STALLED);
    for i in 0..STALLED {
        stalled.push(stall(&address, i).await);
    }
    let opened = Instant::now();

    // A real caller, on a new connection every time, is answered promptly meanwhile.
    let fresh = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()
        .unwrap();
    for i in 0..20 {
        let start = Instant::now();
        let answer = fresh
            .post(server.url("/v1/check"))
            .body(format!(r#"{{"rule":"one","attributes":{{"id":"c{i}"}}}}"#))
            .send()
            .await
            .expect("the check is answered");
        let took = start.elapsed();
        assert_eq!(answer.status(), 200);
        // A starved caller would wait for a stalled connection's timeout (5 s).
        assert!(took < Duration::from_secs(2), "check {i} took {took:?}");
    }

    // Every stalled connection is closed once its timeout has passed; the one that sent half
    // a body is told why.
    let closed = join_spawned(stalled.into_iter().map(until_closed)).await;
    let took = opened.elapsed();
    assert!(took < Duration::from_secs(30), "closing took {took:?}");
    for (i, seen) in closed.iter().enumerate() {
        match i % 3 {
            1 => assert!(seen.starts_with("HTTP/1.1 408"), "{i}: {seen:?}"),
            _ => assert_eq!(seen, "", "{i}"),
        }
    }
}

/// Awaits every future concurrently, in order.
async fn join_spawned<F: std::future::Future<Output = String> + Send + 'static>(
    futures: impl Iterator<Item = F>,
) -> Vec<String> {
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for handle in handles {
        out.push(handle.await.expect("the reader does not panic"));
    }
    out
}

#[tokio::test]
async fn connections_past_the_cap_wait_for_a_free_slot() {
    let server = Server::start(
        "\
server:
  max_connections: 2
  keep_alive_timeout: 1s
rules:
  one:
    limits:
      - { by: [id], rate: 1000/1h, algorithm: gcra }
",
    );
    let address = server.base.trim_start_matches("http://").to_string();
    let _a = stall(&address, 2).await;
    let _b = stall(&address, 2).await;
    // Both slots are held by silent connections: a third caller is answered only once the
    // keep-alive timeout has closed one of them.
    let start = Instant::now();
    let answer = server.check("one", serde_json::json!({ "id": "x" })).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let waited = start.elapsed();
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(5),
        "waited {waited:?}"
    );
}
