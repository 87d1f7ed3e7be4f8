//! tower/axum middleware: one rule in front of a route, in one line.
//!
//! ```
//! use axum::{Router, routing::{get, post}};
//! use sluice::middleware::{ClientIp, PathParam, SluiceLayer};
//! use sluice::{Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
//!
//! let limiter = Limiter::builder(MemoryStore::new())
//!     .rule("login", Rule::new(vec![Limit::new(&["ip"], "5/1m".parse()?, Algorithm::SlidingLog)]))
//!     .rule("employee", Rule::new(vec![Limit::new(&["id"], "5/10s".parse()?, Algorithm::SlidingLog)]))
//!     .build()?;
//! let app: Router = Router::new()
//!     .route("/login", post(|| async { "ok" }).layer(SluiceLayer::new(&limiter, "login").extract(ClientIp::new("ip"))))
//!     .route("/employees/{id}", get(|| async { "ok" }).layer(SluiceLayer::new(&limiter, "employee").extract(PathParam::new("id"))));
//! // Serve with `app.into_make_service_with_connect_info::<std::net::SocketAddr>()`, so the
//! // peer address is known.
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Responses:
//! - allowed: the handler's response plus `RateLimit-Policy`, `RateLimit`, `X-RateLimit-Limit`,
//!   `-Remaining`, `-Reset` (per [`HeaderStyle`](crate::model::HeaderStyle));
//! - denied: 429, the same headers and `Retry-After`, and a JSON body
//!   `{"error", "rule", "retry_after_ms", "blocked_until_ms", "warning", "degraded"}` whose
//!   `error` is the layer's message, else the rule's `message`, else `rate limit exceeded`;
//! - a missing attribute or unusable value: 400 `{"error": "..."}` naming it; a wiring mistake
//!   (unknown rule, no peer address, path parameters outside a route): 500, logged;
//! - degraded (the store could not be asked; the fail policy decided): `X-RateLimit-Degraded:
//!   true` on the response, an `info` log line, and the limiter's
//!   `sluice_degraded_decisions_total` counter;
//! - a leaky bucket's shaping delay is waited out before the handler runs ([`Shaping::Wait`], the
//!   default) or exposed as `X-RateLimit-Delay-Ms` ([`Shaping::Expose`]);
//! - a rule with a concurrency limit holds its lease while the handler runs and its response
//!   body is sent: the [`LeasedBody`] releases it after the last frame, or when the body is
//!   dropped unfinished (a handler error or panic, a client gone). Response bodies are wrapped
//!   in [`LeasedBody`] (an `http_body::Body` whenever the handler's is);
//! - with [`SluiceLayer::reserve`], a request reserves an estimated cost and the handler's
//!   [`ActualCost`] (a response extension) settles it.
//!
//! # Layout
//! The modules are private; everything they offer is re-exported here.
//! - `layer`: [`SluiceLayer`] and [`SluiceService`], [`Shaping`], [`ActualCost`],
//!   [`RequestAttributes`];
//! - `leased_body`: [`LeasedBody`], the response body that holds a lease until it is done;
//! - `extract`: the [`Extract`] trait, [`AttributeList`], closures ([`from_fn`]) and composites;
//! - `client_ip`: [`PeerIp`], and [`ClientIp`] behind trusted proxies;
//! - `request`: [`Header`], [`PathParam`], [`QueryParam`], [`Extension`];
//! - `forwarded`: parsing of `Forwarded` / `X-Forwarded-For` / `X-Real-IP`;
//! - `response`: bodies and headers ([`apply_headers`], [`insert_headers`]), and
//!   [`Limited`](crate::Limited) as an axum response.

mod client_ip;
mod extract;
mod forwarded;
mod layer;
mod leased_body;
mod request;
mod response;

pub use client_ip::{ClientIp, DEFAULT_IPV6_PREFIX, ForwardingHeader, PeerIp, ip_identity};
pub use extract::{AttributeList, Extract, ExtractError, ExtractErrorKind, FromFn, from_fn};
pub use layer::{ActualCost, RequestAttributes, Shaping, SluiceLayer, SluiceService};
pub use leased_body::LeasedBody;
pub use request::{Extension, Header, PathParam, QueryParam};
pub use response::{DEFAULT_MESSAGE, DEGRADED_HEADER, DELAY_HEADER, apply_headers, insert_headers};
