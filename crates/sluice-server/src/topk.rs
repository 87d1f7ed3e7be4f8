//! The most denied identities per rule, with bounded memory and bounded metric cardinality.
//!
//! Each rule keeps a Space-Saving summary of `2K` counters: an identity already tracked is
//! incremented; a new one replaces the smallest counter and inherits its count (so counts are
//! upper bounds, overestimated by at most the count inherited). Any identity denied more than
//! `total / 2K` times is guaranteed to be tracked. `/metrics` exports the `K` largest per rule as
//! the gauge `sluice_top_denied_identities{rule, identity}`, rendered fresh on every scrape so
//! identities that drop out of the top leave no stale series behind. Rules removed by a reload
//! are forgotten ([`TopDenied::retain`]).
//!
//! `/metrics` is unauthenticated, so identities are not shown as they are by default: the label
//! is a stable short hash of `name=value,...` ([`IdentityLabels::Hashed`]: the first 12 hex
//! digits of its SHA-1, which an operator computes from a log line with
//! `printf %s 'ip=203.0.113.9' | sha1sum | cut -c1-12`), the raw text, or no series at all.
//! Counters are kept by the identity's text (its values are bounded by the limiter's
//! `max_attribute_len`), and hashed only when shown: a denial costs no hashing and, once a
//! rule's summary is full, no allocation but its identity's text.

use std::borrow::Cow;
use std::fmt::Write;
use std::sync::Mutex;

use crate::config::IdentityLabels;
use sluice::Decision;
use sluice::model::Name;

/// How many identities per rule `/metrics` shows.
pub const K: usize = 10;

/// Longest identity label kept (longer ones are cut at a character boundary and marked `…`).
const MAX_LABEL: usize = 128;

/// One tracked identity: its key (see [`TopDenied::key_into`]) and its count.
#[derive(Debug)]
struct Counter {
    key: String,
    count: u64,
}

/// Space-Saving counters for one rule. There are at most `2K`, so a pass over them finds the
/// identity or the smallest counter as fast as a hash lookup would, and a replaced counter's key
/// buffer is reused: once the summary is full, counting a denial allocates nothing.
#[derive(Debug, Default)]
struct Summary {
    counters: Vec<Counter>,
}

impl Summary {
    fn add(&mut self, key: &str, capacity: usize) {
        if let Some(c) = self.counters.iter_mut().find(|c| c.key == key) {
            c.count += 1;
            return;
        }
        if self.counters.len() < capacity {
            self.counters.push(Counter {
                key: key.to_string(),
                count: 1,
            });
            return;
        }
        // The smallest counter (ties: the first) passes to the new identity, which inherits its
        // count. Ties are the rule while many identities are denied once each: settled by
        // position, they cost no key comparisons.
        let smallest = self.counters.iter_mut().min_by_key(|c| c.count);
        if let Some(c) = smallest {
            c.key.clear();
            c.key.push_str(key);
            c.count += 1;
        }
    }

    /// The `k` largest, largest first (ties by key, for stable output).
    fn top(&self, k: usize) -> Vec<(&str, u64)> {
        let mut all: Vec<(&str, u64)> = self
            .counters
            .iter()
            .map(|c| (c.key.as_str(), c.count))
            .collect();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        all.truncate(k);
        all
    }
}

/// Each rule's summary, by rule name.
type Rules = hashbrown::HashMap<String, Summary, foldhash::fast::RandomState>;

/// The summaries, and the text of the identity being counted, kept so that a denial allocates
/// nothing once its rule's summary is full.
#[derive(Debug, Default)]
struct Tracked {
    rules: Rules,
    key: String,
}

/// Top denied identities of every rule.
#[derive(Debug)]
pub struct TopDenied {
    k: usize,
    labels: IdentityLabels,
    tracked: Mutex<Tracked>,
}

impl TopDenied {
    /// Tracks the `k` most denied identities per rule, labelled as `labels` says.
    pub fn new(k: usize, labels: IdentityLabels) -> TopDenied {
        TopDenied {
            k,
            labels,
            tracked: Mutex::new(Tracked::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Tracked> {
        // A panic while holding the lock cannot leave a summary inconsistent (each update is
        // one counter), so a poisoned lock is still usable.
        self.tracked.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Counts the identities of the limits that denied this decision (once each: limits that
    /// count by the same attributes share one).
    pub fn record(&self, decision: &Decision, attributes: &[(&str, impl AsRef<str>)]) {
        if self.labels == IdentityLabels::Off {
            return;
        }
        let mut tracked = self.lock();
        let Tracked { rules, key } = &mut *tracked;
        let summary = rules.entry_ref(decision.rule.as_str()).or_default();
        let denied = || decision.limits.iter().filter(|l| !l.allowed);
        for (i, limit) in denied().enumerate() {
            if denied().take(i).any(|l| l.attributes == limit.attributes) {
                continue;
            }
            self.key_into(&limit.attributes, attributes, key);
            summary.add(key, 2 * self.k);
        }
    }

    /// What tells a tracked identity apart: `name=value,...` of the attributes a limit counted
    /// by (`*` for a global limit), cut as its label will be when labels are raw. Hashed labels
    /// are computed when shown, not on every denial.
    fn key_into(&self, names: &[Name], attributes: &[(&str, impl AsRef<str>)], out: &mut String) {
        out.clear();
        if names.is_empty() {
            out.push('*');
        }
        for (i, name) in names.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let value = attributes
                .iter()
                .find(|(n, _)| n == name)
                .map_or("", |(_, v)| v.as_ref());
            out.push_str(name);
            out.push('=');
            out.push_str(value);
        }
        if self.labels == IdentityLabels::Raw {
            shorten(out);
        }
    }

    /// The label `/metrics` and the dashboard show for a key.
    fn label<'a>(&self, key: &'a str) -> Cow<'a, str> {
        match self.labels {
            IdentityLabels::Hashed => Cow::Owned(hashed(key)),
            IdentityLabels::Raw | IdentityLabels::Off => Cow::Borrowed(key),
        }
    }

    /// Forgets rules that are no longer in force.
    pub fn retain(&self, in_force: impl Fn(&str) -> bool) {
        self.lock().rules.retain(|rule, _| in_force(rule));
    }

    /// The `k` most denied identities of a rule, largest first.
    pub fn top(&self, rule: &str) -> Vec<(String, u64)> {
        self.lock().rules.get(rule).map_or_else(Vec::new, |s| {
            s.top(self.k)
                .into_iter()
                .map(|(key, n)| (self.label(key).into_owned(), n))
                .collect()
        })
    }

    /// Appends the gauge in Prometheus text format.
    pub fn render_into(&self, out: &mut String) {
        if self.labels == IdentityLabels::Off {
            return;
        }
        let tracked = self.lock();
        let rules = &tracked.rules;
        let mut names: Vec<&String> = rules.keys().collect();
        names.sort();
        let doc = crate::metrics::TOP_DENIED;
        let _ = writeln!(out, "# HELP {} {}", doc.name, doc.help);
        let _ = writeln!(out, "# TYPE {} gauge", doc.name);
        for rule in names {
            for (key, count) in rules[rule].top(self.k) {
                let _ = writeln!(
                    out,
                    "sluice_top_denied_identities{{rule=\"{}\",identity=\"{}\"}} {count}",
                    escape(rule),
                    escape(&self.label(key))
                );
            }
        }
    }
}

/// The first 12 hex digits of the SHA-1 of an identity's text.
fn hashed(identity: &str) -> String {
    let mut hex = sha1_smol::Sha1::from(identity.as_bytes())
        .digest()
        .to_string();
    hex.truncate(12);
    hex
}

/// A raw label, cut to [`MAX_LABEL`] bytes.
fn shorten(label: &mut String) {
    if label.len() > MAX_LABEL {
        let mut cut = MAX_LABEL;
        while !label.is_char_boundary(cut) {
            cut -= 1;
        }
        label.truncate(cut);
        label.push('…');
    }
}

/// Escapes a Prometheus label value.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice::LimitDecision;

    fn denied(rule: &str, identity: &[&str]) -> Decision {
        let mut d = Decision::pass_through(rule, "test");
        d.allowed = false;
        // `LimitDecision` is `#[non_exhaustive]`: built the way a client reads one.
        let limit: LimitDecision = serde_json::from_value(serde_json::json!({
            "id": "l", "identity": identity, "algorithm": "gcra", "allowed": false, "limit": 1,
            "window_ms": 1000, "remaining": 0, "reset_after_ms": 0, "retry_after_ms": 1,
            "violations": 0, "warning": false, "delay_ms": 0, "shadow": false,
        }))
        .expect("a limit's decision");
        d.limits.push(limit);
        d
    }

    #[test]
    fn heavy_hitters_stay_and_cardinality_is_bounded() {
        let top = TopDenied::new(3, IdentityLabels::Raw);
        for i in 0..1000 {
            let ip = if i % 2 == 0 {
                "1.1.1.1".to_string()
            } else {
                format!("10.0.0.{i}")
            };
            top.record(&denied("login", &["ip"]), &[("ip", ip)]);
        }
        let best = top.top("login");
        assert_eq!(best.len(), 3);
        assert_eq!(best[0].0, "ip=1.1.1.1");
        assert!(best[0].1 >= 500);
        assert!(top.lock().rules["login"].counters.len() <= 6);
        let mut text = String::new();
        top.render_into(&mut text);
        assert_eq!(
            text.lines().filter(|l| l.starts_with("sluice_top")).count(),
            3
        );
        assert!(
            text.contains("sluice_top_denied_identities{rule=\"login\",identity=\"ip=1.1.1.1\"}")
        );
    }

    #[test]
    fn labels_are_escaped_cut_and_rules_forgotten() {
        let top = TopDenied::new(2, IdentityLabels::Raw);
        top.record(&denied("a", &["id"]), &[("id", "x\"y\\z\n".to_string())]);
        top.record(&denied("b", &[]), &[] as &[(&str, &str)]);
        top.record(&denied("c", &["id"]), &[("id", "é".repeat(100))]);
        let mut text = String::new();
        top.render_into(&mut text);
        assert!(text.contains("identity=\"id=x\\\"y\\\\z\\n\""), "{text}");
        assert!(text.contains("rule=\"b\",identity=\"*\""));
        assert!(top.top("c")[0].0.ends_with('…'));
        top.retain(|rule| rule == "a");
        assert!(top.top("b").is_empty());
        assert_eq!(top.top("a").len(), 1);
    }

    #[test]
    fn identities_are_hashed_by_default_or_not_shown() {
        let top = TopDenied::new(2, IdentityLabels::default());
        top.record(&denied("a", &["ip"]), &[("ip", "203.0.113.9".to_string())]);
        // printf %s 'ip=203.0.113.9' | sha1sum | cut -c1-12
        let expected = &sha1_smol::Sha1::from("ip=203.0.113.9").digest().to_string()[..12];
        assert_eq!(top.top("a"), [(expected.to_string(), 1)]);
        let off = TopDenied::new(2, IdentityLabels::Off);
        off.record(&denied("a", &["ip"]), &[("ip", "203.0.113.9".to_string())]);
        let mut text = String::new();
        off.render_into(&mut text);
        assert_eq!(text, "");
    }

    #[test]
    fn limits_that_count_by_the_same_attributes_count_once() {
        let top = TopDenied::new(2, IdentityLabels::Raw);
        let mut d = denied("r", &["ip"]);
        let by_ip = d.limits[0].clone();
        let mut by_user = by_ip.clone();
        by_user.attributes = [Name::from("user")].into_iter().collect();
        d.limits.extend([by_ip, by_user]);
        top.record(&d, &[("ip", "1.2.3.4"), ("user", "u")]);
        assert_eq!(
            top.top("r"),
            [("ip=1.2.3.4".to_string(), 1), ("user=u".to_string(), 1)]
        );
    }
}
