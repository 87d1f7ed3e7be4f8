//! Resharding and planned failover of a test [`RedisCluster`], as an operator does them with
//! `redis-cli`: one step at a time, so that a test can run decisions between the steps and see
//! `ASK` and `MOVED` answers followed.

use std::time::Duration;

use crate::RedisCluster;
use crate::member::{cli, wait_until};

impl RedisCluster {
    /// The node id of the node on `port`.
    pub fn node_id(&self, port: u16) -> String {
        cli(port, &["CLUSTER", "MYID"])
    }

    /// The hash slot of `key`.
    pub fn slot_of(&self, key: &str) -> u16 {
        self.cli_any(&["CLUSTER", "KEYSLOT", key])
            .parse()
            .expect("CLUSTER KEYSLOT answers a number")
    }

    /// The port of the primary serving `slot` now.
    pub fn owner_of(&self, slot: u16) -> Option<u16> {
        self.nodes()
            .into_iter()
            .find(|n| n.primary && !n.failed && n.slots.iter().any(|r| r.contains(&slot)))
            .map(|n| n.port)
    }

    /// Starts moving `slot` from `from` to `to`: `IMPORTING` on `to`, then `MIGRATING` on `from`
    /// (the order `redis-cli --cluster reshard` uses). Keys stay on `from` until
    /// [`RedisCluster::migrate_keys`]; clients asking `from` for a key it no longer holds get
    /// `ASK`.
    pub fn begin_migration(&self, slot: u16, from: u16, to: u16) {
        let slot = slot.to_string();
        let (from_id, to_id) = (self.node_id(from), self.node_id(to));
        assert_eq!(
            cli(to, &["CLUSTER", "SETSLOT", &slot, "IMPORTING", &from_id]),
            "OK"
        );
        assert_eq!(
            cli(from, &["CLUSTER", "SETSLOT", &slot, "MIGRATING", &to_id]),
            "OK"
        );
    }

    /// Moves every key of `slot` from `from` to `to` with `MIGRATE`, one key per call; returns how
    /// many moved.
    pub fn migrate_keys(&self, slot: u16, from: u16, to: u16) -> usize {
        let mut moved = 0;
        loop {
            let keys = cli(
                from,
                &["CLUSTER", "GETKEYSINSLOT", &slot.to_string(), "100"],
            );
            let keys: Vec<&str> = keys.lines().filter(|k| !k.is_empty()).collect();
            if keys.is_empty() {
                return moved;
            }
            for key in keys {
                let port = to.to_string();
                let args = ["MIGRATE", "127.0.0.1", &port, key, "0", "5000"];
                let answer = cli(from, &args);
                assert!(
                    answer == "OK" || answer == "NOKEY",
                    "MIGRATE {key}: {answer}"
                );
                moved += usize::from(answer == "OK");
            }
        }
    }

    /// Ends the move of `slot` to `to`: every primary is told that `to` serves it (`to` first, as
    /// `redis-cli --cluster reshard` does), so clients asking elsewhere get `MOVED`.
    pub fn finish_migration(&self, slot: u16, to: u16) {
        let (slot, to_id) = (slot.to_string(), self.node_id(to));
        let mut primaries = self.primaries();
        primaries.sort_by_key(|&p| p != to);
        for port in primaries {
            assert_eq!(
                cli(port, &["CLUSTER", "SETSLOT", &slot, "NODE", &to_id]),
                "OK"
            );
        }
    }

    /// The port of a live replica of the primary on `primary`.
    pub fn replica_of(&self, primary: u16) -> Option<u16> {
        let id = self.node_id(primary);
        let text = self.cli_any(&["CLUSTER", "NODES"]);
        text.lines().find_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let serves = fields.get(3) == Some(&id.as_str());
            let live = fields.get(2).is_some_and(|f| !f.contains("fail"));
            let port = fields.get(1)?.split('@').next()?.rsplit(':').next()?;
            (serves && live).then(|| port.parse().ok()).flatten()
        })
    }

    /// A planned failover: `replica` takes over from its primary with `CLUSTER FAILOVER` (the
    /// primary stops writes, the replica catches up, then they swap), and the cluster is healthy
    /// again with `replica` a primary.
    ///
    /// # Panics
    /// If the swap does not complete within 20 s.
    pub fn planned_failover(&self, replica: u16) {
        assert_eq!(cli(replica, &["CLUSTER", "FAILOVER"]), "OK");
        assert!(
            wait_until(Duration::from_secs(20), || {
                cli(replica, &["ROLE"]).lines().next() == Some("master")
            }),
            "{replica} did not take over"
        );
        assert!(
            self.wait_healthy(Duration::from_secs(20)),
            "the cluster is healthy after the failover"
        );
    }
}
