//! [`SluiceLayer`] / [`SluiceService`]: one rule in front of a route.
//!
//! tower's shape: the layer holds the configuration behind an `Arc` and is cheap to clone; each
//! service holds its inner service and that same `Arc`. Counters live in the [`Limiter`]'s store,
//! never in the service, so the many clones axum makes of a service share one limit.
//!
//! Per request: extract attributes → `Limiter::check` → either 429 (JSON body + headers), or the
//! inner service's response with the headers added, its body wrapped in a [`LeasedBody`] that
//! holds the check's lease (concurrency limits) until the body is done or dropped. Extraction or check errors answer 400 (the
//! client's fault) or 500 (wiring), never a panic. Degraded decisions (store unreachable, fail
//! policy decided) carry `X-RateLimit-Degraded: true` and are logged at `info`; the limiter also
//! counts them in `sluice_degraded_decisions_total`.
//!
//! The handler sees the [`Decision`](crate::Decision) and the [`RequestAttributes`] in the request's extensions
//! (`axum::Extension<Decision>`).
//!
//! With [`SluiceLayer::reserve`], each request reserves an estimated cost; a handler that knows
//! the actual cost puts [`ActualCost`] in its response's extensions and the layer settles the
//! reservation before passing the response on (a handler that does not leaves the estimate).

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Response, StatusCode};
use tower::{Layer, Service};

use super::extract::{AttributeList, Extract};
use super::leased_body::LeasedBody;
use super::response::{DEFAULT_MESSAGE, DELAY_HEADER, apply_headers, check_error, denied, error};
use crate::limiter::{Check, Limiter};
use crate::model::HeaderStyle;

/// What the middleware does with a shaping delay (`delay_ms` of a leaky bucket decision).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Shaping {
    /// Wait `delay_ms` before calling the handler, so requests leave at the configured rate
    /// (the default: it is what the leaky bucket promises).
    #[default]
    Wait,
    /// Call the handler at once and send `X-RateLimit-Delay-Ms`; the handler finds the delay in
    /// the [`Decision`](crate::Decision) in its request extensions and may act on it.
    Expose,
}

/// What a request really cost, put by the handler in its response's extensions to settle the
/// request's reservation ([`SluiceLayer::reserve`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActualCost(pub u64);

/// The attributes the middleware extracted, inserted in the request's extensions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestAttributes(pub AttributeList);

#[derive(Clone)]
struct Config {
    limiter: Limiter,
    rule: String,
    extractors: Vec<Arc<dyn Extract>>,
    cost: u64,
    reserve: bool,
    message: Option<String>,
    headers: HeaderStyle,
    shaping: Shaping,
}

/// Rate-limits the wrapped service by one rule of a [`Limiter`].
///
/// ```
/// use axum::{Router, routing::get};
/// use sluice::middleware::{ClientIp, PathParam, SluiceLayer};
/// use sluice::{Limiter, MemoryStore, Rule, model::{Algorithm, Limit}};
///
/// let limiter = Limiter::builder(MemoryStore::new())
///     .rule("employee", Rule::new(vec![
///         Limit::new(&["id"], "5/10s".parse().unwrap(), Algorithm::SlidingLog),
///     ]))
///     .build()
///     .unwrap();
/// let app: Router = Router::new().route(
///     "/employees/{id}",
///     get(|| async { "ok" }).layer(SluiceLayer::new(&limiter, "employee").extract(PathParam::new("id"))),
/// );
/// ```
#[derive(Clone)]
pub struct SluiceLayer {
    config: Arc<Config>,
}

impl fmt::Debug for SluiceLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SluiceLayer")
            .field("rule", &self.config.rule)
            .field("extractors", &self.config.extractors.len())
            .field("cost", &self.config.cost)
            .field("message", &self.config.message)
            .field("headers", &self.config.headers)
            .field("shaping", &self.config.shaping)
            .finish()
    }
}

impl SluiceLayer {
    /// Checks `rule` of `limiter` for each request, with no attributes yet (a global limit)
    /// until extractors are added.
    pub fn new(limiter: &Limiter, rule: impl Into<String>) -> SluiceLayer {
        SluiceLayer {
            config: Arc::new(Config {
                limiter: limiter.clone(),
                rule: rule.into(),
                extractors: Vec::new(),
                cost: 1,
                reserve: false,
                message: None,
                headers: HeaderStyle::default(),
                shaping: Shaping::default(),
            }),
        }
    }

    fn with(mut self, f: impl FnOnce(&mut Config)) -> SluiceLayer {
        f(Arc::make_mut(&mut self.config));
        self
    }

    /// Adds an extractor; several add up to a composite identity (member + ip).
    pub fn extract(self, extractor: impl Extract) -> SluiceLayer {
        self.with(|c| c.extractors.push(Arc::new(extractor)))
    }

    /// Units each request costs (default 1; 0 only peeks).
    pub fn cost(self, cost: u64) -> SluiceLayer {
        self.with(|c| c.cost = cost)
    }

    /// Each request reserves `estimate` units, settled at the [`ActualCost`] its handler reports
    /// in the response's extensions (see [`Limiter::settle`]). The rule's limits must all be
    /// `token_bucket` or `gcra`.
    pub fn reserve(self, estimate: u64) -> SluiceLayer {
        self.with(|c| {
            c.cost = estimate;
            c.reserve = true;
        })
    }

    /// The message of denials on this route; it takes precedence over the rule's `message`.
    pub fn message(self, message: impl Into<String>) -> SluiceLayer {
        let message = message.into();
        self.with(|c| c.message = Some(message))
    }

    /// Which rate-limit headers to send (default both IETF and `X-RateLimit-*`).
    pub fn headers(self, style: HeaderStyle) -> SluiceLayer {
        self.with(|c| c.headers = style)
    }

    /// What to do with shaping delays (default [`Shaping::Wait`]).
    pub fn shaping(self, shaping: Shaping) -> SluiceLayer {
        self.with(|c| c.shaping = shaping)
    }
}

impl<S> Layer<S> for SluiceLayer {
    type Service = SluiceService<S>;

    fn layer(&self, inner: S) -> SluiceService<S> {
        SluiceService {
            inner,
            config: self.config.clone(),
        }
    }
}

/// The service made by [`SluiceLayer`].
#[derive(Clone)]
pub struct SluiceService<S> {
    inner: S,
    config: Arc<Config>,
}

impl<S: fmt::Debug> fmt::Debug for SluiceService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SluiceService")
            .field("inner", &self.inner)
            .field("rule", &self.config.rule)
            .finish()
    }
}

impl<S, ReqBody, ResBody> Service<Request<ReqBody>> for SluiceService<S>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    ReqBody: Send + 'static,
    ResBody: From<String> + Send + 'static,
{
    type Response = Response<LeasedBody<ResBody>>;
    type Error = S::Error;
    type Future =
        Pin<Box<dyn Future<Output = Result<Response<LeasedBody<ResBody>>, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<ReqBody>) -> Self::Future {
        // The clone is not ready; the service that was polled ready is the one that is called.
        let ready = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, ready);
        Box::pin(respond(self.config.clone(), inner, request))
    }
}

async fn respond<S, ReqBody, ResBody>(
    config: Arc<Config>,
    mut inner: S,
    request: Request<ReqBody>,
) -> Result<Response<LeasedBody<ResBody>>, S::Error>
where
    S: Service<Request<ReqBody>, Response = Response<ResBody>>,
    ResBody: From<String>,
{
    let (mut parts, body) = request.into_parts();
    let mut attrs = AttributeList::new();
    for extractor in &config.extractors {
        if let Err(e) = extractor.extract(&mut parts, &mut attrs) {
            if e.status() == StatusCode::INTERNAL_SERVER_ERROR {
                tracing::error!(rule = %config.rule, error = %e, "rate limit extractor misconfigured");
            }
            return Ok(error(e.status(), &e.message));
        }
    }
    let check = match config.reserve {
        true => Check::cost(config.cost).reserve(),
        false => Check::cost(config.cost),
    };
    let decision = match config.limiter.check_with(&config.rule, &attrs, check).await {
        Ok(d) => d,
        Err(e) => return Ok(check_error(&e)),
    };
    if decision.degraded {
        tracing::info!(
            rule = %config.rule,
            allowed = decision.allowed,
            reason = decision.reason.as_deref().unwrap_or(""),
            "rate limit decided without the store"
        );
    }
    if !decision.allowed {
        // A `deny` override's message says why this caller is refused: it comes first.
        let message = match (
            crate::limiter::denied_by_override(&decision),
            &config.message,
        ) {
            (Some(m), _) => m.to_string(),
            (None, Some(m)) => m.clone(),
            (None, None) => config
                .limiter
                .message(&config.rule)
                .unwrap_or_else(|| DEFAULT_MESSAGE.to_string()),
        };
        return Ok(denied(&decision, &message, config.headers));
    }
    // Held from here: a wait, a handler error or a panic drops it, which releases the lease.
    let guard = decision
        .lease
        .as_ref()
        .map(|lease| config.limiter.lease_guard(lease.clone()));
    if decision.delay_ms > 0 && config.shaping == Shaping::Wait {
        tokio::time::sleep(Duration::from_millis(decision.delay_ms)).await;
    }
    parts.extensions.insert(decision.clone());
    parts.extensions.insert(RequestAttributes(attrs));
    let response = inner.call(Request::from_parts(parts, body)).await?;
    if let (Some(reservation), Some(&ActualCost(actual))) = (
        decision.reservation.as_deref(),
        response.extensions().get::<ActualCost>(),
    ) && let Err(error) = config.limiter.settle(reservation, actual).await
    {
        tracing::warn!(rule = %config.rule, %error, "the reservation could not be settled; its estimate stands");
    }
    let mut response = response.map(|body| LeasedBody::holding(body, guard));
    apply_headers(response.headers_mut(), &decision, config.headers);
    if decision.delay_ms > 0 && config.shaping == Shaping::Expose {
        response
            .headers_mut()
            .insert(DELAY_HEADER, http::HeaderValue::from(decision.delay_ms));
    }
    Ok(response)
}
