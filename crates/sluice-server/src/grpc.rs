//! Sluice's own gRPC API, `sluice.v1.Sluice` (`proto/sluice/v1/sluice.proto`): check, peek,
//! check-all, release, renew and settle, served on the gRPC port beside Envoy's rate-limit
//! service, with server reflection.
//!
//! Each call is its HTTP endpoint's twin: the same limiter calls, the same bounds (a message is at
//! most [`MAX_GRPC_MESSAGE_BYTES`](crate::gateway::MAX_GRPC_MESSAGE_BYTES), as an HTTP body; a
//! check-all at most [`MAX_CHECKS`] parts), the same answers, and the same errors: an
//! [`ApiError`] sent as its gRPC status (see [`crate::api_error`]). A denial is an answer
//! (`allowed: false`), never an error.

use std::sync::Arc;

use sluice::Check;
use tonic::{Request, Response, Status};

use crate::api_error::ApiError;
use crate::http::check_all::{MAX_CHECKS, Part, at, check_len, decide_all, no_reservations};
use crate::state::AppState;

/// The messages and service generated from the `.proto`.
#[allow(missing_docs, clippy::all, clippy::pedantic)]
pub mod pb {
    tonic::include_proto!("sluice.v1");
}

/// The `.proto`'s descriptor set, for server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/sluice_v1_descriptor.bin"));

use pb::sluice_server::Sluice;

/// The service over the server's state.
#[derive(Debug, Clone)]
pub struct SluiceService {
    state: Arc<AppState>,
}

impl SluiceService {
    /// A service deciding with `state`'s limiter.
    pub fn new(state: Arc<AppState>) -> SluiceService {
        SluiceService { state }
    }

    /// The tonic server of this service.
    pub fn server(state: Arc<AppState>) -> pb::sluice_server::SluiceServer<SluiceService> {
        pb::sluice_server::SluiceServer::new(SluiceService::new(state))
    }

    async fn decide(
        &self,
        request: &pb::CheckRequest,
        peek: bool,
    ) -> Result<pb::Decision, ApiError> {
        let attributes = pairs(request);
        let mut check = Check::cost(request.cost.unwrap_or(1));
        if request.reserve {
            check = check.reserve();
        }
        if peek {
            check = check.peek();
        }
        let decision = self.state.decide(&request.rule, &attributes, check).await?;
        let message = (!peek && !decision.allowed)
            .then(|| self.state.limiter.message(&decision.rule))
            .flatten();
        Ok(to_proto(decision, message))
    }
}

fn pairs(request: &pb::CheckRequest) -> Vec<(&str, &str)> {
    request
        .attributes
        .iter()
        .map(|(name, value)| (name.as_str(), value.as_str()))
        .collect()
}

#[tonic::async_trait]
impl Sluice for SluiceService {
    async fn check(
        &self,
        request: Request<pb::CheckRequest>,
    ) -> Result<Response<pb::Decision>, Status> {
        Ok(Response::new(self.decide(request.get_ref(), false).await?))
    }

    async fn peek(
        &self,
        request: Request<pb::CheckRequest>,
    ) -> Result<Response<pb::Decision>, Status> {
        Ok(Response::new(self.decide(request.get_ref(), true).await?))
    }

    async fn check_all(
        &self,
        request: Request<pb::CheckAllRequest>,
    ) -> Result<Response<pb::CheckAllResponse>, Status> {
        let checks = &request.get_ref().checks;
        check_len(checks.len())?;
        let parts = checks
            .iter()
            .enumerate()
            .map(|(index, check)| {
                if check.reserve {
                    return Err(at(index)(no_reservations()));
                }
                Part::new(&check.rule, pairs(check), check.cost.unwrap_or(1)).map_err(at(index))
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        debug_assert!(parts.len() <= MAX_CHECKS);
        let decisions = decide_all(&self.state, &parts).await?;
        let allowed = decisions.iter().all(|d| d.allowed);
        let looks = parts.iter().all(|p| p.cost == 0);
        let decisions = decisions
            .into_iter()
            .map(|d| {
                let message = (!looks && !d.allowed)
                    .then(|| self.state.limiter.message(&d.rule))
                    .flatten();
                to_proto(d, message)
            })
            .collect();
        Ok(Response::new(pb::CheckAllResponse { allowed, decisions }))
    }

    async fn usage(
        &self,
        request: Request<pb::UsageRequest>,
    ) -> Result<Response<pb::UsageResponse>, Status> {
        let request = request.get_ref();
        let attributes: Vec<(&str, &str)> = request
            .attributes
            .iter()
            .map(|(name, value)| (name.as_str(), value.as_str()))
            .collect();
        let usage = self
            .state
            .limiter
            .usage(&request.rule, &attributes)
            .await
            .map_err(|e| ApiError::from(e).with_rule(&request.rule))?;
        Ok(Response::new(pb::UsageResponse {
            rule: usage.rule.to_string(),
            at_ms: usage.at_ms,
            limits: usage
                .limits
                .into_iter()
                .map(|l| pb::LimitUsage {
                    id: l.id.to_string(),
                    limit: l.limit,
                    used: l.used,
                    remaining: l.remaining,
                    period_start_ms: l.period_start_ms,
                    period_end_ms: l.period_end_ms,
                    over: l.over,
                })
                .collect(),
        }))
    }

    async fn release(
        &self,
        request: Request<pb::LeaseRequest>,
    ) -> Result<Response<pb::ReleaseResponse>, Status> {
        let released = self
            .state
            .limiter
            .release(&request.get_ref().lease)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::ReleaseResponse { released }))
    }

    async fn renew(
        &self,
        request: Request<pb::LeaseRequest>,
    ) -> Result<Response<pb::RenewResponse>, Status> {
        let until = self
            .state
            .limiter
            .renew(&request.get_ref().lease)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::RenewResponse {
            renewed: until.is_some(),
            lease_until_ms: until,
        }))
    }

    async fn settle(
        &self,
        request: Request<pb::SettleRequest>,
    ) -> Result<Response<pb::SettleResponse>, Status> {
        let request = request.get_ref();
        let settled = self
            .state
            .limiter
            .settle(&request.reservation, request.cost)
            .await
            .map_err(ApiError::from)?;
        Ok(Response::new(pb::SettleResponse { settled }))
    }
}

/// A decision as its message: field for field the full view's JSON.
pub fn to_proto(d: sluice::Decision, message: Option<String>) -> pb::Decision {
    pb::Decision {
        allowed: d.allowed,
        rule: d.rule.to_string(),
        limit: d.quota,
        remaining: d.remaining,
        reset_after_ms: d.reset_after_ms,
        retry_after_ms: d.retry_after_ms,
        blocked_until_ms: d.blocked_until_ms,
        violations: d.violations,
        warning: d.warning,
        degraded: d.degraded,
        shadow: d.shadow,
        over_quota: d.over_quota,
        delay_ms: d.delay_ms,
        reason: d.reason,
        limits: d
            .limits
            .iter()
            .map(|l| pb::LimitDecision {
                id: l.id.to_string(),
                identity: l.attributes.iter().map(|a| a.to_string()).collect(),
                algorithm: l.algorithm.name().to_string(),
                allowed: l.allowed,
                limit: l.quota,
                window_ms: l.window_ms,
                remaining: l.remaining,
                reset_after_ms: l.reset_after_ms,
                retry_after_ms: l.retry_after_ms,
                blocked_until_ms: l.blocked_until_ms,
                violations: l.violations,
                warning: l.warning,
                delay_ms: l.delay_ms,
                shadow: l.shadow,
                over_quota: l.over_quota,
            })
            .collect(),
        lease: d.lease,
        lease_until_ms: d.lease_until_ms,
        reservation: d.reservation,
        reservation_until_ms: d.reservation_until_ms,
        message,
    }
}
