//! The gRPC port's bounds on the real binary, as the HTTP port's: a call whose body never ends
//! is answered `DEADLINE_EXCEEDED` (code `timeout`) at `request_timeout`, a connection announces
//! at most 128 concurrent streams, and health and reflection refuse messages over 64 KiB as the
//! rate-limit services do (health with `OUT_OF_RANGE`; reflection ends its stream unanswered). Driven by a plain HTTP/2 client (h2) where tonic would hide the
//! connection's settings.

use crate::common;

use common::Server;
use tonic::transport::Channel;

use crate::sluice_v1::grpc_address;

const CONFIG: &str = "\
grpc_listen: 127.0.0.1:0
server:
  request_timeout: 500ms
rules:
  per_ip:
    limits:
      - { by: [ip], rate: 2/1m, algorithm: sliding_log }
";

#[tokio::test]
async fn a_stalled_call_is_cut_at_the_request_timeout_and_streams_are_bounded() {
    let server = Server::start(CONFIG);
    let address = grpc_address(&server).await;
    let tcp = tokio::net::TcpStream::connect(&address).await.unwrap();
    let (mut send, connection) = h2::client::handshake(tcp).await.unwrap();
    let mut connection = std::pin::pin!(connection);
    // A call whose head arrives and whose body never does.
    let call = http::Request::post(format!("http://{address}/sluice.v1.Sluice/Check"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .unwrap();
    let (response, _body) = send.send_request(call, false).unwrap();
    // Not a budget: a guard so that a call never answered fails instead of hanging.
    let guard = tokio::time::sleep(common::WITHIN);
    let response = tokio::select! {
        ended = connection.as_mut() => panic!("the connection ended first: {ended:?}"),
        response = response => response.expect("an answer"),
        () = guard => panic!("no answer within {:?}; request_timeout is 500 ms", common::WITHIN),
    };
    let header = |name: &str| response.headers().get(name).map(|v| v.to_str().unwrap());
    assert_eq!(
        header("grpc-status"),
        Some("4"),
        "DEADLINE_EXCEEDED: {response:?}"
    );
    assert_eq!(header("sluice-error-code"), Some("timeout"));
    assert_eq!(connection.max_concurrent_send_streams(), 128);
}

#[tokio::test]
async fn health_and_reflection_refuse_messages_over_64_kib() {
    use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
    use tonic_reflection::pb::v1::ServerReflectionRequest;
    use tonic_reflection::pb::v1::server_reflection_client::ServerReflectionClient;
    use tonic_reflection::pb::v1::server_reflection_request::MessageRequest;

    let server = Server::start(CONFIG);
    let address = grpc_address(&server).await;
    let channel = Channel::from_shared(format!("http://{address}"))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let big = "x".repeat(100 * 1024);
    let health = HealthClient::new(channel.clone())
        .check(HealthCheckRequest {
            service: big.clone(),
        })
        .await
        .unwrap_err();
    assert_eq!(health.code(), tonic::Code::OutOfRange, "{health:?}");
    let request = ServerReflectionRequest {
        host: big,
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let reflection = ServerReflectionClient::new(channel)
        .server_reflection_info(tokio_stream::iter([request]))
        .await;
    // The reflection service ends its stream at a message it cannot decode: no answer.
    if let Ok(answers) = reflection {
        let answer = answers.into_inner().message().await;
        assert!(!matches!(answer, Ok(Some(_))), "answered: {answer:?}");
    }
}
