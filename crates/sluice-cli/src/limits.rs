//! `sluice limits`: sets, reads, lists and removes identities' run-time limits on a running
//! service, through its admin API (`/v1/limits`) and admin token.
//!
//! Prints the service's JSON answer. Exit codes: 0 done (or found), 1 nothing to read or remove
//! for that identity, 2 an error (service unreachable, token refused, input refused: the error's
//! code and message are printed and nothing changed).

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use serde_json::{Value, json};

/// `sluice limits`.
#[derive(Debug, Clone, Args)]
pub struct LimitsArgs {
    /// The service's base URL.
    #[arg(long, env = "SLUICE_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// The admin token (the value of the variable the service's `admin_token_env` names).
    #[arg(long, env = "SLUICE_ADMIN_TOKEN", hide_env_values = true)]
    pub token: String,
    /// What to do.
    #[command(subcommand)]
    pub action: LimitsAction,
}

/// The rule, limit and identity a run-time limit belongs to.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// The rule.
    pub rule: String,
    /// The limit's id, when the rule has several settable limits.
    #[arg(long)]
    pub limit: Option<String>,
    /// The identity, as `name=value` pairs (`customer=42`).
    #[arg(value_parser = crate::cli::parse_attribute, required = true)]
    pub attributes: Vec<(String, String)>,
}

/// `sluice limits <action>`.
#[derive(Debug, Clone, Subcommand)]
pub enum LimitsAction {
    /// Set an identity's run-time limit: `sluice limits set api --rate 5000/1m customer=42`.
    Set {
        /// Where.
        #[command(flatten)]
        target: Target,
        /// Units per window; the window must be the limit's.
        #[arg(long, required_unless_present = "max_leases")]
        rate: Option<String>,
        /// Capacity (token bucket, GCRA, leaky bucket); defaults to the rate's count.
        #[arg(long)]
        burst: Option<u64>,
        /// For a concurrency limit: leases held at once.
        #[arg(long, conflicts_with_all = ["rate", "burst"])]
        max_leases: Option<u64>,
    },
    /// Print an identity's run-time limit; exit 1 when none is set.
    Get {
        /// Whose.
        #[command(flatten)]
        target: Target,
    },
    /// List run-time limits: of every settable limit, or of one rule (and limit).
    List {
        /// The rule.
        rule: Option<String>,
        /// The limit's id (with a rule).
        #[arg(long, requires = "rule")]
        limit: Option<String>,
    },
    /// Remove an identity's run-time limit; exit 1 when none was set.
    Remove {
        /// Whose.
        #[command(flatten)]
        target: Target,
    },
}

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
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()?;
    let endpoint = format!("{}/v1/limits", args.url.trim_end_matches('/'));
    let request = match &args.action {
        LimitsAction::Set {
            target,
            rate,
            burst,
            max_leases,
        } => {
            let mut body = identity(target);
            body["rate"] = json!(rate);
            body["burst"] = json!(burst);
            body["max_leases"] = json!(max_leases);
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
    let response = request
        .bearer_auth(&args.token)
        .send()
        .await
        .with_context(|| format!("cannot reach the service at {}", args.url))?;
    let status = response.status();
    let answer: Value = response
        .json()
        .await
        .with_context(|| format!("the service answered {status} without JSON"))?;
    if !status.is_success() {
        // Every error answer is `{"error": {"code", "message"}}`.
        let error = &answer["error"];
        let message = error["message"].as_str().unwrap_or("no message");
        match error["code"].as_str() {
            Some(code) => bail!("the service answered {status} ({code}): {message}"),
            None => bail!("the service answered {status}: {message}"),
        }
    }
    println!("{}", serde_json::to_string_pretty(&answer)?);
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
