//! Parsing of forwarding headers into the chain of hops they describe, left to right.
//!
//! Pure functions over header values; the trust decisions are in
//! [`client_ip`](super::client_ip). Each hop is `Some(ip)` when it names an address and `None`
//! when it does not (`unknown`, an obfuscated identifier, garbage): a `None` stops the
//! right-to-left walk, since nothing beyond it can be vouched for.
//!
//! Multiple header lines are one list, in order (RFC 9110 §5.3). Quoted strings in `Forwarded`
//! may contain `,` and `;`, so the splitter honours quotes and backslash escapes.

use std::net::{IpAddr, SocketAddr};

use http::HeaderMap;
use http::header::HeaderName;

/// The hops listed by every line of `name`, left (farthest) to right (nearest).
///
/// `X-Forwarded-For` and `X-Real-IP` list one node per comma-separated entry.
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

/// The hops of every `Forwarded` line (RFC 7239): the `for=` node of each element.
pub(crate) fn forwarded_hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    headers
        .get_all(http::header::FORWARDED)
        .iter()
        .flat_map(|line| match line.to_str() {
            Ok(text) => split_quoted(text, ',')
                .into_iter()
                .map(forwarded_for)
                .collect::<Vec<_>>(),
            Err(_) => vec![None],
        })
        .collect()
}

/// The `for=` node of one `Forwarded` element, e.g. `for="[2001:db8::17]:4711";proto=https`.
fn forwarded_for(element: &str) -> Option<IpAddr> {
    let value = split_quoted(element, ';').into_iter().find_map(|pair| {
        let (key, value) = pair.split_once('=')?;
        key.trim().eq_ignore_ascii_case("for").then_some(value)
    })?;
    parse_node(&unquote(value.trim()))
}

/// An address in any of the forms proxies write: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`.
pub(crate) fn parse_node(text: &str) -> Option<IpAddr> {
    let text = text.trim();
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Some(addr.ip());
    }
    text.strip_prefix('[')
        .and_then(|t| t.strip_suffix(']'))
        .and_then(|t| t.parse::<IpAddr>().ok())
}

/// Splits on `sep` outside double quotes.
fn split_quoted(text: &str, sep: char) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            c if c == sep && !quoted => {
                parts.push(&text[start..i]);
                start = i + c.len_utf8();
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

/// Removes the quotes and escapes of a quoted-string; a token is returned as it is.
fn unquote(text: &str) -> String {
    match text.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
        Some(inner) => {
            let mut out = String::with_capacity(inner.len());
            let mut escaped = false;
            for c in inner.chars() {
                if escaped || c != '\\' {
                    out.push(c);
                    escaped = false;
                } else {
                    escaped = true;
                }
            }
            out
        }
        None => text.to_string(),
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
        assert_eq!(parse_node("2001:db8::1"), ip("2001:db8::1"));
        assert_eq!(parse_node("[2001:db8::1]"), ip("2001:db8::1"));
        assert_eq!(parse_node("[2001:db8::1]:443"), ip("2001:db8::1"));
        assert_eq!(parse_node("unknown"), None);
        assert_eq!(parse_node("_hidden"), None);
        assert_eq!(parse_node(""), None);
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
    fn quoted_separators_do_not_split() {
        assert_eq!(
            split_quoted(r#"a="x,\"y";b, c"#, ','),
            [r#"a="x,\"y";b"#, " c"]
        );
        assert_eq!(unquote(r#""a\"b""#), "a\"b");
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
}
