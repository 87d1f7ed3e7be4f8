//! `sluice limits`: sets, reads, lists and removes identities' run-time limits on a running
//! service, through its admin API (`/v1/limits`) and admin token.
//!
//! Prints the service's JSON answer. Exit codes: 0 done (or found), 1 nothing to read or remove
//! for that identity, 2 an error (service unreachable, token refused, input refused: the error's
//! code and message are printed and nothing changed).

use std::collections::BTreeMap;
use std::process::ExitCode;

use serde_json::{Value, json};

use crate::cli::{LimitsAction, LimitsArgs, Target};

fn identity(target: &Target) -> Value {
    let attributes: BTreeMap<&str, &str> = target
        .attributes
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    json!({ "rule": target.rule, "limit": target.limit, "attributes": attributes })
}

/// Runs `sluice limits`.
pub async fn run(args: LimitsArgs) -> anyhow::Result<ExitCode> {
    let client = crate::service::client()?;
    let endpoint = format!("{}/v1/limits", args.url.trim_end_matches('/'));
    let request = match &args.action {
        LimitsAction::Set {
            target,
            rate,
            burst,
            max_leases,
            quota,
            anchor,
        } => {
            let mut body = identity(target);
            body["rate"] = json!(rate);
            body["burst"] = json!(burst);
            body["max_leases"] = json!(max_leases);
            body["quota"] = json!(quota);
            body["anchor"] = json!(anchor);
            client.put(&endpoint).json(&body)
        }
        LimitsAction::Get { target } => {
            let attributes = identity(target)["attributes"].to_string();
            let mut query = vec![("rule", target.rule.clone()), ("attributes", attributes)];
            query.extend(target.limit.clone().map(|l| ("limit", l)));
            client.get(&endpoint).query(&query)
        }
        LimitsAction::List { rule, limit } => {
            let mut query = Vec::new();
            query.extend(rule.clone().map(|r| ("rule", r)));
            query.extend(limit.clone().map(|l| ("limit", l)));
            client.get(&endpoint).query(&query)
        }
        LimitsAction::Remove { target } => client.delete(&endpoint).json(&identity(target)),
    };
    let answer = crate::service::answer(request.bearer_auth(&args.token), &args.url).await?;
    crate::stdout::line(serde_json::to_string_pretty(&answer)?)?;
    let negative = match &args.action {
        LimitsAction::Get { .. } => answer["limits"].as_array().is_none_or(Vec::is_empty),
        LimitsAction::Remove { .. } => answer["removed"] != json!(true),
        _ => false,
    };
    Ok(if negative {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
