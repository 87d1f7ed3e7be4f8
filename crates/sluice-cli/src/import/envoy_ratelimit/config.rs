//! An envoyproxy/ratelimit configuration file as read: its `domain` and its tree of
//! descriptors, each with its path in the document.
//!
//! Everything the file says that changes no decision, or that Sluice has no place for, is
//! reported here as it is read: `replaces`, `detailed_metric`, `value_to_metric`, `metadata`,
//! `quota_mode`, unknown keys. Invariants: a descriptor without a key is left out (with its
//! subtree), as is one nested deeper than [`MAX_DEPTH`]; nothing else is dropped here.

use serde_json::Value;

use crate::import::document::{Reader, index, join};

/// The deepest descriptor read: Sluice's Envoy gateway takes at most this many entries per
/// descriptor, so a deeper one could never match.
pub const MAX_DEPTH: usize = sluice_server::gateway::envoy::MAX_ENTRIES;

/// One file: a domain and its descriptors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErlFile {
    /// The file, as reports name it.
    pub file: String,
    /// `domain`.
    pub domain: String,
    /// The top-level descriptors.
    pub descriptors: Vec<Node>,
}

/// One entry of a `descriptors` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The file it is in.
    pub file: String,
    /// Its path in the document (`descriptors[0].descriptors[2]`).
    pub path: String,
    /// `key`.
    pub key: String,
    /// `value`; empty when absent (any value).
    pub value: String,
    /// `rate_limit`.
    pub rate_limit: Option<RateLimit>,
    /// `shadow_mode`.
    pub shadow: bool,
    /// `share_threshold`: every value its wildcard matches shares one count.
    pub share_threshold: bool,
    /// The nested `descriptors`.
    pub children: Vec<Node>,
}

/// A `rate_limit` block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    /// `unit`, as written.
    pub unit: Option<String>,
    /// `requests_per_unit`.
    pub requests_per_unit: u64,
    /// `unlimited`.
    pub unlimited: bool,
    /// `name`.
    pub name: Option<String>,
}

const TOP: &[&str] = &["domain", "descriptors"];
const DESCRIPTOR: &[&str] = &[
    "key",
    "value",
    "rate_limit",
    "descriptors",
    "shadow_mode",
    "detailed_metric",
    "value_to_metric",
    "share_threshold",
    "quota_mode",
    "metadata",
];
const RATE_LIMIT: &[&str] = &["unit", "requests_per_unit", "unlimited", "name", "replaces"];
const UNKNOWN: &str = "envoyproxy/ratelimit refuses a file with it; left out";

/// Reads a file's tree; `None` when it has no domain (envoyproxy/ratelimit refuses it).
pub fn read(tree: &Value, reader: &mut Reader<'_>) -> Option<ErlFile> {
    let map = reader.map(tree, "", TOP, UNKNOWN)?;
    let domain = reader.text(map, "domain", "").unwrap_or_default();
    if domain.is_empty() {
        reader.lose(
            "domain",
            "no domain: envoyproxy/ratelimit refuses the file; nothing imported from it",
        );
        return None;
    }
    let descriptors = read_list(
        reader.list(map, "descriptors", ""),
        "descriptors",
        1,
        reader,
    );
    Some(ErlFile {
        file: reader.file.to_string(),
        domain,
        descriptors,
    })
}

fn read_list(items: &[Value], path: &str, depth: usize, reader: &mut Reader<'_>) -> Vec<Node> {
    if depth > MAX_DEPTH && !items.is_empty() {
        reader.lose(
            path,
            format!("nested deeper than {MAX_DEPTH} entries, which no descriptor Sluice reads can have; left out"),
        );
        return Vec::new();
    }
    items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| read_node(item, &index(path, i), depth, reader))
        .collect()
}

fn read_node(item: &Value, path: &str, depth: usize, reader: &mut Reader<'_>) -> Option<Node> {
    let map = reader.map(item, path, DESCRIPTOR, UNKNOWN)?;
    let key = reader.text(map, "key", path).unwrap_or_default();
    if key.is_empty() {
        reader.lose(path, "a descriptor without a key: envoyproxy/ratelimit refuses it; left out with what it nests");
        return None;
    }
    for (flag, what) in [
        (
            "detailed_metric",
            "metrics per descriptor value: Sluice's metrics count by rule; decisions are the same",
        ),
        (
            "value_to_metric",
            "descriptor values in metric names: Sluice's metrics count by rule; decisions are the same",
        ),
        (
            "quota_mode",
            "quota mode has no Sluice form; the limit is imported as an ordinary limit",
        ),
    ] {
        if reader.flag(map, flag, path) {
            reader.lose(&join(path, flag), what);
        }
    }
    if map.get("metadata").is_some_and(|m| !m.is_null()) {
        reader.lose(
            &join(path, "metadata"),
            "metadata returned with the descriptor's status: Sluice returns none; decisions are the same",
        );
    }
    let rate_limit = match map.get("rate_limit") {
        None | Some(Value::Null) => None,
        Some(block) => read_rate_limit(block, &join(path, "rate_limit"), reader),
    };
    let children = read_list(
        reader.list(map, "descriptors", path),
        &join(path, "descriptors"),
        depth + 1,
        reader,
    );
    Some(Node {
        file: reader.file.to_string(),
        path: path.to_string(),
        value: reader.text(map, "value", path).unwrap_or_default(),
        shadow: reader.flag(map, "shadow_mode", path),
        share_threshold: reader.flag(map, "share_threshold", path),
        rate_limit,
        children,
        key,
    })
}

fn read_rate_limit(block: &Value, path: &str, reader: &mut Reader<'_>) -> Option<RateLimit> {
    let map = reader.map(block, path, RATE_LIMIT, UNKNOWN)?;
    let replaces = reader.list(map, "replaces", path);
    if !replaces.is_empty() {
        let names: Vec<String> = replaces
            .iter()
            .map(|r| {
                r.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string()
            })
            .collect();
        reader.lose(
            &join(path, "replaces"),
            format!(
                "replaces {}: Sluice decides each descriptor by its own rule, so a request whose \
                 descriptors match both limits is limited by both",
                names.join(", ")
            ),
        );
    }
    Some(RateLimit {
        unit: reader.text(map, "unit", path),
        requests_per_unit: reader.count(map, "requests_per_unit", path).unwrap_or(0),
        unlimited: reader.flag(map, "unlimited", path),
        name: reader.text(map, "name", path).filter(|n| !n.is_empty()),
    })
}
