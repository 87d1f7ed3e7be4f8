//! The caller's deadline through the service, on Redis: a request whose caller says it has
//! already given up (`sluice-timeout-ms` or Envoy's `x-envoy-expected-rq-timeout-ms` on HTTP,
//! `grpc-timeout` on `sluice.v1` and Envoy's rate-limit service) is answered at once by its
//! rule's fail policy with `reason: "deadline"`, and Redis runs no decision for it; the metric
//! counts it. A deadline still ahead leaves the decision to Redis.

use crate::common;
use crate::envoy::{descriptor, request};
use crate::sluice_v1::grpc_address;

use std::collections::HashMap;

use common::{Answer, Server};
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use serde_json::json;
use sluice_server::grpc::pb::{CheckRequest, Decision};
use sluice_test_support::RedisServer;

const CONFIG: &str = "\
grpc_listen: 127.0.0.1:0
rules:
  open_rule:
    fail: open
    limits:
      - { by: [user], rate: 100/1m }
  closed_rule:
    fail: closed
    limits:
      - { by: [user], rate: 100/1m }
envoy:
  store:
    - descriptor: [generic_key=closed, user]
      rule: closed_rule
";

/// `/v1/check` of `rule` for user `u1` with one extra header.
async fn check_with(server: &Server, rule: &str, header: (&str, &str)) -> Answer {
    let body = json!({ "rule": rule, "attributes": { "user": "u1" } });
    server
        .send(
            server
                .http
                .post(server.url("/v1/check"))
                .header(header.0, header.1)
                .body(body.to_string()),
        )
        .await
}

/// One unary gRPC call whose caller gave up a nanosecond after sending it (`grpc-timeout: 1n`),
/// made with a plain HTTP/2 client: a gRPC client library would stop waiting for the answer.
async fn given_up<M: prost::Message, R: prost::Message + Default>(
    address: &str,
    path: &str,
    message: &M,
) -> R {
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let (send, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut send = send.ready().await.unwrap();
    let call = http::Request::post(format!("http://{address}{path}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .header("grpc-timeout", "1n")
        .body(())
        .unwrap();
    let (response, mut body) = send.send_request(call, false).unwrap();
    let bytes = message.encode_to_vec();
    let mut framed = vec![0u8];
    framed.extend_from_slice(&u32::try_from(bytes.len()).unwrap().to_be_bytes());
    framed.extend_from_slice(&bytes);
    body.send_data(framed.into(), true).unwrap();
    let mut answer = response.await.unwrap().into_body();
    let mut received = Vec::new();
    while let Some(chunk) = answer.data().await {
        let chunk = chunk.unwrap();
        let _ = answer.flow_control().release_capacity(chunk.len());
        received.extend_from_slice(&chunk);
    }
    let trailers = answer.trailers().await.unwrap().unwrap_or_default();
    let status = trailers
        .get("grpc-status")
        .map(|v| v.to_str().unwrap().to_string());
    assert_eq!(status.as_deref(), Some("0"), "{path}: {trailers:?}");
    R::decode(&received[5..]).unwrap()
}

#[tokio::test]
async fn a_request_past_its_deadline_reaches_no_store() {
    let redis = RedisServer::start();
    let server = Server::start_on(CONFIG, &redis.url());
    let first = server.check("open_rule", json!({ "user": "u1" })).await;
    assert_eq!(
        (first.status, &first.json["degraded"]),
        (200, &json!(false))
    );
    let before = redis.decision_calls();
    assert!(before > 0, "a request without a deadline reaches Redis");

    for (rule, header, status) in [
        ("open_rule", "sluice-timeout-ms", 200),
        ("closed_rule", "x-envoy-expected-rq-timeout-ms", 429),
    ] {
        let answer = check_with(&server, rule, (header, "0")).await;
        assert_eq!(answer.status, status, "{rule}: {}", answer.text);
        assert_eq!(answer.json["degraded"], true, "{}", answer.text);
        assert_eq!(answer.json["reason"], "deadline", "{}", answer.text);
    }
    let all = server
        .send(
            server
                .http
                .post(server.url("/v1/check-all"))
                .header("sluice-timeout-ms", "0")
                .body(
                    json!({ "checks": [ { "rule": "closed_rule", "attributes": { "user": "u2" } } ] })
                        .to_string(),
                ),
        )
        .await;
    assert_eq!(all.status, 429, "{}", all.text);
    assert_eq!(
        all.json["decisions"][0]["reason"], "deadline",
        "{}",
        all.text
    );

    let address = grpc_address(&server).await;
    let ask = CheckRequest {
        rule: "open_rule".into(),
        attributes: HashMap::from([("user".to_string(), "u1".to_string())]),
        cost: None,
        reserve: false,
    };
    let d: Decision = given_up(&address, "/sluice.v1.Sluice/Check", &ask).await;
    assert!(d.allowed && d.degraded, "{d:?}");
    assert_eq!(d.reason.as_deref(), Some("deadline"));
    let r = request(
        "store",
        vec![descriptor(&[("generic_key", "closed"), ("user", "u1")])],
    );
    let path = "/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit";
    let answer: RateLimitResponse = given_up(&address, path, &r).await;
    assert_eq!(answer.overall_code, Code::OverLimit as i32);

    assert_eq!(
        redis.decision_calls(),
        before,
        "Redis ran no decision for a caller that had given up"
    );
    let counted = server
        .metric("sluice_deadline_decisions_total{store=\"redis\",when=\"before\"}")
        .await;
    assert_eq!(counted, 5.0, "every decision past its deadline is counted");

    // A deadline still ahead: Redis decides.
    let answer = check_with(&server, "closed_rule", ("sluice-timeout-ms", "60000")).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert_eq!(answer.json["degraded"], false, "{}", answer.text);
    assert!(redis.decision_calls() > before);
}
