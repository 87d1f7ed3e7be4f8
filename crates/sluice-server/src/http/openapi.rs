//! The OpenAPI 3.1 document of the HTTP API, generated from the handlers' annotations and the
//! types of their bodies, served at `GET /openapi.json` and kept in the repository as
//! `docs/openapi.json`.
//!
//! Invariant: the committed file is this document, byte for byte (a test holds them together;
//! `SLUICE_BLESS_OPENAPI=1 cargo test -p sluice-ratelimit-server openapi` rewrites it after a change).
//! The dashboard's page and assets (`/ui`) are not part of the API and not described.

use std::sync::OnceLock;

use axum::Router;
use axum::http::{HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use super::{admin, check_all, dashboard, leases, routes, runtime_limits, usage};
use crate::api_error::{ApiError, ErrorBody, ErrorCode};
use crate::gateway::forward_auth;

/// The document.
#[derive(OpenApi)]
#[openapi(
    info(
        title = "Sluice",
        description = "A distributed rate limiter's decision service. A denial is an answer \
            (`429` with the decision), not an error; every other 4xx and 5xx answer is \
            `{\"error\": {\"code\", \"message\"}}` with a stable `code`.",
        license(name = "MIT OR Apache-2.0")
    ),
    paths(
        routes::check,
        routes::peek,
        check_all::check_all,
        usage::usage,
        leases::release,
        leases::renew,
        leases::settle,
        routes::rules,
        routes::healthz,
        routes::readyz,
        routes::prometheus,
        openapi_json,
        forward_auth::auth,
        admin::reset,
        admin::list,
        admin::block,
        admin::unblock,
        runtime_limits::list,
        runtime_limits::set,
        runtime_limits::remove,
        dashboard::stats::stats,
        dashboard::stats::lift,
    ),
    components(schemas(ErrorCode, ApiError, ErrorBody, super::decision_body::View)),
    modifiers(&AdminToken),
    tags(
        (name = "decisions", description = "Deciding requests"),
        (name = "leases", description = "Ending what a check began"),
        (name = "service", description = "Rules, health, metrics, this document"),
        (name = "gateways", description = "What proxies ask"),
        (name = "admin", description = "Behind `Authorization: Bearer <token>`"),
    )
)]
pub struct ApiDoc;

/// The `admin_token` security scheme of the admin endpoints.
struct AdminToken;

impl Modify for AdminToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The document as JSON, pretty-printed with a final newline (as the committed file).
pub fn document() -> &'static str {
    static DOCUMENT: OnceLock<String> = OnceLock::new();
    DOCUMENT.get_or_init(|| {
        let mut text = ApiDoc::openapi()
            .to_pretty_json()
            .unwrap_or_else(|error| format!("{{\"error\": \"{error}\"}}"));
        text.push('\n');
        text
    })
}

/// The route of `GET /openapi.json`.
pub(super) fn router() -> Router {
    Router::new().route("/openapi.json", get(openapi_json))
}

#[utoipa::path(get, path = "/openapi.json", tag = "service", description = "This document.", responses((status = 200, description = "The OpenAPI document", body = Object), (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody)))]
async fn openapi_json() -> Response {
    answer()
}

/// `GET /openapi.json`'s answer.
fn answer() -> Response {
    let mut response = document().into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_document_is_the_generated_one() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/openapi.json");
        if std::env::var_os("SLUICE_BLESS_OPENAPI").is_some() {
            std::fs::write(path, document()).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == document(),
            "docs/openapi.json differs from the API's document: run \
             `SLUICE_BLESS_OPENAPI=1 cargo test -p sluice-ratelimit-server --lib openapi` and commit it"
        );
    }

    #[test]
    fn the_document_is_openapi_3_1_and_lists_every_error_code() {
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
        assert!(doc["openapi"].as_str().unwrap().starts_with("3.1"));
        let codes = &doc["components"]["schemas"]["ErrorCode"]["enum"];
        for code in ErrorCode::ALL {
            assert!(
                codes.as_array().unwrap().contains(&code.as_str().into()),
                "{code:?}"
            );
        }
    }

    #[test]
    fn the_full_decision_schema_has_the_fields_decision_json_writes() {
        let doc: serde_json::Value = serde_json::from_str(document()).unwrap();
        let schemas = &doc["components"]["schemas"];
        // An object's property names, through the `allOf` parts and `$ref`s that make it up.
        fn properties(schemas: &serde_json::Value, schema: &serde_json::Value) -> Vec<String> {
            if let Some(reference) = schema["$ref"].as_str() {
                let name = reference.trim_start_matches("#/components/schemas/");
                return properties(schemas, &schemas[name]);
            }
            let mut keys: Vec<String> = schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            for part in schema["allOf"].as_array().into_iter().flatten() {
                keys.extend(properties(schemas, part));
            }
            keys.sort();
            keys
        }
        let properties = |name: &str| properties(schemas, &schemas[name]);
        let mut decision = sluice::Decision::pass_through("r", "why");
        // `LimitDecision` is `#[non_exhaustive]`: built the way a client reads one.
        let limit: sluice::LimitDecision = serde_json::from_value(serde_json::json!({
            "id": "l", "identity": [], "algorithm": "gcra", "allowed": true, "limit": 1,
            "window_ms": 1, "remaining": 1, "reset_after_ms": 1, "violations": 0,
            "warning": false, "delay_ms": 0, "shadow": false, "over_quota": true,
        }))
        .expect("a limit's decision");
        // Every field written: the ones left out when false too.
        decision.over_quota = true;
        decision.limits = sluice::model::LimitDecisions::from_vec(vec![limit]);
        decision.lease = Some("x".into());
        decision.lease_until_ms = Some(1);
        decision.reservation = Some("x".into());
        decision.reservation_until_ms = Some(1);
        let mut written = Vec::new();
        crate::decision_json::write_decision_json(&mut written, &decision, Some("m"));
        let written: serde_json::Value = serde_json::from_slice(&written).unwrap();
        let mut keys: Vec<String> = written.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        assert_eq!(keys, properties("DecisionBody"));
        let mut limit_keys: Vec<String> = written["limits"][0]
            .as_object()
            .unwrap()
            .keys()
            .cloned()
            .collect();
        limit_keys.sort();
        assert_eq!(limit_keys, properties("LimitDecision"));
    }
}
