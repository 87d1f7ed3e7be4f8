//! A rule being built from envoyproxy/ratelimit descriptors of one shape, and what the levels
//! above a descriptor add to each limit made from it (the `Scope`).
//!
//! Invariants: a rule's attributes are the shape's keys as attribute names, unique within the
//! rule; every limit is a `fixed_window` counting denied requests, named uniquely in its rule.

use std::collections::BTreeMap;

use sluice::model::{Algorithm, By, Condition, Limit, MAX_MATCHER_ITEMS, Matcher, Override, Rate};

use super::config::Node;
use super::outcome::ValueMatch;
use super::tree::taken_by_siblings;
use crate::import::names::{self, Taken};

/// A rule being built: one domain and descriptor shape.
pub(super) struct Building {
    pub(super) domain: String,
    pub(super) keys: Vec<String>,
    pub(super) attributes: Vec<String>,
    pub(super) name: String,
    pub(super) limits: Vec<Limit>,
    pub(super) limit_from: Vec<String>,
    pub(super) limit_names: Taken,
}

/// A descriptor on the way down to the one being translated, with its siblings.
pub(super) struct Step<'a> {
    pub(super) node: &'a Node,
    pub(super) siblings: Vec<&'a Node>,
}

/// What the levels above a descriptor add to each of its limits.
#[derive(Clone, Default)]
pub(super) struct Scope {
    pub(super) when: BTreeMap<String, Matcher>,
    pub(super) by: Vec<String>,
    pub(super) taken: Vec<Override>,
    pub(super) name: Vec<String>,
}

/// A limit about to be added.
pub(super) struct Draft<'a> {
    pub(super) scope: Scope,
    pub(super) last: String,
    pub(super) node: &'a Node,
    pub(super) rate: Rate,
    pub(super) shadow: bool,
    pub(super) overrides: Vec<Override>,
    pub(super) also: Vec<&'a Node>,
}

impl Building {
    /// A rule for `keys` of `domain`, named among `rule_names`.
    pub(super) fn new(domain: &str, keys: &[String], rule_names: &mut Taken) -> Building {
        let mut parts = vec![domain];
        parts.extend(keys.iter().map(String::as_str));
        let mut taken = Taken::default();
        Building {
            domain: domain.to_string(),
            keys: keys.to_vec(),
            attributes: keys
                .iter()
                .map(|k| names::attribute(k, &mut taken))
                .collect(),
            name: names::rule(&parts, rule_names),
            limits: Vec::new(),
            limit_from: Vec::new(),
            limit_names: Taken::default(),
        }
    }

    /// Adds the limit `d` describes, named by the file's `name` or by its path, and returns
    /// what it weighs ([`Weight`]).
    pub(super) fn push(&mut self, d: Draft<'_>) -> Weight {
        let r = self;
        let mut by = d.scope.by.clone();
        let mut parts = d.scope.name.clone();
        if !d.last.is_empty() {
            by.push(r.attributes[r.attributes.len() - 1].clone());
            parts.push(d.last.clone());
        }
        // The file's own name for the limit, when it gives one, is the limit's name in Sluice.
        if let Some(wanted) = d.node.rate_limit.as_ref().and_then(|l| l.name.clone()) {
            parts = vec![wanted];
        }
        let name = names::limit(&parts, &mut r.limit_names);
        let mut limit = Limit::new(&[], d.rate, Algorithm::FixedWindow);
        limit.by = by
            .iter()
            .map(|b| By {
                alternatives: vec![b.clone()],
            })
            .collect();
        limit.name = Some(name);
        limit.count_denied = true;
        limit.shadow = d.shadow;
        limit.when = (!d.scope.when.is_empty()).then(|| Condition(d.scope.when.clone()));
        limit.overrides = d.overrides;
        let mut from = format!("from {}: {}", d.node.file, d.node.path);
        if !d.also.is_empty() {
            let paths: Vec<&str> = d.also.iter().map(|n| n.path.as_str()).collect();
            from.push_str(&format!("\nand the values of {}", paths.join(", ")));
        }
        let weight = Weight::of(&limit, &from);
        r.limits.push(limit);
        r.limit_from.push(from);
        weight
    }
}

/// The most a translation writes: what a rule file may hold. Nested wildcards repeat what their
/// siblings take in every limit below them, so a small file can ask for far more; the
/// translation stops once it is reached, having spent time and memory in proportion to it.
pub const MAX_OUTPUT_BYTES: u64 = sluice_server::config::MAX_FILE_BYTES;

/// The most YAML nodes (scalars, maps, lists) the translation writes: the rule file's reader
/// refuses a document of more than 250,000, and the mapping and names need some room besides.
pub const MAX_OUTPUT_NODES: u64 = 200_000;

/// What the limits made so far weigh, and why the translation stopped (the file, the message):
/// rules larger than [`MAX_OUTPUT_BYTES`] or [`MAX_OUTPUT_NODES`], or a matcher of more than
/// [`MAX_MATCHER_ITEMS`] values.
#[derive(Debug, Default)]
pub(super) struct Budget {
    bytes: u64,
    nodes: u64,
    pub(super) refused: Option<(String, String)>,
}

impl Budget {
    /// Counts a limit made from the descriptor at `path` of `file`.
    pub(super) fn spend(&mut self, weight: Weight, file: &str, path: &str) {
        self.bytes += weight.bytes;
        self.nodes += weight.nodes;
        let message = if weight.most_values > MAX_MATCHER_ITEMS {
            format!(
                "{path}: its limit would test {} values of one entry, more than the \
                 {MAX_MATCHER_ITEMS} a Sluice condition holds",
                weight.most_values
            )
        } else if self.bytes > MAX_OUTPUT_BYTES || self.nodes > MAX_OUTPUT_NODES {
            format!(
                "the rules would take more than a rule file may hold ({MAX_OUTPUT_BYTES} bytes, \
                 {MAX_OUTPUT_NODES} values) (reached at {path}): nested wildcards repeat the \
                 values their siblings take in every limit below them; flatten the nesting or \
                 split the file"
            )
        } else {
            return;
        };
        self.refused = Some((file.to_string(), message));
    }
}

/// What a limit adds to the rule file: about how many bytes it takes (its conditions and
/// overrides dominate: an ancestor's siblings are repeated in every limit below it), and the
/// most values one of its matchers lists.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Weight {
    bytes: u64,
    nodes: u64,
    most_values: usize,
}

impl Weight {
    /// At least what the limit writes: its own keys, then each condition and override.
    fn of(limit: &Limit, from: &str) -> Weight {
        let mut w = Weight {
            bytes: 200 + from.len() as u64,
            nodes: 16,
            most_values: 0,
        };
        w.nodes += 4 * limit.overrides.len() as u64;
        let conditions = limit
            .when
            .iter()
            .chain(limit.overrides.iter().map(|o| &o.when));
        for condition in conditions {
            w.bytes += 16;
            w.nodes += 2;
            for (name, matcher) in &condition.0 {
                w.bytes += name.len() as u64 + 4;
                w.nodes += 1;
                w.add(matcher);
            }
        }
        w
    }

    fn add(&mut self, matcher: &Matcher) {
        let text = |s: &str| s.len() as u64 + 4;
        let values = match matcher {
            Matcher::Equals(v) | Matcher::Prefix(v) => {
                self.bytes += text(v) + 10;
                1
            }
            Matcher::OneOf(values) => {
                self.bytes += values.iter().map(|v| text(v)).sum::<u64>();
                values.len()
            }
            Matcher::Cidr(networks) => {
                self.bytes += 24 * networks.len() as u64;
                networks.len()
            }
            Matcher::Present(_) => {
                self.bytes += 16;
                1
            }
            Matcher::Not(inner) => {
                self.bytes += 8;
                self.nodes += 2;
                return self.add(inner);
            }
        };
        self.nodes += 2 + values as u64;
        self.most_values = self.most_values.max(values);
    }
}

/// What the levels above add: a value is a `when`, no value or a wildcard is counted per value
/// (`by`), and what siblings take first is left out.
pub(super) fn scope(chain: &[Step<'_>], attributes: &[String]) -> Scope {
    let mut scope = Scope::default();
    for (step, attr) in chain.iter().zip(attributes) {
        let node = step.node;
        match ValueMatch::of(&node.value) {
            ValueMatch::Exact(v) => {
                scope.name.push(format!("{}_{v}", node.key));
                scope.when.insert(attr.clone(), Matcher::Equals(v));
            }
            ValueMatch::Prefix(p) => {
                scope.name.push(format!("{}_{p}*", node.key));
                scope.when.insert(attr.clone(), Matcher::Prefix(p));
                if !node.share_threshold {
                    scope.by.push(attr.clone());
                }
            }
            ValueMatch::Any | ValueMatch::Glob => {
                scope.name.push(node.key.clone());
                scope.by.push(attr.clone());
            }
        }
        scope
            .taken
            .extend(taken_by_siblings(node, &step.siblings, attr));
    }
    scope
}
