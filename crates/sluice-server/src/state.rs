//! What every route and gateway shares: the [`Limiter`] with the rules in force, what the service
//! says about them ([`Live`]), and the settings fixed at start.
//!
//! The rules live in the limiter and are swapped atomically on reload; [`Live`] is swapped with
//! them, so a response never pairs the rules of one file with the version of another.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use sluice::model::HeaderStyle;
use sluice::{Clock, Limiter, SystemClock};

use crate::config::Config;
use crate::error::ServeError;
use crate::gateway::rlqs::streams::Rlqs;
use crate::http::latency::RouteTimer;
use crate::store_url::OpenedStore;
use crate::topk;
use crate::traces::Traces;
use crate::traces::timed_store::{TimedStore, timing};
use opentelemetry::propagation::Extractor;

/// What the service reports about the configuration in force; replaced whole on reload.
#[derive(Debug, Clone)]
pub struct Live {
    /// SHA-1 of the file in force.
    pub version: String,
    /// When it was loaded (epoch ms).
    pub loaded_at_ms: u64,
    /// Which rate-limit headers to send.
    pub headers: HeaderStyle,
    /// The config as loaded (settings that need a restart are compared against the first one).
    pub config: Config,
}

/// Everything a request handler needs.
#[derive(Debug)]
pub struct AppState {
    /// Decides requests; its rules are swapped on reload.
    pub limiter: Limiter,
    /// Version, load time, header style of the rules in force.
    pub live: ArcSwap<Live>,
    /// The rule file, when the rules came from one (reload reads it again).
    pub config_path: Option<PathBuf>,
    /// The config as it was at start: listen, store and admin settings are fixed to it.
    pub startup: Config,
    /// Bearer token for admin endpoints; `None` turns them off.
    pub(crate) admin_token: Option<String>,
    /// Top denied identities per rule.
    pub top_denied: topk::TopDenied,
    /// The store answers over the network: a decision waits for it.
    pub(crate) remote_store: bool,
    /// The request-latency histograms of `/v1/check` and `/v1/peek`, answered before the router.
    pub(crate) decision_timers: [RouteTimer; 2],
    /// Traces of decisions, when an OTLP endpoint is configured.
    pub(crate) traces: Option<Traces>,
    /// The limiter's clock: the Rate Limit Quota Service ages demands on it.
    pub clock: Arc<dyn Clock>,
    /// The Rate Limit Quota Service's streams and the demands they report.
    pub rlqs: Rlqs,
}

impl AppState {
    /// Builds the state from a validated config and an opened store. `admin_token` comes from the
    /// environment variable the config names (read by the caller, so tests can pass one).
    pub fn new(
        config: Config,
        config_path: Option<PathBuf>,
        store: &OpenedStore,
        admin_token: Option<String>,
    ) -> Result<Arc<AppState>, ServeError> {
        AppState::with_traces(config, config_path, store, admin_token, None)
    }

    /// [`AppState::new`], with each decision traced by `traces` when given.
    pub fn with_traces(
        config: Config,
        config_path: Option<PathBuf>,
        store: &OpenedStore,
        admin_token: Option<String>,
        traces: Option<Traces>,
    ) -> Result<Arc<AppState>, ServeError> {
        AppState::build(
            config,
            config_path,
            store,
            admin_token,
            traces,
            Arc::new(SystemClock),
        )
    }

    /// [`AppState::new`] on `clock` (the store's own clock, when it has one, is the store's):
    /// tests move time by hand.
    pub fn with_clock(
        config: Config,
        config_path: Option<PathBuf>,
        store: &OpenedStore,
        admin_token: Option<String>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<AppState>, ServeError> {
        AppState::build(config, config_path, store, admin_token, None, clock)
    }

    fn build(
        config: Config,
        config_path: Option<PathBuf>,
        store: &OpenedStore,
        admin_token: Option<String>,
        traces: Option<Traces>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<AppState>, ServeError> {
        // Only a traced decision times its store calls.
        let decisions = match traces {
            Some(_) => TimedStore::wrap(store.store.clone()),
            None => store.store.clone(),
        };
        let mut builder = Limiter::builder(decisions)
            .options(config.limiter_options())
            .clock(clock.clone());
        if let Some(channel) = &store.channel {
            builder = builder.invalidation_channel(channel.clone());
        }
        let limiter = builder.build().map_err(|source| ServeError::Limiter {
            what: "building the limiter",
            source,
        })?;
        limiter
            .set_rules(config.rules_in_force())
            .map_err(|source| ServeError::Limiter {
                what: "the rules do not compile",
                source,
            })?;
        limiter.set_enabled(config.enabled);
        let live = Live {
            version: config.version.clone(),
            loaded_at_ms: now_ms(),
            headers: config.headers,
            config: config.clone(),
        };
        let top_denied = topk::TopDenied::new(topk::K, config.metrics.top_denied);
        // The timers register with the recorder `/metrics` renders.
        crate::metrics::install();
        Ok(Arc::new(AppState {
            limiter,
            live: ArcSwap::from_pointee(live),
            config_path,
            startup: config,
            admin_token: admin_token.filter(|t| !t.is_empty()),
            top_denied,
            remote_store: !store.store.in_process(),
            decision_timers: [RouteTimer::new("/v1/check"), RouteTimer::new("/v1/peek")],
            traces,
            clock,
            rlqs: Rlqs::default(),
        }))
    }

    /// Decides one request, and counts the identities of the limits that denied it in the
    /// top-denied tracker (a peek counts nothing). Traced without a caller's trace context.
    pub fn decide<'a>(
        &'a self,
        rule: &'a str,
        attributes: &'a [(&'a str, impl AsRef<str> + Sync)],
        check: sluice::Check,
    ) -> impl Future<Output = Result<sluice::Decision, sluice::Error>> + 'a {
        // Not an `async fn`: a layer of its own would copy the decision's future once more.
        self.decide_traced(rule, attributes, check, &NoContext)
    }

    /// [`AppState::decide`], its span (when traces are on) a child of the trace context
    /// `carrier` holds (W3C `traceparent`).
    pub async fn decide_traced(
        &self,
        rule: &str,
        attributes: &[(&str, impl AsRef<str> + Sync)],
        check: sluice::Check,
        carrier: &(dyn Extractor + Sync),
    ) -> Result<sluice::Decision, sluice::Error> {
        let result = match &self.traces {
            // The limiter's future is held in this function's own state, as it was before
            // traces: another `async` layer around it costs a copy of it per request (about
            // 1,300 instructions of memcpy on the HTTP path, measured with callgrind).
            None => self.limiter.check_with(rule, attributes, check).await,
            // Boxed, so that the span and the timing stay out of the untraced path's state.
            Some(traces) => {
                Box::pin(self.check_in_span(traces, rule, attributes, check, carrier)).await
            }
        };
        let decision = result?;
        if check.mode() == sluice::algorithm::Mode::Apply
            && decision.limits.iter().any(|l| !l.allowed)
        {
            self.top_denied.record(&decision, attributes);
        }
        Ok(decision)
    }

    /// A decision in a span of its own, a child of `carrier`'s trace context, with the time its
    /// store calls took.
    async fn check_in_span(
        &self,
        traces: &Traces,
        rule: &str,
        attributes: &[(&str, impl AsRef<str> + Sync)],
        check: sluice::Check,
        carrier: &(dyn Extractor + Sync),
    ) -> Result<sluice::Decision, sluice::Error> {
        let span = traces.decision(carrier);
        let (result, store) = timing(self.limiter.check_with(rule, attributes, check)).await;
        span.end(rule, check.mode(), &result, store);
        result
    }

    /// Whether the admin endpoints are on (a token was given).
    pub fn admin_enabled(&self) -> bool {
        self.admin_token.is_some()
    }
}

/// A request without a trace context.
pub(crate) struct NoContext;

impl Extractor for NoContext {
    fn get(&self, _: &str) -> Option<&str> {
        None
    }

    fn keys(&self) -> Vec<&str> {
        Vec::new()
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
