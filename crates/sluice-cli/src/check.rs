//! `sluice check --config FILE RULE name=value…`: one decision against the configured store,
//! printed as JSON; `sluice check --config FILE --release LEASE` (or `--renew LEASE`): one lease
//! released or renewed.
//!
//! With a memory store every run starts from empty counters, so this mostly shows what a rule
//! resolves to (limits, identity, headers); against Redis it consumes from the live counters like
//! any other client. `--release LEASE` and `--renew LEASE` end or extend a lease that a check on
//! a concurrency limit printed (against Redis: leases outlive the command). `--reserve` makes
//! `--cost` an estimate and prints a reservation; `--settle RESERVATION --cost N` settles one.

use sluice::Check;
use std::process::ExitCode;

use anyhow::Context;
use sluice::Limiter;
use sluice::model::headers;

use sluice_server::config::Config;
use sluice_server::store_url;

use crate::cli::CheckArgs;

/// Decides once and prints `{"status", "headers", "decision"}`; or releases or renews a lease
/// and prints `{"released"}` / `{"renewed", "lease_until_ms"}`.
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
    if let Some(lease) = &args.release {
        let released = limiter.release(lease).await?;
        println!("{}", serde_json::json!({ "released": released }));
        return Ok(exit(released));
    }
    if let Some(lease) = &args.renew {
        let until = limiter.renew(lease).await?;
        let out = match until {
            Some(until) => serde_json::json!({ "renewed": true, "lease_until_ms": until }),
            None => serde_json::json!({ "renewed": false }),
        };
        println!("{out}");
        return Ok(exit(until.is_some()));
    }
    if let Some(reservation) = &args.settle {
        let settled = limiter.settle(reservation, args.cost).await?;
        println!("{}", serde_json::json!({ "settled": settled }));
        return Ok(exit(settled));
    }
    let rule = args.rule.as_deref().context("no rule to check")?;
    let check = match args.reserve {
        true => Check::cost(args.cost).reserve(),
        false => Check::cost(args.cost),
    };
    let decision = limiter.check_with(rule, &args.attributes, check).await?;
    let headers: serde_json::Map<String, serde_json::Value> = headers(&decision, config.headers)
        .into_iter()
        .map(|(name, value)| (name.to_string(), value.into()))
        .collect();
    let status = if decision.allowed { 200 } else { 429 };
    let out = serde_json::json!({ "status": status, "headers": headers, "decision": decision });
    println!("{}", serde_json::to_string_pretty(&out)?);
    Ok(exit(decision.allowed))
}

fn exit(success: bool) -> ExitCode {
    if success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
