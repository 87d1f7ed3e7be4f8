//! The result of an import — rules and the Envoy mapping, with a comment per rule and per limit
//! saying where it came from — and its text as a Sluice rule file (YAML).
//!
//! The text is written here rather than by a YAML serializer so that it can carry those
//! comments and the short flow forms README uses (`{ when: { plan: pro }, rate: 4/1m }`).
//! Invariant (held by the round-trip tests): reading the text back gives exactly these rules
//! and mappings; any source text is quoted so that it stays one scalar.

use std::fmt::Write;

use sluice::model::{Condition, Limit, Matcher, Override, OverrideOutcome, Rule};
use sluice_server::config::gateway::DescriptorMapping;

/// One imported rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImportedRule {
    /// Its name.
    pub name: String,
    /// Where it came from (a comment above it).
    pub from: String,
    /// The rule.
    pub rule: Rule,
    /// Where each limit came from (a comment above each), in the order of `rule.limits`.
    pub limit_from: Vec<String>,
}

/// What an import writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Imported {
    /// Comment lines at the top.
    pub header: Vec<String>,
    /// The rules, in the source's order.
    pub rules: Vec<ImportedRule>,
    /// Envoy domains and their mappings, in the source's order; none: no `grpc_listen`/`envoy`.
    pub envoy: Vec<(String, Vec<DescriptorMapping>)>,
}

/// Where an imported file's gRPC listener is, like the examples'.
pub const GRPC_LISTEN: &str = "127.0.0.1:8081";

impl Imported {
    /// The rule file's text.
    pub fn to_yaml(&self) -> String {
        let mut out = String::new();
        for line in &self.header {
            let _ = writeln!(out, "# {line}");
        }
        if !self.envoy.is_empty() {
            let _ = writeln!(out, "grpc_listen: {GRPC_LISTEN}");
        }
        if self.rules.is_empty() {
            out.push_str("rules: {}\n");
        } else {
            out.push_str("rules:\n");
        }
        for r in &self.rules {
            let _ = writeln!(out, "  {}:", scalar(&r.name));
            comment(&mut out, "    ", &r.from);
            if r.rule.shadow {
                out.push_str("    shadow: true\n");
            }
            if let Some(when) = &r.rule.when {
                let _ = writeln!(out, "    when: {}", condition(when));
            }
            out.push_str("    limits:\n");
            for (i, limit) in r.rule.limits.iter().enumerate() {
                if let Some(from) = r.limit_from.get(i) {
                    comment(&mut out, "      ", from);
                }
                write_limit(&mut out, limit);
            }
        }
        if !self.envoy.is_empty() {
            out.push_str("envoy:\n");
        }
        for (domain, mappings) in &self.envoy {
            let _ = writeln!(out, "  {}:", scalar(domain));
            for m in mappings {
                let entries: Vec<String> = m
                    .descriptor
                    .iter()
                    .map(|e| scalar(&e.to_string()))
                    .collect();
                let _ = writeln!(out, "    - descriptor: [{}]", entries.join(", "));
                let _ = writeln!(out, "      rule: {}", scalar(&m.rule));
                if !m.attributes.is_empty() {
                    let renames: Vec<String> = m
                        .attributes
                        .iter()
                        .map(|(k, v)| format!("{}: {}", scalar(k), scalar(v)))
                        .collect();
                    let _ = writeln!(out, "      attributes: {{ {} }}", renames.join(", "));
                }
            }
        }
        out
    }
}

fn comment(out: &mut String, indent: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{indent}# {line}");
    }
}

fn write_limit(out: &mut String, l: &Limit) {
    let mut first = true;
    let mut field = |out: &mut String, text: String| {
        let lead = if first { "      - " } else { "        " };
        first = false;
        let _ = writeln!(out, "{lead}{text}");
    };
    if let Some(name) = &l.name {
        field(out, format!("name: {}", scalar(name)));
    }
    let by: Vec<String> =
        l.by.iter()
            .map(|b| scalar(&String::from(b.clone())))
            .collect();
    field(out, format!("by: [{}]", by.join(", ")));
    field(out, format!("rate: {}", l.rate));
    field(out, format!("algorithm: {}", l.algorithm));
    if l.count_denied {
        field(out, "count_denied: true".into());
    }
    if l.shadow {
        field(out, "shadow: true".into());
    }
    if let Some(when) = &l.when {
        field(out, format!("when: {}", condition(when)));
    }
    if !l.overrides.is_empty() {
        field(out, "overrides:".into());
        for o in &l.overrides {
            let _ = writeln!(out, "          - {}", override_text(o));
        }
    }
}

fn override_text(o: &Override) -> String {
    let outcome = match &o.outcome {
        OverrideOutcome::Numbers {
            rate,
            burst,
            max_leases,
            quota,
        } => {
            let mut parts = Vec::new();
            if let Some(rate) = rate {
                parts.push(format!("rate: {rate}"));
            }
            if let Some(burst) = burst {
                parts.push(format!("burst: {burst}"));
            }
            if let Some(max) = max_leases {
                parts.push(format!("max_leases: {max}"));
            }
            if let Some(quota) = quota {
                parts.push(format!("quota: {quota}"));
            }
            parts.join(", ")
        }
        OverrideOutcome::Unlimited => "unlimited: true".to_string(),
        OverrideOutcome::Deny(message) => format!("deny: {}", scalar(message)),
    };
    format!("{{ when: {}, {outcome} }}", condition(&o.when))
}

/// `{ a: x, b: { prefix: p } }`.
pub fn condition(c: &Condition) -> String {
    if c.0.is_empty() {
        return "{}".to_string();
    }
    let parts: Vec<String> =
        c.0.iter()
            .map(|(name, m)| format!("{}: {}", scalar(name), matcher(m)))
            .collect();
    format!("{{ {} }}", parts.join(", "))
}

fn matcher(m: &Matcher) -> String {
    match m {
        Matcher::Equals(v) => scalar(v),
        Matcher::OneOf(set) => {
            let items: Vec<String> = set.iter().map(|v| scalar(v)).collect();
            format!("[{}]", items.join(", "))
        }
        Matcher::Prefix(p) => format!("{{ prefix: {} }}", scalar(p)),
        Matcher::Present(p) => format!("{{ present: {p} }}"),
        Matcher::Cidr(nets) => {
            let items: Vec<String> = nets.iter().map(|n| scalar(&n.to_string())).collect();
            format!("{{ cidr: [{}] }}", items.join(", "))
        }
        Matcher::Not(inner) => format!("{{ not: {} }}", matcher(inner)),
    }
}

/// A scalar as YAML reads back the same text: plain when it is a simple word, else
/// double-quoted (JSON's escapes are YAML's).
pub fn scalar(text: &str) -> String {
    let plain = text
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == '/')
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '/' | '-'))
        && !matches!(
            text.to_ascii_lowercase().as_str(),
            "true" | "false" | "null" | "yes" | "no" | "on" | "off" | "y" | "n"
        );
    match plain {
        true => text.to_string(),
        false => serde_json::to_string(text).unwrap_or_else(|_| format!("{text:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_read_back_as_the_same_text() {
        for text in [
            "pro",
            "a b",
            "",
            "true",
            "No",
            "007",
            "1.5",
            "-x",
            "a: b",
            "#c",
            "{x}",
            "[y]",
            "q\"uo'te",
            "new\nline",
            "tab\t",
            "ünï",
            "*",
            "&a",
            "!t",
            "%",
            "@",
            "`",
            "/api/v1",
            "x,y",
            "~",
        ] {
            let yaml = format!("v: {}\n", scalar(text));
            let read: serde_json::Value = serde_saphyr::from_str(&yaml).unwrap();
            assert_eq!(read["v"], serde_json::Value::String(text.into()), "{yaml}");
            let flow = format!("v: {{ w: [{}] }}\n", scalar(text));
            let read: serde_json::Value = serde_saphyr::from_str(&flow).unwrap();
            assert_eq!(
                read["v"]["w"][0],
                serde_json::Value::String(text.into()),
                "{flow}"
            );
        }
    }
}
