//! A [`Condition`] compiled for checks: its tests in a flat list, its networks as integers.
//!
//! A condition is read on every check of a rule that has one, so what can be done once is done
//! when the rule is compiled: the tests leave the map they are written in for a slice, sets and
//! texts become boxed strings, and networks become `(address, mask)` integers, so that an IPv4
//! value is checked against them with a parse of a few dozen instructions (`parse_ipv4`, which
//! accepts exactly what [`std::net::Ipv4Addr`]'s parser accepts) instead of the general one.
//!
//! Invariant: [`CompiledCondition::holds`] answers what [`Condition::holds`] answers, for every
//! value (a test below holds the two together).

use std::net::IpAddr;

use ipnet::IpNet;

use super::Attributes;
use crate::model::{Condition, Matcher};

/// A condition ready for checks.
#[derive(Debug, Clone)]
pub(crate) struct CompiledCondition {
    tests: Box<[(Box<str>, Test)]>,
}

#[derive(Debug, Clone)]
enum Test {
    Equals(Box<str>),
    OneOf(Box<[Box<str>]>),
    Prefix(Box<str>),
    Present(bool),
    Cidr(Networks),
    Not(Box<Test>),
}

/// A `cidr` matcher's networks: IPv4 ones as integers for the common case, and all of them for
/// values that are networks or IPv6 addresses.
#[derive(Debug, Clone)]
struct Networks {
    v4: Box<[(u32, u32)]>,
    all: Box<[IpNet]>,
}

impl CompiledCondition {
    pub(crate) fn new(condition: &Condition) -> CompiledCondition {
        CompiledCondition {
            tests: condition
                .0
                .iter()
                .map(|(name, m)| (name.as_str().into(), Test::new(m)))
                .collect(),
        }
    }

    /// Whether every test holds for these attributes (an empty value counts as absent).
    #[inline]
    pub(crate) fn holds(&self, attrs: &(impl Attributes + ?Sized)) -> bool {
        self.tests
            .iter()
            .all(|(name, test)| test.holds(attrs.get(name).filter(|v| !v.is_empty())))
    }
}

impl Test {
    fn new(m: &Matcher) -> Test {
        match m {
            Matcher::Equals(v) => Test::Equals(v.as_str().into()),
            Matcher::OneOf(set) => Test::OneOf(set.iter().map(|v| v.as_str().into()).collect()),
            Matcher::Prefix(p) => Test::Prefix(p.as_str().into()),
            Matcher::Present(p) => Test::Present(*p),
            Matcher::Cidr(nets) => Test::Cidr(Networks {
                v4: nets
                    .iter()
                    .filter_map(|n| match n {
                        IpNet::V4(n) => Some((n.network().to_bits(), n.netmask().to_bits())),
                        IpNet::V6(_) => None,
                    })
                    .collect(),
                all: nets.as_slice().into(),
            }),
            Matcher::Not(inner) => Test::Not(Box::new(Test::new(inner))),
        }
    }

    #[inline]
    fn holds(&self, value: Option<&str>) -> bool {
        match self {
            Test::Equals(wanted) => value == Some(&**wanted),
            Test::OneOf(set) => value.is_some_and(|v| set.iter().any(|s| **s == *v)),
            Test::Prefix(prefix) => value.is_some_and(|v| v.starts_with(&**prefix)),
            Test::Present(present) => value.is_some() == *present,
            Test::Cidr(nets) => value.is_some_and(|v| nets.contain(v)),
            Test::Not(inner) => !inner.holds(value),
        }
    }
}

impl Networks {
    fn contain(&self, value: &str) -> bool {
        if let Some(addr) = parse_ipv4(value) {
            return self.v4.iter().any(|&(net, mask)| addr & mask == net);
        }
        if let Ok(addr) = value.parse::<IpAddr>() {
            return self.all.iter().any(|n| n.contains(&addr));
        }
        match value.parse::<IpNet>() {
            Ok(net) => self.all.iter().any(|n| n.contains(&net)),
            Err(_) => false,
        }
    }
}

/// A dotted-quad IPv4 address as an integer: four decimal octets of 1 to 3 digits, each at most
/// 255 and without a leading zero — what `Ipv4Addr::from_str` accepts.
#[inline]
fn parse_ipv4(text: &str) -> Option<u32> {
    let bytes = text.as_bytes();
    if bytes.len() > 15 {
        return None;
    }
    let (mut addr, mut octet, mut digits, mut dots) = (0u32, 0u32, 0u8, 0u8);
    for &b in bytes {
        match b {
            b'0'..=b'9' => {
                if digits > 0 && octet == 0 {
                    return None;
                }
                octet = octet * 10 + u32::from(b - b'0');
                digits += 1;
                if octet > 255 {
                    return None;
                }
            }
            b'.' if digits > 0 && dots < 3 => {
                addr = addr << 8 | octet;
                (octet, digits, dots) = (0, 0, dots + 1);
            }
            _ => return None,
        }
    }
    (dots == 3 && digits > 0).then_some(addr << 8 | octet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ipv4_parse_accepts_what_std_accepts() {
        let cases = [
            "198.51.100.7",
            "0.0.0.0",
            "255.255.255.255",
            "256.1.1.1",
            "01.2.3.4",
            "1.2.3.04",
            "1.2.3",
            "1.2.3.4.5",
            "1..2.3",
            ".1.2.3",
            "1.2.3.",
            "1.2.3.4 ",
            "",
            "1.2.3.999",
            "10.0.0.0",
            "2001:db8::1",
            "1.2.3.4/24",
            "0.0.0.00",
            "1234.1.1.1",
        ];
        for case in cases {
            let std = case.parse::<std::net::Ipv4Addr>().ok().map(u32::from);
            assert_eq!(parse_ipv4(case), std, "{case:?}");
        }
        for a in (0u32..=255).step_by(17) {
            let text = format!("{a}.{}.{a}.{}", 255 - a, a / 3);
            let std = text.parse::<std::net::Ipv4Addr>().ok().map(u32::from);
            assert_eq!(parse_ipv4(&text), std, "{text}");
        }
    }

    #[test]
    fn compiled_conditions_hold_as_the_model_does() {
        let condition: Condition = serde_json::from_str(
            r#"{"ip": {"cidr": ["203.0.113.0/24", "10.0.0.0/8", "2001:db8::/32"]},
                "plan": {"not": ["a", "b"]}, "path": {"prefix": "/x"}, "m": {"present": false}}"#,
        )
        .unwrap();
        let compiled = CompiledCondition::new(&condition);
        let ips = [
            "203.0.113.1",
            "203.0.114.1",
            "10.255.0.1",
            "11.0.0.1",
            "2001:db8::5",
            "2001:db9::5",
            "2001:db8:1:2::/64",
            "10.1.0.0/16",
            "x",
            "",
        ];
        for ip in ips {
            for plan in ["a", "c", ""] {
                for m in ["", "1"] {
                    let attrs = [("ip", ip), ("plan", plan), ("path", "/xy"), ("m", m)];
                    assert_eq!(compiled.holds(&attrs), condition.holds(&attrs), "{attrs:?}");
                }
            }
        }
    }
}
