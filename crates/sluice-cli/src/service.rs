//! Asking a running service (`sluice limits`, `sluice usage`): one request, one JSON answer;
//! an error answer (`{"error": {"code", "message"}}`) becomes an error naming its code.

use anyhow::{Context, bail};
use serde_json::Value;

/// Sends `request` to the service at `url` and returns its JSON answer, or the error it answered.
pub async fn answer(request: reqwest::RequestBuilder, url: &str) -> anyhow::Result<Value> {
    let response = request
        .send()
        .await
        .with_context(|| format!("cannot reach the service at {url}"))?;
    let status = response.status();
    let answer: Value = response
        .json()
        .await
        .with_context(|| format!("the service answered {status} without JSON"))?;
    if !status.is_success() {
        let error = &answer["error"];
        let message = error["message"].as_str().unwrap_or("no message");
        match error["code"].as_str() {
            Some(code) => bail!("the service answered {status} ({code}): {message}"),
            None => bail!("the service answered {status}: {message}"),
        }
    }
    Ok(answer)
}

/// A client for one command's requests.
pub fn client() -> anyhow::Result<reqwest::Client> {
    Ok(reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(10))
        .build()?)
}
