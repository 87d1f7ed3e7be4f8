//! The span of one decision: started before the limiter is asked, ended with what it answered.
//!
//! Attributes (all under `sluice.`): `rule` (a list when several rules are decided as one, as
//! Envoy's descriptors are), `mode` (`check` or `peek`), `outcome` (`allowed`,
//! `denied`, `shadow_denied` or `error`), `denied_limits` (the ids of the limits that denied),
//! `degraded` (when the fail policy answered), `store.duration` (seconds spent waiting for the
//! store), and for Envoy's `ShouldRateLimit` `gateway` (`envoy`). An error (an unknown rule, a missing attribute) sets the span's status to error with
//! its message.

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;
use opentelemetry::trace::{Span as _, SpanKind, Status, Tracer as _};
use opentelemetry::{Context, KeyValue, StringValue, Value};
use opentelemetry_sdk::trace::{SdkTracer, Span};
use sluice::Decision;
use sluice::algorithm::Mode;

/// A decision's span, open until [`DecisionSpan::end`].
#[derive(Debug)]
pub struct DecisionSpan(Span);

impl DecisionSpan {
    pub(super) fn start(tracer: &SdkTracer, parent: &Context) -> DecisionSpan {
        let span = tracer
            .span_builder("sluice.decision")
            .with_kind(SpanKind::Server)
            .start_with_context(tracer, parent);
        DecisionSpan(span)
    }

    /// Ends the span with the decision of `rule` in `mode` (or the error that stopped it) and
    /// the time its store calls took.
    pub fn end(
        self,
        rule: &str,
        mode: Mode,
        result: &Result<Decision, sluice::Error>,
        store: Duration,
    ) {
        let result = result.as_ref().map(std::slice::from_ref);
        self.end_all(&[rule], mode, result, store);
    }

    /// Ends the span with the decisions of several `rules` decided as one (all or nothing).
    pub fn end_all(
        mut self,
        rules: &[&str],
        mode: Mode,
        result: Result<&[Decision], &sluice::Error>,
        store: Duration,
    ) {
        let span = &mut self.0;
        if !span.is_recording() {
            return;
        }
        let rule = match rules {
            [one] => Value::from(one.to_string()),
            many => Value::Array(
                many.iter()
                    .map(|r| StringValue::from(r.to_string()))
                    .collect::<Vec<_>>()
                    .into(),
            ),
        };
        span.set_attribute(KeyValue::new("sluice.rule", rule));
        let mode = match mode {
            Mode::Apply => "check",
            Mode::Peek => "peek",
        };
        span.set_attribute(KeyValue::new("sluice.mode", mode));
        span.set_attribute(KeyValue::new("sluice.store.duration", store.as_secs_f64()));
        match result {
            Ok(decisions) => {
                let denied: Vec<StringValue> = decisions
                    .iter()
                    .flat_map(|d| &d.limits)
                    .filter(|l| !l.allowed)
                    .map(|l| StringValue::from(l.id.to_string()))
                    .collect();
                let allowed = decisions.iter().all(|d| d.allowed);
                let outcome = match (allowed, denied.is_empty()) {
                    (false, _) => "denied",
                    (true, false) => "shadow_denied",
                    (true, true) => "allowed",
                };
                span.set_attribute(KeyValue::new("sluice.outcome", outcome));
                if !denied.is_empty() {
                    span.set_attribute(KeyValue::new(
                        "sluice.denied_limits",
                        Value::Array(denied.into()),
                    ));
                }
                if decisions.iter().any(|d| d.degraded) {
                    span.set_attribute(KeyValue::new("sluice.degraded", true));
                }
            }
            Err(error) => {
                span.set_attribute(KeyValue::new("sluice.outcome", "error"));
                span.set_status(Status::error(error.to_string()));
            }
        }
        span.end();
    }

    /// Ends the span of an Envoy `ShouldRateLimit` call from its answer: the outcome is the
    /// overall code, the denied limits are the descriptors' over-limit `rule.limit` names.
    pub fn end_envoy(mut self, answer: &Result<RateLimitResponse, tonic::Status>, store: Duration) {
        let span = &mut self.0;
        if !span.is_recording() {
            return;
        }
        span.set_attribute(KeyValue::new("sluice.mode", "check"));
        span.set_attribute(KeyValue::new("sluice.gateway", "envoy"));
        span.set_attribute(KeyValue::new("sluice.store.duration", store.as_secs_f64()));
        match answer {
            Ok(response) => {
                let over = i32::from(Code::OverLimit);
                let denied: Vec<StringValue> = response
                    .statuses
                    .iter()
                    .filter(|s| s.code == over)
                    .filter_map(|s| s.current_limit.as_ref())
                    .map(|l| StringValue::from(l.name.clone()))
                    .collect();
                let outcome = if response.overall_code == over {
                    "denied"
                } else {
                    "allowed"
                };
                span.set_attribute(KeyValue::new("sluice.outcome", outcome));
                if !denied.is_empty() {
                    span.set_attribute(KeyValue::new(
                        "sluice.denied_limits",
                        Value::Array(denied.into()),
                    ));
                }
            }
            Err(status) => {
                span.set_attribute(KeyValue::new("sluice.outcome", "error"));
                span.set_status(Status::error(status.message().to_string()));
            }
        }
        span.end();
    }
}
