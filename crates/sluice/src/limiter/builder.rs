//! [`LimiterBuilder`]: a store, rules, a clock and [`Options`] in; a [`Limiter`] out.
//!
//! The only way to make a limiter: [`Limiter::builder`] takes any [`Store`] by value, or an
//! `Arc<dyn DynStore>` already shared with other parts of the program.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use arc_swap::ArcSwap;

use super::breaker::Breaker;
use super::compile::compile;
use super::denial_cache::DenialCache;
use super::in_flight::InFlight;
use super::meters::StoreLatency;
use super::standing_queue::StandingQueue;
use super::{Crossings, Inner, Limiter, Options};
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::model::{FailPolicy, Rule};
use crate::store::invalidation::{InvalidationChannel, InvalidationListener};
use crate::store::memory::MemoryStore;
use crate::store::{DynStore, Store};

/// What [`Limiter::builder`] accepts: any [`Store`], by value or in an `Arc` shared with other
/// parts of the program (also as `Arc<dyn DynStore>`).
pub trait IntoDynStore {
    /// The store, shared.
    fn into_dyn_store(self) -> Arc<dyn DynStore>;
}

impl<S: Store> IntoDynStore for S {
    fn into_dyn_store(self) -> Arc<dyn DynStore> {
        Arc::new(self)
    }
}

impl<S: Store> IntoDynStore for Arc<S> {
    fn into_dyn_store(self) -> Arc<dyn DynStore> {
        self
    }
}

impl IntoDynStore for Arc<dyn DynStore> {
    fn into_dyn_store(self) -> Arc<dyn DynStore> {
        self
    }
}

/// Builds a [`Limiter`].
///
/// ```
/// use std::time::Duration;
/// use sluice::{FailPolicy, Limiter, MemoryStore, Options};
/// let limiter = Limiter::builder(MemoryStore::new())
///     .timeout(Duration::from_millis(20))
///     .options(Options { max_attribute_len: 256, ..Options::default() })
///     .build()
///     .unwrap();
/// // The later `options` did not undo the earlier `timeout`.
/// assert_eq!(limiter.options().timeout, Duration::from_millis(20));
/// assert_eq!(limiter.options().max_attribute_len, 256);
/// assert_eq!(limiter.options().fail, FailPolicy::Open);
/// ```
#[derive(Debug)]
pub struct LimiterBuilder {
    store: Arc<dyn DynStore>,
    rules: Vec<(String, Rule)>,
    clock: Arc<dyn Clock>,
    options: Options,
    timeout: Option<Duration>,
    fail: Option<FailPolicy>,
    channel: Option<Arc<dyn InvalidationChannel>>,
}

impl LimiterBuilder {
    pub(super) fn new(store: Arc<dyn DynStore>) -> LimiterBuilder {
        LimiterBuilder {
            store,
            rules: Vec::new(),
            clock: Arc::new(SystemClock),
            options: Options::default(),
            timeout: None,
            fail: None,
            channel: None,
        }
    }

    /// Adds a rule.
    pub fn rule(mut self, name: impl Into<String>, rule: Rule) -> Self {
        self.rules.push((name.into(), rule));
        self
    }

    /// Adds rules.
    pub fn rules(mut self, rules: impl IntoIterator<Item = (String, Rule)>) -> Self {
        self.rules.extend(rules);
        self
    }

    /// The clock for the breaker and the `local` fail policy (default: system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// The limiter's settings (default: [`Options::default`]). [`timeout`](Self::timeout) and
    /// [`fail`](Self::fail) win over these whatever the order of the calls.
    pub fn options(mut self, options: Options) -> Self {
        self.options = options;
        self
    }

    /// The store call deadline ([`Options::timeout`]).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    /// The fail policy of rules that set none ([`Options::fail`]).
    pub fn fail(mut self, fail: FailPolicy) -> Self {
        self.fail = Some(fail);
        self
    }

    /// The channel that carries invalidations of the denial cache between nodes (for Redis:
    /// [`RedisStore::channel`](crate::store::redis::RedisStore::channel)). Without one, cached
    /// denials live at most [`DenialCacheOptions::max_stale`](super::denial_cache::DenialCacheOptions::max_stale).
    pub fn invalidation_channel(mut self, channel: Arc<dyn InvalidationChannel>) -> Self {
        self.channel = Some(channel);
        self
    }

    /// Validates the rules and builds the limiter. With a channel, the denial cache subscribes
    /// to it in the background (on the current Tokio runtime).
    pub fn build(mut self) -> Result<Limiter, Error> {
        let book = compile(self.rules)?;
        self.options.timeout = self.timeout.unwrap_or(self.options.timeout);
        self.options.fail = self.fail.unwrap_or(self.options.fail);
        let cache = &self.options.denial_cache;
        let denials = (cache.enabled && !self.store.in_process())
            .then(|| Arc::new(DenialCache::new(cache, self.clock.clone())));
        if let (Some(denials), Some(channel)) = (&denials, &self.channel) {
            let listener: Arc<dyn InvalidationListener> = denials.clone();
            channel.subscribe(Arc::downgrade(&listener), cache.max_stale / 4);
        }
        Ok(Limiter {
            inner: Arc::new(Inner {
                rules: ArcSwap::from_pointee(book),
                latency: StoreLatency::new(self.store.name()),
                store: self.store,
                local: MemoryStore::with_clock(self.clock.clone()),
                breaker: Breaker::new(self.clock.clone(), self.options.timeout),
                clock: self.clock,
                in_flight: InFlight::new(self.options.in_flight),
                queue: StandingQueue::new(self.options.queue),
                crossings: Crossings::new(self.options.crossing_queue),
                options: self.options,
                enabled: AtomicBool::new(true),
                denials,
                channel: self.channel,
            }),
        })
    }
}
