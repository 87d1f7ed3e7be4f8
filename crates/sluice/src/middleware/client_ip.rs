//! Client addresses: the TCP peer ([`PeerIp`]) and the client behind trusted proxies
//! ([`ClientIp`]).
//!
//! This is security code. A forwarding header is whatever the previous hop wrote, so:
//! - it is read only when the TCP peer is in the trusted networks: a client that connects
//!   directly and sends `X-Forwarded-For` keeps its own address as identity;
//! - the chain is walked from the right (the hop nearest to us, written by our own proxy) to the
//!   left, skipping addresses in the trusted networks; the first untrusted address is the
//!   client. Entries to its left were written by the client and are ignored, so a forged
//!   leftmost entry changes nothing;
//! - an entry that names no address (`unknown`, `_hidden`, a malformed `Forwarded` element, an
//!   unclosed quote, a bad port) stops the walk: the client is then the last address walked, a
//!   trusted hop that cannot vouch for what lies beyond it. `Forwarded` lines are parsed from the
//!   right, so nothing a client writes can change how the element its proxy appended is read
//!   (see `forwarded`); `X-Real-IP` with more than one value names nothing;
//! - exactly one header is honoured (by default `X-Forwarded-For`): the one the proxy in front
//!   writes. Honouring several would let a client send the header the proxy does not manage.
//!
//! Addresses are canonical: an IPv4-mapped IPv6 address (`::ffff:192.0.2.1`, as dual-stack
//! sockets report IPv4 peers) is the IPv4 address, both for the trust check and as the
//! attribute's value, so one client has one identity whichever socket it came through.
//!
//! An IPv4 client is counted by its address. An IPv6 client is counted by its network, by
//! default its /64 (`2001:db8:1:2::/64`): one subscriber or host usually holds a whole /64 and
//! can pick any of its 2^64 addresses, so counting by address would let it start over at will.
//! [`ClientIp::ipv6_prefix`] and [`PeerIp::ipv6_prefix`] change the length (128: by address).

use std::net::{IpAddr, SocketAddr};

use axum::extract::ConnectInfo;
use http::HeaderMap;
use http::header::HeaderName;
use http::request::Parts;
use ipnet::IpNet;

use super::extract::{AttributeList, Extract, ExtractError};
use super::forwarded::{forwarded_hops, list_hops, real_ip_hops};

/// The TCP peer's address as recorded by axum (`ConnectInfo<SocketAddr>`).
fn peer(parts: &Parts) -> Result<IpAddr, ExtractError> {
    parts
        .extensions
        .get::<ConnectInfo<SocketAddr>>()
        .map(|ConnectInfo(addr)| addr.ip().to_canonical())
        .ok_or_else(|| {
            ExtractError::misconfigured(
                "no peer address recorded: serve the app with \
                 `into_make_service_with_connect_info::<SocketAddr>()`",
            )
        })
}

/// The prefix IPv6 clients are counted by unless told otherwise.
pub const DEFAULT_IPV6_PREFIX: u8 = 64;

/// The identity of a client address: an IPv4 address as it is, an IPv6 address as its network
/// of `ipv6_prefix` bits (`2001:db8:1:2::/64`; the bare address at 128). `ip` is canonical.
pub fn ip_identity(ip: IpAddr, ipv6_prefix: u8) -> String {
    match ip {
        IpAddr::V6(v6) if ipv6_prefix < 128 => ipnet::Ipv6Net::new(v6, ipv6_prefix)
            .map(|net| net.trunc().to_string())
            .unwrap_or_else(|_| v6.to_string()),
        _ => ip.to_string(),
    }
}

/// The TCP peer's address, whatever headers say. Use it when no proxy is in front.
#[derive(Debug, Clone)]
pub struct PeerIp {
    name: String,
    ipv6_prefix: u8,
}

impl PeerIp {
    /// Extracts the peer address as attribute `name` (usually `ip`); IPv6 peers by their /64.
    pub fn new(name: impl Into<String>) -> PeerIp {
        PeerIp {
            name: name.into(),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }

    /// Counts IPv6 peers by networks of `len` bits (at most 128: by address; a limit's own
    /// grouping, /64 for `ip` by default, applies too: the coarser one counts).
    pub fn ipv6_prefix(mut self, len: u8) -> PeerIp {
        self.ipv6_prefix = len.min(128);
        self
    }
}

impl Extract for PeerIp {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        let identity = ip_identity(peer(parts)?, self.ipv6_prefix);
        out.push((self.name.clone(), identity));
        Ok(())
    }
}

/// Which forwarding header the proxy in front writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ForwardingHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (nginx `$proxy_add_x_forwarded_for`, most
    /// load balancers).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for=proxy1`.
    Forwarded,
    /// `X-Real-IP: client`, set (replaced, not appended) by the proxy.
    XRealIp,
}

/// The client's address behind trusted proxies.
///
/// With no trusted networks (the default) it is the peer address and headers are ignored.
///
/// ```
/// use std::net::IpAddr;
/// use sluice::middleware::ClientIp;
///
/// let extractor = ClientIp::new("ip").trust(["10.0.0.0/8".parse().unwrap()]);
/// let mut headers = http::HeaderMap::new();
/// headers.insert("x-forwarded-for", "6.6.6.6, 203.0.113.9".parse().unwrap());
/// // Through our proxy 10.0.0.2: the client is the nearest untrusted hop, not the forged 6.6.6.6.
/// let peer: IpAddr = "10.0.0.2".parse().unwrap();
/// assert_eq!(extractor.resolve(peer, &headers), "203.0.113.9".parse::<IpAddr>().unwrap());
/// // A client that connects directly cannot choose its identity.
/// let peer: IpAddr = "198.51.100.7".parse().unwrap();
/// assert_eq!(extractor.resolve(peer, &headers), peer);
/// ```
#[derive(Debug, Clone)]
pub struct ClientIp {
    name: String,
    trusted: Vec<IpNet>,
    header: ForwardingHeader,
    ipv6_prefix: u8,
}

impl ClientIp {
    /// Extracts the client address as attribute `name`, trusting no proxy yet.
    pub fn new(name: impl Into<String>) -> ClientIp {
        ClientIp {
            name: name.into(),
            trusted: Vec::new(),
            header: ForwardingHeader::default(),
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
        }
    }

    /// Counts IPv6 clients by networks of `len` bits (default 64; at most 128: by address). A
    /// limit that counts by `ip` groups IPv6 by /64 itself unless its `group` says otherwise
    /// ([`Limit::group`](crate::model::Limit::group)): the coarser grouping applies.
    pub fn ipv6_prefix(mut self, len: u8) -> ClientIp {
        self.ipv6_prefix = len.min(128);
        self
    }

    /// The attribute value of a resolved client address (see [`ip_identity`]).
    pub fn identity(&self, client: IpAddr) -> String {
        ip_identity(client, self.ipv6_prefix)
    }

    /// Adds networks whose hosts are our proxies. IPv4 networks also match IPv4-mapped IPv6
    /// peers.
    pub fn trust(mut self, networks: impl IntoIterator<Item = IpNet>) -> ClientIp {
        self.trusted
            .extend(networks.into_iter().map(|n| n.trunc()).map(canonical_net));
        self
    }

    /// Chooses the forwarding header to honour (default `X-Forwarded-For`).
    pub fn header(mut self, header: ForwardingHeader) -> ClientIp {
        self.header = header;
        self
    }

    /// The trusted networks.
    pub fn trusted(&self) -> &[IpNet] {
        &self.trusted
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// The client's address given the TCP peer and the request headers (see the module docs).
    pub fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let mut client = peer.to_canonical();
        if !self.is_trusted(client) {
            return client;
        }
        let hops = match self.header {
            ForwardingHeader::XForwardedFor => {
                list_hops(headers, &HeaderName::from_static("x-forwarded-for"))
            }
            ForwardingHeader::XRealIp => {
                real_ip_hops(headers, &HeaderName::from_static("x-real-ip"))
            }
            ForwardingHeader::Forwarded => forwarded_hops(headers),
        };
        for hop in hops.into_iter().rev() {
            let Some(ip) = hop else {
                return client;
            };
            client = ip.to_canonical();
            if !self.is_trusted(client) {
                return client;
            }
        }
        client
    }
}

/// `::ffff:10.0.0.0/104` is `10.0.0.0/8`: peers are canonical, so networks must be too.
fn canonical_net(net: IpNet) -> IpNet {
    match net {
        IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96)
                .map(IpNet::V4)
                .unwrap_or(net),
            None => net,
        },
        _ => net,
    }
}

impl Extract for ClientIp {
    fn extract(&self, parts: &mut Parts, out: &mut AttributeList) -> Result<(), ExtractError> {
        let ip = self.resolve(peer(parts)?, &parts.headers);
        out.push((self.name.clone(), self.identity(ip)));
        Ok(())
    }
}
