//! Store URLs: which store a URL names, checked in one place.
//!
//! The config file, the command line and [`RedisStore::connect`](crate::store) all ask
//! [`StoreUrl::parse`], so a URL accepted by one is accepted by all, with the same error. Parsing
//! looks at the scheme only; the store itself checks the rest when it connects.
//!
//! | scheme | store |
//! | --- | --- |
//! | `memory://` | [`MemoryStore`](crate::MemoryStore) |
//! | `redis://`, `rediss://` (TLS), `redis+unix://` | the Redis store (one server or primary) |
//!
//! Redis Cluster URLs are refused with a clear error: the Redis store talks to one server.

/// The kind of store a URL names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreKind {
    /// `memory://`: state in this process.
    Memory,
    /// `redis://`, `rediss://` or another `redis+…` scheme the Redis client understands.
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

const EXPECTED: &str = "expected memory://, redis://host:port/db or rediss://host:port/db";

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
            Some(s) if s.contains("cluster") => {
                return Err(error(
                    "Redis Cluster is not supported by the Redis store; use a redis:// or \
                     rediss:// URL",
                ));
            }
            Some(s) if s == "redis" || s == "rediss" || s.starts_with("redis+") => StoreKind::Redis,
            _ => return Err(error(EXPECTED)),
        };
        Ok(StoreUrl { kind, url })
    }
}

/// The URL without its password, for messages and logs.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    match authority.rsplit_once('@') {
        Some((user_info, host)) => {
            let user = user_info.split(':').next().unwrap_or_default();
            format!("{scheme}://{user}:***@{host}{path}")
        }
        None => url.to_string(),
    }
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
        assert_eq!(kind("redis+unix:///tmp/r.sock"), Ok(StoreKind::Redis));
        let cluster = StoreUrl::parse("redis+cluster://u:pw@h:1").unwrap_err();
        assert!(cluster.message.contains("Cluster"), "{cluster}");
        assert!(!cluster.to_string().contains("pw"), "{cluster}");
        let unknown = StoreUrl::parse("mongodb://x").unwrap_err();
        assert!(
            unknown.to_string().contains("expected memory://"),
            "{unknown}"
        );
    }

    #[test]
    fn passwords_are_hidden() {
        assert_eq!(redact("redis://:secret@h:6380/1"), "redis://:***@h:6380/1");
        assert_eq!(redact("rediss://u:p@h/0"), "rediss://u:***@h/0");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
    }
}
