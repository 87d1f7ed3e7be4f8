//! What the load tool's tasks call: the library on a store, or a running `sluice serve` over HTTP.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use sluice::limiter::DenialCacheOptions;
use sluice::model::{Batches, Limit, Penalty, Rule, RuntimeLimit};
use sluice::{Limiter, Options};
use sluice_server::config::StoreConfig;
use sluice_server::store_url;

use super::BenchArgs;

/// What the tasks call: the library, or the service over HTTP.
#[derive(Clone)]
pub(super) enum Driver {
    Library(Limiter),
    Http {
        client: reqwest::Client,
        url: Arc<str>,
        rule: Arc<str>,
        attribute: Arc<str>,
    },
}

impl Driver {
    pub(super) async fn library(args: &BenchArgs, keys: &[String]) -> anyhow::Result<Driver> {
        let opened = store_url::open(&args.store, &StoreConfig::default()).await?;
        if args.limits == 0 {
            bail!("--limits must be at least 1");
        }
        if args.batch.is_some() && args.limits > 1 {
            bail!("--batch takes one limit (--limits 1)");
        }
        let limits = (0..args.limits)
            .map(|i| {
                let mut rate = args.limit;
                rate.window += Duration::from_secs(i as u64);
                let mut limit = Limit::new(&["key"], rate, args.algorithm);
                limit.block = args.block;
                limit.penalty = args.penalty.then_some(Penalty {
                    warn_after: 1,
                    ban_after: 3,
                    ban: Duration::from_secs(3600),
                    memory: Duration::from_secs(3600),
                });
                limit.batch = args.batch.map(|max| Batches::new(max, args.batch_hold));
                limit.settable = args.settable;
                limit
            })
            .collect();
        let mut builder = Limiter::builder(opened.store)
            .options(Options {
                timeout: args.timeout,
                denial_cache: DenialCacheOptions {
                    enabled: !args.no_denial_cache,
                    ..DenialCacheOptions::default()
                },
                max_runtime_limits: keys.len().max(sluice::limiter::DEFAULT_MAX_RUNTIME_LIMITS),
                in_flight: args.in_flight,
                ..Options::default()
            })
            .rule("bench", Rule::new(limits));
        if let Some(channel) = opened.channel {
            builder = builder.invalidation_channel(channel);
        }
        let limiter = builder.build()?;
        if args.settable {
            for (i, limit) in limiter.rules()["bench"]
                .definition
                .limits
                .iter()
                .enumerate()
            {
                let set = RuntimeLimit {
                    burst: limit.burst,
                    ..RuntimeLimit::rate(limit.rate)
                };
                let id = limit.id();
                for key in keys {
                    limiter
                        .set_runtime_limit("bench", Some(&id), &[("key", key.as_str())], &set)
                        .await
                        .with_context(|| format!("setting limit {i}'s numbers for {key}"))?;
                }
            }
        }
        Ok(Driver::Library(limiter))
    }

    pub(super) fn http(base: &str, rule: &str, attribute: &str) -> anyhow::Result<Driver> {
        let client = reqwest::Client::builder()
            .pool_max_idle_per_host(1024)
            .build()
            .context("building the HTTP client")?;
        Ok(Driver::Http {
            client,
            url: format!("{}/v1/check", base.trim_end_matches('/')).into(),
            rule: rule.into(),
            attribute: attribute.into(),
        })
    }

    /// One decision: `Some(allowed)`, or `None` when it failed or was degraded.
    pub(super) async fn check(&self, key: &str) -> Option<bool> {
        match self {
            Driver::Library(limiter) => match limiter.check("bench", &[("key", key)]).await {
                Ok(d) if !d.degraded => Some(d.allowed),
                _ => None,
            },
            Driver::Http {
                client,
                url,
                rule,
                attribute,
            } => {
                let body = serde_json::json!({"rule": &**rule, "attributes": {&**attribute: key}});
                let response = client.post(&**url).json(&body).send().await.ok()?;
                match response.status().as_u16() {
                    200 => Some(true),
                    429 => Some(false),
                    _ => None,
                }
            }
        }
    }
}
