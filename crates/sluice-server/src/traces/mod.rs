//! OpenTelemetry traces of decisions, exported over OTLP (gRPC): off unless an endpoint is
//! configured.
//!
//! Configuration is the standard OpenTelemetry environment ([`Traces::from_env`]):
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` turns traces on;
//! `OTEL_SERVICE_NAME` (default `sluice`), `OTEL_RESOURCE_ATTRIBUTES`, `OTEL_TRACES_SAMPLER` and
//! `OTEL_TRACES_SAMPLER_ARG` (default: follow the caller's sampling, else sample all),
//! `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_EXPORTER_OTLP_TIMEOUT` and `OTEL_BSP_*` are read by the
//! OpenTelemetry SDK; `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none` keeps them off.
//!
//! Each decision is one span, `sluice.decision` (kind server), child of the caller's W3C
//! `traceparent` when the request carries one, with the rule, the mode, the outcome, the limits
//! that denied, and the time spent in the store ([`timed_store`]). Spans leave in batches from
//! the SDK's own thread; a full queue drops spans rather than slowing decisions.
//!
//! Invariant: with traces off, a decision does no tracing work at all: no header is read, no
//! span is built, and the store is not wrapped ([`crate::AppState`] holds `None`).

mod decision_span;
pub mod timed_store;

use std::time::Duration;

use opentelemetry::propagation::{Extractor, TextMapPropagator};
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{SdkTracer, SdkTracerProvider};

pub use decision_span::DecisionSpan;

/// Why traces could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    /// `OTEL_EXPORTER_OTLP_PROTOCOL` asks for a transport this build does not export over.
    #[error(
        "OTEL_EXPORTER_OTLP_PROTOCOL={0}: Sluice exports traces over OTLP/gRPC only (set it to `grpc` or leave it unset, and point the endpoint at the collector's gRPC port, usually 4317)"
    )]
    Protocol(String),
    /// The exporter refused its settings (a malformed endpoint, headers or timeout).
    #[error("the OTLP exporter cannot be built: {0}")]
    Exporter(#[from] opentelemetry_otlp::ExporterBuildError),
}

/// The tracer of decisions and what exports its spans. Cheap to share (`Arc` inside).
#[derive(Debug, Clone)]
pub struct Traces {
    provider: SdkTracerProvider,
    tracer: SdkTracer,
}

/// Reads one variable of `env`, treating empty as unset.
fn var(env: &impl Fn(&str) -> Option<String>, name: &str) -> Option<String> {
    env(name).filter(|v| !v.trim().is_empty())
}

impl Traces {
    /// Traces as the process environment configures them: `None` when no OTLP endpoint is set
    /// (or the SDK or the traces exporter is turned off). Must run inside a Tokio runtime (the
    /// gRPC exporter's connection lives on it).
    pub fn from_env() -> Result<Option<Traces>, TracesError> {
        Traces::from_vars(|name| std::env::var(name).ok())
    }

    /// [`Traces::from_env`] over any source of variables.
    pub fn from_vars(env: impl Fn(&str) -> Option<String>) -> Result<Option<Traces>, TracesError> {
        if !enabled(&env)? {
            return Ok(None);
        }
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_tonic()
            .build()?;
        let mut resource = Resource::builder();
        if var(&env, "OTEL_SERVICE_NAME").is_none() {
            resource = resource.with_service_name("sluice");
        }
        let resource = resource
            .with_attribute(opentelemetry::KeyValue::new(
                "service.version",
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        let tracer = provider.tracer("sluice");
        Ok(Some(Traces { provider, tracer }))
    }

    /// Starts the span of one decision, child of the trace context `carrier` holds (W3C
    /// `traceparent` and `tracestate`), if any.
    pub fn decision(&self, carrier: &dyn Extractor) -> DecisionSpan {
        let parent = TraceContextPropagator::new().extract(carrier);
        DecisionSpan::start(&self.tracer, &parent)
    }

    /// Exports the spans still queued and stops the exporter, waiting at most `timeout`.
    pub async fn shutdown(self, timeout: Duration) {
        let provider = self.provider;
        // The SDK waits for its export thread: not on a runtime worker.
        let stopped =
            tokio::task::spawn_blocking(move || provider.shutdown_with_timeout(timeout)).await;
        if let Ok(Err(error)) = stopped {
            tracing::warn!(%error, "traces not all exported at shutdown");
        }
    }
}

/// Whether the environment turns traces on.
fn enabled(env: &impl Fn(&str) -> Option<String>) -> Result<bool, TracesError> {
    let endpoint = var(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .or_else(|| var(env, "OTEL_EXPORTER_OTLP_ENDPOINT"));
    let disabled = var(env, "OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || var(env, "OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"));
    if endpoint.is_none() || disabled {
        return Ok(false);
    }
    let protocol = var(env, "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        .or_else(|| var(env, "OTEL_EXPORTER_OTLP_PROTOCOL"));
    match protocol {
        Some(p) if p != "grpc" => Err(TracesError::Protocol(p)),
        _ => Ok(true),
    }
}

/// The trace context of an HTTP request: its headers.
pub struct HeaderCarrier<'a>(pub &'a http::HeaderMap);

impl Extractor for HeaderCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(http::HeaderName::as_str).collect()
    }
}

/// The trace context of a gRPC request: its metadata.
pub struct MetadataCarrier<'a>(pub &'a tonic::metadata::MetadataMap);

impl Extractor for MetadataCarrier<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }

    fn keys(&self) -> Vec<&str> {
        self.0
            .keys()
            .filter_map(|k| match k {
                tonic::metadata::KeyRef::Ascii(k) => Some(k.as_str()),
                tonic::metadata::KeyRef::Binary(_) => None,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn traces_are_off_unless_an_endpoint_is_set() {
        let on = |pairs: &[(&str, &str)]| enabled(&env(pairs)).ok();
        assert_eq!(on(&[]), Some(false));
        assert_eq!(on(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]), Some(false));
        assert_eq!(on(&[("OTEL_SERVICE_NAME", "edge")]), Some(false));
        assert_eq!(
            on(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317")]),
            Some(true)
        );
        assert_eq!(
            on(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c:4317")]),
            Some(true)
        );
        let off = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_SDK_DISABLED", "TRUE"),
        ];
        assert_eq!(on(&off), Some(false));
        let none = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_TRACES_EXPORTER", "none"),
        ];
        assert_eq!(on(&none), Some(false));
        let grpc = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ];
        assert_eq!(on(&grpc), Some(true));
    }

    #[test]
    fn a_protocol_other_than_grpc_is_refused_with_a_reason() {
        let http = [
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
        ];
        let error = enabled(&env(&http)).expect_err("refused");
        assert!(error.to_string().contains("gRPC only"), "{error}");
    }
}
