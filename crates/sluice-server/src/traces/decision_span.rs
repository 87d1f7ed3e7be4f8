//! The span of one decision: started before the limiter is asked, ended with what it answered.
//!
//! Attributes (all under `sluice.`): `rule`, `mode` (`check` or `peek`), `outcome` (`allowed`,
//! `denied`, `shadow_denied` or `error`), `denied_limits` (the ids of the limits that denied),
//! `degraded` (when the fail policy answered), `store.duration` (seconds spent waiting for the
//! store). An error (an unknown rule, a missing attribute) sets the span's status to error with
//! its message.

use std::time::Duration;

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
        mut self,
        rule: &str,
        mode: Mode,
        result: &Result<Decision, sluice::Error>,
        store: Duration,
    ) {
        let span = &mut self.0;
        if !span.is_recording() {
            return;
        }
        span.set_attribute(KeyValue::new("sluice.rule", rule.to_string()));
        let mode = match mode {
            Mode::Apply => "check",
            Mode::Peek => "peek",
        };
        span.set_attribute(KeyValue::new("sluice.mode", mode));
        span.set_attribute(KeyValue::new("sluice.store.duration", store.as_secs_f64()));
        match result {
            Ok(decision) => {
                let denied: Vec<StringValue> = decision
                    .limits
                    .iter()
                    .filter(|l| !l.allowed)
                    .map(|l| StringValue::from(l.id.to_string()))
                    .collect();
                let outcome = match (decision.allowed, denied.is_empty()) {
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
                if decision.degraded {
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
}
