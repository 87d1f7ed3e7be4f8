//! `sluice check --config FILE RULE name=value…`: one decision against the configured store,
//! printed as JSON; `sluice check --config FILE --release LEASE` (or `--renew LEASE`): one lease
//! released or renewed.
//!
//! With a memory store every run starts from empty counters, so this mostly shows what a rule
//! resolves to (limits, identity, headers); against Redis it consumes from the live counters like
//! any other client. `--release LEASE` and `--renew LEASE` end or extend a lease that a check on
//! a concurrency limit printed (against Redis: leases outlive the command). `--reserve` makes
//! `--cost` an estimate and prints a reservation; `--settle RESERVATION --cost N` settles one.
//!
//! A decision the store did not make (it did not answer, and the fail policy decided) exits 3
//! whatever it decided: a script checking a rule must not read "allowed" from a store that is
//! down. A rule the file does not have is an error naming the rules it has.

use sluice::Check;
use std::process::ExitCode;

use anyhow::Context;
use sluice::Limiter;
use sluice::model::headers;

use sluice_server::config::{Config, closest};
use sluice_server::store_url;

use crate::cli::CheckArgs;
use crate::stdout::line;

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
        line(serde_json::json!({ "released": released }))?;
        return Ok(exit(released));
    }
    if let Some(lease) = &args.renew {
        let until = limiter.renew(lease).await?;
        let out = match until {
            Some(until) => serde_json::json!({ "renewed": true, "lease_until_ms": until }),
            None => serde_json::json!({ "renewed": false }),
        };
        line(out)?;
        return Ok(exit(until.is_some()));
    }
    if let Some(reservation) = &args.settle {
        let settled = limiter.settle(reservation, args.cost).await?;
        line(serde_json::json!({ "settled": settled }))?;
        return Ok(exit(settled));
    }
    let rule = args.rule.as_deref().context("no rule to check")?;
    if !config.rules.iter().any(|(name, _)| name == rule) {
        anyhow::bail!("{}", unknown_rule(rule, &config));
    }
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
    line(serde_json::to_string_pretty(&out)?)?;
    if decision.degraded {
        return Ok(ExitCode::from(EXIT_DEGRADED));
    }
    Ok(exit(decision.allowed))
}

/// Exit code of a decision the fail policy made because the store did not answer.
pub const EXIT_DEGRADED: u8 = 3;

/// "unknown rule `x`", with the rule likely meant and the rules the file has.
fn unknown_rule(rule: &str, config: &Config) -> String {
    let names: Vec<&str> = config.rules.iter().map(|(n, _)| n.as_str()).collect();
    let mut message = format!("unknown rule `{rule}`");
    if let Some(meant) = closest(rule, names.iter().copied()) {
        message.push_str(&format!(" (did you mean `{meant}`?)"));
    }
    match names.is_empty() {
        true => message.push_str("; the file has no rules"),
        false => message.push_str(&format!(
            "; the file has {}: {}",
            crate::validate::counted(names.len(), "rule", "rules"),
            names.join(", ")
        )),
    }
    message
}

fn exit(success: bool) -> ExitCode {
    if success {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
