//! Rule files (YAML, or TOML for `.toml`): parsing and validation into rules.
//!
//! ```
//! use sluice_server::config::{Config, Format};
//! let config = Config::parse(
//!     "rules:\n  login:\n    limits:\n      - { by: [ip], rate: 5/1m, algorithm: sliding_log }\n",
//!     Format::Yaml,
//! )
//! .unwrap();
//! assert_eq!(config.rules[0].0, "login");
//! assert_eq!(config.store.url, "memory://");
//!
//! let error = Config::parse(
//!     "rules:\n  login:\n    limits:\n      - { by: [ip], rate: 5/1m, burst: 3, algorithm: sliding_log }\n",
//!     Format::Yaml,
//! )
//! .unwrap_err();
//! assert_eq!((error.rule.as_deref(), error.field.as_str(), error.line), (Some("login"), "limits[0].burst", Some(4)));
//! ```
//!
//! A [`Config`] that parsed is valid as a whole: every rule passed [`Rule::validate`], the store
//! URL has a known scheme, the prefix is safe in keys. Its `rules` go to
//! [`Limiter::set_rules`](sluice::Limiter::set_rules) unchanged; its `version` (SHA-1 of the text)
//! identifies the file in force.
//!
//! # Layout
//! - `file`: the serde shape of the file and its defaults;
//! - [`gateway`]: the `grpc_listen`, `envoy`, `rlqs` and `forward_auth` sections;
//! - `yaml_read`, `toml_read`: every parse error of a file, each rule and section read on its own
//!   once the whole file failed (and, in YAML, every mistake within one piece);
//! - `locate`: lines of rules and limits in the text, for errors found after parsing;
//! - `suggest`: "did you mean", parser messages in the file's words and the field they are about;
//! - `error`: [`ConfigError`], naming file, line, column, rule and field;
//! - `schema`: the file's JSON Schema ([`schema`]), from the same types.

mod duration_text;
mod error;
mod file;
pub mod gateway;
mod locate;
mod read_text;
mod schema;
mod suggest;
mod toml_read;
mod yaml_read;

use std::net::SocketAddr;
use std::path::Path;

pub use error::ConfigError;
pub use file::{
    ClockSource, DenialCacheConfig, IdentityLabels, MetricsConfig, NotificationsConfig,
    ReloadConfig, RuntimeLimitsConfig, ServerConfig, StoreConfig,
};
pub use gateway::{EnvoyDomains, ForwardAuthConfig};
pub use schema::{schema, schema_json};
pub use suggest::closest;

use locate::SourceMap;
use read_text::{is_only_comments, read_text};
use sluice::limiter::Options;
use sluice::model::{FailPolicy, HeaderStyle, Rule, validate_rule_name};
use sluice::store::url::StoreUrl;

/// The most mistakes [`Config::check`] reports of one file; past them it says how many more.
pub const MAX_REPORTED_ERRORS: usize = 200;

/// Rule files larger than this are refused: a real one is a few kilobytes.
pub const MAX_FILE_BYTES: u64 = 4 * 1024 * 1024;

/// The syntax of a rule file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// YAML (`.yaml`, `.yml`).
    Yaml,
    /// TOML (`.toml`).
    Toml,
}

impl Format {
    /// The format a file's extension says.
    pub fn from_path(path: &Path) -> Result<Format, ConfigError> {
        match path.extension().and_then(|e| e.to_str()) {
            Some("yaml" | "yml") => Ok(Format::Yaml),
            Some("toml") => Ok(Format::Toml),
            _ => Err(
                ConfigError::new("", "unknown file type; name the file .yaml, .yml or .toml")
                    .in_file(path),
            ),
        }
    }
}

/// A validated rule file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Address to listen on, if the file sets one.
    pub listen: Option<SocketAddr>,
    /// Name of the environment variable holding the admin bearer token; admin endpoints are off
    /// without one.
    pub admin_token_env: Option<String>,
    /// The store.
    pub store: StoreConfig,
    /// Connection limits of `sluice serve`.
    pub server: ServerConfig,
    /// What `/metrics` shows.
    pub metrics: MetricsConfig,
    /// Fail policy of rules that set none.
    pub fail: FailPolicy,
    /// Which rate-limit headers the service sends.
    pub headers: HeaderStyle,
    /// Off switch for the whole limiter.
    pub enabled: bool,
    /// The denial cache (remote stores).
    pub denial_cache: DenialCacheConfig,
    /// How changes of the file are taken up while serving.
    pub reload: ReloadConfig,
    /// Bounds on run-time limits.
    pub runtime_limits: RuntimeLimitsConfig,
    /// How quotas' `notify` events are delivered.
    pub notifications: NotificationsConfig,
    /// The rules, by name, in name order.
    pub rules: Vec<(String, Rule)>,
    /// Hex SHA-1 of the file's text: which version is in force.
    pub version: String,
    /// Where the Envoy rate-limit service (gRPC) listens; off when `None`.
    pub grpc_listen: Option<SocketAddr>,
    /// Envoy domains and descriptors → rules and attributes.
    pub envoy: EnvoyDomains,
    /// Envoy's Rate Limit Quota Service timing.
    pub rlqs: gateway::RlqsConfig,
    /// How the forward-auth endpoint reads a request.
    pub forward_auth: ForwardAuthConfig,
}

impl Config {
    /// Reads and validates a file; its extension gives the format.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        Config::check_file(path).map_err(|mut errors| errors.swap_remove(0))
    }

    /// Parses and validates a file's text; the first of its mistakes, when it has some (see
    /// [`Config::check`] for all of them).
    pub fn parse(text: &str, format: Format) -> Result<Config, ConfigError> {
        Config::check(text, format).map_err(|mut errors| errors.swap_remove(0))
    }

    /// Reads a file like [`Config::load`], reporting every mistake of the file (at least one),
    /// in the order of their lines.
    pub fn check_file(path: &Path) -> Result<Config, Vec<ConfigError>> {
        let text = read_text(path).map_err(|e| vec![e])?;
        let format = Format::from_path(path).map_err(|e| vec![e])?;
        Config::check(&text, format)
            .map_err(|errors| errors.into_iter().map(|e| e.in_file(path)).collect())
    }

    /// Parses and validates a file's text, reporting every mistake (at least one), each once,
    /// in the order of their lines. Sections and rules that parsed are still checked when others
    /// did not.
    pub fn check(text: &str, format: Format) -> Result<Config, Vec<ConfigError>> {
        let read = match format {
            Format::Yaml => yaml_read::read(text),
            Format::Toml => toml_read::read(text),
        };
        let mut errors = read.errors;
        let Some(file) = read.file else {
            return Err(errors);
        };
        if text.trim().is_empty() || is_only_comments(text) {
            errors.push(ConfigError::new(
                "",
                "the file is empty; a file meant to have no rules says so with `rules: {}`",
            ));
        }
        // Only errors need lines: the map is built for the first one.
        let lazy_map = std::cell::OnceCell::new();
        let map = || lazy_map.get_or_init(|| SourceMap::new(text, format));
        for (name, rule) in &file.rules {
            let invalid = |e: sluice::model::ModelError| {
                let line = map().line_for(name, &e.field);
                ConfigError::new(e.field, e.message)
                    .at_line(line)
                    .in_rule(Some(name.clone()))
            };
            if let Err(e) = validate_rule_name(name) {
                errors.push(ConfigError {
                    field: String::new(),
                    ..invalid(e)
                });
            } else if let Err(e) = rule.validate() {
                errors.push(invalid(e));
            }
        }
        let checks = [
            check_store(&file.store, text),
            check_server(&file.server, text),
            check_denial_cache(&file.denial_cache, text),
            check_notifications(&file.notifications, text),
        ];
        errors.extend(checks.into_iter().filter_map(Result::err));
        if !(1..=MAX_RUNTIME_LIMITS).contains(&file.runtime_limits.max_per_limit) {
            errors.push(
                ConfigError::new(
                    "runtime_limits.max_per_limit",
                    format!("must be 1 to {MAX_RUNTIME_LIMITS}"),
                )
                .at_line(key_line(text, "runtime_limits")),
            );
        }
        if file.reload.quiet > std::time::Duration::from_secs(10) {
            errors.push(
                ConfigError::new("reload.quiet", "at most 10s").at_line(key_line(text, "reload")),
            );
        }
        // Mappings to rules that did not parse would read as mappings to no rule at all.
        if !read.rules_missing
            && let Err(e) = gateway::validate(&file.envoy, &file.forward_auth, &file.rules, text)
        {
            errors.push(e);
        }
        if let Err(e) = gateway::validate_rlqs(&file.rlqs, text) {
            errors.push(e);
        }
        if let Some(var) = &file.admin_token_env
            && (var.is_empty() || var.contains('=') || var.contains('\0'))
        {
            errors.push(
                ConfigError::new(
                    "admin_token_env",
                    format!("`{var}` is not an environment variable name"),
                )
                .at_line(key_line(text, "admin_token_env")),
            );
        }
        if !errors.is_empty() {
            errors.sort_by_key(|e| (e.line.is_some(), e.line, e.column));
            errors.dedup();
            if errors.len() > MAX_REPORTED_ERRORS {
                let more = errors.len() - MAX_REPORTED_ERRORS;
                errors.truncate(MAX_REPORTED_ERRORS);
                errors.push(ConfigError::new(
                    "",
                    format!("and {more} more mistakes not shown"),
                ));
            }
            return Err(errors);
        }
        Ok(Config {
            listen: file.listen,
            admin_token_env: file.admin_token_env,
            store: file.store,
            server: file.server,
            metrics: file.metrics,
            fail: file.fail,
            headers: file.headers,
            enabled: file.enabled,
            denial_cache: file.denial_cache,
            reload: file.reload,
            runtime_limits: file.runtime_limits,
            notifications: file.notifications,
            rules: file.rules.into_iter().collect(),
            version: sha1_smol::Sha1::from(text.as_bytes()).digest().to_string(),
            grpc_listen: file.grpc_listen,
            envoy: file.envoy,
            rlqs: file.rlqs,
            forward_auth: file.forward_auth,
        })
    }

    /// The limiter settings this file asks for.
    pub fn limiter_options(&self) -> Options {
        Options {
            timeout: self.store.timeout,
            fail: self.fail,
            denial_cache: self.denial_cache.into(),
            max_runtime_limits: self.runtime_limits.max_per_limit,
            in_flight: self.store.in_flight,
            queue: self.server.queue(),
            crossing_queue: self.notifications.queue,
            nodes: self.store.nodes,
            ..Options::default()
        }
    }

    /// The rules to hand to the limiter: as configured, with the file's default `fail` written
    /// into rules that set none, so a change of the default applies on reload too.
    pub fn rules_in_force(&self) -> Vec<(String, Rule)> {
        self.rules
            .iter()
            .map(|(name, rule)| {
                let mut rule = rule.clone();
                rule.fail.get_or_insert(self.fail);
                (name.clone(), rule)
            })
            .collect()
    }
}

/// The most run-time limits a limit may be told to hold (each is a key and a listing entry in
/// the store, about 150 bytes on Redis).
pub const MAX_RUNTIME_LIMITS: usize = 1_000_000;

/// The most denials a cache may be told to keep (a few GiB at most).
pub const MAX_DENIAL_CACHE_ENTRIES: usize = 10_000_000;

/// A staleness bound must be positive and short: it is how long a node may deny after an
/// administrator lifted a block elsewhere.
fn check_denial_cache(c: &DenialCacheConfig, text: &str) -> Result<(), ConfigError> {
    let line = key_line(text, "denial_cache");
    if c.max_entries > MAX_DENIAL_CACHE_ENTRIES {
        return Err(ConfigError::new(
            "denial_cache.max_entries",
            format!("at most {MAX_DENIAL_CACHE_ENTRIES}"),
        )
        .at_line(line));
    }
    if c.max_stale.is_zero() || c.max_stale > std::time::Duration::from_secs(60) {
        return Err(ConfigError::new(
            "denial_cache.max_stale",
            "must be more than 0 and at most 60s",
        )
        .at_line(line));
    }
    Ok(())
}

fn check_notifications(c: &NotificationsConfig, text: &str) -> Result<(), ConfigError> {
    use std::time::Duration;
    let line = key_line(text, "notifications");
    let refuse = |field: &str, message: &str| {
        Err(ConfigError::new(format!("notifications.{field}"), message).at_line(line))
    };
    if !(1..=1_000_000).contains(&c.queue) {
        return refuse("queue", "must be 1 to 1000000");
    }
    if !(1..=10_000).contains(&c.in_flight) {
        return refuse("in_flight", "must be 1 to 10000");
    }
    if !(1..=100).contains(&c.attempts) {
        return refuse("attempts", "must be 1 to 100");
    }
    if c.timeout.is_zero() || c.timeout > Duration::from_secs(60) {
        return refuse("timeout", "must be more than 0 and at most 60s");
    }
    if c.backoff.is_zero() || c.backoff > Duration::from_secs(300) {
        return refuse("backoff", "must be more than 0 and at most 5m");
    }
    Ok(())
}

/// The first line whose key is `key` (for errors outside rules, where the parser gave none).
fn key_line(text: &str, key: &str) -> Option<u64> {
    text.lines()
        .position(|line| {
            let t = line.trim_start();
            t.strip_prefix(key)
                .is_some_and(|rest| rest.trim_start().starts_with([':', '=']))
        })
        .map(|i| i as u64 + 1)
}

fn check_server(server: &ServerConfig, text: &str) -> Result<(), ConfigError> {
    let positive = [
        ("header_read_timeout", server.header_read_timeout),
        ("request_timeout", server.request_timeout),
        ("keep_alive_timeout", server.keep_alive_timeout),
        ("shutdown_timeout", server.shutdown_timeout),
        ("queue_interval", server.queue_interval),
    ];
    for (key, value) in positive {
        if value.is_zero() || value > sluice::model::MAX_WINDOW {
            return Err(ConfigError::new(
                format!("server.{key}"),
                "must be more than 0 and at most 366d",
            )
            .at_line(key_line(text, key)));
        }
    }
    if server.queue_target > server.queue_interval {
        return Err(
            ConfigError::new("server.queue_target", "must be at most `queue_interval`")
                .at_line(key_line(text, "queue_target")),
        );
    }
    if server.max_connections == 0 || server.max_connections > 1_000_000 {
        return Err(ConfigError::new(
            "server.max_connections",
            format!("{}: must be from 1 to 1000000", server.max_connections),
        )
        .at_line(key_line(text, "max_connections")));
    }
    Ok(())
}

fn check_store(store: &StoreConfig, text: &str) -> Result<(), ConfigError> {
    if let Err(e) = StoreUrl::parse(&store.url) {
        return Err(
            ConfigError::new("store.url", format!("`{}`: {}", e.url, e.message))
                .at_line(key_line(text, "url")),
        );
    }
    let prefix_ok = !store.prefix.is_empty()
        && store.prefix.len() <= 64
        && store
            .prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if !prefix_ok {
        return Err(ConfigError::new(
            "store.prefix",
            format!(
                "`{}`: 1 to 64 characters of a-z, A-Z, 0-9, _, - and .",
                store.prefix
            ),
        )
        .at_line(key_line(text, "prefix")));
    }
    if store.max_keys < sluice::store::memory::SHARDS {
        return Err(ConfigError::new(
            "store.max_keys",
            format!(
                "{}: at least {} (one key per shard of the memory store)",
                store.max_keys,
                sluice::store::memory::SHARDS
            ),
        )
        .at_line(key_line(text, "max_keys")));
    }
    Ok(())
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod every_error_tests;
