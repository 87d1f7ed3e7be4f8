//! A store from its URL: `memory://` or `redis://` / `rediss://` (and the `redis+…` variants the
//! Redis store understands).
//!
//! The one place the binary decides which store to run, so every command opens stores the same
//! way.

use std::sync::Arc;

use anyhow::{Context, bail};
use sluice::config::{ClockSource, StoreConfig};
use sluice::store::memory::MemoryOptions;
use sluice::store::redis::{RedisOptions, RedisStore};
use sluice::{Clock, MemoryStore, Store, SystemClock};

/// An opened store.
#[derive(Debug, Clone)]
pub struct OpenedStore {
    /// The store decisions go to.
    pub store: Arc<dyn Store>,
    /// The same store when it is in memory, for periodic [`MemoryStore::sweep`].
    pub memory: Option<MemoryStore>,
}

/// Opens the store at `url` with the `store` section's prefix and clock.
pub async fn open(url: &str, settings: &StoreConfig) -> anyhow::Result<OpenedStore> {
    let scheme = url.split_once("://").map(|(scheme, _)| scheme);
    match scheme {
        Some("memory") => {
            let options = MemoryOptions {
                max_keys: settings.max_keys,
            };
            let memory = MemoryStore::with_options(Arc::new(SystemClock), options);
            Ok(OpenedStore {
                store: Arc::new(memory.clone()),
                memory: Some(memory),
            })
        }
        Some(s) if s == "redis" || s == "rediss" || s.starts_with("redis+") => {
            let clock: Option<Arc<dyn Clock>> = match settings.clock {
                ClockSource::Store => None,
                ClockSource::Local => Some(Arc::new(SystemClock)),
            };
            let options = RedisOptions {
                prefix: settings.prefix.clone(),
                clock,
                ..RedisOptions::default()
            };
            let store = RedisStore::connect(url, options)
                .await
                .with_context(|| format!("cannot open the store at {}", redact(url)))?;
            Ok(OpenedStore {
                store: Arc::new(store),
                memory: None,
            })
        }
        _ => bail!(
            "store URL `{}`: expected memory://, redis://host:port/db or rediss://host:port/db",
            redact(url)
        ),
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
    fn passwords_are_hidden() {
        assert_eq!(redact("redis://:secret@h:6380/1"), "redis://:***@h:6380/1");
        assert_eq!(redact("rediss://u:p@h/0"), "rediss://u:***@h/0");
        assert_eq!(redact("redis://h:1/0"), "redis://h:1/0");
    }

    #[tokio::test]
    async fn memory_and_unknown_schemes() {
        let opened = open("memory://", &StoreConfig::default()).await.unwrap();
        assert_eq!(opened.store.name(), "memory");
        assert!(opened.memory.is_some());
        let error = open("mongodb://x", &StoreConfig::default())
            .await
            .unwrap_err();
        assert!(error.to_string().contains("expected memory://"), "{error}");
    }
}
