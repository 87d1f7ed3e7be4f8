//! Stopping `sluice serve` on SIGTERM or SIGINT with a request in flight: the listener closes at
//! once, the request in flight is answered, the process exits 0; and a request that does not
//! finish within `--shutdown-timeout` is cut so the stop stays bounded.
//!
//! The request in flight is held open by its body: the head promises more bytes than are sent
//! until the test decides. It counts as in flight once the service has read what was sent: the
//! kernel's receive queue of the service's end of the connection (`/proc/net/tcp`) is empty. A
//! connection still waiting in the accept queue at the signal is refused, as a closed listener
//! refuses it, so the test waits for that before it signals.

use crate::common;

use std::time::{Duration, Instant};

use common::{CONFIG, Options, Server, eventually};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const BODY: &str = r#"{"rule":"employee","attributes":{"id":"7"}}"#;
const WITHIN: Duration = Duration::from_secs(10);

/// Opens a connection and sends a `/v1/check` head and the first half of its body; returns once
/// the service has read them.
async fn half_a_request(server: &Server) -> TcpStream {
    let address = server.base.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).await.unwrap();
    let (service, client) = (
        stream.peer_addr().unwrap().port(),
        stream.local_addr().unwrap().port(),
    );
    let head = format!(
        "POST /v1/check HTTP/1.1\r\nhost: sluice\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n",
        BODY.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream
        .write_all(&BODY.as_bytes()[..BODY.len() / 2])
        .await
        .unwrap();
    eventually(WITHIN, "the service to read the request", || async {
        (unread(service, client) == Some(0)).then_some(())
    })
    .await;
    stream
}

/// Bytes waiting in the receive queue of the service's end (local port `service`, remote port
/// `client`) of an IPv4 connection, from `/proc/net/tcp`; None while there is no such socket.
fn unread(service: u16, client: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp is readable");
    let port = |address: &str| {
        address
            .rsplit_once(':')
            .and_then(|(_, p)| u16::from_str_radix(p, 16).ok())
    };
    table.lines().skip(1).find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (local, remote, queues) = (fields.get(1)?, fields.get(2)?, fields.get(4)?);
        if port(local)? != service || port(remote)? != client {
            return None;
        }
        let (_, receive) = queues.split_once(':')?;
        u64::from_str_radix(receive, 16).ok()
    })
}

async fn stopping(server: &Server) {
    eventually(WITHIN, "the shutdown to start", || async {
        server
            .log()
            .iter()
            .any(|l| l.contains("shutting down"))
            .then_some(())
    })
    .await;
}

async fn finishes_the_request_in_flight(signal: &str) {
    let mut server = Server::start(CONFIG);
    let mut stream = half_a_request(&server).await;
    server.signal(signal);
    stopping(&server).await;
    // Accepting has stopped: a new connection is refused.
    let address = server.base.trim_start_matches("http://").to_string();
    eventually(WITHIN, "the listener to close", || async {
        TcpStream::connect(&address).await.is_err().then_some(())
    })
    .await;
    stream
        .write_all(&BODY.as_bytes()[BODY.len() / 2..])
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    assert!(response.starts_with("HTTP/1.1 200"), "{response}");
    assert!(response.contains("\"allowed\":true"), "{response}");
    let status = server.wait_exit(WITHIN);
    assert_eq!(status.code(), Some(0), "{:?}", server.log());
    assert!(server.log().iter().any(|l| l.contains("stopped")));
}

#[tokio::test]
async fn sigterm_finishes_the_request_in_flight_then_exits_0() {
    finishes_the_request_in_flight("TERM").await;
}

#[tokio::test]
async fn sigint_finishes_the_request_in_flight_then_exits_0() {
    finishes_the_request_in_flight("INT").await;
}

/// The request would have a minute (`request_timeout`); the stop gives it one second.
#[tokio::test]
async fn a_request_that_does_not_finish_is_cut_at_the_shutdown_timeout() {
    let config = format!("server:\n  request_timeout: 60s\n{CONFIG}");
    let mut server = Server::start_with(
        &config,
        "sluice.yaml",
        Options {
            args: &["--shutdown-timeout", "1s"],
            ..Options::default()
        },
    );
    let mut stream = half_a_request(&server).await;
    let started = Instant::now();
    server.signal("TERM");
    let status = server.wait_exit(Duration::from_secs(30));
    let took = started.elapsed();
    assert_eq!(status.code(), Some(0), "{:?}", server.log());
    assert!(took >= Duration::from_secs(1), "exited after {took:?}");
    assert!(took < Duration::from_secs(30), "exited after {took:?}");
    assert!(
        server
            .log()
            .iter()
            .any(|l| l.contains("still in flight at the shutdown timeout")),
        "{:?}",
        server.log()
    );
    // The connection was closed without an answer.
    let mut response = String::new();
    let _ = stream.read_to_string(&mut response).await;
    assert!(!response.contains("200"), "{response}");
}
