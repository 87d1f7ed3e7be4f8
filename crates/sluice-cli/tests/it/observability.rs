//! Traces and metrics of the real binary: a decision's span reaching an OTLP receiver with the
//! caller's trace id, and `/metrics` with HELP and TYPE on every family, request latency per
//! route, build info and denials by limit.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::json;
use sluice_test_support::OtlpReceiver;

use crate::common::{Options, Server, sluice};

const RULES: &str = "\
rules:
  login:
    limits:
      - { name: per_user, by: [user], rate: 1/1h }
      - { by: [ip], rate: 100/1h }
  trial:
    limits:
      - { name: dry_run, by: [user], rate: 1/1h, shadow: true }
";

const TRACE_ID: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
const PARENT_ID: &str = "00f067aa0ba902b7";

fn traced(receiver: &OtlpReceiver) -> Options<'static> {
    Options {
        env: vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint()),
            ("OTEL_SERVICE_NAME", "sluice-under-test".into()),
            // Batches leave every 50 ms rather than every 5 s.
            ("OTEL_BSP_SCHEDULE_DELAY", "50".into()),
        ],
        ..Options::default()
    }
}

async fn check_with_parent(server: &Server, body: serde_json::Value, path: &str) -> u16 {
    let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
    let request = server
        .http
        .post(server.url(path))
        .header("traceparent", traceparent)
        .body(body.to_string());
    server.send(request).await.status
}

#[tokio::test]
async fn a_decision_span_joins_the_callers_trace_at_the_otlp_receiver() {
    let receiver = OtlpReceiver::start();
    let server = Server::start_with(RULES, "sluice.yaml", traced(&receiver));
    let body = json!({ "rule": "login", "attributes": { "user": "ann", "ip": "203.0.113.9" } });
    assert_eq!(
        check_with_parent(&server, body.clone(), "/v1/check").await,
        200
    );
    assert_eq!(
        check_with_parent(&server, body.clone(), "/v1/check").await,
        429
    );
    assert_eq!(check_with_parent(&server, body, "/v1/peek").await, 200);

    let within = Duration::from_secs(20);
    let ours = |outcome: &'static str, mode: &'static str| {
        move |s: &sluice_test_support::ReceivedSpan| {
            s.trace_id() == TRACE_ID
                && s.text("sluice.outcome").as_deref() == Some(outcome)
                && s.text("sluice.mode").as_deref() == Some(mode)
        }
    };
    let allowed = receiver.wait_for(within, ours("allowed", "check"));
    assert_eq!(allowed.span.name, "sluice.decision");
    assert_eq!(
        allowed.parent_span_id(),
        PARENT_ID,
        "a child of the caller's span"
    );
    assert_eq!(allowed.text("sluice.rule").as_deref(), Some("login"));
    assert_eq!(
        allowed.resource_text("service.name").as_deref(),
        Some("sluice-under-test")
    );
    let store = allowed
        .double("sluice.store.duration")
        .expect("the store's time");
    assert!(store > 0.0 && store < 5.0, "{store}");
    assert!(allowed.attribute("sluice.denied_limits").is_none());

    let denied = receiver.wait_for(within, ours("denied", "check"));
    let limits = denied
        .text("sluice.denied_limits")
        .expect("the limits that denied");
    assert!(limits.contains("per_user"), "{limits}");
    assert!(
        !limits.contains("ip"),
        "only the limit that denied: {limits}"
    );
    // A peek of the denied identity is a decision too, and says what a check would do.
    receiver.wait_for(within, ours("denied", "peek"));
}

#[tokio::test]
async fn without_a_callers_trace_a_decision_starts_its_own_and_errors_are_marked() {
    let receiver = OtlpReceiver::start();
    let server = Server::start_with(RULES, "sluice.yaml", traced(&receiver));
    let a = server
        .check("login", json!({ "user": "bo", "ip": "x" }))
        .await;
    assert_eq!(a.status, 200);
    let unknown = server.check("nope", json!({ "user": "bo" })).await;
    assert_eq!(unknown.status, 404, "{unknown:?}");

    let within = Duration::from_secs(20);
    let root = receiver.wait_for(within, |s| {
        s.text("sluice.outcome").as_deref() == Some("allowed")
    });
    assert_eq!(root.parent_span_id(), "", "a root span");
    assert_eq!(root.trace_id().len(), 32);
    assert_ne!(root.trace_id(), "0".repeat(32));
    let failed = receiver.wait_for(within, |s| {
        s.text("sluice.outcome").as_deref() == Some("error")
    });
    assert_eq!(failed.text("sluice.rule").as_deref(), Some("nope"));
    let status = failed.span.status.as_ref().expect("a status");
    assert_eq!(status.code, 2, "error status: {status:?}");
    assert!(status.message.contains("nope"), "{status:?}");
}

/// A transport the build cannot export over is refused at start, with the reason.
#[test]
fn an_otlp_protocol_other_than_grpc_refuses_to_start() {
    let dir = crate::common::TempDir::new();
    let config = dir.write("sluice.yaml", RULES);
    let out = sluice()
        .args(["serve", "--listen", "127.0.0.1:0", "--config"])
        .arg(&config)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
        .env("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
        .output()
        .expect("the binary runs");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("OTLP/gRPC only"), "{stderr}");
}

/// The families of a Prometheus text: each sample's metric name (a histogram's `_bucket`,
/// `_sum` and `_count` belong to its family), and the families given HELP and TYPE.
fn families(text: &str) -> (BTreeSet<String>, BTreeSet<String>, BTreeSet<String>) {
    let (mut sampled, mut help, mut kind) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("#"), Some("HELP"), Some(name)) => {
                help.insert(name.to_string());
            }
            (Some("#"), Some("TYPE"), Some(name)) => {
                kind.insert(name.to_string());
            }
            (Some("#"), ..) => {}
            _ => {
                let name = line.split(['{', ' ']).next().unwrap_or_default();
                let family = ["_bucket", "_sum", "_count"]
                    .iter()
                    .find_map(|s| name.strip_suffix(s).filter(|f| kind.contains(*f)))
                    .unwrap_or(name);
                sampled.insert(family.to_string());
            }
        }
    }
    (sampled, help, kind)
}

#[tokio::test]
async fn every_metric_family_has_help_and_type_and_requests_are_timed_per_route() {
    let server = Server::start(RULES);
    let who = json!({ "user": "cy", "ip": "198.51.100.7" });
    assert_eq!(server.check("login", who.clone()).await.status, 200);
    assert_eq!(server.check("login", who.clone()).await.status, 429);
    let peek = json!({ "rule": "login", "attributes": who }).to_string();
    assert_eq!(server.post("/v1/peek", &peek).await.status, 200);
    for _ in 0..2 {
        let tried = server.check("trial", json!({ "user": "cy" })).await;
        assert_eq!(tried.status, 200, "a shadow limit denies nothing");
    }
    assert_eq!(server.get("/v1/rules").await.status, 200);
    // Forward-auth without the attribute: refused, and timed under its template.
    server.get("/v1/auth/trial").await;
    assert_eq!(server.get("/no/such/path/12345").await.status, 404);
    // The decision path, answered through the router for a wrong method.
    assert_eq!(server.get("/v1/check").await.status, 405);
    let text = server.get("/metrics").await.text;

    let (sampled, help, kind) = families(&text);
    assert!(sampled.len() >= 6, "{sampled:?}");
    for family in &sampled {
        assert!(help.contains(family), "no # HELP for {family}:\n{text}");
        assert!(kind.contains(family), "no # TYPE for {family}:\n{text}");
    }

    // Every family served is in the metric reference, and carries only the labels it lists.
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let name = line.split(['{', ' ']).next().unwrap_or_default();
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|f| kind.contains(*f)))
            .unwrap_or(name);
        let documented = sluice_server::metrics::labels(family)
            .unwrap_or_else(|| panic!("{family} is served and not in the metric reference"));
        let labels = line
            .split_once('{')
            .and_then(|(_, rest)| rest.rsplit_once('}'))
            .map(|(labels, _)| labels)
            .unwrap_or_default();
        for pair in labels.split("\",").filter(|p| !p.is_empty()) {
            let label = pair.split('=').next().unwrap_or_default();
            assert!(
                label == "le" || documented.contains(&label),
                "{family} has the label {label}, which the reference does not list: {line}"
            );
        }
    }

    let (version, commit) = (env!("CARGO_PKG_VERSION"), "commit=\"");
    let info = text
        .lines()
        .find(|l| l.starts_with("sluice_build_info{"))
        .unwrap_or_else(|| panic!("no build info:\n{text}"));
    assert!(info.contains(&format!("version=\"{version}\"")), "{info}");
    assert!(info.ends_with(" 1"), "{info}");
    // Built from this repository's checkout, the commit is known, and it is the one `sluice
    // --version` names: both come from the one build variable.
    assert!(info.contains(commit), "{info}");
    let out = sluice().arg("--version").output().unwrap();
    let line = String::from_utf8(out.stdout).unwrap();
    let named = line
        .trim_end()
        .rsplit_once("(commit ")
        .and_then(|(_, c)| c.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{line}"));
    assert!(
        info.contains(&format!("commit=\"{named}\"")),
        "{info} / {line}"
    );

    let count = |route: &str| {
        let series = format!("sluice_http_request_duration_seconds_count{{route=\"{route}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&series))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or_else(|| panic!("no latency of {route}:\n{text}"))
    };
    assert_eq!(count("/v1/check"), 5, "four decisions and a wrong method");
    assert_eq!(count("/v1/peek"), 1);
    assert_eq!(count("/v1/rules"), 1);
    assert_eq!(count("unmatched"), 1);
    assert_eq!(count("/v1/auth/{rule}"), 1);
    // The route labels the book gives as examples are labels the service has.
    let docs = sluice_test_support::docs::chapter("operations/metrics.md");
    let examples = docs
        .split("`route` is the route's template as\nthe router matched it (")
        .nth(1)
        .and_then(|rest| rest.split(", on the gRPC port").next())
        .expect("the book names example route labels");
    for label in examples.split(", ") {
        let label = label.trim_matches('`');
        assert!(
            text.contains(&format!("route=\"{label}\"")),
            "the book names the route label {label}, which the service does not have:\n{text}"
        );
    }
    assert!(!text.contains("12345"), "a path is never a label:\n{text}");

    // The check and the peek that saw the identity denied, as `sluice_decisions_total` counts.
    let denials =
        "sluice_limit_denials_total{rule=\"login\",limit=\"per_user\",outcome=\"denied\"} 2";
    assert!(text.contains("sluice_decisions_total{rule=\"login\",outcome=\"denied\"} 2"));
    assert!(text.contains(denials), "{text}");
    assert!(
        !text.contains("limit=\"ip\""),
        "only limits that denied:\n{text}"
    );
    // A shadow limit's denials are counted apart: the decisions they would have denied passed.
    let shadow =
        "sluice_limit_denials_total{rule=\"trial\",limit=\"dry_run\",outcome=\"shadow_denied\"} 1";
    assert!(text.contains(shadow), "{text}");
}

const ENVOY_RULES: &str = "\
grpc_listen: 127.0.0.1:0
rules:
  per_user:
    limits:
      - { name: user, by: [user], rate: 1/1h }
envoy:
  edge:
    - descriptor: [user]
      rule: per_user
";

/// Envoy's `ShouldRateLimit` joins the trace Envoy propagates in its gRPC metadata, and its
/// latency is labelled by the gRPC service's route.
#[tokio::test]
async fn an_envoy_decision_is_traced_and_timed_per_grpc_route() {
    use crate::envoy::{descriptor, grpc_client, request};
    use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

    let receiver = OtlpReceiver::start();
    let server = Server::start_with(ENVOY_RULES, "sluice.yaml", traced(&receiver));
    let mut client = grpc_client(&server).await;
    for expected in [Code::Ok, Code::OverLimit] {
        let mut call = tonic::Request::new(request("edge", vec![descriptor(&[("user", "u1")])]));
        let traceparent = format!("00-{TRACE_ID}-{PARENT_ID}-01");
        call.metadata_mut()
            .insert("traceparent", traceparent.parse().expect("ASCII"));
        let answer = client.should_rate_limit(call).await.expect("an answer");
        assert_eq!(answer.into_inner().overall_code, i32::from(expected));
    }
    let within = Duration::from_secs(20);
    let denied = receiver.wait_for(within, |s| {
        s.trace_id() == TRACE_ID && s.text("sluice.outcome").as_deref() == Some("denied")
    });
    assert_eq!(denied.parent_span_id(), PARENT_ID);
    assert_eq!(denied.text("sluice.gateway").as_deref(), Some("envoy"));
    let limits = denied.text("sluice.denied_limits").expect("denied limits");
    assert!(limits.contains("per_user.user"), "{limits}");
    assert!(denied.double("sluice.store.duration").is_some());

    let text = server.get("/metrics").await.text;
    let route = "sluice_http_request_duration_seconds_count{route=\"/envoy.service.ratelimit.v3.RateLimitService/";
    let count: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix(route))
        .and_then(|rest| rest.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no gRPC route latency:\n{text}"));
    assert_eq!(count, 2);
}
