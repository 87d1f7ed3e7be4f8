//! `sluice check --config FILE RULE name=value…`: one decision against the configured store,
//! printed as JSON.
//!
//! With a memory store every run starts from empty counters, so this mostly shows what a rule
//! resolves to (limits, identity, headers); against Redis it consumes from the live counters like
//! any other client.

use sluice::Check;
use std::process::ExitCode;

use anyhow::Context;
use sluice::Limiter;
use sluice::config::Config;
use sluice::model::headers;

use crate::cli::CheckArgs;
use crate::store_url;

/// Decides once and prints `{"status", "headers", "decision"}`.
pub async fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    let config = Config::load(&args.config)?;
    let url = args.store.as_deref().unwrap_or(&config.store.url);
    let opened = store_url::open(url, &config.store).await?;
    let limiter = Limiter::builder(opened.store)
        .options(config.limiter_options())
        .rules(config.rules.clone())
        .build()
        .context("building the limiter")?;
    limiter.set_enabled(config.enabled);
    let decision = limiter
        .check_with(&args.rule, &args.attributes, Check::cost(args.cost))
        .await?;
    let headers: serde_json::Map<String, serde_json::Value> = headers(&decision, config.headers)
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.into()))
        .collect();
    let status = if decision.allowed { 200 } else { 429 };
    let out = serde_json::json!({ "status": status, "headers": headers, "decision": decision });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(if decision.allowed {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
