//! Client-IP extraction is security code: forwarding headers count only from trusted proxies,
//! walked right to left; forged entries, sent directly or behind a proxy, change nothing.
//! IPv4, IPv6 and IPv4-mapped IPv6, through the extractor and over real HTTP.
#![cfg(feature = "tower")]

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::extract::ConnectInfo;
use axum::routing::get;
use axum::{Extension, Router};
use http::HeaderMap;
use sluice::middleware::{
    AttributeList, ClientIp, Extract, ExtractErrorKind, ForwardingHeader, PeerIp,
    RequestAttributes, SluiceLayer,
};
use sluice::model::{Algorithm, Limit};
use sluice::{Limiter, ManualClock, MemoryStore, Rule};

use crate::common;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (k, v) in pairs {
        h.append(
            http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
            v.parse().unwrap(),
        );
    }
    h
}

fn proxies_v4() -> ClientIp {
    ClientIp::new("ip").trust(["10.0.0.0/8".parse().unwrap()])
}

fn proxies_v6() -> ClientIp {
    ClientIp::new("ip").trust(["2001:db8:ffff::/48".parse().unwrap()])
}

#[test]
fn a_direct_client_cannot_choose_its_identity() {
    let forged = headers(&[
        ("x-forwarded-for", "203.0.113.66"),
        ("x-real-ip", "203.0.113.67"),
        ("forwarded", "for=203.0.113.68"),
    ]);
    for header in [
        ForwardingHeader::XForwardedFor,
        ForwardingHeader::XRealIp,
        ForwardingHeader::Forwarded,
    ] {
        let x = proxies_v4().header(header);
        assert_eq!(x.resolve(ip("198.51.100.7"), &forged), ip("198.51.100.7"));
        let x = proxies_v6().header(header);
        assert_eq!(x.resolve(ip("2001:db8:1::7"), &forged), ip("2001:db8:1::7"));
        // With no trusted proxies at all, headers are never read.
        let x = ClientIp::new("ip").header(header);
        assert_eq!(x.resolve(ip("10.0.0.2"), &forged), ip("10.0.0.2"));
    }
}

#[test]
fn a_forged_leftmost_entry_behind_a_trusted_proxy_changes_nothing() {
    let x = proxies_v4();
    let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.9")]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));
    // Several trusted hops are skipped, right to left.
    let h = headers(&[(
        "x-forwarded-for",
        "1.1.1.1, 203.0.113.9, 10.1.0.1, 10.2.0.1",
    )]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));
    // Separate header lines are one list, in order.
    let h = headers(&[
        ("x-forwarded-for", "1.1.1.1"),
        ("x-forwarded-for", "203.0.113.9, 10.1.0.1"),
    ]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));
    // A forged trusted-looking address on the left is still left of the real client.
    let h = headers(&[("x-forwarded-for", "10.9.9.9, 203.0.113.9")]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));

    let x = proxies_v6();
    let h = headers(&[(
        "x-forwarded-for",
        "2001:db8:bad::1, [2001:db8:c::9]:5555, 2001:db8:ffff::2",
    )]);
    assert_eq!(x.resolve(ip("2001:db8:ffff::1"), &h), ip("2001:db8:c::9"));
}

#[test]
fn the_walk_stops_at_what_it_cannot_vouch_for() {
    let x = proxies_v4();
    // Every hop trusted: the farthest one is the client (an internal caller).
    let h = headers(&[("x-forwarded-for", "10.3.0.1, 10.2.0.1")]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("10.3.0.1"));
    // An entry naming no address stops the walk at the last trusted hop; what lies to its
    // left (a forged address) is never reached.
    let h = headers(&[("x-forwarded-for", "1.1.1.1, unknown, 10.2.0.1")]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("10.2.0.1"));
    // No header at all: the proxy itself.
    assert_eq!(x.resolve(ip("10.0.0.2"), &HeaderMap::new()), ip("10.0.0.2"));
}

#[test]
fn ipv4_mapped_ipv6_is_the_ipv4_address() {
    // A dual-stack socket reports an IPv4 proxy as ::ffff:10.0.0.2: still trusted.
    let x = proxies_v4();
    let h = headers(&[("x-forwarded-for", "1.1.1.1, ::ffff:203.0.113.9")]);
    assert_eq!(x.resolve(ip("::ffff:10.0.0.2"), &h), ip("203.0.113.9"));
    // A mapped untrusted peer is itself, canonical, so it has one identity on either stack.
    assert_eq!(x.resolve(ip("::ffff:198.51.100.7"), &h), ip("198.51.100.7"));
    // A network written in mapped form trusts the IPv4 addresses.
    let x = ClientIp::new("ip").trust(["::ffff:10.0.0.0/104".parse().unwrap()]);
    assert_eq!(x.trusted(), ["10.0.0.0/8".parse::<ipnet::IpNet>().unwrap()]);
    let h = headers(&[("x-forwarded-for", "203.0.113.9")]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));
    // A mapped address does not slip past an IPv4 trust list as an untrusted forged hop.
    let x = proxies_v4();
    let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.9, ::ffff:10.5.5.5")]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));
}

#[test]
fn only_the_configured_header_counts() {
    // The proxy writes X-Forwarded-For; a client-sent Forwarded passes through it untouched.
    let h = headers(&[
        ("forwarded", "for=1.1.1.1"),
        ("x-real-ip", "1.1.1.2"),
        ("x-forwarded-for", "203.0.113.9"),
    ]);
    assert_eq!(proxies_v4().resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));
    let x = proxies_v4().header(ForwardingHeader::Forwarded);
    let h = headers(&[(
        "forwarded",
        "for=1.1.1.1, for=\"[2001:db8:c::9]:4711\";proto=https, for=10.1.0.1",
    )]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("2001:db8:c::9"));
    let x = proxies_v4().header(ForwardingHeader::XRealIp);
    let h = headers(&[("x-real-ip", "203.0.113.9"), ("x-forwarded-for", "1.1.1.1")]);
    assert_eq!(x.resolve(ip("10.0.0.2"), &h), ip("203.0.113.9"));
}

fn parts_from(peer: &str, pairs: &[(&str, &str)]) -> http::request::Parts {
    let mut request = http::Request::builder();
    for (k, v) in pairs {
        request = request.header(*k, *v);
    }
    let (mut parts, ()) = request.body(()).unwrap().into_parts();
    parts
        .extensions
        .insert(ConnectInfo(SocketAddr::new(ip(peer), 4321)));
    parts
}

#[test]
fn extractors_read_the_peer_from_connect_info() {
    let mut parts = parts_from("10.0.0.2", &[("x-forwarded-for", "203.0.113.9")]);
    let mut out = AttributeList::new();
    proxies_v4().extract(&mut parts, &mut out).unwrap();
    PeerIp::new("peer").extract(&mut parts, &mut out).unwrap();
    assert_eq!(
        out,
        [
            ("ip".to_string(), "203.0.113.9".to_string()),
            ("peer".to_string(), "10.0.0.2".to_string())
        ]
    );
    let mut parts = parts_from("::ffff:192.0.2.1", &[]);
    let mut out = AttributeList::new();
    PeerIp::new("ip").extract(&mut parts, &mut out).unwrap();
    assert_eq!(out[0].1, "192.0.2.1");
    // A server started without connect info is a wiring error, not a global key.
    let (mut parts, ()) = http::Request::new(()).into_parts();
    let e = ClientIp::new("ip")
        .extract(&mut parts, &mut out)
        .unwrap_err();
    assert_eq!(e.kind, ExtractErrorKind::Misconfigured);
    assert!(e.message.contains("into_make_service_with_connect_info"));
}

async fn serve(client_ip: ClientIp) -> String {
    let clock = ManualClock::at_2026();
    let limiter = Limiter::builder(MemoryStore::with_clock(Arc::new(clock)))
        .rule(
            "login",
            // The limit takes the network the middleware formed as it is (a limit's own default
            // would group IPv6 by /64 again, and the coarser grouping applies).
            Rule::new(vec![
                Limit::new(&["ip"], "1/1m".parse().unwrap(), Algorithm::SlidingLog).with_group(
                    "ip",
                    sluice::model::AddressGroup {
                        ipv4: 32,
                        ipv6: 128,
                    },
                ),
            ]),
        )
        .build()
        .unwrap();
    let app = Router::new().route(
        "/login",
        get(
            |Extension(RequestAttributes(a)): Extension<RequestAttributes>| async move {
                a[0].1.clone()
            },
        )
        .layer(SluiceLayer::new(&limiter, "login").extract(client_ip)),
    );
    format!("{}/login", common::serve(app).await)
}

async fn get_with(url: &str, xff: &str) -> (u16, String) {
    let r = reqwest::Client::new()
        .get(url)
        .header("x-forwarded-for", xff)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

#[tokio::test]
async fn over_http_without_trusted_proxies_headers_are_ignored() {
    let url = serve(ClientIp::new("ip")).await;
    assert_eq!(
        get_with(&url, "203.0.113.1").await,
        (200, "127.0.0.1".into())
    );
    let (status, _) = get_with(&url, "203.0.113.2").await;
    assert_eq!(status, 429, "a new forged address does not buy a new quota");
}

#[tokio::test]
async fn over_http_behind_a_trusted_proxy_the_nearest_untrusted_hop_counts() {
    let url = serve(ClientIp::new("ip").trust(["127.0.0.0/8".parse().unwrap()])).await;
    assert_eq!(
        get_with(&url, "6.6.6.6, 203.0.113.9").await,
        (200, "203.0.113.9".into())
    );
    let (status, _) = get_with(&url, "7.7.7.7, 203.0.113.9").await;
    assert_eq!(
        status, 429,
        "a forged leftmost entry does not change the identity"
    );
    assert_eq!(
        get_with(&url, "203.0.113.10").await,
        (200, "203.0.113.10".into())
    );
}

/// What `proxies_v4().header(header)` resolves for a request from our proxy 10.0.0.2 carrying
/// `lines` of that header.
fn behind_proxy(header: ForwardingHeader, name: &str, lines: &[&str]) -> IpAddr {
    let pairs: Vec<(&str, &str)> = lines.iter().map(|l| (name, *l)).collect();
    proxies_v4()
        .header(header)
        .resolve(ip("10.0.0.2"), &headers(&pairs))
}

#[test]
fn a_malformed_forwarded_element_never_names_the_client() {
    let fwd = |lines: &[&str]| behind_proxy(ForwardingHeader::Forwarded, "forwarded", lines);
    // The client wrote everything before `, for=203.0.113.5`, which its proxy appended: an
    // unclosed quote does not swallow the proxy's element.
    assert_eq!(
        fwd(&[r#"for=198.51.100.77;x=", for=203.0.113.5"#]),
        ip("203.0.113.5")
    );
    assert_eq!(
        fwd(&[r#"for="198.51.100.77, for=203.0.113.5"#]),
        ip("203.0.113.5")
    );
    assert_eq!(fwd(&[r#"for="\", for=203.0.113.5"#]), ip("203.0.113.5"));
    // The same when the proxy adds its own line.
    assert_eq!(
        fwd(&[r#"for=198.51.100.77;x=""#, "for=203.0.113.5"]),
        ip("203.0.113.5")
    );
    // When the element a trusted hop wrote cannot be read, the walk stops at that hop.
    for broken in [
        r#"for=198.51.100.77, for="10.1.0.1"#,
        "for=198.51.100.77, for=10.1.0.1;for=10.1.0.2",
        "for=198.51.100.77, for",
        "for=198.51.100.77, for=10.1.0.1 junk",
        "for=198.51.100.77, for=999.1.1.1",
        "for=198.51.100.77, for=[2001:db8::1]",
        "for=198.51.100.77, for=unknown",
        "for=198.51.100.77, for=_hidden",
        "for=198.51.100.77, proto=https",
    ] {
        assert_eq!(fwd(&[broken]), ip("10.0.0.2"), "{broken}");
    }
    // Behind two trusted hops, the walk stops at the second one.
    assert_eq!(
        fwd(&[r#"for=198.51.100.77;x=", for=_hidden, for=10.1.0.1"#]),
        ip("10.1.0.1")
    );
}

#[test]
fn forwarded_nodes_with_ports_brackets_and_zones() {
    let fwd = |lines: &[&str]| behind_proxy(ForwardingHeader::Forwarded, "forwarded", lines);
    assert_eq!(fwd(&[r#"for="203.0.113.5:4711""#]), ip("203.0.113.5"));
    assert_eq!(fwd(&[r#"for="203.0.113.5:_p1""#]), ip("203.0.113.5"));
    assert_eq!(
        fwd(&[r#"for="[2001:db8:c::9]:4711";proto=https"#]),
        ip("2001:db8:c::9")
    );
    assert_eq!(fwd(&[r#"For="[2001:db8:c::9]""#]), ip("2001:db8:c::9"));
    assert_eq!(fwd(&[r#"for="[fe80::9%eth0]""#]), ip("fe80::9"));
    assert_eq!(fwd(&["for=203.0.113.5 ; proto=https"]), ip("203.0.113.5"));
    // A zone on a global address, a port out of range: not addresses.
    assert_eq!(fwd(&[r#"for="[2001:db8::9%eth0]""#]), ip("10.0.0.2"));
    assert_eq!(fwd(&[r#"for="203.0.113.5:70000""#]), ip("10.0.0.2"));
}

#[test]
fn malformed_list_headers_stop_the_walk() {
    let xff =
        |lines: &[&str]| behind_proxy(ForwardingHeader::XForwardedFor, "x-forwarded-for", lines);
    assert_eq!(xff(&["198.51.100.77, 203.0.113.5:8080"]), ip("203.0.113.5"));
    assert_eq!(
        xff(&["198.51.100.77, [2001:db8::5]:443"]),
        ip("2001:db8::5")
    );
    assert_eq!(xff(&["198.51.100.77", "203.0.113.5"]), ip("203.0.113.5"));
    for broken in [
        "198.51.100.77, \"203.0.113.5\"",
        "198.51.100.77, unknown",
        "198.51.100.77, _hidden",
        "198.51.100.77, 203.0.113.5 10.1.0.1",
        "198.51.100.77,",
        "198.51.100.77, 2001:db8::5%eth0",
    ] {
        assert_eq!(xff(&[broken]), ip("10.0.0.2"), "{broken}");
    }
    let real = |lines: &[&str]| behind_proxy(ForwardingHeader::XRealIp, "x-real-ip", lines);
    assert_eq!(real(&["203.0.113.5"]), ip("203.0.113.5"));
    // A client-sent value that got through next to the proxy's: neither is believed.
    assert_eq!(real(&["198.51.100.77", "203.0.113.5"]), ip("10.0.0.2"));
    assert_eq!(real(&["198.51.100.77, 203.0.113.5"]), ip("10.0.0.2"));
    assert_eq!(real(&["garbage"]), ip("10.0.0.2"));
}

#[tokio::test]
async fn over_http_an_unclosed_quote_does_not_buy_a_new_identity() {
    let url = serve(
        ClientIp::new("ip")
            .trust(["127.0.0.0/8".parse().unwrap()])
            .header(ForwardingHeader::Forwarded),
    )
    .await;
    let client = reqwest::Client::new();
    let send = |value: &'static str| {
        let request = client.get(&url).header("forwarded", value);
        async move {
            let r = request.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    // The trusted proxy appended `, for=203.0.113.5` to what the client sent.
    assert_eq!(
        send(r#"for=198.51.100.77;x=", for=203.0.113.5"#).await,
        (200, "203.0.113.5".into())
    );
    let (status, _) = send(r#"for=198.51.100.78;x=", for=203.0.113.5"#).await;
    assert_eq!(status, 429, "a forged element does not buy a new quota");
}

/// An IPv6 client can pick any address of its /64, so it is counted by its /64 (or the
/// configured prefix); an IPv4 client by its address.
#[tokio::test]
async fn over_http_ipv6_clients_are_counted_by_their_network() {
    let trusted = || ClientIp::new("ip").trust(["127.0.0.0/8".parse().unwrap()]);
    let url = serve(trusted()).await;
    assert_eq!(
        get_with(&url, "2001:db8:1:2::1").await,
        (200, "2001:db8:1:2::/64".into())
    );
    let (status, _) = get_with(&url, "2001:db8:1:2:ffff:ffff:ffff:fffe").await;
    assert_eq!(
        status, 429,
        "another address of the same /64 is the same client"
    );
    assert_eq!(
        get_with(&url, "2001:db8:1:3::1").await,
        (200, "2001:db8:1:3::/64".into()),
        "the next /64 is another client"
    );
    assert_eq!(get_with(&url, "192.0.2.1").await, (200, "192.0.2.1".into()));
    assert_eq!(get_with(&url, "192.0.2.2").await, (200, "192.0.2.2".into()));

    let url = serve(trusted().ipv6_prefix(128)).await;
    assert_eq!(
        get_with(&url, "2001:db8:1:2::1").await,
        (200, "2001:db8:1:2::1".into())
    );
    assert_eq!(
        get_with(&url, "2001:db8:1:2::2").await,
        (200, "2001:db8:1:2::2".into())
    );
    let url = serve(trusted().ipv6_prefix(48)).await;
    assert_eq!(
        get_with(&url, "2001:db8:1:2::1").await,
        (200, "2001:db8:1::/48".into())
    );
    let (status, _) = get_with(&url, "2001:db8:1:ffff::1").await;
    assert_eq!(status, 429);
}

#[test]
fn peer_ipv6_addresses_are_counted_by_their_network_too() {
    let mut parts = parts_from("2001:db8:1:2::7", &[]);
    let mut out = AttributeList::new();
    PeerIp::new("ip").extract(&mut parts, &mut out).unwrap();
    PeerIp::new("addr")
        .ipv6_prefix(128)
        .extract(&mut parts, &mut out)
        .unwrap();
    assert_eq!(out[0].1, "2001:db8:1:2::/64");
    assert_eq!(out[1].1, "2001:db8:1:2::7");
}
