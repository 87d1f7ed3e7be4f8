//! [`OtlpReceiver`]: an OTLP/gRPC trace receiver on a free loopback port, standing in for an
//! OpenTelemetry collector in tests.
//!
//! It serves the collector's `TraceService/Export` with the `opentelemetry-proto` types on its
//! own thread and runtime (so a test of any kind can own one), keeps every span it is sent with
//! its resource's attributes, and stops on drop. Tests wait for a span with
//! [`OtlpReceiver::wait_for`], which polls with a deadline.

use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::{AnyValue, KeyValue, any_value};
use opentelemetry_proto::tonic::trace::v1::Span;

/// A span as received, with the attributes of the resource (the service) that sent it.
#[derive(Debug, Clone)]
pub struct ReceivedSpan {
    /// The span as exported.
    pub span: Span,
    /// The sending service's resource attributes (`service.name`, …).
    pub resource: Vec<KeyValue>,
}

impl ReceivedSpan {
    /// The span's attribute `key`, if set.
    pub fn attribute(&self, key: &str) -> Option<&any_value::Value> {
        find(&self.span.attributes, key)
    }

    /// The span's attribute `key` when it is a floating-point number.
    pub fn double(&self, key: &str) -> Option<f64> {
        match self.attribute(key) {
            Some(any_value::Value::DoubleValue(v)) => Some(*v),
            _ => None,
        }
    }

    /// The span's attribute `key` as text (strings as they are, other values debug-printed).
    pub fn text(&self, key: &str) -> Option<String> {
        self.attribute(key).map(text)
    }

    /// The resource's attribute `key` as text.
    pub fn resource_text(&self, key: &str) -> Option<String> {
        find(&self.resource, key).map(text)
    }

    /// The trace id in lowercase hex, as in a `traceparent`.
    pub fn trace_id(&self) -> String {
        hex(&self.span.trace_id)
    }

    /// The parent span id in lowercase hex (empty for a root span).
    pub fn parent_span_id(&self) -> String {
        hex(&self.span.parent_span_id)
    }
}

fn find<'a>(attributes: &'a [KeyValue], key: &str) -> Option<&'a any_value::Value> {
    attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v: &AnyValue| v.value.as_ref())
}

fn text(value: &any_value::Value) -> String {
    match value {
        any_value::Value::StringValue(s) => s.clone(),
        other => format!("{other:?}"),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

type Received = Arc<(Mutex<Vec<ReceivedSpan>>, Condvar)>;

struct Collector(Received);

#[tonic::async_trait]
impl TraceService for Collector {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let (spans, arrived) = &*self.0;
        let mut spans = spans.lock().unwrap_or_else(|e| e.into_inner());
        for resource_spans in request.into_inner().resource_spans {
            let resource = resource_spans
                .resource
                .map(|r| r.attributes)
                .unwrap_or_default();
            for scope in resource_spans.scope_spans {
                for span in scope.spans {
                    spans.push(ReceivedSpan {
                        span,
                        resource: resource.clone(),
                    });
                }
            }
        }
        arrived.notify_all();
        Ok(tonic::Response::new(ExportTraceServiceResponse {
            partial_success: None,
        }))
    }
}

/// An OTLP/gRPC trace receiver, stopped on drop.
#[derive(Debug)]
pub struct OtlpReceiver {
    address: SocketAddr,
    received: Received,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl OtlpReceiver {
    /// Starts a receiver on a free loopback port.
    ///
    /// # Panics
    /// If no loopback port can be bound or no runtime started: the test cannot run without one.
    pub fn start() -> OtlpReceiver {
        let listener =
            std::net::TcpListener::bind("127.0.0.1:0").expect("a free loopback port for OTLP");
        listener
            .set_nonblocking(true)
            .expect("a non-blocking listener");
        let address = listener.local_addr().expect("the listener's address");
        let received: Received = Arc::default();
        let collector = Collector(received.clone());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("a runtime for the OTLP receiver");
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)
                    .expect("the listener joins the runtime");
                let served = tonic::transport::Server::builder()
                    .add_service(TraceServiceServer::new(collector))
                    .serve_with_incoming_shutdown(
                        tonic::transport::server::TcpIncoming::from(listener),
                        async {
                            let _ = stopped.await;
                        },
                    )
                    .await;
                if let Err(error) = served {
                    eprintln!("the OTLP receiver stopped: {error}");
                }
            });
        });
        OtlpReceiver {
            address,
            received,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// The endpoint to export to, as `OTEL_EXPORTER_OTLP_ENDPOINT` takes it.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.address)
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.received
            .0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The first span received that `matches`, waiting up to `within` for it.
    ///
    /// # Panics
    /// If none arrives in time, listing the spans that did.
    pub fn wait_for(
        &self,
        within: Duration,
        matches: impl Fn(&ReceivedSpan) -> bool,
    ) -> ReceivedSpan {
        let deadline = Instant::now() + within;
        let (spans, arrived) = &*self.received;
        let mut spans = spans.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(span) = spans.iter().find(|s| matches(s)) {
                return span.clone();
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(
                !left.is_zero(),
                "no matching span within {within:?}; received: {:#?}",
                *spans
            );
            spans = arrived
                .wait_timeout(spans, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for OtlpReceiver {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
