//! [`KeyNames`]: the Redis keys of one identity of a limit, as the store names them, for people
//! and tools that look into Redis (`redis-cli`, ACL key patterns, memory reports). How the names
//! are made, and what each key holds, is the store's own business (see the module `keys`); this
//! is the one public view of it.

use super::RedisStore;
use super::keys;
use crate::store::LimitKey;

/// The keys one identity of a limit may have under a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct KeyNames {
    /// The algorithm's state; while the identity is blocked, a block marker.
    pub state: String,
    /// Where the state is parked while the identity is blocked.
    pub parked: String,
    /// The block's end, while the identity is blocked (a readable name, for listings).
    pub block: String,
    /// The remembered violations of a limit with a penalty.
    pub violations: String,
}

impl KeyNames {
    /// The keys of `key` under `prefix` ([`RedisOptions::prefix`](super::RedisOptions::prefix)).
    pub fn new(prefix: &str, key: &LimitKey) -> KeyNames {
        let [state, parked, block, violations] = keys::all(prefix, key);
        KeyNames {
            state,
            parked,
            block,
            violations,
        }
    }
}

impl RedisStore {
    /// The keys of `key` in this store.
    pub fn key_names(&self, key: &LimitKey) -> KeyNames {
        KeyNames::new(&self.inner.prefix, key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_names_are_the_stores_own() {
        let key = LimitKey {
            rule: "login".into(),
            limit_id: "ip-1m".into(),
            identity: "ip=1.2.3.4".into(),
        };
        let names = KeyNames::new("p", &key);
        assert_eq!(
            [names.state, names.parked, names.block, names.violations],
            keys::all("p", &key)
        );
    }
}
