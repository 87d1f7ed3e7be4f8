//! The dashboard: `GET /ui`, a small page served from the binary, and the admin read endpoints it
//! needs (`GET /v1/stats`, `POST /v1/blocks/lift`; run-time limits come from `/v1/limits`).
//!
//! The page is plain HTML, CSS and JavaScript compiled in with `include_str!`: no CDN, no external
//! font, nothing fetched from elsewhere (its Content-Security-Policy allows only this origin). The
//! page itself holds no data and needs no token; everything it shows comes from the admin API
//! with the same bearer token, which the page asks for once and keeps in `sessionStorage` (never
//! in a URL, so never in logs, history or `Referer`).
//!
//! # Layout
//! - `stats`: decision counters per rule (from this process's metrics), the store's health, the
//!   top denied identities;
//! - `assets/`: `index.html`, `style.css`, `app.js`.

pub(super) mod stats;

use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderValue, header};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};

use super::admin;
use super::error::MAX_BODY_BYTES;
use crate::state::AppState;

const INDEX: &str = include_str!("assets/index.html");
const STYLE: &str = include_str!("assets/style.css");
const SCRIPT: &str = include_str!("assets/app.js");

/// Only this origin, no inline code, no framing.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; \
                   img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub(super) fn router(state: Arc<AppState>) -> Router {
    // The counters the page shows are the process's metrics: make sure they are being recorded
    // even when the server was built without `sluice serve` (embedded in a test or an app).
    crate::metrics::install();
    let api = Router::new()
        .route("/v1/stats", get(stats::stats))
        .route("/v1/blocks/lift", post(stats::lift))
        .route_layer(middleware::from_fn_with_state(state.clone(), admin::guard))
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .with_state(state);
    Router::new()
        .route(
            "/ui",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/ui/",
            get(|| async { asset(INDEX, "text/html; charset=utf-8") }),
        )
        .route(
            "/ui/style.css",
            get(|| async { asset(STYLE, "text/css; charset=utf-8") }),
        )
        .route(
            "/ui/app.js",
            get(|| async { asset(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .merge(api)
}

fn asset(body: &'static str, content_type: &'static str) -> Response {
    let mut response = body.into_response();
    let headers = response.headers_mut();
    for (name, value) in [
        (header::CONTENT_TYPE, content_type),
        (header::CONTENT_SECURITY_POLICY, CSP),
        (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        (header::REFERRER_POLICY, "no-referrer"),
        (header::CACHE_CONTROL, "no-cache"),
    ] {
        headers.insert(name, HeaderValue::from_static(value));
    }
    response
}
