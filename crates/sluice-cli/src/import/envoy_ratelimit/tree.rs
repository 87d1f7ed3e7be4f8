//! How envoyproxy/ratelimit picks the descriptor a request's entry reaches among siblings, and
//! what stands in Sluice for "this sibling was not picked".
//!
//! At each level envoyproxy/ratelimit tries, among the siblings: the one whose value equals the
//! entry's, then the wildcards in the file's order, then the one with no value — and goes down
//! into the one found, never back. So a descriptor with no value (or a wildcard) is reached by a
//! value only when no exact sibling (and no earlier wildcard) takes it, whether or not that
//! sibling has a limit for the request's depth. In Sluice, "taken by a sibling" is an
//! `unlimited` override placed before the limit's own outcome: the limit is then left out.

use sluice::model::{Condition, Matcher, Override};

use super::config::Node;
use super::outcome::ValueMatch;
use crate::import::report::Report;

/// The siblings of one list that can be reached and carried over, in the file's order: a
/// duplicate (same key and value), a wildcard Sluice cannot state, a wildcard an earlier one
/// always takes first, and a key an Envoy mapping cannot name are reported and left out.
pub fn live<'a>(siblings: &'a [Node], report: &mut Report) -> Vec<&'a Node> {
    let mut kept: Vec<&Node> = Vec::new();
    for node in siblings {
        if node.key.contains('=') || node.key.trim() != node.key {
            report.lose(&node.file, &node.path, format!("the key {:?} has `=` or surrounding spaces, which a Sluice descriptor mapping cannot name; left out with what it nests", node.key));
            continue;
        }
        if let Some(first) = kept
            .iter()
            .find(|k| k.key == node.key && k.value == node.value)
        {
            report.lose(&node.file, &node.path, format!("the same key and value as {}: envoyproxy/ratelimit refuses the file; the first is kept", first.path));
            continue;
        }
        match ValueMatch::of(&node.value) {
            ValueMatch::Glob => {
                report.lose(&node.file, &node.path, format!("the wildcard {:?} has a `*` before its end, which Sluice's matchers cannot state (only a trailing `*`, as a prefix); left out with what it nests, so its values go to the descriptor without a value", node.value));
                continue;
            }
            ValueMatch::Prefix(p) => {
                let earlier = kept.iter().find(|k| {
                    k.key == node.key && matches!(ValueMatch::of(&k.value), ValueMatch::Prefix(q) if p.starts_with(&q))
                });
                if let Some(earlier) = earlier {
                    report.lose(&node.file, &node.path, format!("never reached: the earlier wildcard at {} takes every value this one would; left out", earlier.path));
                    continue;
                }
            }
            ValueMatch::Any | ValueMatch::Exact(_) => {}
        }
        kept.push(node);
    }
    kept
}

/// A value set as a matcher: one value is an equality.
pub fn one_of(values: Vec<String>) -> Matcher {
    match <[String; 1]>::try_from(values) {
        Ok([one]) => Matcher::Equals(one),
        Err(values) => Matcher::OneOf(values),
    }
}

/// A condition on one attribute.
pub fn on(attribute: &str, matcher: Matcher) -> Condition {
    Condition([(attribute.to_string(), matcher)].into())
}

/// The `unlimited` overrides that leave a limit out for the values `node`'s siblings (of the
/// same key, in `siblings`) take before it.
pub fn taken_by_siblings(node: &Node, siblings: &[&Node], attribute: &str) -> Vec<Override> {
    let same_key = || siblings.iter().filter(|s| s.key == node.key);
    let exact = |s: &&&Node| match ValueMatch::of(&s.value) {
        ValueMatch::Exact(v) => Some(v),
        _ => None,
    };
    let mut out = Vec::new();
    match ValueMatch::of(&node.value) {
        ValueMatch::Exact(_) | ValueMatch::Glob => {}
        ValueMatch::Prefix(p) => {
            let values: Vec<String> = same_key()
                .filter_map(|s| exact(&s))
                .filter(|v| v.starts_with(&p))
                .collect();
            if !values.is_empty() {
                out.push(Override::unlimited(on(attribute, one_of(values))));
            }
            for earlier in same_key().take_while(|s| !std::ptr::eq(**s, node)) {
                if let ValueMatch::Prefix(q) = ValueMatch::of(&earlier.value)
                    && q.starts_with(&p)
                {
                    out.push(Override::unlimited(on(attribute, Matcher::Prefix(q))));
                }
            }
        }
        ValueMatch::Any => {
            let values: Vec<String> = same_key().filter_map(|s| exact(&s)).collect();
            if !values.is_empty() {
                out.push(Override::unlimited(on(attribute, one_of(values))));
            }
            for s in same_key() {
                if let ValueMatch::Prefix(q) = ValueMatch::of(&s.value) {
                    out.push(Override::unlimited(on(attribute, Matcher::Prefix(q))));
                }
            }
        }
    }
    out
}
