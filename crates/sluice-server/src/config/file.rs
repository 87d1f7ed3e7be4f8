//! The serde shape of a rule file, as `examples/sluice.yaml` shows it key by key.
//!
//! Every struct denies unknown fields, so a misspelt key is an error with its line rather than a
//! setting silently ignored. Defaults are those of the documentation: memory store, 50ms store
//! deadline, store clock, prefix `sluice`, fail open, both header styles.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::duration_text as serde_text;
use super::gateway::{EnvoyDomains, ForwardAuthConfig, RlqsConfig};
use sluice::limiter::{DenialCacheOptions, InFlightLimit};
use sluice::model::{DurationText, FailPolicy, HeaderStyle, Rule};

/// Where a store reads the time from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The store's own clock (Redis `TIME`): every node agrees, whatever its local clock says.
    #[default]
    Store,
    /// This process's clock.
    Local,
}

/// The `store` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `memory://`, `redis://host:port/db`, `rediss://...`, `redis+cluster://h:p,h:p/`,
    /// `redis+sentinel://h:p,h:p/<master>[/db]` (`rediss+…` for TLS).
    #[serde(default = "default_url")]
    pub url: String,
    /// Deadline for one store call; past it the fail policy decides.
    #[serde(default = "default_timeout", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub timeout: Duration,
    /// Where time comes from.
    #[serde(default)]
    pub clock: ClockSource,
    /// First part of every store key, so several deployments can share one Redis.
    #[serde(default = "default_prefix")]
    pub prefix: String,
    /// Memory store only: the most keys (limit × identity) held at once. At the cap, keys whose
    /// state has expired are evicted; when every key is live, a new identity is refused and the
    /// fail policy decides for it (kept keys stay exact).
    #[serde(default = "default_max_keys")]
    pub max_keys: usize,
    /// Certificate files for `rediss…` URLs.
    #[serde(default)]
    pub tls: StoreTls,
    /// Remote stores: how many decisions may wait for the store at once — a number or
    /// `unbounded`. Past it, the fail policy answers at once, marked degraded. `adaptive` was
    /// removed: a file that still says it gets the default, with a warning.
    #[serde(default, with = "in_flight_text")]
    #[schemars(with = "in_flight_text::InFlightText")]
    pub in_flight: InFlightLimit,
    /// How many nodes decide the same limits through this store. While the store cannot be
    /// asked, `fail: local` gives each node its share of every limit (count and burst divided by
    /// `nodes`, at least one unit), so a fleet cut off from its store admits about the limit in
    /// all instead of `nodes` times it. 1 (the default) lets each node decide the whole limit.
    #[serde(default = "default_nodes")]
    #[schemars(range(min = 1), example = 4)]
    pub nodes: std::num::NonZeroU32,
}

/// `in_flight` written as a number or a word.
mod in_flight_text {
    use std::borrow::Cow;

    use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
    use serde::{Deserialize, Deserializer, Serializer};
    use sluice::limiter::InFlightLimit;

    /// The schema of `in_flight`: what `InFlightLimit`'s parser reads.
    pub struct InFlightText;

    impl JsonSchema for InFlightText {
        fn schema_name() -> Cow<'static, str> {
            "InFlight".into()
        }

        fn json_schema(_: &mut SchemaGenerator) -> Schema {
            json_schema!({
                "anyOf": [
                    { "type": "integer", "minimum": 1, "maximum": u32::MAX, "description": "At most this many calls wait at once." },
                    { "const": "adaptive", "deprecated": true, "description": "Removed: read as the default, with a warning." },
                    { "const": "unbounded", "description": "No bound." }
                ]
            })
        }
    }

    pub fn serialize<S: Serializer>(limit: &InFlightLimit, s: S) -> Result<S::Ok, S::Error> {
        match limit {
            InFlightLimit::Fixed(n) => s.serialize_u32(*n),
            InFlightLimit::Unbounded => s.serialize_str("unbounded"),
        }
    }

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        Number(u64),
        Word(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<InFlightLimit, D::Error> {
        let text = match Text::deserialize(d)? {
            Text::Number(n) => n.to_string(),
            Text::Word(word) => word,
        };
        if text.trim() == "adaptive" {
            // Files written for an earlier release keep loading, as with no setting at all.
            tracing::warn!(
                "store.in_flight: `adaptive` is no longer read: {}; using the default, {}",
                sluice::limiter::ADAPTIVE_REMOVED,
                InFlightLimit::DEFAULT
            );
            return Ok(InFlightLimit::DEFAULT);
        }
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The `store.tls` section: PEM files for TLS to Redis. Without `ca_file` the system's roots are
/// trusted; `cert_file` and `key_file` (both or neither) present a client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StoreTls {
    /// CAs to trust instead of the system's roots.
    #[serde(default)]
    #[schemars(example = &"/etc/sluice/redis-ca.pem")]
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate chain.
    #[serde(default)]
    #[schemars(example = &"/etc/sluice/client.pem")]
    pub cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key.
    #[serde(default)]
    #[schemars(example = &"/etc/sluice/client.key")]
    pub key_file: Option<std::path::PathBuf>,
}

impl Default for StoreConfig {
    fn default() -> StoreConfig {
        StoreConfig {
            url: default_url(),
            timeout: default_timeout(),
            clock: ClockSource::default(),
            prefix: default_prefix(),
            max_keys: default_max_keys(),
            tls: StoreTls::default(),
            in_flight: InFlightLimit::DEFAULT,
            nodes: default_nodes(),
        }
    }
}

fn default_nodes() -> std::num::NonZeroU32 {
    std::num::NonZeroU32::MIN
}

fn default_url() -> String {
    "memory://".to_string()
}

fn default_timeout() -> Duration {
    Duration::from_millis(50)
}

fn default_max_keys() -> usize {
    sluice::store::memory::DEFAULT_MAX_KEYS
}

fn default_prefix() -> String {
    "sluice".to_string()
}

/// The `server` section: how `sluice serve` bounds its connections. Read once, at start-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Once the first byte of a request head arrives, the whole head must arrive within this time.
    #[serde(default = "default_header_read_timeout", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub header_read_timeout: Duration,
    /// From a complete head to the response, body reading included (408 past it).
    #[serde(default = "default_request_timeout", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub request_timeout: Duration,
    /// A connection with no request in progress is closed after this much silence.
    #[serde(default = "default_keep_alive_timeout", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub keep_alive_timeout: Duration,
    /// Open connections at most; more wait in the accept queue. Also bounded by the process's
    /// file-descriptor limit.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// On SIGTERM or Ctrl-C, how long the requests in flight get to finish once the listener has
    /// closed; connections still open after it are cut and the process exits all the same.
    #[serde(default = "default_shutdown_timeout", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub shutdown_timeout: Duration,
    /// Remote stores: once every decision has waited in the service longer than this for a
    /// whole `queue_interval` (a queue that stands), the decisions that waited longer are
    /// answered at once by their rule's fail policy, marked `reason: "queue"`, instead of
    /// asking the store. `0s` turns it off.
    #[serde(default = "default_queue_target", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub queue_target: Duration,
    /// How long the waits must all stay above `queue_target` before any decision is shed; a
    /// queue that drains within it (a burst) is never shed.
    #[serde(default = "default_queue_interval", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub queue_interval: Duration,
}

impl ServerConfig {
    /// The limiter's standing-queue bound these settings ask for.
    pub fn queue(&self) -> Option<sluice::limiter::QueueLimit> {
        (!self.queue_target.is_zero()).then_some(sluice::limiter::QueueLimit {
            target: self.queue_target,
            interval: self.queue_interval,
        })
    }
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            header_read_timeout: default_header_read_timeout(),
            request_timeout: default_request_timeout(),
            keep_alive_timeout: default_keep_alive_timeout(),
            max_connections: default_max_connections(),
            shutdown_timeout: default_shutdown_timeout(),
            queue_target: default_queue_target(),
            queue_interval: default_queue_interval(),
        }
    }
}

fn default_header_read_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_request_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_keep_alive_timeout() -> Duration {
    Duration::from_secs(30)
}

fn default_max_connections() -> usize {
    4096
}

/// Under Kubernetes' default grace period of 30 s, with room for the pre-stop pause.
fn default_shutdown_timeout() -> Duration {
    Duration::from_secs(10)
}

fn default_queue_target() -> Duration {
    sluice::limiter::QueueLimit::DEFAULT.target
}

fn default_queue_interval() -> Duration {
    sluice::limiter::QueueLimit::DEFAULT.interval
}

/// How `/metrics` shows the identities of its top-denied series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IdentityLabels {
    /// A stable short hash of `name=value,...` (the first 12 hex digits of its SHA-1), which an
    /// operator can compute from an identity found in a log.
    #[default]
    Hashed,
    /// The identity as it is: on an unauthenticated endpoint, only where that is acceptable.
    Raw,
    /// No top-denied series at all.
    Off,
}

/// The `reload` section: how a changed file is taken up while serving. Read from the file in
/// force (`quiet`) and from the file being loaded (`allow_no_rules`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReloadConfig {
    /// How long a changed file must stay the same before it is applied, so a file caught
    /// half-written (truncated, yet still valid) is never put in force; default 250ms, at most
    /// 10s. Deprecated spelling, still read: `settle`.
    // `settle` was this key's first spelling; "settle" now names only a reservation's settling.
    #[serde(default = "default_quiet", alias = "settle", with = "serde_text")]
    #[schemars(with = "DurationText")]
    #[schemars(example = "1s")]
    pub quiet: Duration,
    /// A file with no rules replaces rules in force only when it says so with this.
    #[serde(default)]
    pub allow_no_rules: bool,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        ReloadConfig {
            quiet: default_quiet(),
            allow_no_rules: false,
        }
    }
}

fn default_quiet() -> Duration {
    Duration::from_millis(250)
}

/// The `metrics` section. Read once, at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsConfig {
    /// Identities in `sluice_top_denied_identities`.
    #[serde(default)]
    pub top_denied: IdentityLabels,
}

fn default_true() -> bool {
    true
}

/// The `denial_cache` section: the per-process cache that answers requests a remote store has
/// already denied (see `sluice::limiter::denial_cache`). Stores in this process never use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DenialCacheConfig {
    /// On by default.
    #[serde(default = "default_true")]
    pub enabled: bool,
    /// The most denials kept (about 150 bytes each plus the identity); default 200000.
    #[serde(default = "default_max_entries")]
    pub max_entries: usize,
    /// How long a cached denial may outlive an administrative change made on another node when
    /// the invalidation channel is down or slow, and how long denials live without one;
    /// default 1s.
    #[serde(default = "default_max_stale", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub max_stale: Duration,
}

impl Default for DenialCacheConfig {
    fn default() -> Self {
        DenialCacheConfig {
            enabled: true,
            max_entries: default_max_entries(),
            max_stale: default_max_stale(),
        }
    }
}

fn default_max_entries() -> usize {
    DenialCacheOptions::default().max_entries
}

fn default_max_stale() -> Duration {
    DenialCacheOptions::default().max_stale
}

impl From<DenialCacheConfig> for DenialCacheOptions {
    fn from(c: DenialCacheConfig) -> DenialCacheOptions {
        DenialCacheOptions {
            enabled: c.enabled,
            max_entries: c.max_entries,
            max_stale: c.max_stale,
        }
    }
}

/// The `runtime_limits` section: bounds on identities' run-time limits (`PUT /v1/limits`), read
/// at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuntimeLimitsConfig {
    /// The most identities with run-time limits per settable limit; default 10000.
    #[serde(default = "default_max_per_limit")]
    pub max_per_limit: usize,
}

impl Default for RuntimeLimitsConfig {
    fn default() -> Self {
        RuntimeLimitsConfig {
            max_per_limit: default_max_per_limit(),
        }
    }
}

fn default_max_per_limit() -> usize {
    sluice::limiter::DEFAULT_MAX_RUNTIME_LIMITS
}

/// The `notifications` section: how the events of quotas' `notify` are delivered to their
/// webhooks. Read once, at start-up.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NotificationsConfig {
    /// Events waiting for delivery at most; past it, new ones are dropped and counted
    /// (`sluice_quota_crossings_total{outcome="dropped"}`), never waited for by a decision.
    #[serde(default = "default_notification_queue")]
    pub queue: usize,
    /// Events being delivered (or waiting to be tried again) at once; the others wait in the
    /// queue.
    #[serde(default = "default_notification_in_flight")]
    pub in_flight: usize,
    /// Tries per event, the first included; an event whose last try fails is abandoned and
    /// counted.
    #[serde(default = "default_notification_attempts")]
    pub attempts: u32,
    /// How long one try may take, connection included.
    #[serde(default = "default_notification_timeout", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub timeout: Duration,
    /// The wait before the second try; each later wait doubles, up to 5 minutes, each drawn
    /// at random between half of it and all of it.
    #[serde(default = "default_notification_backoff", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub backoff: Duration,
}

impl Default for NotificationsConfig {
    fn default() -> NotificationsConfig {
        NotificationsConfig {
            queue: default_notification_queue(),
            in_flight: default_notification_in_flight(),
            attempts: default_notification_attempts(),
            timeout: default_notification_timeout(),
            backoff: default_notification_backoff(),
        }
    }
}

fn default_notification_queue() -> usize {
    sluice::limiter::DEFAULT_CROSSING_QUEUE
}

fn default_notification_in_flight() -> usize {
    64
}

fn default_notification_attempts() -> u32 {
    10
}

fn default_notification_timeout() -> Duration {
    Duration::from_secs(5)
}

fn default_notification_backoff() -> Duration {
    Duration::from_secs(1)
}

/// A Sluice rule file: the rules, and the settings of the service that applies them.
///
/// Every section and field is optional, each with the default given; an empty file is refused
/// all the same, and a file meant to have no rules says so with `rules: {}`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[schemars(title = "Sluice rule file")]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    /// Address and port `sluice serve` listens on for HTTP; `SLUICE_LISTEN` or `--listen`
    /// override it; 127.0.0.1:8080 when none says.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-sluice-applies" = "restart"), example = &"0.0.0.0:8080")]
    pub listen: Option<SocketAddr>,
    /// Name of the environment variable holding the admin bearer token; admin endpoints
    /// (blocks, resets, run-time limits) are off without one.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "restart"), example = &"SLUICE_ADMIN_TOKEN")]
    pub admin_token_env: Option<String>,
    /// Where counters live, and how the service talks to it.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "restart"))]
    pub store: StoreConfig,
    /// Connection limits and timeouts of `sluice serve`.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "restart"))]
    pub server: ServerConfig,
    /// What `/metrics` shows.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "restart"))]
    pub metrics: MetricsConfig,
    /// The fail policy of rules that set none: what a decision is when the store cannot answer
    /// in time.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub fail: FailPolicy,
    /// Which rate-limit headers the HTTP API sends with a decision.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub headers: HeaderStyle,
    /// Off switch for the whole limiter: while false, every decision allows without touching
    /// the store.
    #[serde(default = "default_true")]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub enabled: bool,
    /// The per-node cache of denials a remote store made.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "restart"))]
    pub denial_cache: DenialCacheConfig,
    /// How a changed file is taken up while serving.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub reload: ReloadConfig,
    /// Bounds on identities' run-time limits.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "restart"))]
    pub runtime_limits: RuntimeLimitsConfig,
    /// How quotas' `notify` events are delivered to their webhooks.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "restart"))]
    pub notifications: NotificationsConfig,
    /// The rules, by name (1 to 128 characters of a-z, A-Z, 0-9, _, - and .): what to count
    /// and how much to allow.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub rules: BTreeMap<String, Rule>,
    /// Where the gRPC services (Envoy's rate-limit service, `sluice.v1`) listen; off when
    /// absent.
    #[serde(default)]
    #[schemars(with = "Option<String>", extend("x-sluice-applies" = "restart"), example = &"0.0.0.0:8081")]
    pub grpc_listen: Option<SocketAddr>,
    /// Envoy's rate-limit service: domain → the descriptors Sluice answers in it, each with the
    /// rule that decides it.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub envoy: EnvoyDomains,
    /// Envoy's Rate Limit Quota Service (on `grpc_listen`): how often proxies report and how
    /// long their assignments live.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub rlqs: RlqsConfig,
    /// How the forward-auth endpoint (`/v1/auth/{rule}`, for nginx, Traefik and Caddy) reads a
    /// request.
    #[serde(default)]
    #[schemars(extend("x-sluice-applies" = "reload"))]
    pub forward_auth: ForwardAuthConfig,
}
