//! Quota notices through the binary: a quota's `notify` thresholds reach a webhook as
//! CloudEvents, one per identity, threshold and period, through a receiver that refuses, stalls
//! and drops each event's first tries; on Redis, two nodes deciding one identity together send
//! each crossing once; and a receiver that never answers slows no decision (its events wait in a
//! bounded queue, and the ones past it are dropped and counted).

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use common::{Server, WITHIN, eventually};
use serde_json::{Value, json};
use sluice_test_support::RedisServer;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the receiver does with one try of an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Refuse,
    Stall,
    Drop,
    Accept,
}

/// The receiver's script: the answer to each event's n-th try (the last repeats).
type Script = &'static [Answer];

/// Refuses, stalls, then drops the connection, then accepts: every event's first three tries
/// fail three different ways.
const HARD: Script = &[Answer::Refuse, Answer::Stall, Answer::Drop, Answer::Accept];

/// A webhook receiver on a free loopback port, answering each try as its script says (HTTP/1.1,
/// one request per connection).
#[derive(Clone)]
struct Receiver {
    url: String,
    seen: Arc<Mutex<Seen>>,
}

#[derive(Default)]
struct Seen {
    /// Tries per event id.
    tries: HashMap<String, usize>,
    /// Events accepted, in order, with the id each was accepted under.
    accepted: Vec<(String, Value)>,
}

impl Receiver {
    async fn start(script: Script) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/quota-events", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Seen::default()));
        let shared = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                tokio::spawn(serve_one(socket, script, shared.clone()));
            }
        });
        Receiver { url, seen }
    }

    fn accepted(&self) -> Vec<(String, Value)> {
        self.seen.lock().unwrap().accepted.clone()
    }

    fn tries(&self) -> HashMap<String, usize> {
        self.seen.lock().unwrap().tries.clone()
    }

    /// Waits until `n` events were accepted, and returns them.
    async fn wait_for(&self, n: usize) -> Vec<(String, Value)> {
        eventually(WITHIN, &format!("{n} events accepted"), || async {
            let accepted = self.accepted();
            (accepted.len() >= n).then_some(accepted)
        })
        .await
    }
}

async fn serve_one(mut socket: TcpStream, script: Script, seen: Arc<Mutex<Seen>>) {
    let Some(body) = read_request(&mut socket).await else {
        return;
    };
    let event: Value = serde_json::from_slice(&body).expect("a JSON event");
    let id = event["id"].as_str().expect("an event id").to_string();
    let answer = {
        let mut seen = seen.lock().unwrap();
        let tries = seen.tries.entry(id.clone()).or_default();
        *tries += 1;
        let answer = script[(*tries - 1).min(script.len() - 1)];
        if answer == Answer::Accept {
            seen.accepted.push((id, event));
        }
        answer
    };
    let status = match answer {
        Answer::Refuse => "503 Service Unavailable",
        Answer::Accept => "204 No Content",
        Answer::Drop => return,
        Answer::Stall => {
            // Holds the connection until the sender gives up on it.
            let _ = socket.read(&mut [0; 1]).await;
            return;
        }
    };
    let head = format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
    let _ = socket.write_all(head.as_bytes()).await;
}

/// The body of one HTTP/1.1 request with a `content-length`.
async fn read_request(socket: &mut TcpStream) -> Option<Vec<u8>> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = data.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&data[..end]).to_ascii_lowercase();
            let length: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())?;
            assert!(
                head.contains("content-type: application/cloudevents+json"),
                "{head}"
            );
            while data.len() < end + 4 + length {
                let n = socket.read(&mut buf).await.ok()?;
                if n == 0 {
                    return None;
                }
                data.extend_from_slice(&buf[..n]);
            }
            return Some(data[end + 4..end + 4 + length].to_vec());
        }
        let n = socket.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
    }
}

/// A rule file whose `plan` quota of 10 a month notifies `webhook` at 50 %, 80 % and 100 %,
/// delivering as `notifications` says.
fn config(webhook: &str, notifications: &str) -> String {
    format!(
        "\
notifications: {{ {notifications} }}
rules:
  plan:
    limits:
      - by: [tenant]
        quota: 10
        period: month
        notify: {{ at: [0.5, 0.8, 1.0], webhook: \"{webhook}\" }}
"
    )
}

/// Short waits, so that the receiver's failures are got over quickly, and tries long enough that
/// only the stalled one times out on a loaded machine (a try that timed out after the receiver
/// accepted would be sent again, as it should be, and counted twice here).
const QUICK: &str = "timeout: 2s, backoff: 20ms";

/// Checks every event: CloudEvents 1.0 naming the rule, limit and identity, one per threshold
/// of each identity, each accepted once under its own id after exactly the script's tries.
fn assert_events(receiver: &Receiver, tenants: &[&str], tries_each: usize) {
    let accepted = receiver.accepted();
    let mut got: Vec<(String, f64, u64)> = accepted
        .iter()
        .map(|(_, e)| {
            assert_eq!(e["specversion"], "1.0");
            assert_eq!(e["type"], "dev.sluice.quota.threshold_crossed");
            assert_eq!(e["source"], "/sluice/rules/plan/limits/tenant-quota-month");
            assert_eq!(e["data"]["quota"], 10);
            assert_eq!(e["subject"], e["data"]["identity"]);
            (
                e["subject"].as_str().unwrap().to_string(),
                e["data"]["threshold"].as_f64().unwrap(),
                e["data"]["used"].as_u64().unwrap(),
            )
        })
        .collect();
    got.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let want: Vec<(String, f64, u64)> = tenants
        .iter()
        .flat_map(|t| [(0.5, 5), (0.8, 8), (1.0, 10)].map(|(s, u)| (format!("tenant={t}"), s, u)))
        .collect();
    assert_eq!(got, want);
    let mut ids: Vec<&String> = accepted.iter().map(|(id, _)| id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), accepted.len(), "no id accepted twice");
    let tries = receiver.tries();
    assert_eq!(tries.len(), accepted.len(), "{tries:?}");
    assert!(tries.values().all(|&n| n == tries_each), "{tries:?}");
}

async fn every_crossing_arrives_once(server: &Server, receiver: &Receiver) {
    for tenant in ["a", "b"] {
        for n in 1..=12 {
            let answer = server.check("plan", json!({ "tenant": tenant })).await;
            assert_eq!(answer.status, if n <= 10 { 200 } else { 429 }, "{answer:?}");
        }
    }
    receiver.wait_for(6).await;
    assert_events(receiver, &["a", "b"], HARD.len());
    assert_eq!(
        server
            .metric("sluice_notifications_total{result=\"delivered\"} ")
            .await,
        6.0
    );
    assert_eq!(
        server
            .metric("sluice_notifications_total{result=\"retried\"} ")
            .await,
        18.0
    );
}

#[tokio::test]
async fn every_crossing_reaches_its_webhook_once_on_the_memory_store() {
    let receiver = Receiver::start(HARD).await;
    let server = Server::start(&config(&receiver.url, QUICK));
    every_crossing_arrives_once(&server, &receiver).await;
}

#[tokio::test]
async fn every_crossing_reaches_its_webhook_once_on_redis() {
    let receiver = Receiver::start(HARD).await;
    let redis = RedisServer::start();
    let server = Server::start_on(&config(&receiver.url, QUICK), &redis.url());
    every_crossing_arrives_once(&server, &receiver).await;
}

/// Two nodes on one Redis decide one tenant's requests together: each threshold is crossed by
/// one decision, so each event is sent by one node, once.
#[tokio::test]
async fn two_nodes_send_each_crossing_once() {
    let receiver = Receiver::start(&[Answer::Accept]).await;
    let redis = RedisServer::start();
    let text = config(&receiver.url, QUICK);
    let nodes = [
        Server::start_on(&text, &redis.url()),
        Server::start_on(&text, &redis.url()),
    ];
    let admitted = |node: &'static str| {
        let node = &nodes[usize::from(node == "second")];
        async move {
            let mut admitted = 0;
            for _ in 0..12 {
                let answer = node.check("plan", json!({ "tenant": "shared" })).await;
                admitted += usize::from(answer.status == 200);
            }
            admitted
        }
    };
    let (first, second) = tokio::join!(admitted("first"), admitted("second"));
    assert_eq!(first + second, 10);
    receiver.wait_for(3).await;
    assert_events(&receiver, &["shared"], 1);
    let mut sent = 0.0;
    for node in &nodes {
        sent += node
            .metric("sluice_notifications_total{result=\"delivered\"} ")
            .await;
    }
    assert_eq!(sent, 3.0);
}

/// A receiver that never answers: decisions go on as before, its events fill the queue and the
/// deliveries in flight, and the rest are dropped and counted, never waited for.
#[tokio::test]
async fn a_stalled_receiver_slows_no_decision() {
    let receiver = Receiver::start(&[Answer::Stall]).await;
    // Each delivery holds its slot until its one try gives up, after the whole test.
    let server = Server::start(&config(
        &receiver.url,
        "queue: 2, in_flight: 4, attempts: 1, timeout: 60s",
    ));
    let tenants = 200;
    for t in 0..tenants {
        for _ in 0..10 {
            let answer = server
                .check("plan", json!({ "tenant": t.to_string() }))
                .await;
            assert_eq!(answer.status, 200);
        }
    }
    let queued = server
        .metric("sluice_quota_crossings_total{rule=\"plan\",outcome=\"queued\"} ")
        .await;
    let dropped = server
        .metric("sluice_quota_crossings_total{rule=\"plan\",outcome=\"dropped\"} ")
        .await;
    assert_eq!(queued + dropped, 3.0 * f64::from(tenants));
    assert!(dropped > 0.0, "{queued} queued, {dropped} dropped");
    // At most the queue, the deliveries in flight and the one waiting for a slot were let in.
    assert!(queued <= 2.0 + 4.0 + 1.0, "{queued} queued");
}
