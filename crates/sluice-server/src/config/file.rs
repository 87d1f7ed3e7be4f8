//! The serde shape of a rule file, as `examples/sluice.yaml` shows it key by key.
//!
//! Every struct denies unknown fields, so a misspelt key is an error with its line rather than a
//! setting silently ignored. Defaults are those of the documentation: memory store, 50ms store
//! deadline, store clock, prefix `sluice`, fail open, both header styles.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::duration_text as serde_text;
use super::gateway::{EnvoyDomains, ForwardAuthConfig};
use sluice::limiter::{DenialCacheOptions, InFlightLimit};
use sluice::model::{FailPolicy, HeaderStyle, Rule};

/// Where a store reads the time from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The store's own clock (Redis `TIME`): every node agrees, whatever its local clock says.
    #[default]
    Store,
    /// This process's clock.
    Local,
}

/// The `store` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreConfig {
    /// `memory://`, `redis://host:port/db`, `rediss://...`, `redis+cluster://h:p,h:p/`,
    /// `redis+sentinel://h:p,h:p/<master>[/db]` (`rediss+…` for TLS).
    #[serde(default = "default_url")]
    pub url: String,
    /// Deadline for one store call; past it the fail policy decides.
    #[serde(default = "default_timeout", with = "serde_text")]
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
    /// Remote stores: how many decisions may wait for the store at once — a number,
    /// `adaptive` (follows the store's latency) or `unbounded`. Past it, the fail policy answers
    /// at once, marked degraded.
    #[serde(default, with = "in_flight_text")]
    pub in_flight: InFlightLimit,
}

/// `in_flight` written as a number or a word.
mod in_flight_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use sluice::limiter::InFlightLimit;

    pub fn serialize<S: Serializer>(limit: &InFlightLimit, s: S) -> Result<S::Ok, S::Error> {
        match limit {
            InFlightLimit::Fixed(n) => s.serialize_u32(*n),
            InFlightLimit::Adaptive { .. } => s.serialize_str("adaptive"),
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
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// The `store.tls` section: PEM files for TLS to Redis. Without `ca_file` the system's roots are
/// trusted; `cert_file` and `key_file` (both or neither) present a client certificate.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StoreTls {
    /// CAs to trust instead of the system's roots.
    #[serde(default)]
    pub ca_file: Option<std::path::PathBuf>,
    /// Client certificate chain.
    #[serde(default)]
    pub cert_file: Option<std::path::PathBuf>,
    /// The client certificate's private key.
    #[serde(default)]
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
        }
    }
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
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerConfig {
    /// Once the first byte of a request head arrives, the whole head must arrive within this time.
    #[serde(default = "default_header_read_timeout", with = "serde_text")]
    pub header_read_timeout: Duration,
    /// From a complete head to the response, body reading included (408 past it).
    #[serde(default = "default_request_timeout", with = "serde_text")]
    pub request_timeout: Duration,
    /// A connection with no request in progress is closed after this much silence.
    #[serde(default = "default_keep_alive_timeout", with = "serde_text")]
    pub keep_alive_timeout: Duration,
    /// Open connections at most; more wait in the accept queue. Also bounded by the process's
    /// file-descriptor limit.
    #[serde(default = "default_max_connections")]
    pub max_connections: usize,
    /// On SIGTERM or Ctrl-C, how long the requests in flight get to finish once the listener has
    /// closed; connections still open after it are cut and the process exits all the same.
    #[serde(default = "default_shutdown_timeout", with = "serde_text")]
    pub shutdown_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> ServerConfig {
        ServerConfig {
            header_read_timeout: default_header_read_timeout(),
            request_timeout: default_request_timeout(),
            keep_alive_timeout: default_keep_alive_timeout(),
            max_connections: default_max_connections(),
            shutdown_timeout: default_shutdown_timeout(),
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

/// How `/metrics` shows the identities of its top-denied series.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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
/// force (`settle`) and from the file being loaded (`allow_no_rules`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReloadConfig {
    /// How long a changed file must stay the same before it is applied, so a file caught
    /// half-written (truncated, yet still valid) is never put in force; default 250ms.
    #[serde(default = "default_settle", with = "serde_text")]
    pub settle: Duration,
    /// A file with no rules replaces rules in force only when it says so with this.
    #[serde(default)]
    pub allow_no_rules: bool,
}

impl Default for ReloadConfig {
    fn default() -> Self {
        ReloadConfig {
            settle: default_settle(),
            allow_no_rules: false,
        }
    }
}

fn default_settle() -> Duration {
    Duration::from_millis(250)
}

/// The `metrics` section. Read once, at start-up.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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

/// A whole rule file, before semantic validation.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ConfigFile {
    #[serde(default)]
    pub listen: Option<SocketAddr>,
    #[serde(default)]
    pub admin_token_env: Option<String>,
    #[serde(default)]
    pub store: StoreConfig,
    #[serde(default)]
    pub server: ServerConfig,
    #[serde(default)]
    pub metrics: MetricsConfig,
    #[serde(default)]
    pub fail: FailPolicy,
    #[serde(default)]
    pub headers: HeaderStyle,
    #[serde(default = "default_true")]
    pub enabled: bool,
    #[serde(default)]
    pub denial_cache: DenialCacheConfig,
    #[serde(default)]
    pub reload: ReloadConfig,
    #[serde(default)]
    pub runtime_limits: RuntimeLimitsConfig,
    #[serde(default)]
    pub rules: BTreeMap<String, Rule>,
    #[serde(default)]
    pub grpc_listen: Option<SocketAddr>,
    #[serde(default)]
    pub envoy: EnvoyDomains,
    #[serde(default)]
    pub forward_auth: ForwardAuthConfig,
}
