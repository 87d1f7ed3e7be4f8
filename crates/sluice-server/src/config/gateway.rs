//! The gateway sections of a rule file: `grpc_listen`, `envoy` (Envoy rate-limit descriptors →
//! rules and attributes, for RLS and for RLQS bucket ids), `rlqs` (the timing of Envoy's Rate
//! Limit Quota Service) and `forward_auth` (request headers → attributes for the forward-auth
//! endpoint that nginx `auth_request`, Traefik ForwardAuth and Caddy `forward_auth` call).
//!
//! ```yaml
//! grpc_listen: 127.0.0.1:8081          # Envoy RLS v3 and gRPC health; off unless set
//! envoy:
//!   edge:                              # Envoy's `domain`
//!     - descriptor: [remote_address, path]           # entry keys, in Envoy's order
//!       rule: api                                    # attributes remote_address=…, path=…
//!     - descriptor: [generic_key=login, remote_address]  # `key=value`: the value must be this
//!       rule: login
//!       attributes: { remote_address: ip }           # entry key → the rule's attribute name
//! rlqs:
//!   report_interval: 5s                # the filter's `reporting_interval`
//!   assignment_ttl: 10s                # how long a proxy keeps an assignment (2 × the interval)
//! forward_auth:
//!   header_prefix: x-sluice-           # `X-Sluice-Member: m1` → member=m1 ("" turns it off)
//!   headers: { x-user-id: member }     # header → attribute
//!   client_ip: { attribute: ip, trusted: [127.0.0.1/32], header: x-forwarded-for, ipv6_prefix: 64 }
//!   denied_status: 429                 # 429 | 403 | 401; `?denied_status=` overrides
//! ```
//!
//! Invariants, checked when the file is loaded (errors name the field, e.g.
//! `envoy.edge[1].rule`): every mapping names an existing rule and provides, for every `by` of
//! every limit of that rule, at least one of its attributes, so a matched descriptor never fails
//! for a missing attribute at run time; `attributes` only renames entries whose value is taken
//! from the request; within a domain no two mappings have the same descriptor.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::time::Duration;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ConfigError;
use super::duration_text as serde_text;
use sluice::model::{DurationText, Rule};

/// Most entries one descriptor (or RLQS bucket id) may carry.
pub const MAX_ENTRIES: usize = 32;

/// The `envoy` section: Envoy's `domain` → the descriptors Sluice answers in that domain.
pub type EnvoyDomains = BTreeMap<String, Vec<DescriptorMapping>>;

/// One descriptor shape and the rule it is decided by.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DescriptorMapping {
    /// The descriptor's entries, in Envoy's order.
    #[schemars(example = &["generic_key=login", "remote_address"])]
    pub descriptor: Vec<DescriptorEntry>,
    /// The rule that decides a matching descriptor.
    #[schemars(example = &"login")]
    pub rule: String,
    /// Entry key → attribute name, for entries whose key is not the rule's attribute name.
    #[serde(default)]
    #[schemars(example = serde_json::json!({ "remote_address": "ip" }))]
    pub attributes: BTreeMap<String, String>,
}

/// One entry of a descriptor: `key`, whose value becomes an attribute, or `key=value`, which
/// must carry exactly that value (Envoy's `generic_key` actions select limits this way).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct DescriptorEntry {
    /// The entry's key.
    pub key: String,
    /// The value it must have; `None` takes the request's value as an attribute.
    pub value: Option<String>,
}

impl JsonSchema for DescriptorEntry {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "DescriptorEntry".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "type": "string",
            "pattern": "^\\s*[^=\\s][^=]*(=.*)?$",
            "description": "`key`, whose value becomes an attribute, or `key=value`, which must carry exactly that value.",
            "examples": ["remote_address", "generic_key=login"]
        })
    }
}

impl TryFrom<String> for DescriptorEntry {
    type Error = String;

    fn try_from(text: String) -> Result<DescriptorEntry, String> {
        let (key, value) = match text.split_once('=') {
            Some((key, value)) => (key.trim(), Some(value.trim().to_string())),
            None => (text.trim(), None),
        };
        if key.is_empty() {
            return Err(format!("descriptor entry `{text}` has no key"));
        }
        Ok(DescriptorEntry {
            key: key.to_string(),
            value,
        })
    }
}

impl From<DescriptorEntry> for String {
    fn from(entry: DescriptorEntry) -> String {
        entry.to_string()
    }
}

impl fmt::Display for DescriptorEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.value {
            Some(value) => write!(f, "{}={value}", self.key),
            None => f.write_str(&self.key),
        }
    }
}

impl DescriptorMapping {
    /// The attributes of a descriptor (its entries, in order) when it has this mapping's shape.
    pub fn attributes_of<'a>(
        &'a self,
        entries: &[(&'a str, &'a str)],
    ) -> Option<Vec<(&'a str, &'a str)>> {
        if entries.len() != self.descriptor.len() {
            return None;
        }
        let mut out = Vec::with_capacity(entries.len());
        for (entry, &(key, value)) in self.descriptor.iter().zip(entries) {
            if entry.key != key {
                return None;
            }
            match &entry.value {
                Some(wanted) if wanted != value => return None,
                Some(_) => {}
                None => out.push((self.attribute_name(key), value)),
            }
        }
        Some(out)
    }

    fn attribute_name<'a>(&'a self, key: &'a str) -> &'a str {
        self.attributes.get(key).map_or(key, String::as_str)
    }
}

/// The mapping an RLQS bucket id of `domain` matches: the first whose entry keys are exactly
/// the bucket's keys. A bucket id is unordered, so its entries are taken in the mapping's order
/// and then matched as a descriptor would be ([`DescriptorMapping::attributes_of`]).
pub fn find_bucket_mapping<'a>(
    domains: &'a EnvoyDomains,
    domain: &str,
    bucket: &'a BTreeMap<String, String>,
) -> Option<(&'a DescriptorMapping, Vec<(&'a str, &'a str)>)> {
    domains.get(domain)?.iter().find_map(|m| {
        if m.descriptor.len() != bucket.len() {
            return None;
        }
        let entries: Option<Vec<(&str, &str)>> = m
            .descriptor
            .iter()
            .map(|e| {
                bucket
                    .get_key_value(&e.key)
                    .map(|(k, v)| (k.as_str(), v.as_str()))
            })
            .collect();
        m.attributes_of(&entries?).map(|attrs| (m, attrs))
    })
}

/// The `rlqs` section: the timing of Envoy's Rate Limit Quota Service (see the book's "Rate
/// Limit Quota Service"). Which bucket ids a domain answers comes from the `envoy` section.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RlqsConfig {
    /// The filter's `reporting_interval`: each assignment is sized for this long, and the units
    /// behind it are taken from the limit for this long.
    #[serde(default = "default_report_interval", with = "serde_text")]
    #[schemars(with = "DurationText")]
    pub report_interval: Duration,
    /// `assignment_time_to_live` of every assignment: how long a proxy that hears nothing more
    /// keeps it; twice `report_interval` when absent. At least `report_interval`; what it adds
    /// beyond that is the over-admission a broken stream can cause.
    #[serde(
        default,
        with = "serde_text::option",
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(with = "Option<DurationText>", extend("default" = null))]
    pub assignment_ttl: Option<Duration>,
}

fn default_report_interval() -> Duration {
    Duration::from_secs(5)
}

impl RlqsConfig {
    /// The time to live of every assignment: `assignment_ttl`, else twice `report_interval`.
    pub fn ttl(&self) -> Duration {
        self.assignment_ttl
            .unwrap_or(self.report_interval.saturating_mul(2))
    }
}

impl Default for RlqsConfig {
    fn default() -> RlqsConfig {
        RlqsConfig {
            report_interval: default_report_interval(),
            assignment_ttl: None,
        }
    }
}

/// Checks the `rlqs` section.
pub(super) fn validate_rlqs(rlqs: &RlqsConfig, text: &str) -> Result<(), ConfigError> {
    let fail = |field: &str, message: &str| {
        ConfigError::new(field, message).at_line(super::key_line(text, "rlqs"))
    };
    if rlqs.report_interval < Duration::from_millis(100) {
        return Err(fail(
            "rlqs.report_interval",
            "at least 100ms, as Envoy requires",
        ));
    }
    if rlqs.report_interval > Duration::from_secs(3600) {
        return Err(fail("rlqs.report_interval", "at most 1h"));
    }
    if rlqs.ttl() < rlqs.report_interval {
        return Err(fail(
            "rlqs.assignment_ttl",
            "at least `report_interval`: an assignment must outlive the wait for the next one",
        ));
    }
    if rlqs.ttl() > rlqs.report_interval * 10 {
        return Err(fail(
            "rlqs.assignment_ttl",
            "at most 10 × `report_interval`: a longer one lets a lost proxy admit for long",
        ));
    }
    Ok(())
}

/// The mapping a descriptor of `domain` matches: the first whose shape it has.
pub fn find_mapping<'a>(
    domains: &'a EnvoyDomains,
    domain: &str,
    entries: &[(&'a str, &'a str)],
) -> Option<(&'a DescriptorMapping, Vec<(&'a str, &'a str)>)> {
    domains
        .get(domain)?
        .iter()
        .find_map(|m| m.attributes_of(entries).map(|attrs| (m, attrs)))
}

/// Which forwarding header the proxy in front of the forward-auth endpoint writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum ClientIpHeader {
    /// `X-Forwarded-For` (nginx `$proxy_add_x_forwarded_for`, Traefik, Caddy).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded`.
    Forwarded,
    /// `X-Real-IP`, replaced (not appended) by the proxy.
    XRealIp,
}

/// Where the forward-auth endpoint finds the client's address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ClientIpConfig {
    /// The attribute that carries it.
    #[serde(default = "default_ip_attribute")]
    pub attribute: String,
    /// Networks of the proxies whose forwarding header is believed; none by default, as in the
    /// middleware: then the client is the connection's peer, i.e. the proxy itself.
    #[serde(default)]
    #[schemars(with = "Vec<String>", example = ["10.0.0.0/8"])]
    pub trusted: Vec<IpNet>,
    /// The header the proxy writes.
    #[serde(default)]
    pub header: ClientIpHeader,
    /// IPv6 clients are counted by their network of this many bits (128: by address); IPv4
    /// clients by address.
    #[serde(default = "default_ipv6_prefix")]
    pub ipv6_prefix: u8,
}

fn default_ipv6_prefix() -> u8 {
    64
}

impl Default for ClientIpConfig {
    fn default() -> ClientIpConfig {
        ClientIpConfig {
            attribute: default_ip_attribute(),
            trusted: Vec::new(),
            header: ClientIpHeader::default(),
            ipv6_prefix: default_ipv6_prefix(),
        }
    }
}

/// The `forward_auth` section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForwardAuthConfig {
    /// Headers starting with this (case-insensitively) carry attributes: the rest of the name,
    /// lowercased with `-` as `_`, is the attribute (`X-Sluice-Promo-Code` → `promo_code`).
    /// Empty turns prefixed headers off.
    #[serde(default = "default_header_prefix")]
    pub header_prefix: String,
    /// Header name → attribute name, for headers the proxy already sends.
    #[serde(default)]
    #[schemars(example = serde_json::json!({ "x-user-id": "user" }))]
    pub headers: BTreeMap<String, String>,
    /// The client's address.
    #[serde(default)]
    pub client_ip: ClientIpConfig,
    /// The status of a denial: 429 for proxies that pass it on (Traefik, Caddy), 403 or 401 for
    /// nginx `auth_request`, which accepts nothing else.
    #[serde(default = "default_denied_status")]
    pub denied_status: u16,
}

impl Default for ForwardAuthConfig {
    fn default() -> ForwardAuthConfig {
        ForwardAuthConfig {
            header_prefix: default_header_prefix(),
            headers: BTreeMap::new(),
            client_ip: ClientIpConfig::default(),
            denied_status: default_denied_status(),
        }
    }
}

/// The statuses a denial may be answered with.
pub const DENIED_STATUSES: [u16; 3] = [429, 403, 401];

fn default_ip_attribute() -> String {
    "ip".to_string()
}

fn default_header_prefix() -> String {
    "x-sluice-".to_string()
}

fn default_denied_status() -> u16 {
    429
}

fn is_header_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_'))
}

const ATTRIBUTE_NAMES: &str = "attribute names are 1 to 64 characters of a-z, 0-9 and _";

/// An attribute name as a limit's `by` spells it.
fn is_attribute_name(name: &str) -> bool {
    !name.contains('|') && sluice::model::By::parse(name).is_ok()
}

/// Checks the `envoy` and `forward_auth` sections against the rules.
pub(super) fn validate(
    envoy: &EnvoyDomains,
    forward_auth: &ForwardAuthConfig,
    rules: &BTreeMap<String, Rule>,
    text: &str,
) -> Result<(), ConfigError> {
    for (domain, mappings) in envoy {
        let line = super::key_line(text, domain);
        let fail = |field: String, message: String| ConfigError::new(field, message).at_line(line);
        if domain.is_empty() {
            return Err(fail("envoy".into(), "a domain name is empty".into()));
        }
        let mut shapes = BTreeSet::new();
        for (i, mapping) in mappings.iter().enumerate() {
            let at = |field: &str| format!("envoy.{domain}[{i}].{field}");
            if mapping.descriptor.is_empty() {
                return Err(fail(
                    at("descriptor"),
                    "a descriptor has one entry or more".into(),
                ));
            }
            let keys: BTreeSet<&str> = mapping.descriptor.iter().map(|e| e.key.as_str()).collect();
            if keys.len() != mapping.descriptor.len() {
                return Err(fail(at("descriptor"), "an entry key appears twice".into()));
            }
            if !shapes.insert(&mapping.descriptor) {
                return Err(fail(
                    at("descriptor"),
                    "the same descriptor is mapped twice in this domain".into(),
                ));
            }
            for key in mapping.attributes.keys() {
                let variable = mapping
                    .descriptor
                    .iter()
                    .any(|e| &e.key == key && e.value.is_none());
                if !variable {
                    return Err(fail(
                        at(&format!("attributes.{key}")),
                        format!("`{key}` is not an entry of the descriptor whose value is taken"),
                    ));
                }
            }
            let Some(rule) = rules.get(&mapping.rule) else {
                let meant =
                    super::suggest::closest(&mapping.rule, rules.keys().map(String::as_str));
                return Err(fail(
                    at("rule"),
                    format!("no rule named `{}` in `rules`", mapping.rule),
                )
                .suggesting(meant.map(str::to_string)));
            };
            let provided: BTreeSet<&str> = mapping
                .descriptor
                .iter()
                .filter(|e| e.value.is_none())
                .map(|e| mapping.attribute_name(&e.key))
                .collect();
            for limit in &rule.limits {
                for by in &limit.by {
                    if !by
                        .alternatives
                        .iter()
                        .any(|a| provided.contains(a.as_str()))
                    {
                        return Err(fail(
                            at("descriptor"),
                            format!(
                                "rule `{}` counts by `{}`, which this descriptor does not provide \
                                 (provided: {}); add the entry or rename one under `attributes`",
                                mapping.rule,
                                by.alternatives.join("|"),
                                provided.iter().copied().collect::<Vec<_>>().join(", ")
                            ),
                        ));
                    }
                }
            }
        }
    }
    let fail = |field: &str, message: String| {
        ConfigError::new(format!("forward_auth.{field}"), message).at_line(super::key_line(
            text,
            field.split('.').next().unwrap_or(field),
        ))
    };
    let prefix = &forward_auth.header_prefix;
    if !prefix.is_empty() && !is_header_name(prefix) {
        return Err(fail(
            "header_prefix",
            format!("`{prefix}` is not a header name"),
        ));
    }
    for (header, attribute) in &forward_auth.headers {
        if !is_header_name(header) {
            return Err(fail(
                &format!("headers.{header}"),
                format!("`{header}` is not a header name"),
            ));
        }
        if !is_attribute_name(attribute) {
            return Err(fail(
                &format!("headers.{header}"),
                format!("`{attribute}`: {ATTRIBUTE_NAMES}"),
            ));
        }
    }
    let attribute = &forward_auth.client_ip.attribute;
    if !is_attribute_name(attribute) {
        return Err(fail(
            "client_ip.attribute",
            format!("`{attribute}`: {ATTRIBUTE_NAMES}"),
        ));
    }
    if forward_auth.client_ip.ipv6_prefix > 128 {
        return Err(fail(
            "client_ip.ipv6_prefix",
            format!(
                "{} is not a prefix length (0 to 128)",
                forward_auth.client_ip.ipv6_prefix
            ),
        ));
    }
    if !DENIED_STATUSES.contains(&forward_auth.denied_status) {
        return Err(fail(
            "denied_status",
            format!("{} is not one of 429, 403, 401", forward_auth.denied_status),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domains() -> EnvoyDomains {
        let mapping =
            |descriptor: &[&str], rule: &str, attributes: &[(&str, &str)]| DescriptorMapping {
                descriptor: descriptor
                    .iter()
                    .map(|e| DescriptorEntry::try_from(e.to_string()).unwrap())
                    .collect(),
                rule: rule.into(),
                attributes: attributes
                    .iter()
                    .map(|&(k, v)| (k.to_string(), v.to_string()))
                    .collect(),
            };
        [(
            "edge".to_string(),
            vec![
                mapping(&["name=api", "tenant"], "per_tenant", &[]),
                mapping(
                    &["remote_address"],
                    "per_client",
                    &[("remote_address", "ip")],
                ),
            ],
        )]
        .into()
    }

    fn bucket(entries: &[(&str, &str)]) -> BTreeMap<String, String> {
        entries
            .iter()
            .map(|&(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn the_ttl_follows_the_interval_unless_set_and_is_checked() {
        use crate::config::{Config, Format};
        let parse = |rlqs: &str| Config::parse(&format!("{rlqs}\nrules: {{}}\n"), Format::Yaml);
        let config = parse("rlqs: { report_interval: 30s }").unwrap();
        assert_eq!(config.rlqs.ttl(), Duration::from_secs(60));
        let config = parse("rlqs: { report_interval: 1s, assignment_ttl: 3s }").unwrap();
        assert_eq!(config.rlqs.ttl(), Duration::from_secs(3));
        for (bad, field) in [
            (
                "rlqs: { report_interval: 5s, assignment_ttl: 1s }",
                "rlqs.assignment_ttl",
            ),
            (
                "rlqs: { report_interval: 1s, assignment_ttl: 11s }",
                "rlqs.assignment_ttl",
            ),
            ("rlqs: { report_interval: 50ms }", "rlqs.report_interval"),
        ] {
            let error = parse(bad).unwrap_err().to_string();
            assert!(error.contains(field), "{bad}: {error}");
        }
    }

    #[test]
    fn a_bucket_id_matches_as_a_descriptor_in_any_order() {
        let domains = domains();
        let api = bucket(&[("tenant", "acme"), ("name", "api")]);
        let (mapping, attributes) = find_bucket_mapping(&domains, "edge", &api).unwrap();
        assert_eq!(mapping.rule, "per_tenant");
        assert_eq!(attributes, vec![("tenant", "acme")]);
        let client = bucket(&[("remote_address", "192.0.2.1")]);
        let (mapping, attributes) = find_bucket_mapping(&domains, "edge", &client).unwrap();
        assert_eq!(mapping.rule, "per_client");
        assert_eq!(attributes, vec![("ip", "192.0.2.1")]);
        // A fixed value that differs, a key more or less, another domain: no rule.
        let other = bucket(&[("tenant", "acme"), ("name", "web")]);
        assert!(find_bucket_mapping(&domains, "edge", &other).is_none());
        let more = bucket(&[("tenant", "acme"), ("name", "api"), ("x", "y")]);
        assert!(find_bucket_mapping(&domains, "edge", &more).is_none());
        assert!(find_bucket_mapping(&domains, "other", &api).is_none());
    }
}
