//! The HTTP API: its routes, what answers a request before the router does, and the connections
//! they arrive on.
//!
//! Everything here reads the shared [`AppState`]; nothing here knows the gateways or how the
//! service is started (see [`serve`](fn@crate::serve)).
//!
//! # Layout
//! - `routes`: check, peek, rules, health, metrics;
//! - `decision_body`: a decision as an answer: the body in the view asked, the headers;
//! - [`check_all`]: `/v1/check-all`, several rules or identities decided all or nothing;
//! - `usage`: `/v1/usage`, what an identity has used of a rule's limits;
//! - `admin`: bearer-token guard, reset and blocks;
//! - `leases`: releasing and renewing leases, settling reservations;
//! - `runtime_limits`: setting, listing and removing identities' run-time limits (`/v1/limits`);
//! - `dashboard`: the `/ui` page and the admin read endpoints it uses (`/v1/stats`, block lifting);
//! - `connections`: the accept loop, its connection cap and the timeouts of stalled connections;
//! - `tracker`: what one connection is doing, and its yield after each response;
//! - `core_yield`: a worker thread's yield of its core every few dozen responses;
//! - `front`: what answers each request: the decision routes at once, the rest via the router;
//! - `deadline`: `request_timeout`, a 408 for a request not answered in time;
//!   `caller_deadline`: the caller's own deadline, read from its headers, under which its
//!   checks run;
//! - `latency`: the request-latency histogram per route ([`timed`] for routers);
//! - [`error`]: JSON errors and body parsing (every client mistake is a 4xx with `{"error"}`);
//! - `request`: the bodies that name a rule and an identity, read in place.

mod admin;
pub(crate) mod bodies;
pub(crate) mod caller_deadline;
pub mod check_all;
mod connections;
mod core_yield;
mod dashboard;
mod deadline;
mod decision_body;
pub mod error;
mod front;
pub(crate) mod latency;
mod leases;
pub mod openapi;
mod request;
mod routes;
mod runtime_limits;
mod tracker;
mod usage;

use std::sync::Arc;

use axum::Router;

pub(crate) use connections::accept_loop;
pub(crate) use deadline::DeadlineLayer;
pub use error::MAX_BODY_BYTES;
pub(crate) use front::Front;
pub use latency::timed;

use crate::state::AppState;

/// The HTTP API's routes over a state (the forward-auth gateway adds its own).
pub fn router(state: Arc<AppState>) -> Router {
    routes::router(state.clone())
        .merge(admin::router(state.clone()))
        .merge(leases::router(state.clone()))
        .merge(runtime_limits::router(state.clone()))
        .merge(dashboard::router(state))
        .merge(openapi::router())
}
