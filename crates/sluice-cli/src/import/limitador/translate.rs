//! Limitador limits → Sluice rules: one rule per namespace, one limit per Limitador limit.
//!
//! - `max_value` per `seconds` is the rate, counted in a `fixed_window` per the values of its
//!   `variables` (`by`); a limit whose variables a request lacks does not apply to it
//!   (`when: { v: { present: true } }`), as in Limitador. `max_value: 0` is `deny`.
//! - `conditions` are the limit's `when`; a `!=` (or any `!`) holds in Limitador only when the
//!   entry is there, so it is `present: true` and an `unlimited` override for the excluded
//!   values, which leaves the limit out for them.
//! - Entry keys become attribute names (`req.method` → `req_method`); the rule of a namespace is
//!   checked with those attributes over HTTP, or reached through the `envoy` section.
//! - As in Limitador, a request passes only if every limit that applies allows it, and a
//!   denied request counts nothing.

use std::collections::BTreeMap;
use std::time::Duration;

use sluice::model::{
    Algorithm, By, Condition, Limit, MAX_COUNT, MAX_WINDOW, Matcher, Override, Rate, Rule,
};
use sluice_server::config::gateway::{DescriptorEntry, DescriptorMapping};

use super::config::LimitadorLimit;
use super::expression::{self, Entry, Test};
use crate::import::names::{self, Taken};
use crate::import::report::Report;
use crate::import::rule_file::{Imported, ImportedRule};

/// What makes two Limitador limits the same limit: namespace, seconds, conditions, variables.
type Identity = (String, u64, Vec<String>, Vec<String>);

/// The message of a `max_value: 0` limit's refusals.
pub const DENY_MESSAGE: &str = "limited (max_value 0)";

struct Building {
    namespace: String,
    name: String,
    attributes: BTreeMap<String, String>,
    taken: Taken,
    keys: Vec<String>,
    limits: Vec<Limit>,
    limit_from: Vec<String>,
    limit_names: Taken,
}

/// A limit's tests, as a `when` and the values left out.
#[derive(Default)]
struct Tests {
    when: BTreeMap<String, Matcher>,
    left_out: Vec<Override>,
}

/// Translates the limits of `file`; `envoy` adds the mapping for Limitador reached through
/// Envoy's rate-limit service (namespace = domain).
pub fn translate(
    file: &str,
    limits: &[LimitadorLimit],
    envoy: bool,
    report: &mut Report,
) -> Imported {
    let mut rules: Vec<Building> = Vec::new();
    let mut rule_names = Taken::default();
    let mut seen: Vec<(Identity, String)> = Vec::new();
    for limit in limits {
        let mut conditions: Vec<String> = limit.conditions.iter().map(|c| c.0.clone()).collect();
        let mut variables: Vec<String> = limit.variables.iter().map(|v| v.0.clone()).collect();
        conditions.sort();
        variables.sort();
        let identity: Identity = (
            limit.namespace.clone(),
            limit.seconds,
            conditions,
            variables,
        );
        if let Some((_, first)) = seen.iter().find(|s| s.0 == identity) {
            report.lose(file, &limit.path, format!("the same namespace, seconds, conditions and variables as {first}: Limitador keeps one of them; the first is kept"));
            continue;
        }
        seen.push((identity, limit.path.clone()));
        let rule = match rules.iter().position(|r| r.namespace == limit.namespace) {
            Some(i) => i,
            None => {
                let name = names::rule(&[&limit.namespace], &mut rule_names);
                if name != limit.namespace {
                    report.lose(file, &format!("{}.namespace", limit.path), format!("the namespace {:?} is the rule `{name}` (rule names are letters, digits, `_`, `-` and `.`)", limit.namespace));
                }
                rules.push(Building {
                    namespace: limit.namespace.clone(),
                    name,
                    attributes: BTreeMap::new(),
                    taken: Taken::default(),
                    keys: Vec::new(),
                    limits: Vec::new(),
                    limit_from: Vec::new(),
                    limit_names: Taken::default(),
                });
                rules.len() - 1
            }
        };
        if let Some(l) = one_limit(file, limit, &mut rules[rule], report) {
            rules[rule].limits.push(l);
            rules[rule]
                .limit_from
                .push(format!("from {file}: {}", limit.path));
        }
    }
    let mut imported = Imported::default();
    for r in rules.iter().filter(|r| !r.limits.is_empty()) {
        if envoy {
            report.lose(file, "", format!(
                "namespace {:?}: Limitador reads the entries its limits name from any descriptor; Sluice's mapping matches a descriptor with exactly the entries ({}), in this order: make `descriptor` list what your Envoy route sends",
                r.namespace, r.keys.join(", ")));
            imported.envoy.push((
                r.namespace.clone(),
                vec![DescriptorMapping {
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
                        .attributes
                        .iter()
                        .filter(|(k, a)| k != a)
                        .map(|(k, a)| (k.clone(), a.clone()))
                        .collect(),
                }],
            ));
        }
    }
    if !limits.is_empty() {
        report.lose(file, "", "Limitador starts a counter's window at its first request; Sluice's fixed windows start at whole multiples of their length, so counts near a window's edge differ");
    }
    imported.rules = rules
        .into_iter()
        .filter(|r| !r.limits.is_empty())
        .map(|b| ImportedRule {
            from: format!("Limitador namespace {:?}", b.namespace),
            name: b.name,
            rule: Rule::new(b.limits),
            limit_from: b.limit_from,
        })
        .collect();
    imported
}

fn one_limit(
    file: &str,
    limit: &LimitadorLimit,
    rule: &mut Building,
    report: &mut Report,
) -> Option<Limit> {
    if limit.seconds >= 28 * 86_400 && limit.seconds <= MAX_WINDOW.as_secs() {
        report.note(
            file,
            &format!("{}.seconds", limit.path),
            format!(
                "{} seconds is a window of {:.1} days, not a calendar month or year, and is imported as such; for calendar periods write a quota (`quota: N, period: month`)",
                limit.seconds,
                limit.seconds as f64 / 86_400.0
            ),
        );
    }
    let mut lose = |path: &str, message: String| report.lose(file, path, message);
    let window = Duration::from_secs(limit.seconds);
    if limit.seconds == 0 || window > MAX_WINDOW {
        lose(
            &format!("{}.seconds", limit.path),
            format!(
                "{} seconds is not a window Sluice counts in (1 s to 366 days); the limit is left out",
                limit.seconds
            ),
        );
        return None;
    }
    if limit.max_value > MAX_COUNT {
        lose(
            &format!("{}.max_value", limit.path),
            format!(
                "{} is above the {MAX_COUNT} a Sluice rate may count; imported as {MAX_COUNT}",
                limit.max_value
            ),
        );
    }
    let mut tests = Vec::new();
    for (src, path) in &limit.conditions {
        match expression::condition(src) {
            Ok(t) => tests.extend(t.into_iter().map(|t| (t, path.clone()))),
            Err(why) => {
                lose(path, format!("{src:?}: {why}; the limit is left out"));
                return None;
            }
        }
    }
    let mut variables = Vec::new();
    for (src, path) in &limit.variables {
        match expression::variable(src) {
            Ok(e) => variables.push((e, path.clone())),
            Err(why) => {
                lose(path, format!("{src:?}: {why}; the limit is left out"));
                return None;
            }
        }
    }
    let entries = tests
        .iter()
        .map(|(t, p)| (t.entry(), p))
        .chain(variables.iter().map(|(e, p)| (e, p)));
    for (entry, path) in entries {
        if entry.descriptor != 0 {
            lose(
                path,
                format!(
                    "reads descriptors[{}]: Sluice decides each descriptor on its own, so only descriptors[0] has a Sluice form; the limit is left out",
                    entry.descriptor
                ),
            );
            return None;
        }
        if entry.legacy {
            lose(
                path,
                format!(
                    "`{}` is read as the entry descriptors[0]['{}'], as Limitador read it before CEL conditions",
                    entry.key, entry.key
                ),
            );
        }
    }
    let mut attribute = |entry: &Entry, report: &mut Report| -> String {
        if let Some(a) = rule.attributes.get(&entry.key) {
            return a.clone();
        }
        let a = names::attribute(&entry.key, &mut rule.taken);
        if a != entry.key {
            report.lose(
                file,
                &limit.path,
                format!(
                    "the entry {:?} is the attribute `{a}` (attribute names are a-z, 0-9 and _)",
                    entry.key
                ),
            );
        }
        rule.attributes.insert(entry.key.clone(), a.clone());
        rule.keys.push(entry.key.clone());
        a
    };
    let mut out = Tests::default();
    for (test, path) in &tests {
        let attr = attribute(test.entry(), report);
        if let Err(why) = out.add(&attr, test) {
            report.lose(file, path, format!("{why}; the limit is left out"));
            return None;
        }
    }
    let mut by = Vec::new();
    for (entry, _) in &variables {
        let attr = attribute(entry, report);
        out.when
            .entry(attr.clone())
            .or_insert(Matcher::Present(true));
        if !by.contains(&attr) {
            by.push(attr);
        }
    }
    if out
        .when
        .values()
        .any(|m| matches!(m, Matcher::OneOf(v) if v.is_empty()))
    {
        report.lose(
            file,
            &limit.path,
            "`in []` never holds: the limit never applies; left out",
        );
        return None;
    }
    // The window was checked above and the count is clamped: a rate can hold both.
    let rate = Rate::new(limit.max_value.clamp(1, MAX_COUNT), window).ok()?;
    let mut l = Limit::new(&[], rate, Algorithm::FixedWindow);
    l.by = by
        .into_iter()
        .map(|b| By {
            alternatives: vec![b],
        })
        .collect();
    l.name = Some(names::limit(
        &[limit
            .name
            .clone()
            .unwrap_or_else(|| format!("limit{}", limit.path.trim_matches(['[', ']'])))],
        &mut rule.limit_names,
    ));
    l.when = (!out.when.is_empty()).then_some(Condition(out.when));
    l.overrides = out.left_out;
    if limit.max_value == 0 {
        l.overrides
            .push(Override::deny(Condition::default(), DENY_MESSAGE));
    }
    Some(l)
}

impl Tests {
    /// Adds one test on `attr`: a positive test is the attribute's matcher; a negated one needs
    /// the attribute present and leaves the limit out for what it excludes.
    fn add(&mut self, attr: &str, test: &Test) -> Result<(), String> {
        let positive = match test {
            Test::Equals(_, v) => Matcher::Equals(v.clone()),
            Test::OneOf(_, v) => Matcher::OneOf(v.clone()),
            Test::Prefix(_, p) => Matcher::Prefix(p.clone()),
            Test::Present(_) => Matcher::Present(true),
            Test::Not(inner) => {
                if let Test::Present(_) = **inner {
                    return self.set(attr, Matcher::Present(false));
                }
                let excluded = match &**inner {
                    Test::Equals(_, v) => Matcher::Equals(v.clone()),
                    Test::OneOf(_, v) => Matcher::OneOf(v.clone()),
                    Test::Prefix(_, p) => Matcher::Prefix(p.clone()),
                    _ => return Err("a double negation has no Sluice form".into()),
                };
                self.set(attr, Matcher::Present(true))?;
                let when = Condition([(attr.to_string(), excluded)].into());
                if !self.left_out.iter().any(|o| when.implies(&o.when)) {
                    self.left_out.push(Override::unlimited(when));
                }
                return Ok(());
            }
        };
        self.set(attr, positive)
    }

    fn set(&mut self, attr: &str, matcher: Matcher) -> Result<(), String> {
        let Some(existing) = self.when.get(attr) else {
            self.when.insert(attr.to_string(), matcher);
            return Ok(());
        };
        let absent = Matcher::Present(false);
        match (existing, &matcher) {
            (e, m) if e == m => Ok(()),
            // Every positive test implies presence: the narrower one stays.
            (Matcher::Present(true), m) if *m != absent => {
                self.when.insert(attr.to_string(), matcher);
                Ok(())
            }
            (e, Matcher::Present(true)) if *e != absent => Ok(()),
            _ => Err(format!(
                "two tests on `{attr}` that one Sluice matcher cannot combine"
            )),
        }
    }
}
