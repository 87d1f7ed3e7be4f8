//! Envoy's Rate Limit Quota Service, `envoy.service.rate_limit_quota.v3.RateLimitQuotaService`
//! (`StreamRateLimitQuotas`), on the gRPC port beside RLS.
//!
//! Each proxy keeps one stream open, sorts requests into buckets (an unordered map of strings),
//! reports what each bucket allowed and denied every report interval, and applies the quota it
//! is assigned (`ALLOW_ALL`, `DENY_ALL` or a token bucket) until the assignment's time to live
//! runs out. Sluice matches a bucket id to a rule through the `envoy` section, splits the rule's
//! allowance for one interval among the proxies reporting the bucket by their demand (max-min
//! fair, [`fair_share`]), and takes the units of every assignment from the rule's limit in the
//! store before sending it ([`assign`]). The authoritative state is the store's counter: several
//! servers on one store share it, a proxy may reconnect to any of them, and a server that
//! restarts forgets only who was asking ([`demand`]).
//!
//! Over-admission bound, per bucket and window `W` of the rule's limit `L` (the book's "Rate
//! Limit Quota Service" derives it): the fleet admits at most what the store granted in the
//! window plus, for each proxy, the units of the assignment it held when the window opened (one
//! interval's fill `s` and its bucket `⌈s/4⌉`), plus `s × (assignment_ttl − report_interval) /
//! report_interval` for each proxy whose stream broke in the window.
//!
//! Metrics: `sluice_rlqs_streams`, `sluice_rlqs_reports_total{result}`,
//! `sluice_rlqs_actions_total{action}`, `sluice_rlqs_units_drawn_total{rule}`.
//!
//! Bounds on what a caller can grow: [`MAX_STREAMS`] open streams per server (more are refused
//! `RESOURCE_EXHAUSTED`), [`MAX_BUCKETS_PER_STREAM`] buckets per stream, bucket ids as
//! [`bucket_id`] checks them, and messages of at most [`MAX_RLQS_MESSAGE_BYTES`].
//!
//! # Layout
//! - `mod.rs` (this file): the gRPC service;
//! - [`streams`]: the server-wide state ([`Rlqs`](streams::Rlqs)): open streams and their slots,
//!   the demands, the reload signal;
//! - `stream`: one stream's reports and answers;
//! - `bucket_id`: bucket ids checked and made canonical;
//! - `demand`: the demands reported to this server and each stream's share;
//! - `fair_share`: max-min fair shares (pure);
//! - `assign`: the units behind an assignment, drawn from the store, and Envoy's strategies.

pub mod assign;
pub mod bucket_id;
pub mod demand;
pub mod fair_share;
mod stream;
pub mod streams;

use std::pin::Pin;
use std::sync::Arc;

use envoy_types::pb::envoy::service::rate_limit_quota::v3::rate_limit_quota_service_server::{
    RateLimitQuotaService, RateLimitQuotaServiceServer,
};
use envoy_types::pb::envoy::service::rate_limit_quota::v3::{
    RateLimitQuotaResponse, RateLimitQuotaUsageReports,
};
use futures::Stream;
use tokio::sync::{mpsc, watch};
use tonic::{Request, Response, Status, Streaming};

use crate::state::AppState;
use stream::QuotaStream;
use streams::MAX_STREAMS;

/// Most buckets one stream may report.
pub const MAX_BUCKETS_PER_STREAM: usize = 4_096;

/// Largest message a proxy may send: a report of every bucket of a stream with long ids.
pub const MAX_RLQS_MESSAGE_BYTES: usize = 1024 * 1024;

/// The path prefix of the service's methods: their responses are long-lived streams, which the
/// connection keeps in flight until they end (see `http::connections`).
pub const STREAM_PATH_PREFIX: &str = "/envoy.service.rate_limit_quota.v3.RateLimitQuotaService/";

/// The gRPC service over the server's state.
#[derive(Debug, Clone)]
pub struct QuotaService {
    state: Arc<AppState>,
    stopping: watch::Receiver<bool>,
}

impl QuotaService {
    /// The service, its streams ended when `stopping` turns true.
    pub fn server(
        state: Arc<AppState>,
        stopping: watch::Receiver<bool>,
    ) -> RateLimitQuotaServiceServer<QuotaService> {
        RateLimitQuotaServiceServer::new(QuotaService { state, stopping })
            .max_decoding_message_size(MAX_RLQS_MESSAGE_BYTES)
    }
}

type Answers = Pin<Box<dyn Stream<Item = Result<RateLimitQuotaResponse, Status>> + Send>>;

#[tonic::async_trait]
impl RateLimitQuotaService for QuotaService {
    type StreamRateLimitQuotasStream = Answers;

    async fn stream_rate_limit_quotas(
        &self,
        request: Request<Streaming<RateLimitQuotaUsageReports>>,
    ) -> Result<Response<Answers>, Status> {
        let Some(slot) = self.state.rlqs.slot() else {
            return Err(Status::resource_exhausted(format!(
                "this server has {MAX_STREAMS} quota streams open"
            )));
        };
        let (out, answers) = mpsc::channel(4);
        let stream = QuotaStream::new(self.state.clone(), slot, out);
        tokio::spawn(stream.run(request.into_inner(), self.stopping.clone()));
        let answers = futures::stream::unfold(answers, |mut answers| async move {
            answers.recv().await.map(|answer| (answer, answers))
        });
        Ok(Response::new(Box::pin(answers)))
    }
}
