//! envoyproxy/ratelimit descriptors → Sluice rules and the Envoy mapping that routes the same
//! descriptors to them.
//!
//! - One rule per domain and descriptor shape (its keys, in order), with one mapping
//!   `descriptor: [k1, k2, ...]` to it: the entries are the rule's attributes.
//! - A descriptor with a `rate_limit` is a limit of that rule, counted per the values of the
//!   entries whose descriptor has no value (or a wildcard: per value unless `share_threshold`),
//!   as envoyproxy/ratelimit counts per the request's values; an ancestor with a value becomes
//!   part of the limit's `when`.
//! - Siblings with a specific value (or a trailing-`*` wildcard) become overrides of the limit of
//!   the sibling without a value, exact values first (refusals and `unlimited` first), then
//!   wildcards in the file's order, as envoyproxy/ratelimit tries them; a value whose limit has
//!   another unit (or another `shadow_mode`, or a shared wildcard count) becomes a limit of its
//!   own with a `when`.
//! - `requests_per_unit: 0` is `deny`; `unlimited: true` is `unlimited`; `shadow_mode` is the
//!   limit's `shadow`. Every limit is a `fixed_window` that counts denied requests too, as
//!   envoyproxy/ratelimit's counters do.

use std::time::Duration;

use sluice::model::{Condition, Matcher, Override, Rate, Rule};
use sluice_server::config::gateway::{DescriptorEntry, DescriptorMapping};

use super::building::{Budget, Building, Draft, Scope, Step, scope};
use super::config::{ErlFile, Node};
use super::outcome::{DENY_MESSAGE, Outcome, ValueMatch};
use super::tree::{live, on, one_of, taken_by_siblings};
use crate::import::names::Taken;
use crate::import::report::Report;
use crate::import::rule_file::{Imported, ImportedRule};

/// A descriptor with an exact value, its outcome and the value.
type ExactValue<'a> = (&'a Node, Outcome, String);

struct Translation<'r> {
    report: &'r mut Report,
    rules: Vec<Building>,
    rule_names: Taken,
    /// What the limits made so far weigh; why the translation stopped, if it did.
    budget: Budget,
}

/// Translates the files (several may share a domain: their descriptors are merged, as
/// envoyproxy/ratelimit does with `MERGE_DOMAIN_CONFIG=true`). `shadow_all` stands for
/// envoyproxy/ratelimit's global `SHADOW_MODE=true`.
///
/// Refused (the file and why) when the rules would not fit a rule file, or a condition would
/// list more values than a matcher holds: Sluice could not load them (rules past 4 MiB or
/// 200,000 YAML nodes, or a matcher of more than 10,000 values).
pub fn translate(
    files: &[ErlFile],
    shadow_all: bool,
    report: &mut Report,
) -> Result<Imported, (String, String)> {
    let mut domains: Vec<(String, Vec<Node>)> = Vec::new();
    for f in files {
        match domains.iter_mut().find(|(d, _)| *d == f.domain) {
            Some((_, nodes)) => {
                report.lose(&f.file, "domain", format!("the domain {:?} is also in an earlier file: merged, as envoyproxy/ratelimit does only with MERGE_DOMAIN_CONFIG=true", f.domain));
                nodes.extend(f.descriptors.iter().cloned());
            }
            None => domains.push((f.domain.clone(), f.descriptors.clone())),
        }
    }
    let mut t = Translation {
        report,
        rules: Vec::new(),
        rule_names: Taken::default(),
        budget: Budget::default(),
    };
    for (domain, nodes) in &domains {
        t.walk(domain, nodes, &mut Vec::new());
    }
    if let Some(refused) = t.budget.refused {
        return Err(refused);
    }
    // A shape whose descriptors are all unlimited needs no rule: unmatched is OK, as unlimited is.
    t.rules.retain(|r| !r.limits.is_empty());
    let mut imported = Imported::default();
    for (domain, _) in &domains {
        let mappings: Vec<DescriptorMapping> = t
            .rules
            .iter()
            .filter(|r| &r.domain == domain)
            .map(|r| DescriptorMapping {
                descriptor: r
                    .keys
                    .iter()
                    .map(|k| DescriptorEntry {
                        key: k.clone(),
                        value: None,
                    })
                    .collect(),
                rule: r.name.clone(),
                attributes: r
                    .keys
                    .iter()
                    .zip(&r.attributes)
                    .filter(|(k, a)| k != a)
                    .map(|(k, a)| (k.clone(), a.clone()))
                    .collect(),
            })
            .collect();
        if !mappings.is_empty() {
            imported.envoy.push((domain.clone(), mappings));
        }
    }
    imported.rules = t
        .rules
        .into_iter()
        .map(|b| {
            let mut rule = Rule::new(b.limits);
            rule.shadow = shadow_all;
            ImportedRule {
                from: format!(
                    "envoyproxy/ratelimit domain {:?}, descriptors ({})",
                    b.domain,
                    b.keys.join(", ")
                ),
                name: b.name,
                rule,
                limit_from: b.limit_from,
            }
        })
        .collect();
    Ok(imported)
}

impl<'r> Translation<'r> {
    /// Adds a limit to rule `rule`, unless the translation was stopped (see [`Budget`]).
    fn add(&mut self, rule: usize, draft: Draft<'_>) {
        if self.budget.refused.is_none() {
            let (file, path) = (draft.node.file.clone(), draft.node.path.clone());
            let weight = self.rules[rule].push(draft);
            self.budget.spend(weight, &file, &path);
        }
    }

    fn walk<'a>(&mut self, domain: &str, siblings: &'a [Node], chain: &mut Vec<Step<'a>>) {
        if self.budget.refused.is_some() {
            return;
        }
        let live = live(siblings, self.report);
        let mut keys: Vec<&str> = Vec::new();
        for n in &live {
            if !keys.contains(&n.key.as_str()) {
                keys.push(&n.key);
            }
        }
        for key in keys {
            let group: Vec<&Node> = live.iter().copied().filter(|n| n.key == key).collect();
            if group.iter().any(|n| n.rate_limit.is_some()) {
                self.group(domain, chain, &group, &live);
            }
            for node in &group {
                if !node.children.is_empty() {
                    chain.push(Step {
                        node,
                        siblings: live.clone(),
                    });
                    self.walk(domain, &node.children, chain);
                    chain.pop();
                }
            }
        }
    }

    /// The limits of the siblings `group` (one key, with their `live` siblings), under `chain`.
    fn group<'a>(
        &mut self,
        domain: &str,
        chain: &[Step<'a>],
        group: &[&'a Node],
        live: &[&'a Node],
    ) {
        let key = &group[0].key;
        if let Some(step) = chain.iter().find(|s| &s.node.key == key) {
            self.report.lose(&group[0].file, &group[0].path, format!("the key {key:?} is already an entry of this descriptor (at {}): a Sluice mapping names each entry once; left out", step.node.path));
            return;
        }
        let keys: Vec<String> = chain
            .iter()
            .map(|s| s.node.key.clone())
            .chain([key.clone()])
            .collect();
        let rule = self.rule_for(domain, &keys);
        let attributes = self.rules[rule].attributes.clone();
        let scope = scope(chain, &attributes);
        let attr = attributes[attributes.len() - 1].clone();
        let outcomes: Vec<(&Node, Outcome)> = group
            .iter()
            .map(|n| (*n, Outcome::of(n, self.report)))
            .collect();
        let exacts: Vec<(&Node, Outcome, String)> = outcomes
            .iter()
            .filter_map(|(n, o)| match ValueMatch::of(&n.value) {
                ValueMatch::Exact(v) => Some((*n, *o, v)),
                _ => None,
            })
            .collect();
        let wilds: Vec<(&Node, Outcome)> = outcomes
            .iter()
            .filter(|(n, _)| matches!(ValueMatch::of(&n.value), ValueMatch::Prefix(_)))
            .copied()
            .collect();
        let base = outcomes
            .iter()
            .find(|(n, o)| {
                n.value.is_empty() && matches!(o, Outcome::Rate { .. } | Outcome::Deny { .. })
            })
            .copied();
        let counts = |o: &Outcome| matches!(o, Outcome::Rate { .. } | Outcome::Deny { .. });
        let Some((base_node, base_outcome)) = base else {
            let own: Vec<_> = exacts.iter().filter(|e| counts(&e.1)).cloned().collect();
            self.exact_limits(rule, &scope, &attr, &own);
            for (node, outcome) in wilds.iter().filter(|w| counts(&w.1)) {
                self.wildcard_limit(rule, &scope, &attr, node, *outcome, live);
            }
            return;
        };
        let window = base_outcome.window().unwrap_or(Duration::from_secs(1));
        let shadow = base_outcome.shadow();
        let fits = |node: &Node, o: &Outcome| match o {
            Outcome::NoLimit | Outcome::Unlimited => true,
            Outcome::Deny { .. } => !shadow,
            Outcome::Rate { rate, shadow: s } => {
                rate.window() == window && *s == shadow && !node.share_threshold
            }
        };
        let mut overrides = scope.taken.clone();
        let mut also = Vec::new();
        let left_out: Vec<String> = exacts
            .iter()
            .filter(|(n, o, _)| matches!(o, Outcome::NoLimit | Outcome::Unlimited) || !fits(n, o))
            .map(|e| e.2.clone())
            .collect();
        if !left_out.is_empty() {
            overrides.push(Override::unlimited(on(&attr, one_of(left_out))));
        }
        let refused: Vec<String> = exacts
            .iter()
            .filter(|(n, o, _)| matches!(o, Outcome::Deny { .. }) && fits(n, o))
            .map(|e| e.2.clone())
            .collect();
        if !refused.is_empty() {
            overrides.push(Override::deny(on(&attr, one_of(refused)), DENY_MESSAGE));
        }
        for (rate, values) in by_rate(
            exacts
                .iter()
                .filter(|(n, o, _)| fits(n, o))
                .map(|(_, o, v)| (*o, v.clone())),
        ) {
            overrides.push(Override::numbers(
                on(&attr, one_of(values)),
                Some(rate),
                None,
            ));
        }
        also.extend(
            exacts
                .iter()
                .filter(|(n, o, _)| counts(o) && fits(n, o))
                .map(|e| e.0),
        );
        for (node, o) in &wilds {
            let ValueMatch::Prefix(p) = ValueMatch::of(&node.value) else {
                continue;
            };
            let when = on(&attr, Matcher::Prefix(p));
            overrides.push(match o {
                Outcome::Rate { rate, .. } if fits(node, o) => {
                    Override::numbers(when, Some(*rate), None)
                }
                Outcome::Deny { .. } if fits(node, o) => Override::deny(when, DENY_MESSAGE),
                _ => Override::unlimited(when),
            });
            if counts(o) && fits(node, o) {
                also.push(node);
            }
        }
        let rate = match base_outcome {
            Outcome::Rate { rate, .. } => rate,
            _ => {
                overrides.push(Override::deny(Condition::default(), DENY_MESSAGE));
                // The window is one of Envoy's units, which a rate can hold.
                let Ok(rate) = Rate::new(1, window) else {
                    return;
                };
                rate
            }
        };
        self.add(
            rule,
            Draft {
                scope: scope.clone(),
                last: key.clone(),
                node: base_node,
                rate,
                shadow,
                overrides,
                also,
            },
        );
        let own: Vec<_> = exacts
            .iter()
            .filter(|(n, o, _)| counts(o) && !fits(n, o))
            .cloned()
            .collect();
        self.exact_limits(rule, &scope, &attr, &own);
        for (node, outcome) in wilds.iter().filter(|(n, o)| counts(o) && !fits(n, o)) {
            self.wildcard_limit(rule, &scope, &attr, node, *outcome, live);
        }
    }

    /// Limits for exact values that are not overrides of a limit without a value: one per
    /// window and shadow mode, with a `when` on the values and overrides for the other numbers.
    fn exact_limits<'a>(
        &mut self,
        rule: usize,
        scope: &Scope,
        attr: &str,
        exacts: &[ExactValue<'a>],
    ) {
        let mut groups: Vec<((Duration, bool), Vec<&ExactValue<'a>>)> = Vec::new();
        for e in exacts {
            let at = (e.1.window().unwrap_or_default(), e.1.shadow());
            match groups.iter_mut().find(|(k, _)| *k == at) {
                Some((_, members)) => members.push(e),
                None => groups.push((at, vec![e])),
            }
        }
        for ((window, shadow), members) in groups {
            let mut scope = scope.clone();
            let values: Vec<String> = members.iter().map(|m| m.2.clone()).collect();
            scope.when.insert(attr.to_string(), one_of(values));
            scope.by.push(attr.to_string());
            let found = members.iter().find_map(|m| match m.1 {
                Outcome::Rate { rate, .. } => Some(rate),
                _ => None,
            });
            // A group's window is one of Envoy's units, which a rate can hold.
            let Some(rate) = found.or_else(|| Rate::new(1, window).ok()) else {
                continue;
            };
            let mut overrides = scope.taken.clone();
            let refused: Vec<String> = members
                .iter()
                .filter(|m| matches!(m.1, Outcome::Deny { .. }))
                .map(|m| m.2.clone())
                .collect();
            if !refused.is_empty() {
                overrides.push(Override::deny(on(attr, one_of(refused)), DENY_MESSAGE));
            }
            let others = by_rate(members.iter().map(|m| (m.1, m.2.clone())))
                .into_iter()
                .filter(|(r, _)| *r != rate);
            for (other, values) in others {
                overrides.push(Override::numbers(
                    on(attr, one_of(values)),
                    Some(other),
                    None,
                ));
            }
            let first = members[0];
            scope.name.push(format!("{}_{}", first.0.key, first.2));
            let also = members[1..].iter().map(|m| m.0).collect();
            self.add(
                rule,
                Draft {
                    scope,
                    last: String::new(),
                    node: first.0,
                    rate,
                    shadow,
                    overrides,
                    also,
                },
            );
        }
    }

    /// The limit of a wildcard that is not an override: a `when` on its prefix, left out for the
    /// values exact siblings and earlier wildcards take.
    fn wildcard_limit(
        &mut self,
        rule: usize,
        scope: &Scope,
        attr: &str,
        node: &Node,
        outcome: Outcome,
        live: &[&Node],
    ) {
        let ValueMatch::Prefix(p) = ValueMatch::of(&node.value) else {
            return;
        };
        let mut scope = scope.clone();
        scope
            .when
            .insert(attr.to_string(), Matcher::Prefix(p.clone()));
        if !node.share_threshold {
            scope.by.push(attr.to_string());
        }
        scope.name.push(format!("{}_{p}*", node.key));
        let mut overrides = scope.taken.clone();
        overrides.extend(taken_by_siblings(node, live, attr));
        let rate = match outcome {
            Outcome::Rate { rate, .. } => rate,
            _ => {
                overrides.push(Override::deny(Condition::default(), DENY_MESSAGE));
                // A denying limit's window is one of Envoy's units, which a rate can hold.
                let window = outcome.window().unwrap_or(Duration::from_secs(1));
                let Ok(rate) = Rate::new(1, window) else {
                    return;
                };
                rate
            }
        };
        self.add(
            rule,
            Draft {
                scope,
                last: String::new(),
                node,
                rate,
                shadow: outcome.shadow(),
                overrides,
                also: Vec::new(),
            },
        );
    }

    fn rule_for(&mut self, domain: &str, keys: &[String]) -> usize {
        if let Some(i) = self
            .rules
            .iter()
            .position(|r| r.domain == domain && r.keys == keys)
        {
            return i;
        }
        self.rules
            .push(Building::new(domain, keys, &mut self.rule_names));
        self.rules.len() - 1
    }
}

/// Values grouped by their rate, in the order the rates first appear.
fn by_rate(items: impl Iterator<Item = (Outcome, String)>) -> Vec<(Rate, Vec<String>)> {
    let mut out: Vec<(Rate, Vec<String>)> = Vec::new();
    for (o, value) in items {
        let Outcome::Rate { rate, .. } = o else {
            continue;
        };
        match out.iter_mut().find(|(r, _)| *r == rate) {
            Some((_, values)) => values.push(value),
            None => out.push((rate, vec![value])),
        }
    }
    out
}
