//! A Redis Cluster of 3 primaries and 3 replicas on free loopback ports, for tests.
//!
//! [`RedisCluster::start`] starts six `redis-server --cluster-enabled yes` processes (bus ports
//! chosen free too, short `cluster-node-timeout` so a failover takes about two seconds), joins them
//! with `redis-cli --cluster create … --cluster-replicas 1`, and returns once every slot is served
//! and every replica is in sync. [`RedisCluster::shared`] gives the tests of one binary one
//! cluster (tests use distinct key prefixes); a test that kills or pauses members, moves slots
//! ([`RedisCluster::begin_migration`] and the steps after it) or fails over a primary
//! ([`RedisCluster::planned_failover`]) starts its own.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

use crate::free_port;
use crate::member::{Member, Members, cli, fresh_dir, server_args, wait_until, which};

/// The node timeout of test clusters: a primary is failed over about twice this after it stops.
pub const NODE_TIMEOUT_MS: u64 = 1000;

/// A running Redis Cluster (3 primaries, 3 replicas), stopped on drop.
#[derive(Debug)]
pub struct RedisCluster {
    members: Vec<Member>,
    dir: PathBuf,
}

/// A node's place in the cluster, from `CLUSTER NODES`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// Its port.
    pub port: u16,
    /// Whether it is a primary now.
    pub primary: bool,
    /// Whether the cluster considers it failed.
    pub failed: bool,
    /// The slot ranges it serves (primaries).
    pub slots: Vec<std::ops::RangeInclusive<u16>>,
}

impl RedisCluster {
    /// Starts a cluster and waits until it serves every slot with every replica in sync.
    ///
    /// # Panics
    /// If `redis-server` or `redis-cli` is missing, or the cluster does not form within 30 s.
    pub fn start() -> RedisCluster {
        which("redis-server");
        which("redis-cli");
        let mut last_error = String::new();
        for _ in 0..3 {
            match RedisCluster::try_start() {
                Ok(cluster) => return cluster,
                Err(e) => last_error = e,
            }
        }
        panic!("could not start a Redis Cluster: {last_error}");
    }

    /// One cluster for all the tests of this test binary, started on first use and stopped when
    /// the binary exits. Tests must not kill or pause its members, and use their own key prefix.
    pub fn shared() -> &'static RedisCluster {
        static SHARED: OnceLock<RedisCluster> = OnceLock::new();
        SHARED.get_or_init(RedisCluster::start)
    }

    fn try_start() -> Result<RedisCluster, String> {
        let dir = fresh_dir("cluster");
        let mut members = Vec::new();
        for i in 0..6 {
            let port = free_port();
            let bus = free_port();
            let node_dir = dir.join(format!("node{i}"));
            std::fs::create_dir_all(&node_dir).map_err(|e| e.to_string())?;
            let mut args = server_args(port, &node_dir);
            args.extend(
                [
                    "--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    &bus.to_string(),
                    "--cluster-config-file",
                    "nodes.conf",
                    "--cluster-node-timeout",
                    &NODE_TIMEOUT_MS.to_string(),
                    // A replica always stands in for its primary, however stale its link.
                    "--cluster-replica-validity-factor",
                    "0",
                    "--repl-diskless-sync",
                    "yes",
                    "--repl-diskless-sync-delay",
                    "0",
                ]
                .map(String::from),
            );
            members.push(Member::start("redis-server", args, port)?);
        }
        let cluster = RedisCluster { members, dir };
        let mut create = Command::new("redis-cli");
        create.arg("--cluster").arg("create");
        for m in &cluster.members {
            create.arg(format!("127.0.0.1:{}", m.port()));
        }
        let out = create
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .output()
            .map_err(|e| format!("redis-cli --cluster create: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "redis-cli --cluster create failed: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        if !cluster.wait_healthy(Duration::from_secs(30)) {
            return Err("the cluster did not become healthy within 30 s".into());
        }
        Ok(cluster)
    }

    /// `redis+cluster://127.0.0.1:P1,127.0.0.1:P2,…/` listing every node.
    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("127.0.0.1:{}", m.port()))
            .collect();
        format!("redis+cluster://{}/", hosts.join(","))
    }

    /// Every node's port, in start order.
    pub fn ports(&self) -> Vec<u16> {
        self.members.iter().map(Member::port).collect()
    }

    /// The nodes as a live node sees them (empty if none answers).
    pub fn nodes(&self) -> Vec<Node> {
        for m in self.members.iter().filter(|m| m.ping()) {
            let text = m.cli(&["CLUSTER", "NODES"]);
            let nodes: Vec<Node> = text.lines().filter_map(parse_node).collect();
            if !nodes.is_empty() {
                return nodes;
            }
        }
        Vec::new()
    }

    /// The ports of the primaries that are not failed, in ascending order.
    pub fn primaries(&self) -> Vec<u16> {
        let mut ports: Vec<u16> = self
            .nodes()
            .into_iter()
            .filter(|n| n.primary && !n.failed)
            .map(|n| n.port)
            .collect();
        ports.sort_unstable();
        ports
    }

    /// The port of the primary serving `key` now (from `CLUSTER KEYSLOT` and `CLUSTER NODES`).
    pub fn primary_of(&self, key: &str) -> Option<u16> {
        let live = self.members.iter().find(|m| m.ping())?;
        let slot: u16 = live.cli(&["CLUSTER", "KEYSLOT", key]).parse().ok()?;
        self.nodes()
            .into_iter()
            .find(|n| n.primary && !n.failed && n.slots.iter().any(|r| r.contains(&slot)))
            .map(|n| n.port)
    }

    /// Whether every live node reports `cluster_state:ok`, three primaries hold slots, and every
    /// live replica's link to its primary is up, within `within`.
    pub fn wait_healthy(&self, within: Duration) -> bool {
        wait_until(within, || {
            let live: Vec<&Member> = self.members.iter().filter(|m| m.ping()).collect();
            !live.is_empty()
                && live.iter().all(|m| {
                    let info = m.cli(&["CLUSTER", "INFO"]);
                    let replication = m.cli(&["INFO", "replication"]);
                    info.contains("cluster_state:ok")
                        && info.contains("cluster_size:3")
                        && (replication.contains("role:master")
                            || replication.contains("master_link_status:up"))
                })
                && self.primaries().len() == 3
        })
    }

    /// Runs `redis-cli -p PORT ARGS…` against one node.
    pub fn cli(&self, port: u16, args: &[&str]) -> String {
        cli(port, args)
    }

    /// Runs `redis-cli -c -p <a live node> ARGS…` (following redirections).
    pub fn cli_any(&self, args: &[&str]) -> String {
        let port = self
            .members
            .iter()
            .find(|m| m.ping())
            .map_or(0, Member::port);
        let out = Command::new("redis-cli")
            .args(["-c", "-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }
}

impl Members for RedisCluster {
    fn member(&mut self, port: u16) -> &mut Member {
        self.members
            .iter_mut()
            .find(|m| m.port() == port)
            .unwrap_or_else(|| panic!("no cluster member on port {port}"))
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        self.members.clear();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Parses one line of `CLUSTER NODES`: `id host:port@bus flags primary ping pong epoch state …`.
fn parse_node(line: &str) -> Option<Node> {
    let mut fields = line.split_whitespace();
    let _id = fields.next()?;
    let address = fields.next()?;
    let flags = fields.next()?;
    let port = address
        .split('@')
        .next()?
        .rsplit(':')
        .next()?
        .parse()
        .ok()?;
    let flags: Vec<&str> = flags.split(',').collect();
    // After primary, ping, pong, epoch and link state come the slot ranges (`[…]` entries are
    // slots being migrated).
    let slots = fields
        .skip(5)
        .filter(|f| !f.starts_with('['))
        .filter_map(|f| match f.split_once('-') {
            Some((a, b)) => Some(a.parse().ok()?..=b.parse().ok()?),
            None => f.parse().ok().map(|s| s..=s),
        })
        .collect();
    Some(Node {
        port,
        slots,
        primary: flags.contains(&"master"),
        failed: flags.contains(&"fail") || flags.contains(&"fail?") || flags.contains(&"noaddr"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cluster_nodes_lines_parse() {
        let line = "07c37dfeb2352e0b 127.0.0.1:30004@31004 slave,fail e7d1eecce10fd 0 1 4 \
                    connected";
        assert_eq!(
            parse_node(line),
            Some(Node {
                port: 30004,
                primary: false,
                failed: true,
                slots: vec![],
            })
        );
        let me = "67ed2db8d677e59 127.0.0.1:30002@31002 myself,master - 0 0 2 connected \
                  5461-10922 12000";
        let node = parse_node(me).unwrap();
        assert!(node.primary);
        assert_eq!(node.slots, vec![5461..=10922, 12000..=12000]);
    }
}
