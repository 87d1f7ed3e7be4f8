//! A Sentinel set-up for tests: one primary, one replica and three `redis-sentinel` processes on
//! free loopback ports, with a quorum of two and a short `down-after-milliseconds`, so that a
//! stopped primary is replaced within a few seconds.
//!
//! [`RedisSentinel::start`] returns once the replica is in sync and every sentinel knows the
//! replica and the two other sentinels (a failover needs both). Members are addressed by port;
//! [`RedisSentinel::primary`] asks a sentinel which server is the primary now.
//! [`RedisSentinel::start_with_auth`] starts the same set-up with credentials everywhere: the
//! data servers take only an ACL user (their default user is off), the sentinels a password of
//! their own, and its [`RedisSentinel::url`] carries both.

use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::Duration;

use crate::free_port;
use crate::member::{
    Credentials, Member, Members, cli_as, fresh_dir, server_args, wait_until, which,
};

/// The master name the sentinels monitor.
pub const MASTER_NAME: &str = "sluice-primary";

/// How long the sentinels wait before they consider a silent primary down.
pub const DOWN_AFTER_MS: u64 = 1000;

/// The credentials of an authenticated set-up (letters and digits only, so that they go into a
/// URL as they are).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SentinelAuth {
    /// The ACL user the data servers take (and replicate as).
    pub user: String,
    /// Its password.
    pub password: String,
    /// The sentinels' `requirepass`.
    pub sentinel_password: String,
}

/// A running Sentinel set-up, stopped on drop.
#[derive(Debug)]
pub struct RedisSentinel {
    servers: Vec<Member>,
    sentinels: Vec<Member>,
    dir: PathBuf,
    auth: Option<SentinelAuth>,
}

impl RedisSentinel {
    /// Starts the primary, the replica and three sentinels, and waits until they see each other.
    ///
    /// # Panics
    /// If `redis-server`, `redis-sentinel` or `redis-cli` is missing, or the set-up does not
    /// settle within 30 s.
    pub fn start() -> RedisSentinel {
        RedisSentinel::start_as(None)
    }

    /// Starts the set-up with credentials on every member (see the module doc).
    ///
    /// # Panics
    /// As [`RedisSentinel::start`].
    pub fn start_with_auth(auth: SentinelAuth) -> RedisSentinel {
        RedisSentinel::start_as(Some(auth))
    }

    fn start_as(auth: Option<SentinelAuth>) -> RedisSentinel {
        which("redis-server");
        which("redis-sentinel");
        which("redis-cli");
        let mut last_error = String::new();
        for _ in 0..3 {
            match RedisSentinel::try_start(auth.as_ref()) {
                Ok(set) => return set,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start the Sentinel set-up: {last_error}");
    }

    /// One set-up for all the tests of this binary (tests must not kill or pause its members).
    pub fn shared() -> &'static RedisSentinel {
        static SHARED: OnceLock<RedisSentinel> = OnceLock::new();
        SHARED.get_or_init(RedisSentinel::start)
    }

    fn try_start(auth: Option<&SentinelAuth>) -> Result<RedisSentinel, String> {
        let server_credentials = auth.map(|a| Credentials {
            user: Some(a.user.clone()),
            password: a.password.clone(),
        });
        let dir = fresh_dir("sentinel");
        let primary_port = free_port();
        let mut servers = Vec::new();
        for (i, port) in [primary_port, free_port()].into_iter().enumerate() {
            let server_dir = dir.join(format!("server{i}"));
            std::fs::create_dir_all(&server_dir).map_err(|e| e.to_string())?;
            let mut args = server_args(port, &server_dir);
            args.extend(["--repl-diskless-sync-delay", "0"].map(String::from));
            if let Some(a) = auth {
                let password = format!(">{}", a.password);
                let acl = [
                    "--user", "default", "off", "--user", &a.user, "on", &password,
                ];
                args.extend(
                    acl.into_iter()
                        .chain(["~*", "&*", "+@all"])
                        .map(String::from),
                );
                // Either server may be the replica after a failover.
                args.extend(
                    ["--masteruser", &a.user, "--masterauth", &a.password].map(String::from),
                );
            }
            if i == 1 {
                args.extend(
                    ["--replicaof", "127.0.0.1", &primary_port.to_string()].map(String::from),
                );
            }
            let mut server = Member::start("redis-server", args, port)?;
            server.set_credentials(server_credentials.clone());
            servers.push(server);
        }
        if !wait_until(Duration::from_secs(10), || {
            servers[1]
                .cli(&["INFO", "replication"])
                .contains("master_link_status:up")
        }) {
            return Err("the replica did not sync within 10 s".into());
        }
        let mut sentinels = Vec::new();
        for i in 0..3 {
            let port = free_port();
            let sentinel_dir = dir.join(format!("sentinel{i}"));
            std::fs::create_dir_all(&sentinel_dir).map_err(|e| e.to_string())?;
            let conf = sentinel_dir.join("sentinel.conf");
            let mut text = format!(
                "port {port}\nbind 127.0.0.1\nprotected-mode no\ndir {dir}\n\
                 sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2\n\
                 sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}\n\
                 sentinel failover-timeout {MASTER_NAME} 4000\n\
                 sentinel parallel-syncs {MASTER_NAME} 1\n",
                dir = sentinel_dir.display()
            );
            if let Some(a) = auth {
                text.push_str(&format!(
                    "requirepass {sp}\nsentinel sentinel-pass {sp}\n\
                     sentinel auth-user {MASTER_NAME} {user}\n\
                     sentinel auth-pass {MASTER_NAME} {password}\n",
                    sp = a.sentinel_password,
                    user = a.user,
                    password = a.password,
                ));
            }
            std::fs::write(&conf, text).map_err(|e| e.to_string())?;
            let mut sentinel =
                Member::start("redis-sentinel", vec![conf.display().to_string()], port)?;
            sentinel.set_credentials(auth.map(|a| Credentials {
                user: None,
                password: a.sentinel_password.clone(),
            }));
            sentinels.push(sentinel);
        }
        let set = RedisSentinel {
            servers,
            sentinels,
            dir,
            auth: auth.cloned(),
        };
        if !set.wait_settled(Duration::from_secs(30)) {
            return Err("the sentinels did not discover each other within 30 s".into());
        }
        Ok(set)
    }

    /// `redis+sentinel://127.0.0.1:S1,127.0.0.1:S2,127.0.0.1:S3/sluice-primary`.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .sentinels
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.port()))
            .collect();
        match &self.auth {
            None => format!("redis+sentinel://{}/{MASTER_NAME}", hosts.join(",")),
            Some(a) => format!(
                "redis+sentinel://{}:{}@{}/{MASTER_NAME}?sentinel_password={}",
                a.user,
                a.password,
                hosts.join(","),
                a.sentinel_password
            ),
        }
    }

    /// Who the data servers take, in an authenticated set-up.
    pub fn server_credentials(&self) -> Option<Credentials> {
        self.auth.as_ref().map(|a| Credentials {
            user: Some(a.user.clone()),
            password: a.password.clone(),
        })
    }

    /// Runs `redis-cli` against the data server on `port`, with its credentials.
    pub fn server_cli(&self, port: u16, args: &[&str]) -> String {
        cli_as(port, self.server_credentials().as_ref(), args)
    }

    /// The sentinels' ports.
    pub fn sentinel_ports(&self) -> Vec<u16> {
        self.sentinels.iter().map(Member::port).collect()
    }

    /// The data servers' ports (the primary first, as started).
    pub fn server_ports(&self) -> Vec<u16> {
        self.servers.iter().map(Member::port).collect()
    }

    /// The primary's port as a live sentinel reports it now.
    pub fn primary(&self) -> Option<u16> {
        self.sentinels.iter().filter(|s| s.ping()).find_map(|s| {
            let reply = s.cli(&["SENTINEL", "get-master-addr-by-name", MASTER_NAME]);
            reply.lines().nth(1)?.trim().parse().ok()
        })
    }

    /// The data server that is not the primary.
    pub fn replica(&self) -> Option<u16> {
        let primary = self.primary()?;
        self.server_ports().into_iter().find(|&p| p != primary)
    }

    /// Waits until every live sentinel knows the other two and a replica in sync, and agrees on a
    /// primary that answers as one.
    pub fn wait_settled(&self, within: Duration) -> bool {
        wait_until(within, || {
            let Some(primary) = self.primary() else {
                return false;
            };
            self.server_cli(primary, &["ROLE"]).starts_with("master")
                && self.sentinels.iter().filter(|s| s.ping()).all(|s| {
                    let master = s.cli(&["SENTINEL", "master", MASTER_NAME]);
                    field(&master, "num-other-sentinels") == Some("2")
                        && field(&master, "num-slaves") == Some("1")
                        && field(&master, "port") == Some(&primary.to_string())
                })
                && self
                    .server_ports()
                    .into_iter()
                    .filter(|&p| p != primary)
                    .all(|p| {
                        self.server_cli(p, &["INFO", "replication"])
                            .contains("master_link_status:up")
                    })
        })
    }
}

impl Members for RedisSentinel {
    fn member(&mut self, port: u16) -> &mut Member {
        self.servers
            .iter_mut()
            .chain(self.sentinels.iter_mut())
            .find(|m| m.port() == port)
            .unwrap_or_else(|| panic!("no Sentinel set-up member on port {port}"))
    }
}

impl Drop for RedisSentinel {
    fn drop(&mut self) {
        self.sentinels.clear();
        self.servers.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The value after `name` in a flat `redis-cli` field/value listing.
fn field<'a>(listing: &'a str, name: &str) -> Option<&'a str> {
    let mut lines = listing.lines();
    while let Some(line) = lines.next() {
        if line.trim() == name {
            return lines.next().map(str::trim);
        }
    }
    None
}
