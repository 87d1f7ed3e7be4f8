//! Gateways: how proxies at the edge ask Sluice, without building a JSON body.
//!
//! - [`envoy`]: Envoy's global rate-limit service (RLS v3, `ShouldRateLimit` over gRPC), which
//!   Envoy, Istio, Envoy Gateway, Gloo/kgateway and Contour speak; served with the standard gRPC
//!   health service, Sluice's own API ([`crate::grpc`]) and server reflection on its own address
//!   (`grpc_listen` / `--grpc-listen`, off unless set);
//! - [`rlqs`]: Envoy's Rate Limit Quota Service (`StreamRateLimitQuotas`), on the same address
//!   as RLS: quotas assigned to proxies by their demand, drawn from the rules' shared limits;
//! - [`forward_auth`]: `/v1/auth/{rule}` on the HTTP service, for nginx `auth_request`, Traefik
//!   ForwardAuth and Caddy `forward_auth`.
//!
//! All read their mapping (descriptors → rules, headers → attributes) from the config in force,
//! so a reload applies to them as to the rules; the gRPC address needs a restart.

pub mod envoy;
pub mod forward_auth;
pub mod rlqs;

use std::future::Future;
use std::sync::Arc;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_service_server::RateLimitServiceServer;
use tokio::net::TcpListener;

use crate::grpc::{self, SluiceService};
use crate::http::{DeadlineLayer, Front, accept_loop};
use crate::state::AppState;

/// Largest gRPC message accepted by every service of the port: a rate-limit request is a few
/// hundred bytes.
pub const MAX_GRPC_MESSAGE_BYTES: usize = 64 * 1024;

/// Serves the Envoy rate-limit service, the Rate Limit Quota Service, Sluice's own API (`sluice.v1`), gRPC health and server
/// reflection on `listener` until `shutdown`, with the HTTP service's connection cap, timeouts
/// and streams per connection (the `server` section, `http::connections`): each call is answered
/// `DEADLINE_EXCEEDED` once it has waited `request_timeout` (a body that never ends included),
/// and every service takes messages of at most [`MAX_GRPC_MESSAGE_BYTES`] (RLQS reports, which
/// carry every bucket of a proxy, [`rlqs::MAX_RLQS_MESSAGE_BYTES`]). The deadline bounds the
/// wait for a response's head: an RLQS stream, answered at once, stays open until its proxy or
/// the shutdown ends it.
pub async fn serve_grpc(
    listener: TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let address = listener.local_addr()?;
    let (health, health_service) = tonic_health::server::health_reporter();
    let health_service = health_service.max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    health
        .set_serving::<RateLimitServiceServer<envoy::RateLimitService>>()
        .await;
    let limits = state.startup.server.clone();
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let quotas = rlqs::QuotaService::server(state.clone(), stopped.clone());
    let service = RateLimitServiceServer::new(envoy::RateLimitService::new(state.clone()))
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let sluice =
        SluiceService::server(state.clone()).max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    // Both versions of reflection: older clients (grpcurl before 1.9) ask v1alpha only.
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(grpc::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_v1 = reflection()
        .build_v1()
        .map_err(std::io::Error::other)?
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let reflection_v1alpha = reflection()
        .build_v1alpha()
        .map_err(std::io::Error::other)?
        .max_decoding_message_size(MAX_GRPC_MESSAGE_BYTES);
    let app = tonic::service::Routes::new(service)
        .add_service(health_service)
        .add_service(sluice)
        .add_service(quotas)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .into_axum_router()
        .layer(axum::middleware::from_fn_with_state(
            !state.limiter.store().in_process(),
            crate::http::caller_deadline::middleware,
        ))
        .layer(DeadlineLayer::grpc(limits.request_timeout))
        .layer(axum::middleware::from_fn(crate::http::timed));
    tracing::info!(%address, "Envoy rate-limit service (gRPC) on {address}");
    tokio::spawn(async move {
        shutdown.await;
        health
            .set_not_serving::<RateLimitServiceServer<envoy::RateLimitService>>()
            .await;
        let _ = stop.send(true);
    });
    accept_loop(listener, Front::router(app), limits, stopped).await
}
