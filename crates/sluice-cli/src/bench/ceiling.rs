//! `sluice bench --ceiling`: what Redis itself can do with Sluice's decision script, as the
//! yardstick for the library's rate (`redis-benchmark` sending the very `EVALSHA` the store sends
//! for one decision alone). Under load the store's concurrent decisions share calls, so the
//! library can pass it.

use anyhow::{Context, bail};
use sluice::Limiter;
use sluice::store::redis::{RedisOptions, RedisStore};

use super::BenchArgs;

/// Redis' own rate for Sluice's decision script: `redis-benchmark` sends the exact `EVALSHA` the
/// store sends (same script, limit and arguments), with `concurrency` connections over `keys`
/// random keys, as many requests as the library run made.
pub(super) async fn ceiling(
    args: &BenchArgs,
    limiter: &Limiter,
    requests: u64,
) -> anyhow::Result<f64> {
    let scheme = args.store.split_once("://").map_or("", |(s, _)| s);
    if scheme != "redis" {
        bail!("--ceiling needs a redis:// store (redis-benchmark cannot reach {scheme}://)");
    }
    let store = RedisStore::connect(&args.store, RedisOptions::default()).await?;
    store.load_scripts().await?;
    // redis-benchmark replaces `__rand_int__` with a random number below `-r`.
    let command = store.command_for(limiter, "bench", &[("key", "k__rand_int__")])?;
    let output = tokio::process::Command::new("redis-benchmark")
        .args(["-u", &args.store, "--csv"])
        .args(["-c", &args.concurrency.to_string()])
        .args(["-n", &requests.max(10_000).to_string()])
        .args(["-r", &args.keys.to_string()])
        .args(&command)
        .output()
        .await
        .context("running redis-benchmark (package redis-tools)")?;
    let csv = String::from_utf8_lossy(&output.stdout);
    // The last line is `"<command>","<requests per second>",...`.
    csv.lines()
        .last()
        .and_then(|line| line.split("\",\"").nth(1))
        .and_then(|rps| rps.trim_matches('"').parse::<f64>().ok())
        .with_context(|| {
            format!(
                "unexpected redis-benchmark output: {csv}{}",
                String::from_utf8_lossy(&output.stderr)
            )
        })
}
