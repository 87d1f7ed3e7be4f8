//! `sluice usage`: what an identity has used of a rule's limits on a running service
//! (`GET /v1/usage`): each limit's used and remaining units, its window or calendar period, and
//! whether it is over. Consumes nothing.
//!
//! Prints the service's JSON answer. Exit codes: 0 every limit has room, 1 one is over (one more
//! unit would be refused), 2 an error (service unreachable, input refused).

use std::collections::BTreeMap;
use std::process::ExitCode;

use crate::cli::UsageArgs;

/// Runs `sluice usage`.
pub async fn run(args: UsageArgs) -> anyhow::Result<ExitCode> {
    let attributes: BTreeMap<&str, &str> = args
        .attributes
        .iter()
        .map(|(n, v)| (n.as_str(), v.as_str()))
        .collect();
    let query = [
        ("rule", args.rule.clone()),
        ("attributes", serde_json::to_string(&attributes)?),
    ];
    let endpoint = format!("{}/v1/usage", args.url.trim_end_matches('/'));
    let request = crate::service::client()?.get(&endpoint).query(&query);
    let answer = crate::service::answer(request, &args.url).await?;
    crate::stdout::line(serde_json::to_string_pretty(&answer)?)?;
    let over = answer["limits"]
        .as_array()
        .is_some_and(|limits| limits.iter().any(|l| l["over"] == true));
    Ok(if over {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}
