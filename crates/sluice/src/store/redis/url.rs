//! Redis store URLs: which servers to talk to, how, and with which credentials.
//!
//! | URL | deployment |
//! | --- | --- |
//! | `redis://[user:pass@]host[:port][/db]` | one server (or a replicated primary behind a name) |
//! | `redis+cluster://[user:pass@]host:port[,host:port…]/` | Redis Cluster; the nodes are seeds |
//! | `redis+sentinel://[user:pass@]host:port[,host:port…]/<master name>[/db]` | Sentinel |
//!
//! `rediss…` instead of `redis…` turns TLS on (for sentinels and data nodes alike). The shapes are
//! those of the Python `limits` library. User and password are percent-decoded and used for the
//! data nodes; sentinels are asked without credentials unless the URL gives theirs as
//! `?sentinel_username=…&sentinel_password=…` (percent-encoded; sentinels with `requirepass`
//! need only the password), the one query a URL may carry. A Cluster has no databases: a path
//! other than `/` or `/0` is refused. Ports default to 6379 (26379 for sentinels).
//!
//! [`redact`] hides the passwords of any URL, for every message, log line and listing.

use std::fmt;

/// Which kind of deployment a URL names.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Topology {
    /// One server.
    Single,
    /// A Redis Cluster reached through seed nodes.
    Cluster,
    /// A primary found by asking sentinels for `master`.
    Sentinel {
        /// The master name the sentinels monitor.
        master: String,
    },
}

/// A parsed Redis store URL, one of:
///
/// | URL | deployment |
/// | --- | --- |
/// | `redis://[user:pass@]host[:port][/db]` | one server (or a replicated primary behind a name) |
/// | `redis+cluster://[user:pass@]host:port[,host:port…]/` | Redis Cluster; the nodes are seeds |
/// | `redis+sentinel://[user:pass@]host:port[,host:port…]/<master name>[/db]` | Sentinel |
///
/// `rediss…` instead of `redis…` turns TLS on (for sentinels and data nodes alike). User and
/// password are percent-decoded and used for the data nodes; sentinels are asked without
/// credentials. A Cluster has no databases: a path other than `/` or `/0` is refused. Ports
/// default to 6379 (26379 for sentinels).
#[derive(Clone, PartialEq, Eq)]
pub struct RedisUrl {
    /// The deployment.
    pub topology: Topology,
    /// `rediss…`: TLS to every node.
    pub tls: bool,
    /// `host:port` of the server, the seeds or the sentinels.
    pub nodes: Vec<(String, u16)>,
    /// ACL user name.
    pub username: Option<String>,
    /// Password (never printed: see the `Debug` impl and [`redact`](crate::store::url::redact)).
    pub password: Option<String>,
    /// Database number (always 0 on a Cluster).
    pub db: i64,
    /// ACL user name the sentinels are asked as.
    pub sentinel_username: Option<String>,
    /// Password the sentinels are asked with (never printed).
    pub sentinel_password: Option<String>,
}

impl fmt::Debug for RedisUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisUrl")
            .field("topology", &self.topology)
            .field("tls", &self.tls)
            .field("nodes", &self.nodes)
            .field("username", &self.username)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("db", &self.db)
            .field("sentinel_username", &self.sentinel_username)
            .field(
                "sentinel_password",
                &self.sentinel_password.as_ref().map(|_| "***"),
            )
            .finish()
    }
}

/// Why a URL was refused. The message never contains the password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("store URL `{url}`: {reason}")]
pub struct UrlError {
    /// The URL, redacted.
    pub url: String,
    /// What is wrong.
    pub reason: String,
}

/// The schemes this module understands.
pub use crate::store::url::REDIS_SCHEMES as SCHEMES;
pub use crate::store::url::redact;

impl RedisUrl {
    /// Parses and checks a Redis store URL.
    pub fn parse(url: &str) -> Result<RedisUrl, UrlError> {
        let fail = |reason: &str| UrlError {
            url: redact(url),
            reason: reason.to_string(),
        };
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| fail("expected scheme://…"))?;
        if !SCHEMES.contains(&scheme) {
            return Err(fail(&format!(
                "unknown scheme `{scheme}`; expected one of {}",
                SCHEMES.join(", ")
            )));
        }
        let tls = scheme.starts_with("rediss");
        let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if path.contains('#') {
            return Err(fail("fragments are not supported"));
        }
        let (path, query) = path.split_once('?').unwrap_or((path, ""));
        let (user_info, hosts) = match authority.rsplit_once('@') {
            Some((user_info, hosts)) => (Some(user_info), hosts),
            None => (None, authority),
        };
        let (username, password) = match user_info {
            None => (None, None),
            Some(info) => {
                let (user, pass) = info.split_once(':').unwrap_or((info, ""));
                let decode = |s: &str| percent_decode(s).ok_or_else(|| fail("bad %-escape"));
                let user = decode(user)?;
                let pass = decode(pass)?;
                (
                    (!user.is_empty()).then_some(user),
                    (!pass.is_empty()).then_some(pass),
                )
            }
        };
        let topology_kind = scheme.split_once('+').map_or("", |(_, k)| k);
        let default_port = if topology_kind == "sentinel" {
            26379
        } else {
            6379
        };
        let nodes = hosts
            .split(',')
            .map(|h| host_port(h, default_port).ok_or_else(|| fail(&format!("bad host `{h}`"))))
            .collect::<Result<Vec<_>, _>>()?;
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let number = |s: &str| {
            s.parse::<i64>()
                .ok()
                .filter(|d| *d >= 0)
                .ok_or_else(|| fail(&format!("database `{s}` is not a number")))
        };
        let (topology, db) = match topology_kind {
            "" => {
                if nodes.len() != 1 {
                    return Err(fail(
                        "one host expected; use redis+cluster:// or redis+sentinel:// for several",
                    ));
                }
                match segments.as_slice() {
                    [] => (Topology::Single, 0),
                    [db] => (Topology::Single, number(db)?),
                    _ => return Err(fail("expected /db after the host")),
                }
            }
            "cluster" => match segments.as_slice() {
                [] | ["0"] => (Topology::Cluster, 0),
                _ => {
                    return Err(fail(
                        "a Redis Cluster has no databases; end the URL with `/`",
                    ));
                }
            },
            _ => match segments.as_slice() {
                [master] => (
                    Topology::Sentinel {
                        master: master.to_string(),
                    },
                    0,
                ),
                [master, db] => (
                    Topology::Sentinel {
                        master: master.to_string(),
                    },
                    number(db)?,
                ),
                _ => return Err(fail("expected /<master name>[/db] after the sentinels")),
            },
        };
        let (mut sentinel_username, mut sentinel_password) = (None, None);
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            if !matches!(topology, Topology::Sentinel { .. }) {
                return Err(fail(
                    "only redis+sentinel:// URLs take a query (the sentinels' credentials)",
                ));
            }
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let value = percent_decode(value)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| fail(&format!("`{key}` needs a value (percent-encoded)")))?;
            let slot = match key {
                "sentinel_username" => &mut sentinel_username,
                "sentinel_password" => &mut sentinel_password,
                _ => {
                    return Err(fail(&format!(
                        "unknown query `{key}`; expected sentinel_username or sentinel_password"
                    )));
                }
            };
            if slot.replace(value).is_some() {
                return Err(fail(&format!("`{key}` is given twice")));
            }
        }
        Ok(RedisUrl {
            topology,
            tls,
            nodes,
            username,
            password,
            db,
            sentinel_username,
            sentinel_password,
        })
    }
}

/// `host[:port]`, `[v6]` or `[v6]:port`.
fn host_port(s: &str, default_port: u16) -> Option<(String, u16)> {
    let (host, port) = if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match s.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (s, None),
        }
    };
    let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_' | ':');
    if host.is_empty() || !host.chars().all(valid) {
        return None;
    }
    let port = match port {
        None => default_port,
        Some(p) => p.parse().ok().filter(|p| *p != 0)?,
    };
    Some((host.to_string(), port))
}

fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(list: &[(&str, u16)]) -> Vec<(String, u16)> {
        list.iter().map(|(h, p)| (h.to_string(), *p)).collect()
    }

    #[test]
    fn every_shape_parses() {
        let u = RedisUrl::parse("redis://h:6380/2").unwrap();
        assert_eq!((u.topology, u.tls, u.db), (Topology::Single, false, 2));
        assert_eq!(u.nodes, nodes(&[("h", 6380)]));

        let u = RedisUrl::parse("rediss+cluster://u:p%40ss@a:7000,b:7001,[::1]:7002/").unwrap();
        assert_eq!(u.topology, Topology::Cluster);
        assert!(u.tls);
        assert_eq!(u.nodes, nodes(&[("a", 7000), ("b", 7001), ("::1", 7002)]));
        assert_eq!(u.username.as_deref(), Some("u"));
        assert_eq!(u.password.as_deref(), Some("p@ss"));

        let u = RedisUrl::parse("redis+sentinel://:pw@s1,s2:26380/mymaster/3").unwrap();
        assert_eq!(
            u.topology,
            Topology::Sentinel {
                master: "mymaster".into()
            }
        );
        assert_eq!(u.nodes, nodes(&[("s1", 26379), ("s2", 26380)]));
        assert_eq!((u.username, u.db), (None, 3));
        assert_eq!(u.password.as_deref(), Some("pw"));
    }

    #[test]
    fn mistakes_are_refused_without_showing_the_password() {
        for bad in [
            "redis+cluster://:secret@a:1/3",
            "redis+sentinel://:secret@a:1/",
            "redis+sentinel://:secret@a:1/m/x",
            "redis://:secret@a:1,b:2/",
            "redis://:secret@a:99999/",
            "redis+shard://:secret@a:1/",
            "redis://:secret@a:1/0?x=1",
            "redis+cluster://:secret@/",
        ] {
            let e = RedisUrl::parse(bad).expect_err(bad).to_string();
            assert!(!e.contains("secret"), "{e}");
            assert!(e.contains(":***@"), "{e}");
        }
    }

    #[test]
    fn sentinels_take_credentials_of_their_own_from_the_query() {
        let u = RedisUrl::parse(
            "redis+sentinel://app:pw@s1,s2/m?sentinel_password=s%26cret&sentinel_username=watch",
        )
        .unwrap();
        assert_eq!(u.username.as_deref(), Some("app"));
        assert_eq!(u.sentinel_username.as_deref(), Some("watch"));
        assert_eq!(u.sentinel_password.as_deref(), Some("s&cret"));
        let u = RedisUrl::parse("redis+sentinel://s1/m/2?sentinel_password=x").unwrap();
        assert_eq!((u.db, u.sentinel_username, u.password), (2, None, None));
        for bad in [
            "redis://:secret@a:1/0?sentinel_password=secret",
            "redis+cluster://:secret@a:1/?sentinel_password=secret",
            "redis+sentinel://:secret@a:1/m?password=secret",
            "redis+sentinel://:secret@a:1/m?sentinel_password=",
            "redis+sentinel://:secret@a:1/m?sentinel_password=secret&sentinel_password=secret",
            "redis+sentinel://:secret@a:1/m?sentinel_password=%zz",
        ] {
            let e = RedisUrl::parse(bad).expect_err(bad).to_string();
            assert!(!e.contains("secret"), "{bad}: {e}");
        }
        let debug = format!(
            "{:?}",
            RedisUrl::parse("redis+sentinel://s/m?sentinel_password=hunter2").unwrap()
        );
        assert!(!debug.contains("hunter2"), "{debug}");
    }

    #[test]
    fn passwords_are_hidden() {
        let debug = format!("{:?}", RedisUrl::parse("redis://:hunter2@h/").unwrap());
        assert!(!debug.contains("hunter2"), "{debug}");
    }
}
