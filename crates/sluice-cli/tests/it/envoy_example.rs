//! `examples/envoy`: the descriptors Envoy would send with `envoy.yaml`, built from that file's
//! routes and actions the way Envoy builds them, answered by Sluice with `sluice.yaml`.
//!
//! Envoy's rules, as this emulation keeps them: the first route whose prefix matches is taken;
//! each entry of its `rate_limits` yields one descriptor, one entry per action, and none at all
//! when a `request_headers` action's header is absent; the virtual host's `rate_limits` follow,
//! but only when the route has none of its own or sets `include_vh_rate_limits`. An action this
//! emulation does not know fails the test rather than being skipped.

use crate::common;
use crate::envoy::{ask, descriptor, grpc_client, request};

use common::Server;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use serde_json::Value;

const ENVOY_YAML: &str = include_str!("../../../../examples/envoy/envoy.yaml");

/// A request as the rate-limit filter sees it.
struct Request<'a> {
    /// `:path`: the path and its query string.
    path: &'a str,
    remote_address: &'a str,
    headers: &'a [(&'a str, &'a str)],
}

/// The example's one virtual host.
fn virtual_host() -> Value {
    let config: Value = serde_saphyr::from_str(ENVOY_YAML).expect("envoy.yaml is YAML");
    let manager = &config["static_resources"]["listeners"][0]["filter_chains"][0]["filters"][0];
    let domain = manager["typed_config"]["http_filters"][0]["typed_config"]["domain"].clone();
    assert_eq!(domain, "edge", "the rate-limit filter's domain");
    manager["typed_config"]["route_config"]["virtual_hosts"][0].clone()
}

/// One `rate_limits` entry's descriptor, or `None` when Envoy would leave it out.
fn descriptor_of(rate_limit: &Value, request: &Request) -> Option<Vec<(String, String)>> {
    let actions = rate_limit["actions"].as_array().expect("actions");
    let mut entries = Vec::new();
    for action in actions {
        let (kind, body) = action
            .as_object()
            .and_then(|o| o.iter().next())
            .expect("an action is a one-key mapping");
        let entry = match kind.as_str() {
            "generic_key" => (
                body["descriptor_key"]
                    .as_str()
                    .unwrap_or("generic_key")
                    .to_string(),
                body["descriptor_value"]
                    .as_str()
                    .expect("a value")
                    .to_string(),
            ),
            "remote_address" => ("remote_address".into(), request.remote_address.into()),
            "request_headers" => {
                let name = body["header_name"].as_str().expect("header_name");
                let value = match name {
                    ":path" => Some(request.path),
                    _ => request
                        .headers
                        .iter()
                        .find(|(n, _)| n.eq_ignore_ascii_case(name))
                        .map(|(_, v)| *v),
                }?;
                (
                    body["descriptor_key"]
                        .as_str()
                        .expect("descriptor_key")
                        .into(),
                    value.into(),
                )
            }
            // The CEL descriptor extension; only the one expression the example uses.
            "extension" => {
                let config = &body["typed_config"];
                assert_eq!(body["name"], "envoy.rate_limit_descriptors.expr");
                assert_eq!(
                    config["@type"],
                    "type.googleapis.com/envoy.extensions.rate_limit_descriptors.expr.v3.Descriptor"
                );
                let text = config["text"].as_str().expect("text");
                assert_eq!(
                    text, "request.url_path",
                    "an expression this test does not know"
                );
                let path = request.path.split('?').next().expect("a path");
                (
                    config["descriptor_key"]
                        .as_str()
                        .expect("descriptor_key")
                        .into(),
                    path.into(),
                )
            }
            other => panic!("envoy.yaml uses the action `{other}`, which this test does not know"),
        };
        entries.push(entry);
    }
    Some(entries)
}

/// The descriptors Envoy sends for `request`.
fn envoy_descriptors(request: &Request) -> Vec<Vec<(String, String)>> {
    let host = virtual_host();
    let route = host["routes"]
        .as_array()
        .expect("routes")
        .iter()
        .find(|r| {
            request
                .path
                .starts_with(r["match"]["prefix"].as_str().expect("a prefix match"))
        })
        .expect("a route matches");
    let own = route["route"]["rate_limits"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let include_host = own.is_empty() || route["route"]["include_vh_rate_limits"] == true;
    let host_limits = match include_host {
        true => host["rate_limits"].as_array().cloned().unwrap_or_default(),
        false => Vec::new(),
    };
    own.iter()
        .chain(&host_limits)
        .filter_map(|rate_limit| descriptor_of(rate_limit, request))
        .collect()
}

fn to_proto(descriptors: &[Vec<(String, String)>]) -> Vec<RateLimitDescriptor> {
    descriptors
        .iter()
        .map(|entries| {
            let pairs: Vec<(&str, &str)> = entries
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            descriptor(&pairs)
        })
        .collect()
}

fn pairs(entries: &[(&str, &str)]) -> Vec<(String, String)> {
    entries
        .iter()
        .map(|&(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn every_route_of_the_example_sends_the_client_address() {
    let ip = "203.0.113.9";
    for path in ["/", "/orders", "/api/orders", "/login"] {
        let request = Request {
            path,
            remote_address: ip,
            headers: &[("x-user-id", "m1")],
        };
        let sent = envoy_descriptors(&request);
        assert!(
            sent.contains(&pairs(&[("remote_address", ip)])),
            "{path} sends {sent:?}"
        );
    }
    let api = Request {
        path: "/api/orders",
        remote_address: ip,
        headers: &[("x-user-id", "m1")],
    };
    assert_eq!(
        envoy_descriptors(&api),
        [
            pairs(&[("remote_address", ip)]),
            pairs(&[
                ("generic_key", "api"),
                ("user", "m1"),
                ("path", "/api/orders")
            ]),
        ]
    );
    // Without the header Envoy leaves the user's descriptor out.
    let anonymous = Request {
        headers: &[],
        ..api
    };
    assert_eq!(
        envoy_descriptors(&anonymous),
        [pairs(&[("remote_address", ip)])]
    );
}

#[tokio::test]
async fn the_example_mapping_answers_what_the_example_envoy_sends() {
    let example = include_str!("../../../../examples/envoy/sluice.yaml")
        .replace("grpc_listen: 127.0.0.1:8081", "grpc_listen: 127.0.0.1:0");
    let server = Server::start(&example);
    let mut client = grpc_client(&server).await;
    let api = Request {
        path: "/api/orders",
        remote_address: "203.0.113.9",
        headers: &[("x-user-id", "m1")],
    };
    let answer = ask(
        &mut client,
        request("edge", to_proto(&envoy_descriptors(&api))),
    )
    .await;
    assert_eq!(answer.overall_code(), Code::Ok);
    let names: Vec<&str> = answer
        .statuses
        .iter()
        .map(|s| s.current_limit.as_ref().map_or("", |l| l.name.as_str()))
        .collect();
    assert!(
        names.len() == 2
            && names[0].starts_with("per_client.")
            && names[1].starts_with("api_per_user."),
        "{names:?}"
    );
    // /login: five a minute per address, then blocked; the address's own limit still answers.
    let login = Request {
        path: "/login",
        remote_address: "198.51.100.3",
        headers: &[],
    };
    let sent = || request("edge", to_proto(&envoy_descriptors(&login)));
    for _ in 0..5 {
        assert_eq!(ask(&mut client, sent()).await.overall_code(), Code::Ok);
    }
    let blocked = ask(&mut client, sent()).await;
    assert_eq!(blocked.overall_code(), Code::OverLimit);
    let codes: Vec<Code> = blocked.statuses.iter().map(|s| s.code()).collect();
    assert_eq!(codes, [Code::Ok, Code::OverLimit]);
}

#[test]
fn the_example_keys_the_path_without_its_query_string() {
    let request = |path| Request {
        path,
        remote_address: "203.0.113.9",
        headers: &[("x-user-id", "m1")],
    };
    let api = pairs(&[
        ("generic_key", "api"),
        ("user", "m1"),
        ("path", "/api/orders"),
    ]);
    for path in [
        "/api/orders",
        "/api/orders?page=1",
        "/api/orders?page=2&x=y",
    ] {
        assert_eq!(envoy_descriptors(&request(path))[1], api, "{path}");
    }
}

/// A client that changes its query string on every request still spends one count: the 21st
/// request of a burst of 20 is over the limit, whatever its query.
#[tokio::test]
async fn a_changed_query_string_does_not_reset_the_count() {
    let original = include_str!("../../../../examples/envoy/sluice.yaml");
    // Nothing refills while the test runs: 10 an hour rather than 10 a second, same burst.
    let example = original
        .replace("grpc_listen: 127.0.0.1:8081", "grpc_listen: 127.0.0.1:0")
        .replace(
            "{ by: [user, path], rate: 10/1s, algorithm: token_bucket, burst: 20 }",
            "{ by: [user, path], rate: 10/1h, algorithm: token_bucket, burst: 20 }",
        );
    assert!(
        !example.contains("rate: 10/1s"),
        "the example's api rule changed"
    );
    let server = Server::start(&example);
    let mut client = grpc_client(&server).await;
    let sent = |path: &str| {
        let api = Request {
            path,
            remote_address: "198.51.100.7",
            headers: &[("x-user-id", "m1")],
        };
        request("edge", to_proto(&envoy_descriptors(&api)))
    };
    for n in 0..20 {
        let answer = ask(&mut client, sent(&format!("/api/orders?n={n}"))).await;
        assert_eq!(answer.overall_code(), Code::Ok, "request {n}");
    }
    let over = ask(&mut client, sent("/api/orders?n=fresh")).await;
    assert_eq!(over.overall_code(), Code::OverLimit);
    let codes: Vec<Code> = over.statuses.iter().map(|s| s.code()).collect();
    assert_eq!(
        codes,
        [Code::Ok, Code::OverLimit],
        "the api limit is the one over"
    );
    // Another path is another key.
    let other = ask(&mut client, sent("/api/users?n=0")).await;
    assert_eq!(other.overall_code(), Code::Ok);
}
