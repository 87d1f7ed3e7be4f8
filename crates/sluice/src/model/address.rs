//! `AddressGroup`: how an address-valued attribute is counted — by address, or by the network
//! around it (`2001:db8:1:2::/64`), whichever way in the address arrived.
//!
//! A limit's `group` maps attribute names of its `by` to prefix lengths; a limit that counts by
//! `ip` and says nothing groups it by [`AddressGroup::DEFAULT`] (IPv4 by address, IPv6 by /64,
//! as the middleware and forward-auth count peers), so the decision API and Envoy count an
//! IPv6 client as the middleware does. A value that is not an address is counted as it is.
//!
//! Invariants: grouping is idempotent (a network the middleware already formed, such as
//! `2001:db8:1:2::/64`, stays the same identity), and a value is only parsed when grouping
//! could change it (an IPv4 address at /32 is never parsed).

use std::net::IpAddr;

use ipnet::IpNet;
use serde::{Deserialize, Serialize};

use super::ModelError;

/// Prefix lengths an address-valued attribute is grouped by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AddressGroup {
    /// IPv4 addresses are counted by their network of this many bits (32: by address).
    #[serde(default = "ipv4_default")]
    pub ipv4: u8,
    /// IPv6 addresses are counted by their network of this many bits (128: by address).
    #[serde(default = "ipv6_default")]
    pub ipv6: u8,
}

fn ipv4_default() -> u8 {
    32
}

fn ipv6_default() -> u8 {
    64
}

/// The attribute a limit groups by [`AddressGroup::DEFAULT`] unless its `group` says otherwise.
pub const DEFAULT_ADDRESS_ATTRIBUTE: &str = "ip";

impl AddressGroup {
    /// IPv4 by address, IPv6 by /64.
    pub const DEFAULT: AddressGroup = AddressGroup { ipv4: 32, ipv6: 64 };

    /// Checks the prefix lengths.
    pub fn validate(&self) -> Result<(), ModelError> {
        if self.ipv4 > 32 {
            return Err(ModelError::new(
                "ipv4",
                format!("{} is not an IPv4 prefix length (0 to 32)", self.ipv4),
            ));
        }
        if self.ipv6 > 128 {
            return Err(ModelError::new(
                "ipv6",
                format!("{} is not an IPv6 prefix length (0 to 128)", self.ipv6),
            ));
        }
        Ok(())
    }

    /// The value to count `value` as, when grouping changes it: `2001:db8:1:2::/64` for an IPv6
    /// address at /64, the bare address at the full length. `None` keeps `value` as it is.
    #[inline]
    pub fn group(&self, value: &str) -> Option<String> {
        // IPv6 text has a ':' within its first 5 bytes (a group is at most 4 hex digits), IPv4
        // text none; at /32 only a network written with a longer prefix than asked could
        // change, and the middleware never writes IPv4 networks.
        let v6 = value.bytes().take(5).any(|b| b == b':');
        if !v6 && (self.ipv4 == 32 || !value.bytes().all(|b| b.is_ascii_digit() || b == b'.')) {
            return None;
        }
        let (addr, len) = match value.split_once('/') {
            Some((addr, len)) => (addr.parse::<IpAddr>().ok()?, len.parse::<u8>().ok()?),
            None => {
                let addr = value.parse::<IpAddr>().ok()?;
                (addr, if addr.is_ipv4() { 32 } else { 128 })
            }
        };
        let (full, wanted) = match addr {
            IpAddr::V4(_) => (32, self.ipv4),
            IpAddr::V6(_) => (128, self.ipv6),
        };
        let len = len.min(wanted);
        let net = IpNet::new(addr, len).ok()?.trunc();
        let text = if len == full {
            net.addr().to_string()
        } else {
            net.to_string()
        };
        (text != value).then_some(text)
    }
}

impl Default for AddressGroup {
    fn default() -> AddressGroup {
        AddressGroup::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipv6_is_grouped_by_its_64_and_ipv4_kept() {
        let g = AddressGroup::DEFAULT;
        assert_eq!(
            g.group("2001:db8:1:2:aaaa::9").as_deref(),
            Some("2001:db8:1:2::/64")
        );
        assert_eq!(g.group("2001:db8:1:2::/64"), None, "already grouped");
        assert_eq!(
            g.group("2001:db8:1:2::/80").as_deref(),
            Some("2001:db8:1:2::/64")
        );
        assert_eq!(g.group("203.0.113.9"), None);
        assert_eq!(g.group("not-an-address"), None);
        assert_eq!(g.group("a:b"), None, "not an address: counted as it is");
    }

    #[test]
    fn other_lengths() {
        let g = AddressGroup {
            ipv4: 24,
            ipv6: 128,
        };
        assert_eq!(g.group("203.0.113.9").as_deref(), Some("203.0.113.0/24"));
        assert_eq!(g.group("2001:db8::9"), None);
        assert_eq!(g.group("2001:db8::9/128"), Some("2001:db8::9".to_string()));
        assert!(AddressGroup { ipv4: 33, ipv6: 64 }.validate().is_err());
        assert!(AddressGroup { ipv4: 8, ipv6: 129 }.validate().is_err());
    }
}
