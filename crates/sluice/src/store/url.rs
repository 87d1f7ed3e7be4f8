//! Store URLs: which store a URL names, checked in one place.
//!
//! The config file, the command line and the example app ask [`StoreUrl::parse`], and the Redis
//! store's own URL parser accepts exactly [`REDIS_SCHEMES`], so a URL accepted by one is
//! accepted by all. Parsing here looks at the scheme only; the store checks the rest when it
//! connects. [`redact`] is the one way a URL is shown.
//!
//! | scheme | store |
//! | --- | --- |
//! | `memory://` | [`MemoryStore`](crate::MemoryStore) |
//! | `redis://`, `redis+cluster://`, `redis+sentinel://`, and `rediss…` for TLS | the Redis store (feature `redis`; its `url` module parses the rest) |

/// The kind of store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StoreKind {
    /// `memory://`: state in this process.
    Memory,
    /// One of [`REDIS_SCHEMES`].
    Redis,
}

/// A store URL whose scheme is known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreUrl<'a> {
    /// The store it names.
    pub kind: StoreKind,
    /// The URL as given.
    pub url: &'a str,
}

/// A URL that names no store Sluice has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store URL `{url}`: {message}")]
pub struct StoreUrlError {
    /// The URL, its password hidden.
    pub url: String,
    /// What is wrong.
    pub message: String,
}

/// The schemes of the Redis store: one server, a Cluster, or a primary found through Sentinel,
/// each in plain text or TLS.
pub const REDIS_SCHEMES: [&str; 6] = [
    "redis",
    "rediss",
    "redis+cluster",
    "rediss+cluster",
    "redis+sentinel",
    "rediss+sentinel",
];

const EXPECTED: &str = "expected memory://, redis://host:port/db, \
     redis+cluster://host:port,host:port/ or redis+sentinel://host:port,host:port/master \
     (rediss… for TLS)";

impl<'a> StoreUrl<'a> {
    /// Names the store of `url`, or says why there is none.
    pub fn parse(url: &'a str) -> Result<StoreUrl<'a>, StoreUrlError> {
        let error = |message: &str| StoreUrlError {
            url: redact(url),
            message: message.to_string(),
        };
        let scheme = url.split_once("://").map(|(scheme, _)| scheme);
        let kind = match scheme {
            Some("memory") => StoreKind::Memory,
            Some(s) if REDIS_SCHEMES.contains(&s) => StoreKind::Redis,
            _ => return Err(error(EXPECTED)),
        };
        Ok(StoreUrl { kind, url })
    }
}

/// The URL with its password replaced by `***` (unchanged when it has none). Works on any URL,
/// parsed or not, so that even a refused URL never shows its password: everything between `://`
/// and the last `@` is hidden but a plain user name (a generated password often holds an
/// unencoded `/`, `?`, `#` or `@`, which ends the authority early for a parser), and a text
/// without `://` is not shown at all.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://").filter(|(s, _)| is_scheme(s)) else {
        return unparsed(url);
    };
    match rest.rsplit_once('@') {
        Some((user_info, after)) => {
            let user = user_info.split(':').next().unwrap_or_default();
            let user = match user.contains(['/', '?', '#', '@']) {
                true => "",
                false => user,
            };
            let (host, path) = after.split_at(after.find(['/', '?', '#']).unwrap_or(after.len()));
            format!("{scheme}://{user}:***@{host}{}", redact_query(path))
        }
        None => {
            let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
            format!("{scheme}://{authority}{}", redact_query(path))
        }
    }
}

/// What is shown of a text that is not even `scheme://…`: its scheme only, or nothing. Such a text
/// may hold a password in a place no rule can find.
fn unparsed(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, _)) if is_scheme(scheme) => format!("{scheme}://…"),
        _ => "(not shown: not a URL)".to_string(),
    }
}

fn is_scheme(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"+-.".contains(&b))
}

/// `path?query` with the value of every query parameter that names a password hidden.
fn redact_query(path: &str) -> String {
    let Some((path, query)) = path.split_once('?') else {
        return path.to_string();
    };
    let pairs: Vec<String> = query
        .split('&')
        .map(|pair| match pair.split_once('=') {
            Some((key, _)) if key.contains("password") => format!("{key}=***"),
            _ => pair.to_string(),
        })
        .collect();
    format!("{path}?{}", pairs.join("&"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemes_name_their_store() {
        let kind = |url| StoreUrl::parse(url).map(|u| u.kind);
        assert_eq!(kind("memory://"), Ok(StoreKind::Memory));
        assert_eq!(kind("redis://h:1/0"), Ok(StoreKind::Redis));
        assert_eq!(kind("rediss://h:1/0"), Ok(StoreKind::Redis));
        assert_eq!(kind("redis+cluster://h:1,h:2/"), Ok(StoreKind::Redis));
        assert_eq!(kind("rediss+sentinel://h:1/m"), Ok(StoreKind::Redis));
        assert_eq!(
            redact("redis+sentinel://u:pw@h/m?sentinel_username=w&sentinel_password=pw"),
            "redis+sentinel://u:***@h/m?sentinel_username=w&sentinel_password=***"
        );
        let bad = StoreUrl::parse("redis+unix://u:pw@h:1").unwrap_err();
        assert!(!bad.to_string().contains("pw"), "{bad}");
        let unknown = StoreUrl::parse("mongodb://x").unwrap_err();
        assert!(
            unknown.to_string().contains("expected memory://"),
            "{unknown}"
        );
    }

    #[test]
    fn passwords_with_url_delimiters_are_hidden_whole() {
        for (url, shown) in [
            ("redis://:pa/ss@h:6379/0", "redis://:***@h:6379/0"),
            ("redis://:pa?ss@h:6379", "redis://:***@h:6379"),
            ("redis://:pa#ss@h", "redis://:***@h"),
            ("redis://u:p@ss@h/1", "redis://u:***@h/1"),
            ("rediss://a/b:pw@h", "rediss://:***@h"),
        ] {
            assert_eq!(redact(url), shown, "{url}");
        }
        assert_eq!(redact("redis//:secret@h"), "(not shown: not a URL)");
        assert_eq!(redact("redis:/:secret@h"), "(not shown: not a URL)");
        let bad = StoreUrl::parse("redis+unix://:pa/ss@h").unwrap_err();
        assert_eq!(bad.url, "redis+unix://:***@h");
        assert_eq!(redact("x y://secret@h"), "(not shown: not a URL)");
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(redact("redis://:secret@h:6380/1"), "redis://:***@h:6380/1");
        assert_eq!(redact("rediss://u:p@h/0"), "rediss://u:***@h/0");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
        assert_eq!(
            redact("redis+sentinel://u:p@a:1,b:2/m"),
            "redis+sentinel://u:***@a:1,b:2/m"
        );
    }
}
