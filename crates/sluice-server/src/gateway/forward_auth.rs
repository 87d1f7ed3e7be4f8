//! Forward-auth: `/v1/auth/{rule}`, asked by nginx `auth_request`, Traefik ForwardAuth and Caddy
//! `forward_auth` before they pass a request on.
//!
//! The request's attributes come from its headers (the `forward_auth` section): every header
//! starting with `header_prefix` (default `x-sluice-`; `X-Sluice-Promo-Code: p1` →
//! `promo_code=p1`) and the headers mapped by name in `headers`. The client's address is the
//! attribute `client_ip.attribute` (default `ip`), found by the middleware's
//! [`ClientIp`]: the connection's peer, or, when the peer is a trusted proxy, the nearest
//! untrusted hop of its forwarding header. It always replaces a header of the same name, so a
//! client cannot choose its address; the proxy must set (not pass through) every other attribute
//! header it relies on.
//!
//! Query parameters (written in the proxy's config, out of the client's reach): `cost` (units,
//! default 1, 0 only looks) and `denied_status` (429, 403 or 401; default the section's
//! `denied_status`, 429).
//!
//! The answer has an empty body and the rate-limit headers: 200 when allowed, the denied status
//! when not (with `Retry-After`). nginx's `auth_request` accepts only 2xx, 401 and 403 (anything
//! else becomes a 500), so nginx asks with `denied_status=403` and maps it to 429 itself;
//! Traefik and Caddy pass the 429 on as it is. Bad input is a 4xx with a JSON `{"error"}`.

use std::net::SocketAddr;
use std::sync::Arc;

use crate::config::ForwardAuthConfig;
use crate::config::gateway::{ClientIpHeader, DENIED_STATUSES};
use axum::extract::{ConnectInfo, Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::{Extension, Router};
use serde::Deserialize;
use sluice::Check;
use sluice::middleware::{ClientIp, ForwardingHeader, apply_headers};

use crate::api_error::ErrorBody;
use crate::http::error::{ApiError, ErrorCode};
use crate::state::AppState;
use crate::traces::HeaderCarrier;

/// Most attributes one request may carry through headers.
pub const MAX_ATTRIBUTES: usize = 32;

/// The forward-auth route. Any method: proxies ask with the client's method or with GET.
pub fn router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/v1/auth/{rule}", any(auth))
        .with_state(state)
}

/// The query parameters.
#[derive(Debug, Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct AuthQuery {
    /// Units to consume (default 1; 0 only looks).
    #[param(minimum = 0, maximum = 10_000_000)]
    pub cost: Option<u64>,
    /// The status of a denial: 429, 403 or 401.
    #[param(minimum = 401, maximum = 429)]
    pub denied_status: Option<u16>,
}

/// `/v1/auth/{rule}` (any method; GET and POST are documented).
#[utoipa::path(method(get, post), path = "/v1/auth/{rule}", tag = "gateways",
    description = "Forward-auth: decides the request described by the headers (`X-Sluice-<attribute>`, the mapped headers, the client's address). The answer has no body, only the status and the rate-limit headers.",
    params(("rule" = String, Path, description = "The rule", example = "login"), AuthQuery),
    responses(
        (status = 200, description = "Allowed"),
        (status = 429, description = "Denied (or the `denied_status` asked: 403, 401)"),
        (status = 403, description = "Denied, when `denied_status=403`"),
        (status = 401, description = "Denied, when `denied_status=401`"),
        (status = 400, description = "Bad input (`bad_query`, `bad_attribute`, `missing_attribute`, `bad_cost`)", body = ErrorBody),
        (status = 404, description = "No rule by that name is in force (`unknown_rule`)", body = ErrorBody),
        (status = 408, description = "Not answered within `request_timeout` (`timeout`)", body = ErrorBody),
    ))]
pub(crate) async fn auth(
    State(state): State<Arc<AppState>>,
    rule: Result<Path<String>, axum::extract::rejection::PathRejection>,
    query: Result<Query<AuthQuery>, axum::extract::rejection::QueryRejection>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    request_headers: HeaderMap,
) -> Result<Response, ApiError> {
    // A path that is not UTF-8 once decoded names no rule.
    let Path(rule) = rule.map_err(|e| ApiError::new(ErrorCode::UnknownRule, e.body_text()))?;
    let Query(query) = query.map_err(|e| ApiError::new(ErrorCode::BadQuery, e.body_text()))?;
    let live = state.live.load();
    let section = &live.config.forward_auth;
    let denied_status = query.denied_status.unwrap_or(section.denied_status);
    if !DENIED_STATUSES.contains(&denied_status) {
        return Err(ApiError::new(
            ErrorCode::BadQuery,
            format!("`denied_status` must be 429, 403 or 401, not {denied_status}"),
        ));
    }
    let Some(Extension(ConnectInfo(peer))) = peer else {
        return Err(ApiError::new(
            ErrorCode::Internal,
            "no peer address recorded for this connection",
        ));
    };
    let mut attributes = attributes(section, &request_headers)?;
    let client_ip = client_ip(section);
    let ip = client_ip.identity(client_ip.resolve(peer.ip(), &request_headers));
    let name = section.client_ip.attribute.as_str();
    attributes.retain(|(n, _)| n != name);
    attributes.push((name.to_string(), ip));
    let attributes: Vec<(&str, &str)> = attributes
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();

    let check = Check::cost(query.cost.unwrap_or(1));
    let carrier = HeaderCarrier(&request_headers);
    let decision = state
        .decide_traced(&rule, &attributes, check, &carrier)
        .await?;
    let status = if decision.allowed {
        StatusCode::OK
    } else {
        StatusCode::from_u16(denied_status).unwrap_or(StatusCode::TOO_MANY_REQUESTS)
    };
    let mut response = status.into_response();
    apply_headers(response.headers_mut(), &decision, live.headers);
    Ok(response)
}

/// The attributes carried by headers: prefixed ones, then mapped ones.
fn attributes(
    section: &ForwardAuthConfig,
    request_headers: &HeaderMap,
) -> Result<Vec<(String, String)>, ApiError> {
    let mut out: Vec<(String, String)> = Vec::new();
    let prefix = section.header_prefix.to_ascii_lowercase();
    for (header, value) in request_headers {
        let header = header.as_str();
        let mapped = section
            .headers
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(header));
        let attribute = match mapped {
            Some((_, attribute)) => attribute.clone(),
            None => match header.strip_prefix(prefix.as_str()) {
                Some(rest) if !prefix.is_empty() && !rest.is_empty() => rest.replace('-', "_"),
                _ => continue,
            },
        };
        let value = value.to_str().map_err(|_| ApiError {
            attribute: Some(attribute.clone()),
            ..ApiError::new(
                ErrorCode::BadAttribute,
                format!("header `{header}` is not visible ASCII"),
            )
        })?;
        if out.iter().any(|(n, _)| *n == attribute) {
            continue;
        }
        if out.len() == MAX_ATTRIBUTES {
            return Err(ApiError::new(
                ErrorCode::BadAttribute,
                format!("more than {MAX_ATTRIBUTES} attribute headers"),
            ));
        }
        out.push((attribute, value.to_string()));
    }
    Ok(out)
}

/// The client-IP extractor the section describes (the middleware's, with the same defaults).
fn client_ip(section: &ForwardAuthConfig) -> ClientIp {
    let header = match section.client_ip.header {
        ClientIpHeader::XForwardedFor => ForwardingHeader::XForwardedFor,
        ClientIpHeader::Forwarded => ForwardingHeader::Forwarded,
        ClientIpHeader::XRealIp => ForwardingHeader::XRealIp,
    };
    ClientIp::new(section.client_ip.attribute.clone())
        .trust(section.client_ip.trusted.iter().copied())
        .header(header)
        .ipv6_prefix(section.client_ip.ipv6_prefix)
}
