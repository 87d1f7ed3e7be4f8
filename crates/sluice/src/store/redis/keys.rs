//! Redis key names: `{prefix}:{rule}:{limit id}:{identity}:{part}`, and back.
//!
//! The identity sits inside a Redis Cluster hash tag (`{ip=1.2.3.4}`), so the three keys of one
//! identity — the algorithm's state (`:c`), the block (`:b`) and the violations (`:v`) — share a
//! slot and one script touches one slot. Rule names, limit ids and escaped identities never contain
//! `:`, `{` or `}` (see [`crate::limiter::keys`] and [`crate::model`]), so a key has exactly one
//! parse and a block key can be turned back into its [`LimitKey`].

use crate::store::LimitKey;

/// The part of an identity's state a key holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The algorithm's state (`:c`).
    Counter,
    /// The block lock / ban end (`:b`).
    Block,
    /// The remembered violations (`:v`).
    Violations,
}

impl Part {
    fn suffix(self) -> &'static str {
        match self {
            Part::Counter => "c",
            Part::Block => "b",
            Part::Violations => "v",
        }
    }
}

/// The key of one part of a limit key's state.
pub fn key(prefix: &str, k: &LimitKey, part: Part) -> String {
    format!(
        "{prefix}:{}:{}:{{{}}}:{}",
        k.rule,
        k.limit,
        k.identity,
        part.suffix()
    )
}

/// The three keys of a limit key, in script order (state, block, violations).
pub fn triple(prefix: &str, k: &LimitKey) -> [String; 3] {
    [
        key(prefix, k, Part::Counter),
        key(prefix, k, Part::Block),
        key(prefix, k, Part::Violations),
    ]
}

/// A `SCAN MATCH` pattern for the block keys of a rule. Glob characters in the prefix are escaped.
pub fn block_pattern(prefix: &str, rule: &str) -> String {
    let mut pattern = String::with_capacity(prefix.len() + rule.len() + 8);
    for c in prefix.chars().chain(":".chars()).chain(rule.chars()) {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push_str(":*:b");
    pattern
}

/// Parses a block key of `rule` back into its [`LimitKey`]; `None` for any other key.
pub fn parse_block_key(prefix: &str, rule: &str, key: &str) -> Option<LimitKey> {
    let rest = key
        .strip_prefix(prefix)?
        .strip_prefix(':')?
        .strip_prefix(rule)?
        .strip_prefix(':')?
        .strip_suffix("}:b")?;
    let (limit, identity) = rest.split_once(":{")?;
    let bad = |s: &str| s.is_empty() || s.contains([':', '{', '}']);
    if bad(limit) || bad(identity) {
        return None;
    }
    Some(LimitKey {
        rule: rule.into(),
        limit: limit.into(),
        identity: identity.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lk(identity: &str) -> LimitKey {
        LimitKey {
            rule: "login".into(),
            limit: "ip-gcra-1m".into(),
            identity: identity.into(),
        }
    }

    #[test]
    fn one_hash_tag_around_the_identity() {
        let [c, b, v] = triple("sluice", &lk("ip=1.2.3.4"));
        assert_eq!(c, "sluice:login:ip-gcra-1m:{ip=1.2.3.4}:c");
        assert_eq!(b, "sluice:login:ip-gcra-1m:{ip=1.2.3.4}:b");
        assert_eq!(v, "sluice:login:ip-gcra-1m:{ip=1.2.3.4}:v");
    }

    #[test]
    fn block_keys_parse_back() {
        for identity in ["ip=1.2.3.4", "*", "member=m1,promo_code=P7", "ip=~ab12"] {
            let k = lk(identity);
            let b = key("sluice", &k, Part::Block);
            assert_eq!(parse_block_key("sluice", "login", &b), Some(k));
        }
        let c = key("sluice", &lk("ip=1"), Part::Counter);
        assert_eq!(parse_block_key("sluice", "login", &c), None);
        assert_eq!(
            parse_block_key("sluice", "logins", "sluice:login:x:{a}:b"),
            None
        );
        assert_eq!(
            parse_block_key("sluice", "login", "sluice:login:x:y:{a}:b"),
            None
        );
    }

    #[test]
    fn patterns_escape_glob_characters() {
        assert_eq!(block_pattern("sluice", "login"), "sluice:login:*:b");
        assert_eq!(block_pattern("a*[b]", "r"), "a\\*\\[b\\]:r:*:b");
    }
}
