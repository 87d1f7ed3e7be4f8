//! Names in the Sluice file made from names in the source: attribute names (`[a-z0-9_]`, at
//! most 64), rule names (`[A-Za-z0-9_.-]`, at most 128) and limit names (`[A-Za-z0-9_-]`, at most
//! 64), each made unique among those already taken.
//!
//! Invariant: every name returned is one Sluice accepts, whatever the source's text (empty,
//! non-ASCII, over-long), and no two names handed out by one [`Taken`] are equal.

use std::collections::BTreeSet;

/// Names handed out so far in one scope (a rule's attributes, a file's rules, a rule's limits).
#[derive(Debug, Default)]
pub struct Taken(BTreeSet<String>);

impl Taken {
    /// `wanted` made unique in this scope (`name`, then `name_2`, `name_3`, ...), within `max`
    /// characters, and recorded.
    fn unique(&mut self, wanted: String, max: usize, separator: char) -> String {
        let mut name = wanted.clone();
        let mut n = 2;
        while self.0.contains(&name) {
            let suffix = format!("{separator}{n}");
            let keep = wanted.len().min(max - suffix.len());
            name = format!("{}{suffix}", &wanted[..keep]);
            n += 1;
        }
        self.0.insert(name.clone());
        name
    }
}

/// Keeps the characters `ok` allows (mapped through `map`), the others as `_`, at most `max`
/// characters; `fallback` when nothing is left.
fn clean(text: &str, max: usize, fallback: &str, ok: impl Fn(char) -> bool, lower: bool) -> String {
    let mut out: String = text
        .chars()
        .map(|c| if lower { c.to_ascii_lowercase() } else { c })
        .map(|c| if ok(c) { c } else { '_' })
        .take(max)
        .collect();
    if out.trim_matches('_').is_empty() {
        out = fallback.to_string();
    }
    out
}

/// An attribute name for a descriptor key or a Limitador variable (`req.method` → `req_method`,
/// `X-User` → `x_user`), unique in `taken`.
pub fn attribute(key: &str, taken: &mut Taken) -> String {
    let name = clean(
        key,
        60,
        "key",
        |c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_',
        true,
    );
    taken.unique(name, 64, '_')
}

/// A rule name from its parts (`edge.tenant.plan`), unique in `taken`.
pub fn rule(parts: &[&str], taken: &mut Taken) -> String {
    let joined = parts.join(".");
    let name = clean(
        &joined,
        120,
        "imported",
        |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'),
        false,
    );
    taken.unique(name, 128, '-')
}

/// A limit name from its parts (`tenant-plan_pro`), unique in `taken`.
pub fn limit(parts: &[String], taken: &mut Taken) -> String {
    let joined = parts.join("-");
    let name = clean(
        &joined,
        58,
        "limit",
        |c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'),
        false,
    );
    taken.unique(name, 64, '-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_what_sluice_accepts_and_unique() {
        let mut taken = Taken::default();
        assert_eq!(attribute("req.method", &mut taken), "req_method");
        assert_eq!(attribute("Req.Method", &mut taken), "req_method_2");
        assert_eq!(attribute("", &mut taken), "key");
        assert_eq!(attribute("ключ", &mut taken), "key_2");
        let long = attribute(&"a".repeat(200), &mut taken);
        assert!(sluice::model::By::parse(&long).is_ok());
        let mut rules = Taken::default();
        assert_eq!(
            rule(&["edge", "remote_address"], &mut rules),
            "edge.remote_address"
        );
        assert_eq!(
            rule(&["edge", "remote:address"], &mut rules),
            "edge.remote_address-2"
        );
        assert!(sluice::model::validate_rule_name(&rule(&[&"x".repeat(300)], &mut rules)).is_ok());
        let mut limits = Taken::default();
        assert_eq!(limit(&["plan_pro*".into()], &mut limits), "plan_pro_");
        assert_eq!(limit(&["plan_pro?".into()], &mut limits), "plan_pro_-2");
    }
}
