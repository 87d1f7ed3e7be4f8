//! A request's identity: from its attributes to the escaped text that names its counter, with
//! identity fallback and escaping.
//!
//! An identity is `name=value` per `by` entry, joined by `,` (`member=m1,promo_code=P7`), or `*`
//! for a global limit. Values made only of `[A-Za-z0-9._@+-]` and at most [`MAX_PLAIN_LEN`] bytes
//! are kept as they are (readable keys); any other value is replaced by `~` and the hex SHA-1 of
//! its bytes. `~` is not a plain character, so a hashed value never equals a plain one, and
//! neither can contain `{`, `}`, `:`, `,` or `=`: no value can break out of its key or collide
//! with another identity.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write;
use std::hash::BuildHasher;

use crate::model::{AddressGroup, AttributeNames, Name, same_bytes};

/// Longest value kept readable in keys; longer ones are hashed.
pub const MAX_PLAIN_LEN: usize = 64;

/// A request's identity values, by attribute name.
///
/// Implemented for maps and for slices of pairs, so a check needs no allocation:
/// ```
/// use sluice::Attributes;
/// let attrs = [("ip", "203.0.113.9"), ("member", "m1")];
/// assert_eq!(attrs.get("member"), Some("m1"));
/// ```
pub trait Attributes {
    /// The value of `name`, if the request carries it.
    fn get(&self, name: &str) -> Option<&str>;
}

impl<S: BuildHasher> Attributes for HashMap<String, String, S> {
    fn get(&self, name: &str) -> Option<&str> {
        HashMap::get(self, name).map(String::as_str)
    }
}

impl Attributes for BTreeMap<String, String> {
    fn get(&self, name: &str) -> Option<&str> {
        BTreeMap::get(self, name).map(String::as_str)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Attributes for [(K, V)] {
    // Names compared without `memcmp`: a check looks up each name a rule reads, along the list.
    #[inline]
    fn get(&self, name: &str) -> Option<&str> {
        self.iter()
            .find(|(k, _)| same_bytes(k.as_ref().as_bytes(), name.as_bytes()))
            .map(|(_, v)| v.as_ref())
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Attributes for [(K, V); N] {
    #[inline]
    fn get(&self, name: &str) -> Option<&str> {
        Attributes::get(self.as_slice(), name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> Attributes for Vec<(K, V)> {
    #[inline]
    fn get(&self, name: &str) -> Option<&str> {
        Attributes::get(self.as_slice(), name)
    }
}

/// Why an identity could not be built.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum IdentityError {
    /// None of a `by` entry's alternatives is present (non-empty).
    Missing(String),
    /// A value is longer than allowed.
    TooLong {
        /// The attribute.
        attribute: String,
        /// Its length.
        len: usize,
    },
}

/// Builds the escaped identity of a limit.
///
/// An empty value counts as absent, so fallback moves on to the next alternative.
pub(crate) fn identity(
    by: &[Vec<Name>],
    groups: &[(Name, AddressGroup)],
    attrs: &(impl Attributes + ?Sized),
    max_len: usize,
) -> Result<String, IdentityError> {
    // Room for a typical identity (`name=value`, a hashed value `~` and 40 hex digits): one
    // allocation where growing from empty took three.
    let mut identity = String::with_capacity(64);
    write_identity(by, groups, attrs, max_len, &mut identity)?;
    Ok(identity)
}

/// [`identity`] written into `out` (cleared first), so that a caller can reuse one buffer.
pub(crate) fn write_identity(
    by: &[Vec<Name>],
    groups: &[(Name, AddressGroup)],
    attrs: &(impl Attributes + ?Sized),
    max_len: usize,
    out: &mut String,
) -> Result<(), IdentityError> {
    out.clear();
    if by.is_empty() {
        out.push('*');
        return Ok(());
    }
    for alternatives in by {
        let (name, value) = alternatives
            .iter()
            .find_map(|name| attrs.get(name).filter(|v| !v.is_empty()).map(|v| (name, v)))
            .ok_or_else(|| IdentityError::Missing(alternatives.join("|")))?;
        if value.len() > max_len {
            return Err(IdentityError::TooLong {
                attribute: name.to_string(),
                len: value.len(),
            });
        }
        if !out.is_empty() {
            out.push(',');
        }
        out.push_str(name);
        out.push('=');
        // Only limits counting by an address attribute have groups: others test one length.
        if groups.is_empty() {
            push_escaped(out, value);
            continue;
        }
        match groups
            .iter()
            .find(|(attribute, _)| attribute == name)
            .and_then(|(_, group)| group.group(value))
        {
            Some(grouped) => push_escaped(out, &grouped),
            None => push_escaped(out, value),
        }
    }
    Ok(())
}

/// The attribute names an identity of a limit was built from (after fallback), e.g.
/// `["session"]`; none for the global identity `*`. Escaped values contain neither `,` nor `=`,
/// so this is exact.
#[inline]
pub(crate) fn attribute_names(by: &[Vec<Name>], identity: &str) -> AttributeNames {
    if let [alternatives] = by
        && let [name] = alternatives.as_slice()
    {
        return AttributeNames::one(name.clone());
    }
    if by.iter().all(|alternatives| alternatives.len() == 1) {
        // No fallback: the names are the limit's own.
        return by
            .iter()
            .map(|alternatives| alternatives[0].clone())
            .collect();
    }
    identity
        .split(',')
        .zip(by)
        .filter_map(|(part, alternatives)| {
            let (name, _) = part.split_once('=')?;
            alternatives.iter().find(|a| *a == name).cloned()
        })
        .collect()
}

/// Whether `value` is kept as it is in keys (else it is hashed).
pub(crate) fn is_plain(value: &str) -> bool {
    value.len() <= MAX_PLAIN_LEN
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'+' | b'-'))
}

/// Appends `value` as it appears in keys. Inlined at both of `write_identity`'s calls: a call
/// here was a tenth of a one-limit check on the memory store.
#[inline(always)]
fn push_escaped(out: &mut String, value: &str) {
    if is_plain(value) {
        out.push_str(value);
    } else {
        // Writing to a `String` cannot fail.
        let _ = write!(out, "~{}", sha1_smol::Sha1::from(value).digest());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::By;
    use std::borrow::Cow;

    /// A value as it appears in keys.
    fn escape(value: &str) -> Cow<'_, str> {
        let mut escaped = String::new();
        push_escaped(&mut escaped, value);
        Cow::Owned(escaped)
    }

    fn by(spec: &[&str]) -> Vec<Vec<Name>> {
        let names = |b: By| b.alternatives.iter().map(|a| a.as_str().into()).collect();
        spec.iter().map(|s| names(By::parse(s).unwrap())).collect()
    }

    #[test]
    fn falls_back_to_the_first_present_alternative() {
        let b = by(&["member|session|ip"]);
        let guest = [("session", "s1"), ("ip", "1.2.3.4")];
        assert_eq!(
            identity(&b, &[], &guest, 100).unwrap(),
            "session=s1".to_string()
        );
        assert_eq!(attribute_names(&b, "session=s1"), ["session"]);
        let anonymous = [("member", ""), ("ip", "1.2.3.4")];
        assert_eq!(identity(&b, &[], &anonymous, 100).unwrap(), "ip=1.2.3.4");
        assert_eq!(
            identity(&b, &[], &[("x", "y")], 100),
            Err(IdentityError::Missing("member|session|ip".into()))
        );
    }

    #[test]
    fn composite_and_global_identities() {
        let b = by(&["member", "promo_code"]);
        let attrs = [("promo_code", "P7"), ("member", "m1")];
        assert_eq!(
            identity(&b, &[], &attrs, 100).unwrap(),
            "member=m1,promo_code=P7"
        );
        assert_eq!(identity(&[], &[], &attrs, 100).unwrap(), "*");
    }

    #[test]
    fn hostile_values_cannot_break_out_or_collide() {
        let values = [
            "a:b",
            "{a}",
            "a}b{",
            "a,b",
            "a=b",
            "~abc",
            "a b",
            "é",
            "",
            &"x".repeat(10_240),
            &"x".repeat(10_241),
        ];
        let escaped: Vec<String> = values.iter().map(|v| escape(v).into_owned()).collect();
        for e in &escaped {
            assert!(!e.contains([':', '{', '}', ',', '=']), "{e}");
            assert!(e.len() <= MAX_PLAIN_LEN + 1);
        }
        let mut unique = escaped.clone();
        unique.sort();
        unique.dedup();
        assert_eq!(unique.len(), escaped.len());
        assert_ne!(escape("a,b=c"), escape("a"));
    }

    #[test]
    fn too_long_values_are_refused() {
        let b = by(&["ip"]);
        let long = "1".repeat(101);
        assert_eq!(
            identity(&b, &[], &[("ip", long.as_str())], 100),
            Err(IdentityError::TooLong {
                attribute: "ip".into(),
                len: 101
            })
        );
    }
}
