//! `Condition` and `Matcher`: the declarative tests a rule's, a limit's or an override's `when`
//! makes on a request's attributes.
//!
//! A condition is a map of attribute name → matcher, and holds when every matcher holds (an
//! empty map always holds). Matchers are written as YAML values: `"POST"` (equality),
//! `[a, b]` (one of), `{ prefix: "/api/" }`, `{ present: true }`, `{ cidr: ["10.0.0.0/8"] }`,
//! `{ not: <matcher> }`. An empty value counts as absent, as it does for identities.
//!
//! Invariants: everything a matcher needs is parsed when the rule is read (networks are
//! [`IpNet`]s, never reparsed per check); a check allocates nothing and never fails: a value that
//! is not an address is simply outside every network. Sets and networks are bounded
//! ([`MAX_MATCHER_ITEMS`]).

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::de::{self, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::{By, ModelError};
use crate::limiter::Attributes;

/// The most values of a set, or networks of a `cidr`, one matcher may list.
pub const MAX_MATCHER_ITEMS: usize = 10_000;

/// Attribute name → matcher; holds when every matcher holds (an empty map always holds).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[cfg_attr(feature = "schema", schemars(example = serde_json::json!({ "method": "POST" })))]
#[serde(transparent)]
pub struct Condition(pub BTreeMap<String, Matcher>);

/// A test on one attribute's value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// The value is exactly this.
    Equals(String),
    /// The value is one of these.
    OneOf(Vec<String>),
    /// The value starts with this.
    Prefix(String),
    /// The attribute is present (`true`) or absent (`false`).
    Present(bool),
    /// The value is an address (or a network, as the middleware groups IPv6 clients) inside one
    /// of these networks.
    Cidr(Vec<IpNet>),
    /// The inner matcher does not hold.
    Not(Box<Matcher>),
}

impl Condition {
    /// Whether every matcher holds for these attributes.
    #[inline]
    pub fn holds(&self, attrs: &(impl Attributes + ?Sized)) -> bool {
        self.0
            .iter()
            .all(|(name, m)| m.holds(attrs.get(name).filter(|v| !v.is_empty())))
    }

    /// Checks attribute names and every matcher.
    pub fn validate(&self) -> Result<(), ModelError> {
        for (name, matcher) in &self.0 {
            if name.contains('|') || By::parse(name).is_err() {
                return Err(ModelError::new(
                    name.clone(),
                    format!("`{name}`: attribute names are 1 to 64 characters of a-z, 0-9 and _"),
                ));
            }
            matcher.validate().map_err(|e| e.within(name))?;
        }
        Ok(())
    }

    /// Whether every request this condition holds for is also one `other` holds for (so an
    /// override after one with `other` could never be reached). Exact for the cases it answers
    /// `true`; `false` means "not shown", never "shown not to".
    pub fn implies(&self, other: &Condition) -> bool {
        other
            .0
            .iter()
            .all(|(name, wanted)| self.0.get(name).is_some_and(|mine| mine.implies(wanted)))
    }
}

impl Matcher {
    /// Whether the matcher holds for this value (`None`: the attribute is absent).
    #[inline]
    pub fn holds(&self, value: Option<&str>) -> bool {
        match self {
            Matcher::Equals(wanted) => value == Some(wanted.as_str()),
            Matcher::OneOf(set) => value.is_some_and(|v| set.iter().any(|s| s == v)),
            Matcher::Prefix(prefix) => value.is_some_and(|v| v.starts_with(prefix.as_str())),
            Matcher::Present(present) => value.is_some() == *present,
            Matcher::Cidr(nets) => value.is_some_and(|v| in_networks(nets, v)),
            Matcher::Not(inner) => !inner.holds(value),
        }
    }

    fn validate(&self) -> Result<(), ModelError> {
        match self {
            Matcher::OneOf(set) if set.is_empty() => {
                Err(ModelError::new("", "an empty set never holds"))
            }
            Matcher::OneOf(set) if set.len() > MAX_MATCHER_ITEMS => Err(ModelError::new(
                "",
                format!("{} values; at most {MAX_MATCHER_ITEMS}", set.len()),
            )),
            Matcher::Cidr(nets) if nets.is_empty() => {
                Err(ModelError::new("cidr", "no network: it would never hold"))
            }
            Matcher::Cidr(nets) if nets.len() > MAX_MATCHER_ITEMS => Err(ModelError::new(
                "cidr",
                format!("{} networks; at most {MAX_MATCHER_ITEMS}", nets.len()),
            )),
            Matcher::Not(inner) => inner.validate().map_err(|e| e.within("not")),
            _ => Ok(()),
        }
    }

    /// Whether every value this matcher holds for, `other` holds for too (see
    /// [`Condition::implies`]).
    fn implies(&self, other: &Matcher) -> bool {
        let values = |m: &Matcher| -> Option<Vec<String>> {
            match m {
                Matcher::Equals(v) => Some(vec![v.clone()]),
                Matcher::OneOf(set) => Some(set.clone()),
                _ => None,
            }
        };
        if let Some(mine) = values(self) {
            return mine.iter().all(|v| other.holds(Some(v)));
        }
        match (self, other) {
            (_, Matcher::Present(true)) => {
                !matches!(self, Matcher::Present(false) | Matcher::Not(_))
            }
            (Matcher::Present(a), Matcher::Present(b)) => a == b,
            (Matcher::Prefix(a), Matcher::Prefix(b)) => a.starts_with(b.as_str()),
            (Matcher::Cidr(mine), Matcher::Cidr(theirs)) => mine
                .iter()
                .all(|net| theirs.iter().any(|t| t.contains(net))),
            (Matcher::Not(a), Matcher::Not(b)) => b.implies(a),
            _ => self == other,
        }
    }
}

/// Whether `value`, an address or a network (`2001:db8:1:2::/64`), lies inside one of `nets`.
fn in_networks(nets: &[IpNet], value: &str) -> bool {
    if let Ok(addr) = value.parse::<IpAddr>() {
        return nets.iter().any(|n| n.contains(&addr));
    }
    match value.parse::<IpNet>() {
        Ok(net) => nets.iter().any(|n| n.contains(&net)),
        Err(_) => false,
    }
}

impl Serialize for Matcher {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = match self {
            Matcher::Equals(v) => return s.serialize_str(v),
            Matcher::OneOf(set) => return set.serialize(s),
            _ => s.serialize_map(Some(1))?,
        };
        match self {
            Matcher::Prefix(p) => map.serialize_entry("prefix", p)?,
            Matcher::Present(p) => map.serialize_entry("present", p)?,
            Matcher::Cidr(nets) => {
                let texts: Vec<String> = nets.iter().map(ToString::to_string).collect();
                map.serialize_entry("cidr", &texts)?;
            }
            Matcher::Not(inner) => map.serialize_entry("not", inner.as_ref())?,
            Matcher::Equals(_) | Matcher::OneOf(_) => {}
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Matcher {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Matcher, D::Error> {
        d.deserialize_any(MatcherVisitor)
    }
}

struct MatcherVisitor;

/// A scalar written as a value to compare: `POST`, `42`, `true` all compare as text.
struct Text(String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Text, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Text;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a text, number or boolean value")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Text, E> {
                Ok(Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

impl<'de> Visitor<'de> for MatcherVisitor {
    type Value = Matcher;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(
            "a value, a list of values, or one of { prefix: .. }, { present: true|false }, \
             { cidr: [..] }, { not: .. }",
        )
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Matcher, E> {
        Ok(Matcher::Equals(v.to_string()))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Matcher, E> {
        Ok(Matcher::Equals(v.to_string()))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Matcher, E> {
        Ok(Matcher::Equals(v.to_string()))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Matcher, E> {
        Ok(Matcher::Equals(v.to_string()))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Matcher, A::Error> {
        let mut set = Vec::new();
        while let Some(Text(v)) = seq.next_element()? {
            if set.len() == MAX_MATCHER_ITEMS {
                return Err(de::Error::custom(format!(
                    "more than {MAX_MATCHER_ITEMS} values"
                )));
            }
            set.push(v);
        }
        Ok(Matcher::OneOf(set))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Matcher, A::Error> {
        let Some(key) = map.next_key::<String>()? else {
            return Err(de::Error::custom(
                "an empty matcher: write prefix, present, cidr or not",
            ));
        };
        let matcher = match key.as_str() {
            "prefix" => Matcher::Prefix(map.next_value::<Text>()?.0),
            "present" => Matcher::Present(map.next_value()?),
            "cidr" => {
                let texts: OneOrMany = map.next_value()?;
                let nets = texts
                    .0
                    .iter()
                    .map(|t| parse_network(t).map_err(|e| de::Error::custom(format!("cidr: {e}"))))
                    .collect::<Result<Vec<IpNet>, A::Error>>()?;
                Matcher::Cidr(nets)
            }
            "not" => Matcher::Not(Box::new(map.next_value()?)),
            other => {
                return Err(de::Error::custom(format!(
                    "unknown matcher `{other}`: write prefix, present, cidr or not"
                )));
            }
        };
        if let Some(extra) = map.next_key::<String>()? {
            return Err(de::Error::custom(format!(
                "`{extra}` beside `{key}`: a matcher has one form; list several attributes \
                 in the condition instead"
            )));
        }
        Ok(matcher)
    }
}

/// `cidr: 10.0.0.0/8` or `cidr: [10.0.0.0/8, ...]`.
struct OneOrMany(Vec<String>);

impl<'de> Deserialize<'de> for OneOrMany {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<OneOrMany, D::Error> {
        match Matcher::deserialize(d)? {
            Matcher::Equals(v) => Ok(OneOrMany(vec![v])),
            Matcher::OneOf(set) => Ok(OneOrMany(set)),
            _ => Err(de::Error::custom("a network or a list of networks")),
        }
    }
}

/// A network as `cidr` lists it: `203.0.113.0/24`, `2001:db8::/32`, or a bare address (its
/// own network). Host bits must be zero, so a typo cannot silently widen or narrow a range.
pub fn parse_network(text: &str) -> Result<IpNet, String> {
    let net = match text.parse::<IpNet>() {
        Ok(net) => net,
        Err(_) => match text.parse::<IpAddr>() {
            Ok(addr) => IpNet::from(addr),
            Err(_) => {
                return Err(format!(
                    "`{text}` is not a network (write e.g. 203.0.113.0/24 or 2001:db8::/32)"
                ));
            }
        },
    };
    if net.trunc() != net {
        return Err(format!(
            "`{text}` has host bits set; the network is {}",
            net.trunc()
        ));
    }
    Ok(net)
}

#[cfg(test)]
mod tests;
