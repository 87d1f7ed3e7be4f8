//! Parsing of forwarding headers into the chain of hops they describe, left to right.
//!
//! Pure functions over header values; the trust decisions are in
//! [`client_ip`](super::client_ip). Each hop is `Some(ip)` when it names an address and `None`
//! when it does not (`unknown`, an obfuscated identifier, a malformed element): a `None` stops
//! the right-to-left walk, since nothing beyond it can be vouched for.
//!
//! Invariants (this is what keeps a client from choosing its identity):
//! - multiple header lines are one list, in order (RFC 9110 §5.3), but each line is parsed on
//!   its own, so a broken line cannot reach into the line a proxy added after it;
//! - a `Forwarded` line is parsed strictly (RFC 7239: `pair *(";" pair)` elements, each value a
//!   token or a quoted-string) **from the right**. A proxy appends its element at the end of the
//!   line, so the elements nearest to us are read first and are never affected by what a client
//!   wrote to their left: an unclosed `"` in the client's part cannot swallow them. Parsing
//!   stops at the first thing that is not a well-formed element and yields one `None` there;
//! - an element with no `for=`, two `for=`, or a `for=` that is not an address yields `None`;
//! - `X-Real-IP` names one address: several values (lines or commas) mean a client-sent one
//!   got through, so the whole header yields `None`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use http::HeaderMap;
use http::header::HeaderName;

/// The hops listed by every line of `name`, left (farthest) to right (nearest).
///
/// `X-Forwarded-For` lists one node per comma-separated entry.
pub(crate) fn list_hops(headers: &HeaderMap, name: &HeaderName) -> Vec<Option<IpAddr>> {
    headers
        .get_all(name)
        .iter()
        .flat_map(|line| match line.to_str() {
            Ok(text) => text.split(',').map(parse_node).collect::<Vec<_>>(),
            // An unreadable line is one hop that names nothing.
            Err(_) => vec![None],
        })
        .collect()
}

/// The one address of `X-Real-IP`, as a chain of one hop; `None` when the header holds more or
/// less than one value.
pub(crate) fn real_ip_hops(headers: &HeaderMap, name: &HeaderName) -> Vec<Option<IpAddr>> {
    let hops = list_hops(headers, name);
    match hops.len() {
        0 => Vec::new(),
        1 => hops,
        _ => vec![None],
    }
}

/// The hops of every `Forwarded` line (RFC 7239): the `for=` node of each element.
pub(crate) fn forwarded_hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all(http::header::FORWARDED)
        .iter()
        .flat_map(|line| match line.to_str() {
            Ok(text) => forwarded_line(text),
            Err(_) => vec![None],
        })
        .collect()
}

/// The hops of one `Forwarded` line, parsed from the right (see the module docs).
fn forwarded_line(line: &str) -> Vec<Option<IpAddr>> {
    let mut reader = Reverse {
        text: line.as_bytes(),
        end: line.len(),
    };
    let mut hops = Vec::new();
    loop {
        reader.skip_whitespace();
        if reader.end == 0 {
            break;
        }
        if reader.eat(b',') {
            // An empty list element (`a, , b`) is allowed and names nothing.
            continue;
        }
        match reader.element() {
            Some(hop) => hops.push(hop),
            None => {
                hops.push(None);
                break;
            }
        }
        reader.skip_whitespace();
        if reader.end > 0 && !reader.eat(b',') {
            hops.push(None);
            break;
        }
    }
    hops.reverse();
    hops
}

/// A cursor that consumes a header value from its end: `text[..end]` is still unread.
struct Reverse<'a> {
    text: &'a [u8],
    end: usize,
}

impl Reverse<'_> {
    fn peek(&self) -> Option<u8> {
        self.end.checked_sub(1).map(|i| self.text[i])
    }

    fn eat(&mut self, byte: u8) -> bool {
        let hit = self.peek() == Some(byte);
        if hit {
            self.end -= 1;
        }
        hit
    }

    fn skip_whitespace(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.end -= 1;
        }
    }

    /// One element, ending at `end`: `Some(hop)` when well formed, `None` when not.
    fn element(&mut self) -> Option<Option<IpAddr>> {
        let mut node: Option<String> = None;
        loop {
            let (key, value) = self.pair()?;
            if key.eq_ignore_ascii_case(b"for") {
                if node.is_some() {
                    return Some(None);
                }
                node = Some(value);
            }
            // Lenient on whitespace around `;`, which some proxies write.
            self.skip_whitespace();
            if !self.eat(b';') {
                break;
            }
            self.skip_whitespace();
        }
        Some(node.as_deref().and_then(parse_node))
    }

    /// One `token=value` pair, ending at `end`.
    fn pair(&mut self) -> Option<(&[u8], String)> {
        let value = if self.peek() == Some(b'"') {
            self.quoted()?
        } else {
            String::from_utf8_lossy(self.token()?).into_owned()
        };
        if !self.eat(b'=') {
            return None;
        }
        Some((self.token()?, value))
    }

    fn token(&mut self) -> Option<&[u8]> {
        let end = self.end;
        while self.peek().is_some_and(is_tchar) {
            self.end -= 1;
        }
        (self.end < end).then(|| &self.text[self.end..end])
    }

    /// A quoted-string ending at `end` (which is its closing `"`), unescaped.
    ///
    /// Read from the right, a `"` is escaped exactly when an odd number of backslashes precede
    /// it, so the opening quote is the first `"` preceded by an even number.
    fn quoted(&mut self) -> Option<String> {
        let close = self.end - 1;
        if self.backslashes_before(close) % 2 == 1 {
            return None;
        }
        let mut open = close;
        loop {
            open = self.text[..open].iter().rposition(|&b| b == b'"')?;
            if self.backslashes_before(open).is_multiple_of(2) {
                break;
            }
        }
        let inner = &self.text[open + 1..close];
        let mut out = Vec::with_capacity(inner.len());
        let mut escaped = false;
        for &b in inner {
            if escaped || b != b'\\' {
                out.push(b);
                escaped = false;
            } else {
                escaped = true;
            }
        }
        self.end = open;
        String::from_utf8(out).ok()
    }

    fn backslashes_before(&self, at: usize) -> usize {
        self.text[..at]
            .iter()
            .rev()
            .take_while(|&&b| b == b'\\')
            .count()
    }
}

/// RFC 9110 `tchar`.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// An address in any of the forms proxies write: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`, an obfuscated port (`192.0.2.1:_p1`), a link-local zone
/// (`fe80::1%eth0`, whose zone is dropped). Anything else (`unknown`, `_hidden`, garbage) is
/// `None`.
pub(crate) fn parse_node(text: &str) -> Option<IpAddr> {
    let text = text.trim_matches([' ', '\t']);
    if let Some(rest) = text.strip_prefix('[') {
        let (inside, after) = rest.split_once(']')?;
        if !(after.is_empty() || after.strip_prefix(':').is_some_and(is_port)) {
            return None;
        }
        return parse_v6(inside).map(IpAddr::V6);
    }
    if let Ok(ip) = text.parse::<Ipv4Addr>() {
        return Some(IpAddr::V4(ip));
    }
    if let Some((host, port)) = text.split_once(':')
        && is_port(port)
        && let Ok(ip) = host.parse::<Ipv4Addr>()
    {
        return Some(IpAddr::V4(ip));
    }
    parse_v6(text).map(IpAddr::V6)
}

/// An IPv6 address, with a zone id only on a link-local address.
fn parse_v6(text: &str) -> Option<Ipv6Addr> {
    match text.split_once('%') {
        None => text.parse().ok(),
        Some((address, zone)) => {
            let ip: Ipv6Addr = address.parse().ok()?;
            let zone_ok = !zone.is_empty()
                && zone.len() <= 64
                && zone
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b));
            (zone_ok && ip.is_unicast_link_local()).then_some(ip)
        }
    }
}

/// RFC 7239 `node-port`: a decimal port or an obfuscated one (`_` followed by
/// `[A-Za-z0-9._-]`).
fn is_port(text: &str) -> bool {
    match text.strip_prefix('_') {
        Some(obfuscated) => {
            !obfuscated.is_empty()
                && obfuscated
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
        }
        None => {
            text.len() <= 5
                && text.bytes().all(|b| b.is_ascii_digit())
                && text.parse::<u16>().is_ok()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> Option<IpAddr> {
        Some(s.parse().unwrap())
    }

    #[test]
    fn nodes_in_every_form() {
        assert_eq!(parse_node(" 192.0.2.1 "), ip("192.0.2.1"));
        assert_eq!(parse_node("192.0.2.1:8080"), ip("192.0.2.1"));
        assert_eq!(parse_node("192.0.2.1:_p1"), ip("192.0.2.1"));
        assert_eq!(parse_node("2001:db8::1"), ip("2001:db8::1"));
        assert_eq!(parse_node("[2001:db8::1]"), ip("2001:db8::1"));
        assert_eq!(parse_node("[2001:db8::1]:443"), ip("2001:db8::1"));
        assert_eq!(parse_node("fe80::1%eth0"), ip("fe80::1"));
        assert_eq!(parse_node("[fe80::1%25]:80"), ip("fe80::1"));
        for bad in [
            "unknown",
            "_hidden",
            "",
            "192.0.2.1:99999",
            "192.0.2.1:",
            "[2001:db8::1]x",
            "[192.0.2.1]",
            "2001:db8::1%eth0",
            "fe80::1%",
            "fe80::1%a b",
            "1.2.3.4.5",
        ] {
            assert_eq!(parse_node(bad), None, "{bad}");
        }
    }

    #[test]
    fn forwarded_elements_with_quotes() {
        let mut h = HeaderMap::new();
        h.append(
            "forwarded",
            r#"for=192.0.2.60;proto=http;by=203.0.113.43, For="[2001:db8:cafe::17]:4711""#
                .parse()
                .unwrap(),
        );
        h.append(
            "forwarded",
            r#"proto=https;for="198.51.100.1", for=unknown, by=x"#
                .parse()
                .unwrap(),
        );
        assert_eq!(
            forwarded_hops(&h),
            [
                ip("192.0.2.60"),
                ip("2001:db8:cafe::17"),
                ip("198.51.100.1"),
                None,
                None
            ]
        );
    }

    #[test]
    fn an_unclosed_quote_cannot_swallow_the_element_a_proxy_appended() {
        assert_eq!(
            forwarded_line(r#"for=198.51.100.77;x=", for=203.0.113.5"#),
            [None, ip("203.0.113.5")]
        );
        assert_eq!(
            forwarded_line(r#"for="198.51.100.77, for=203.0.113.5"#),
            [None, ip("203.0.113.5")]
        );
        // An escaped quote does not close a string.
        assert_eq!(
            forwarded_line(r#"for="a\", for=203.0.113.5"#),
            [None, ip("203.0.113.5")]
        );
        assert_eq!(
            forwarded_line(r#"for="_a\"b,c";by=x, for=203.0.113.5"#),
            [None, ip("203.0.113.5")]
        );
    }

    #[test]
    fn malformed_elements_name_nothing() {
        for bad in [
            "for=",
            "for=1.2.3.4;",
            "=1.2.3.4",
            "for 1.2.3.4",
            "for=1.2.3.4 x",
            "for=1.2.3.4;for=5.6.7.8",
            r#"for="1.2.3.4"x"#,
            "for=[2001:db8::1]:80]",
            "for=a=b",
            "proto=https",
            r#"for=""#,
            r#"for="1.2.3.4"#,
        ] {
            assert_eq!(forwarded_line(bad).last(), Some(&None), "{bad}");
        }
        assert_eq!(forwarded_line(""), []);
        assert_eq!(forwarded_line(" , ,"), []);
        assert_eq!(forwarded_line(r#"for="1.2.3.4""#), [ip("1.2.3.4")]);
    }

    #[test]
    fn list_headers_join_lines_in_order() {
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", "203.0.113.1, 10.0.0.1".parse().unwrap());
        h.append("x-forwarded-for", "garbage".parse().unwrap());
        assert_eq!(
            list_hops(&h, &HeaderName::from_static("x-forwarded-for")),
            [ip("203.0.113.1"), ip("10.0.0.1"), None]
        );
    }

    #[test]
    fn real_ip_is_one_value() {
        let name = HeaderName::from_static("x-real-ip");
        let mut h = HeaderMap::new();
        assert_eq!(real_ip_hops(&h, &name), []);
        h.append("x-real-ip", "203.0.113.1".parse().unwrap());
        assert_eq!(real_ip_hops(&h, &name), [ip("203.0.113.1")]);
        h.append("x-real-ip", "203.0.113.2".parse().unwrap());
        assert_eq!(real_ip_hops(&h, &name), [None]);
        let mut h = HeaderMap::new();
        h.append("x-real-ip", "1.1.1.1, 203.0.113.1".parse().unwrap());
        assert_eq!(real_ip_hops(&h, &name), [None]);
    }
}
