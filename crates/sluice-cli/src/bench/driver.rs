//! What the load tool's tasks call: the library on a store, or a running `sluice serve` over HTTP.

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use sluice::limiter::DenialCacheOptions;
use sluice::model::{
    Batches, Limit, MAX_COUNT, Override, Penalty, Period, Rate, Rule, RuntimeLimit,
};
use sluice::{Limiter, Options};
use sluice_server::config::StoreConfig;
use sluice_server::store_url;

use super::BenchArgs;

/// What a `--tiers` request carries besides its key: it holds the rule's condition and falls
/// through every override (the costliest case).
const TIER_ATTRIBUTES: [(&str, &str); 4] = [
    ("method", "GET"),
    ("plan", "free"),
    ("tenant", "t1"),
    ("ip", "198.51.100.7"),
];

/// What the tasks call: the library, or the service over HTTP.
#[derive(Clone)]
pub(super) enum Driver {
    /// The library; `tiers`: the requests carry [`TIER_ATTRIBUTES`].
    Library { limiter: Limiter, tiers: bool },
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
        if args.batch.is_some() && args.tiers {
            bail!("--batch and --tiers: a limit with batches takes no override with other numbers");
        }
        let rule = rule(args)?;
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
            .rule("bench", rule);
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
                let set = if limit.period.is_some() {
                    // A quota's count is its `quota`.
                    RuntimeLimit {
                        quota: Some(limit.rate.count()),
                        ..RuntimeLimit::default()
                    }
                } else {
                    RuntimeLimit {
                        burst: limit.burst,
                        ..RuntimeLimit::rate(limit.rate)
                    }
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
        Ok(Driver::Library {
            limiter,
            tiers: args.tiers,
        })
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
            Driver::Library { limiter, tiers } => {
                let decision = if *tiers {
                    let [a, b, c, d] = TIER_ATTRIBUTES;
                    limiter.check("bench", &[a, b, c, d, ("key", key)]).await
                } else {
                    limiter.check("bench", &[("key", key)]).await
                };
                match decision {
                    Ok(d) if !d.degraded => Some(d.allowed),
                    _ => None,
                }
            }
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

/// The benchmark rule: `--limits` limits counting by `key` (quotas with `--period`), with the
/// flags' block, penalty, batches, run-time numbers and tiers.
fn rule(args: &BenchArgs) -> anyhow::Result<Rule> {
    let limits = (0..args.limits)
        .map(|i| {
            let rate = Rate::new(
                args.limit.count(),
                args.limit.window() + Duration::from_secs(i as u64),
            )?;
            let mut limit = match args.period {
                Some(unit) => {
                    let mut quota = Limit::quota(&["key"], rate.count(), Period::new(unit));
                    // Quotas of one period share an id unless named.
                    quota.name = (args.limits > 1).then(|| format!("quota{i}"));
                    quota
                }
                None => Limit::new(&["key"], rate, args.algorithm),
            };
            limit.block = args.block;
            limit.penalty = args.penalty.then_some(Penalty {
                warn_after: 1,
                ban_after: 3,
                ban: Duration::from_secs(3600),
                memory: Duration::from_secs(3600),
            });
            limit.batch = args.batch.map(|max| Batches::new(max, args.batch_hold));
            limit.settable = args.settable;
            if args.tiers {
                limit.overrides = tier_overrides(&limit)?;
            }
            Ok(limit)
        })
        .collect::<anyhow::Result<_>>()?;
    let mut rule = Rule::new(limits);
    if args.tiers {
        rule.when = Some(serde_json::from_value(
            serde_json::json!({"method": ["GET", "POST"]}),
        )?);
    }
    Ok(rule)
}

/// The overrides of a `--tiers` limit (README, "Tiers and conditions"): `plan: pro` gets other
/// numbers, three tenants are unlimited, a /24 is refused; [`TIER_ATTRIBUTES`] matches none.
fn tier_overrides(limit: &Limit) -> anyhow::Result<Vec<Override>> {
    // Twice the count, or half of it where twice is above the maximum: other numbers in the
    // same window or period (an override keeps it, and so the identity's counter).
    let rate = &limit.rate;
    let count = match rate.count().checked_mul(2).filter(|c| *c <= MAX_COUNT) {
        Some(twice) => twice,
        None => (rate.count() / 2).max(1),
    };
    let pro = match limit.period {
        Some(_) => serde_json::json!({"when": {"plan": "pro"}, "quota": count}),
        None => {
            serde_json::json!({"when": {"plan": "pro"}, "rate": Rate::new(count, rate.window())?.to_string()})
        }
    };
    Ok(serde_json::from_value(serde_json::json!([
        pro,
        {"when": {"tenant": ["monitoring", "partner-a", "partner-b"]}, "unlimited": true},
        {"when": {"ip": {"cidr": ["203.0.113.0/24"]}}, "deny": "this range is refused"},
    ]))?)
}

#[cfg(test)]
mod tests {
    use clap::Parser;
    use sluice::MemoryStore;

    use super::*;

    #[derive(Parser)]
    struct Command {
        #[command(flatten)]
        bench: BenchArgs,
    }

    fn args(line: &[&str]) -> BenchArgs {
        Command::parse_from(std::iter::once("bench").chain(line.iter().copied())).bench
    }

    #[test]
    fn the_default_limit_takes_tiers() {
        let limiter = Limiter::builder(MemoryStore::new())
            .rule("bench", rule(&args(&["--tiers"])).unwrap())
            .build();
        assert!(limiter.is_ok(), "{:?}", limiter.err());
    }

    #[tokio::test]
    async fn quotas_count_per_period_and_take_tiers() {
        let rule = rule(&args(&[
            "--period", "month", "--limits", "2", "--tiers", "--limit", "2/1m",
        ]))
        .unwrap();
        assert!(rule.limits.iter().all(|l| l.period.is_some()));
        let limiter = Limiter::builder(MemoryStore::new())
            .rule("bench", rule)
            .build()
            .unwrap();
        let [a, b, c, d] = TIER_ATTRIBUTES;
        let attrs = [a, b, c, d, ("key", "k")];
        let mut allowed = 0;
        for _ in 0..4 {
            allowed += usize::from(limiter.check("bench", &attrs).await.unwrap().allowed);
        }
        assert_eq!(allowed, 2, "two a month");
    }

    #[tokio::test]
    async fn tiered_requests_fall_through_a_condition_and_three_overrides() {
        let rule = rule(&args(&["--tiers", "--limit", "2/1m"])).unwrap();
        assert!(rule.when.is_some());
        assert_eq!(rule.limits[0].overrides.len(), 3);
        let limiter = Limiter::builder(MemoryStore::new())
            .rule("bench", rule)
            .build()
            .unwrap();
        let allowed = async |extra: (&str, &str), key: &str| {
            let [a, b, c, d] = TIER_ATTRIBUTES;
            let mut attrs = vec![a, b, c, d, ("key", key)];
            attrs.retain(|(name, _)| *name != extra.0);
            attrs.push(extra);
            let mut n = 0;
            for _ in 0..6 {
                n += usize::from(limiter.check("bench", &attrs).await.unwrap().allowed);
            }
            n
        };
        // The benchmark's own requests: the limit's numbers.
        assert_eq!(allowed(("plan", "free"), "a").await, 2);
        // What each override does, so that falling through them is a real test of each.
        assert_eq!(allowed(("plan", "pro"), "b").await, 4);
        assert_eq!(allowed(("tenant", "monitoring"), "c").await, 6);
        assert_eq!(allowed(("ip", "203.0.113.9"), "d").await, 0);
        assert_eq!(allowed(("method", "DELETE"), "e").await, 6);
    }
}
