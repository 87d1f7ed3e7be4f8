//! Sluice's own gRPC API, `sluice.v1.Sluice`, on the real binary's gRPC port beside Envoy's:
//! check, peek, check-all, usage, release, renew and settle answer as their HTTP twins do, errors carry
//! the HTTP API's codes (`google.rpc.ErrorInfo` and `sluice-error-code`), and server reflection
//! lists the service (what grpcurl needs to work without the `.proto`).

use crate::common;

use std::collections::HashMap;

use common::{Server, WITHIN, eventually};
use serde_json::json;
use sluice_server::grpc::pb::sluice_client::SluiceClient;
use sluice_server::grpc::pb::{
    CheckAllRequest, CheckRequest, LeaseRequest, SettleRequest, UsageRequest,
};
use sluice_test_support::RedisServer;
use tonic::transport::Channel;
use tonic_types::StatusExt;

const CONFIG: &str = "\
grpc_listen: 127.0.0.1:0
rules:
  per_ip:
    message: slow down
    limits:
      - { by: [ip], rate: 2/1m, algorithm: sliding_log }
  per_path:
    limits:
      - { by: [path], rate: 1/1m, algorithm: sliding_log }
  jobs:
    limits:
      - { by: [tenant], algorithm: concurrency, max_leases: 1, lease: 30s }
  tokens:
    limits:
      - { by: [member], rate: 1000/1h, algorithm: token_bucket }
";

/// The gRPC address from the server's log line.
pub async fn grpc_address(server: &Server) -> String {
    eventually(WITHIN, "the gRPC listener", || async {
        server.log().iter().find_map(|line| {
            line.split("(gRPC) on ").nth(1).map(|rest| {
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_string()
            })
        })
    })
    .await
}

async fn client(server: &Server) -> SluiceClient<Channel> {
    SluiceClient::connect(format!("http://{}", grpc_address(server).await))
        .await
        .expect("the gRPC service accepts connections")
}

fn ask(rule: &str, attributes: &[(&str, &str)]) -> CheckRequest {
    CheckRequest {
        rule: rule.into(),
        attributes: attributes
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect::<HashMap<_, _>>(),
        cost: None,
        reserve: false,
    }
}

/// The error code of a failed call, from its `ErrorInfo` and its metadata (which must agree).
fn code_of(status: &tonic::Status) -> String {
    let info = status
        .get_error_details()
        .error_info()
        .cloned()
        .unwrap_or_else(|| panic!("no ErrorInfo in {status:?}"));
    assert_eq!(info.domain, "sluice");
    let metadata = status.metadata().get("sluice-error-code").unwrap();
    assert_eq!(metadata.to_str().unwrap(), info.reason);
    info.reason
}

async fn answers_as_http_does(server: Server) {
    let mut grpc = client(&server).await;
    let ip = [("ip", "203.0.113.9")];
    let first = grpc.check(ask("per_ip", &ip)).await.unwrap().into_inner();
    assert!(first.allowed);
    assert_eq!((first.limit, first.remaining), (2, 1));
    assert_eq!(first.limits[0].identity, ["ip"]);
    assert_eq!(first.limits[0].algorithm, "sliding_log");
    let peek = grpc.peek(ask("per_ip", &ip)).await.unwrap().into_inner();
    assert_eq!(peek.remaining, 1, "a peek consumes nothing");
    let read = ask("per_ip", &ip);
    let usage = grpc
        .usage(UsageRequest {
            rule: read.rule,
            attributes: read.attributes,
        })
        .await
        .unwrap()
        .into_inner();
    let limit = &usage.limits[0];
    assert_eq!(
        (limit.limit, limit.used, limit.remaining, limit.over),
        (2, 1, 1, false),
        "{usage:?}"
    );
    assert_eq!(
        limit.period_end_ms, None,
        "a sliding log has no window to tell"
    );
    // The same identity over HTTP shares the count.
    let http = server.check("per_ip", json!({ "ip": "203.0.113.9" })).await;
    assert_eq!(http.json["remaining"], 0);
    let denied = grpc.check(ask("per_ip", &ip)).await.unwrap().into_inner();
    assert!(!denied.allowed, "a denial is an answer");
    assert_eq!(denied.message.as_deref(), Some("slow down"));
    assert!(denied.retry_after_ms.unwrap() > 0);

    // All or nothing.
    let path = ask("per_path", &[("path", "/a")]);
    let jobs = ask("jobs", &[("tenant", "t1")]);
    let passed = grpc
        .check_all(CheckAllRequest {
            checks: vec![jobs.clone(), path.clone()],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(passed.allowed);
    let lease = passed.decisions[0].lease.clone().expect("a lease");
    let denied = grpc
        .check_all(CheckAllRequest {
            checks: vec![ask("jobs", &[("tenant", "t2")]), path],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!denied.allowed && denied.decisions[0].allowed && !denied.decisions[1].allowed);
    assert_eq!(denied.decisions[0].lease, None);

    // Leases.
    let renewed = grpc
        .renew(LeaseRequest {
            lease: lease.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(renewed.renewed && renewed.lease_until_ms.unwrap() > 0);
    let released = grpc
        .release(LeaseRequest {
            lease: lease.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(released.released);
    let again = grpc
        .release(LeaseRequest { lease })
        .await
        .unwrap()
        .into_inner();
    assert!(!again.released, "released once");

    // Reservations.
    let mut reserve = ask("tokens", &[("member", "m1")]);
    reserve.cost = Some(100);
    reserve.reserve = true;
    let reserved = grpc.check(reserve).await.unwrap().into_inner();
    assert_eq!(reserved.remaining, 900);
    let settled = grpc
        .settle(SettleRequest {
            reservation: reserved.reservation.unwrap(),
            cost: 30,
        })
        .await
        .unwrap()
        .into_inner();
    assert!(settled.settled);
    let left = grpc
        .peek(ask("tokens", &[("member", "m1")]))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(left.remaining, 970, "70 back");
}

#[tokio::test]
async fn sluice_v1_answers_as_http_does_on_memory() {
    answers_as_http_does(Server::start(CONFIG)).await;
}

#[tokio::test]
async fn sluice_v1_answers_as_http_does_on_redis() {
    let redis = RedisServer::start();
    answers_as_http_does(Server::start_on(CONFIG, &redis.url())).await;
}

#[tokio::test]
async fn check_all_adds_up_repeated_parts() {
    let server = Server::start(CONFIG);
    let mut grpc = client(&server).await;
    let jobs = ask("jobs", &[("tenant", "t7")]);
    let four = grpc
        .check_all(CheckAllRequest {
            checks: vec![jobs.clone(); 4],
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!four.allowed, "4 copies on a concurrency limit of 1");
    assert!(four.decisions.iter().all(|d| d.lease.is_none()));
    let one = grpc.check(jobs).await.unwrap().into_inner();
    assert!(
        one.allowed && one.lease.is_some(),
        "the denial took nothing"
    );
    let ip = ask("per_ip", &[("ip", "192.0.2.44")]);
    let three = CheckAllRequest {
        checks: vec![ip.clone(); 3],
    };
    assert!(!grpc.check_all(three).await.unwrap().into_inner().allowed);
    assert_eq!(grpc.peek(ip).await.unwrap().into_inner().remaining, 2);
}

#[tokio::test]
async fn errors_carry_the_http_api_codes() {
    let server = Server::start(CONFIG);
    let mut grpc = client(&server).await;
    let unknown = grpc.check(ask("nope", &[])).await.unwrap_err();
    assert_eq!(unknown.code(), tonic::Code::NotFound);
    assert_eq!(code_of(&unknown), "unknown_rule");
    assert_eq!(
        unknown.get_error_details().error_info().unwrap().metadata["rule"],
        "nope"
    );
    let unknown = grpc
        .usage(UsageRequest {
            rule: "nope".into(),
            attributes: HashMap::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&unknown), "unknown_rule");
    let missing = grpc.peek(ask("per_ip", &[])).await.unwrap_err();
    assert_eq!(missing.code(), tonic::Code::InvalidArgument);
    assert_eq!(code_of(&missing), "missing_attribute");
    let mut costly = ask("per_ip", &[("ip", "1")]);
    costly.cost = Some(10_000_001);
    assert_eq!(code_of(&grpc.check(costly).await.unwrap_err()), "bad_cost");
    let none = grpc
        .check_all(CheckAllRequest { checks: vec![] })
        .await
        .unwrap_err();
    assert_eq!(code_of(&none), "bad_batch");
    let bad_part = grpc
        .check_all(CheckAllRequest {
            checks: vec![ask("per_ip", &[("ip", "1")]), ask("nope", &[])],
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&bad_part), "unknown_rule");
    assert!(bad_part.message().starts_with("checks[1]"), "{bad_part:?}");
    let lease = grpc
        .release(LeaseRequest {
            lease: "not-a-lease".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&lease), "invalid_lease");
    let reservation = grpc
        .settle(SettleRequest {
            reservation: "x".into(),
            cost: 1,
        })
        .await
        .unwrap_err();
    assert_eq!(code_of(&reservation), "invalid_reservation");
    assert_eq!(
        server.check("per_ip", json!({ "ip": "1" })).await.json["remaining"],
        1,
        "nothing was consumed by the refused calls"
    );
}

#[tokio::test]
async fn reflection_lists_the_service() {
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;
    use tonic_reflection::pb::v1::server_reflection_response::MessageResponse;

    let server = Server::start(CONFIG);
    let address = grpc_address(&server).await;
    let channel = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut answers = reflection
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = answers.message().await.unwrap().expect("an answer");
    let Some(MessageResponse::ListServicesResponse(list)) = answer.message_response else {
        panic!("not a service list: {answer:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    assert!(names.contains(&"sluice.v1.Sluice".to_string()), "{names:?}");
}
