//! Opens the store a URL names ([`StoreUrl::parse`] in the library says which), so every
//! command opens stores the same way.

use std::sync::Arc;

use crate::config::{ClockSource, StoreConfig};
use sluice::store::invalidation::InvalidationChannel;
use sluice::store::memory::MemoryOptions;
use sluice::store::redis::{RedisOptions, RedisStore, TlsOptions};
pub use sluice::store::url::redact;
use sluice::store::url::{StoreKind, StoreUrl, StoreUrlError};
use sluice::{Clock, DynStore, MemoryStore, SystemClock};

use crate::error::ServeError;

/// An opened store.
#[derive(Debug, Clone)]
pub struct OpenedStore {
    /// The store decisions go to.
    pub store: Arc<dyn DynStore>,
    /// The same store when it is in memory, for periodic [`MemoryStore::sweep`].
    pub memory: Option<MemoryStore>,
    /// The channel that keeps the denial caches of every node using this store in step.
    pub channel: Option<Arc<dyn InvalidationChannel>>,
}

/// Opens the store at `url` with the `store` section's prefix and clock.
pub async fn open(url: &str, settings: &StoreConfig) -> Result<OpenedStore, ServeError> {
    match StoreUrl::parse(url)?.kind {
        StoreKind::Memory => {
            let options = MemoryOptions {
                max_keys: settings.max_keys,
            };
            let memory = MemoryStore::with_options(Arc::new(SystemClock), options);
            Ok(OpenedStore {
                store: Arc::new(memory.clone()),
                memory: Some(memory),
                channel: None,
            })
        }
        StoreKind::Redis => {
            let clock: Option<Arc<dyn Clock>> = match settings.clock {
                ClockSource::Store => None,
                ClockSource::Local => Some(Arc::new(SystemClock)),
            };
            let options = RedisOptions {
                prefix: settings.prefix.clone(),
                clock,
                tls: TlsOptions {
                    ca_file: settings.tls.ca_file.clone(),
                    client_cert_file: settings.tls.cert_file.clone(),
                    client_key_file: settings.tls.key_file.clone(),
                },
                // A reply may take as long as a decision may wait: a shorter deadline per reply
                // would cut `store.timeout` to it (a planned failover holds writes for seconds).
                response_timeout: settings
                    .timeout
                    .max(RedisOptions::default().response_timeout),
                ..RedisOptions::default()
            };
            let store =
                RedisStore::connect(url, options)
                    .await
                    .map_err(|source| ServeError::Store {
                        url: redact(url),
                        source,
                    })?;
            let channel = store.channel();
            Ok(OpenedStore {
                store: Arc::new(store),
                memory: None,
                channel: Some(Arc::new(channel)),
            })
        }
        // A kind of store added to the library after this service.
        kind => Err(ServeError::StoreUrl(StoreUrlError {
            url: redact(url),
            message: format!("the service cannot open a store of kind {kind:?}"),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
